#!/usr/bin/env python3
"""Writes examples/demo-cluster.yaml: the static inventory for demos (gapless-extender --cluster).

A mixed fleet of nine Nodes as one `kind: List`, covering every inventory source Gapless reads
(docs/contract.md "Node inventory"):

  h100-nvs-01/02   8x H100 80GB, NVSwitch (NV18 between every pair)     gapless.io/gpu-topology
  dgx1-v100-01/02  8x V100 32GB, DGX-1 hybrid cube-mesh (NV1/NV2)        gapless.io/gpu-topology
  a100-mig-01      8x A100 80GB: GPUs 0-3 static MIG, 4-7 reconfigurable  gapless.io/gpu-topology
  a100-02          8x A100 40GB, MIG disabled, NVSwitch (NV12)           gapless.io/gpu-topology
  t4-01/02         4x T4, GPU Feature Discovery labels only               GFD labels + allocatable
  gpushare-01      2x T4 behind gpushare (aliyun.com/gpu-mem: 30)         gpushare capacity

Python 3 standard library only; the output is deterministic (run it again after editing).
"""

import hashlib
import json
import os
import re
import sys

# --- GPU topologies ---------------------------------------------------------------------------

# DGX-1 with V100 (nvidia-smi topo -m): NVLink lanes per pair; every other pair crosses the
# sockets (SYS). Each V100 has 6 NVLinks: GPU0 has NV1 to 1 and 2, NV2 to 3 and 4, and so on.
DGX1V_NVLINKS = {
    (0, 1): 1, (0, 2): 1, (0, 3): 2, (0, 4): 2,
    (1, 2): 2, (1, 3): 1, (1, 5): 2,
    (2, 3): 2, (2, 6): 1,
    (3, 7): 1,
    (4, 5): 1, (4, 6): 1, (4, 7): 2,
    (5, 6): 2, (5, 7): 1,
    (6, 7): 2,
}

# MIG placements (docs/mig-profiles.md §1.1) for the A100-80GB profiles used below:
# profile -> (memory slices, allowed starts).
A100_80GB_MIG = {
    "7g.80gb": (8, [0]), "4g.40gb": (4, [0]), "3g.40gb": (4, [0, 4]),
    "2g.20gb": (2, [0, 2, 4]), "1g.20gb": (2, [0, 2, 4, 6]), "1g.10gb": (1, list(range(7))),
}

# a100-mig-01, GPUs 0-3: static layouts as (profile, start).
A100_STATIC_LAYOUTS = [
    [("3g.40gb", 0), ("2g.20gb", 4), ("1g.10gb", 6)],
    [("1g.10gb", s) for s in range(7)],
    [("3g.40gb", 0), ("3g.40gb", 4)],
    [("2g.20gb", 0), ("2g.20gb", 2), ("3g.40gb", 4)],
]

DGX_A100_NUMA = [3, 3, 1, 1, 7, 7, 5, 5]  # as nvidia-smi reports on a DGX A100 (NPS4)


def gpu_uuid(node, index):
    h = hashlib.sha1(f"{node}/gpu{index}".encode()).hexdigest()
    return f"GPU-{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def check_layout(layout):
    used = 0
    for profile, start in layout:
        width, starts = A100_80GB_MIG[profile]
        assert start in starts, (profile, start)
        mask = ((1 << width) - 1) << start
        assert used & mask == 0, layout
        used |= mask


def all_pairs(n):
    return [(a, b) for a in range(n) for b in range(a + 1, n)]


def nvswitch_links(n, count):
    return [{"a": a, "b": b, "type": "NVLink", "count": count} for a, b in all_pairs(n)]


def dgx1_links():
    links = []
    for a, b in all_pairs(8):
        if (a, b) in DGX1V_NVLINKS:
            links.append({"a": a, "b": b, "type": "NVLink", "count": DGX1V_NVLINKS[(a, b)]})
        else:
            links.append({"a": a, "b": b, "type": "PCIe", "path": "SYS"})
    return links


def gpu(node, index, model, memory, numa, mig=None):
    g = {"index": index, "uuid": gpu_uuid(node, index), "model": model, "memoryMiB": memory,
         "numa": numa, "healthy": True}
    if mig is not None:
        g["mig"] = mig
    return g


def topology_json(gpus, links):
    """The annotation value: compact JSON, one GPU or link per line so it diffs well."""
    dump = lambda o: json.dumps(o, separators=(", ", ": "))
    lines = ['{"version": 1,', ' "gpus": [']
    lines += ["  " + dump(g) + ("," if i + 1 < len(gpus) else "") for i, g in enumerate(gpus)]
    lines += [" ],", ' "links": [']
    lines += ["  " + dump(l) + ("," if i + 1 < len(links) else "") for i, l in enumerate(links)]
    lines += [" ]}"]
    return Block("\n".join(lines))


# --- Node objects -----------------------------------------------------------------------------

class Block(str):
    """A string written as a YAML literal block (|-)."""


def node(name, machine, cpu, memory_ki, labels=None, annotations=None, extra=None):
    cap = {"cpu": str(cpu), "memory": f"{memory_ki}Ki", "pods": "110",
           "ephemeral-storage": "3748857632Ki"}
    alloc = {"cpu": str(cpu - 2), "memory": f"{memory_ki - 1152000}Ki", "pods": "110",
             "ephemeral-storage": "3454930323846"}
    for k, v in (extra or {}).items():
        cap[k] = alloc[k] = v
    meta = {"name": name, "labels": {
        "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": machine, **(labels or {})}}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta,
            "status": {"capacity": cap, "allocatable": alloc}}


