#!/bin/sh
# `trace decode --chrome` of a driver and a device capture together: valid trace-event
# JSON (https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU),
# each request's stages as slices on both processes and joined by a flow driver ->
# device -> driver (s, t..., f with bp "e", in time order, s and f on the driver's
# process, t on the device's); each process named ("ph":"M" process_name) after its
# program.  Usage: check_chrome_flows.sh VIOSCOPE VIOSCOPE_ALL
set -eu
cli=$1 all=$2
command -v python3 >/dev/null || { echo "skipped: python3 is not installed (scripts/deps.sh)"; exit 77; }
dir=$(mktemp -d /tmp/vioscope-chrome-XXXXXX)
trap 'rm -rf "$dir"' EXIT
VIOSCOPE_TRACE_DIR=$dir VIOSCOPE_TRACE=verbose:all VIOSCOPE_TRACE_RING=8M \
	"$all" bench --target null=16M --profile rnd4k-q1t1 --time 0.3 --record "$dir" >"$dir/bench.txt" 2>&1 ||
	{ cat "$dir/bench.txt"; exit 1; }
"$cli" trace decode --chrome "$dir"/initiator-*.vst "$dir"/target-*.vst >"$dir/trace.json"
python3 - "$dir/trace.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))            # valid JSON, or this fails
ev = doc["traceEvents"]
assert isinstance(ev, list) and ev, "no traceEvents"
SKEW_US = 0.1
flows, names, pids, named = {}, set(), set(), {}
for e in ev:
    if e["ph"] == "M":                      # metadata: no time stamp
        if e["name"] == "process_name":
            named[e["pid"]] = e["args"]["name"]
        continue
    assert e["ph"] in ("i", "X", "s", "t", "f"), e
    assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0, e
    assert isinstance(e["pid"], int) and isinstance(e["tid"], int), e
    assert isinstance(e["name"], str) and isinstance(e.get("cat", ""), str), e
    pids.add(e["pid"])
    if e["ph"] == "X":
        assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0, e
        names.add(e["name"])
    if e["ph"] in "stf":
        flows.setdefault(e["id"], []).append(e)
assert len(pids) == 2, "expected the driver's and the device's process: %s" % pids
assert all(named.get(p, "").startswith("vioscope") for p in pids), ("unnamed", named)
for stage in ("pop>backend", "backend", "backend>push", "poll>done"):
    assert stage in names, "no %s slice" % stage
assert len(flows) >= 10, "only %d flows" % len(flows)
for fid, f in flows.items():
    phs = "".join(x["ph"] for x in f)
    assert phs[0] == "s" and phs[-1] == "f" and set(phs[1:-1]) == {"t"}, (fid, phs)
    # In time order.  Both sides record before they publish, so only the two processes'
    # clock calibrations separate them: allow 100 ns across processes (their residual
    # is typically 20 ns, docs/TRACING.md).
    assert all(a["ts"] <= b["ts"] + (SKEW_US if a["pid"] != b["pid"] else 0)
               for a, b in zip(f, f[1:])), (fid, f)
    assert f[-1].get("bp") == "e", f[-1]
    assert f[0]["pid"] == f[-1]["pid"] and all(x["pid"] != f[0]["pid"] for x in f[1:-1]), f
print("chrome flows: %d events, %d requests joined across 2 processes" % (len(ev), len(flows)))
PY
