#!/usr/bin/env bash
# The back-end restart guest test, host side (ctest guest.restart, label guest10): a real Linux
# guest (Debian 6.1 under QEMU 10 TCG, the private one of scripts/qemu10.sh) runs fio with crc32c
# verification on a `vhost-user-scsi-pci` disk (restart-test.sh) while the `vioscope target`
# serving it is killed with SIGKILL and started again on the same socket and images, again and
# again. QEMU's chardev reconnects (`reconnect-ms`); the guest must see nothing: every fio round
# passes, the final verify passes, and its kernel log has no SCSI error, abort, reset or timeout.
#
# usage: tests/guest/restart.sh [BUILD_DIR]
#   BUILD_DIR   build tree holding tools/vioscope (default: build); $VIOSCOPE_BIN overrides
#
# One target at a time serves `--lun 0:file=IMG --lun 1:file=CTL` (64 MiB, 1 MiB) on SOCK. Once
# the guest says `VIOSCOPE-RST: READY` (LUN 0 filled), for each of VIOSCOPE_RESTART_COUNT
# restarts: wait until a fio round has passed since the last reconnection (the guest's I/O runs),
# let the next round get going (VIOSCOPE_RESTART_DELAY s), SIGKILL the target, start a new one on
# the same socket and images, and wait (deadline) for its log's "a frontend connected": QEMU
# reconnected. Printed per restart: "RESTART n: kill to reconnect X ms ..." and what QEMU said on
# its stderr meanwhile. After the last one, the done signal (`VIOSCOPE-RESTART-DONE` written at
# the start of CTL), the guest's final verify and its kernel-log check, `VIOSCOPE-GUEST: PASS`.
#
# LUN 0's requests are answered HOLD_US (5 ms) after their data moved (the test-only `delay=`):
# a file LUN in the page cache answers in microseconds, so a kill would almost never find a
# request in flight; held, fio's 40 are in the target at each kill, and the restarted target must
# give them out again (each target says how many; none over all restarts fails the test).
#
# Without VHOST_USER_PROTOCOL_F_INFLIGHT_SHMFD in the target, QEMU (which then sends no
# GET_INFLIGHT_FD) restarts each ring at its used index ("vhost VQ n ring restore failed" on its
# stderr, as it cannot ask the dead back-end): requests completed out of order before the kill
# are done again and others lost, and this test fails. A lost request does not show in the
# guest's kernel log (virtio_scsi's eh_timed_out resets the timer: no abort, no reset): the
# guest's I/O just stops, which the round deadline (ROUND_S) catches; the heartbeat lines
# (`VIOSCOPE-RST: ALIVE ..., sda in flight R W`) show what is stuck.
#
# Exit status: 0 passed, 1 failed, 77 skipped (no vioscope binary, no QEMU 10 to be had).
#
# Environment:
#   VIOSCOPE_BIN, VIOSCOPE_GUEST_CACHE, VIOSCOPE_GUEST_VERBOSE, VIOSCOPE_GUEST_KEEP,
#   VIOSCOPE_GUEST_APPEND       as for run.sh
#   VIOSCOPE_QEMU10             a QEMU 10 binary or wrapper to use (default: scripts/qemu10.sh's,
#                               made on first use; VIOSCOPE_QEMU10_DIR is passed on to it)
#   VIOSCOPE_GUEST_TIMEOUT      seconds QEMU may live (default 720)
#   VIOSCOPE_RESTART_COUNT      restarts (default 10)
#   VIOSCOPE_RESTART_DELAY      seconds between a round starting and the kill (default 1)
#   VIOSCOPE_RESTART_RECONNECT_MS  the chardev's reconnect-ms (default 200)
#   VIOSCOPE_RESTART_TRACE      VIOSCOPE_TRACE for the targets (e.g. verbose:vhost: every
#                               vhost-user message QEMU sends, in the targets' logs)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
t_start=$(date +%s.%N)

