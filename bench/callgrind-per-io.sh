#!/usr/bin/env bash
# Instructions per request on each side, counted by callgrind (repeatable, unlike time).
#
#   bench/callgrind-per-io.sh [BUILD_DIR] [FLAVOUR] [SECONDS]
#
# Runs `vioscope[-FLAVOUR] target --lun 0:ram=64M` and `vioscope[-FLAVOUR] bench` (RND4K,
# one request in flight, the driver polling) each under callgrind, then prints:
#   target  instructions of the worker loop (worker_main, inclusive) per SCSI command
#   driver  instructions of vs_ini_submit + poll_reap - the benchmark's on_done callback
#           (inclusive) per request
# One request in flight keeps both sides' batching the same from run to run, so the
# figures compare builds and flavours to a fraction of a percent.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
flavour=${2:-cold}
secs=${3:-2}
suffix=""
[[ "$flavour" != cold ]] && suffix="-$flavour"
exe="$build/tools/vioscope$suffix"
[[ -x "$exe" ]] || { echo "no $exe: build first" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)" >&2; exit 2; }

work=$(mktemp -d /tmp/vs-callgrind.XXXXXX)
[[ -n "${KEEP:-}" ]] && echo "keeping $work" >&2
tpid=""
cleanup() {
	[[ -n "$tpid" ]] && kill "$tpid" 2>/dev/null && wait "$tpid" 2>/dev/null
	[[ -n "${KEEP:-}" ]] || rm -rf "$work"
}
trap cleanup EXIT

sock="$work/sock"
valgrind --tool=callgrind --callgrind-out-file="$work/target.out" \
	"$exe" target --socket "$sock" --lun 0:ram=64M >"$work/target.log" 2>&1 &
tpid=$!
for _ in $(seq 600); do [[ -S "$sock" ]] && break; sleep 0.1; done
[[ -S "$sock" ]] || { echo "the target did not start:" >&2; cat "$work/target.log" >&2; exit 1; }
valgrind --tool=callgrind --callgrind-out-file="$work/driver.out" \
	"$exe" bench --socket "$sock" --profile rnd4k-q1t1 --time "$secs" --json --no-progress \
	>"$work/bench.json" 2>"$work/driver.log"
kill -TERM "$tpid"
wait "$tpid" 2>/dev/null || true
tpid=""

python3 - "$work/target.out" "$work/driver.out" "$flavour" <<'EOF'
import re, sys

def load(path):
    """Self cost and call costs per function from a callgrind out file."""
    names, selfc, calls, callcost = {}, {}, {}, {}
    fn = cfn = None
    pending_call = None
    def name(tok):
        m = re.match(r'\((\d+)\)(?: (.*))?', tok)
        if not m:
            return tok
        if m.group(2):
            names[m.group(1)] = m.group(2)
        return names[m.group(1)]
    for line in open(path):
        line = line.rstrip('\n')
        if line.startswith('fn='):
            fn = name(line[3:]); continue
        if line.startswith('cfn='):
            cfn = name(line[4:]); continue
        if line.startswith('calls='):
            pending_call = int(line[6:].split()[0]); continue
        if line and (line[0].isdigit() or line[0] in '+-*'):
            parts = line.split()
            ir = int(parts[1]) if len(parts) > 1 else 0
            if pending_call is not None:
                calls[cfn] = calls.get(cfn, 0) + pending_call
                callcost[(fn, cfn)] = callcost.get((fn, cfn), 0) + ir
                pending_call = None
            else:
                selfc[fn] = selfc.get(fn, 0) + ir
    def incl(f):
        return selfc.get(f, 0) + sum(c for (a, b), c in callcost.items() if a == f)
    return incl, calls

tincl, tcalls = load(sys.argv[1])
dincl, dcalls = load(sys.argv[2])
cmds = tcalls.get('vs_scsi_exec', 0)
reqs = dcalls.get('vs_ini_submit', 0)
target = tincl('worker_main') / cmds if cmds else float('nan')
driver = (dincl('vs_ini_submit') + dincl('poll_reap') - dincl('on_done')) / reqs if reqs else float('nan')
print(f"{sys.argv[3]:<10} target {target:8.1f} instr/command ({cmds} commands)   "
      f"driver {driver:8.1f} instr/request ({reqs} requests)")
EOF
