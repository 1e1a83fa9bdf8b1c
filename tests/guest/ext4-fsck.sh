#!/bin/sh
# A crash state of an ext4 file system checked as the kernel would find it when mounting it:
# the journal replayed first (e2fsck -E journal_only, which changes the image: `vioscope check
# flush` gives each crash state its own copy), then a full read-only check, whose exit status
# is the verdict (0 clean, 4 errors found).
# usage: ext4-fsck.sh IMAGE
img=$1
replay=$(e2fsck -E journal_only -y "$img" 2>&1)
rc=$?
if [ "$rc" -gt 1 ]; then
	printf '%s\n' "$replay"
	echo "journal replay failed (e2fsck exit $rc)"
	exit "$rc"
fi
exec e2fsck -fn "$img"
