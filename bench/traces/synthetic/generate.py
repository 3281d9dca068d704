#!/usr/bin/env python3
"""Seeded generator of the synthetic trace family (bench/traces/synthetic/, issue 27).

Writes 12 traces in the Alibaba GPU trace v2023's CSV formats, so that gapless-bench replays them
unchanged: a node list per trace (nodes/<trace>.csv: sn,cpu_milli,memory_mib,gpu,model) and a pod
list per trace (pods/<trace>.csv: the 11 columns of openb_pod_list_default.csv). The trace's name is
the pod file's name without .csv.

What the format cannot say, and what stands in for it:
- NVLink: the node list has no topology column (gapless-bench gives every node no NVLink), so the
  8-GPU H100/A100 boxes differ from the 4-GPU ones only by GPU count, cores and memory.
- MIG: a pod asks gpu_milli of one GPU; there is no MIG profile or partition geometry. MIG slices
  are stood in for by shares of 1/7ths (142, 285, 428, 571 milli) that name A100|H100 in gpu_spec.
What it can say is varied instead: GPU models (H100, A100, L40S, A10, T4), GPUs per node (1, 2, 4,
8), cores and memory per node, share sizes, multi-GPU and model-constrained pods, CPU and memory
per pod.

Six themes, each drawn twice with its own seed: `tune-<theme>` (seed 2k) and `val-<theme>` (seed
2k+1). The fixed rule: every `tune-` trace is the tuning half, every `val-` trace the validation
half, which no choice of constants looks at. Both halves draw from the same ranges; the draws
(fleet shares, mix shares, share sizes, CPU and memory per GPU) differ.

    python3 bench/traces/synthetic/generate.py          # rewrite nodes/ and pods/ next to this file
    python3 bench/traces/synthetic/generate.py --check  # regenerate in memory; exit 1 on any byte
                                                        # that differs from the committed files

Python 3 standard library only; random.Random(seed) with random(), so the output is the same on
every CPython 3.x.
"""
import argparse
import io
import math
import os
import random
import sys

BASE_SEED = 2027

# Node kinds: (model, GPUs, core choices, memory GiB choices).
NODE_KINDS = {
    "h100x8": ("H100", 8, [192, 224], [2048]),
    "a100x8": ("A100", 8, [128, 256], [1024, 2048]),
    "a100x4": ("A100", 4, [64, 96], [512]),
    "l40sx4": ("L40S", 4, [48, 64, 96], [384, 512]),
    "a10x1": ("A10", 1, [16, 32], [64, 128]),
    "a10x4": ("A10", 4, [48, 64], [256, 384]),
    "t4x1": ("T4", 1, [8, 16], [32, 64]),
    "t4x2": ("T4", 2, [24, 32], [128]),
    "t4x4": ("T4", 4, [48, 64], [192, 256]),
}

SHARE_POOLS = {
    "mig": [142, 285, 428, 571],  # MIG-like 1/7ths; they name A100|H100 (see above)
    "pow2": [125, 250, 500, 750],
    "thirds": [333, 666],
    "tenths": [100, 200, 300, 400, 600, 700, 900],
}

MODEL_SPECS = ["H100", "A100", "H100|A100", "L40S", "L40S|A10", "A10", "T4", "T4|A10",
               "A100|L40S"]

