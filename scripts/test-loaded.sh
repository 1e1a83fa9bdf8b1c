#!/usr/bin/env bash
# The non-guest tests of a build tree at -j8 while a CPU hog keeps every CPU busy, ROUNDS
# times: a test that holds requests with a delay, asserts a wall-clock bound or sleeps
# instead of waiting for what it needs passes on an idle machine and fails here.
# Usage: scripts/test-loaded.sh [BUILD-DIR [ROUNDS [CTEST ARGS...]]]
#   (defaults: build, 2; e.g. `scripts/test-loaded.sh build 20 -R '^trace\.latency$'`)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
rounds=${2:-2}
shift $(($# < 2 ? $# : 2))

hogs=()
stop_hogs() {
	for pid in "${hogs[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
}
trap stop_hogs EXIT
for _ in $(seq "$(nproc)"); do
	yes >/dev/null &
	hogs+=($!)
done

failed=0
for round in $(seq "$rounds"); do
	start=$SECONDS
	if (cd "$dir" && ctest --output-on-failure -j8 -LE guest "$@"); then
		echo "round $round/$rounds under load: passed in $((SECONDS - start)) s"
	else
		echo "round $round/$rounds under load: FAILED after $((SECONDS - start)) s"
		failed=1
	fi
done
exit $failed
