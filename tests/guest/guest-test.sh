#!/bin/sh
# The vioscope guest test. Runs INSIDE the guest (busybox sh) as /test.sh, started by /init
# (init.sh).
#
# Finds the three disks of the virtio-scsi HBA under test (INQUIRY vendor $VIOSCOPE_VENDOR; LUN 0 is
# the file-backed LUN, LUN 1 the RAM one, LUN 2 the one whose writes the target logs), then on LUN 0
# and 1 runs sg3-utils (INQUIRY, the VPD pages, READ CAPACITY(16), REPORT LUNS, TEST UNIT READY) and
# fio with crc32c verification; on LUN 0 `vioscope check verify --device` (the same data check the
# host runs through its own driver, here through Linux's), then a known pattern at a known offset
# that the host checks in the image file; on LUN 2 (an ext4 file system the host made) a
# metadata-heavy workload (create, write, fsync, rename, unlink) whose every crash state the host
# then checks.
#
# Markers on the console, parsed by run.sh:
#   VIOSCOPE-STEP: PASS <step> (<seconds>s)
#   VIOSCOPE-STEP: FAIL <step>: <reason>
#   VIOSCOPE-TEST: PASS <n> steps        | VIOSCOPE-TEST: FAIL <k> of <n> steps failed: <steps>
# Exit status 0 only if every step passed.
#
# Environment (from the kernel command line, see init.sh):
#   VIOSCOPE_VENDOR     expected INQUIRY vendor (default VIOSCOPE)
#   VIOSCOPE_LUN_BYTES  expected capacity of each LUN in bytes (unchecked if empty)
#   VIOSCOPE_FIO_MIB    MiB per fio pass (default 32); each LUN must hold two of them
#   VIOSCOPE_QUEUES     request virtqueues the HBA must have, each with completions (default 2)
#   VIOSCOPE_REPORT_LUNS  "all" (default): every LUN must answer REPORT LUNS; "lun0": LUN 0 must

VENDOR=${VIOSCOPE_VENDOR:-VIOSCOPE}
LUN_BYTES=${VIOSCOPE_LUN_BYTES:-}
FIO_MIB=${VIOSCOPE_FIO_MIB:-32}
# Keep in sync with run.sh: 1 MiB of pattern at 4 MiB into LUN 0.
PATTERN_SEEK_MIB=4
PATTERN_MIB=1
VPD_PAGES="0x00 0x80 0x83 0xb0 0xb1 0xb2"
REPORT_LUNS=${VIOSCOPE_REPORT_LUNS:-all}
QUEUES=${VIOSCOPE_QUEUES:-2}
VERIFY_SECONDS=${VIOSCOPE_VERIFY_SECONDS:-5}
EXT4_ROUNDS=${VIOSCOPE_EXT4_ROUNDS:-12}

passed=0
failed=0
failed_steps=
out=/tmp/step.out

now() { cut -d' ' -f1 /proc/uptime; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

pass() {
	echo "VIOSCOPE-STEP: PASS $1 ($(elapsed "$t0")s)"
	passed=$((passed + 1))
}

# fail STEP REASON...
fail() {
	step=$1
	shift
	echo "VIOSCOPE-STEP: FAIL $step: $*"
	failed=$((failed + 1))
	failed_steps="$failed_steps $step"
}

# run STEP CMD...: run CMD with its output in $out (shown), and report PASS/FAIL by its exit status.
# Returns CMD's status so callers can add checks on $out.
run() {
	step=$1
	shift
	echo "--- $step: $*"
	t0=$(now)
	"$@" >"$out" 2>&1
	rc=$?
	cat "$out"
	if [ "$rc" -ne 0 ]; then
		fail "$step" "'$*' exited with status $rc"
	fi
	return "$rc"
}

# check STEP CONDITION-DESCRIPTION CMD...: after run, a further check on its result.
check() {
	step=$1
	what=$2
	shift 2
	if "$@"; then
		pass "$step"
	else
		fail "$step" "$what"
	fi
}

finish() {
	total=$((passed + failed))
	if [ "$failed" -eq 0 ] && [ "$total" -gt 0 ]; then
		echo "VIOSCOPE-TEST: PASS $total steps"
		exit 0
	fi
	echo "--- kernel log (tail) ---"
	dmesg | tail -n 60
	echo "VIOSCOPE-TEST: FAIL $failed of $total steps failed:$failed_steps"
	exit 1
}

# --- find the disks -----------------------------------------------------------------------------
t0=$(now)
host=
dev0=
dev1=
dev2=
matched=
n_matched=0
for d in /sys/bus/scsi/devices/*:*:*:*; do
	[ -f "$d/vendor" ] || continue
	vendor=$(sed 's/[[:space:]]*$//' "$d/vendor")
	hctl=${d##*/}
	model=$(sed 's/[[:space:]]*$//' "$d/model")
	echo "scsi $hctl: vendor '$vendor' model '$model' type $(cat "$d/type")"
	[ "$vendor" = "$VENDOR" ] || continue
	[ "$(cat "$d/type")" = 0 ] || continue
	h=${hctl%%:*}
	if [ -n "$host" ] && [ "$host" != "$h" ]; then
		fail discover "disks with vendor '$VENDOR' on two hosts ($host and $h)"
		finish
	fi
	host=$h
	matched="$matched $hctl"
	n_matched=$((n_matched + 1))
	case "$hctl" in
	*:0) dev0=$d ;;
	*:1) dev1=$d ;;
	*:2) dev2=$d ;;
	esac
