#!/usr/bin/env python3
"""Throughput of a real kube-scheduler with and without Gapless (scripts/kube_throughput.sh).

Talks to the local API server the script starts (https://127.0.0.1:6443, token e2etoken):
  kube_throughput.py nodes N            N fake Nodes x 8 GPUs (G3), untainted
  kube_throughput.py bursts N K LABEL   K bursts of N one-GPU pods; pods/s per burst and median
  kube_throughput.py clean              deletes every pod in default
With PINNED=K in the environment every K-th node's GPUs are model G1 (the rest G3) and every pod
names G1 in gapless.io/gpu-models; AFFINITY=1 gives the pods the same model as a required node
affinity on nvidia.com/gpu.product too (docs/requesting-gpus.md). Each burst then also reports how
many pods were bound off their model (must be 0).
With TOPOLOGY=1 every node also carries gapless-agent's gapless.io/gpu-topology annotation (its 8
GPUs, all NVLink pairs) and no gapless.io/device-plugin annotation: the agent publishes topology
while another device plugin allocates (NVIDIA's, or the agent's plugin is off), a node the pairing
gate must not hold binds for (docs/node-pairing.md).
Only the Python standard library. Never run in CI."""
import concurrent.futures, json, os, ssl, sys, time, urllib.request

PINNED = int(os.environ.get("PINNED") or 0)
AFFINITY = os.environ.get("AFFINITY") == "1"
TOPOLOGY = os.environ.get("TOPOLOGY") == "1"

API = "https://127.0.0.1:6443"
CTX = ssl._create_unverified_context()
HDR = {"Authorization": "Bearer e2etoken", "Content-Type": "application/json"}


def call(method, path, body=None, ctype=None):
    data = json.dumps(body).encode() if body is not None else None
    h = dict(HDR)
    if ctype:
        h["Content-Type"] = ctype
    req = urllib.request.Request(API + path, data=data, method=method, headers=h)
    with urllib.request.urlopen(req, context=CTX, timeout=60) as r:
        return json.loads(r.read() or b"{}")


def model(i):
    return "G1" if PINNED and i % PINNED == 0 else "G3"


def topology(name, i):
    gpus = [{"index": g, "uuid": f"GPU-{name}-{g}", "model": model(i), "memoryMiB": 81920,
             "healthy": True} for g in range(8)]
    links = [{"a": a, "b": b, "type": "NVLink", "count": 12}
             for a in range(8) for b in range(a + 1, 8)]
    return json.dumps({"version": 1, "gpus": gpus, "links": links}, separators=(",", ":"))


def node(i):
    name = f"node-{i:04d}"
    res = {"cpu": "128", "memory": "786432Mi", "nvidia.com/gpu": "8", "pods": "110"}
    meta = {"name": name, "labels": {"kubernetes.io/hostname": name, "nvidia.com/gpu.count": "8",
                                     "nvidia.com/gpu.product": model(i)}}
    if TOPOLOGY:
        meta["annotations"] = {"gapless.io/gpu-topology": topology(name, i)}
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta,
            "status": {"capacity": res, "allocatable": res,
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def make_nodes(n):
    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda i: call("POST", "/api/v1/nodes", node(i)), range(n)))
    # status is dropped on create for some versions: patch it too
    def st(i):
        b = node(i)
        call("PATCH", f"/api/v1/nodes/{b['metadata']['name']}/status", {"status": b["status"]},
             "application/merge-patch+json")
    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        list(ex.map(st, range(n)))
    # TaintNodesByCondition admission adds node.kubernetes.io/not-ready; no kubelet clears it
    def untaint(i):
        call("PATCH", f"/api/v1/nodes/node-{i:04d}", {"spec": {"taints": None}},
             "application/merge-patch+json")
    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        list(ex.map(untaint, range(n)))


def pod(i, burst):
    p = {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": f"p{burst}-{i:04d}", "namespace": "default"},
         "spec": {"schedulerName": "gapless-scheduler",
                  "containers": [{"name": "c", "image": "x",
                                  "resources": {"limits": {"nvidia.com/gpu": "1"},
                                                "requests": {"cpu": "1", "memory": "1Gi"}}}]}}
    if PINNED:
        p["metadata"]["annotations"] = {"gapless.io/gpu-models": "G1"}
    if PINNED and AFFINITY:
        term = {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In",
                                      "values": ["G1"]}]}
        p["spec"]["affinity"] = {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}
    return p


def off_model(prefix):
    """Pods of this burst bound to a node of another model than they name."""
    items = call("GET", "/api/v1/namespaces/default/pods")["items"]
    return sum(1 for p in items if p["metadata"]["name"].startswith(prefix)
               and p["spec"].get("nodeName")
               and model(int(p["spec"]["nodeName"].split("-")[1])) != "G1")


def bound_count(prefix):
    items = call("GET", "/api/v1/namespaces/default/pods")["items"]
    mine = [p for p in items if p["metadata"]["name"].startswith(prefix)]
    return sum(1 for p in mine if p["spec"].get("nodeName")), len(mine)


def burst(n, b):
    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda i: call("POST", "/api/v1/namespaces/default/pods", pod(i, b)), range(n)))
    t_created = time.time()
    while True:
        done, total = bound_count(f"p{b}-")
        if done >= n:
            break
        if time.time() - t0 > 300:
            print(f"burst {b}: only {done}/{n} bound after 300 s", file=sys.stderr)
            break
        time.sleep(0.05)
    t1 = time.time()
    return n / (t1 - t0), t_created - t0, t1 - t0


def delete_pods():
    items = call("GET", "/api/v1/namespaces/default/pods")["items"]
    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda p: call("DELETE", f"/api/v1/namespaces/default/pods/{p['metadata']['name']}",
                                   {"gracePeriodSeconds": 0}), items))
    while call("GET", "/api/v1/namespaces/default/pods")["items"]:
        time.sleep(0.2)


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "nodes":
        make_nodes(int(sys.argv[2]))
    elif cmd == "bursts":
        n, k, label = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
        rates = []
        for b in range(k):
            r, tc, tt = burst(n, f"{label}{b}")
            rates.append(r)
            off = f", {off_model(f'{label}{b}-')} off their model" if PINNED else ""
            print(f"{label} burst {b}: {n} pods bound in {tt:.2f} s (created in {tc:.2f} s): {r:.1f} pods/s{off}", flush=True)
            delete_pods()
            time.sleep(2)
        rates.sort()
        print(f"{label}: median {(rates[(k-1)//2] + rates[k//2]) / 2:.1f} pods/s over {k} bursts: {['%.1f' % x for x in rates]}")
    elif cmd == "clean":
        delete_pods()
