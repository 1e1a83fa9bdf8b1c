#!/usr/bin/env bash
# Prepare everything the guest test (tests/guest/run.sh) boots: a Debian 6.1 kernel taken from its
# package without installing it, and an initramfs holding busybox, the SCSI modules, fio, sg3-utils,
# /init (init.sh) and /test.sh (guest-test.sh).
#
# Idempotent and cached: the cache directory is $VIOSCOPE_GUEST_CACHE or tests/guest/cache/.
# The kernel is fetched once per Debian package name; the initramfs is rebuilt only when the hash of
# its inputs changes. On success it writes CACHE/guest.env (sourced by run.sh) and prints its path:
#   GUEST_KERNEL  the image for -kernel (the uncompressed vmlinux when it boots, else the bzImage)
#   GUEST_INITRD  the initramfs
#   GUEST_KVER    the kernel release
#
# Environment:
#   VIOSCOPE_GUEST_CACHE   cache directory
#   VIOSCOPE_GUEST_KPKG    kernel package to use instead of what linux-image-amd64 depends on
#   VIOSCOPE_GUEST_NO_APT  if set, never run apt-get (fail instead when something is missing)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${VIOSCOPE_GUEST_CACHE:-$here/cache}

log() { printf 'guest-prepare: %s\n' "$*" >&2; }
die() {
	printf 'guest-prepare: error: %s\n' "$*" >&2
	exit 1
}

# Packages the host side and the initramfs need (the binaries are copied from the host; e2fsprogs
# makes and checks LUN 2's file system on the host).
packages=(qemu-system-x86 qemu-utils busybox-static sg3-utils fio kmod cpio xz-utils e2fsprogs)
# Modules the guest loads; modprobe --show-depends expands them into insmod order.
modules=(virtio_pci virtio_scsi sd_mod sg crc32c_generic ext4)
# Host binaries copied into the initramfs with their shared libraries.
guest_bins=(fio sg_inq sg_vpd sg_readcap sg_luns sg_turs)

mkdir -p "$cache"
cache=$(cd "$cache" && pwd)

# One prepare at a time per cache (ctest -j, or two developers sharing a cache).
exec 9>"$cache/.lock"
flock 9

tmp=
# shellcheck disable=SC2317 # called by the traps
cleanup() {
	if [[ -n "$tmp" && -d "$tmp" ]]; then
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT

apt_updated=0
apt_update() {
	[[ -z "${VIOSCOPE_GUEST_NO_APT:-}" ]] || die "apt needed but VIOSCOPE_GUEST_NO_APT is set"
	((apt_updated)) && return 0
	[[ $(id -u) -eq 0 ]] || die "need root to run apt-get (or install: ${packages[*]})"
	log "apt-get update"
	apt-get update -qq >&2 || die "apt-get update failed"
	apt_updated=1
}

# --- 1. host packages -------------------------------------------------------------------------
missing=()
for p in "${packages[@]}"; do
	if [[ $(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null) != installed ]]; then
		missing+=("$p")
	fi
done
if ((${#missing[@]})); then
	apt_update
	log "installing ${missing[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2 ||
		die "apt-get install ${missing[*]} failed"
fi
for b in qemu-system-x86_64 depmod modprobe cpio xz busybox "${guest_bins[@]}"; do
	command -v "$b" >/dev/null || die "'$b' not found after installing packages"
done

# --- 2. kernel ----------------------------------------------------------------------------------
kernel_pkg_name() {
	apt-cache depends linux-image-amd64 2>/dev/null |
		awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2; exit }'
}

kpkg=${VIOSCOPE_GUEST_KPKG:-}
if [[ -z "$kpkg" ]]; then
	kpkg=$(kernel_pkg_name || true)
	if [[ -z "$kpkg" && -z "${VIOSCOPE_GUEST_NO_APT:-}" && $(id -u) -eq 0 ]]; then
		apt_update
		kpkg=$(kernel_pkg_name || true)
	fi
	if [[ -z "$kpkg" ]]; then
		# No package lists (offline): any kernel already in the cache will do.
		kpkg=$(find "$cache/kernel" -mindepth 1 -maxdepth 1 -type d -name 'linux-image-*' \
			-printf '%f\n' 2>/dev/null | sort -V | tail -n 1 || true)
		[[ -n "$kpkg" ]] ||
			die "no kernel package: apt-cache depends linux-image-amd64 names none"
		log "package lists name no kernel; using cached $kpkg"
	fi
fi
kdir=$cache/kernel/$kpkg

# Uncompressed ELF vmlinux out of a bzImage, as the kernel's scripts/extract-vmlinux does, but
# using the boot protocol header (>= 2.08) to locate the payload instead of scanning for magics.
extract_vmlinux() {
	local img=$1 out=$2 setup_sects payload_off payload_len start magic
	setup_sects=$(od -An -tu1 -j $((0x1f1)) -N1 "$img" | tr -d ' ')
	payload_off=$(od -An -tu4 -j $((0x248)) -N4 "$img" | tr -d ' ')
	payload_len=$(od -An -tu4 -j $((0x24c)) -N4 "$img" | tr -d ' ')
	((setup_sects == 0)) && setup_sects=4
	start=$(((setup_sects + 1) * 512 + payload_off))
	magic=$(od -An -tx1 -j "$start" -N6 "$img" | tr -d ' \n')
	payload() { tail -c +$((start + 1)) "$img" | head -c "$1"; }
	# The payload ends with a 4-byte size the decompressors must not see (xz: --single-stream,
	# gzip: trailing garbage is only a warning, zstd: cut it off).
	case "$magic" in
	fd377a585a00) payload "$payload_len" | xz -dc --single-stream >"$out" ;;
	1f8b*) payload "$payload_len" | gzip -dc >"$out" 2>/dev/null || true ;;
	28b52ffd*) payload $((payload_len - 4)) | zstd -dcq >"$out" ;;
	*)
		log "unknown kernel payload compression (magic $magic)"
		return 1
		;;
	esac
	[[ $(od -An -tx1 -N4 "$out" | tr -d ' \n') == 7f454c46 ]] || {
		log "extracted payload is not an ELF file"
		return 1
	}
}

