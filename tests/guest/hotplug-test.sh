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
# then the background fio must have passed every run, and have kept running all along.
#
# Markers: VIOSCOPE-HP: <request> for the host; VIOSCOPE-STEP: PASS/FAIL <step>; VIOSCOPE-TEST.
# Exit status 0 only if every step passed.

VENDOR=${VIOSCOPE_VENDOR:-VIOSCOPE}
WAIT_S=${VIOSCOPE_HP_WAIT:-60}    # deadline for each change to reach the guest
ADD_MIB=32                        # keep in sync with hotplug.sh
GROW_MIB=64

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
lun0=
for d in /sys/bus/scsi/devices/*:*:*:0; do
	[ -f "$d/vendor" ] || continue
	[ "$(sed 's/[[:space:]]*$//' "$d/vendor")" = "$VENDOR" ] && lun0=$d
done
if [ -z "$lun0" ]; then
	fail discover "no LUN 0 with vendor '$VENDOR'"
	finish
fi
hctl0=${lun0##*/}
lun1=/sys/bus/scsi/devices/${hctl0%:*}:1
if [ -e "$lun1" ]; then
	fail discover "LUN 1 is there before it was added"
	finish
fi
sd0=/dev/$(ls "$lun0/block")
echo "LUN 0: $hctl0 $sd0"
engine=io_uring
fio --name=probe --filename="$sd0" --ioengine=io_uring --direct=1 --rw=read --bs=4k --size=4k \
	>"$out" 2>&1 || engine=libaio
pass discover

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
