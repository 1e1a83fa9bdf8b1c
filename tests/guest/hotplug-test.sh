#!/bin/sh
# The hot-plug guest test. Runs INSIDE the guest (busybox sh) as /hotplug-test.sh, started by /init
# (init.sh, vioscope.test=/hotplug-test.sh); the host side is hotplug.sh.
#
# The guest starts with one disk (LUN 0) and keeps fio with crc32c verification running on it in
# the background throughout. The host changes the target through its management socket
# (`vioscope rpc`) when the guest asks for it with a marker; the guest never rescans by hand: it
# waits, with a deadline, for what the kernel's virtio_scsi driver does on the target's events.
#   VIOSCOPE-HP: ADD     host: lun_add id=1 (32 MiB)  guest: a new sdX appears, fio verify on it
#   VIOSCOPE-HP: GROW    host: lun_resize to 64 MiB    guest: /sys/block/sdX/size grows, fio verify
#                                                      past the old end
#   VIOSCOPE-HP: REMOVE  host: lun_remove id=1         guest: the disk goes away
#   VIOSCOPE-HP: UNPLUG  host: controller_remove vm-b  guest: the second HBA's disk goes away
# then the background fio must have passed every run, and have kept running all along.
# The second controller (vm-b, a vhost-user-scsi-pci device of its own, served by the same
# target) has a LUN 0 of B_MIB, verified with fio at the start.
#
# Markers: VIOSCOPE-HP: <request> for the host; VIOSCOPE-STEP: PASS/FAIL <step>; VIOSCOPE-TEST.
# Exit status 0 only if every step passed.

VENDOR=${VIOSCOPE_VENDOR:-VIOSCOPE}
WAIT_S=${VIOSCOPE_HP_WAIT:-60}    # deadline for each change to reach the guest
ADD_MIB=32                        # keep in sync with hotplug.sh
GROW_MIB=64
LUN0_MIB=64                       # keep in sync with hotplug.sh
B_MIB=48

passed=0
failed=0
failed_steps=
out=/tmp/step.out
t0=$(cut -d' ' -f1 /proc/uptime)

