#!/usr/bin/env bash
# Builds the test suites with AddressSanitizer + UndefinedBehaviorSanitizer into ./build-asan and
# runs the unit, dsl, symbolic and tensor tests there (CI runs it after the plain suite). Any report
# fails the run: UBSan aborts on the first finding and ASan reports leaks at exit.
# SANITIZE_TESTS overrides the ctest -R filter (a bounded subset by default, see below).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build-asan/build.ninja ]; then
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DTINYRW_SANITIZE=address,undefined -DTINYRW_BUILD_BENCH=OFF
fi
cmake --build build-asan -j "$(nproc)" --target test_ir test_dsl test_symbolic test_tensor rw rwc
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# The whole suites, less the sweeps that only repeat the same code paths with more seeds (they run
# uninstrumented in the main suite).
ctest --test-dir build-asan -L 'unit|dsl|symbolic|tensor' -E "${SANITIZE_EXCLUDE:-sweep}" \
  --output-on-failure -j "$(nproc)" --timeout 900
