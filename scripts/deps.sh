#!/usr/bin/env bash
# Install what vioscope needs to build, test and benchmark, from Debian's archive.
# Idempotent: installs only what is missing.  Usage: scripts/deps.sh [--guest] [--ceph]
#   --guest  also what the QEMU guest test needs (qemu, busybox, sg3-utils, fio, e2fsprogs ...)
#   --ceph   also the single-host Ceph cluster of the ceph tests (tests/ceph/start.sh)
set -euo pipefail

pkgs=(build-essential cmake pkg-config clang libclang-rt-dev libcmocka-dev liburing-dev
      valgrind binutils fio clang-format liblttng-ust-dev lttng-tools procps librbd-dev libxml2-utils
      babeltrace2 python3 libjansson-dev man-db systemd)
for arg in "$@"; do
	case "$arg" in
	--guest) pkgs+=(qemu-system-x86 qemu-utils busybox-static sg3-utils kmod cpio xz-utils lz4
			e2fsprogs) ;;
	--ceph) pkgs+=(ceph-mon ceph-mgr ceph-osd ceph-common) ;;
	*)
		echo "usage: scripts/deps.sh [--guest] [--ceph]" >&2
		exit 2
		;;
	esac
done

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
	echo "deps: installing ${missing[*]}"
	SUDO=""
	[[ $(id -u) -ne 0 ]] && SUDO="sudo"
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
