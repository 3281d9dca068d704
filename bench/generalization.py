#!/usr/bin/env python3
"""The generalization table (bench/README.md, issue 27) from gapless-bench --json lines.

    bench/generalization.py RESULTS.jsonl [...] > bench/results/generalization.md

Reads every line; for each trace takes the shipped default as deployed ("mode":"deployed",
policy policies/default.yaml) and the in-process `fgd` and `bestfit` lines (the paper's setup: FGD
with the oracle mix). Prints, as markdown, one row per trace (unallocated GPU % at arrived = 100 %,
mean ± sd over the seeds; margin = default - FGD in points, negative is better) and the worst
margin over each set: the 17 Alibaba traces, the synthetic tuning half (`tune-*`) and the
validation half (`val-*`). Exit status 1 where a trace lacks one of the three.
"""
import json
import sys

DEFAULT = "policies/default.yaml"


def json_lines(paths):
    """Every object of the given JSON-lines files (gapless-bench --json), blank lines skipped."""
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    yield json.loads(line)


def load(paths):
    rows = {}
    for r in json_lines(paths):
        if r.get("replay") == "dynamic":
            continue
        deployed = r.get("mode") == "deployed"
        if deployed and r["policy"] == DEFAULT:
            key = "default"
        elif not deployed and r["policy"] in ("fgd", "bestfit"):
            key = r["policy"]
        else:
            continue
        rows.setdefault(r["trace"], {})[key] = r
    return rows


def set_of(trace):
    if trace.startswith("tune-"):
        return "tuning half"
    if trace.startswith("val-"):
        return "validation half"
    return "Alibaba"


def cell(r):
    return f"{r['unallocated_mean']:.2f} ± {r['unallocated_sd']:.2f}"


def main():
    rows = load(sys.argv[1:])
    missing = [t for t, r in rows.items() if len(r) < 3]
    order = ["Alibaba", "tuning half", "validation half"]
    print("| set | trace | default as deployed | FGD | BestFit | margin to FGD |")
    print("|---|---|---|---|---|---|")
    worst = {}
    for s in order:
        for t in sorted(t for t in rows if set_of(t) == s and t not in missing):
            r = rows[t]
            margin = r["default"]["unallocated_mean"] - r["fgd"]["unallocated_mean"]
            if s not in worst or margin > worst[s][0]:
                worst[s] = (margin, t)
            print(f"| {s} | {t} | {cell(r['default'])} | {cell(r['fgd'])} | "
                  f"{cell(r['bestfit'])} | {margin:+.2f} |")
    print()
    print("| set | worst margin to FGD (points) | on |")
    print("|---|---|---|")
    for s in order:
        if s in worst:
            print(f"| {s} | {worst[s][0]:+.2f} | {worst[s][1]} |")
    for t in missing:
        print(f"generalization.py: {t} lacks " +
              ", ".join(k for k in ("default", "fgd", "bestfit") if k not in rows[t]),
              file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