log() { printf 'guest-restart: %s\n' "$*"; }
die() {
	printf 'guest-restart: error: %s\n' "$*" >&2
	exit 1
}
skip() {
	echo "guest-restart: SKIP: $*"
	exit 77
}
usage() {
	sed -n '9,10p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

build_dir=
for arg in "$@"; do
	case "$arg" in
	-h | --help | -*) usage ;;
	*)
		[[ -z $build_dir ]] || usage
		build_dir=$arg
		;;
	esac
done
build_dir=${build_dir:-$repo/build}

LUN_MIB=64                       # keep in sync with restart-test.sh
CTL_MIB=1                        # the signal disk; keep in sync with restart-test.sh
DONE_MAGIC=VIOSCOPE-RESTART-DONE # keep in sync with restart-test.sh
RAM_KIB=524288
QUEUES=2
HOLD_US=5000  # each LUN 0 request held this long after its data moved (see above)
SMP=2
timeout_s=${VIOSCOPE_GUEST_TIMEOUT:-720}
n_rst=${VIOSCOPE_RESTART_COUNT:-10}
delay_s=${VIOSCOPE_RESTART_DELAY:-1}
reconnect_ms=${VIOSCOPE_RESTART_RECONNECT_MS:-200}
for v in n_rst timeout_s reconnect_ms; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, not '${!v}'"
done
[[ $delay_s =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "VIOSCOPE_RESTART_DELAY must be seconds, not '$delay_s'"
# Deadlines (seconds), each wait its own.
BOOT_S=240     # QEMU started to the guest's READY (boot, disks, the fill of 64 MiB)
ROUND_S=120    # a fio round to pass: after READY, after each reconnection
RECONNECT_S=60 # a kill to the new target's "a frontend connected"
FINAL_S=180    # the done signal to the guest's PASS and QEMU's exit
START_S=30     # a target to its socket

vioscope_bin=${VIOSCOPE_BIN:-$build_dir/tools/vioscope}
[[ -x $vioscope_bin ]] || skip "no vioscope binary at '$vioscope_bin' (build it, or set VIOSCOPE_BIN)"
vioscope_bin=$(cd "$(dirname "$vioscope_bin")" && pwd)/$(basename "$vioscope_bin")

# --- QEMU 10 --------------------------------------------------------------------------------------
if [[ -n ${VIOSCOPE_QEMU10:-} ]]; then
	qemu=$VIOSCOPE_QEMU10
else
	qrc=0
	qemu=$("$repo/scripts/qemu10.sh") || qrc=$?
	((qrc == 0)) || skip "no QEMU 10: scripts/qemu10.sh exited with $qrc (its messages above)"
fi
qver=$("$qemu" -version 2>&1 | head -n 1) || skip "QEMU 10 at '$qemu' does not run: $qver"
if ! [[ $qver =~ version\ ([0-9]+)\. ]] || ((BASH_REMATCH[1] < 9)); then
	skip "'$qemu' is not QEMU 9 or later ($qver): no vhost-user-scsi reconnection"
fi
# The reconnect option's name: reconnect-ms since QEMU 9.2 (reconnect, in seconds, before).
# (Its help in a variable first: grep -q closing the pipe early fails the pipeline under pipefail.)
chardev_help=$("$qemu" -chardev socket,help 2>&1) || true
if [[ $chardev_help == *reconnect-ms=* ]]; then
	reconnect_opt="reconnect-ms=$reconnect_ms"
else
	reconnect_opt="reconnect=$(((reconnect_ms + 999) / 1000))"
fi

# --- cleanup on every exit path -------------------------------------------------------------------
work=
qemu_pid=
target_pid=
tail_pid=
# shellcheck disable=SC2317 # called by the traps
cleanup() {
	local rc=$? pid
	trap - EXIT INT TERM
	local pids=("$qemu_pid" "$target_pid")
	[[ -z $tail_pid ]] || kill -TERM "$tail_pid" 2>/dev/null || true
	for pid in "${pids[@]}"; do
		[[ -z $pid ]] || kill -TERM "$pid" 2>/dev/null || true
	done
	# QEMU's `timeout` wrapper SIGKILLs it 10 s after passing SIGTERM on; then the wrapper.
	for pid in "${pids[@]}"; do
		[[ -n $pid ]] || continue
		for _ in $(seq 150); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null || true
	done
	if [[ -n $work && -d $work ]]; then
		if [[ -n ${VIOSCOPE_GUEST_KEEP:-} ]]; then
			echo "guest-restart: kept $work"
		else
			rm -rf "$work"
		fi
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- kernel and initramfs -------------------------------------------------------------------------
log "preparing the guest (kernel, initramfs)"
env_file=$("$here/prepare.sh") || die "prepare.sh failed"
# shellcheck source=/dev/null
source "$env_file"
[[ -f $GUEST_KERNEL && -f $GUEST_INITRD ]] || die "prepare.sh gave no kernel/initramfs"

work=$(mktemp -d "${TMPDIR:-/tmp}/vioscope-restart.XXXXXX")
img=$work/lun0.img
ctl=$work/ctl.img
sock=$work/vhost.sock
truncate -s "${LUN_MIB}M" "$img"
truncate -s "${CTL_MIB}M" "$ctl"

# The guest's test script, as a second cpio archive before the cached one (as migrate.sh does).
mkdir -p "$work/extra"
cp "$here/restart-test.sh" "$work/extra/restart-test.sh"
(cd "$work/extra" && echo restart-test.sh | cpio -o -H newc --quiet -R 0:0) >"$work/extra.cpio"
cat "$work/extra.cpio" "$GUEST_INITRD" >"$work/initrd"

# --- the target -------------------------------------------------------------------------------------
# Every target's trace file (its flight record) in the work dir, kept after its exit: a killed
# one's would otherwise stay in /dev/shm (70 MiB each). `vioscope trace dump FILE -o OUT` and
# `vioscope trace decode OUT` read them (VIOSCOPE_GUEST_KEEP=1 keeps them).
mkdir -p "$work/trace"
target_env=("VIOSCOPE_TRACE_DIR=$work/trace" VIOSCOPE_TRACE_KEEP=1)
[[ -z ${VIOSCOPE_RESTART_TRACE:-} ]] || target_env+=("VIOSCOPE_TRACE=$VIOSCOPE_RESTART_TRACE")
n_targets=0
# start_target: target number n_targets+1 on $sock, its log in target-N.log; sets target_pid.
start_target() {
	n_targets=$((n_targets + 1))
	local tlog=$work/target-$n_targets.log
	env "${target_env[@]}" "$vioscope_bin" target --socket "$sock" --testing \
		--lun "0:file=$img,delay=$HOLD_US" --lun "1:file=$ctl" --queues "$QUEUES" >"$tlog" 2>&1 &
	target_pid=$!
	local give_up=$((SECONDS + START_S))
	# Listening: its log says so (the socket of the killed one is still there).
	until grep -q 'listen' "$tlog"; do
		if ! kill -0 "$target_pid" 2>/dev/null; then
			tail -n 40 "$tlog" >&2 || true
			die "target $n_targets exited before listening (log above)"
		fi
		((SECONDS < give_up)) || die "target $n_targets did not listen on $sock within ${START_S}s"
		sleep 0.05
	done
}
log "target: $vioscope_bin target --socket $sock --lun 0:file=$img --lun 1:file=$ctl" \
	"--queues $QUEUES${VIOSCOPE_RESTART_TRACE:+ (VIOSCOPE_TRACE=$VIOSCOPE_RESTART_TRACE)}"
start_target

# --- QEMU -----------------------------------------------------------------------------------------
append="console=ttyS0 quiet panic=-1 vioscope.vendor=VIOSCOPE vioscope.disks=2"
append+=" vioscope.test=/restart-test.sh vioscope.timeout=$((timeout_s - 30))"
append+=" vioscope.rst_s=$((timeout_s - 90))${VIOSCOPE_GUEST_APPEND:+ $VIOSCOPE_GUEST_APPEND}"
console_log=$work/console.log
qemu_out=$work/qemu.out
: >"$console_log"
log "booting the guest on $qver ($qemu), chardev $reconnect_opt, kernel $GUEST_KVER"
timeout --kill-after=10 "$timeout_s" "$qemu" -accel tcg -m "${RAM_KIB}K" -smp "$SMP" \
	-nographic -no-reboot -monitor none -nic none -vga none \
	-serial "file:$console_log" -qmp "unix:$work/qmp.sock,server=on,wait=off" \
	-kernel "$GUEST_KERNEL" -initrd "$work/initrd" -append "$append" \
	-object "memory-backend-memfd,id=mem,size=${RAM_KIB}K,share=on" -machine memory-backend=mem \
	-chardev "socket,id=c0,path=$sock,$reconnect_opt" \
	-device "vhost-user-scsi-pci,chardev=c0,num_queues=$QUEUES" </dev/null >"$qemu_out" 2>&1 &
qemu_pid=$!

if [[ -n ${VIOSCOPE_GUEST_VERBOSE:-} ]]; then
	tail -n +1 -F "$console_log" 2>/dev/null &
	tail_pid=$!
fi

console() { tr -d '\r' <"$console_log"; }
# wait_console ERE DEADLINE: until the console has a line matching ERE. 1 if QEMU ended or the
# deadline passed first, 2 if the guest reported a failure.
wait_console() {
	local ere=$1 give_up=$((SECONDS + $2))
	while ! console | grep -Eq "$ere"; do
		console | grep -q '^VIOSCOPE-[A-Z]*: FAIL' && return 2
		kill -0 "$qemu_pid" 2>/dev/null || return 1
		((SECONDS < give_up)) || return 1
		sleep 0.2
	done
}
rounds() { console | grep -c '^VIOSCOPE-RST: ROUND [0-9]* PASS' || true; }
# wait_rounds N DEADLINE: until more than N rounds have passed (as wait_console).
wait_rounds() {
	local n=$1 give_up=$((SECONDS + $2))
	while (($(rounds) <= n)); do
		console | grep -q '^VIOSCOPE-[A-Z]*: FAIL' && return 2
		kill -0 "$qemu_pid" 2>/dev/null || return 1
		((SECONDS < give_up)) || return 1
		sleep 0.2
	done
}
# gone PID SECONDS: true once PID has exited, false if it still runs after SECONDS.
gone() {
	local give_up=$((SECONDS + $2))
	while kill -0 "$1" 2>/dev/null; do
		((SECONDS < give_up)) || return 1
		sleep 0.1
	done
}
now_ms() { date +%s%3N; }
connected() { grep -c 'connection [0-9]*: a frontend connected' "$1" 2>/dev/null || true; }

problems=()
figures=()
resubmitted=0
done_rst=0
log "waiting for the guest to fill LUN 0 (deadline ${BOOT_S}s)"
wc=0
wait_console '^VIOSCOPE-RST: READY' "$BOOT_S" || wc=$?
if ((wc != 0)); then
	problems+=("the guest did not get to its fio rounds within ${BOOT_S}s")
elif (($(connected "$work/target-1.log") != 1)); then
	problems+=("target 1's log does not show QEMU connected once")
fi

# --- the restarts ---------------------------------------------------------------------------------
qemu_seen=0 # lines of QEMU's stderr already shown
while ((${#problems[@]} == 0 && done_rst < n_rst)); do
	r=$((done_rst + 1))
	# The guest's I/O runs: a round has passed since the last reconnection (since READY for the
	# first), and the next one has had VIOSCOPE_RESTART_DELAY seconds to get going.
	r0=$(rounds)
	wc=0
	wait_rounds "$r0" "$ROUND_S" || wc=$?
	if ((wc != 0)); then
		if ((r == 1)); then
			problems+=("no fio round passed within ${ROUND_S}s of READY")
		else
			problems+=("restart $((r - 1)): no fio round passed within ${ROUND_S}s of the reconnection")
		fi
		break
	fi
	sleep "$delay_s"
	r1=$(rounds)
	old_pid=$target_pid old_n=$n_targets
	t_kill=$(now_ms)
	kill -KILL "$old_pid"
	wait "$old_pid" 2>/dev/null || true
	target_pid=
	t_dead=$(now_ms)
	start_target
	t_listen=$(now_ms)
	tlog=$work/target-$n_targets.log
	give_up=$((SECONDS + RECONNECT_S))
	while (($(connected "$tlog") < 1)); do
		if ! kill -0 "$qemu_pid" 2>/dev/null; then
			problems+=("restart $r: QEMU exited instead of reconnecting")
			break
		fi
		if ((SECONDS >= give_up)); then
			problems+=("restart $r: QEMU did not reconnect within ${RECONNECT_S}s of the kill")
			break
		fi
		sleep 0.02
	done
	t_conn=$(now_ms)
	qlines=$(sed -n "$((qemu_seen + 1)),\$p" "$qemu_out")
	qemu_seen=$(wc -l <"$qemu_out")
	((${#problems[@]} == 0)) || {
		[[ -z $qlines ]] || printf 'QEMU said:\n%s\n' "$qlines"
		break
	}
	line="RESTART $r: kill to reconnect $((t_conn - t_kill)) ms (target $old_n dead after"
	line+=" $((t_dead - t_kill)) ms, target $n_targets listening after $((t_listen - t_kill)) ms;"
	line+=" killed $(awk -v d="$delay_s" 'BEGIN { print d }') s into round $((r1 + 1)))"
	figures+=("$line")
	echo "$line"
	[[ -z $qlines ]] || printf '  QEMU: %s\n' "${qlines//$'\n'/$'\n'  QEMU: }"
	done_rst=$r
done
# After the last reconnection, a round must pass as well.
if ((${#problems[@]} == 0)); then
	r0=$(rounds)
	wc=0
	wait_rounds "$r0" "$ROUND_S" || wc=$?
	((wc == 0)) || problems+=("restart $done_rst: no fio round passed within ${ROUND_S}s of the reconnection")
fi

# --- the end: the done signal, the guest's final verify -------------------------------------------
if ((${#problems[@]} == 0)); then
	log "all $n_rst restarts done: the done signal into LUN 1 ($ctl)"
	printf '%s\n' "$DONE_MAGIC" | dd of="$ctl" conv=notrunc,fsync status=none
	wc=0
	wait_console '^VIOSCOPE-GUEST: (PASS|FAIL)' "$FINAL_S" || wc=$?
	((wc == 0)) || problems+=("the guest did not finish within ${FINAL_S}s of the done signal")
	gone "$qemu_pid" 30 || true
fi
# QEMU goes now if it still runs (the console is complete once it is gone). On a failure, first
# whether its main loop still answers QMP (a QEMU stuck in a vhost-user exchange does not).
if kill -0 "$qemu_pid" 2>/dev/null; then
	if ((${#problems[@]})); then
		qmp_said=$(python3 - "$work/qmp.sock" <<'PYEOF' 2>&1
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(5)
try:
    s.connect(sys.argv[1])
    f = s.makefile("rwb")
    f.readline()
    for cmd in ("qmp_capabilities", "query-status"):
        f.write(json.dumps({"execute": cmd}).encode() + b"\n")
        f.flush()
        while True:
            r = json.loads(f.readline())
            if "event" not in r:
                break
    print("QEMU answers QMP: query-status", json.dumps(r.get("return", r)))
except Exception as e:
    print(f"QEMU does not answer QMP within 5 s ({e!r}): its main loop is stuck")
PYEOF
		) || true
		log "$qmp_said"
		problems+=("at the end: $qmp_said")
	fi
	kill -TERM "$qemu_pid" 2>/dev/null || true
	gone "$qemu_pid" 15 || kill -KILL "$qemu_pid" 2>/dev/null || true
fi
qemu_rc=0
wait "$qemu_pid" || qemu_rc=$?
qemu_pid=
if [[ -n $tail_pid ]]; then
	kill "$tail_pid" 2>/dev/null || true
	wait "$tail_pid" 2>/dev/null || true
	tail_pid=
fi
if [[ -n $target_pid ]]; then
	kill -TERM "$target_pid" 2>/dev/null || true
	gone "$target_pid" 15 || kill -KILL "$target_pid" 2>/dev/null || true
	trc=0
	wait "$target_pid" || trc=$?
	target_pid=
	((trc == 0)) || problems+=("the last target exited with status $trc (expected 0 on SIGTERM)")
fi

# --- verdict ----------------------------------------------------------------------------------------
all=$work/guest.clean
console >"$all"
((qemu_rc == 0)) || problems+=("QEMU exited with status $qemu_rc")
while read -r l; do
	problems+=("guest: $l")
done < <(grep '^VIOSCOPE-[A-Z]*: FAIL' "$all" || true)
if grep -Eq 'Kernel panic|Oops|BUG:' "$all"; then
	problems+=("the guest kernel: $(grep -E 'Kernel panic|Oops|BUG:' "$all" | head -n 1)")
fi
dmesg_lines=$(grep '^VIOSCOPE-DMESG: ' "$all" || true)
[[ -z $dmesg_lines ]] ||
	problems+=("the guest's kernel log has $(grep -c . <<<"$dmesg_lines") SCSI error/abort/reset/timeout line(s) (above)")
if ((${#problems[@]} == 0)); then
	grep -q '^VIOSCOPE-STEP: PASS final-verify' "$all" ||
		problems+=("no 'VIOSCOPE-STEP: PASS final-verify' on the console")
	grep -q '^VIOSCOPE-GUEST: PASS$' "$all" || problems+=("no 'VIOSCOPE-GUEST: PASS' on the console")
fi
for ((n = 1; n <= n_targets; n++)); do
	tlog=$work/target-$n.log
	if grep -q 'dropped:' "$tlog"; then
		problems+=("target $n: $(grep 'dropped:' "$tlog" | head -n 1)")
	fi
done

# What each restarted target found in flight and gave out again (it says so as its rings start):
# ten restarts under fio that never catch a request in flight would not test the tracking.
resub_line="requests resubmitted by the restarted targets:"
for ((n = 2; n <= n_targets; n++)); do
	resub=$(awk '/request\(s\) taken before a restart/ {
		for (i = 2; i <= NF; i++) if ($i == "request(s)") n += $(i - 1) } END { print n + 0 }' \
		"$work/target-$n.log")
	resubmitted=$((resubmitted + resub))
	resub_line+=" $resub"
done
if ((done_rst > 0 && resubmitted == 0)); then
	problems+=("no restarted target found a request in flight: in-flight tracking was not exercised")
fi

# --- report -------------------------------------------------------------------------------------------
grep -E '^VIOSCOPE-(STEP|TEST|GUEST)' "$all" || true
echo "$(rounds) fio rounds passed in the guest; $done_rst of $n_rst restarts done"
if [[ -n $dmesg_lines ]]; then
	echo "----- the guest's kernel log: SCSI errors, aborts, resets, timeouts -----"
	printf '%s\n' "${dmesg_lines//VIOSCOPE-DMESG: /}"
fi
((${#figures[@]} == 0)) || printf '%s\n' "${figures[@]}"
echo "$resub_line (total $resubmitted)"
log "total $(awk -v a="$t_start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')s"
if ((${#problems[@]})); then
	echo "----- guest console (tail) -----"
	tail -n 60 "$all" || true
	for f in "$qemu_out" "$work"/target-*.log; do
		[[ -s $f ]] || continue
		echo "----- $(basename "$f") (tail) -----"
		tail -n 20 "$f" || true
	done
	echo "----- problems -----"
	printf '  %s\n' "${problems[@]}"
	log "FAIL"
	exit 1
fi
log "PASS: $n_rst SIGKILLs of the target under fio with crc32c verify, QEMU reconnected each" \
	"time, every round passed, LUN 0 verified whole, no SCSI error in the guest's kernel log"
exit 0
