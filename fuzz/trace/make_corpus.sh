#!/bin/sh
# Regenerate the seed captures in corpus_capture_decode/ from a build tree:
#   fuzz/trace/make_corpus.sh BUILD_DIR
# Small valid captures of the trace test workload (tests/trace/workload.c), named
# without the .vstrace extension (.gitignore drops those):
#   kinds-cold   one event of each argument kind, a cut string (cold flavour)
#   kinds-all    the same with hot-path sites and an inline helper's caller (all)
#   flight-2t    two threads, 4 KiB rings overwritten: LOSS counts, merged streams
set -eu
build=$(cd "$1" && pwd)
out=$(cd "$(dirname "$0")" && pwd)/corpus_capture_decode
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export VIOSCOPE_TRACE_DIR="$dir" VIOSCOPE_TRACE_KEEP=1 VIOSCOPE_TRACE=verbose:all
cli=$build/tools/vioscope
wl=$build/tests/trace/trace_workload

capture() { # NAME FLAVOUR ARGS...
	name=$1 flavour=$2
	shift 2
	"$wl-$flavour" "$@" &
	pid=$!
	wait $pid
	VIOSCOPE_TRACE_KEEP=0 "$cli" trace dump $pid -o "$out/$name" 2>/dev/null
	rm -f "$dir/vioscope-trace-$pid"
}
mkdir -p "$out"
capture kinds-cold cold kinds
capture kinds-all all kinds
VIOSCOPE_TRACE_RING=4096 capture flight-2t cold seq -n 150 -t 2
ls -l "$out"