done
if [ -z "$dev0" ] || [ -z "$dev1" ] || [ -z "$dev2" ]; then
	fail discover "no LUN 0, 1 and 2 disks with vendor '$VENDOR'" \
		"(LUN 0: '${dev0##*/}', LUN 1: '${dev1##*/}', LUN 2: '${dev2##*/}')"
	finish
fi
# Exactly three: a target that also answers for other target ids or LUNs shows up as extra disks.
if [ "$n_matched" -ne 3 ]; then
	fail discover "expected exactly 3 disks with vendor '$VENDOR', found:$matched"
	finish
fi
proc_name=$(cat "/sys/class/scsi_host/host$host/proc_name" 2>/dev/null)
if [ "$proc_name" != virtio_scsi ]; then
	fail discover "host$host is driven by '$proc_name', not virtio_scsi"
	finish
fi

# Block and sg device of a sysfs SCSI device.
first_entry() {
	for f in "$1"/*; do
		[ -e "$f" ] && echo "${f##*/}"
		return
	done
}
sd_of() { first_entry "$1/block"; }
sg_of() { first_entry "$1/scsi_generic"; }
for d in "$dev0" "$dev1" "$dev2"; do
	if [ -z "$(sd_of "$d")" ] || [ -z "$(sg_of "$d")" ]; then
		fail discover "${d##*/} has no block or sg device"
		finish
	fi
done
echo "LUN 0: ${dev0##*/} /dev/$(sd_of "$dev0") /dev/$(sg_of "$dev0")"
echo "LUN 1: ${dev1##*/} /dev/$(sd_of "$dev1") /dev/$(sg_of "$dev1")"
echo "LUN 2: ${dev2##*/} /dev/$(sd_of "$dev2") /dev/$(sg_of "$dev2")"
ncpu=$(grep -c '^processor' /proc/cpuinfo)
# The virtio device under the SCSI host: .../virtioN/hostH.
vdev=$(basename "$(dirname "$(readlink -f "/sys/class/scsi_host/host$host/device")")")
echo "HBA: host$host on $vdev, $ncpu CPUs"
pass discover

# fio engine: io_uring if this kernel and fio have it, libaio otherwise.
engine=io_uring
sd0=/dev/$(sd_of "$dev0")
if ! fio --name=probe --filename="$sd0" --ioengine=io_uring --direct=1 --rw=read --bs=4k \
	--size=4k >"$out" 2>&1; then
	cat "$out"
	echo "io_uring unusable; falling back to libaio"
	engine=libaio
fi
echo "fio engine: $engine"

# --- per-LUN checks -----------------------------------------------------------------------------
# Show only fio's summary lines when it passes; everything when it fails.
fio_step() {
	step=$1
	shift
	echo "--- $step: fio $*"
	t0=$(now)
	fio "$@" >"$out" 2>&1
	rc=$?
	if [ "$rc" -eq 0 ]; then
		grep -E 'err=|issued rwts|READ:|WRITE:' "$out"
		pass "$step"
	else
		cat "$out"
		fail "$step" "fio exited with status $rc"
	fi
}

# shellcheck disable=SC2317 # called through check()
lists_luns_0_1() {
	grep -q '^ *0000000000000000$' "$out" && grep -q '^ *0001000000000000$' "$out"
}

