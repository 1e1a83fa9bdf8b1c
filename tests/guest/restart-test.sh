#!/bin/sh
# The back-end restart guest test. Runs INSIDE the guest (busybox sh) as /restart-test.sh, started
# by /init (init.sh, vioscope.test=/restart-test.sh); the host side is restart.sh, which kills
# the `vioscope target` serving this guest's disks with SIGKILL and starts it again on the same
# socket and images (QEMU 10's chardev reconnects) while this script runs fio.
#
# Two disks: LUN 0 (64 MiB, the disk under test) and LUN 1 (1 MiB, the host's "done" signal).
#   1. fill: the whole of LUN 0 written sequentially with fio's crc32c headers (one per 4 KiB),
#      then read back and verified; prints "VIOSCOPE-RST: READY" (the host starts killing).
#   2. rounds, one after the other until the host says done: one fio run of
#        two randread jobs over [0, 48 MiB) (4k-128k, iodepth 16, crc32c verify of the fill's
#        data), and one randwrite job of 8 MiB in [48, 64 MiB) (4k-64k, iodepth 8), each block
#        read back and verified after the writes;
#      every round must pass and prints "VIOSCOPE-RST: ROUND n PASS ..." (the host kills the
#      target only while a round runs, and waits for a round to pass after each reconnection).
#   3. done: the host writes "VIOSCOPE-RESTART-DONE" at the start of LUN 1 after its last
#      restart; the guest reads LUN 1's first block (O_DIRECT) before every round.
#   4. final-verify: every 4 KiB block of LUN 0 read back sequentially and verified.
#   5. kernel-log: no line of the kernel log from the SCSI layer or virtio_scsi telling of an
#      error, an abort, a reset or a timeout (a back-end restart must be invisible to the guest).
# A watcher in the background prints every such kernel log line as it appears
# ("VIOSCOPE-DMESG: <line>"), so the host sees them even if I/O hangs, and every 20 s a
# heartbeat with LUN 0's requests in flight ("VIOSCOPE-RST: ALIVE ...").
# Without the done signal within vioscope.rst_s seconds (guest clock, default 600), the rounds
# step fails.
#
# Markers: VIOSCOPE-RST: READY / ROUND n PASS for the host; VIOSCOPE-DMESG: <kernel line>;
# VIOSCOPE-STEP: PASS/FAIL <step>; VIOSCOPE-TEST. Exit status 0 only if every step passed.

