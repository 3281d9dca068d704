#!/usr/bin/env bash
# Renders the PNGs of bench/README.md into bench/results/plots/ from the committed results:
#   allocation_default.png   GPU allocation % vs arrived % on the default trace (curves/default_*.csv)
#   unallocated_<group>.png  unallocated GPU % at arrived = 100 % per trace variant and policy, for
#                            the groups cpu, gpushare, gpuspec and multigpu (results.jsonl), with
#                            each trace's LP lower bound and offline packing where present
#   dynamic_default.png      the dynamic replay's GPU allocation and waiting pods over time
#                            (curves/default_*_dynamic.csv), when those curves exist
# Needs gnuplot with the pngcairo terminal (Debian: apt-get install gnuplot-nox) and awk. Called at
# the end of bench/run_sweep.sh; nothing in the build or the tests needs it.
#
#   bench/plot.sh                       # results in bench/results
#   RESULTS=/path/to/results bench/plot.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
results=${RESULTS:-$here/results}
out=$results/plots
if ! command -v gnuplot >/dev/null; then
  echo "plot.sh: gnuplot not found (Debian: apt-get install gnuplot-nox)" >&2
  exit 1
fi
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gp() { gnuplot -e "dir='$here/plots/'" "$@"; }

gp -e "curves='$results/curves'; out='$out/allocation_default.png'" "$here/plots/allocation.gp"

# results.jsonl -> one table per group: index, trace, then mean, sd, published per policy.
policies="random dotprod clustering packing bestfit fgd gapless"
awk -v policies="$policies" -v dir="$tmp" '
  function field(name,   m) {
    if (!match($0, "\"" name "\":[^,}]*")) return "NaN"
    m = substr($0, RSTART + length(name) + 3, RLENGTH - length(name) - 3)
    gsub(/"/, "", m)
    return m == "null" ? "NaN" : m
  }
  {
    t = field("trace"); p = field("policy")
    mean[t, p] = field("unallocated_mean"); sd[t, p] = field("unallocated_sd")
    pub[t, p] = field("published_mean")
  }
  END {
    np = split(policies, pol, " ")
    groups["cpu"] = "cpu050 cpu100 cpu200 cpu250"
    groups["gpushare"] = "gpushare40 gpushare60 gpushare80 gpushare100"
    groups["gpuspec"] = "gpuspec10 gpuspec20 gpuspec25 gpuspec33"
    groups["multigpu"] = "multigpu20 multigpu30 multigpu40 multigpu50"
    for (g in groups) {
      n = split(groups[g], traces, " ")
      file = dir "/" g ".dat"
      for (i = 1; i <= n; ++i) {
        t = traces[i]
        line = i " " t
        for (j = 1; j <= np; ++j) {
          line = line " " (((t, pol[j]) in mean) ? mean[t, pol[j]] " " sd[t, pol[j]] " " pub[t, pol[j]] : "NaN NaN NaN")
        }
        # The limit (issue 42): the LP's lower bound and the offline packing, when computed.
        line = line " " (((t, "lp-bound") in mean) ? mean[t, "lp-bound"] : "NaN")
        line = line " " (((t, "offline") in mean) ? mean[t, "offline"] : "NaN")
        print line > file
      }
      close(file)
    }
  }' "$results/results.jsonl"

bars() {  # group, title, x-axis label
  gp -e "data='$tmp/$1.dat'; out='$out/unallocated_$1.png'; heading='$2'; axis='$3'" \
    "$here/plots/bars.gp"
}
bars cpu "CPU-only pods (paper Fig. 14)" "trace variant: share of CPU-only pods (cpu050 = 5 %)"
bars gpushare "GPU-sharing pods (paper Fig. 11)" "trace variant: share of GPU request in shared GPUs"
bars gpuspec "GPU-model constraints (paper Fig. 13)" "trace variant: share of GPU request with a gpu_spec"
bars multigpu "Multi-GPU pods (paper Fig. 12)" "trace variant: share of GPU request in multi-GPU pods"

if compgen -G "$results/curves/default_*_dynamic.csv" >/dev/null; then
  gp -e "curves='$results/curves'; out='$out/dynamic_default.png'" "$here/plots/dynamic.gp"
fi
ls -l "$out"