# Each theme: fleet weights by GPUs per node kind; the mix by pod count among GPU pods (share,
# 1, 2, 4, 8 GPUs); the share of CPU-only pods; the share of GPU pods naming models; share pools;
# cores and GiB per GPU the GPU pods ask; CPU-only pods' cores and GiB.
THEMES = [
    ("train", {
        "fleet": {"h100x8": 45, "a100x8": 35, "l40sx4": 10, "a10x1": 5, "t4x1": 5},
        "mix": [15, 35, 15, 20, 15], "cpu_only": 0.10, "spec": 0.10,
        "pools": ["mig", "pow2"], "cores": [8, 12, 16, 24], "gib": [32, 64, 128],
        "cpu_pod_cores": [2, 4, 8, 16], "cpu_pod_gib": [8, 16, 32]}),
    ("infer", {
        "fleet": {"l40sx4": 40, "t4x1": 10, "t4x2": 15, "a10x1": 10, "a10x4": 15, "a100x8": 10},
        "mix": [60, 37, 2.5, 0.5, 0], "cpu_only": 0.15, "spec": 0.15,
        "pools": ["pow2", "thirds", "tenths"], "cores": [4, 6, 8, 12], "gib": [16, 32, 48],
        "cpu_pod_cores": [1, 2, 4, 8], "cpu_pod_gib": [4, 8, 16]}),
    ("modern", {
        "fleet": {"h100x8": 25, "a100x8": 20, "l40sx4": 25, "t4x2": 8, "t4x4": 7, "a10x1": 7,
                  "a10x4": 8},
        "mix": [40, 50, 6, 3, 1], "cpu_only": 0.12, "spec": 0.30,
        "pools": ["mig", "pow2", "thirds", "tenths"], "cores": [6, 8, 12, 16], "gib": [32, 64, 96],
        "cpu_pod_cores": [2, 4, 8, 16], "cpu_pod_gib": [8, 16, 64]}),
    ("spec", {
        "fleet": {"h100x8": 20, "a100x8": 15, "a100x4": 10, "l40sx4": 25, "t4x2": 10, "a10x4": 20},
        "mix": [35, 58, 5, 1.5, 0.5], "cpu_only": 0.10, "spec": 0.60,
        "pools": ["mig", "thirds", "tenths"], "cores": [6, 8, 12], "gib": [32, 64],
        "cpu_pod_cores": [2, 4, 8], "cpu_pod_gib": [8, 16, 32]}),
    ("cpu", {
        "fleet": {"a100x8": 30, "h100x8": 20, "l40sx4": 25, "a10x4": 15, "t4x4": 10},
        "mix": [30, 64, 4, 1.5, 0.5], "cpu_only": 0.15, "spec": 0.10,
        "pools": ["pow2", "tenths"], "cores": [12, 16, 24], "gib": [32, 64],
        "cpu_pod_cores": [4, 8, 16, 32], "cpu_pod_gib": [16, 32, 64]}),
    ("mem", {
        "fleet": {"a100x8": 30, "h100x8": 15, "l40sx4": 30, "a10x4": 15, "t4x2": 10},
        "mix": [30, 62, 5, 2, 1], "cpu_only": 0.15, "spec": 0.10,
        "pools": ["mig", "thirds"], "cores": [8, 12], "gib": [64, 96, 128],
        "cpu_pod_cores": [4, 8, 16], "cpu_pod_gib": [32, 64, 128, 256]}),
]

GPU_COUNTS = [1, 1, 2, 4, 8]  # GPUs of the mix's kinds: share, 1, 2, 4, 8


def jitter(rng, weights):
    """Weights each scaled by 0.6..1.4 at random: the draws of one theme differ."""
    return [w * (0.6 + 0.8 * rng.random()) for w in weights]


def pick(rng, items, weights=None):
    return rng.choices(items, weights=weights)[0]


def make_fleet(rng, theme):
    kinds = sorted(theme["fleet"])
    weights = jitter(rng, [theme["fleet"][k] for k in kinds])
    total_gpus = 800 + int(rng.random() * 600)
    nodes = []
    for kind, w in zip(kinds, weights):
        model, gpus, cores, gib = NODE_KINDS[kind]
        count = max(2, round(total_gpus * w / sum(weights) / gpus))
        for _ in range(count):
            nodes.append((model, gpus, pick(rng, cores) * 1000, pick(rng, gib) * 1024))
    return nodes


def hosts_for(nodes, gpus, spec):
    models = set(spec.split("|")) if spec else None
    return [n for n in nodes if n[1] >= gpus and (models is None or n[0] in models)]


def fit_largest(hosts, cpu, mem):
    """CPU and memory cut to the largest host's, so that every pod fits some empty node."""
    _, _, host_cpu, host_mem = max(hosts, key=lambda n: (n[2], n[3]))
    return min(cpu, host_cpu), min(mem, host_mem)


