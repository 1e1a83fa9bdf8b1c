#!/usr/bin/env bash
# `vioscope bench --fio` in interleaved rounds: each round runs every profile through the
# target, then through fio on the same storage (file= or rbd=), so both see the same moments of
# a noisy machine.  Prints, per profile, the median and the range (min-max) of both and the
# median of the per-round ratios; then the CPU time per request (median, min-max) of the
# initiator, the embedded target and fio, where the runs reported it.
# usage: bench/rounds.sh VIOSCOPE ROUNDS SECONDS SPEC PROFILE... [-- BENCH_OPTIONS...]
#   e.g. bench/rounds.sh build/tools/vioscope 5 10 rbd=rbd/bench,conf=$CEPH_CONF \
#          rnd4k-q32t1 seq1m-q8t1 -- --queues 1
set -euo pipefail
[[ $# -ge 5 ]] || {
	sed -n '6,8p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}
vioscope=$1 rounds=$2 secs=$3 spec=$4
shift 4
profiles=() opts=()
while (($#)) && [[ $1 != -- ]]; do
	profiles+=(--profile "$1")
	shift
done
(($#)) && shift && opts=("$@")
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((r = 1; r <= rounds; r++)); do
	"$vioscope" bench --target "$spec" "${profiles[@]}" --time "$secs" --fio --json \
		"${opts[@]}" 2>/dev/null | sed -n "s/^ *{\"profile\"/$r {\"profile\"/p" >>"$out"
	echo "round $r/$rounds done" >&2
done
# lines: ROUND {"profile": "P", "rw": "read|write|fio-r|fio-w", "mib_s": X, "iops": Y, ...}
awk -v rounds="$rounds" '
function num(s, k,   m) { return match(s, "\"" k "\": [0-9.]+") ? substr(s, RSTART + length(k) + 4, RLENGTH - length(k) - 4) + 0 : 0 }
function str(s, k) { match(s, "\"" k "\": \"[^\"]*\""); return substr(s, RSTART + length(k) + 5, RLENGTH - length(k) - 6) }
function median(a, n,   i, j, t) {
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{
	p = str($0, "profile"); kind = str($0, "rw") ~ /^fio/ ? "fio" : "vs"
	v[p, kind, $1] = str($0, "profile") ~ /^seq/ ? num($0, "mib_s") : num($0, "iops")
	if ($0 ~ /"cpu_us"/) cpu[p, kind == "fio" ? "fio" : "initiator", $1] = num($0, "cpu_us")
	if ($0 ~ /"target_cpu_us"/) cpu[p, "target", $1] = num($0, "target_cpu_us")
	if ($0 ~ /"initiator": "/) mode[p] = str($0, "initiator")
	if (!(p in seen)) { seen[p] = 1; order[++np] = p }
}
END {
	printf "%-14s %-6s %12s %22s %12s %22s %8s %16s\n", "profile", "unit", "vioscope", "(min-max)", "fio", "(min-max)", "ratio", "ratio (min-max)"
	for (i = 1; i <= np; i++) {
		p = order[i]; n = 0
		for (r = 1; r <= rounds; r++) if (((p, "vs", r) in v) && ((p, "fio", r) in v)) {
			n++; a[n] = v[p, "vs", r]; b[n] = v[p, "fio", r]; c[n] = b[n] ? a[n] / b[n] : 0
		}
		if (!n) continue
		amin = amax = a[1]; bmin = bmax = b[1]; cmin = cmax = c[1]
		for (k = 2; k <= n; k++) {
			if (a[k] < amin) amin = a[k]; if (a[k] > amax) amax = a[k]
			if (b[k] < bmin) bmin = b[k]; if (b[k] > bmax) bmax = b[k]
			if (c[k] < cmin) cmin = c[k]; if (c[k] > cmax) cmax = c[k]
		}
		printf "%-14s %-6s %12.1f %10.1f-%-11.1f %12.1f %10.1f-%-11.1f %8.2f %7.2f-%-8.2f (%d rounds)\n", p, p ~ /^seq/ ? "MiB/s" : "IOPS", median(a, n), amin, amax, median(b, n), bmin, bmax, median(c, n), cmin, cmax, n
	}
	split("initiator target fio", who, " ")
	for (i = 1; i <= np; i++) for (w = 1; w <= 3; w++) {
		p = order[i]; n = 0
		for (r = 1; r <= rounds; r++) if ((p, who[w], r) in cpu) a[++n] = cpu[p, who[w], r]
		if (!n) continue
		amin = amax = a[1]
		for (k = 2; k <= n; k++) { if (a[k] < amin) amin = a[k]; if (a[k] > amax) amax = a[k] }
		printf "%-14s CPU per request, %-9s %s %8.1f us (%.1f-%.1f, %d rounds)\n", p, who[w], who[w] == "initiator" ? sprintf("%-9s", "(" mode[p] ")") : sprintf("%-9s", ""), median(a, n), amin, amax, n
	}
}' "$out"