scsi_checks() {
	l=$1
	sg=$2
	sd=$3

	run "$l.inquiry" sg_inq "$sg" && check "$l.inquiry" "vendor is not '$VENDOR'" \
		grep -q "Vendor identification: $VENDOR" "$out"

	for p in $VPD_PAGES; do
		run "$l.vpd-$p" sg_vpd --page="$p" "$sg" && check "$l.vpd-$p" "" true
	done

	if run "$l.readcap" sg_readcap -l "$sg"; then
		bytes=$(sed -n 's/.*Device size: \([0-9]*\) bytes.*/\1/p' "$out")
		sys_bytes=$(($(cat "/sys/block/${sd#/dev/}/size") * 512))
		if [ -z "$bytes" ]; then
			fail "$l.readcap" "no 'Device size' in the output"
		elif [ "$bytes" != "$sys_bytes" ]; then
			fail "$l.readcap" "READ CAPACITY(16) says $bytes bytes," \
				"the kernel's sd says $sys_bytes"
		elif [ -n "$LUN_BYTES" ] && [ "$bytes" != "$LUN_BYTES" ]; then
			fail "$l.readcap" "capacity $bytes bytes, expected $LUN_BYTES"
		else
			pass "$l.readcap"
		fi
	fi

	# REPORT LUNS must list both LUNs (peripheral addressing: 00 00 / 00 01). SPC requires it
	# only at LUN 0; with REPORT_LUNS=lun0 (QEMU's scsi-hd) other LUNs may refuse it as
	# ILLEGAL REQUEST.
	echo "--- $l.luns: sg_luns $sg"
	t0=$(now)
	sg_luns "$sg" >"$out" 2>&1
	rc=$?
	cat "$out"
	if [ "$rc" -eq 0 ]; then
		check "$l.luns" "REPORT LUNS does not list LUN 0 and LUN 1" lists_luns_0_1
	elif [ "$rc" -eq 5 ] && [ "$REPORT_LUNS" = lun0 ] && [ "$l" != lun0 ]; then
		echo "REPORT LUNS refused at $l: allowed (only LUN 0 must answer it)"
		pass "$l.luns"
	else
		fail "$l.luns" "'sg_luns $sg' exited with status $rc"
	fi

	run "$l.turs" sg_turs "$sg" && check "$l.turs" "" true
}

fio_checks() {
	l=$1
	sd=$2
	bytes=$(($(cat "/sys/block/${sd#/dev/}/size") * 512))
	if [ "$bytes" -lt $((2 * FIO_MIB * 1048576)) ]; then
		fail "$l.fio" "the LUN has $bytes bytes, fio needs $((2 * FIO_MIB)) MiB"
		return
	fi
	common="--filename=$sd --ioengine=$engine --direct=1 --iodepth=16
		--verify=crc32c --verify_fatal=1 --verify_state_save=0"
	# Random writes of mixed sizes, each block then read back and checked (in write order). Two
	# jobs on disjoint halves, one per CPU, so both request virtqueues carry I/O (blk-mq maps
	# queues per CPU).
	rand="--rw=randwrite --bsrange=4k-128k --offset=0 --size=$((FIO_MIB / 2))M
		--numjobs=2 --offset_increment=$((FIO_MIB / 2))M --group_reporting"
	if [ "$ncpu" -ge 2 ]; then
		rand="$rand --cpus_allowed=0-1 --cpus_allowed_policy=split"
	fi
	# shellcheck disable=SC2086 # $common and $rand are word lists on purpose
	fio_step "$l.fio-randwrite-verify" --name=randwrite $common $rand --do_verify=1
	# Second processes replay the same random sequences read-only: the data must still be there.
	# shellcheck disable=SC2086
	fio_step "$l.fio-reverify" --name=randwrite $common $rand --verify_only=1
	# Sequential writes of mixed sizes behind the random region, then a sequential verify pass.
	# shellcheck disable=SC2086
	fio_step "$l.fio-seqwrite-verify" --name=seqwrite $common --offset="${FIO_MIB}M" \
		--size="${FIO_MIB}M" --rw=write --bsrange=4k-128k --do_verify=1
}

# A 1 MiB pattern the host can regenerate: 256 blocks of 4 KiB, each 256 copies of the 16-byte
# record "VS-PAT-BLK-%04d\n" with the block's number (so a shifted or swapped block is caught).
make_pattern() {
	awk 'BEGIN { for (b = 0; b < 256; b++) { s = sprintf("VS-PAT-BLK-%04d\n", b)
		for (i = 0; i < 8; i++) s = s s; printf "%s", s } }'
}