def make_gpu_pod(rng, theme, nodes, mix, shares):
    kind = pick(rng, range(5), mix)
    gpus = GPU_COUNTS[kind]
    milli = 1000
    spec = ""
    if kind == 0:
        milli = pick(rng, shares[0], shares[1])
        if milli in SHARE_POOLS["mig"]:
            spec = "H100|A100"
    if not spec and rng.random() < theme["spec"]:
        spec = pick(rng, MODEL_SPECS)
    hosts = hosts_for(nodes, gpus, spec)
    if not hosts:
        spec = ""
        hosts = hosts_for(nodes, gpus, spec)
    if not hosts:  # no node with that many GPUs: ask what the largest node has
        gpus = max(n[1] for n in nodes)
        hosts = hosts_for(nodes, gpus, spec)
    per_gpu = 1 if kind == 0 else gpus
    cpu, mem = fit_largest(hosts, pick(rng, theme["cores"]) * 1000 * per_gpu,
                           pick(rng, theme["gib"]) * 1024 * per_gpu)
    return cpu, mem, gpus, milli, spec


def make_pods(rng, theme, nodes):
    mix = jitter(rng, theme["mix"])
    pools = theme["pools"]
    chosen = [p for p in pools if rng.random() < 0.7] or [pick(rng, pools)]
    sizes = sorted({s for p in chosen for s in SHARE_POOLS[p]})
    shares = (sizes, jitter(rng, [1.0] * len(sizes)))
    cpu_only = theme["cpu_only"] * (0.6 + 0.8 * rng.random())
    capacity = sum(n[1] for n in nodes) * 1000
    pods, asked = [], 0
    while asked < capacity:  # the bench pads or trims to 130 % of capacity itself
        if rng.random() < cpu_only:
            cpu, mem = fit_largest(nodes, pick(rng, theme["cpu_pod_cores"]) * 1000,
                                   pick(rng, theme["cpu_pod_gib"]) * 1024)
            pods.append((cpu, mem, 0, 0, ""))
            continue
        pod = make_gpu_pod(rng, theme, nodes, mix, shares)
        pods.append(pod)
        asked += pod[2] * pod[3]
    return pods


def node_csv(name, nodes):
    out = io.StringIO()
    out.write("sn,cpu_milli,memory_mib,gpu,model\n")
    for i, (model, gpus, cpu, mem) in enumerate(nodes):
        out.write(f"{name}-node-{i:04d},{cpu},{mem},{gpus},{model}\n")
    return out.getvalue()


def pod_csv(rng, name, pods):
    out = io.StringIO()
    out.write("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
              "creation_time,deletion_time,scheduled_time\n")
    now = 0
    for i, (cpu, mem, gpus, milli, spec) in enumerate(pods):
        now += int(-math.log(1.0 - rng.random()) * 40)  # arrivals ~40 s apart
        life = int(math.exp(math.log(60) + rng.random() * math.log(1440)))  # 1 min..1 day
        qos = pick(rng, ["LS", "BE", "Burstable", "Guaranteed"], [55, 40, 4, 1])
        phase = pick(rng, ["Running", "Succeeded", "Failed"], [70, 20, 10])
        out.write(f"{name}-pod-{i:04d},{cpu},{mem},{gpus},{milli},{spec},{qos},{phase},"
                  f"{now},{now + life},{now}\n")
    return out.getvalue()


def traces():
    """(trace name, {relative path: text}) for all 12 traces, in a fixed order."""
    for k, (theme_name, theme) in enumerate(THEMES):
        for half, offset in (("tune", 0), ("val", 1)):
            name = f"{half}-{theme_name}"
            rng = random.Random(BASE_SEED * 100 + 2 * k + offset)
            nodes = make_fleet(rng, theme)
            pods = make_pods(rng, theme, nodes)
            yield name, {f"nodes/{name}.csv": node_csv(name, nodes),
                         f"pods/{name}.csv": pod_csv(rng, name, pods)}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=here, help="directory for nodes/ and pods/")
    parser.add_argument("--check", action="store_true",
                        help="compare with the files in --out instead of writing them")
    args = parser.parse_args()
    differ = 0
    for _, files in traces():
        for rel, text in files.items():
            path = os.path.join(args.out, rel)
            if args.check:
                try:
                    with open(path, encoding="ascii", newline="") as f:
                        same = f.read() == text
                except OSError:
                    same = False
                if not same:
                    print(f"generate.py: {path} differs from what seed {BASE_SEED} gives",
                          file=sys.stderr)
                    differ += 1
                continue
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="ascii", newline="") as f:
                f.write(text)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
