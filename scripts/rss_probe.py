#!/usr/bin/env python3
"""Peak RSS of gapless-extender under hostile bodies and connections (issue 17).

Starts the extender (demo cluster) on 127.0.0.1 and, phase by phase, sends what should cost it the
most memory, printing VmRSS and VmHWM (peak) from /proc after each phase:

  door       N connections each holding an unfinished request head just under 64 KiB (what every
             connection may buffer at the door), plus connections with 1 MiB of an unfinished
             Content-Length body (what the door's 64 MiB budget admits beyond that)
  wide       every worker at once parsing a --max-body-bytes body of `[{},{},...]` (the JSON shape
             with the most values per byte)
  pending    filters of pods with 8 MiB labels (the table of filtered-but-unbound pods keeps 64 MiB)

Usage: scripts/rss_probe.py build/gapless-extender [--workers 4] [--max-body-bytes 16777216]
       [--connections 1000]
Only the Python standard library; needs `ulimit -n` above --connections.
"""
import argparse
import concurrent.futures
import json
import os
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def memory(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) // 1024  # MiB
    return out


def post(port, path, body, timeout=120):
    """One POST on a fresh connection; returns the answer's bytes (b"" if none)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        head = (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
        try:
            s.sendall(head + body)
        except OSError:
            pass  # answered (refused) and closed before the whole body was sent: read why
        chunks = []
        try:
            while True:
                b = s.recv(65536)
                if not b:
                    break
                chunks.append(b)
        except OSError:
            pass
        return b"".join(chunks)


def wait_ready(port, proc):
    for _ in range(200):
        if proc.poll() is not None:
            sys.exit("gapless-extender exited")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                if s.recv(100).startswith(b"HTTP/1.1 200"):
                    return
        except OSError:
            pass
        time.sleep(0.05)
    sys.exit("gapless-extender did not answer /healthz")


def phase_door(port, n):
    held = []
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * (63 * 1024)
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(head)  # no blank line: the head never ends
        held.append(s)
    body_head = b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Length: 16000000\r\n\r\n"
    for _ in range(80):  # 80 MiB offered, beyond the 64 MiB budget
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(body_head + b"[" + b"0," * (512 * 1024))
        held.append(s)
    time.sleep(1.0)  # let the door read what was sent (poll rounds)
    return held


def phase_wide(port, workers, max_body):
    n = (max_body - 2) // 3
    body = b"[" + b"{}," * (n - 1) + b"{}]"
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        answers = list(pool.map(lambda _: post(port, "/filter", body), range(workers)))
    return sum(1 for a in answers if b"200 OK" in a[:20])


def phase_pending(port, count):
    ok = 0
    for i in range(count):
        pod = {"metadata": {"name": f"big-{i}", "namespace": "default", "uid": f"uid-big-{i}",
                            "labels": {"pad": "x" * (8 * 1024 * 1024)}},
               "spec": {"containers": [{"name": "c", "resources": {
                   "limits": {"nvidia.com/gpu": "1"}}}]}}
        body = json.dumps({"Pod": pod, "NodeNames": ["h100-nvs-01"]}).encode()
        ok += b'"Error":""' in post(port, "/filter", body)
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--max-body-bytes", type=int, default=16 * 1024 * 1024)
    ap.add_argument("--connections", type=int, default=900)
    a = ap.parse_args()
    port = free_port()
    proc = subprocess.Popen(
        [a.binary, "--listen", f"127.0.0.1:{port}", "--workers", str(a.workers),
         "--max-body-bytes", str(a.max_body_bytes), "--max-connections-per-peer", "2000",
         "--max-connections", "2000"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(port, proc)
        print(f"| phase | VmRSS MiB | VmHWM (peak) MiB | note |\n|---|---:|---:|---|")
        m = memory(proc.pid)
        print(f"| started | {m['VmRSS']} | {m['VmHWM']} | demo cluster |")
        held = phase_door(port, a.connections)
        m = memory(proc.pid)
        print(f"| door | {m['VmRSS']} | {m['VmHWM']} | {a.connections} heads of 63 KiB + 80 "
              f"bodies of 1 MiB held open |")
        for s in held:
            s.close()
        ok = phase_wide(port, a.workers, a.max_body_bytes)
        m = memory(proc.pid)
        print(f"| wide | {m['VmRSS']} | {m['VmHWM']} | {a.workers} x {a.max_body_bytes} bytes "
              f"of [{{}},...] at once ({ok} answered) |")
        ok = phase_pending(port, 20)
        m = memory(proc.pid)
        print(f"| pending | {m['VmRSS']} | {m['VmHWM']} | 20 filters of pods with 8 MiB labels "
              f"({ok} passed) |")
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
