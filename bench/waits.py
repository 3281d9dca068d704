#!/usr/bin/env python3
"""The waits-by-pod-size table (bench/README.md, issue 27 item 4) from gapless-bench --json lines.

    bench/waits.py RESULTS.jsonl [...] > bench/results/waits.md

Reads the dynamic-mode lines ("replay":"dynamic" as deployed, "mode":"dynamic" in-process) of the
shipped default (policies/default.yaml) and `fgd`. Prints, as markdown, one row per trace: the
multi-GPU pods' (2 or more whole GPUs) mean and longest wait, default against FGD, in-process and
as deployed (seconds, mean over the seeds), and under it, per set (the Alibaba traces, the
synthetic tuning half `tune-*`, the validation half `val-*`) and per mode, on how many traces the
default's multi-GPU pods wait no longer than FGD's, on average and at the longest. Exit status 1
where a trace lacks one of the four runs.
"""
import sys

from generalization import json_lines, set_of  # the sets named as in the generalization table

DEFAULT = "policies/default.yaml"
MEAN, TOP = "multi_gpu_pending_mean_s", "multi_gpu_pending_max_s"
RUNS = [("default", "process"), ("fgd", "process"), ("default", "deployed"), ("fgd", "deployed")]


def load(paths):
    rows = {}
    for r in json_lines(paths):
        deployed = r.get("mode") == "deployed" and r.get("replay") == "dynamic"
        if not deployed and r.get("mode") != "dynamic":
            continue
        policy = "default" if r["policy"] == DEFAULT else r["policy"]
        if policy not in ("default", "fgd"):
            continue
        key = (policy, "deployed" if deployed else "process")
        rows.setdefault(r["trace"], {})[key] = r
    return rows


def pair(runs, mode, field):
    d, f = runs[("default", mode)][field], runs[("fgd", mode)][field]
    return f"{d:.1f} / {f:.1f}" if field.endswith("mean_s") else f"{d:.0f} / {f:.0f}"


def with_bound(runs, policy):
    """The longest multi-GPU wait in-process and, in brackets, the least it could have been."""
    r = runs[(policy, "process")]
    bound = r.get("multi_gpu_longest_bound_s")
    return f"{r[TOP]:.0f}" + ("" if bound is None else f" ({bound:.0f})")


def main(paths):
    rows = load(paths)
    missing = [t for t, runs in rows.items() if any(k not in runs for k in RUNS)]
    if missing or not rows:
        print("waits.py: missing runs for " + (", ".join(sorted(missing)) or "every trace"),
              file=sys.stderr)
        return 1
    mean, top = MEAN, TOP
    print("Multi-GPU pods (2 or more whole GPUs): wait in seconds, shipped default / FGD, mean over "
          "the seeds of each run's mean and longest wait. In brackets, the least the longest-waiting "
          "one could have waited once it arrived: the earliest that any node could take it had "
          "nothing new been placed, from the trace's lifetimes (in-process only).\n")
    print("| trace | speedup | in-process: mean | in-process: longest | as deployed: mean | "
          "as deployed: longest | any pod's longest, as deployed |")
    print("|---|---|---|---|---|---|---|")
    order = sorted(rows, key=lambda t: (["Alibaba", "tuning half", "validation half"].index(
        set_of(t)), t))
    for t in order:
        r = rows[t]
        print(f"| {t} | {r[('default', 'process')]['speedup']:g} | {pair(r, 'process', mean)} | "
              f"{with_bound(r, 'default')} / {with_bound(r, 'fgd')} | {pair(r, 'deployed', mean)} | "
              f"{pair(r, 'deployed', top)} | {pair(r, 'deployed', 'pending_max_s')} |")
    print("\nTraces where the default's multi-GPU pods wait no longer than FGD's (mean; longest):\n")
    print("| set | traces | in-process | as deployed |")
    print("|---|---|---|---|")
    for s in ["Alibaba", "tuning half", "validation half"]:
        ts = [t for t in order if set_of(t) == s]
        cells = []
        for mode in ("process", "deployed"):
            m = sum(rows[t][("default", mode)][mean] <= rows[t][("fgd", mode)][mean] for t in ts)
            x = sum(rows[t][("default", mode)][top] <= rows[t][("fgd", mode)][top] for t in ts)
            cells.append(f"{m}; {x}")
        print(f"| {s} | {len(ts)} | {cells[0]} | {cells[1]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
