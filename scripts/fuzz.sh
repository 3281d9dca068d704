#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang in build-fuzz/ and runs each for FUZZ_SECONDS.
# Exits non-zero if any target finds a crash, leak, timeout, out-of-memory or broken invariant.
#   scripts/fuzz.sh                                   # every target, 30 s each (smoke run)
#   FUZZ_SECONDS=3600 scripts/fuzz.sh extender_filter # a long campaign on one target
#   FUZZ_JOBS=2 scripts/fuzz.sh                       # two targets at a time
# Environment: FUZZ_SECONDS (30), FUZZ_TIMEOUT (per-input limit, 10 s), FUZZ_ARGS (extra libFuzzer
# flags), JOBS (build parallelism, 2). The corpus a run grows lives in build-fuzz/fuzz-corpus/,
# so the committed seeds in fuzz/corpus/ stay as they are; crashers go to build-fuzz/fuzz-crashes/.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
scripts/clang-deps.sh  # clang with libFuzzer, ASan and UBSan

all_targets=(extender_filter extender_prioritize extender_bind extender_preempt pod node topology
             allocation_record cluster_file quantity json_stream kubeconfig policy admission)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
  [ -f "fuzz/${t}_fuzz.cpp" ] || { echo "fuzz.sh: no target $t (known: ${all_targets[*]})" >&2; exit 2; }
done

build="build-fuzz"
binaries=()
for t in "${targets[@]}"; do binaries+=("${t}_fuzz"); done
echo "building ${binaries[*]} in $build (log: $build/fuzz-build.log)"
mkdir -p "$build"
if ! { CC=clang CXX=clang++ cmake -S . -B "$build" -DGAPLESS_FUZZ=ON \
         -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
       cmake --build "$build" -j"${JOBS:-2}" --target "${binaries[@]}"; } >"$build/fuzz-build.log" 2>&1
then
  tail -40 "$build/fuzz-build.log" >&2
  echo "fuzz.sh: the build failed (log: $build/fuzz-build.log)" >&2
  exit 1
fi

seconds=${FUZZ_SECONDS:-30}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# Longest input per target: room for the seeds and a few times more, small enough to stay fast.
max_len() {
  case "$1" in
    quantity) echo 64 ;;
    allocation_record | kubeconfig | policy | json_stream) echo 8192 ;;
    *) echo 16384 ;;
  esac
}
dict() {
  case "$1" in
    kubeconfig | policy | cluster_file) echo fuzz/yaml.dict ;;
    quantity) echo "" ;;
    *) echo fuzz/json.dict ;;
  esac
}

# One target: fuzz it, write its summary line to $build/fuzz-logs/<t>.result, and on failure
# print what was found and how to keep it.
fuzz_one() {
  local t=$1 corpus="$build/fuzz-corpus/$1" crashes="$build/fuzz-crashes/$1"
  local log="$build/fuzz-logs/$1.log" d rc runs rate crasher
  mkdir -p "$corpus" "$crashes" "$(dirname "$log")"
  d=$(dict "$t")
  local inputs=("$corpus" "fuzz/corpus/$t")
  [ -d "fuzz/regressions/$t" ] && inputs+=("fuzz/regressions/$t")
  echo "== $t: ${seconds}s (log: $log)"
  set +e
  # The first corpus directory is where libFuzzer writes; the committed ones are only read.
  # shellcheck disable=SC2086
  "$build/fuzz/${t}_fuzz" -max_total_time="$seconds" -rss_limit_mb=2048 \
    -timeout="${FUZZ_TIMEOUT:-10}" -max_len="$(max_len "$t")" ${d:+-dict=$d} \
    -print_final_stats=1 -artifact_prefix="$crashes/" ${FUZZ_ARGS:-} \
    "${inputs[@]}" >"$log" 2>&1
  rc=$?
  set -e
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  printf '%-20s %10s runs %8s exec/s  %s\n' "$t" "${runs:-?}" "${rate:-?}" \
    "$([ $rc -eq 0 ] && echo ok || echo "FAILED (exit $rc)")" >"$build/fuzz-logs/$t.result"
  if [ $rc -ne 0 ]; then
    grep -E "ERROR: |SUMMARY: |fuzz invariant violated|deadly signal|Test unit written" "$log" |
      head -8 | sed 's/^/   /' || true
    crasher=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
    if [ -n "$crasher" ]; then
      cat <<MSG
   crasher ($t): $crasher
     reproduce:  $build/fuzz/${t}_fuzz $crasher
     minimize:   $build/fuzz/${t}_fuzz -minimize_crash=1 -runs=10000 $crasher
     once fixed, keep it as a regression test (replayed by the ctest "fuzz: $t"):
                 mkdir -p fuzz/regressions/$t && cp $crasher fuzz/regressions/$t/<what-it-does>
MSG
    fi
  fi
}

# FUZZ_JOBS targets at a time (default 1; CI uses both cores).
start=$SECONDS
jobs_max=${FUZZ_JOBS:-1}
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n || true; done
  fuzz_one "$t" &
done
wait
failed=()
summary=()
for t in "${targets[@]}"; do
  line=$(cat "$build/fuzz-logs/$t.result" 2>/dev/null || echo "$t: no result")
  summary+=("$line")
  [[ $line == *" ok" ]] || failed+=("$t")
done

echo
echo "fuzzing done in $((SECONDS - start))s (${seconds}s per target):"
printf '  %s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: ${#failed[@]} target(s) failed: ${failed[*]} (logs in $build/fuzz-logs/)" >&2
  exit 1
fi
