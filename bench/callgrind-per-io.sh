#!/usr/bin/env bash
# Instructions per request on each side, counted by callgrind (repeatable, unlike time).
#
#   bench/callgrind-per-io.sh [BUILD_DIR] [FLAVOUR] [SECONDS]
#
# Runs `vioscope[-FLAVOUR] target --lun 0:ram=64M` and `vioscope[-FLAVOUR] bench` (RND4K,
# one request in flight, the driver polling) each under callgrind, then prints:
#   target  instructions of the worker loop (worker_main, inclusive, less the adaptive poll
#           worker_poll_idle: waiting, whose length depends on timing) per SCSI command
#   driver  instructions of vs_ini_submit + poll_reap - the benchmark's on_done callback
#           (inclusive) per request
# It runs the pair twice, for SECONDS and for 3 x SECONDS, and divides the difference in
# instructions by the difference in requests: one-time costs (start-up, queue set-up)
# cancel out, so a loaded machine (fewer requests) gives the same figure.  One request in
# flight keeps both sides' batching the same from run to run, so the figures compare
# builds and flavours to a fraction of a percent.  KEEP=1 keeps the callgrind files;
# TARGET_ARGS="--adaptive-poll 0" (say) adds options to the target's command line,
# BENCH_ARGS (say --dirty-log: the target logging as during a migration) to bench's.
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

run_pair() { # run_pair TAG SECONDS
	local sock="$work/sock-$1"
	valgrind --tool=callgrind --callgrind-out-file="$work/target-$1.out" \
		"$exe" target --socket "$sock" --lun 0:ram=64M ${TARGET_ARGS:-} >"$work/target-$1.log" 2>&1 &
	tpid=$!
	for _ in $(seq 600); do [[ -S "$sock" ]] && break; sleep 0.1; done
	[[ -S "$sock" ]] || { echo "the target did not start:" >&2; cat "$work/target-$1.log" >&2; exit 1; }
	valgrind --tool=callgrind --callgrind-out-file="$work/driver-$1.out" \
		"$exe" bench --socket "$sock" --profile rnd4k-q1t1 --time "$2" --json --no-progress \
		--initiator-poll ${BENCH_ARGS:-} >"$work/bench-$1.json" 2>"$work/driver-$1.log"
	kill -TERM "$tpid"
	wait "$tpid" 2>/dev/null || true
	tpid=""
}
run_pair short "$secs"
run_pair long "$(awk -v s="$secs" 'BEGIN { print s * 3 }')"

python3 - "$work" "$flavour" <<'PY'
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

def side(tag):
    tincl, tcalls = load(f"{sys.argv[1]}/target-{tag}.out")
    dincl, dcalls = load(f"{sys.argv[1]}/driver-{tag}.out")
    # The adaptive poll (worker_poll_idle) is time spent waiting for work, not work done
    # for a request: how much of it there is depends on timing, so it is left out.
    return (tincl('worker_main') - tincl('worker_poll_idle'), tcalls.get('vs_scsi_exec', 0),
            dincl('vs_ini_submit') + dincl('poll_reap') - dincl('on_done'),
            dcalls.get('vs_ini_submit', 0))

ti1, tc1, di1, dc1 = side('short')
ti2, tc2, di2, dc2 = side('long')
target = (ti2 - ti1) / (tc2 - tc1) if tc2 > tc1 else float('nan')
driver = (di2 - di1) / (dc2 - dc1) if dc2 > dc1 else float('nan')
print(f"{sys.argv[2]:<10} target {target:8.1f} instr/command   driver {driver:8.1f} instr/request"
      f"   ({tc1} and {tc2} commands)")
PY
