#!/usr/bin/env bash
# Check the cluster scripts end to end and print the figures README.md quotes:
#   start.sh twice (the second replaces the first, no stray daemon), HEALTH_OK, rbd create,
#   fio rbd 4k randwrite then randread with crc32c verification, restart-osd.sh during a verified
#   fio write job, the earlier data read back after the restart, stop.sh (daemons gone by their
#   pids, directory removed). Daemon memory (RSS idle, peak) and timings on the way.
# Exit 0 pass, 1 fail, 77 Ceph not available. Uses the same knobs as start.sh.
set -euo pipefail
self=selftest
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/ceph/lib.sh
. "$here/lib.sh"

fail() {
	say "FAIL: $*"
	exit 1
}
now_ms() { echo $(($(date +%s%N) / 1000000)); }
secs() { printf '%d.%d s' $(($1 / 1000)) $(($1 % 1000 / 100)); }
pids_of_cluster() { cat "$CEPH_DIR"/run/ceph-{mon.a,mgr.x,osd.0}.pid; }

work=$(mktemp -d)
cd "$work" # fio may leave verify state files in its working directory
fio_pid=
cleanup() {
	[[ -z $fio_pid ]] || kill "$fio_pid" 2>/dev/null || true
	"$here/stop.sh" || true
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# start.sh, timed; sets CEPH_CONF
start() {
	local t rc=0
	t=$(now_ms)
	"$here/start.sh" >"$work/start.out" 2>"$work/start.err" || rc=$?
	if ((rc == 77)); then
		cat "$work/start.err" >&2
		exit 77
	fi
	((rc == 0)) || {
		cat "$work/start.err" >&2
		fail "start.sh exit $rc"
	}
	start_ms=$(($(now_ms) - t))
	grep -E '^ceph start: (\+|replacing)' "$work/start.err" >&2 || true
	export CEPH_CONF
	CEPH_CONF=$(tail -n 1 "$work/start.out")
	[[ $CEPH_CONF == "$CONF" ]] || fail "start.sh printed '$CEPH_CONF' last, expected $CONF"
	[[ $(wc -l <"$work/start.out") == 1 ]] || fail "start.sh wrote more than one line to stdout"
}

rss() { # pid -> "RSS MiB / peak MiB"
	awk '/^VmRSS/ { r = $2 } /^VmHWM/ { h = $2 } END { printf "%d MiB (peak %d MiB)", r / 1024, h / 1024 }' "/proc/$1/status"
}
memory() {
	local name pid
	for name in mon.a mgr.x osd.0; do
		pid=$(<"$CEPH_DIR/run/ceph-$name.pid")
		say "  $name: $(rss "$pid")"
	done
}

# fio against rbd/test with the rbd engine; extra arguments are job options. The summary line per
# job: name, error, read/write IOPS, completion latency p99 and max.
fio_rbd() {
	local out=$1
	shift
	timeout 300 fio --output-format=json --output="$work/$out.json" --ioengine=rbd --clientname=admin --pool=rbd \
		--rbdname=test --bs=4k --iodepth=32 --verify_fatal=1 "$@" >"$work/$out.log" 2>&1 || {
		cat "$work/$out.log" >&2
		return 1
	}
	python3 - "$work/$out.json" <<'PY'
import json, sys
for j in json.load(open(sys.argv[1]))["jobs"]:
    for d in ("read", "write"):
        s = j[d]
        if s["total_ios"]:
            cl = s["clat_ns"]
            p99 = cl.get("percentile", {}).get("99.000000", 0) / 1e6
            print(f"  fio {j['jobname']:8} {d:5} err={j['error']} {s['iops']:7.0f} IOPS "
                  f"{s['bw'] / 1024:6.1f} MiB/s  {s['runtime'] / 1000:4.1f} s  clat p99 {p99:6.1f} ms  max {cl['max'] / 1e6:7.1f} ms")
    if j["error"]:
        sys.exit(1)
PY
}

# 1. two starts in a row: the second replaces the first
start
say "start #1: HEALTH_OK after $(secs "$start_ms")"
mapfile -t first < <(pids_of_cluster)
start
say "start #2 (replacing #1): HEALTH_OK after $(secs "$start_ms")"
for p in "${first[@]}"; do
	! is_running "$p" || fail "daemon $p of the first cluster still runs"
done
say "first cluster's daemons (${first[*]}) gone"
[[ $(ceph health) == HEALTH_OK ]] || fail "ceph health: $(ceph health)"
say "memory idle:"
memory

# 2. an image, then 4k random writes and random reads of what was written, crc32c-verified
rbd create rbd/test --size 1G
# (one pass each: fio ends a verifying read job after one pass whatever its runtime)
fio_rbd basic --size=64M --verify=crc32c --do_verify=0 --name=randwrite --rw=randwrite \
	--name=randread --stonewall --rw=randread ||
	fail "fio randwrite/randread"

# 3. OSD restart while a verified write job runs (a region of its own, written then read back)
fio_rbd restart --offset=256M --size=128M --verify=crc32c --do_verify=1 --name=restart --rw=randwrite &
fio_pid=$!
sleep 2
kill -0 "$fio_pid" 2>/dev/null || fail "fio finished before the OSD restart: make the job bigger"
t=$(now_ms)
"$here/restart-osd.sh" || fail "restart-osd.sh"
say "restart-osd.sh took $(secs $(($(now_ms) - t)))"
wait "$fio_pid" || fail "fio across the OSD restart"
fio_pid=
# what was written before the restart is still there
fio_rbd after --size=64M --verify=crc32c --name=reread --rw=read || fail "reading back after the restart"
say "memory after the fio jobs:"
memory

# 4. stop: every daemon gone by its pid, the directory removed
mapfile -t last < <(pids_of_cluster)
t=$(now_ms)
"$here/stop.sh" || fail "stop.sh"
say "stop.sh took $(secs $(($(now_ms) - t)))"
for p in "${last[@]}"; do
	! is_running "$p" || fail "daemon $p still runs after stop.sh"
	[[ ! -e /proc/$p ]] || say "note: pid $p is still a zombie (init has not reaped it yet)"
done
[[ ! -e $CEPH_DIR ]] || fail "$CEPH_DIR still exists"
say "PASS"
