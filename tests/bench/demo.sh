#!/bin/sh
# `vioscope demo` leaves no 1 GiB image behind: not when it finishes, not when it is
# interrupted as Ctrl-C would (SIGINT to its process group) in the middle of the table; and
# it keeps the image only when asked (--keep-image), saying where.
# Usage: demo.sh BUILD_DIR
set -eu
bin="$1/tools"
out=$(mktemp -d /tmp/vs-demo-test-XXXXXX)
pgid=""
cleanup() {
	if [ -n "$pgid" ]; then /bin/kill -KILL -- "-$pgid" 2>/dev/null || true; fi
	rm -rf "$out"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$out"/*.txt; do echo "--- $f:"; cat "$f"; done; exit 1; }
# Processes killed by a signal cannot remove their trace files: keep them in here.
mkdir "$out/trace"
export VIOSCOPE_TRACE_DIR="$out/trace"
# The image the demo says it made ("PATH (removed when ...)" / "PATH (kept afterwards)").
image_of() { sed -n 's/^\(.*vioscope-demo-.*\.img\) (\(removed when the demo ends\|kept afterwards\))\.$/\1/p' "$1"; }
# Poll for up to $1 tenths of a second until the command $2... succeeds.
wait_for() {
	n=$1
	shift
	while ! "$@"; do
		n=$((n - 1))
		[ "$n" -gt 0 ] || return 1
		sleep 0.1
	done
}

# 1. A whole (short) run: the image existed, and is gone afterwards.
VIOSCOPE_DEMO_DIR="$out/d1" "$bin/vioscope" demo --rounds 1 --time 0.2 > "$out/run1.txt" 2>&1 ||
	fail "the demo failed"
img=$(image_of "$out/run1.txt")
[ -n "$img" ] || fail "the demo did not say where its image is"
grep -q '^flavour  *|' "$out/run1.txt" || fail "no table"
[ ! -e "$img" ] || fail "$img left behind after a finished demo"

# 2. --keep-image: kept, 1 GiB, and the demo says where.
VIOSCOPE_DEMO_DIR="$out/d2" "$bin/vioscope" demo --rounds 1 --time 0.2 --keep-image \
	> "$out/run2.txt" 2>&1 || fail "the demo failed (--keep-image)"
img=$(image_of "$out/run2.txt")
[ -n "$img" ] && [ -f "$img" ] || fail "--keep-image: no image kept"
grep -qF "The 1 GiB image is kept: $img" "$out/run2.txt" || fail "--keep-image: not said where"
size=$(stat -c %s "$img")
rm -f "$img"
[ "$size" -eq 1073741824 ] || fail "--keep-image: the image has $size bytes"

# 3. Ctrl-C in the middle of the table: the demo and everything it started stop, and the
# image is gone.  The demo runs in its own process group, as a shell's foreground job (Ctrl-C
# not ignored, as this shell's background jobs have it).
VIOSCOPE_DEMO_DIR="$out/d3" setsid env --default-signal=INT "$bin/vioscope" demo --rounds 5 \
	--time 1 > "$out/run3.txt" 2>&1 &
pgid=$!
wait_for 600 grep -q 'vioscope-demo-.*\.img (removed' "$out/run3.txt" || fail "no image line"
img=$(image_of "$out/run3.txt")
filled() { [ "$(stat -c %s "$img" 2>/dev/null || echo 0)" -eq 1073741824 ]; }
wait_for 600 filled || fail "the image was never filled"
# The table's first runs are going (jobs of the demo: its session, groups of their own):
# interrupt them.
wait_for 600 pgrep -s "$pgid" -f ' bench --json ' > /dev/null || fail "no benchmark run started"
/bin/kill -INT -- "-$pgid"
# Exited: no such process, or a zombie waiting for this shell to reap it.
gone() { ! kill -0 "$pgid" 2>/dev/null || [ "$(cut -d' ' -f3 "/proc/$pgid/stat" 2>/dev/null)" = Z ]; }
wait_for 300 gone || fail "the demo did not stop within 30 s of SIGINT"
rc=0
wait "$pgid" || rc=$?
[ "$rc" -eq 130 ] || fail "the demo exited with $rc, not as killed by SIGINT (130)"
[ ! -e "$img" ] || fail "$img left behind after SIGINT"
nothing_left() { ! pgrep -s "$pgid" > /dev/null; }
wait_for 300 nothing_left || fail "processes of the demo still run 30 s after SIGINT"
pgid=""
echo "ok"
