#!/usr/bin/env bash
# The live-migration guest test, host side (ctest guest.migrate, guest.migrate_builtin): a real
# Linux guest (Debian 6.1 under QEMU 7.2 TCG) migrated between QEMU processes on this host, A->B,
# B->A, A->B, while it runs fio with crc32c verification on its disk (migrate-test.sh).
#
# usage: tests/guest/migrate.sh [--qemu-builtin] [BUILD_DIR]
#   BUILD_DIR        build tree holding tools/vioscope (default: build); $VIOSCOPE_BIN overrides
#   --qemu-builtin   no vioscope targets: QEMU's own virtio-scsi-pci + scsi-hd (share-rw=on) on
#                    the same image (proves the orchestration and the guest side)
#
# Two `vioscope target` processes, A and B, each serve one vhost-user-scsi socket with
# `--lun 0:file=IMG,shared --lun 1:file=CTL,shared` on the SAME two image files (shared storage
# on one host: the source writes until the switchover, then the destination). QEMU 1 runs the
# guest on target A; QEMU 2 waits on target B (-incoming defer, then QMP migrate-incoming on a
# Unix socket); QMP `migrate` on QEMU 1 with max-bandwidth capped and downtime-limit 1 ms until
# ram.dirty-sync-count reaches VIOSCOPE_MIGRATE_PASSES (the RAM is copied in several passes
# while the guest's I/O runs), then relaxed so that it converges. Once completed, QEMU 1 is
# quit (target A sees its frontend go), the guest must keep running on QEMU 2 (a new fio round
# marker on QEMU 2's console), and QEMU 3 (on target A) takes it back; and so on. After the last
# migration the host writes the done signal into CTL (LUN 1), the guest verifies all of LUN 0
# and powers off. Guest RAM is 524280 KiB, not a multiple of 256 KiB: QEMU 7.2 TCG loses guest
# stores during migration otherwise (docs: ../shared/docs/FACTS.md, "Live migration").
#
# Until the target implements dirty-page logging, QEMU 7.2 refuses to migrate a guest on it
# ("Migration disabled: vhost-user backend lacks VHOST_USER_PROTOCOL_F_LOG_SHMFD feature."):
# vioscope mode then fails with that message.
#
# Exit status: 0 passed, 1 failed, 77 skipped (no vioscope binary, no QEMU, no python3).
#
# Environment:
#   VIOSCOPE_BIN, VIOSCOPE_QEMU, VIOSCOPE_GUEST_CACHE, VIOSCOPE_GUEST_VERBOSE, VIOSCOPE_GUEST_KEEP,
#   VIOSCOPE_GUEST_APPEND       as for run.sh
#   VIOSCOPE_GUEST_TIMEOUT      seconds any QEMU may live (default 480)
#   VIOSCOPE_MIGRATE_COUNT      migrations (default 3: A->B, B->A, A->B)
#   VIOSCOPE_MIGRATE_BW         MiB/s while the passes are counted (default 32)
#   VIOSCOPE_MIGRATE_PASSES     dirty syncs before the limits are relaxed; also the minimum
#                               ram.dirty-sync-count a migration must show (default 3)
#   VIOSCOPE_MIGRATE_SMP        guest vCPUs (default 2)
#   VIOSCOPE_MIGRATE_FIGURES    FILE: the per-migration lines are written there too
#   VIOSCOPE_MIGRATE_EXPECT_FAIL=1  invert the verdict: pass only if the guest found bad data
#                               (a fio verification failure) after a completed migration
#   VIOSCOPE_TEST_SKIP_DATA_IN_LOG  passed to the targets when set (test-only: the target does
#                               not log the guest pages its data-in writes; with EXPECT_FAIL)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
t_start=$(date +%s.%N)

log() { printf 'guest-migrate: %s\n' "$*"; }
die() {
	printf 'guest-migrate: error: %s\n' "$*" >&2
	exit 1
}
skip() {
	echo "guest-migrate: SKIP: $*"
	exit 77
}
usage() {
	sed -n '6,9p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

mode=vioscope
build_dir=
for arg in "$@"; do
	case "$arg" in
	--qemu-builtin) mode=builtin ;;
	-h | --help) usage ;;
	-*) usage ;;
	*)
		[[ -z $build_dir ]] || usage
		build_dir=$arg
		;;
	esac
done
build_dir=${build_dir:-$repo/build}