# Boot KERNEL with a busybox-only initramfs in vioscope.mode=boot; print the seconds it took, or
# fail.
boot_check() {
	local kernel=$1 initrd=$2 log_file=$3 t0 t1
	t0=$(date +%s.%N)
	timeout 120 qemu-system-x86_64 -accel tcg -m 256 -smp 1 -nographic -no-reboot \
		-monitor none -nic none -serial "file:$log_file" \
		-kernel "$kernel" -initrd "$initrd" \
		-append 'console=ttyS0 quiet panic=-1 vioscope.mode=boot' \
		</dev/null >/dev/null 2>&1 || true
	t1=$(date +%s.%N)
	grep -q '^VIOSCOPE-BOOT: OK' "$log_file" || return 1
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f\n", b - a }'
}

# A minimal busybox tree: /init only needs sh, mount and poweroff in boot mode.
populate_busybox() {
	local root=$1 applet
	mkdir -p "$root"/{usr/bin,usr/sbin,usr/lib,usr/lib64,proc,sys,dev,tmp,run,etc,root}
	ln -sfn usr/bin "$root/bin"
	ln -sfn usr/sbin "$root/sbin"
	ln -sfn usr/lib "$root/lib"
	ln -sfn usr/lib64 "$root/lib64"
	cp "$(command -v busybox)" "$root/usr/bin/busybox"
	while read -r applet; do
		[[ -e "$root/$applet" || -L "$root/$applet" ]] && continue
		mkdir -p "$root/$(dirname "$applet")"
		ln -s /usr/bin/busybox "$root/$applet"
	done < <("$root/usr/bin/busybox" --list-full)
	cp "$here/init.sh" "$root/init"
	chmod 0755 "$root/init"
	# The kernel's built-in initramfs already has /dev/console; add it anyway when we can.
	if [[ $(id -u) -eq 0 ]]; then
		mknod -m 600 "$root/dev/console" c 5 1 2>/dev/null || true
	fi
}

make_cpio() {
	local root=$1 out=$2
	(cd "$root" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) >"$out"
}

if [[ ! -f "$kdir/.done" ]]; then
	log "fetching kernel package $kpkg"
	rm -rf "$kdir"
	mkdir -p "$cache/kernel"
	tmp=$(mktemp -d "$cache/kernel/.tmp.XXXXXX")
	# apt-get download writes to the current directory, which its _apt sandbox user may not
	# reach.
	apt_opts=(-q)
	[[ $(id -u) -ne 0 ]] || apt_opts+=(-o APT::Sandbox::User=root)
	if ! (cd "$tmp" && apt-get download "${apt_opts[@]}" "$kpkg" >&2); then
		apt_update
		(cd "$tmp" && apt-get download "${apt_opts[@]}" "$kpkg" >&2) ||
			die "apt-get download $kpkg failed"
	fi
	deb=$(find "$tmp" -maxdepth 1 -name '*.deb' | head -n 1)
	[[ -n "$deb" ]] || die "apt-get download $kpkg produced no .deb"
	mkdir -p "$tmp/root"
	dpkg -x "$deb" "$tmp/root"
	rm -f "$deb"
	kver=$(find "$tmp/root/lib/modules" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' |
		head -n 1)
	[[ -n "$kver" && -f "$tmp/root/boot/vmlinuz-$kver" ]] ||
		die "$kpkg has no /boot/vmlinuz-<release>"
	# The .deb ships no modules.dep; the postinst would have run depmod.
	depmod -b "$tmp/root" "$kver"
	echo "$kver" >"$tmp/kver"
	ln -s "root/boot/vmlinuz-$kver" "$tmp/bzImage"

	# Prefer the uncompressed vmlinux (PVH entry, no in-guest decompression) if it boots and is
	# faster.
	kernel=bzImage
	bc=$tmp/bootcheck
	mkdir -p "$bc"
	populate_busybox "$bc/root"
	make_cpio "$bc/root" "$bc/initrd.cpio"
	if bz_s=$(boot_check "$tmp/bzImage" "$bc/initrd.cpio" "$bc/bz.log"); then
		log "bzImage boots to /init in ${bz_s}s"
	else
		tail -n 20 "$bc/bz.log" >&2 || true
		die "the kernel of $kpkg does not boot to /init under QEMU (log above)"
	fi
	if extract_vmlinux "$tmp/bzImage" "$tmp/vmlinux"; then
		if vm_s=$(boot_check "$tmp/vmlinux" "$bc/initrd.cpio" "$bc/vm.log"); then
			log "vmlinux boots to /init in ${vm_s}s"
			if awk -v a="$vm_s" -v b="$bz_s" 'BEGIN { exit !(a <= b) }'; then
				kernel=vmlinux
			fi
		else
			log "vmlinux does not boot; using the bzImage"
		fi
	else
		log "cannot extract vmlinux; using the bzImage"
	fi
	[[ $kernel == vmlinux ]] || rm -f "$tmp/vmlinux"
	echo "$kernel" >"$tmp/kernel"
	rm -rf "$bc"
	touch "$tmp/.done"
	mv "$tmp" "$kdir"
	tmp=
	log "kernel $kver ready ($kernel)"
