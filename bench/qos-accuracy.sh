#!/usr/bin/env bash
# QoS accuracy: a target with a RAM LUN limited to each IOPS figure (--qos 0:iops=N, the
# default burst: a tenth of a second's worth) driven by `vioscope bench` RND4K Q32T1 for
# SECONDS; prints the achieved IOPS against the limit, and the time the target counted as
# throttled.  Q32 keeps the limit the only bound: the LUN alone does far more.
#
#   bench/qos-accuracy.sh [BUILD_DIR] [SECONDS] [LIMITS...]   (default: 10 s; 100 1000 50000)
#   QOS_SCOPE=all bench/qos-accuracy.sh ...   the limit set on the controller over all its
#   LUNs instead (--qos all:iops=N; its throttled time from controller_list)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
secs=${2:-10}
shift 2 || shift $#
limits=("$@")
scope=${QOS_SCOPE:-lun}
lun_of=0
[[ $scope == all ]] && lun_of=all
((${#limits[@]})) || limits=(100 1000 50000)
exe="$build/tools/vioscope"
[[ -x "$exe" ]] || { echo "no $exe: build first" >&2; exit 2; }
work=$(mktemp -d /tmp/vs-qos-accuracy.XXXXXX)
pid=
cleanup() {
	[[ -n "$pid" ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

printf '%10s %12s %8s %14s\n' limit achieved ratio throttled_s
for limit in "${limits[@]}"; do
	sock="$work/vs.sock" rpc="$work/rpc.sock"
	"$exe" target --socket "$sock" --rpc "$rpc" --lun 0:ram=64M --qos "$lun_of:iops=$limit" \
		2>"$work/target.log" &
	pid=$!
	for _ in $(seq 100); do [[ -S "$sock" && -S "$rpc" ]] && break; sleep 0.1; done
	iops=$("$exe" bench --socket "$sock" --profile rnd4k-q32t1 --time "$secs" --json \
		--no-progress | python3 -c 'import json,sys; print(json.load(sys.stdin)["results"][0]["iops"])')
	if [[ $scope == all ]]; then
		thr=$("$exe" rpc --socket "$rpc" controller_list | python3 -c \
			'import json,sys; print(json.load(sys.stdin)[0]["throttled_ns"] / 1e9)')
	else
		thr=$("$exe" rpc --socket "$rpc" stats | python3 -c \
			'import json,sys; print(json.load(sys.stdin)["luns"][0]["throttled_ns"] / 1e9)')
	fi
	kill "$pid"
	wait "$pid" || true
	pid=
	python3 -c "import sys; l, a, t = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]); \
print('%10d %12.1f %8.4f %14.1f' % (l, a, a / l, t))" "$limit" "$iops" "$thr"
done
