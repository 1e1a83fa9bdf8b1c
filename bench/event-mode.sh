#!/usr/bin/env bash
# Event mode (how QEMU drives the target: kicks on eventfds) against fio and poll mode,
# RND4K Q32T1, in interleaved rounds: every case once per round, the order rotating, so
# that the machine's drifts hit every case alike.  Prints per case the median IOPS and the
# range over the rounds, and per round the ratio to fio (file) or to poll mode (RAM).
#
#   bench/event-mode.sh [BUILD_DIR] [ROUNDS] [SECONDS] [BASE_BUILD_DIR]
#
# Cases: fio io_uring on a 1 GiB file in /dev/shm; the target on that file in event mode
# with the adaptive poll (default) and without (--adaptive-poll 0); the same on RAM
# (ram=64M: small enough that every page is touched within the first fraction of a
# second; a cold 1 GiB RAM disk measures page faults, which are slow on this machine),
# and poll mode on RAM.  BASE_BUILD_DIR adds its event mode (a build from before,
# say) on both.  Then idle CPU: after a run, the benchmark stays connected for 5 s with
# nothing in flight and reads the target's CPU time from /proc (--idle), with and without
# the adaptive poll.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rounds=${2:-5}
secs=${3:-3}
base=${4:-}
exe="$build/tools/vioscope"
[[ -x "$exe" ]] || { echo "no $exe: build first" >&2; exit 2; }
work=$(mktemp -d /tmp/vs-event-mode.XXXXXX)
img=$(mktemp /dev/shm/vs-event-mode-XXXXXX.img)
trap 'rm -rf "$work" "$img"' EXIT
dd if=/dev/urandom of="$img" bs=1M count=1024 status=none

prof=rnd4k-q32t1
cases=(fio file-adaptive file-noadapt ram-adaptive ram-noadapt ram-poll)
[[ -n "$base" ]] && cases+=(file-base ram-base)
run_case() { # run_case CASE -> IOPS on stdout
	# --initiator-poll: the mode its figures were measured in (the default until issue 24)
	local b=("$exe" bench --profile "$prof" --time "$secs" --json --no-progress --initiator-poll)
	case $1 in
	fio) fio --name=vs --filename="$img" --ioengine=io_uring --rw=randread --bs=4k \
		--iodepth=32 --numjobs=1 --time_based --runtime="$secs" --norandommap \
		--randrepeat=0 --output-format=json | python3 -c \
		'import json,sys; print(json.load(sys.stdin)["jobs"][0]["read"]["iops"])'
		return ;;
	file-adaptive) b+=(--target "file=$img") ;;
	file-noadapt) b+=(--target "file=$img" --adaptive-poll 0) ;;
	ram-adaptive) b+=(--target ram=64M) ;;
	ram-noadapt) b+=(--target ram=64M --adaptive-poll 0) ;;
	ram-poll) b+=(--target ram=64M --poll) ;;
	file-base) b=("$base/tools/vioscope" "${b[@]:1}" --target "file=$img") ;;
	ram-base) b=("$base/tools/vioscope" "${b[@]:1}" --target ram=64M) ;;
	esac
	"${b[@]}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["results"][0]["iops"])'
}
for ((r = 0; r < rounds; r++)); do
	n=${#cases[@]}
	for ((k = 0; k < n; k++)); do
		c=${cases[$(((k + r) % n))]}
		echo "$r $c $(run_case "$c")" >> "$work/iops"
	done
	echo "round $((r + 1))/$rounds done" >&2
done
for ap in 32 0; do
	"$exe" bench --target ram=64M --profile "$prof" --time 1 --idle 5 --adaptive-poll $ap --json \
		--initiator-poll --no-progress | python3 -c "import json,sys; print('idle-ap$ap', json.load(sys.stdin)['results'][0]['idle_cpu'])" >> "$work/idle"
done

# What a request costs the target, less sensitive to a busy machine than throughput: its
# CPU time and its context switches per request (from /proc, over a whole run), for the
# file case; same rotation.
cost_case() { # cost_case CASE ROUND
	local t=("$exe") sock="$work/cost.sock" tpid
	case $1 in
	noadapt) t+=(target --adaptive-poll 0) ;;
	adaptive) t+=(target) ;;
	base) t=("$base/tools/vioscope" target) ;;
	esac
	"${t[@]}" --socket "$sock" --lun "0:file=$img" --queues 16 2> "$work/cost-target.log" &
	tpid=$!
	for _ in $(seq 100); do [[ -S "$sock" ]] && break; sleep 0.1; done
	"$exe" bench --socket "$sock" --profile "$prof" --time "$secs" --json --no-progress \
		--initiator-poll > "$work/cost.json"
	python3 - "$tpid" "$work/cost.json" "$1" "$2" >> "$work/cost" <<'PY2'
