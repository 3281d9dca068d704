#!/usr/bin/env bash
# Regenerates bench/results/ (the tables and plots in bench/README.md): builds gapless-bench
# (Release) and replays the 17 published trace variants, seeds 42-51, with the FGD paper's six
# baselines and Gapless's own strategy, then the extender's shipped policies, then the dynamic
# mode on the default trace, in-process and as deployed; last, bench/plot.sh renders the PNGs
# (skipped, with a note, when gnuplot is missing).
#
#   bench/run_sweep.sh                 # traces from bench/traces/alibaba-gpu-v2023
#   TRACES=/path/to/csv bench/run_sweep.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
traces=${TRACES:-$root/bench/traces/alibaba-gpu-v2023}
build=${BUILD:-$root/build-bench}
out=$root/bench/results

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j2 --target gapless-bench

pods=()
for t in default cpu050 cpu100 cpu200 cpu250 gpushare40 gpushare60 gpushare80 gpushare100 \
         gpuspec10 gpuspec20 gpuspec25 gpuspec33 multigpu20 multigpu30 multigpu40 multigpu50; do
  pods+=(--pods "$traces/openb_pod_list_$t.csv")
done
mkdir -p "$out/curves" "$build/curves"
cd "$root"
"$build/gapless-bench" --nodes "$traces/openb_node_list_gpu_node.csv" "${pods[@]}" \
  --policy random --policy dotprod --policy clustering --policy packing --policy bestfit \
  --policy fgd --policy gapless --seeds 42-51 --json \
  --markdown "$out/table.md" --curves "$build/curves" >"$out/results.jsonl"
cp "$build"/curves/default_*.csv "$out/curves/"
"$build/gapless-bench" --nodes "$traces/openb_node_list_gpu_node.csv" "${pods[@]}" \
  --policy policies/default.yaml --policy bundle --policy spread --seeds 42-51 --json \
  --markdown "$out/table_policies.md" >"$out/results_policies.jsonl"
# As deployed: the same replays through kube-scheduler configured as manifests/ ships it.
"$build/gapless-bench" --nodes "$traces/openb_node_list_gpu_node.csv" "${pods[@]}" \
  --policy policies/default.yaml --seeds 42-51 --json \
  --scheduler-config manifests/scheduler-config.yaml \
  --markdown "$out/table_deployed.md" >"$out/results_deployed.jsonl"
"$build/gapless-bench" --nodes "$traces/openb_node_list_gpu_node.csv" \
  --pods "$traces/openb_pod_list_default.csv" --dynamic --speedup 100000 \
  --policy bestfit --policy fgd --policy gapless --policy policies/default.yaml --seeds 42-51 \
  --json --markdown "$out/dynamic.md" --curves "$out/curves" >"$out/dynamic.jsonl"
# The dynamic mode as deployed, and without the pod informer's Unschedulable path.
"$build/gapless-bench" --nodes "$traces/openb_node_list_gpu_node.csv" \
  --pods "$traces/openb_pod_list_default.csv" --dynamic --speedup 100000 \
  --policy policies/default.yaml --policy fgd --policy gapless --policy bestfit --seeds 42-51 \
  --scheduler-config manifests/scheduler-config.yaml \
  --json --markdown "$out/dynamic_deployed.md" >"$out/dynamic_deployed.jsonl"
"$build/gapless-bench" --nodes "$traces/openb_node_list_gpu_node.csv" \
  --pods "$traces/openb_pod_list_default.csv" --dynamic --speedup 100000 \
  --policy policies/default.yaml --seeds 42-51 \
  --scheduler-config manifests/scheduler-config.yaml --no-unschedulable \
  --json --markdown "$out/dynamic_deployed_filter_only.md" >"$out/dynamic_deployed_filter_only.jsonl"
if command -v gnuplot >/dev/null; then
  "$root/bench/plot.sh"
else
  echo "run_sweep.sh: gnuplot not found, plots not redrawn (apt-get install gnuplot-nox)" >&2
fi