fi
kver=$(cat "$kdir/kver")
kernel_file=$kdir/$(cat "$kdir/kernel")

# --- 3. initramfs -------------------------------------------------------------------------------
# Modules in load order, without repeats (modprobe prints shared dependencies once per module).
mapfile -t mod_paths < <(modprobe -d "$kdir/root" -S "$kver" --show-depends -a "${modules[@]}" |
	awk '$1 == "insmod" && !seen[$2]++ { print $2 }')
((${#mod_paths[@]})) || die "modprobe --show-depends found none of: ${modules[*]}"

# Binaries and every library they load, with the dynamic loader.
files=()
for b in "${guest_bins[@]}"; do
	files+=("$(command -v "$b")")
done
mapfile -t libs < <(for f in "${files[@]}"; do ldd "$f"; done |
	awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | sort -u)
files+=("${libs[@]}")

# Everything the image depends on, as content hashes of scripts and identities of host files.
inputs_hash=$(
	{
		echo "format 1 kernel $kpkg $kver lz4 $(command -v lz4 || true)"
		sha256sum "$here/prepare.sh" "$here/init.sh" "$here/guest-test.sh"
		stat -L -c '%n %s %Y' "${files[@]}" "${mod_paths[@]}" "$(command -v busybox)"
	} | sha256sum | cut -c1-16
)
# lz4 (legacy frame, as the kernel wants) boots ~0.5 s faster here than a raw cpio and is half the
# size; gzip/zstd are slower than raw because TCG decompresses slowly. Raw when lz4 is absent.
if command -v lz4 >/dev/null; then
	initrd=$cache/initramfs-$kver-$inputs_hash.cpio.lz4
else
	initrd=$cache/initramfs-$kver-$inputs_hash.cpio
fi

if [[ ! -f "$initrd" ]]; then
	log "building initramfs $(basename "$initrd")"
	tmp=$(mktemp -d "$cache/.initramfs.XXXXXX")
	root=$tmp/root
	populate_busybox "$root"
	for f in "${files[@]}"; do
		mkdir -p "$root$(dirname "$f")"
		cp -L "$f" "$root$f"
	done
	: >"$root/modules.list"
	for m in "${mod_paths[@]}"; do
		rel=${m#"$kdir/root"}
		mkdir -p "$root$(dirname "$rel")"
		cp "$m" "$root$rel"
		echo "$rel" >>"$root/modules.list"
	done
	cp "$here/guest-test.sh" "$root/test.sh"
	chmod 0755 "$root/test.sh"
	make_cpio "$root" "$tmp/initrd.cpio"
	if [[ $initrd == *.lz4 ]]; then
		lz4 -l -q -c "$tmp/initrd.cpio" >"$tmp/initrd.cpio.lz4"
		rm -f "$tmp/initrd.cpio"
	fi
	rm -f "$cache"/initramfs-*.cpio "$cache"/initramfs-*.cpio.lz4
	mv "$tmp/initrd.cpio"* "$initrd"
	rm -rf "$tmp"
	tmp=
	log "initramfs: $(du -h "$initrd" | cut -f1), ${#mod_paths[@]} modules," \
		"${#files[@]} binaries and libraries"
fi

{
	printf 'GUEST_KERNEL=%q\n' "$kernel_file"
	printf 'GUEST_INITRD=%q\n' "$initrd"
	printf 'GUEST_KVER=%q\n' "$kver"
} >"$cache/guest.env.tmp"
mv "$cache/guest.env.tmp" "$cache/guest.env"
echo "$cache/guest.env"
