#!/usr/bin/env python3
"""bench/waits.py: the waits-by-pod-size table from gapless-bench --json lines (a fixture)."""
import json
import os
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "waits.py")


def line(trace, policy, deployed, mean, top, any_top, bound=None):
    r = {"trace": trace, "policy": policy, "speedup": 300, "multi_gpu_pending_mean_s": mean,
         "multi_gpu_pending_max_s": top, "pending_max_s": any_top,
         "multi_gpu_longest_bound_s": bound}
    r.update({"mode": "deployed", "replay": "dynamic"} if deployed else {"mode": "dynamic"})
    return json.dumps(r)


def run(lines):
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        f.write("\n".join(lines) + "\n")
    try:
        return subprocess.run([sys.executable, SCRIPT, f.name], capture_output=True, text=True)
    finally:
        os.unlink(f.name)


def main():
    full = [
        line("val-mem", "policies/default.yaml", False, 2.0, 90, 120, 90.0),
        line("val-mem", "fgd", False, 3.0, 80, 100, 40.4),
        line("val-mem", "policies/default.yaml", True, 1.5, 70, 75),
        line("val-mem", "fgd", True, 1.5, 71, 90),
        # Static lines and other policies are not read.
        json.dumps({"trace": "val-mem", "policy": "fgd", "unallocated_mean": 4.0}),
        line("val-mem", "bestfit", False, 0.0, 0, 0),
    ]
    out = run(full)
    assert out.returncode == 0, out.stderr
    assert "| val-mem | 300 | 2.0 / 3.0 | 90 (90) / 80 (40) | 1.5 / 1.5 | 70 / 71 | 75 / 90 |" in out.stdout, \
        out.stdout
    # In-process: the mean is no longer than FGD's, the longest is; as deployed both are not.
    assert "| validation half | 1 | 1; 0 | 1; 1 |" in out.stdout, out.stdout
    assert "| Alibaba | 0 | 0; 0 | 0; 0 |" in out.stdout, out.stdout

    missing = run(full[:3])
    assert missing.returncode == 1 and "val-mem" in missing.stderr, missing
    print("ok")


if __name__ == "__main__":
    main()
