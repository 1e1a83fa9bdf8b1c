#!/usr/bin/env bash
# The initiator's completion mode on this machine as it is: `--interrupt` (its completion
# thread sleeps until the target signals) against `--initiator-poll` (its threads spin on
# the used rings), in interleaved rounds (each round runs both, the order alternating), on a
# 1 GiB file in /dev/shm served by a target in event mode (the defaults otherwise).  Prints
# per mode and profile the median IOPS and p99.9 latency with their range over the rounds,
# the median of the per-round ratios interrupt / poll, and how long the polling threads
# waited for a CPU (the bench's `initiator_cpu_wait`: the share of the run they were
# runnable and not running) and in how many rounds that made the poller starved.
#
#   bench/initiator-mode.sh [BUILD_DIR] [ROUNDS] [SECONDS] [PROFILE...]
#
# Defaults: build, 7 rounds, 3 s, rnd4k-q1t1 rnd4k-q32t1 seq1m-q8t1.  Run it on a machine
# as loaded as the one you care about: the point is what each mode does under that load.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rounds=${2:-7}
secs=${3:-3}
shift $(($# < 3 ? $# : 3))
profiles=("$@")
((${#profiles[@]})) || profiles=(rnd4k-q1t1 rnd4k-q32t1 seq1m-q8t1)
exe="$build/tools/vioscope"
[[ -x "$exe" ]] || { echo "no $exe: build first" >&2; exit 2; }
work=$(mktemp -d /tmp/vs-initiator-mode.XXXXXX)
img=$(mktemp /dev/shm/vs-initiator-mode-XXXXXX.img)
trap 'rm -rf "$work" "$img"' EXIT
dd if=/dev/urandom of="$img" bs=1M count=1024 status=none

popts=()
for p in "${profiles[@]}"; do popts+=(--profile "$p"); done
modes=(interrupt initiator-poll)
echo "$(date -u '+%F %H:%M') UTC, $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)," \
	"$rounds rounds x ${#profiles[@]} profiles x $secs s" >&2
for ((r = 0; r < rounds; r++)); do
	for ((k = 0; k < 2; k++)); do
		m=${modes[$(((k + r) % 2))]}
		"$exe" bench --target "file=$img" "${popts[@]}" --time "$secs" --json --no-progress \
			"--$m" > "$work/$r-$m.json" || echo "round $r $m: bench exited $?" >&2
	done
	echo "round $((r + 1))/$rounds done, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
done
python3 - "$work" "$rounds" "${profiles[@]}" <<'EOF'
import json, statistics, sys
work, rounds, profiles = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
runs = {}
for r in range(rounds):
    for m in ("interrupt", "initiator-poll"):
        try:
            for x in json.load(open(f"{work}/{r}-{m}.json"))["results"]:
                runs.setdefault((m, x["profile"]), {})[r] = x
        except (OSError, ValueError, KeyError):
            pass
def rng(v, f):
    return f"{f(statistics.median(v))} ({f(min(v))}-{f(max(v))})" if v else "-"
k = lambda v: f"{v / 1000:.1f}k"
ms = lambda v: f"{v / 1000:.2f} ms"
print(f"{'profile':13} {'mode':15} {'IOPS median (range)':28} {'p99.9 median (range)':32} waited for a CPU (starved rounds)")
for p in profiles:
    for m in ("interrupt", "initiator-poll"):
        xs = list(runs.get((m, p), {}).values())
        iops = [x["iops"] for x in xs]
        p999 = [x["p999_us"] for x in xs]
        wait = [x["initiator_cpu_wait"] for x in xs if "initiator_cpu_wait" in x]
        starved = sum(1 for x in xs if x.get("starved"))
        w = f"{100 * statistics.median(wait):.0f}% ({100 * min(wait):.0f}-{100 * max(wait):.0f}%), {starved} of {len(xs)}" if wait else "-"
        print(f"{p:13} {m:15} {rng(iops, k):28} {rng(p999, ms):32} {w}")
    a, b = runs.get(("interrupt", p), {}), runs.get(("initiator-poll", p), {})
    ratios = [a[r]["iops"] / b[r]["iops"] for r in a if r in b and b[r]["iops"] > 0]
    if ratios:
        print(f"{p:13} interrupt / poll IOPS, median of {len(ratios)} per-round ratios: "
              f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})")
EOF
