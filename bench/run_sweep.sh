#!/usr/bin/env bash
# Regenerates bench/results/ (the tables and plots in bench/README.md): builds gapless-bench
# (Release) and replays the 17 published trace variants, seeds 42-51, with the FGD paper's six
# baselines and Gapless's own strategy, and each trace's limit (the LP bound and the offline
# packing, computed once per trace: the other runs pass --no-limit), then the extender's shipped
# policies, then the dynamic
# mode on the default trace, in-process and as deployed; last, bench/plot.sh renders the PNGs
# (skipped, with a note, when gnuplot is missing). Last, the generalization check (issue 27): the
# shipped default as deployed against FGD and BestFit on the 17 traces and on the synthetic family
# (bench/traces/synthetic/: tune-* the tuning half, val-* the validation half), with the worst
# margin to FGD over each set printed and written to results/generalization.md. Before it, the
# waits by pod size (issue 27): the dynamic mode on every trace with time columns, shipped default
# against FGD, in-process and as deployed, tabulated in results/waits.md.
#
#   bench/run_sweep.sh                 # traces from bench/traces/alibaba-gpu-v2023
#   TRACES=/path/to/csv bench/run_sweep.sh
#   SWEEP=generalization bench/run_sweep.sh   # only the as-deployed table and the generalization
#                                             # check (no paper baselines, dynamic mode or plots)
#   SWEEP=waits bench/run_sweep.sh     # only the waits by pod size (dynamic mode, every timed trace)
#   SEEDS=42-44 THREADS=1 ...          # fewer seeds, fewer threads (default 42-51, all cores)
#   BENCH=build/gapless-bench ...      # use that binary instead of building build-bench/
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
traces=${TRACES:-$root/bench/traces/alibaba-gpu-v2023}
build=${BUILD:-$root/build-bench}
out=$root/bench/results
synthetic=$root/bench/traces/synthetic
sweep=${SWEEP:-all}
seeds=${SEEDS:-42-51}
threads=()
if [[ -n ${THREADS:-} ]]; then threads=(--threads "$THREADS"); fi

if [[ -n ${BENCH:-} ]]; then  # a gapless-bench built elsewhere; no build here
  build=$(cd "$(dirname "$BENCH")" && pwd)
else
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" -j"${JOBS:-2}" --target gapless-bench
fi

pods=()
for t in default cpu050 cpu100 cpu200 cpu250 gpushare40 gpushare60 gpushare80 gpushare100 \
         gpuspec10 gpuspec20 gpuspec25 gpuspec33 multigpu20 multigpu30 multigpu40 multigpu50; do
  pods+=(--pods "$traces/openb_pod_list_$t.csv")
done
mkdir -p "$out/curves" "$build/curves"
cd "$root"
if [[ $sweep == all ]]; then
"$build/gapless-bench" --nodes "$traces/openb_node_list_gpu_node.csv" "${pods[@]}" \
  --policy random --policy dotprod --policy clustering --policy packing --policy bestfit \
  --policy fgd --policy gapless --seeds 42-51 --json \
  --markdown "$out/table.md" --curves "$build/curves" >"$out/results.jsonl"
cp "$build"/curves/default_*.csv "$out/curves/"
"$build/gapless-bench" --nodes "$traces/openb_node_list_gpu_node.csv" "${pods[@]}" \
  --policy policies/default.yaml --policy bundle --policy spread --seeds 42-51 --json --no-limit \
  --markdown "$out/table_policies.md" >"$out/results_policies.jsonl"
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
fi
if [[ $sweep == all || $sweep == waits ]]; then
# Waits by pod size (issue 27): the dynamic mode on every trace with time columns (the 13
# Alibaba lists that have them, at 10^5 as above; the synthetic family at 300, which brings each
# trace's 6-25 hours of arrivals into 1-5 minutes while lifetimes, 1 minute to 1 day, stay),
# shipped default against FGD, in-process and as deployed; bench/waits.py tabulates the
# multi-GPU pods' waits.
waits=$out/results_waits.jsonl
: >"$waits"
timed=()
for t in default cpu050 cpu100 cpu200 cpu250 gpushare40 gpushare60 gpushare80 gpushare100 \
         gpuspec10 gpuspec20 gpuspec25 gpuspec33; do
  timed+=(--pods "$traces/openb_pod_list_$t.csv")
done
for deployed in "" "--scheduler-config manifests/scheduler-config.yaml"; do
  # shellcheck disable=SC2086  # $deployed is empty or two words
  "$build/gapless-bench" --nodes "$traces/openb_node_list_gpu_node.csv" "${timed[@]}" \
    --dynamic --speedup 100000 --least-waits --policy policies/default.yaml --policy fgd \
    --seeds "$seeds" "${threads[@]}" $deployed --json --quiet >>"$waits"
  for p in "$synthetic"/pods/*.csv; do
    t=$(basename "$p" .csv)
    # shellcheck disable=SC2086
    "$build/gapless-bench" --nodes "$synthetic/nodes/$t.csv" --pods "$p" --dynamic --speedup 300 \
      --least-waits --policy policies/default.yaml --policy fgd --seeds "$seeds" "${threads[@]}" $deployed \
      --json --quiet >>"$waits"
  done
done
python3 "$root/bench/waits.py" "$waits" >"$out/waits.md"
cat "$out/waits.md"
[[ $sweep == waits ]] && exit 0
fi
# Generalization: the shipped default as deployed against FGD and BestFit as in the paper's
# setup (in-process; on the 17 traces those of results.jsonl, above or as committed), on the 17
# traces and on every synthetic trace (each has its own node list).
gen=$out/results_generalization.jsonl
: >"$gen"
for p in "$synthetic"/pods/*.csv; do
  t=$(basename "$p" .csv)
  "$build/gapless-bench" --nodes "$synthetic/nodes/$t.csv" --pods "$p" \
    --policy fgd --policy bestfit --seeds "$seeds" "${threads[@]}" --json --quiet >>"$gen"
  "$build/gapless-bench" --nodes "$synthetic/nodes/$t.csv" --pods "$p" \
    --policy policies/default.yaml --scheduler-config manifests/scheduler-config.yaml \
    --seeds "$seeds" "${threads[@]}" --json --quiet --no-limit >>"$gen"
done
# As deployed: the same replays through kube-scheduler configured as manifests/ ships it.
"$build/gapless-bench" --nodes "$traces/openb_node_list_gpu_node.csv" "${pods[@]}" \
  --policy policies/default.yaml --seeds "$seeds" "${threads[@]}" --json --no-limit \
  --scheduler-config manifests/scheduler-config.yaml \
  --markdown "$out/table_deployed.md" >"$out/results_deployed.jsonl"
python3 "$root/bench/generalization.py" "$out/results.jsonl" "$out/results_deployed.jsonl" "$gen" \
  >"$out/generalization.md"
cat "$out/generalization.md"
[[ $sweep == all ]] || exit 0
if command -v gnuplot >/dev/null; then
  "$root/bench/plot.sh"
else
  echo "run_sweep.sh: gnuplot not found, plots not redrawn (apt-get install gnuplot-nox)" >&2
fi
