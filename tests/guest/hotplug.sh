#!/usr/bin/env bash
# The hot-plug guest test, host side (ctest guest.hotplug): a real Linux guest (Debian 6.1 under
# QEMU TCG) on `vioscope target --rpc`, whose LUNs this script adds, grows and removes through the
# management socket with `vioscope rpc` while the guest (hotplug-test.sh) keeps fio running on
# LUN 0 and waits, with deadlines, for each change to show up by itself.  The target has two
# controllers, each a vhost-user-scsi-pci device of the one guest: `default` (LUN 0, the LUNs
# added) and `vm-b` (its own LUN 0, of another size), which the guest verifies with fio and
# which is then removed at run time (controller_remove: the guest sees its disk go).
#
# usage: tests/guest/hotplug.sh [BUILD_DIR]
# Exit status: 0 passed, 1 failed, 77 skipped (no vioscope binary).
# Environment: VIOSCOPE_BIN, VIOSCOPE_QEMU, VIOSCOPE_GUEST_CACHE, VIOSCOPE_GUEST_VERBOSE,
# VIOSCOPE_GUEST_KEEP as for run.sh; VIOSCOPE_GUEST_TIMEOUT (default 300 s).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
build_dir=${1:-$repo/build}
t_start=$(date +%s.%N)
timeout_s=${VIOSCOPE_GUEST_TIMEOUT:-300}
qemu=${VIOSCOPE_QEMU:-qemu-system-x86_64}
QUEUES=2
LUN0_MIB=64
B_MIB=48   # controller vm-b's LUN 0; keep in sync with hotplug-test.sh
ADD_MIB=32 # keep in sync with hotplug-test.sh
GROW_MIB=64

log() { printf 'guest-hotplug: %s\n' "$*"; }
vioscope_bin=${VIOSCOPE_BIN:-$build_dir/tools/vioscope}
if [[ ! -x $vioscope_bin ]]; then
	echo "guest-hotplug: SKIP: no vioscope binary at '$vioscope_bin'"
	exit 77
fi

