#!/usr/bin/env bash
# The vioscope guest test, host side: a real Linux guest (Debian 6.1 kernel under QEMU TCG) drives
# `vioscope target` through QEMU's vhost-user-scsi-pci with sg3-utils and fio (crc32c verify).
#
# usage: tests/guest/run.sh [--qemu-builtin] [BUILD_DIR]
#   BUILD_DIR        build tree holding tools/vioscope (default: build); $VIOSCOPE_BIN overrides
#   --qemu-builtin   no vioscope target: QEMU's own virtio-scsi-pci + scsi-hd disks (proves the
#                    kernel, initramfs, guest test and marker parsing work on this machine)
#
# Exit status: 0 passed, 1 failed, 77 skipped (no vioscope binary).
#
# Environment:
#   VIOSCOPE_BIN             the vioscope binary (default BUILD_DIR/tools/vioscope)
#   VIOSCOPE_GUEST_TIMEOUT   seconds QEMU may run (default 600)
#   VIOSCOPE_GUEST_FIO_MIB   MiB per fio pass in the guest (default 32: two fill a 64 MiB LUN)
#   VIOSCOPE_GUEST_VERBOSE   if set, stream the guest console while it runs
#   VIOSCOPE_GUEST_KEEP      if set, keep the temporary directory (logs, images) and print its path
#   VIOSCOPE_GUEST_CACHE     kernel/initramfs cache (see prepare.sh)
#   VIOSCOPE_GUEST_APPEND    extra kernel command line words (later vioscope.* words override)
#   VIOSCOPE_QEMU            QEMU binary (default qemu-system-x86_64)
#   VIOSCOPE_GUEST_SUBSETS   random subsets of unflushed writes per crash point (default 2)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
t_start=$(date +%s.%N)

