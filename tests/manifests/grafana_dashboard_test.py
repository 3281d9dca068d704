#!/usr/bin/env python3
"""Every metric the Grafana dashboard queries must be one a live extender exports.

Usage: grafana_dashboard_test.py GAPLESS_EXTENDER [manifests/grafana-dashboard.json]

Starts the extender on the built-in demo cluster (a free loopback port), makes one call of each
kind (labelled families appear on first use), reads GET /metrics, and
checks each `gapless_*` name in the dashboard's PromQL `expr`s against the `# TYPE` lines
(a histogram's _bucket, _sum and _count series count as exported). The node agent's
`gapless_agent_*` metrics are checked against the names its sources register (src/agent/: a
running agent needs NVML; tests/agent/usage_test.cpp checks the agent exports them). Exits 0
when all are.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAME = re.compile(r"\bgapless_[a-zA-Z0-9_:]*")


def exprs(node):
    """Every `expr` string anywhere in the dashboard."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "expr" and isinstance(v, str):
                yield v
            else:
                yield from exprs(v)
    elif isinstance(node, list):
        for v in node:
            yield from exprs(v)


POD = {"metadata": {"name": "p", "namespace": "default", "uid": "uid-p"},
       "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}}


def exercise(base):
    """One call of each kind, so labelled families (created on first use) have a series: a
    filter that rejects a node, a prioritize, a bind that fails."""
    args = json.dumps({"Pod": POD, "NodeNames": ["h100-nvs-01", "a100-mig-01"]}).encode()
    bad_bind = json.dumps({"PodName": "x", "PodNamespace": "default", "PodUID": "nope",
                           "Node": "h100-nvs-01"}).encode()
    for path, body in (("/filter", args), ("/prioritize", args), ("/bind", bad_bind)):
        with urllib.request.urlopen(urllib.request.Request(base + path, data=body), timeout=10):
            pass


def scrape(binary):
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen([binary, "--listen", "127.0.0.1:0"], stdout=log,
                            stderr=subprocess.STDOUT)
    try:
        deadline, port = time.time() + 20, None
        while port is None and time.time() < deadline:
            log.seek(0)
            m = re.search(rb"http://127\.0\.0\.1:(\d+)", log.read())
            port = int(m.group(1)) if m else time.sleep(0.05)
        if port is None:
            raise SystemExit("the extender did not start")
        exercise(f"http://127.0.0.1:{port}")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as res:
            return res.read().decode()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def exported(text):
    """Series names /metrics can carry: each family, and a histogram's three series."""
    names = set()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[:2] == ["#", "TYPE"]:
            names.add(parts[2])
            if parts[3] in ("histogram", "summary"):
                names.update(parts[2] + s for s in ("_bucket", "_sum", "_count"))
    return names


def agent_metric_names():
    """Every gapless_agent_* name a string literal in src/agent/ gives."""
    names = set()
    folder = os.path.join(ROOT, "src", "agent")
    for f in os.listdir(folder):
        with open(os.path.join(folder, f), encoding="utf-8") as src:
            names.update(re.findall(r'"(gapless_agent_[a-z0-9_]+)"', src.read()))
    return names


def main():
    binary = sys.argv[1]
    path = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "manifests",
                                                              "grafana-dashboard.json")
    used = {n for e in exprs(json.load(open(path, encoding="utf-8"))) for n in NAME.findall(e)}
    if not used:
        raise SystemExit(f"FAIL: no gapless_* metric in any expr of {path}")
    have = exported(scrape(binary)) | agent_metric_names()
    missing = sorted(used - have)
    for n in missing:
        print(f"FAIL: the dashboard queries {n}, which /metrics does not export")
    print(f"{len(used) - len(missing)} of {len(used)} metrics the dashboard uses are exported")
    sys.exit(1 if missing else 0)


if __name__ == "__main__":
    main()
