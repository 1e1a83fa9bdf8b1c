#!/bin/sh
# The live-migration guest test. Runs INSIDE the guest (busybox sh) as /migrate-test.sh, started
# by /init (init.sh, vioscope.test=/migrate-test.sh); the host side is migrate.sh, which migrates
# this guest between QEMU processes while it runs.
#
# Two disks: LUN 0 (64 MiB, the disk under test) and LUN 1 (1 MiB, the host's "done" signal).
#   1. fill: the whole of LUN 0 written sequentially with fio's crc32c headers (one per 4 KiB),
#      then read back and verified; prints "VIOSCOPE-MIG: READY" (the host starts migrating).
#   2. rounds, one after the other until the host says done: one fio run of
#        two randread jobs over [0, 48 MiB) (4k-128k, iodepth 16, crc32c verify of the fill's
#        data: data-in lands in guest memory all the time), and
#        one randwrite job of 8 MiB in [48, 64 MiB) (4k-64k, iodepth 8), each block read back
#        and verified after the writes;
#      every round must pass and prints "VIOSCOPE-MIG: ROUND n PASS ..." (the host waits for one
#      on the destination's console after each switchover: the guest kept running).
#   3. done: the host writes "VIOSCOPE-MIGRATE-DONE" at the start of LUN 1 once its last
#      migration is over; the guest reads LUN 1's first block (O_DIRECT, no page cache) before
#      every round. A marker file cannot cross hosts and the console is output only: a disk the
#      host writes is what reaches the guest wherever it runs.
#   4. final-verify: every 4 KiB block of LUN 0 read back sequentially and verified (the fill's
#      data, or the last rounds' writes), then "VIOSCOPE-TEST: PASS".
# Without the done signal within vioscope.mig_s seconds (guest clock, default 400), the rounds
# step fails.
#
# Markers: VIOSCOPE-MIG: READY / ROUND n PASS for the host; VIOSCOPE-STEP: PASS/FAIL <step>;
# VIOSCOPE-TEST. Exit status 0 only if every step passed.

VENDOR=${VIOSCOPE_VENDOR:-VIOSCOPE}
LUN_MIB=64 # keep in sync with migrate.sh
CTL_MIB=1  # the signal disk; keep in sync with migrate.sh
READ_MIB=48
DONE_MAGIC=VIOSCOPE-MIGRATE-DONE # keep in sync with migrate.sh
mig_s=400
read -r cmdline </proc/cmdline
for word in $cmdline; do
	case "$word" in
	vioscope.mig_s=*) mig_s=${word#*=} ;;
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
finish() {
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
echo "VIOSCOPE-MIG: READY"

# --- 2. rounds until the host says done ------------------------------------------------------------
done_signal() {
	[ "$(dd if="$sdc" bs=4096 count=1 iflag=direct 2>/dev/null | head -c ${#DONE_MAGIC})" = \
		"$DONE_MAGIC" ]
}
t_rounds=$(now)
rounds=0
while ! done_signal; do
	if awk -v a="$t_rounds" -v b="$(now)" -v s="$mig_s" 'BEGIN { exit !(b - a > s) }'; then
		fail rounds "no done signal from the host on $sdc within ${mig_s}s ($rounds rounds)"
		finish
	fi
	rounds=$((rounds + 1))
	t_round=$(now)
	run_fio "round-$rounds" \
		--name=rread --rw=randread --offset=0 --size=${READ_MIB}M --bsrange=4k-128k \
		--iodepth=16 --numjobs=2 \
		--name=rwrite --rw=randwrite --offset=${READ_MIB}M --size=$((LUN_MIB - READ_MIB))M \
		--io_size=8M --bsrange=4k-64k --iodepth=8 --do_verify=1
	echo "VIOSCOPE-MIG: ROUND $rounds PASS ($(elapsed "$t_round")s, uptime $(now)s;" \
		"$(grep -E '^ *READ:' "$out" | sed 's/.*io=\([^ ]*\).*/read \1/'))"
done
echo "the host's done signal after $rounds rounds"
pass rounds "($rounds rounds)"

# --- 4. the whole LUN read back and verified ------------------------------------------------------
run_fio final-verify --name=final --rw=read --bs=128k --iodepth=8 --size=${LUN_MIB}M
pass final-verify "($(grep -E 'READ:' "$out" | sed 's/^ *//'))"
finish