LUN_MIB=64                       # keep in sync with migrate-test.sh
CTL_MIB=1                        # the signal disk; keep in sync with migrate-test.sh
DONE_MAGIC=VIOSCOPE-MIGRATE-DONE # keep in sync with migrate-test.sh
RAM_KIB=524280                   # not a multiple of 256 KiB (FACTS.md)
QUEUES=2
timeout_s=${VIOSCOPE_GUEST_TIMEOUT:-480}
n_mig=${VIOSCOPE_MIGRATE_COUNT:-3}
bw_mib=${VIOSCOPE_MIGRATE_BW:-32}
min_passes=${VIOSCOPE_MIGRATE_PASSES:-3}
smp=${VIOSCOPE_MIGRATE_SMP:-2}
figures_file=${VIOSCOPE_MIGRATE_FIGURES:-}
expect_fail=${VIOSCOPE_MIGRATE_EXPECT_FAIL:-}
[[ $expect_fail == 0 ]] && expect_fail=
qemu=${VIOSCOPE_QEMU:-qemu-system-x86_64}
for v in n_mig bw_mib min_passes smp timeout_s; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, not '${!v}'"
done
# Deadlines (seconds), each wait its own.
BOOT_S=240      # QEMU started to the guest's READY (boot, disks, the fill of 64 MiB)
MIGRATE_S=180   # one migration, from QMP migrate to completed
RESUME_S=120    # the switchover to a fio round marker on the destination's console
FINAL_S=180     # the done signal to the guest's PASS and QEMU's exit
START_S=30      # a process to its socket
RELAX_DOWNTIME_MS=500
RELAX_BW_MIB=256

vioscope_bin=
if [[ $mode == vioscope ]]; then
	vioscope_bin=${VIOSCOPE_BIN:-$build_dir/tools/vioscope}
	[[ -x $vioscope_bin ]] ||
		skip "no vioscope binary at '$vioscope_bin' (build it, or set VIOSCOPE_BIN)"
	vioscope_bin=$(cd "$(dirname "$vioscope_bin")" && pwd)/$(basename "$vioscope_bin")
fi
command -v python3 >/dev/null || skip "no python3 (the QMP client)"

