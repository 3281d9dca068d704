#!/usr/bin/env bash
# The test command: installs dependencies, builds everything with warnings as errors, runs the
# whole suite through ctest.
#   scripts/test.sh                              # normal build in build/
#   SANITIZE=address,undefined scripts/test.sh   # ASan+UBSan build in build-asan/ (gcc)
#   SANITIZE=fuzz scripts/test.sh                # ASan+UBSan in the clang fuzz build, build-fuzz/
#   SANITIZE=thread scripts/test.sh              # TSan build in build-tsan/
#   CI=true scripts/test.sh                      # CI: normal, fuzz (ASan+UBSan) and TSan, then a
#                                                # fuzz smoke run in the same clang build
#                                                # (FUZZ_SECONDS per target, default 30)
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${CI:-}" = "true" ] && [ -z "${SANITIZE+x}" ]; then
  start=$SECONDS
  stage() { echo "=== $1 (at $((SECONDS - start)) s)"; }
  stage "normal build and suite"
  SANITIZE= CI= scripts/test.sh
  # ASan+UBSan in the clang build the fuzzers use: one build serves the suite and the fuzz run.
  stage "ASan + UBSan build and suite (clang, the fuzz build)"
  SANITIZE=fuzz CI= scripts/test.sh
  stage "TSan build and suite"
  SANITIZE=thread CI= scripts/test.sh
  stage "fuzz smoke run"
  FUZZ_SECONDS=${FUZZ_SECONDS:-30} FUZZ_JOBS=${FUZZ_JOBS:-2} scripts/fuzz.sh
  stage "done"
  exit 0
fi

scripts/deps.sh
# ccache (CMakeLists.txt) hits across clones: paths inside the clone are hashed relative to it, and
# the working directory (in -g builds' debug info) is not hashed.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-8G}"
san="${SANITIZE:-}"
case "$san" in
  # The normal build is the Dockerfile's, Release: the suite tests what users run, and the
  # figures in the docs are measured with this build/ (scripts/demo.sh builds the same).
  "") dir=build; type=Release ;;
  thread) dir=build-tsan; type=Debug ;;
  fuzz) dir=build-fuzz; type=RelWithDebInfo ;;
  *) dir=build-asan; type=Debug ;;
esac
if [ "$san" = fuzz ]; then
  # The configuration scripts/fuzz.sh uses (clang, libFuzzer coverage, ASan+UBSan), so the fuzz
  # run after it rebuilds nothing. Warnings are gcc's job (-Werror in the normal build).
  scripts/clang-deps.sh
  CC=clang CXX=clang++ cmake -S . -B "$dir" -DGAPLESS_FUZZ=ON -DCMAKE_BUILD_TYPE="$type" >/dev/null
else
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE="$type" -DGAPLESS_WERROR=ON -DGAPLESS_SANITIZE="$san" \
    >/dev/null
fi
cmake --build "$dir" -j"${JOBS:-2}"
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/tsan.supp"
# A test that hangs fails by name after TEST_TIMEOUT seconds instead of eating CI's whole budget
# (the longest test takes ~45 s in the sanitizer builds); tests with their own TIMEOUT keep it.
ctest --test-dir "$dir" --output-on-failure -j"${JOBS:-2}" --timeout "${TEST_TIMEOUT:-300}"
