#!/usr/bin/env bash
# Stop the cluster start.sh made (same VIOSCOPE_CEPH_DIR) and remove its directory.
# Daemons are found by their pid files only, SIGKILLed, and waited for until every thread is gone.
# Exit 0 also when there is no cluster; 1 if a daemon would not die or the directory is not ours.
set -euo pipefail
self=stop
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/ceph/lib.sh
. "$here/lib.sh"

[[ -e $CEPH_DIR ]] || exit 0
[[ -e $MARKER ]] || die "$CEPH_DIR was not made by start.sh (no ${MARKER##*/}): not touching it"
kill_daemons || die "daemons still running; $CEPH_DIR kept"
rm -rf -- "$CEPH_DIR"
