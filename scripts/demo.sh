#!/usr/bin/env bash
# The main job on a fresh machine: install dependencies, build, run `vioscope demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
echo "building (log: build/build.log) ..."
mkdir -p build
if ! scripts/build.sh build > build/build.log 2>&1; then
	tail -40 build/build.log
	exit 1
fi
exec build/tools/vioscope demo "$@"
