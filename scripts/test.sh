#!/usr/bin/env bash
# The whole test suite, as CI runs it (first the layering rules and clang-format on the
# C lines changed since the tree was formatted):
#   1. gcc build, warnings are errors, all tests (unit, integration, guest, ceph); the
#      install and examples/ built against it out of tree, run, recorded and decoded;
#      then the non-guest tests twice more at -j8 beside a CPU hog (scripts/test-loaded.sh):
#      a test that fails only on a busy machine fails here, before it lands
#   2. clang build, warnings are errors
#   3. AddressSanitizer + UndefinedBehaviorSanitizer build (clang), all tests but the guest
#      tests (the ceph tests included: they start their own single-host cluster)
#   4. ThreadSanitizer build (clang) of the hostile-guest race test only
#   5. libFuzzer targets (clang), each run briefly on its corpus
# Usage: scripts/test.sh [--quick]   (--quick: step 1 only, without the guest test)
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
[[ "${1:-}" == "--quick" ]] && quick=1

if ((quick)); then
	scripts/deps.sh
else
	scripts/deps.sh --guest --ceph
fi

step() { printf '\n==== %s\n' "$*"; }

step "layering rules (docs/ARCHITECTURE.md)"
scripts/check-layers.sh

step "formatting: clang-format on every C line changed since the tree was formatted"
scripts/check-format.sh

step "gcc build (-Werror)"
CC=gcc scripts/build.sh build -DVIOSCOPE_WERROR=ON
step "install, and examples/ built out of tree against it (CMake, pkg-config)"
scripts/test-examples.sh build
step "tests (gcc)"
if ((quick)); then
	(cd build && ctest --output-on-failure -j2 -LE guest)
	exit 0
fi
(cd build && ctest --output-on-failure -j2)
step "tests under load (gcc): the non-guest tests at -j8 beside a CPU hog, twice"
scripts/test-loaded.sh build 2

step "clang build (-Werror)"
CC=clang scripts/build.sh build-clang -DVIOSCOPE_WERROR=ON

step "sanitizer build and tests (ASan + UBSan)"
CC=clang scripts/build.sh build-asan -DVIOSCOPE_SANITIZE=ON
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	ctest --output-on-failure -j2 -LE guest)

step "ThreadSanitizer: a guest racing the target (tests/hostile/test_race.c), statistics read and cleared while workers count (tests/target/test_stats.c)"
CC=clang cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVIOSCOPE_TSAN=ON \
	-DVIOSCOPE_WERROR=ON >/dev/null
cmake --build build-tsan -j"$(nproc)" --target test_hostile_race test_target_stats
(cd build-tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
	ctest --output-on-failure -R '^(hostile\.race|target\.stats)$')

step "fuzz targets (libFuzzer, a few seconds each)"
CC=clang scripts/build.sh build-fuzz -DVIOSCOPE_FUZZ=ON
(cd build-fuzz && ctest --output-on-failure -R '^fuzz\.')
