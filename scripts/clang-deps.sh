#!/usr/bin/env bash
# Installs clang and its runtime libraries (libFuzzer, ASan, UBSan) from Debian packages when
# clang++ cannot build a fuzz target with them yet. Used by scripts/fuzz.sh and by
# scripts/test.sh for the ASan+UBSan suite, which runs in the same clang build as the fuzzers.
set -euo pipefail
can_fuzz() {
  command -v clang++ >/dev/null 2>&1 || return 1
  local probe
  probe=$(mktemp -d)
  printf 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }\n' \
    >"$probe/probe.cpp"
  clang++ -fsanitize=fuzzer,address,undefined "$probe/probe.cpp" -o "$probe/probe" \
    >/dev/null 2>&1
  local rc=$?
  rm -rf "$probe"
  return $rc
}
can_fuzz && exit 0
sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
command -v clang++ >/dev/null 2>&1 ||
  $sudo apt-get install -y -qq --no-install-recommends clang
if ! can_fuzz; then
  major=$(clang++ -dumpversion | cut -d. -f1)
  echo "installing: libclang-rt-$major-dev" >&2
  $sudo apt-get install -y -qq --no-install-recommends "libclang-rt-$major-dev"
fi
can_fuzz || { echo "clang-deps.sh: clang++ -fsanitize=fuzzer does not work here" >&2; exit 1; }
