#!/usr/bin/env bash
# The ceph tests' runner (tests/ceph/CMakeLists.txt).  PATHFILE holds the path of the
# cluster's ceph.conf while the cluster ceph.start made is up.
#   ctest-run.sh PATHFILE --start                 start.sh; PATHFILE on success (exit 0/1/77)
#   ctest-run.sh PATHFILE --stop                  stop.sh; PATHFILE removed
#   ctest-run.sh PATHFILE [--image SIZE VAR] CMD...
#       CMD with CEPH_CONF set (77 when there is no cluster); with --image, a fresh image
#       of SIZE in pool rbd named in VAR as "rbd/NAME,conf=PATH", removed afterwards.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
pathfile=$1
shift
case "${1:-}" in
--start)
	rm -f "$pathfile"
	conf=$("$here/start.sh" | tail -n 1)
	rc=$?
	((rc == 0)) && printf '%s\n' "$conf" >"$pathfile"
	exit "$rc"
	;;
--stop)
	rm -f "$pathfile"
	exec "$here/stop.sh"
	;;
esac
if [[ ! -s $pathfile ]]; then
	echo "ceph test: SKIP: no Ceph cluster (ceph.start did not start one: see its output)"
	exit 77
fi
CEPH_CONF=$(<"$pathfile")
export CEPH_CONF
image=
if [[ ${1:-} == --image ]]; then
	image=vs-ctest-$$-$RANDOM
	rbd create "rbd/$image" --size "$2" || exit 1
	export "$3=rbd/$image,conf=$CEPH_CONF"
	shift 3
fi
"$@"
rc=$?
if [[ -n $image ]]; then
	rbd rm --no-progress "rbd/$image" || echo "ceph test: could not remove rbd/$image" >&2
fi
exit "$rc"
