#!/usr/bin/env bash
# The main job on a fresh machine: install dependencies, build, run `vioscope demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh build
exec build/tools/vioscope demo "$@"
