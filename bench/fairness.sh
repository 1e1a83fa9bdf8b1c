#!/usr/bin/env bash
# Fairness and the cost of many controllers (issue 25): one target with N controllers, each
# with a RAM LUN, served by W workers; N `vioscope bench` initiators (completions by
# interrupt: N pollers would only fight over the CPUs) drive RND4K Q32T1 for SECONDS, one
# per controller, at once.  Prints each controller's IOPS, Jain's fairness index
#   J = (sum x)^2 / (N * sum x^2)      (1: all equal; 1/N: one gets everything)
# and the total against one controller alone on the same target shape (W workers), in
# rounds interleaved (alone, together, alone, ...), medians and spread.
# Every controller is measured over the same window: the target's own counts (`rpc stats`
# of each controller) once every initiator says it is measuring, and SECONDS later (each
# initiator's own figure would cover its own window, offset by its start: one that starts
# first runs a while with fewer neighbours).
#
#   bench/fairness.sh [BUILD_DIR] [CONTROLLERS] [WORKERS] [SECONDS] [ROUNDS]
#   (default: build 8 2 10 3)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
n=${2:-8}
workers=${3:-2}
secs=${4:-10}
rounds=${5:-3}
exe="$build/tools/vioscope"
[[ -x "$exe" ]] || { echo "no $exe: build first" >&2; exit 2; }
work=$(mktemp -d /tmp/vs-fairness.XXXXXX)
pid=
cleanup() {
	[[ -n "$pid" ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

# start_target K: a target with K controllers c0..c(K-1), each LUN 0 on 256 MiB of RAM.
start_target() {
	local args=() i
	for ((i = 0; i < $1; i++)); do
		args+=(--controller "c$i:socket=$work/c$i.sock" --lun 0:ram=256M)
	done
	"$exe" target --workers "$workers" --rpc "$work/rpc.sock" "${args[@]}" 2>"$work/target.log" &
	pid=$!
	for ((i = 0; i < $1; i++)); do
		for _ in $(seq 200); do [[ -S "$work/c$i.sock" ]] && break; sleep 0.05; done
		[[ -S "$work/c$i.sock" ]] || { cat "$work/target.log" >&2; exit 1; }
	done
	for _ in $(seq 200); do [[ -S "$work/rpc.sock" ]] && break; sleep 0.05; done
}
stop_target() {
	kill "$pid"
	wait "$pid" || true
	pid=
}
# counts K: each controller's requests answered so far and the time, "N:T" on one line: one
# JSON-RPC batch of K `stats` calls, so that the K readings are taken together (K calls of
# `vioscope rpc` would take seconds on a loaded machine, and the last ones could come after
# their initiators ended).
counts() {
	python3 - "$work/rpc.sock" "$1" <<-'PY'
		import json, socket, sys
		path, k = sys.argv[1], int(sys.argv[2])
		s = socket.socket(socket.AF_UNIX)
		s.connect(path)
		batch = [{"jsonrpc": "2.0", "id": i, "method": "stats", "params": {"controller": "c%d" % i}} for i in range(k)]
		s.sendall(json.dumps(batch).encode() + b"\n")
		buf = b""
		while not buf.endswith(b"\n"):
		    chunk = s.recv(1 << 20)
		    if not chunk:
		        sys.exit("the target closed the management socket")
		    buf += chunk
		out = {r["id"]: r["result"] for r in json.loads(buf)}
		print(" ".join("%d:%d" % (sum(l["reads"] + l["writes"] for l in out[i]["luns"]), out[i]["time_ns"]) for i in range(k)))
	PY
}
# drive K: K initiators at once, one per controller; their IOPS over one window on one line.
drive() {
	local i pids=() c0 c1
	for ((i = 0; i < $1; i++)); do
		"$exe" bench --socket "$work/c$i.sock" --profile rnd4k-q32t1 --time "$((secs + 30))" \
			--interrupt --json >"$work/b$i.json" 2>"$work/b$i.err" &
		pids+=($!)
	done
	for ((i = 0; i < $1; i++)); do
		for _ in $(seq 600); do grep -q measuring "$work/b$i.err" && break; sleep 0.05; done
		grep -q measuring "$work/b$i.err" || { cat "$work/b$i.err" >&2; exit 1; }
	done
	c0=$(counts "$1")
	sleep "$secs"
	c1=$(counts "$1")
	# every initiator was still running at the second reading, or the window is not theirs
	for ((i = 0; i < $1; i++)); do
		kill -0 "${pids[$i]}" 2>/dev/null ||
			{ echo "initiator $i ended before the window did: a longer --time is needed" >&2; exit 1; }
	done
	wait "${pids[@]}"
	python3 -c '
import sys
a, b = sys.argv[1].split(), sys.argv[2].split()
print(" ".join("%.1f" % ((int(y.split(":")[0]) - int(x.split(":")[0])) * 1e9 / (int(y.split(":")[1]) - int(x.split(":")[1]))) for x, y in zip(a, b)))' "$c0" "$c1"
}

echo "fairness: $n controllers x RND4K Q32T1 (interrupt) on $workers workers, $secs s, $rounds rounds" \
	"(interleaved with 1 controller alone)"
: >"$work/alone"
: >"$work/many"
for ((r = 1; r <= rounds; r++)); do
	start_target 1
	drive 1 >>"$work/alone"
	stop_target
	start_target "$n"
	drive "$n" >>"$work/many"
	stop_target
	echo "  round $r: alone $(tail -1 "$work/alone"); together $(tail -1 "$work/many")"
done
python3 - "$work/alone" "$work/many" <<'PY'
import statistics, sys
alone = [float(l.split()[0]) for l in open(sys.argv[1]) if l.strip()]
many = [[float(x) for x in l.split()] for l in open(sys.argv[2]) if l.strip()]
def jain(x):
    return sum(x) ** 2 / (len(x) * sum(v * v for v in x))
js = [jain(x) for x in many]
tot = [sum(x) for x in many]
ratio = [t / a for t, a in zip(tot, alone)]
def med(v):
    return "%.4g (%.4g..%.4g)" % (statistics.median(v), min(v), max(v))
print("one controller alone, IOPS:   ", med(alone))
print("all together, total IOPS:     ", med(tot))
print("per controller, last round:   ", " ".join("%.0f" % v for v in many[-1]))
print("Jain fairness index:          ", med(js), " goal >= 0.95")
print("total / alone (the cost):     ", med(ratio), " goal >= 0.9")
PY
