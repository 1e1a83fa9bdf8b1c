#!/bin/sh
# Regenerate the seed captures in corpus_capture_decode/ from a build tree:
#   fuzz/trace/make_corpus.sh BUILD_DIR
# Small valid captures of the trace test workload (tests/trace/workload.c), named
# without the .vstrace extension (.gitignore drops those):
#   kinds-cold   one event of each argument kind, a cut string (cold flavour)
#   kinds-all    the same with hot-path sites and an inline helper's caller (all)
#   flight-2t    two threads, 4 KiB rings overwritten: LOSS counts, merged streams
# and the trace files themselves (2 rings of 4 KiB, 4 KiB of metadata area), for the
# shm_open target, in corpus_shm_open/:
#   shm-kinds-cold, shm-kinds-all   the files the captures above were dumped from
#   shm-wrapped                     a ring written over several times (flight mode)
set -eu
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
out=$here/corpus_capture_decode
shm_out=$here/corpus_shm_open
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
	cp "$dir/vioscope-trace-$pid" "$shm_out/shm-$name"
	rm -f "$dir/vioscope-trace-$pid"
}
mkdir -p "$out" "$shm_out"
export VIOSCOPE_TRACE_THREADS=2 VIOSCOPE_TRACE_META=4096
VIOSCOPE_TRACE_RING=4096 capture kinds-cold cold kinds
VIOSCOPE_TRACE_RING=4096 capture kinds-all all kinds
VIOSCOPE_TRACE_RING=4096 capture flight-2t cold seq -n 150 -t 2
mv "$shm_out/shm-flight-2t" "$shm_out/shm-wrapped"
ls -l "$out" "$shm_out"
# v1-* in corpus_capture_decode/ are captures of the first format (before providers),
# made by an earlier vioscope: the decoder still reads them.  Not regenerated.
