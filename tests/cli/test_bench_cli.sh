#!/bin/sh
# `vioscope bench`, `check` and `demo` run as a user runs them (the real binary): the exit
# status table (README, "Exit status"), Ctrl-C and SIGTERM in the middle of a run (what
# was measured is printed with the seed, everything started is stopped, nothing made is
# left behind, 128 + the signal), and what the commands refuse instead of losing data.
# Usage: test_bench_cli.sh BUILD_DIR SCENARIO   (one scenario per ctest test, below)
#
# Each scenario runs in a directory of its own that holds the commands' trace files
# (VIOSCOPE_TRACE_DIR) and temporary files (TMPDIR), so that "nothing left behind" is
# checked there, whatever else runs on the machine.  Waits have deadlines and wait for a
# sign the command shows (a line of its output, a file); none is a sleep.
set -eu
build=$1
scenario=$2
bin="$build/tools/vioscope"
work=$(mktemp -d "${TMPDIR:-/tmp}/vs-cli-bench-XXXXXX")
export VIOSCOPE_TRACE_DIR="$work/trace" TMPDIR="$work/tmp"
mkdir "$VIOSCOPE_TRACE_DIR" "$TMPDIR"
pgid="" hog=""
cleanup() {
	if [ -n "$pgid" ]; then /bin/kill -KILL -- "-$pgid" 2>/dev/null || true; fi
	if [ -n "$hog" ]; then kill -KILL "$hog" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $scenario: $*"
	for f in "$work"/*.out "$work"/*.err; do
		[ -f "$f" ] && { echo "--- $f:"; cat "$f"; }
	done
	exit 1
}

# Poll until the command $2... succeeds, for up to $1 tenths of a second by the clock.
wait_for() {
	end=$(($(date +%s) + $1 / 10))
	shift
	while ! "$@"; do
		[ "$(date +%s)" -le "$end" ] || return 1
		sleep 0.1
	done
}

# expect STATUS NAME COMMAND...: run it, stdout and stderr in $work/NAME.out/.err.
expect() {
	want=$1 name=$2
	shift 2
	rc=0
	"$@" >"$work/$name.out" 2>"$work/$name.err" </dev/null || rc=$?
	[ "$rc" -eq "$want" ] || fail "$name: exit status $rc, expected $want"
}
said() { grep -q -- "$2" "$work/$1.out" "$work/$1.err" || fail "$1: no '$2' in its output"; }

# start NAME COMMAND...: in the background in a session and process group of its own, as
# a shell starts a foreground job: with Ctrl-C's signals at their defaults (a non-interactive
# shell's background job ignores them, and a command keeps ignoring what it was started
# ignoring); $pgid is its pid.
start() {
	name=$1
	shift
	setsid env --default-signal=INT,QUIT "$@" >"$work/$name.out" 2>"$work/$name.err" </dev/null &
	pgid=$!
}
# stop_with SIGNAL TARGET NAME: send it (TARGET: "group", as Ctrl-C at a terminal does, or
# "pid", as kill does), wait for the exit, which must be 128 + the signal.
stop_with() {
	case $2 in
	group) /bin/kill "-$1" -- "-$pgid" ;;
	pid) /bin/kill "-$1" "$pgid" ;;
	esac
	# Exited: no such process, or a zombie for this shell to reap.
	exited() { ! kill -0 "$pgid" 2>/dev/null || [ "$(cut -d' ' -f3 "/proc/$pgid/stat" 2>/dev/null)" = Z ]; }
	wait_for 600 exited || fail "$3: still running 60 s after SIG$1"
	rc=0
	wait "$pgid" || rc=$?
	want=$((128 + $(/bin/kill -l "$1")))
	[ "$rc" -eq "$want" ] || fail "$3: exit status $rc after SIG$1, expected $want"
}
# The flavour table's `off` run of the first round is done: one appeared in the session
# and ended (every round begins with it or has it; --time 0.5 makes it last seconds).
off_run_done() {
	off_runs() { pgrep -s "$pgid" -f 'vioscope-off.* bench --json' >/dev/null; }
	no_off_run() { ! off_runs; }
	wait_for 2400 off_runs || fail "no run of the off flavour began"
	wait_for 2400 no_off_run || fail "the off flavour's run never ended"
}
# Nothing of the run is left: no process of its session, no trace file, no temporary file.
nothing_left() {
	session_gone() { ! pgrep -s "$pgid" >/dev/null; }
	if [ -n "$pgid" ]; then
		wait_for 300 session_gone ||
			fail "processes of the run still there: $(pgrep -a -s "$pgid")"
		pgid=""
	fi
	left=$(ls -A "$VIOSCOPE_TRACE_DIR" "$TMPDIR" | grep -v '^/\|^$' || true)
	[ -z "$left" ] || fail "left behind: $(ls -AR "$VIOSCOPE_TRACE_DIR" "$TMPDIR")"
}

# An empty dm-log-writes log (its super block only: magic, version 1, no entry, 512-byte
# sectors) and a 1 MiB base image: one crash state, the base itself.
empty_log() {
	{
		printf '\162\150\163\167\146\163\152\000\001\000\000\000\000\000\000\000'
		printf '\000\000\000\000\000\000\000\000\000\002\000\000'
	} >"$work/log"
	truncate -s 512 "$work/log"
	truncate -s 1M "$work/base"
}

case $scenario in
bench_exit_status)
	# 0: a run; 1: requests failed (a write to a read-only LUN), and why: the sense;
	# 2: a bad command line; 3: it could not run, and why: the target's own words.
	expect 0 ok "$bin" bench --target null=64M --profile rnd4k-q1t1 --time 0.2
	: >"$work/ro.img"
	truncate -s 16M "$work/ro.img"
	expect 1 ro "$bin" bench --target "file=$work/ro.img,ro" --rw write --profile rnd4k-q1t1 \
		--time 0.2
	said ro 'requests failed; the first: CHECK CONDITION, DATA PROTECT: WRITE PROTECTED'
	expect 2 usage "$bin" bench --time soon
	expect 2 fio "$bin" bench --target null=64M --fio
	said fio 'nothing fio can reach'
	expect 3 nosock "$bin" bench --socket "$work/no.sock" --time 0.2
	said nosock "cannot connect to $work/no.sock"
	expect 3 notarget "$bin" bench --target "file=$work/no.img" --time 0.2
	said notarget "vioscope target: .*cannot open $work/no.img: No such file or directory"
	nothing_left
	;;
bench_sigint)
	# Ctrl-C (SIGINT to the job's group: the target gets it too) while the first profile
	# runs on the default image: that profile's figures so far, the seed, and nothing
	# left: not the 1 GiB image in /dev/shm, not a trace file, not a socket directory.
	start run "$bin" bench --profile rnd4k-q1t1 --profile rnd4k-q32t1 --time 600
	wait_for 1200 grep -q '^rnd4k-q1t1: the initiator ' "$work/run.err" || fail "no run began"
	image=$(sed -n 's/.* = file=\(\/[^,]*vioscope-bench-'"$pgid"'-[^,]*\.img\),.*/\1/p' \
		"$work/run.err")
	[ -n "$image" ] && [ -f "$image" ] || fail "no image of the run's own (pid $pgid) named"
	stop_with INT group run
	grep -q '^rnd4k-q1t1 *read ' "$work/run.out" || fail "no figures of the profile cut short"
	said run 'interrupted: measured over the'
	said run 'interrupted by SIGINT; not run in full: rnd4k-q1t1, rnd4k-q32t1; seed 1'
	[ ! -e "$image" ] || fail "$image left behind"
	nothing_left
	;;
bench_sigterm)
	# SIGTERM to bench alone (as kill or systemd sends it): it stops its target itself;
	# --json says it was interrupted and holds the figures so far.
	start run "$bin" bench --target null=64M --profile rnd4k-q1t1 --time 600 --json
	# once it measures (it says so on stderr, --json or not)
	wait_for 1200 grep -q '^rnd4k-q1t1: the initiator .*; measuring ' "$work/run.err" ||
		fail "no measurement began"
	stop_with TERM pid run
	said run '"interrupted": "SIGTERM", "results": \['
	said run '"profile": "rnd4k-q1t1", .*"interrupted": true'
	said run '"seed": 1'
	nothing_left
	;;
