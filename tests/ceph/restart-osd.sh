#!/usr/bin/env bash
# Crash and restart osd.0 of the cluster start.sh made (same VIOSCOPE_CEPH_DIR), for tests of an
# OSD going away under I/O.   Usage: restart-osd.sh [DOWN_SECONDS]   (default 0)
# SIGKILLs the OSD by its pid file, waits until every thread of it is gone (a new OSD started while
# the old threads still hold the pid-file and block-file locks dies at once), stays down
# DOWN_SECONDS, starts it again and waits until the monitor has the new instance up.
# Data survives: the OSD is BlueStore on a file. Exit 0 when the OSD is back up, 1 otherwise.
set -euo pipefail
self=restart-osd
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/ceph/lib.sh
. "$here/lib.sh"

down=${1:-0}
[[ -e $MARKER ]] || die "no cluster in $CEPH_DIR (run start.sh first)"

# "up_from" epoch of osd.0 when the monitor has it up, else nothing
up_from() { cephc osd dump | awk '$1 == "osd.0" && $2 == "up" { for (i = 3; i < NF; i++) if ($i == "up_from") print $(i + 1) }'; }

before=$(up_from) || die "cannot reach the monitor"
[[ -n $before ]] || die "osd.0 is not up"
pid=$(<"$CEPH_DIR/run/ceph-osd.0.pid")
is_ours "$pid" || die "pid $pid from ceph-osd.0.pid is not this cluster's OSD"

t0=$(date +%s%N)
ms() { echo $((($(date +%s%N) - t0) / 1000000)); }
kill -KILL "$pid"
wait_gone "$pid" "$TIMEOUT" || die "osd pid $pid still runs $TIMEOUT s after SIGKILL"
say "old osd (pid $pid) gone after $(ms) ms"
sleep "$down"

ceph-osd -c "$CONF" -i 0 </dev/null >>"$CEPH_DIR/log/setup.log" 2>&1 || die "ceph-osd did not start"
end=$((SECONDS + TIMEOUT))
until now=$(up_from) && [[ -n $now ]] && ((now > before)); do
	((SECONDS < end)) || {
		tail -n 20 "$CEPH_DIR/log/ceph-osd.0.log" >&2
		die "osd.0 not up again $TIMEOUT s after the restart"
	}
	sleep 0.1
done
say "osd.0 up again (epoch $now, was $before) $(ms) ms after the kill"