now() { cut -d' ' -f1 /proc/uptime; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
pass() {
	echo "VIOSCOPE-STEP: PASS $1 ($(elapsed "$t0")s)"
	passed=$((passed + 1))
	t0=$(now)
}
fail() {
	step=$1
	shift
	echo "VIOSCOPE-STEP: FAIL $step: $*"
	failed=$((failed + 1))
	failed_steps="$failed_steps $step"
}
finish() {
	[ -n "$bg" ] && touch /tmp/bg.stop
	total=$((passed + failed))
	if [ "$failed" -eq 0 ] && [ "$total" -gt 0 ]; then
		echo "VIOSCOPE-TEST: PASS $total steps"
		exit 0
	fi
	echo "--- kernel log (tail) ---"
	dmesg | tail -n 40
	echo "VIOSCOPE-TEST: FAIL $failed of $total steps failed:$failed_steps"
	exit 1
}

# wait_until STEP WHAT CMD...: poll CMD every 0.1 s until it succeeds; PASS STEP, or FAIL after
# $WAIT_S seconds.
wait_until() {
	step=$1
	what=$2
	shift 2
	n=0
	until "$@"; do
		if [ "$n" -ge $((WAIT_S * 10)) ]; then
			fail "$step" "$what did not happen within ${WAIT_S}s"
			finish
		fi
		sleep 0.1
		n=$((n + 1))
	done
	pass "$step"
}

# The background fio must be alive and have failed nothing.
bg_alive() {
	if [ -e /tmp/bg.fail ]; then
		cat /tmp/bg.out
		fail "$1" "the background fio on LUN 0 failed (above)"
		finish
	fi
	if ! kill -0 "$bg" 2>/dev/null; then
		fail "$1" "the background fio on LUN 0 stopped"
		finish
	fi
}

fio_verify() {
	step=$1
	shift
	echo "--- $step: fio $*"
	if fio --name="$step" --ioengine="$engine" --direct=1 --iodepth=8 --rw=randwrite \
		--bsrange=4k-64k --verify=crc32c --verify_fatal=1 --verify_state_save=0 \
		--do_verify=1 "$@" >"$out" 2>&1; then
		grep -E 'err=|WRITE:|READ:' "$out"
		pass "$step"
	else
		cat "$out"
		fail "$step" "fio exited with an error"
		finish
	fi
}

# shellcheck disable=SC2317 # the conditions below are called through wait_until
# --- LUN 0 --------------------------------------------------------------------------------------
# Each controller's LUN 0, told apart by size (each on a virtio_scsi host of its own).
sectors_of() { cat "$1/block/"*/size 2>/dev/null || echo 0; }
lun0=
lunb=
for d in /sys/bus/scsi/devices/*:*:*:0; do
	[ -f "$d/vendor" ] || continue
	[ "$(sed 's/[[:space:]]*$//' "$d/vendor")" = "$VENDOR" ] || continue
	case $(sectors_of "$d") in
	$((LUN0_MIB * 2048))) lun0=$d ;;
	$((B_MIB * 2048))) lunb=$d ;;
	esac
done
if [ -z "$lun0" ] || [ -z "$lunb" ]; then
	fail discover "no LUN 0 of ${LUN0_MIB} MiB and of ${B_MIB} MiB with vendor '$VENDOR'"
	finish
fi
hctl0=${lun0##*/}
hctlb=${lunb##*/}
if [ "${hctl0%%:*}" = "${hctlb%%:*}" ]; then
	fail discover "both controllers' disks are on SCSI host ${hctl0%%:*}"
	finish
fi
lun1=/sys/bus/scsi/devices/${hctl0%:*}:1
if [ -e "$lun1" ]; then
	fail discover "LUN 1 is there before it was added"
	finish
fi
sd0=/dev/$(ls "$lun0/block")
sdb=$(ls "$lunb/block")
echo "LUN 0: $hctl0 $sd0; controller vm-b's LUN 0: $hctlb /dev/$sdb"
engine=io_uring
fio --name=probe --filename="$sd0" --ioengine=io_uring --direct=1 --rw=read --bs=4k --size=4k \
	>"$out" 2>&1 || engine=libaio
pass discover
fio_verify controllers.fio-b --filename="/dev/$sdb" --size=16M

# Background: verified random writes on LUN 0, run after run, until told to stop.
(
	runs=0
	while [ ! -e /tmp/bg.stop ]; do
		if ! fio --name=bg --filename="$sd0" --ioengine="$engine" --direct=1 --iodepth=8 \
			--rw=randwrite --bsrange=4k-64k --size=8M --verify=crc32c --verify_fatal=1 \
			--verify_state_save=0 --do_verify=1 >/tmp/bg.out 2>&1; then
			touch /tmp/bg.fail
			exit 1
		fi
		runs=$((runs + 1))
		echo "$runs" >/tmp/bg.runs
	done
) &
bg=$!
runs_of() { cat /tmp/bg.runs 2>/dev/null || echo 0; }

# --- a LUN appears ------------------------------------------------------------------------------
echo "VIOSCOPE-HP: ADD"
has_disk() { [ -d "$lun1/block" ] && [ -n "$(ls "$lun1/block" 2>/dev/null)" ]; }
wait_until hotplug.appear "a disk for LUN 1 (${lun1##*/})" has_disk
sd1=$(ls "$lun1/block")
runs_at_add=$(runs_of)
echo "LUN 1: ${lun1##*/} /dev/$sd1, $(cat "/sys/block/$sd1/size") sectors;" \
	"background fio runs so far: $runs_at_add"
bg_alive hotplug.appear
[ "$(cat "/sys/block/$sd1/size")" -eq $((ADD_MIB * 2048)) ] ||
	fail hotplug.size "LUN 1 has $(cat "/sys/block/$sd1/size") sectors, not $((ADD_MIB * 2048))"
fio_verify hotplug.fio --filename="/dev/$sd1" --size=16M

# --- it grows -----------------------------------------------------------------------------------
echo "VIOSCOPE-HP: GROW"
grown() { [ "$(cat "/sys/block/$sd1/size" 2>/dev/null)" = $((GROW_MIB * 2048)) ]; }
wait_until hotplug.grow "/sys/block/$sd1/size = $((GROW_MIB * 2048))" grown
bg_alive hotplug.grow
fio_verify hotplug.fio-grown --filename="/dev/$sd1" --offset=${ADD_MIB}M --size=16M

# --- it goes away -------------------------------------------------------------------------------
echo "VIOSCOPE-HP: REMOVE"
gone() { [ ! -e "$lun1" ] && [ ! -e "/sys/block/$sd1" ]; }
wait_until hotplug.gone "LUN 1 (${lun1##*/}, $sd1) going away" gone
bg_alive hotplug.gone

# --- the second controller goes away ------------------------------------------------------------
echo "VIOSCOPE-HP: UNPLUG"
b_gone() { [ ! -e "$lunb" ] && [ ! -e "/sys/block/$sdb" ]; }
wait_until controllers.unplug "controller vm-b's disk ($hctlb, $sdb) going away" b_gone
bg_alive controllers.unplug
# Its device has no back-end any more: the guest lets it go as after QEMU's device_del (the
# PCI function removed: the driver's remove resets the device), in the background, with the
# deadline of any step.
hostb_dev=$(readlink -f "/sys/class/scsi_host/host${hctlb%%:*}/device")
pcib=${hostb_dev%/virtio*}
echo "controller vm-b's HBA: $hostb_dev (PCI function $pcib)"
(echo 1 >"$pcib/remove") &
pci_gone() { [ ! -e "$pcib" ]; }
wait_until controllers.detach "controller vm-b's PCI function ($pcib) removed" pci_gone

# --- the background fio kept going and found nothing wrong --------------------------------------
touch /tmp/bg.stop
wait "$bg"
rc=$?
runs=$(runs_of)
echo "background fio on LUN 0: $runs verified runs ($runs_at_add before LUN 1 appeared), status $rc"
if [ "$rc" -ne 0 ] || [ -e /tmp/bg.fail ]; then
	cat /tmp/bg.out
	fail hotplug.background "the background fio on LUN 0 failed"
elif [ "$runs" -le "$runs_at_add" ]; then
	fail hotplug.background "the background fio made no progress while LUN 1 came and went"
else
	pass hotplug.background
fi
bg=
finish