# --- cleanup on every exit path -------------------------------------------------------------------
work=
declare -A qpid=() # QEMU number -> pid (of its `timeout` wrapper)
target_a=
target_b=
tail_pid=
qmp_pid=
# shellcheck disable=SC2317 # called by the traps
cleanup() {
	local rc=$? pid
	trap - EXIT INT TERM
	local pids=("$qmp_pid" "${qpid[@]}" "$target_a" "$target_b")
	[[ -z $tail_pid ]] || kill -TERM "$tail_pid" 2>/dev/null || true
	for pid in "${pids[@]}"; do
		[[ -z $pid ]] || kill -TERM "$pid" 2>/dev/null || true
	done
	# A QEMU's `timeout` wrapper SIGKILLs it 10 s after passing SIGTERM on; then the wrapper.
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
			echo "guest-migrate: kept $work"
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
if ! env_file=$("$here/prepare.sh"); then
	command -v "$qemu" >/dev/null || skip "no QEMU ('$qemu') and prepare.sh could not install it"
	die "prepare.sh failed"
fi
command -v "$qemu" >/dev/null || skip "no QEMU ('$qemu'; set VIOSCOPE_QEMU)"
# shellcheck source=/dev/null
source "$env_file"
[[ -f $GUEST_KERNEL && -f $GUEST_INITRD ]] || die "prepare.sh gave no kernel/initramfs"

work=$(mktemp -d "${TMPDIR:-/tmp}/vioscope-migrate.XXXXXX")
img=$work/lun0.img
ctl=$work/ctl.img
truncate -s "${LUN_MIB}M" "$img"
truncate -s "${CTL_MIB}M" "$ctl"

# The guest's test script, as a second cpio archive before the cached one (as hotplug.sh does).
mkdir -p "$work/extra"
cp "$here/migrate-test.sh" "$work/extra/migrate-test.sh"
(cd "$work/extra" && echo migrate-test.sh | cpio -o -H newc --quiet -R 0:0) >"$work/extra.cpio"
cat "$work/extra.cpio" "$GUEST_INITRD" >"$work/initrd"

# --- QMP: a small client (python3, stdlib only) ---------------------------------------------------
# qmp.py SOCK PID DEADLINE_S cmd NAME [JSON]   the command's return value as JSON on stdout
# qmp.py SOCK PID DEADLINE_S migrate URI BW_MIB PASSES RELAX_MS RELAX_BW_MIB
#     migrate and poll query-migrate (progress on stderr) until completed: then stdout has
#     "total-time downtime setup-time dirty-sync-count transferred-bytes"; exit 3 when QEMU
#     refuses to start it (its message on stderr), 1 when it fails or misses the deadline.
# Every read has the deadline; PID's death ends a wait for its socket at once.
cat >"$work/qmp.py" <<'EOF'
import json, os, socket, sys, time

sock_path, pid, deadline_s, what = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
deadline = time.monotonic() + deadline_s


def die(msg, code=1):
    print(msg, file=sys.stderr)
    sys.exit(code)


def alive():
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


class Qmp:
    def __init__(self):
        while True:
            self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                self.s.connect(sock_path)
                break
            except OSError as e:
                self.s.close()
                if not alive():
                    die(f"QEMU (pid {pid}) exited before answering on {sock_path}")
                if time.monotonic() > deadline:
                    die(f"no QMP on {sock_path} within {deadline_s:.0f}s ({e})")
                time.sleep(0.1)
        self.f = self.s.makefile("rwb")
        self.read()  # the greeting
        self.cmd("qmp_capabilities")

    def read(self):
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                die(f"QMP on {sock_path}: no answer within {deadline_s:.0f}s")
            self.s.settimeout(left)
            try:
                line = self.f.readline()
            except socket.timeout:
                die(f"QMP on {sock_path}: no answer within {deadline_s:.0f}s")
            except OSError as e:
                die(f"QMP on {sock_path}: {e} (QEMU gone?)")
            if not line:
                die(f"QMP on {sock_path}: QEMU closed the connection")
            msg = json.loads(line)
            if "event" not in msg:
                return msg

    def execute(self, name, args=None):
        req = {"execute": name}
        if args:
            req["arguments"] = args
        try:
            self.f.write(json.dumps(req).encode() + b"\n")
            self.f.flush()
        except OSError as e:
            die(f"QMP {name} on {sock_path}: {e} (QEMU gone?)")
        return self.read()

    def cmd(self, name, args=None):
        r = self.execute(name, args)
        if "error" in r:
            die(f"QMP {name}: {r['error'].get('desc', r['error'])}")
        return r["return"]


q = Qmp()
if what == "cmd":
    args = json.loads(sys.argv[6]) if len(sys.argv) > 6 else None
    print(json.dumps(q.cmd(sys.argv[5], args)))
    sys.exit(0)
if what != "migrate":
    die(f"unknown request {what}")

uri, bw, passes, relax_ms, relax_bw = sys.argv[5], int(sys.argv[6]), int(sys.argv[7]), \
    int(sys.argv[8]), int(sys.argv[9])
MiB = 1 << 20
q.cmd("migrate-set-parameters", {"max-bandwidth": bw * MiB, "downtime-limit": 1})
r = q.execute("migrate", {"uri": uri})
if "error" in r:
    die(r["error"].get("desc", str(r["error"])), 3)
relaxed, last, t0 = False, None, time.monotonic()
while True:
    m = q.cmd("query-migrate")
    st, ram = m.get("status", "?"), m.get("ram", {})
    syncs = ram.get("dirty-sync-count", 0)
    now = (st, syncs)
    if now != last:
        print(f"  {time.monotonic() - t0:6.1f}s {st}: dirty-sync-count {syncs}, transferred "
              f"{ram.get('transferred', 0) / MiB:.0f} MiB, remaining "
              f"{ram.get('remaining', 0) / MiB:.1f} MiB, dirty rate "
              f"{ram.get('dirty-pages-rate', 0) * 4096 / MiB:.1f} MiB/s", file=sys.stderr)
        last = now
    if st == "completed":
        print(m.get("total-time", -1), m.get("downtime", -1), m.get("setup-time", -1), syncs,
              ram.get("transferred", 0))
        sys.exit(0)
    if st in ("failed", "cancelled"):
        die(f"migration {st}: {m.get('error-desc', '(QEMU gave no reason)')}")
    if not relaxed and syncs >= passes:
        q.cmd("migrate-set-parameters", {"max-bandwidth": relax_bw * MiB,
                                         "downtime-limit": relax_ms})
        print(f"  {time.monotonic() - t0:6.1f}s {syncs} dirty syncs: downtime-limit "
              f"{relax_ms} ms, max-bandwidth {relax_bw} MiB/s", file=sys.stderr)
        relaxed = True
    if time.monotonic() > deadline - 5:
        q.execute("migrate_cancel")
        die(f"migration not completed within {deadline_s:.0f}s (status {st}, "
            f"dirty-sync-count {syncs}); cancelled")
    time.sleep(0.2)
EOF
# qmp N DEADLINE ARGS...: the QMP client on QEMU N.
qmp() {
	local n=$1 deadline=$2
	shift 2
	python3 "$work/qmp.py" "$work/qmp-$n.sock" "${qpid[$n]}" "$deadline" "$@"
}

# --- the targets ------------------------------------------------------------------------------------
target_env=()
if [[ -n ${VIOSCOPE_TEST_SKIP_DATA_IN_LOG:-} ]]; then
	target_env=("VIOSCOPE_TEST_SKIP_DATA_IN_LOG=$VIOSCOPE_TEST_SKIP_DATA_IN_LOG")
	log "targets get VIOSCOPE_TEST_SKIP_DATA_IN_LOG=$VIOSCOPE_TEST_SKIP_DATA_IN_LOG"
fi
# start_target NAME: target NAME on $work/NAME.sock, both images shared; sets $last_pid.
start_target() {
	local name=$1 sock=$work/$1.sock
	env "${target_env[@]}" "$vioscope_bin" target --socket "$sock" \
		--lun "0:file=$img,shared" --lun "1:file=$ctl,shared" --queues "$QUEUES" \
		>"$work/target-$name.log" 2>&1 &
	last_pid=$!
	local give_up=$((SECONDS + START_S))
	# QEMU is the socket client: the target must be listening before QEMU starts.
	until [[ -S $sock ]]; do
		if ! kill -0 "$last_pid" 2>/dev/null; then
			tail -n 40 "$work/target-$name.log" >&2 || true
			die "target $name exited before creating its socket (log above)"
		fi
		((SECONDS < give_up)) || die "target $name did not create $sock within ${START_S}s"
		sleep 0.1
	done
}
if [[ $mode == vioscope ]]; then
	log "starting targets A and B ($vioscope_bin), both on $img and $ctl (shared)"
	start_target A
	target_a=$last_pid
	start_target B
	target_b=$last_pid
fi

# --- QEMU -----------------------------------------------------------------------------------------
vendor=VIOSCOPE
[[ $mode == vioscope ]] || vendor=QEMU
append="console=ttyS0 quiet panic=-1 vioscope.vendor=$vendor vioscope.disks=2"
append+=" vioscope.test=/migrate-test.sh vioscope.timeout=$((timeout_s - 30))"
append+=" vioscope.mig_s=$((timeout_s - 90))${VIOSCOPE_GUEST_APPEND:+ $VIOSCOPE_GUEST_APPEND}"
# side_of N: QEMU N's target (odd: A, even: B).
side_of() { if (($1 % 2)); then echo A; else echo B; fi; }
# start_qemu N [incoming]: QEMU N, its console in console-N.log, QMP on qmp-N.sock.
start_qemu() {
	local n=$1 incoming=${2:-} dev=()
	if [[ $mode == vioscope ]]; then
		dev=(-chardev "socket,id=c0,path=$work/$(side_of "$n").sock"
			-device "vhost-user-scsi-pci,chardev=c0,num_queues=$QUEUES")
	else
		# The same image in two QEMU processes: share-rw=on (the destination's drives stay
		# inactive until the switchover anyway).
		dev=(-device "virtio-scsi-pci,id=scsi0,num_queues=$QUEUES"
			-drive "if=none,id=d0,file=$img,format=raw"
			-device "scsi-hd,bus=scsi0.0,drive=d0,scsi-id=0,lun=0,share-rw=on"
			-drive "if=none,id=d1,file=$ctl,format=raw"
			-device "scsi-hd,bus=scsi0.0,drive=d1,scsi-id=0,lun=1,share-rw=on")
	fi
	[[ -z $incoming ]] || dev+=(-incoming defer)
	: >"$work/console-$n.log"
	timeout --kill-after=10 "$timeout_s" "$qemu" -accel tcg -m "${RAM_KIB}K" -smp "$smp" \
		-nographic -no-reboot -monitor none -nic none -vga none \
		-serial "file:$work/console-$n.log" -qmp "unix:$work/qmp-$n.sock,server=on,wait=off" \
		-kernel "$GUEST_KERNEL" -initrd "$work/initrd" -append "$append" \
		-object "memory-backend-memfd,id=mem,size=${RAM_KIB}K,share=on" \
		-machine memory-backend=mem "${dev[@]}" </dev/null >"$work/qemu-$n.out" 2>&1 &
	qpid[$n]=$!
	started=$n
}
# console N: QEMU N's console without carriage returns.
console() { tr -d '\r' <"$work/console-$1.log"; }
# wait_console N ERE DEADLINE: until QEMU N's console has a line matching ERE. 1 if QEMU N ended
# or the deadline passed first, 2 if the guest reported a failure.
wait_console() {
	local n=$1 ere=$2 give_up=$((SECONDS + $3))
	while ! console "$n" | grep -Eq "$ere"; do
		console "$n" | grep -q '^VIOSCOPE-[A-Z]*: FAIL' && return 2
		kill -0 "${qpid[$n]}" 2>/dev/null || return 1
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
# stop PID: SIGTERM (`timeout` passes it on to its QEMU, and SIGKILLs that 10 s later), then
# SIGKILL if it is still there after 15 s.
stop() {
	[[ -n $1 ]] || return 0
	kill -TERM "$1" 2>/dev/null || return 0
	gone "$1" 15 || kill -KILL "$1" 2>/dev/null || true
}
# wait_exit N DEADLINE: until QEMU N's process is gone (stopped after DEADLINE); its status in
# $exit_rc (124: timed out, 143: stopped).
wait_exit() {
	local n=$1
	gone "${qpid[$n]}" "$2" || stop "${qpid[$n]}"
	exit_rc=0
	wait "${qpid[$n]}" || exit_rc=$?
	qpid[$n]=
}
last_round() { console "$1" | sed -n 's/^VIOSCOPE-MIG: ROUND \([0-9]*\) PASS.*/\1/p' | tail -n 1; }

if [[ -n ${VIOSCOPE_GUEST_VERBOSE:-} ]]; then
	files=()
	for ((n = 1; n <= n_mig + 1; n++)); do files+=("$work/console-$n.log"); done
	tail -n +1 -F "${files[@]}" 2>/dev/null &
	tail_pid=$!
fi

problems=()
figures=()
refused=
done_mig=0  # migrations done: completed, the source gone, the guest running on the destination
completed=0 # migrations QEMU reported completed
started=0   # QEMUs started (1..started)
cur=1
log "booting the guest on QEMU 1 ($mode mode, target $(side_of 1), ${RAM_KIB} KiB, $smp vCPUs," \
	"kernel $GUEST_KVER)"
t_boot=$(date +%s.%N)
start_qemu 1
if wait_console 1 '^VIOSCOPE-MIG: READY' "$BOOT_S"; then
	log "the guest filled LUN 0 and runs fio rounds" \
		"($(awk -v a="$t_boot" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s after boot)"
else
	problems+=("the guest did not get to its fio rounds on QEMU 1 within ${BOOT_S}s")
fi

# --- the migrations -------------------------------------------------------------------------------
while ((${#problems[@]} == 0 && done_mig < n_mig)); do
	m=$((done_mig + 1))
	next=$((cur + 1))
	dir="$(side_of "$cur")->$(side_of "$next")"
	start_qemu "$next" incoming
	uri=unix:$work/mig-$m.sock
	if ! qmp "$next" "$START_S" cmd migrate-incoming "{\"uri\": \"$uri\"}" >/dev/null 2>"$work/qmp.err"; then
		problems+=("migration $m: QEMU $next did not listen: $(cat "$work/qmp.err")")
		break
	fi
	r0=$(last_round "$cur")
	log "migration $m ($dir): QEMU $cur -> QEMU $next, guest in fio round $((${r0:-0} + 1))," \
		"max-bandwidth ${bw_mib} MiB/s and downtime-limit 1 ms for $min_passes dirty syncs"
	# In the background (the client itself, not a subshell: cleanup stops it by its pid): a
	# signal's trap runs at once, not when the migration ends.
	python3 "$work/qmp.py" "$work/qmp-$cur.sock" "${qpid[$cur]}" "$MIGRATE_S" migrate "$uri" \
		"$bw_mib" "$min_passes" "$RELAX_DOWNTIME_MS" "$RELAX_BW_MIB" \
		>"$work/migrate-$m.out" 2>"$work/migrate-$m.err" &
	qmp_pid=$!
	mig_rc=0
	wait "$qmp_pid" || mig_rc=$?
	qmp_pid=
	fig=$(cat "$work/migrate-$m.out")
	cat "$work/migrate-$m.err"
	if ((mig_rc == 3)); then
		refused=$(cat "$work/migrate-$m.err")
		problems+=("migration $m: QEMU refused to migrate: $refused")
		break
	elif ((mig_rc != 0)); then
		problems+=("migration $m ($dir) failed: $(tail -n 1 "$work/migrate-$m.err")")
		break
	fi
	completed=$m
	read -r total down setup passes bytes <<<"$fig"
	# The source stays paused after the switchover: it must be so, and then go.
	status=$(qmp "$cur" 10 cmd query-status 2>&1) || true
	[[ $status == *'"status": "postmigrate"'* ]] ||
		problems+=("migration $m: the source QEMU $cur is not in postmigrate: $status")
	qmp "$cur" 10 cmd quit >/dev/null 2>&1 || true
	wait_exit "$cur" 30
	((exit_rc == 0)) || problems+=("QEMU $cur exited with status $exit_rc after quit")
	status=$(qmp "$next" 10 cmd query-status 2>&1) || true
	[[ $status == *'"status": "running"'* ]] ||
		problems+=("migration $m: the destination QEMU $next is not running: $status")
	# The guest keeps running: a fio round finishes on the destination.
	wc=0
	wait_console "$next" '^VIOSCOPE-MIG: ROUND [0-9]+ PASS' "$RESUME_S" || wc=$?
	if ((wc != 0)); then
		problems+=("migration $m: no fio round passed on QEMU $next's console within ${RESUME_S}s")
		break
	fi
	r1=$(console "$next" | sed -n 's/^VIOSCOPE-MIG: ROUND \([0-9]*\) PASS.*/\1/p' | head -n 1)
	line="MIGRATION $m: total-time $total ms downtime $down ms passes $passes setup-time $setup ms"
	line+=" transferred $((bytes >> 20)) MiB ($dir, guest rounds $((${r0:-0} + 1))-$r1 across it)"
	figures+=("$line")
	echo "$line"
	((passes >= min_passes)) ||
		problems+=("migration $m: ram.dirty-sync-count $passes < $min_passes (one pass: not copied under I/O)")
	done_mig=$m
	cur=$next
done

# --- the end: the done signal, the guest's final verify -------------------------------------------
qemu_rc=
if ((${#problems[@]} == 0)); then
	log "all $n_mig migrations done: the done signal into LUN 1 ($ctl)"
	printf '%s\n' "$DONE_MAGIC" | dd of="$ctl" conv=notrunc,fsync status=none
	wc=0
	wait_console "$cur" '^VIOSCOPE-GUEST: (PASS|FAIL)' "$FINAL_S" || wc=$?
	((wc == 0)) || problems+=("the guest did not finish on QEMU $cur within ${FINAL_S}s of the done signal")
	wait_exit "$cur" 30
	qemu_rc=$exit_rc
	((qemu_rc == 0)) || problems+=("QEMU $cur (the last) exited with status $qemu_rc")
fi
# Whatever still runs goes now (the guest's console is complete once its QEMU is gone).
for n in "${!qpid[@]}"; do
	[[ -z ${qpid[$n]} ]] || wait_exit "$n" 0
done
if [[ -n $tail_pid ]]; then
	kill "$tail_pid" 2>/dev/null || true
	wait "$tail_pid" 2>/dev/null || true
	tail_pid=
fi

# --- verdict ----------------------------------------------------------------------------------------
# The guest's whole output: the consoles in order.
all=$work/guest.clean
: >"$all"
for ((n = 1; n <= started; n++)); do
	console "$n" >>"$all"
done
while read -r l; do
	problems+=("guest: $l")
done < <(grep '^VIOSCOPE-[A-Z]*: FAIL' "$all" || true)
if grep -Eq 'Kernel panic|Oops|BUG:' "$all"; then
	problems+=("the guest kernel: $(grep -E 'Kernel panic|Oops|BUG:' "$all" | head -n 1)")
fi
# A verification failure after a completed migration: what EXPECT_FAIL wants to see.
data_fail=
if ((completed > 0)); then
	data_fail=$(grep -E '^VIOSCOPE-STEP: FAIL (round-[0-9]+|final-verify)' "$all" | head -n 1 || true)
fi
if ((${#problems[@]} == 0)); then
	console "$cur" | grep -q '^VIOSCOPE-STEP: PASS final-verify' ||
		problems+=("no 'VIOSCOPE-STEP: PASS final-verify' on QEMU $cur's console")
	console "$cur" | grep -q '^VIOSCOPE-GUEST: PASS$' ||
		problems+=("no 'VIOSCOPE-GUEST: PASS' on QEMU $cur's console")
fi

# The targets: each saw its frontends come and go (the destination's connects at its start,
# the source's goes once quit), none dropped for an error, and they stop cleanly.
if [[ $mode == vioscope ]]; then
	for side in A B; do
		pid_var=target_${side,,}
		pid=${!pid_var}
		tlog=$work/target-$side.log
		# QEMUs 1..started, odd ones on A.
		expect=0
		for ((n = 1; n <= started; n++)); do
			[[ $(side_of "$n") == "$side" ]] && expect=$((expect + 1))
		done
		# Its last frontend's disconnect is logged once the backends are flushed.
		give_up=$((SECONDS + 10))
		while (($(grep -c 'the frontend (pid [0-9]*) disconnected' "$tlog" || true) < expect &&
			SECONDS < give_up)); do
			sleep 0.1
		done
		conn=$(grep -c 'connection [0-9]*: a frontend connected' "$tlog" || true)
		disc=$(grep -c 'the frontend (pid [0-9]*) disconnected' "$tlog" || true)
		log "target $side: $conn frontend(s) connected, $disc disconnected (expected $expect)"
		if ((${#problems[@]} == 0)) || [[ -n $refused ]]; then
			((conn == expect && disc == expect)) ||
				problems+=("target $side: $conn connects and $disc disconnects in its log, expected $expect each")
		fi
		if grep -q 'dropped:' "$tlog"; then
			problems+=("target $side: $(grep 'dropped:' "$tlog" | head -n 1)")
		fi
		stop "$pid"
		trc=0
		wait "$pid" || trc=$?
		printf -v "$pid_var" ''
		((trc == 0)) || problems+=("target $side exited with status $trc (expected 0 on SIGTERM)")
	done
fi

# --- report -------------------------------------------------------------------------------------------
grep -E '^VIOSCOPE-(STEP|TEST|GUEST)' "$all" || true
echo "$(grep -c '^VIOSCOPE-MIG: ROUND' "$all" || true) fio rounds passed in the guest"
if ((${#figures[@]})); then
	printf '%s\n' "${figures[@]}"
	[[ -z $figures_file ]] || printf '%s\n' "${figures[@]}" >"$figures_file"
fi
log "total $(awk -v a="$t_start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')s"
show_logs() {
	echo "----- guest console (tail) -----"
	tail -n 60 "$all" || true
	for f in "$work"/qemu-*.out "$work"/target-*.log; do
		[[ -s $f ]] || continue
		echo "----- $(basename "$f") (tail) -----"
		tail -n 20 "$f" || true
	done
}
if [[ -n $expect_fail ]]; then
	if [[ -n $data_fail ]]; then
		log "PASS (expected failure seen, $mode mode, after $completed completed migration(s)): $data_fail"
		grep -E -m 3 'verify failed|verify: bad' "$all" || true
		exit 0
	fi
	show_logs
	echo "----- problems -----"
	((${#problems[@]})) && printf '  %s\n' "${problems[@]}"
	log "FAIL: VIOSCOPE_MIGRATE_EXPECT_FAIL is set but the guest found no bad data after a migration"
	exit 1
fi
if ((${#problems[@]})); then
	show_logs
	echo "----- problems -----"
	printf '  %s\n' "${problems[@]}"
	log "FAIL ($mode mode)${refused:+: QEMU refused to migrate: $refused}"
	exit 1
fi
log "PASS ($mode mode): $n_mig migrations under fio with crc32c verify, every round passed," \
	"LUN 0 verified whole at the end"
exit 0
