#!/bin/sh
# check_bench_peers.sh VIOSCOPE
#
# Scenario: `vioscope bench trace --peers` runs our two-integer event, fprintf and an
# LTTng-UST tracepoint with two integer fields in the same rounds, with a session
# daemon of its own.  Asserted: the peers table has a row for each, each with a ratio
# to ours; the LTTng tracepoint was enabled in the measuring process (a session that
# never enabled it leaves the row out); the daemon it started is gone afterwards.
# Skipped (77) only when LTTng is not installed: no lttng-sessiond or lttng, or the
# peer's module was not built (no liblttng-ust-dev).
set -u
cli=$1
module=$(dirname "$cli")/libvioscope_bench_lttng.so
for tool in lttng-sessiond lttng; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "SKIP: $tool is not installed (lttng-tools; scripts/deps.sh installs it)"
		exit 77
	fi
done
if [ ! -e "$module" ]; then
	echo "SKIP: $module was not built (liblttng-ust-dev was missing at configure time)"
	exit 77
fi

out=$(mktemp)
trap 'rm -f "$out"' EXIT
daemons() { pgrep -x lttng-sessiond | wc -l; }
before=$(daemons)
# short: 3 rounds of 40000 events (4000 for the slow cases), no callgrind, no recorder
if ! timeout 300 "$cli" bench trace --peers --rounds 3 --events 40000 --no-callgrind \
	--no-sustained >"$out" 2>&1; then
	echo "FAIL: bench trace --peers exited with an error:"
	cat "$out"
	exit 1
fi
status=0
# a row: name, ns median, ns min-max, ratio to ours (a number), instr, ratio
row() {
	if ! sed -n '/^two integers: peers/,$p' "$out" |
		grep -Eq "^$1 +[0-9]+\.[0-9]+ +[0-9.]+-[0-9.]+ +[0-9]+\.[0-9]+ "; then
		echo "FAIL: no '$1' row with a ratio to ours in the peers table"
		status=1
	fi
}
row binary-2-ints
row fprintf-file
row lttng-ust-2-ints
if ! grep -q '^lttng-ust-2-ints: tracepoint vioscope_bench:two_ints, enabled in this process' \
	"$out"; then
	echo "FAIL: no word that the LTTng-UST tracepoint was enabled when measured"
	status=1
fi
after=$(daemons)
if [ "$after" -gt "$before" ]; then
	echo "FAIL: a session daemon was left running ($before before, $after after)"
	status=1
fi
if [ $status -ne 0 ]; then
	echo "--- output:"
	cat "$out"
fi
exit $status