bench_flavours_sigint)
	# Ctrl-C once the flavour table's first run is done: the table of the runs done, the
	# seed, every flavour's run stopped, nothing left (the runs' directory included).
	start run "$bin" bench --flavours --rounds 5 --time 0.5 --target null=64M
	off_run_done
	stop_with INT group run
	grep -q '^off  *|' "$work/run.out" || fail "no table of the runs done"
	said run 'interrupted by SIGINT \(in\|after\) round [0-9] of 5: the table holds the runs completed before it; seed 1'
	nothing_left
	;;
bench_trace_sigint)
	# Ctrl-C while `bench trace` measures: it stops, says so, removes its directory.
	start run "$bin" bench trace --rounds 1000 --no-callgrind --no-sustained
	wait_for 1200 grep -q 'rounds x' "$work/run.err" || fail "no run began"
	stop_with INT group run
	said run 'interrupted by SIGINT'
	nothing_left
	;;
bench_trace_exit_status)
	expect 0 ok "$bin" bench trace --rounds 1 --events 1000 --no-callgrind --no-sustained
	expect 2 usage "$bin" bench trace --rate fast
	TMPDIR="$work/none" expect 3 notmp "$bin" bench trace --rounds 1 --events 1000 \
		--no-callgrind --no-sustained
	said notmp "$work/none"
	nothing_left
	;;
