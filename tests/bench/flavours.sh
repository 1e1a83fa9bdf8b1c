#!/bin/sh
# `vioscope bench --flavours` run for real, briefly, on a null target (no memory to fault in):
# the table's shape (a header, one row per flavour with median ±spread cells and a ratio column whose marks follow
# the rule, the legend) and its SVG (well-formed, one bar per row and column).
# Usage: flavours.sh BUILD_DIR
set -eu
bin="$1/tools"
out=$(mktemp -d /tmp/vs-flavours-test-XXXXXX)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; echo "--- output:"; cat "$out/table.txt"; exit 1; }

"$bin/vioscope" bench --flavours --rounds 5 --time 0.2 --target null=1G --svg "$out/t.svg" \
	> "$out/table.txt"
cat "$out/table.txt"
grep -q '^flavour  *| SEQ1M Q8T1 MiB/s | RND4K Q32T16 MiB/s | *IOPS | *us | x off (col 1 / col 2)$' \
	"$out/table.txt" || fail "header"
cell=' +[0-9]+(\.[0-9])? ±[0-9]+\.[0-9]% \|'
for f in off cold 'all (hot off)' cold-print 'all (hot on, recorded)'; do
	line=$(grep -F "$f " "$out/table.txt" | grep -v '^flavour' | head -n1)
	[ -n "$line" ] || fail "no row for $f"
	printf '%s\n' "$line" | grep -Eq "^$(printf '%s' "$f" | sed 's/[()]/\\&/g') +\|($cell){4} ([0-9]+\.[0-9]{3}|  n/a) [~? ] / ([0-9]+\.[0-9]{3}|  n/a)( [~?])?( +\([0-9]+ trace events lost\))?$" ||
		fail "row of $f: $line"
done
# off against itself: every per-round ratio is 1.0, never a difference: `~`, or `?` when a
# machine too busy to complete a request in some rounds left fewer than 5 to judge by.
grep -Eq '^off +\|.*\| (1\.000 [~?]|  n/a \?) / (1\.000 [~?]|  n/a \?)$' "$out/table.txt" ||
	fail "off against itself is marked as a difference"
grep -q '^~ within the noise (the ratio.s 90% interval over the rounds holds 1.0)' "$out/table.txt" ||
	fail "legend"
xmllint --noout "$out/t.svg" || fail "SVG not well-formed"
bars=$(grep -c '<rect x=' "$out/t.svg")
[ "$bars" -eq 10 ] || fail "$bars bars in the SVG, expected 2 x 5"
echo "ok"