pattern_check() {
	sd=$1
	t0=$(now)
	echo "--- lun0.pattern: ${PATTERN_MIB} MiB at ${PATTERN_SEEK_MIB} MiB of $sd"
	make_pattern >/tmp/pattern
	if [ "$(stat -c %s /tmp/pattern)" != $((PATTERN_MIB * 1048576)) ]; then
		fail lun0.pattern "pattern generator made $(stat -c %s /tmp/pattern) bytes"
		return
	fi
	if ! dd if=/tmp/pattern of="$sd" bs=1M seek="$PATTERN_SEEK_MIB" count="$PATTERN_MIB" \
		oflag=direct conv=notrunc,fsync >"$out" 2>&1; then
		cat "$out"
		fail lun0.pattern "dd write failed"
		return
	fi
	sync
	if ! dd if="$sd" of=/tmp/readback bs=1M skip="$PATTERN_SEEK_MIB" count="$PATTERN_MIB" \
		iflag=direct >"$out" 2>&1; then
		cat "$out"
		fail lun0.pattern "dd read back failed"
		return
	fi
	if ! cmp /tmp/pattern /tmp/readback; then
		fail lun0.pattern "read back differs from what was written"
		return
	fi
	rm -f /tmp/pattern /tmp/readback
	pass lun0.pattern
}

# `vioscope check verify --device`: self-describing blocks through this guest's own driver, every
# queue (one thread per CPU's queue), several depths, then every sector read back.
verify_check() {
	sd=$1
	t0=$(now)
	echo "--- lun0.verify: vioscope check verify --device $sd --time $VERIFY_SECONDS"
	if ! command -v vioscope >/dev/null; then
		fail lun0.verify "no vioscope binary in the initramfs"
		return
	fi
	vioscope check verify --device "$sd" --destroy-data --time "$VERIFY_SECONDS" \
		--queues "$ncpu" >"$out" 2>&1
	rc=$?
	cat "$out"
	if [ "$rc" -ne 0 ]; then
		fail lun0.verify "vioscope check verify exited with status $rc"
	elif ! grep -q '^PASS' "$out"; then
		fail lun0.verify "no PASS line"
	else
		pass lun0.verify
	fi
}

# ext4 on LUN 2 (made by the host), whose writes the target logs (log-writes=): a metadata-heavy
# workload, so that the host can replay every crash state through e2fsck.  Each round creates
# files, writes and fsyncs them, renames one across directories and unlinks another.
ext4_check() {
	sd=$1
	t0=$(now)
	echo "--- lun2.ext4: mount $sd, $EXT4_ROUNDS rounds of create/write/fsync/rename/unlink"
	mkdir -p /mnt/t
	if ! mount -t ext4 "$sd" /mnt/t >"$out" 2>&1; then
		cat "$out"
		dmesg | tail -n 20
		fail lun2.ext4 "mount failed"
		return
	fi
	ok=1
	i=0
	while [ "$i" -lt "$EXT4_ROUNDS" ] && [ "$ok" = 1 ]; do
		mkdir -p "/mnt/t/d$i" &&
			dd if=/dev/urandom of="/mnt/t/d$i/a" bs=4k count=$((i % 5 + 1)) 2>/dev/null &&
			echo "round $i" >"/mnt/t/d$i/b" &&
			sync "/mnt/t/d$i/a" "/mnt/t/d$i/b" &&
			mv "/mnt/t/d$i/b" "/mnt/t/renamed$i" &&
			sync -d "/mnt/t/renamed$i" &&
			rm -f "/mnt/t/d$((i / 2))/a" &&
			sync "/mnt/t" || ok=0
		i=$((i + 1))
	done
	umount /mnt/t || ok=0
	if [ "$ok" = 1 ]; then
		pass lun2.ext4
	else
		fail lun2.ext4 "the workload failed in round $i"
	fi
}

# Every request virtqueue of the HBA must have completed I/O (interrupts counted per queue).
queue_check() {
	t0=$(now)
	echo "--- queues: request virtqueue interrupts of $vdev (expect $QUEUES queues in use)"
	grep "$vdev" /proc/interrupts
	# One MSI-X vector per request queue, each named "virtioN-request": IRQ and total over CPUs.
	awk -v v="$vdev-request" -v n="$ncpu" '$NF == v {
		s = 0; for (i = 2; i <= n + 1; i++) s += $i
		print "irq" $1, s }' /proc/interrupts >"$out"
	nq=$(wc -l <"$out")
	idle=$(awk '$2 == 0 { printf " %s", $1 }' "$out")
	if [ "$nq" -ne "$QUEUES" ]; then
		fail queues "$nq request queue interrupt lines for $vdev, expected $QUEUES"
	elif [ -n "$idle" ]; then
		fail queues "no completions on:$idle"
	else
		pass queues
	fi
}

for lun in 0 1; do
	eval d=\$dev$lun
	sg=/dev/$(sg_of "$d")
	sd=/dev/$(sd_of "$d")
	scsi_checks "lun$lun" "$sg" "$sd"
	fio_checks "lun$lun" "$sd"
	if [ "$lun" = 0 ]; then
		verify_check "$sd"
		pattern_check "$sd"
	fi
done
ext4_check "/dev/$(sd_of "$dev2")"
queue_check

finish