import glob, json, sys
pid, res, case, rnd = sys.argv[1:]
r = json.load(open(res))["results"][0]
n = r["iops"] * r["seconds"]
cpu = sum(int(open(f).read().split()[0]) for f in glob.glob(f"/proc/{pid}/task/*/schedstat"))
cs = 0
for f in glob.glob(f"/proc/{pid}/task/*/status"):
    for line in open(f):
        if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
            cs += int(line.split()[1])
print(rnd, case, cpu / n, cs / n)
PY2
	kill -INT "$tpid"
	wait "$tpid" || true
	rm -f "$sock"
}
costs=(adaptive noadapt)
[[ -n "$base" ]] && costs+=(base)
for ((r = 0; r < rounds; r++)); do
	n=${#costs[@]}
	for ((k = 0; k < n; k++)); do
		cost_case "${costs[$(((k + r) % n))]}" "$r"
	done
done

python3 - "$work" "$rounds" <<'PY'
import sys, statistics as st
work, rounds = sys.argv[1], int(sys.argv[2])
v = {}
for line in open(f"{work}/iops"):
    r, c, x = line.split()
    v.setdefault(c, {})[int(r)] = float(x)
def rng(xs): return f"{min(xs):>9.0f} .. {max(xs):>9.0f}"
print(f"RND4K Q32T1 read, {rounds} interleaved rounds (IOPS: median, min .. max)")
for c, xs in v.items():
    print(f"  {c:14s} {st.median(xs.values()):>9.0f}   {rng(xs.values())}")
def ratio(a, b):
    rs = [v[a][r] / v[b][r] for r in v[a] if r in v[b] and v[b][r] > 0]
    return f"{a} / {b}: median {st.median(rs):.3f}, per round " + " ".join(f"{x:.3f}" for x in sorted(rs))
print("per-round ratios (sorted):")
for a, b in [("file-adaptive", "fio"), ("file-noadapt", "fio"), ("file-base", "fio"),
             ("ram-adaptive", "ram-poll"), ("ram-noadapt", "ram-poll"), ("ram-base", "ram-poll"),
             ("ram-adaptive", "ram-noadapt"), ("ram-adaptive", "ram-base"), ("file-adaptive", "file-base")]:
    if a in v and b in v:
        print("  " + ratio(a, b))
print("idle target, connected, 5 s after a run (share of one CPU):")
for line in open(f"{work}/idle"):
    c, x = line.split()
    print(f"  {c:14s} {100 * float(x):.2f}%")
cost = {}
for line in open(f"{work}/cost"):
    r, c, ns, cs = line.split()
    cost.setdefault(c, []).append((float(ns), float(cs)))
print(f"the target's cost per request, file case, {rounds} interleaved rounds (median, min .. max):")
for c, xs in cost.items():
    ns = [x[0] for x in xs]; cs = [x[1] for x in xs]
    print(f"  {c:10s} CPU {st.median(ns):7.0f} ns ({min(ns):.0f} .. {max(ns):.0f})   "
          f"context switches {st.median(cs):.3f} ({min(cs):.3f} .. {max(cs):.3f})")
PY