VENDOR=${VIOSCOPE_VENDOR:-VIOSCOPE}
LUN_MIB=64 # keep in sync with restart.sh
CTL_MIB=1  # the signal disk; keep in sync with restart.sh
READ_MIB=48
DONE_MAGIC=VIOSCOPE-RESTART-DONE # keep in sync with restart.sh
rst_s=600
read -r cmdline </proc/cmdline
for word in $cmdline; do
	case "$word" in
	vioscope.rst_s=*) rst_s=${word#*=} ;;
	esac
done

passed=0
failed=0
failed_steps=
out=/tmp/step.out

now() { cut -d' ' -f1 /proc/uptime; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
t0=$(now)
pass() {
	echo "VIOSCOPE-STEP: PASS $1 ($(elapsed "$t0")s)${2:+ $2}"
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
watcher=
finish() {
	[ -z "$watcher" ] || kill "$watcher" 2>/dev/null
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

# --- the two disks, told apart by size ------------------------------------------------------------
sectors_of() { cat "$1/block/"*/size 2>/dev/null || echo 0; }
lun0=
ctl=
for d in /sys/bus/scsi/devices/*:*:*:*; do
	[ -f "$d/vendor" ] || continue
	[ "$(sed 's/[[:space:]]*$//' "$d/vendor")" = "$VENDOR" ] || continue
	case $(sectors_of "$d") in
	$((LUN_MIB * 2048))) lun0=$d ;;
	$((CTL_MIB * 2048))) ctl=$d ;;
	esac
done
if [ -z "$lun0" ] || [ -z "$ctl" ]; then
	ls /sys/bus/scsi/devices/
	fail discover "no disk of ${LUN_MIB} MiB and of ${CTL_MIB} MiB with vendor '$VENDOR'"
	finish
fi
sd0=/dev/$(ls "$lun0/block")
sdc=/dev/$(ls "$ctl/block")
echo "LUN 0: ${lun0##*/} $sd0; signal disk: ${ctl##*/} $sdc; $(grep -c '^processor' /proc/cpuinfo) CPUs"
engine=io_uring
fio --name=probe --filename="$sd0" --ioengine=io_uring --direct=1 --rw=read --bs=4k --size=4k \
	>"$out" 2>&1 || engine=libaio
echo "fio engine: $engine"
pass discover

# One crc32c header per 4 KiB: any read of whole, aligned 4 KiB blocks can check what any
# earlier job wrote there (a read-only job takes the seed from the header).
common="--filename=$sd0 --ioengine=$engine --direct=1 --verify=crc32c --verify_interval=4k
	--verify_fatal=1 --verify_state_save=0 --blockalign=4k"

# run_fio STEP ARGS...: fio, its summary lines on success, everything on failure (then finish).
run_fio() {
	step=$1
	shift
	# shellcheck disable=SC2086 # $common is a word list on purpose
	if fio $common "$@" >"$out" 2>&1; then
		return 0
	fi
	cat "$out"
	fail "$step" "fio verification failed or fio exited with an error (above)"
	finish
}

# --- 1. fill ---------------------------------------------------------------------------------------
run_fio fill --name=fill --rw=write --bs=128k --iodepth=8 --size=${LUN_MIB}M --do_verify=1
pass fill "($(grep -E 'WRITE:' "$out" | sed 's/^ *//'))"

# --- the kernel log's SCSI trouble, watched from here on ----------------------------------------
# Lines of the SCSI layer (sd, scsi, virtio_scsi, the block layer's I/O errors) that tell of an
# error, an abort, a reset or a timeout. Those logged so far (boot, fill) are printed as
# VIOSCOPE-DMESG-BOOT and do not count; every later one is printed as VIOSCOPE-DMESG at once.
# Also virtio's own complaints about the rings ("id N is not a head!", "... out of range",
# a broken virtqueue): what a back-end that completes a request twice or a wrong one causes.
scsi_trouble() {
	dmesg | grep -E '(^|[] ])(sd|scsi|virtio_scsi|virtio|blk_update_request|I/O error)' |
		grep -Ei 'abort|reset|I/O error|timing out|timed out|FAILED Result|offlined|hostbyte=|tag#[0-9]+ (cmd|abort)|not a head|out of range|broken|unexpected'
}
scsi_trouble >/tmp/trouble.0
base=$(wc -l </tmp/trouble.0)
sed 's/^/VIOSCOPE-DMESG-BOOT: /' /tmp/trouble.0
(
	seen=$base
	beat=0
	while :; do
		# Every 20 s a heartbeat: the guest runs, and what LUN 0 has in flight (reads writes).
		beat=$((beat + 1))
		[ $((beat % 20)) -ne 0 ] ||
			echo "VIOSCOPE-RST: ALIVE uptime $(now)s, ${sd0#/dev/} in flight $(tr -s ' ' <"/sys/block/${sd0#/dev/}/inflight" 2>/dev/null)"
		scsi_trouble >/tmp/trouble.now
		n=$(wc -l </tmp/trouble.now)
		if [ "$n" -gt "$seen" ]; then
			tail -n +$((seen + 1)) /tmp/trouble.now | sed 's/^/VIOSCOPE-DMESG: /'
			seen=$n
		fi
		sleep 1
	done
) &
watcher=$!
echo "VIOSCOPE-RST: READY"

# --- 2. rounds until the host says done ------------------------------------------------------------
done_signal() {
	[ "$(dd if="$sdc" bs=4096 count=1 iflag=direct 2>/dev/null | head -c ${#DONE_MAGIC})" = \
		"$DONE_MAGIC" ]
}
t_rounds=$(now)
rounds=0
while ! done_signal; do
	if awk -v a="$t_rounds" -v b="$(now)" -v s="$rst_s" 'BEGIN { exit !(b - a > s) }'; then
		fail rounds "no done signal from the host on $sdc within ${rst_s}s ($rounds rounds)"
		finish
	fi
	rounds=$((rounds + 1))
	t_round=$(now)
	run_fio "round-$rounds" \
		--name=rread --rw=randread --offset=0 --size=${READ_MIB}M --bsrange=4k-128k \
		--iodepth=16 --numjobs=2 \
		--name=rwrite --rw=randwrite --offset=${READ_MIB}M --size=$((LUN_MIB - READ_MIB))M \
		--io_size=8M --bsrange=4k-64k --iodepth=8 --do_verify=1
	echo "VIOSCOPE-RST: ROUND $rounds PASS ($(elapsed "$t_round")s, uptime $(now)s;" \
		"$(grep -E '^ *READ:' "$out" | sed 's/.*io=\([^ ]*\).*/read \1/'))"
done
echo "the host's done signal after $rounds rounds"
pass rounds "($rounds rounds)"

# --- 4. the whole LUN read back and verified ------------------------------------------------------
run_fio final-verify --name=final --rw=read --bs=128k --iodepth=8 --size=${LUN_MIB}M
pass final-verify "($(grep -E 'READ:' "$out" | sed 's/^ *//'))"

# --- 5. the kernel log -----------------------------------------------------------------------------
kill "$watcher" 2>/dev/null
wait "$watcher" 2>/dev/null
scsi_trouble >/tmp/trouble.end
n=$(wc -l </tmp/trouble.end)
if [ "$n" -gt "$base" ]; then
	fail kernel-log "$((n - base)) SCSI error/abort/reset/timeout line(s) in the kernel log" \
		"since the fill (VIOSCOPE-DMESG above); the first: $(tail -n +$((base + 1)) /tmp/trouble.end | head -n 1)"
else
	pass kernel-log "(no SCSI error, abort, reset or timeout since the fill)"
fi
finish
