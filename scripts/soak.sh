#!/usr/bin/env bash
# Soak test (not in CI): the Release extender on the built-in demo cluster under a steady wrk load
# of filter and prioritize calls for new pods, with its RSS sampled every 10 s.
#   scripts/soak.sh                      # one hour, 4 connections x 100 requests/s
#   SOAK_MINUTES=10 scripts/soak.sh
# Writes build/soak/rss.csv (seconds, RSS KiB) and prints the growth from the sample at 5 % of
# the run (after warm-up) to the last one.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${SOAK_MINUTES:-60}
port=${SOAK_PORT:-18888}
command -v wrk >/dev/null || { sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo; $sudo apt-get install -y -qq wrk; }
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null  # the build/ of scripts/test.sh
cmake --build build -j"${JOBS:-2}" --target gapless-extender >/dev/null
out=build/soak
mkdir -p "$out"
build/gapless-extender --listen "127.0.0.1:$port" >"$out/extender.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -fs "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
echo "seconds,rss_kib" >"$out/rss.csv"
(
  start=$SECONDS
  while kill -0 $pid 2>/dev/null; do
    echo "$((SECONDS - start)),$(awk '/VmRSS/ {print $2}' /proc/$pid/status)" >>"$out/rss.csv"
    sleep 10
  done
) &
sampler=$!
SOAK_DELAY_MS=${SOAK_DELAY_MS:-10} wrk -t2 -c4 -d"${minutes}m" --latency -s scripts/soak.lua \
  "http://127.0.0.1:$port" | tee "$out/wrk.txt"
kill $pid; wait $pid 2>/dev/null || true
kill $sampler 2>/dev/null || true
awk -F, -v n="$(wc -l <"$out/rss.csv")" 'NR > 1 { row[NR] = $2; t[NR] = $1 }
  END { first = int(n * 0.05) + 2; if (first > n) first = 2;
        printf "RSS %d KiB at %d s -> %d KiB at %d s: %+.2f %%\n", row[first], t[first], row[n], t[n],
               100 * (row[n] - row[first]) / row[first] }' "$out/rss.csv"
