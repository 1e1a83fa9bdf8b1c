#!/usr/bin/env bash
# One scenario: `vioscope bench` against an rbd= target takes completions by interrupt by
# itself and says so (a polling initiator would spin a CPU between completions hundreds of
# microseconds apart), polls when told to (--initiator-poll), and reports the CPU per
# request of the initiator and of the target; --interrupt with --initiator-poll is refused.
# usage: bench-mode.sh VIOSCOPE   ($VIOSCOPE_TEST_RBD = POOL/IMAGE,conf=PATH)
set -uo pipefail
vioscope=$1
target="rbd=$VIOSCOPE_TEST_RBD"
out=$(mktemp /tmp/vs-bench-mode.XXXXXX)
err=$(mktemp /tmp/vs-bench-mode.XXXXXX)
trap 'rm -f "$out" "$err"' EXIT
fail() {
	echo "--- stdout"
	cat "$out"
	echo "--- stderr"
	cat "$err"
	echo "bench-mode: FAIL: $*"
	exit 1
}
bench() { "$vioscope" bench --target "$target" --profile rnd4k-q4t1 --time 0.5 --queues 1 "$@" >"$out" 2>"$err"; }

bench --no-progress || fail "bench against $target failed"
grep -q 'rnd4k-q4t1: the initiator takes completions by interrupt (rbd target' "$err" ||
	fail "no word that the initiator takes an rbd target's completions by interrupt"
grep -Eq '^  CPU per request: initiator \(interrupt\) [0-9.]+ us, target [0-9.]+ us$' "$out" ||
	fail "no CPU per request line for the initiator (interrupt) and the target"

bench --json || fail "bench --json failed"
grep -q '"rw": "read".*"cpu_us": [0-9.]*, "target_cpu_us": [0-9.]*, "initiator": "interrupt"' "$out" ||
	fail "the JSON result does not say interrupt mode with both CPU figures"

bench --json --initiator-poll || fail "bench --initiator-poll failed"
grep -q '"initiator": "poll"' "$out" || fail "--initiator-poll did not poll"

bench --interrupt --initiator-poll
rc=$?
[[ $rc -eq 2 ]] || fail "--interrupt with --initiator-poll: exit $rc, expected 2"
grep -q 'exclude each other' "$err" || fail "--interrupt with --initiator-poll: no reason given"
echo "bench-mode: PASS"