log() { printf 'guest-run: %s\n' "$*"; }
die() {
	printf 'guest-run: error: %s\n' "$*" >&2
	exit 1
}
usage() {
	sed -n '4,7p' "$0" | sed 's/^# \{0,1\}//' >&2
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
		[[ -z "$build_dir" ]] || usage
		build_dir=$arg
		;;
	esac
done
build_dir=${build_dir:-$repo/build}

# Keep in sync with guest-test.sh.
LUN_MIB=64
LOG_LUN_MIB=32 # LUN 2: ext4 under the write log
QUEUES=2
PATTERN_SEEK_MIB=4
PATTERN_MIB=1
timeout_s=${VIOSCOPE_GUEST_TIMEOUT:-600}
fio_mib=${VIOSCOPE_GUEST_FIO_MIB:-32}
qemu=${VIOSCOPE_QEMU:-qemu-system-x86_64}

vioscope_bin=
if [[ $mode == vioscope ]]; then
	vioscope_bin=${VIOSCOPE_BIN:-$build_dir/tools/vioscope}
	if [[ ! -x "$vioscope_bin" ]]; then
		echo "guest-run: SKIP: no vioscope binary at '$vioscope_bin'" \
			"(build it, or set VIOSCOPE_BIN)"
		exit 77
	fi
	vioscope_bin=$(cd "$(dirname "$vioscope_bin")" && pwd)/$(basename "$vioscope_bin")
fi

# --- cleanup on every exit path -----------------------------------------------------------------
work=
qemu_pid=
target_pid=
tail_pid=
# shellcheck disable=SC2317 # called by the traps
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	for pid in "$tail_pid" "$qemu_pid" "$target_pid"; do
		if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
			kill -TERM "$pid" 2>/dev/null || true
		fi
	done
	for pid in "$qemu_pid" "$target_pid"; do
		[[ -n "$pid" ]] || continue
		for _ in $(seq 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null || true
	done
	if [[ -n "$work" && -d "$work" ]]; then
		if [[ -n "${VIOSCOPE_GUEST_KEEP:-}" ]]; then
			echo "guest-run: kept $work"
		else
			rm -rf "$work"
		fi
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- kernel and initramfs -----------------------------------------------------------------------
log "preparing the guest (kernel, initramfs)"
env_file=$("$here/prepare.sh") || die "prepare.sh failed"
# shellcheck source=/dev/null
source "$env_file"
[[ -f "$GUEST_KERNEL" && -f "$GUEST_INITRD" ]] || die "prepare.sh gave no kernel/initramfs"
t_prepared=$(date +%s.%N)

work=$(mktemp -d "${TMPDIR:-/tmp}/vioscope-guest.XXXXXX")
img0=$work/lun0.img
guest_log=$work/guest.log
truncate -s "${LUN_MIB}M" "$img0"
# LUN 2: an ext4 file system made here (mkfs is not crash-safe under a volatile write cache: its
# writes are flushed only at its end, so the crash states worth checking start once it is made).
# base2 stays as made: the base of LUN 2's write log; the LUN works on a copy.
base2=$work/lun2.base
img2=$work/lun2.img
truncate -s "${LOG_LUN_MIB}M" "$base2"
mke2fs -q -F -t ext4 -E lazy_itable_init=0,lazy_journal_init=0 "$base2" ||
	die "mke2fs on $base2 failed"
cp --sparse=always "$base2" "$img2"

# The vioscope binary for `check verify --device` in the guest: the off flavour (no trace
# file to place), with its libraries, as a second cpio archive the kernel unpacks after the
# cached one (so a rebuilt binary costs no initramfs rebuild).
guest_vioscope=${VIOSCOPE_GUEST_BIN:-$build_dir/tools/vioscope-off}
initrd=$GUEST_INITRD
if [[ -x "$guest_vioscope" ]]; then
	extra=$work/extra
	mkdir -p "$extra/usr/bin"
	cp "$guest_vioscope" "$extra/usr/bin/vioscope"
	while read -r lib; do
		# Under /usr: the image's /lib and /lib64 are links into it (merged /usr), which a
		# directory of the same name in this archive would shadow.
		case "$lib" in
		/lib/* | /lib64/*) lib=/usr$lib ;;
		esac
		mkdir -p "$extra$(dirname "$lib")"
		cp -L "$lib" "$extra$lib"
	done < <(ldd "$guest_vioscope" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }')
	(cd "$extra" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) \
		>"$work/extra.cpio"
	# First: the cached image is lz4 (legacy format), which reads to the end of its input.
	cat "$work/extra.cpio" "$GUEST_INITRD" >"$work/initrd"
	initrd=$work/initrd
else
	log "no $guest_vioscope: the guest's verify step will fail"
fi

# The 1 MiB pattern guest-test.sh writes at 4 MiB into LUN 0 (same awk program).
make_pattern() {
	awk 'BEGIN { for (b = 0; b < 256; b++) { s = sprintf("VS-PAT-BLK-%04d\n", b)
		for (i = 0; i < 8; i++) s = s s; printf "%s", s } }'
}

# --- the device under test ----------------------------------------------------------------------
qemu_dev=()
vendor=VIOSCOPE
append_extra=
if [[ $mode == vioscope ]]; then
	sock=$work/vhost-user-scsi.sock
	log "starting $vioscope_bin target"
	"$vioscope_bin" target --socket "$sock" --lun "0:file=$img0" --lun "1:ram=${LUN_MIB}M" \
		--lun "2:file=$img2,log-writes=$work/lun2.log" \
		--queues "$QUEUES" >"$work/target.log" 2>&1 &
	target_pid=$!
	# QEMU is the socket client: the target must be listening before QEMU starts.
	for _ in $(seq 100); do
		[[ -S "$sock" ]] && break
		if ! kill -0 "$target_pid" 2>/dev/null; then
			tail -n 40 "$work/target.log" >&2 || true
			die "the target exited before creating its socket (log above)"
		fi
		sleep 0.1
	done
	if [[ ! -S "$sock" ]]; then
		tail -n 40 "$work/target.log" >&2 || true
		die "the target did not create $sock within 10 s (log above)"
	fi
	qemu_dev=(-chardev "socket,id=c0,path=$sock"
		-device "vhost-user-scsi-pci,chardev=c0,num_queues=$QUEUES")
else
	img1=$work/lun1.img
	truncate -s "${LUN_MIB}M" "$img1"
	vendor=QEMU
	# QEMU's scsi-hd answers REPORT LUNS only at LUN 0 (all SPC requires).
	append_extra=" vioscope.report_luns=lun0"
	# serial= makes QEMU offer VPD page 0x80 as the target does.
	qemu_dev=(-device "virtio-scsi-pci,id=scsi0,num_queues=$QUEUES"
		-drive "if=none,id=d0,file=$img0,format=raw"
		-device "scsi-hd,bus=scsi0.0,drive=d0,scsi-id=0,lun=0,serial=vioscope-lun0"
		-drive "if=none,id=d1,file=$img1,format=raw"
		-device "scsi-hd,bus=scsi0.0,drive=d1,scsi-id=0,lun=1,serial=vioscope-lun1"
		-drive "if=none,id=d2,file=$img2,format=raw"
		-device "scsi-hd,bus=scsi0.0,drive=d2,scsi-id=0,lun=2,serial=vioscope-lun2")
fi

# --- the guest ----------------------------------------------------------------------------------
append="console=ttyS0 quiet panic=-1 vioscope.vendor=$vendor vioscope.disks=3"
append+=" vioscope.queues=$QUEUES vioscope.verify_s=${VIOSCOPE_GUEST_VERIFY_S:-5}"
append+=" vioscope.lun_bytes=$((LUN_MIB * 1048576)) vioscope.fio_mib=$fio_mib$append_extra"
# The guest gives up first, so its log says why rather than the host killing it mid-step.
append+=" vioscope.timeout=$((timeout_s > 120 ? timeout_s - 60 : timeout_s / 2))"
append+=${VIOSCOPE_GUEST_APPEND:+ $VIOSCOPE_GUEST_APPEND}
# The FACTS.md command shape, plus -nic none (no iPXE ROM to initialise: ~0.5 s) and the console
# in a file.
qemu_cmd=("$qemu" -accel tcg -m 1024 -smp 2 -nographic -no-reboot -monitor none -nic none
	-serial "file:$guest_log"
	-kernel "$GUEST_KERNEL" -initrd "$initrd" -append "$append"
	-object "memory-backend-memfd,id=mem,size=1024M,share=on" -machine memory-backend=mem
	"${qemu_dev[@]}")
log "booting the guest ($mode mode, timeout ${timeout_s}s, kernel $GUEST_KVER)"
: >"$guest_log"
if [[ -n "${VIOSCOPE_GUEST_VERBOSE:-}" ]]; then
	tail -n +1 -f "$guest_log" &
	tail_pid=$!
fi
t_boot=$(date +%s.%N)
timeout --kill-after=10 "$timeout_s" "${qemu_cmd[@]}" </dev/null >"$work/qemu.out" 2>&1 &
qemu_pid=$!
qemu_rc=0
wait "$qemu_pid" || qemu_rc=$?
qemu_pid=
t_qemu=$(date +%s.%N)
if [[ -n "$tail_pid" ]]; then
	sleep 0.2
	kill "$tail_pid" 2>/dev/null || true
	wait "$tail_pid" 2>/dev/null || true
	tail_pid=
fi

# --- verdict ------------------------------------------------------------------------------------
problems=()
tr -d '\r' <"$guest_log" >"$work/guest.clean"
clean=$work/guest.clean

if ((qemu_rc == 124 || qemu_rc == 137)); then
	problems+=("QEMU timed out after ${timeout_s}s")
elif ((qemu_rc != 0)); then
	problems+=("QEMU exited with status $qemu_rc")
fi
grep -q '^VIOSCOPE-INIT: reached /init' "$clean" || problems+=("the guest never reached /init")
n_guest_pass=$(grep -c '^VIOSCOPE-GUEST: PASS$' "$clean" || true)
n_test_pass=$(grep -c '^VIOSCOPE-TEST: PASS' "$clean" || true)
n_step_pass=$(grep -c '^VIOSCOPE-STEP: PASS' "$clean" || true)
if grep -q '^VIOSCOPE-[A-Z]*: FAIL' "$clean"; then
	while read -r line; do
		problems+=("guest: $line")
	done < <(grep '^VIOSCOPE-[A-Z]*: FAIL' "$clean")
fi
((n_guest_pass == 1)) || problems+=("expected one 'VIOSCOPE-GUEST: PASS', saw $n_guest_pass")
((n_test_pass == 1)) || problems+=("expected one 'VIOSCOPE-TEST: PASS', saw $n_test_pass")
# 2 LUNs x (inquiry, 6 VPD pages, readcap, luns, turs, 3 fio) + discover + lun0.verify + pattern +
# lun2.ext4 + queues.
expect_steps=$((2 * 13 + 5))
((n_step_pass == expect_steps)) ||
	problems+=("expected $expect_steps passed steps, saw $n_step_pass")

if [[ $mode == vioscope ]]; then
	# Stop the target the way an operator would; it must shut down cleanly.
	if kill -0 "$target_pid" 2>/dev/null; then
		kill -TERM "$target_pid" 2>/dev/null || true
		for _ in $(seq 100); do
			kill -0 "$target_pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$target_pid" 2>/dev/null; then
			problems+=("the target did not exit within 10 s of SIGTERM")
			kill -KILL "$target_pid" 2>/dev/null || true
		fi
	else
		problems+=("the target was no longer running when the guest finished")
	fi
	target_rc=0
	wait "$target_pid" || target_rc=$?
	target_pid=
	((target_rc == 0)) || problems+=("the target exited with status $target_rc (expected 0)")
fi

# Every crash state of LUN 2's ext4 must pass fsck (the journal replayed first, as a mount would).
flush_summary=
if [[ $mode == vioscope ]]; then
	if [[ ! -s "$work/lun2.log" ]]; then
		problems+=("LUN 2 left no write log")
	else
		t_flush=$(date +%s.%N)
		log "checking every crash state of LUN 2 ($(du -h "$work/lun2.log" | cut -f1) of log)"
		flush_rc=0
		"$vioscope_bin" check flush --log "$work/lun2.log" --base "$base2" \
			--fsck "$here/ext4-fsck.sh" --subsets "${VIOSCOPE_GUEST_SUBSETS:-2}" \
			--workdir "$work" >"$work/flush.out" 2>&1 || flush_rc=$?
		cat "$work/flush.out"
		flush_summary=" crash states checked in $(awk -v a="$t_flush" -v b="$(date +%s.%N)" \
			'BEGIN { printf "%.1f", b - a }') s;"
		((flush_rc == 0)) ||
			problems+=("check flush: a crash state of LUN 2 failed (exit $flush_rc, above)")
	fi
fi

# The bytes the guest wrote through the whole stack must be in the host image.
if ! cmp -s <(make_pattern) <(dd if="$img0" bs=1M skip="$PATTERN_SEEK_MIB" count="$PATTERN_MIB" \
	status=none); then
	problems+=("LUN 0 image lacks the guest's pattern at ${PATTERN_SEEK_MIB} MiB")
fi

# --- report -------------------------------------------------------------------------------------
t_end=$(date +%s.%N)
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
grep -E '^VIOSCOPE-(STEP|TEST|GUEST)' "$clean" || true
init_at=$(sed -n 's/^VIOSCOPE-INIT: reached \/init after \([0-9.]*\) s.*/\1/p' "$clean" | head -n 1)
disks_at=$(sed -n 's/^VIOSCOPE-INIT: .* SCSI disk(s) after \([0-9.]*\) s.*/\1/p' "$clean" |
	head -n 1)
log "times: prepare $(secs "$t_start" "$t_prepared")s, QEMU $(secs "$t_boot" "$t_qemu")s" \
	"(guest uptime at /init ${init_at:-?}s, disks ready ${disks_at:-?}s)," \
	"total $(secs "$t_start" "$t_end")s"

if ((${#problems[@]})); then
	echo "----- guest console (tail) -----"
	tail -n 80 "$clean" || true
	if [[ -s "$work/qemu.out" ]]; then
		echo "----- QEMU output -----"
		tail -n 40 "$work/qemu.out" || true
	fi
	if [[ -f "$work/target.log" ]]; then
		echo "----- target output (tail) -----"
		tail -n 40 "$work/target.log" || true
	fi
	echo "----- problems -----"
	printf '  %s\n' "${problems[@]}"
	log "FAIL ($mode mode)"
	exit 1
fi
log "PASS ($mode mode): $n_step_pass guest steps,$flush_summary pattern found in the LUN 0 image"
exit 0