json_meta)
	# Every --json document opens with the build, the time and the command line as given:
	# bench, bench trace and the flavour table's (bench_table_json) the same way.
	expect 0 bench "$bin" bench --target null=64M --profile rnd4k-q1t1 --time 0.2 --json
	expect 0 trace "$bin" bench trace --rounds 1 --events 1000 --no-callgrind --no-sustained --json
	for name in bench trace; do
		python3 - "$work/$name.out" <<'PY' || fail "$name: --json without the build, time and argv"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["vioscope"]["version"] and d["vioscope"]["commit"] and d["vioscope"]["flavour"]
assert d["time"].endswith("Z") and "--json" in d["argv"]
PY
	done
	nothing_left
	;;
bench_dirty_log)
	# --dirty-log: the initiator shares a dirty log as a migrating QEMU does; the embedded
	# target says logging started, once per connection, and every request still completes.
	VIOSCOPE_BENCH_TARGET_LOG=1 expect 0 log "$bin" bench --target ram=64M --profile rnd4k-q4t1 \
		--time 0.5 --dirty-log --json --no-progress
	said log "live migration: dirty logging on"
	python3 - "$work/log.out" <<'PY' || fail "log: no requests completed while logging"
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
assert r["iops"] > 0 and r.get("errors", 0) == 0, r
PY
	nothing_left
	;;
