#!/usr/bin/env bash
# The layering rules of docs/ARCHITECTURE.md, checked on the sources:
#   - each folder of src/, and bench/ and tools/, includes ("layer/...") only the layers
#     listed for it below: bench/ reaches src/ only through util, the trace tools and the
#     wire vocabulary (a failed request's sense, in words),
#     tools/ through those and the check and rpc layers;
#   - a folder's private header (<layer>_int.h) is included only inside that folder, and
#     never from bench/, tools/ or examples/ (the tests are white-box and may);
#   - the public headers (<vioscope/...>: trace, target, initiator) are not checked: any
#     layer may call the tracing macros, and rpc reaches the target only through them.
# Prints every violation; exit 1 if there is one.
set -euo pipefail
cd "$(dirname "$0")/.."

declare -A allowed=(
	[util]=""
	[proto]=""
	[trace]="util proto" # proto: the decoder's names (notes.c), never the runtime
	[virtio]="proto util"
	[vhost]="virtio proto util"
	[backend]="proto util"
	[scsi]="backend proto util"
	[target]="vhost virtio scsi backend proto util"
	[initiator]="vhost virtio proto util"
	[rpc]="util" # the target through its public header only
	[check]="initiator trace proto util"
	[bench]="bench util trace proto"
	[tools]="tools util trace check rpc"
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
# Private headers outside their folder, anywhere but the white-box tests.
while IFS=: read -r file line inc; do
	echo "$file:$line: $inc is private"
	bad=1
done < <(grep -rHn '^#include "[a-z_]*/[a-z_]*_int\.h"' bench tools examples 2>/dev/null |
	sed 's/^\([^:]*\):\([0-9]*\):#include "\([^"]*\)".*/\1:\2:\3/')
((bad == 0)) && echo "layers: ok"
exit $bad
