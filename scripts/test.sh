#!/usr/bin/env bash
# The test command: installs dependencies, builds everything with warnings as errors, runs the
# whole suite through ctest.
#   scripts/test.sh                          # normal build in build/
#   SANITIZE=address,undefined scripts/test.sh   # ASan+UBSan build in build-asan/
#   SANITIZE=thread scripts/test.sh              # TSan build in build-tsan/
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
san="${SANITIZE:-}"
case "$san" in
  "") dir=build; type=RelWithDebInfo ;;
  thread) dir=build-tsan; type=Debug ;;
  *) dir=build-asan; type=Debug ;;
esac
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE="$type" -DGAPLESS_WERROR=ON -DGAPLESS_SANITIZE="$san" >/dev/null
cmake --build "$dir" -j"${JOBS:-2}"
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/tsan.supp"
ctest --test-dir "$dir" --output-on-failure -j"${JOBS:-2}"
