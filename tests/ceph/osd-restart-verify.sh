#!/usr/bin/env bash
# One scenario: the cluster's only OSD is killed (SIGKILL) and restarted while
# `vioscope check verify` drives a target on an RBD image with 2 queues (no timeout=: requests
# wait for the cluster).  Passes when verify does (every request completed, every sector reads
# back as last written: nothing acknowledged was lost) and the restart fell inside its run.
# usage: osd-restart-verify.sh VIOSCOPE   ($VIOSCOPE_TEST_RBD = POOL/IMAGE,conf=PATH)
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
vioscope=$1
run_s=${VIOSCOPE_TEST_VERIFY_S:-30}
out=$(mktemp /tmp/vs-osd-restart-verify.XXXXXX)
trap 'rm -f "$out"' EXIT

"$vioscope" check verify --target "rbd=$VIOSCOPE_TEST_RBD" --time "$run_s" --queues 2 \
	>"$out" 2>&1 &
verify=$!
# Not synchronisation: where in the run the OSD dies.  The check below makes sure it was
# inside the run.
sleep 6
if ! kill -0 "$verify" 2>/dev/null; then
	cat "$out"
	echo "osd-restart-verify: FAIL: verify ended before the OSD was killed"
	exit 1
fi
t0=$(date +%s)
"$here/restart-osd.sh" || {
	kill "$verify"
	wait "$verify"
	echo "osd-restart-verify: FAIL: restart-osd.sh failed"
	exit 1
}
back=$(($(date +%s) - t0))
if ! kill -0 "$verify" 2>/dev/null; then
	cat "$out"
	echo "osd-restart-verify: FAIL: verify ended before the OSD was back; make its run longer"
	exit 1
fi
wait "$verify"
rc=$?
cat "$out"
if ((rc != 0)); then
	echo "osd-restart-verify: FAIL: vioscope check verify exited $rc"
	exit 1
fi
echo "osd-restart-verify: PASS: the OSD was down and back in ${back} s during a ${run_s} s verify run"