def gfd_labels(product, memory, count, family, major, minor, machine, mig_capable=False):
    return {
        "nvidia.com/gpu.product": product, "nvidia.com/gpu.memory": str(memory),
        "nvidia.com/gpu.count": str(count), "nvidia.com/gpu.family": family,
        "nvidia.com/gpu.compute.major": str(major), "nvidia.com/gpu.compute.minor": str(minor),
        "nvidia.com/gpu.machine": machine, "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none", "nvidia.com/gpu.mode": "compute",
        "nvidia.com/mig.capable": "true" if mig_capable else "false",
        "nvidia.com/cuda.driver-version.full": "550.90.07",
    }


def h100_node(name):
    model = "NVIDIA-H100-80GB-HBM3"
    gpus = [gpu(name, i, model, 81559, 0 if i < 4 else 1) for i in range(8)]
    return node(name, "DGXH100", 224, 2113393072,
                labels=gfd_labels(model, 81559, 8, "hopper", 9, 0, "DGXH100", True),
                annotations={"gapless.io/gpu-topology": topology_json(gpus, nvswitch_links(8, 18))},
                extra={"nvidia.com/gpu": "8"})


def dgx1_node(name):
    model = "Tesla-V100-SXM2-32GB"
    gpus = [gpu(name, i, model, 32768, 0 if i < 4 else 1) for i in range(8)]
    return node(name, "DGX-1", 80, 528012144,
                labels=gfd_labels(model, 32768, 8, "volta", 7, 0, "DGX-1"),
                annotations={"gapless.io/gpu-topology": topology_json(gpus, dgx1_links())},
                extra={"nvidia.com/gpu": "8"})


def a100_mig_node(name):
    model = "NVIDIA-A100-SXM4-80GB"
    gpus, counts = [], {}
    for i in range(8):
        layout = A100_STATIC_LAYOUTS[i] if i < 4 else []
        check_layout(layout)
        for profile, _ in layout:
            counts[profile] = counts.get(profile, 0) + 1
        mig = {"enabled": True, "instances": [{"profile": p, "start": s} for p, s in layout]}
        gpus.append(gpu(name, i, model, 81920, DGX_A100_NUMA[i], mig))
    labels = gfd_labels(model, 81920, 0, "ampere", 8, 0, "DGXA100-920-23687-2530-000", True)
    labels["nvidia.com/mig.strategy"] = "mixed"
    extra = {"nvidia.com/gpu": "0"}
    extra.update({f"nvidia.com/mig-{p}": str(c) for p, c in sorted(counts.items())})
    return node(name, "DGXA100", 256, 1056462524, labels=labels,
                annotations={"gapless.io/gpu-topology": topology_json(gpus, nvswitch_links(8, 12))},
                extra=extra)


def a100_node(name):
    model = "NVIDIA-A100-SXM4-40GB"
    gpus = [gpu(name, i, model, 40960, DGX_A100_NUMA[i], {"enabled": False}) for i in range(8)]
    return node(name, "DGXA100", 256, 1056462524,
                labels=gfd_labels(model, 40960, 8, "ampere", 8, 0, "DGXA100-920-23687-2530-000",
                                  True),
                annotations={"gapless.io/gpu-topology": topology_json(gpus, nvswitch_links(8, 12))},
                extra={"nvidia.com/gpu": "8"})


def t4_node(name):
    return node(name, "g4dn.12xlarge", 48, 195784944,
                labels=gfd_labels("Tesla-T4", 15360, 4, "turing", 7, 5, "g4dn.12xlarge"),
                extra={"nvidia.com/gpu": "4"})


def gpushare_node(name):
    # gpushare's device plugin replaces NVIDIA's: no nvidia.com/gpu, memory in GiB units.
    return node(name, "g4dn.8xlarge", 32, 130799964,
                labels=gfd_labels("Tesla-T4", 15360, 2, "turing", 7, 5, "g4dn.8xlarge"),
                extra={"aliyun.com/gpu-count": "2", "aliyun.com/gpu-mem": "30"})


def cluster():
    return {"apiVersion": "v1", "kind": "List", "items": [
        h100_node("h100-nvs-01"), h100_node("h100-nvs-02"),
        dgx1_node("dgx1-v100-01"), dgx1_node("dgx1-v100-02"),
        a100_mig_node("a100-mig-01"), a100_node("a100-02"),
        t4_node("t4-01"), t4_node("t4-02"),
        gpushare_node("gpushare-01"),
    ]}


# --- A small YAML writer (block style; every string double-quoted) ---------------------------

PLAIN_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9./_-]*$")


def key(k):
    return k if PLAIN_KEY.match(k) and k not in ("true", "false", "null", "y", "n") else json.dumps(k)


def scalar(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    return json.dumps(v)


def emit(v, indent, out):
    pad = " " * indent
    if isinstance(v, dict):
        for k, x in v.items():
            if isinstance(x, Block):
                out.append(f"{pad}{key(k)}: |-")
                out.extend(f"{pad}  {line}" for line in x.split("\n"))
            elif isinstance(x, (dict, list)) and x:
                out.append(f"{pad}{key(k)}:")
                emit(x, indent + 2, out)
            else:
                out.append(f"{pad}{key(k)}: {scalar(x) if not isinstance(x, (dict, list)) else '{}'}")
    else:
        for x in v:
            sub = []
            emit(x, indent + 2, sub)
            out.append(f"{pad}- {sub[0].lstrip()}")
            out.extend(sub[1:])


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "demo-cluster.yaml")
    out = ["# Demo cluster for gapless-extender --cluster. Generated by examples/make_demo_cluster.py;",
           "# edit the script and run it again rather than editing this file."]
    emit(cluster(), 0, out)
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
