#!/usr/bin/env bash
# The layering rules of docs/ARCHITECTURE.md, checked on the sources:
#   - each folder of src/, and bench/ and tools/, includes ("layer/...") only the layers
#     listed for it below: bench/ reaches src/ only through util and the trace tools,
#     tools/ through those and the check and rpc layers;
#   - a folder's private header (<layer>_int.h) is included only inside that folder, and
#     never from bench/, tools/ or examples/ (the tests are white-box and may);
#   - the public headers (<vioscope/...>: trace, target, initiator) are not checked: any
#     layer may call the tracing macros, and rpc reaches the target only through them;
#   - the trace runtime (src/trace: the library every traced program links, installed
#     without the rest of the tree) includes only its own files and util, and builds no
#     file of another folder but the util files it names (never the tools', src/tracetools).
# Prints every violation; exit 1 if there is one.
set -euo pipefail
cd "$(dirname "$0")/.."

declare -A allowed=(
	[util]=""
	[proto]=""
	[trace]="util" # the runtime: never proto, never the tools
	[tracetools]="trace util proto"
	[virtio]="proto util"
	[vhost]="virtio proto util"
	[backend]="proto util"
	[scsi]="backend proto util"
	[target]="vhost virtio scsi backend proto util"
	[initiator]="vhost virtio proto util"
	[rpc]="util" # the target through its public header only
	[check]="initiator trace tracetools proto util"
	[bench]="bench util trace tracetools"
	[tools]="tools util trace tracetools check rpc"
)
bad=0
for dir in "${!allowed[@]}"; do
	path=src/$dir
	[[ -d $path ]] || path=$dir
	while IFS=: read -r file line inc; do
		layer=${inc%%/*}
		[[ $layer == "$dir" ]] && continue
		if [[ " ${allowed[$dir]} " != *" $layer "* ]]; then
			echo "$file:$line: $dir may not include $inc"
			bad=1
		fi
		if [[ $inc == *_int.h ]]; then
			echo "$file:$line: $inc is private to src/$layer"
			bad=1
		fi
	done < <(grep -Hn '^#include "[a-z_]*/' "$path"/*.[ch] |
		sed 's/^\([^:]*\):\([0-9]*\):#include "\([^"]*\)".*/\1:\2:\3/')
done
# The runtime's build: its own files (named without a folder), and of util only what it
# is installed with.
while IFS=: read -r line src; do
	echo "src/trace/CMakeLists.txt:$line: the trace runtime may not build $src"
	bad=1
done < <(grep -on '[^ ()"]*/[A-Za-z0-9_.-]*\.c\b' src/trace/CMakeLists.txt |
	grep -v ':[$][{]PROJECT_SOURCE_DIR[}]/src/util/\(clock\|proc_stat\)\.c$' || true)
# Private headers outside their folder, anywhere but the white-box tests.
while IFS=: read -r file line inc; do
	echo "$file:$line: $inc is private"
	bad=1
done < <(grep -rHn '^#include "[a-z_]*/[a-z_]*_int\.h"' bench tools examples 2>/dev/null |
	sed 's/^\([^:]*\):\([0-9]*\):#include "\([^"]*\)".*/\1:\2:\3/')
((bad == 0)) && echo "layers: ok"
exit $bad
