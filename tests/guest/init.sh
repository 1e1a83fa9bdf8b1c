#!/bin/sh
# /init of the vioscope guest initramfs (busybox sh, PID 1). Built into the initramfs by prepare.sh.
#
# Brings up the minimum a virtio-scsi test needs (proc, sysfs, devtmpfs, the SCSI modules), waits
# for the disks, runs /test.sh (tests/guest/guest-test.sh) and reports one overall marker on the
# serial console that the host (run.sh) parses:
#   VIOSCOPE-GUEST: PASS
#   VIOSCOPE-GUEST: FAIL <reason>
# It always ends with `poweroff -f` so QEMU (-no-reboot) exits instead of waiting for the host's
# timeout.
#
# Kernel command line knobs (all optional; run.sh sets them):
#   vioscope.vendor=STR    expected INQUIRY vendor of the disks under test (default VIOSCOPE)
#   vioscope.disks=N       number of SCSI disks to wait for (default 2)
#   vioscope.wait=SEC      how long to wait for them (default 60)
#   vioscope.timeout=SEC   limit for /test.sh, kept below the host's timeout (default 480)
#   vioscope.lun_bytes=N   expected capacity of each LUN in bytes (checked by /test.sh)
#   vioscope.fio_mib=N     MiB per fio pass (passed to /test.sh)
#   vioscope.report_luns=all|lun0  which LUNs must answer REPORT LUNS (passed to /test.sh)
#   vioscope.queues=N      request virtqueues expected in use (passed to /test.sh)
#   vioscope.verify_s=N    seconds of `vioscope check verify --device` (passed to /test.sh)
#   vioscope.mode=boot     only prove the kernel reaches /init (prepare.sh's boot check)
#   vioscope.test=PATH     the test to run instead of /test.sh (hotplug.sh: /hotplug-test.sh)

PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH

mount -t proc proc /proc
mount -t sysfs sysfs /sys
# DEVTMPFS_MOUNT is off in the Debian kernel: /dev is what the initramfs holds until we mount it.
mount -t devtmpfs devtmpfs /dev
mkdir -p /tmp /run
mount -t tmpfs tmpfs /tmp
exec </dev/console >/dev/console 2>&1

finish() {
	sync
	poweroff -f
	# poweroff -f only returns on failure; ask the kernel directly, then park.
	echo o >/proc/sysrq-trigger
	while :; do sleep 60; done
}

fail() {
	echo "VIOSCOPE-GUEST: FAIL $*"
	finish
}

VIOSCOPE_VENDOR=VIOSCOPE
disks=2
wait_sec=60
test_timeout=480
mode="test"
test_script=/test.sh
VIOSCOPE_LUN_BYTES=
VIOSCOPE_FIO_MIB=
VIOSCOPE_REPORT_LUNS=
VIOSCOPE_QUEUES=
VIOSCOPE_VERIFY_SECONDS=
read -r cmdline </proc/cmdline
for word in $cmdline; do
	case "$word" in
	vioscope.vendor=*) VIOSCOPE_VENDOR=${word#*=} ;;
	vioscope.disks=*) disks=${word#*=} ;;
	vioscope.wait=*) wait_sec=${word#*=} ;;
	vioscope.timeout=*) test_timeout=${word#*=} ;;
	vioscope.lun_bytes=*) VIOSCOPE_LUN_BYTES=${word#*=} ;;
	vioscope.fio_mib=*) VIOSCOPE_FIO_MIB=${word#*=} ;;
	vioscope.report_luns=*) VIOSCOPE_REPORT_LUNS=${word#*=} ;;
	vioscope.queues=*) VIOSCOPE_QUEUES=${word#*=} ;;
	vioscope.verify_s=*) VIOSCOPE_VERIFY_SECONDS=${word#*=} ;;
	vioscope.mode=*) mode=${word#*=} ;;
	vioscope.test=*) test_script=${word#*=} ;;
	esac
done
export VIOSCOPE_VENDOR VIOSCOPE_LUN_BYTES VIOSCOPE_FIO_MIB VIOSCOPE_REPORT_LUNS
export VIOSCOPE_QUEUES VIOSCOPE_VERIFY_SECONDS

# Start on a fresh line: the firmware leaves the cursor after "Booting from ROM..".
echo
echo "VIOSCOPE-INIT: reached /init after $(cut -d' ' -f1 /proc/uptime) s (kernel $(uname -r))"
if [ "$mode" = boot ]; then
	echo "VIOSCOPE-BOOT: OK"
	finish
fi

# Modules in `modprobe --show-depends` order (prepare.sh wrote the list). A module that is already
# loaded or a soft dependency that cannot load on this CPU (crct10dif-pclmul under TCG) is not
# fatal; the disks showing up below is what counts.
while read -r ko; do
	[ -n "$ko" ] || continue
	name=${ko##*/}
	name=${name%.ko}
	[ -d "/sys/module/$(echo "$name" | tr - _)" ] && continue
	insmod "$ko" 2>/dev/null || echo "VIOSCOPE-INIT: note: insmod $name failed (ignored)"
done </modules.list
[ -d /sys/module/virtio_scsi ] || fail "virtio_scsi module did not load"
[ -d /sys/module/sd_mod ] || fail "sd_mod module did not load"

# The virtio_scsi host scans asynchronously: wait until enough disks have a block device.
count_disks() {
	n=0
	for b in /sys/bus/scsi/devices/*/block/*; do
		[ -e "$b" ] && n=$((n + 1))
	done
	echo "$n"
}
waited=0
while [ "$(count_disks)" -lt "$disks" ]; do
	if [ "$waited" -ge "$((wait_sec * 10))" ]; then
		echo "VIOSCOPE-INIT: SCSI devices present:"
		ls /sys/bus/scsi/devices/ 2>&1
		dmesg | tail -n 40
		fail "only $(count_disks) of $disks SCSI disks appeared within ${wait_sec}s"
	fi
	sleep 0.1
	waited=$((waited + 1))
done
echo "VIOSCOPE-INIT: $(count_disks) SCSI disk(s) after $(cut -d' ' -f1 /proc/uptime) s"

cd /tmp || fail "no /tmp"
timeout -s KILL "$test_timeout" /bin/sh "$test_script"
rc=$?
if [ "$rc" -eq 0 ]; then
	echo "VIOSCOPE-GUEST: PASS"
elif [ "$rc" -eq 137 ]; then
	fail "guest test killed after ${test_timeout}s"
else
	fail "guest test exited with status $rc"
fi
finish
