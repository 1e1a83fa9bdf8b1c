#!/usr/bin/env bash
# The install and the example, as a user meets them (CI runs this after the build):
# `cmake --install` the build tree into a scratch prefix, build examples/ out of tree
# against it, with CMake (find_package) and with make (pkg-config), then run kvdemo
# while the installed `vioscope trace record` records it, and decode the capture.
#   scripts/test-examples.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
build=$(cd "${1:-build}" && pwd)
work=$(mktemp -d /tmp/vioscope-examples.XXXXXX)
kv=""
rec=""
cleanup() {
	[[ -n "$rec" ]] && kill "$rec" 2>/dev/null && wait "$rec" 2>/dev/null
	[[ -n "$kv" ]] && kill "$kv" 2>/dev/null && wait "$kv" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "test-examples: $*" >&2; exit 1; }

prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
for f in include/vioscope/trace.h include/vioscope/trace_impl.h \
	include/vioscope/target.h include/vioscope/initiator.h \
	lib/libvioscope_trace.a lib/libvioscope_trace.so lib/libvioscope_target-cold.a \
	lib/libvioscope_initiator-cold.a lib/cmake/vioscope/vioscopeConfig.cmake \
	lib/pkgconfig/vioscope-trace-cold.pc lib/pkgconfig/vioscope-target-cold.pc bin/vioscope; do
	[[ -e "$prefix/$f" ]] || fail "cmake --install did not place $f"
done

# Out of tree, from a copy of examples/ alone: nothing of the source tree is reachable.
cp -r "$src/examples" "$work/src"
cmake -S "$work/src" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" \
	-DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$work/cmake-build" >/dev/null
PKG_CONFIG_PATH=$prefix/lib/pkgconfig make -s -C "$work/src" >/dev/null
[[ -x "$work/src/kvdemo" ]] || fail "the pkg-config build made no kvdemo"
printf 'put a 1\nget a\n' | "$work/src/kvdemo" | tr '\n' ' ' | grep -q '^ok 1 $' ||
	fail "the pkg-config build of kvdemo does not work"
# The target and the initiator as libraries: a write read back through both, each build.
for b in "$work/src/loopback" "$work/cmake-build/loopback"; do
	VIOSCOPE_TRACE_DIR=$work "$b" | grep -q '4096 bytes written and read back' ||
		fail "$b (target.h and initiator.h, installed) did not read back what it wrote"
done

# Run kvdemo (the CMake build) on commands from a FIFO; record it with the installed
# tool; feed the commands; the recording ends when kvdemo exits.
export VIOSCOPE_TRACE_DIR=$work/trace
mkdir "$VIOSCOPE_TRACE_DIR"
vioscope=$prefix/bin/vioscope
mkfifo "$work/in"
"$work/cmake-build/kvdemo" <"$work/in" >"$work/out" 2>"$work/err" &
kv=$!
exec 3>"$work/in"
for _ in $(seq 100); do [[ -e "$VIOSCOPE_TRACE_DIR/vioscope-trace-$kv" ]] && break; sleep 0.1; done
"$vioscope" trace record "$kv" -o "$work/run.vst" --enable verbose:all 2>"$work/rec.err" 3>&- &
rec=$!
for _ in $(seq 100); do
	"$vioscope" trace show "$kv" 2>/dev/null | grep -q "recording: by pid $rec" && break
	sleep 0.1
done
"$vioscope" trace show "$kv" | grep -q "recording: by pid $rec" || fail "the recorder did not attach"
printf 'put apple red\nput pear green\nget apple\nget plum\ndel pear\nfrobnicate\n' >&3
exec 3>&-
wait "$kv" || fail "kvdemo failed: $(cat "$work/err")"
kv=""
wait "$rec" || fail "trace record failed: $(cat "$work/rec.err")"
rec=""
[[ "$(tr '\n' ' ' <"$work/out")" == "ok ok red (none) deleted ? put KEY VALUE | get KEY | del KEY " ]] ||
	fail "kvdemo printed: $(cat "$work/out")"

"$vioscope" trace decode "$work/run.vst" >"$work/decoded"
expect() {
	grep -qF -- "$1" "$work/decoded" || { cat "$work/decoded" >&2; fail "no '$1' in the decoded trace"; }
}
expect " VERB  kv.PUT         kv_put: put 'apple': 3 bytes 726564"
expect " VERB  kv.GET         kv_get: get 'apple': 3 bytes"
expect " INFO  kv.GET         kv_get: get 'plum': no such key"
expect " VERB  kv.DEL         kv_del: del 'pear'"
expect " INFO  kvdemo.CMD     main: line 6: frobnicate "
expect " ERROR kvdemo.CMD     main: line 6: cannot parse 'frobnicate'"
expect " INFO  kv.MEMORY      kv_close: close: 1 entries freed"
"$vioscope" trace decode "$work/run.vst" --flag kv.get >"$work/decoded"
[[ $(wc -l <"$work/decoded") -eq 2 ]] || fail "--flag kv.get: $(cat "$work/decoded")"
echo "test-examples: installed, built out of tree (CMake and pkg-config), recorded, decoded, loopback: ok"