bench_keep_inflight)
	# --keep-inflight: the initiator asks the embedded target for an in-flight region
	# (GET_INFLIGHT_FD) as QEMU does to survive a backend restart (one ring each: control,
	# event, the request queue), and the request ring lays it out as it starts: said in the
	# target's trace (recorded: its stderr says nothing of it), and every request still
	# completes.  Without the option, no region.
	expect 0 keep "$bin" bench --target ram=64M --profile rnd4k-q4t1 --time 0.5 \
		--keep-inflight --json --no-progress --record "$work/keep"
	python3 - "$work/keep.out" <<'PY' || fail "keep: no requests completed with --keep-inflight"
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
assert r["iops"] > 0 and r.get("errors", 0) == 0, r
PY
	expect 0 keep-trace "$bin" trace decode "$work"/keep/*.vst
	said keep-trace "in-flight region made: 3 queues"
	said keep-trace "vq 2 in-flight region: fresh, laid out for 256 entries"
	expect 0 plain "$bin" bench --target ram=64M --profile rnd4k-q4t1 --time 0.2 --json \
		--no-progress --record "$work/plain"
	expect 0 plain-trace "$bin" trace decode "$work"/plain/*.vst
	! grep -q "in-flight region" "$work/plain-trace.out" ||
		fail "plain: an in-flight region without --keep-inflight"
	nothing_left
	;;
bench_record_dir)
	# --record DIR holds one run: a second run into it is refused (3), not mixed in; a
	# recording that could not start never says "no trace event lost".
	expect 0 first "$bin" bench --target null=64M --profile rnd4k-q1t1 --time 0.2 \
		--record "$work/rec"
	[ "$(ls "$work/rec" | grep -c '\.vst$')" -eq 2 ] || fail "first run: $(ls "$work/rec")"
	expect 3 second "$bin" bench --target null=64M --profile rnd4k-q1t1 --time 0.2 \
		--record "$work/rec"
	said second "--record $work/rec already holds captures"
	[ "$(ls "$work/rec" | grep -c '\.vst$')" -eq 2 ] || fail "second run mixed in: $(ls "$work/rec")"
	: >"$work/file"
	expect 3 file "$bin" bench --target null=64M --profile rnd4k-q1t1 --time 0.2 \
		--record "$work/file"
	! grep -q 'no trace event lost' "$work/file.out" || fail "a recording not made said nothing lost"
	nothing_left
	;;
bench_flavours_missing)
	# An installed vioscope without the flavour binaries beside it: said, exit 3, nothing
	# run (it used to run one flavour and say five).
	mkdir "$work/bin"
	cp "$bin" "$work/bin/vioscope"
	expect 3 run "$work/bin/vioscope" bench --flavours --rounds 1 --time 0.2 --target null=64M
	said run 'only 1 of the 5 flavour runs can run here: no vioscope-off, vioscope-all, vioscope-cold-print beside'
	nothing_left
	;;
bench_poller_starved)
	# The polling initiator with a CPU hog on its CPU (bench, its target and the hog pinned
	# to one CPU: the scheduler gives each a share, so the poller waits for the CPU most
	# of the run): the result says it was starved.  Without --initiator-poll the
	# initiator takes completions by interrupt.
	taskset -c 0 sh -c 'while :; do :; done' &
	hog=$!
	expect 0 poll taskset -c 0 "$bin" bench --target null=64M --profile rnd4k-q1t1 --time 1 \
		--initiator-poll
	said poll 'the polling initiator was starved: its threads waited for a CPU'
	expect 0 json taskset -c 0 "$bin" bench --target null=64M --profile rnd4k-q1t1 --time 1 \
		--initiator-poll --json
	said json '"initiator": "poll", "initiator_cpu_wait": 0\.[0-9]*, "starved": true'
	kill -KILL "$hog"
	hog=""
	expect 0 default "$bin" bench --target null=64M --profile rnd4k-q1t1 --time 0.2 --json
	said default '"initiator": "interrupt"'
	nothing_left
	;;
check_exit_status)
	# 0 passed; 1 a fault found; 2 a bad command line; 3 it could not start (no socket, a
	# target that would not start, with its own words, no work directory).
	expect 0 ok "$bin" check verify --target ram=16M --time 0.3
	expect 1 fault "$bin" check verify --target ram=16M,misdirect-write=20 --writes 100 \
		--queues 1 --depth 1 --seed 7
	said fault 'misdirected write: '
	expect 2 usage "$bin" check verify --target ram=16M --depth 0
	expect 2 typo "$bin" check verify --target ramm=16M
	expect 3 nosock "$bin" check verify --socket "$work/no.sock" --destroy-data --time 0.3
	said nosock "$work/no.sock"
	expect 3 notarget "$bin" check verify --target "file=$work/no.img" --time 0.3
	said notarget "vioscope target: .*cannot open $work/no.img: No such file or directory"
	empty_log
	expect 0 flush "$bin" check flush --log "$work/log" --base "$work/base" --fsck true
	expect 3 noworkdir "$bin" check flush --log "$work/log" --base "$work/base" --fsck true \
		--workdir "$work/none"
	expect 3 nodir "$bin" check stress --time 0.3 --dir "$work/none"
	said nodir "$work/none"
	nothing_left
	;;
check_verify_sigint)
	# Ctrl-C during the random phase: the figures so far and the seed, the target
	# stopped, its socket directory gone.
	start run "$bin" check verify --target ram=64M --time 600 --seed 42
	wait_for 1200 grep -q '^vioscope check verify: ' "$work/run.out" || fail "no run began"
	stop_with INT group run
	said run '^  random '
	said run 'INTERRUPTED by SIGINT at .* s: the read-back of every sector was not done; .*seed 42 (--seed to repeat)'
	! grep -q '^PASS' "$work/run.out" || fail "an interrupted check said PASS"
	nothing_left
	;;
check_stress_sigterm)
	# SIGTERM to stress alone: it stops its target, removes its 256 MiB image.
	mkdir "$work/stress"
	start run "$bin" check stress --time 600 --dir "$work/stress" --seed 9
	wait_for 1200 grep -q '^vioscope check stress: ' "$work/run.out" || fail "no run began"
	stop_with TERM pid run
	said run 'INTERRUPTED by SIGTERM at .* seed 9 (--seed to repeat)'
	[ -z "$(ls -A "$work/stress")" ] || fail "left in --dir: $(ls -AR "$work/stress")"
	nothing_left
	;;
check_flush_sigint)
	# SIGINT to flush alone while its --fsck command runs: the command (a job of its own)
	# is stopped too, the scratch images go.
	empty_log
	start run "$bin" check flush --log "$work/log" --base "$work/base" --seed 5 \
		--fsck "touch '$work/fsck-running'; exec tail -f /dev/null"
	wait_for 1200 test -e "$work/fsck-running" || fail "the fsck command never ran"
	stop_with INT pid run
	said run 'INTERRUPTED by SIGINT: the 0 crash states checked before it passed; seed 5'
	nothing_left
	;;
check_verify_destroy_data)
	# verify writes over what it tests: a --device (or --socket) is written only with
	# --destroy-data; with it, progress shows every 2 s.
	head -c 4194304 /dev/urandom >"$work/disk.img"
	sum=$(sha256sum <"$work/disk.img")
	expect 2 refused "$bin" check verify --device "$work/disk.img" --time 0.3
	said refused 'add --destroy-data to confirm'
	[ "$(sha256sum <"$work/disk.img")" = "$sum" ] || fail "the device was written without --destroy-data"
	expect 0 confirmed "$bin" check verify --device "$work/disk.img" --time 2.5 --destroy-data
	said confirmed '^ *2\.[0-9] s: [0-9]* requests'
	said confirmed '^PASS'
	nothing_left
	;;
demo_exit_status)
	expect 0 ok "$bin" demo --trace
	expect 1 failed env VIOSCOPE_TRACE_DIR="$work/none" "$bin" demo --trace
	expect 2 usage "$bin" demo --rounds 0
	expect 3 nodir env VIOSCOPE_DEMO_DIR="$work/none/demo" "$bin" demo --trace
	said nodir "VIOSCOPE_DEMO_DIR=$work/none/demo"
	# the demo's directory is kept (it says where), the rest goes
	rm -rf "$TMPDIR"/vioscope-demo-*
	nothing_left
	;;
demo_sigterm)
	# SIGTERM to the demo alone while its table runs: the flavour runs stop (they are its
	# jobs), the table of the rounds done and the seed are printed, the image and the
	# demo's directory go.
	start run "$bin" demo --rounds 5 --time 0.5
	off_run_done
	image=$(sed -n 's/^\(.*vioscope-demo-.*\.img\) (removed when the demo ends)\.$/\1/p' \
		"$work/run.out")
	[ -n "$image" ] || fail "no image named"
	stop_with TERM pid run
	said run 'the table holds the runs completed before it; seed 1'
	said run 'vioscope demo: interrupted by SIGTERM'
	[ ! -e "$image" ] || fail "$image left behind"
	nothing_left
	;;
*)
	echo "unknown scenario $scenario"
	exit 2
	;;
esac
echo "ok: $scenario"