work=
qemu_pid=
target_pid=
tail_pid=
problems=()
# shellcheck disable=SC2317 # called by the traps
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	for pid in "$tail_pid" "$qemu_pid" "$target_pid"; do
		if [[ -n $pid ]]; then kill -TERM "$pid" 2>/dev/null || true; fi
	done
	for pid in "$qemu_pid" "$target_pid"; do
		[[ -n $pid ]] || continue
		for _ in $(seq 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null || true
	done
	if [[ -n $work && -d $work ]]; then
		if [[ -n ${VIOSCOPE_GUEST_KEEP:-} ]]; then
			echo "guest-hotplug: kept $work"
		else
			rm -rf "$work"
		fi
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

log "preparing the guest (kernel, initramfs)"
env_file=$("$here/prepare.sh") || {
	echo "guest-hotplug: error: prepare.sh failed" >&2
	exit 1
}
# shellcheck source=/dev/null
source "$env_file"
work=$(mktemp -d "${TMPDIR:-/tmp}/vioscope-hotplug.XXXXXX")
guest_log=$work/guest.log
rpc_sock=$work/rpc.sock
rpc() { "$vioscope_bin" rpc --socket "$rpc_sock" --timeout 30 "$@"; }

# The guest's test script, as a second cpio archive before the cached one (as run.sh does).
mkdir -p "$work/extra"
cp "$here/hotplug-test.sh" "$work/extra/hotplug-test.sh"
(cd "$work/extra" && echo hotplug-test.sh | cpio -o -H newc --quiet -R 0:0) >"$work/extra.cpio"
cat "$work/extra.cpio" "$GUEST_INITRD" >"$work/initrd"

# The target: LUN 0 in RAM (the background fio's), LUN 1 comes later as a file; controller vm-b
# with its LUN 0 in RAM.
truncate -s "${ADD_MIB}M" "$work/lun1.img"
sock=$work/vhost-user-scsi.sock
sock_b=$work/vm-b.sock
"$vioscope_bin" target --socket "$sock" --lun "0:ram=${LUN0_MIB}M" --queues "$QUEUES" \
	--rpc "$rpc_sock" --controller "vm-b:socket=$sock_b" --lun "0:ram=${B_MIB}M" \
	>"$work/target.log" 2>&1 &
target_pid=$!
for _ in $(seq 100); do
	[[ -S $sock && -S $sock_b && -S $rpc_sock ]] && break
	sleep 0.1
done
if [[ ! -S $sock || ! -S $sock_b || ! -S $rpc_sock ]]; then
	cat "$work/target.log" >&2
	echo "guest-hotplug: error: the target did not listen within 10 s" >&2
	exit 1
fi

append="console=ttyS0 quiet panic=-1 vioscope.vendor=VIOSCOPE vioscope.disks=2 ${VIOSCOPE_GUEST_APPEND:-}"
append+=" vioscope.test=/hotplug-test.sh vioscope.timeout=$((timeout_s - 30))"
: >"$guest_log"
if [[ -n ${VIOSCOPE_GUEST_VERBOSE:-} ]]; then
	tail -n +1 -f "$guest_log" &
	tail_pid=$!
fi
log "booting the guest (timeout ${timeout_s}s, kernel $GUEST_KVER)"
timeout --kill-after=10 "$timeout_s" "$qemu" -accel tcg -m 1024 -smp 2 -nographic -no-reboot \
	-monitor none -nic none -serial "file:$guest_log" \
	-kernel "$GUEST_KERNEL" -initrd "$work/initrd" -append "$append" \
	-object memory-backend-memfd,id=mem,size=1024M,share=on -machine memory-backend=mem \
	-chardev "socket,id=c0,path=$sock" \
	-device "vhost-user-scsi-pci,chardev=c0,num_queues=$QUEUES" \
	-chardev "socket,id=c1,path=$sock_b" -device "vhost-user-scsi-pci,chardev=c1,num_queues=1" \
	</dev/null >"$work/qemu.out" 2>&1 &
qemu_pid=$!

# wait_marker REQUEST: until the guest prints "VIOSCOPE-HP: REQUEST" (false if QEMU ended first).
wait_marker() {
	while ! tr -d '\r' <"$guest_log" | grep -q "^VIOSCOPE-HP: $1\$"; do
		kill -0 "$qemu_pid" 2>/dev/null || return 1
		sleep 0.2
	done
}
# act REQUEST CMD...: when the guest asks, change the target (a failure is a problem).
act() {
	local req=$1
	shift
	if ! wait_marker "$req"; then
		problems+=("the guest never asked for $req")
		return 1
	fi
	log "guest asked for $req: vioscope rpc $*"
	if ! rpc "$@"; then
		problems+=("vioscope rpc $* failed")
		return 1
	fi
}
# With two controllers, the LUN methods name theirs.
if act ADD lun_add controller=default id=1 "spec=file=$work/lun1.img" &&
	act GROW lun_resize controller=default id=1 size=${GROW_MIB}M &&
	act REMOVE lun_remove controller=default id=1; then
	act UNPLUG controller_remove name=vm-b || true
fi
# Statistics while the guest still runs: LUN 0 carried the background fio.
rpc --table stats controller=default >"$work/stats.txt" || problems+=("vioscope rpc stats failed")
rpc --json controller_list >"$work/controllers.json" || problems+=("vioscope rpc controller_list failed")
cat "$work/stats.txt"
qemu_rc=0
wait "$qemu_pid" || qemu_rc=$?
qemu_pid=
if [[ -n $tail_pid ]]; then
	kill "$tail_pid" 2>/dev/null || true
	wait "$tail_pid" 2>/dev/null || true
	tail_pid=
fi

# --- verdict ------------------------------------------------------------------------------------
clean=$work/guest.clean
tr -d '\r' <"$guest_log" >"$clean"
((qemu_rc == 0)) || problems+=("QEMU exited with status $qemu_rc (124: timed out)")
grep -q '^VIOSCOPE-GUEST: PASS$' "$clean" || problems+=("no 'VIOSCOPE-GUEST: PASS'")
while read -r line; do
	problems+=("guest: $line")
done < <(grep '^VIOSCOPE-[A-Z]*: FAIL' "$clean" || true)
steps=$(grep -c '^VIOSCOPE-STEP: PASS' "$clean" || true)
# discover, fio-b, appear, fio, grow, fio-grown, gone, unplug, detach, background
((steps == 10)) || problems+=("expected 10 passed steps, saw $steps")
# vm-b is gone, default still there with its frontend
python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["result"]; assert [c["name"] for c in r] == ["default"] and r[0]["connected"], r' \
	"$work/controllers.json" 2>/dev/null || problems+=("controller_list after the removal: $(cat "$work/controllers.json")")
grep -q "controller vm-b: connection 1: a frontend connected" "$work/target.log" ||
	problems+=("no connection line of controller vm-b in the target's log")
# The LUN rows of the table (up to its blank line): LUN 0 counted reads and writes (fio wrote
# and verified), and the removed LUN 1 is not listed.
sed '/^$/q' "$work/stats.txt" >"$work/stats.luns"
awk '$1 == "0" && $2 > 0 && $3 > 0 { ok = 1 } END { exit !ok }' "$work/stats.luns" ||
	problems+=("the stats show no reads and writes on LUN 0")
! grep -q '^1 ' "$work/stats.luns" || problems+=("the stats still list the removed LUN 1")

# The operator's stop: shutdown through the socket; the target exits 0 and removes it.
if rpc shutdown >/dev/null; then
	target_rc=0
	for _ in $(seq 100); do
		kill -0 "$target_pid" 2>/dev/null || break
		sleep 0.1
	done
	wait "$target_pid" || target_rc=$?
	target_pid=
	((target_rc == 0)) || problems+=("the target exited with status $target_rc after shutdown")
	[[ ! -e $rpc_sock ]] || problems+=("the management socket is still there after shutdown")
else
	problems+=("vioscope rpc shutdown failed")
fi

grep -E '^VIOSCOPE-(STEP|TEST|GUEST)|^background fio|^LUN 1:' "$clean" || true
log "total $(awk -v a="$t_start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')s"
if ((${#problems[@]})); then
	echo "----- guest console (tail) -----"
	tail -n 60 "$clean" || true
	echo "----- QEMU output -----"
	tail -n 20 "$work/qemu.out" || true
	echo "----- target output (tail) -----"
	tail -n 20 "$work/target.log" || true
	echo "----- problems -----"
	printf '  %s\n' "${problems[@]}"
	log "FAIL"
	exit 1
fi
log "PASS: $steps guest steps; LUN 1 appeared, grew and went away under fio on LUN 0; controller vm-b served, then removed"
