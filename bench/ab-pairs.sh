#!/usr/bin/env bash
# Two builds' IOPS in interleaved pairs (A B A B ...), RAM 1 GiB, RND4K Q32T1, poll mode:
# prints each build's median and range and the median (interquartile range) of the
# per-pair ratios A/B.  Used for the statistics' cost (docs/PERFORMANCE.md).
#
#   [A_ARGS=...] [B_ARGS=...] bench/ab-pairs.sh PAIRS A_VIOSCOPE B_VIOSCOPE [extra bench arguments]
#
# MODE: the completion modes (default "--poll --initiator-poll"; MODE="": bench's defaults).
# A_ARGS / B_ARGS: bench arguments for one side only (one build against itself with and
# without an option: A_ARGS=--dirty-log, the cost of a live migration's log phase).
set -euo pipefail
read -r -a a_args <<<"${A_ARGS:-}"
read -r -a b_args <<<"${B_ARGS:-}"
n=$1 a=$2 b=$3
shift 3
out=$(mktemp /tmp/vs-ab-pairs.XXXXXX)
trap 'rm -f "$out"' EXIT
iops() {
	# --initiator-poll: the mode this file's figures were measured in (the default until
	# issue 24)
	# MODE="" : the target's event mode and completions by interrupt (bench's defaults:
	# what a loaded machine wants)
	# shellcheck disable=SC2086 # MODE is a list of options
	timeout 60 "$1" bench --target ram=1G --profile rnd4k-q32t1 --time 3 ${MODE---poll --initiator-poll} \
		--json --no-progress "${@:2}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["results"][0]["iops"])'
}
# One unmeasured pair first: the first run after a quiet spell is slow whichever build it is.
iops "$a" "${a_args[@]}" "$@" >/dev/null
iops "$b" "${b_args[@]}" "$@" >/dev/null
for _ in $(seq "$n"); do
	echo "A $(iops "$a" "${a_args[@]}" "$@")" >>"$out"
	echo "B $(iops "$b" "${b_args[@]}" "$@")" >>"$out"
done
python3 - "$out" "$a" "$b" "${A_ARGS:-}" "${B_ARGS:-}" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
a = [float(v) for k, v in rows if k == "A"]
b = [float(v) for k, v in rows if k == "B"]
r = sorted(x / y for x, y in zip(a, b))
q = lambda p: r[min(len(r) - 1, int(p * len(r)))]
print(f"A {sys.argv[2]} {sys.argv[4]}: median {st.median(a):.0f} ({min(a):.0f}-{max(a):.0f})")
print(f"B {sys.argv[3]} {sys.argv[5]}: median {st.median(b):.0f} ({min(b):.0f}-{max(b):.0f})")
print(f"{len(r)} pairs, A/B median {st.median(r):.3f} (IQR {q(.25):.3f}-{q(.75):.3f}), "
      f"A faster in {sum(x > 1 for x in r)}")
PY
