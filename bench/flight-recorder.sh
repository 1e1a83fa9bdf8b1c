#!/usr/bin/env bash
# Hot tracing on, flight recorder (rings only, nothing attached), against `off`: event
# mode, RAM 1 GiB, RND4K Q32T1.  Each round runs `off`, then the `all` flavour once per
# trace spec, so every spec meets the same moments of a noisy machine as its `off`; prints
# per spec the median and range of IOPS and the median and interquartile range of the
# per-round ratio to `off`.
#
#   bench/flight-recorder.sh [BUILD_DIR] [ROUNDS] [SECONDS] [SPEC...]
#
# e.g. bench/flight-recorder.sh build 12 3 verbose:all verbose:stage
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rounds=${2:-12}
secs=${3:-3}
shift $(($# < 3 ? $# : 3))
specs=("$@")
[[ ${#specs[@]} -gt 0 ]] || specs=(verbose:all verbose:stage)
for f in off all; do
	[[ -x "$build/tools/vioscope-$f" ]] || { echo "no $build/tools/vioscope-$f: build first" >&2; exit 2; }
done

out=$(mktemp /tmp/vs-flight.XXXXXX)
trap 'rm -f "$out"' EXIT
iops() { # iops EXE [SPEC]: one run's IOPS
	# --initiator-poll: the mode its figures were measured in (the default until issue 24)
	VIOSCOPE_TRACE=${2:-} "$1" bench --target ram=1G --profile rnd4k-q32t1 --time "$secs" \
		--json --no-progress --initiator-poll | python3 -c 'import json,sys; print(json.load(sys.stdin)["results"][0]["iops"])'
}

iops "$build/tools/vioscope-off" >/dev/null # unmeasured: the first run after a quiet spell is slow
for ((r = 1; r <= rounds; r++)); do
	echo "$r off $(iops "$build/tools/vioscope-off")" >>"$out"
	for s in "${specs[@]}"; do
		echo "$r $s $(iops "$build/tools/vioscope-all" "$s")" >>"$out"
	done
	echo "round $r/$rounds done" >&2
done

python3 - "$out" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    r, spec, iops = line.split()
    runs.setdefault(spec, {})[int(r)] = float(iops)
def quart(v):
    q = statistics.quantiles(v, n=4) if len(v) > 1 else [v[0]] * 3
    return q[0], q[2]
off = runs.pop("off")
print(f"{'':16} {'IOPS median':>12} {'min':>10} {'max':>10} {'ratio median':>13} {'IQR':>12}")
v = list(off.values())
print(f"{'off':16} {statistics.median(v):>12.0f} {min(v):>10.0f} {max(v):>10.0f}")
for spec, by_round in runs.items():
    v = list(by_round.values())
    ratios = [by_round[r] / off[r] for r in by_round if off.get(r)]
    lo, hi = quart(ratios)
    print(f"{'all ' + spec:16} {statistics.median(v):>12.0f} {min(v):>10.0f} {max(v):>10.0f} "
          f"{statistics.median(ratios):>13.3f} {lo:>5.3f}-{hi:.3f}")
PY
