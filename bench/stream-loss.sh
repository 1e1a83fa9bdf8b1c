#!/usr/bin/env bash
# Hot tracing on and streamed to capture files: events lost against the request rate.
#
#   bench/stream-loss.sh [VIOSCOPE_ALL] [ROUNDS] [SECONDS] [DEPTHS...]
#
# Runs `VIOSCOPE_TRACE=verbose:all vioscope-all bench --target ram=1G --record DIR` for
# RND4K at each queue depth (one thread; default 1 2 4 8 16 32: the load rises with the
# depth), ROUNDS times each, depths interleaved within a round, and prints per depth the
# median and range of IOPS and the events lost over all rounds (the recorders' own count,
# from their captures), then the highest median rate at which no round lost anything.
# The captures are deleted after each run.
set -euo pipefail
cd "$(dirname "$0")/.."
exe=${1:-build/tools/vioscope-all}
rounds=${2:-3}
secs=${3:-3}
shift $(($# < 3 ? $# : 3))
depths=("$@")
[[ ${#depths[@]} -gt 0 ]] || depths=(1 2 4 8 16 32)
[[ -x "$exe" ]] || { echo "no $exe: build first" >&2; exit 2; }

work=$(mktemp -d /tmp/vs-stream-loss.XXXXXX)
trap 'rm -rf "$work"' EXIT

run() { # run DEPTH -> "iops lost"
	local dir="$work/rec"
	rm -rf "$dir"
	VIOSCOPE_TRACE=${VIOSCOPE_TRACE:-verbose:all} "$exe" bench --target ram=1G --profile "rnd4k-q$1t1" \
		--time "$secs" --record "$dir" --json --no-progress --initiator-poll 2>"$work/err" |
		python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["results"][0]["iops"], d.get("trace_lost", 0))' ||
		{ cat "$work/err" >&2; exit 1; }
	rm -rf "$dir"
}

run 1 >/dev/null # unmeasured: the first run after a quiet spell is slow
for r in $(seq "$rounds"); do
	for q in "${depths[@]}"; do
		echo "$q $(run "$q")" >>"$work/results"
	done
done

python3 - "$work/results" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    q, iops, lost = line.split()
    rows.setdefault(int(q), []).append((float(iops), int(float(lost))))
best, clean = None, True
print(f"{'depth':>5} {'IOPS median':>12} {'min':>10} {'max':>10} {'lost':>10} rounds")
for q in sorted(rows):
    iops = [i for i, _ in rows[q]]
    lost = sum(l for _, l in rows[q])
    med = statistics.median(iops)
    print(f"{q:>5} {med:>12.0f} {min(iops):>10.0f} {max(iops):>10.0f} {lost:>10} {len(iops)}")
    clean = clean and lost == 0
    if clean:
        best = (q, med)
# Nothing lost at this depth and at every lower one: a rate that lost nothing only by
# luck while a lower one lost is not reported as safe.
if best:
    print(f"nothing lost in any round up to depth {best[0]}: {best[1]:.0f} IOPS (median)")
else:
    print("events were lost already at the lowest depth")
PY
