#!/usr/bin/env python3
"""Pods and checks for scripts/kubelet_e2e.sh (real kubelets, gapless-agent --device-plugin).

Talks to the local API server the script starts (KUBE_API, default https://127.0.0.1:6443, with
KUBE_TOKEN, default e2etoken):
  kubelet_e2e.py nodes-ready NODE...        waits for the Nodes to be Ready, removes not-ready taints
  kubelet_e2e.py nodes-gpus NODE...         waits for 8 nvidia.com/gpu and the topology annotation
  kubelet_e2e.py rounds N RECORDS...        N rounds: burst, check, delete half (see churn())
  kubelet_e2e.py one-node NODE K RECORDS... K bursts of 16 pods pinned to NODE: time to Running
  kubelet_e2e.py check-live NS POD RECORDS... the Running pods of namespace NS: env = record, no GPU
                                            twice; prints what POD's container received
RECORDS are the fake runtimes' CreateContainer files (JSON lines, gapless-fakecri).
Only the Python standard library. Never run in CI. Exit 3 when a check failed."""
import concurrent.futures, json, math, os, ssl, sys, time, urllib.error, urllib.request

API = os.environ.get("KUBE_API", "https://127.0.0.1:6443")
CTX = ssl._create_unverified_context()
HDR = {"Authorization": "Bearer " + os.environ.get("KUBE_TOKEN", "e2etoken"),
       "Content-Type": "application/json"}
NS = "default"
RUN_TIMEOUT = 180  # seconds a burst may take from creation to all pods Running
SHARES = [(2048, 50), (4096, 60), (6144, 70), (8192, 80)]  # (MiB, milli-GPU), two of each


def call(method, path, body=None, ctype=None):
    data = json.dumps(body).encode() if body is not None else None
    h = dict(HDR)
    if ctype:
        h["Content-Type"] = ctype
    req = urllib.request.Request(API + path, data=data, method=method, headers=h)
    with urllib.request.urlopen(req, context=CTX, timeout=60) as r:
        return json.loads(r.read() or b"{}")


def die(msg):
    print(f"kubelet_e2e: {msg}", file=sys.stderr, flush=True)
    sys.exit(2)


def wait_for(what, pred, timeout):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if pred():
            return
        time.sleep(0.5)
    die(f"timed out after {timeout} s waiting for {what}")


def node_obj(name):
    try:
        return call("GET", f"/api/v1/nodes/{name}")
    except urllib.error.HTTPError:
        return None


def ready(name):
    n = node_obj(name)
    return n is not None and any(c["type"] == "Ready" and c["status"] == "True"
                                 for c in n.get("status", {}).get("conditions", []))


def nodes_ready(names):
    for n in names:
        wait_for(f"node {n} Ready", lambda: ready(n), 180)
        # no node lifecycle controller here: nothing else removes the taint
        call("PATCH", f"/api/v1/nodes/{n}", {"spec": {"taints": None}}, "application/merge-patch+json")
    print(f"nodes Ready and untainted: {' '.join(names)}", flush=True)


def gpus_ready(name):
    n = node_obj(name) or {}
    alloc = n.get("status", {}).get("allocatable", {})
    ann = n.get("metadata", {}).get("annotations", {})
    # gapless.io/device-plugin: the agent's plugin registered, so the extender gates binds here
    return alloc.get("nvidia.com/gpu") == "8" and "gapless.io/gpu-topology" in ann \
        and "gapless.io/device-plugin" in ann \
        and int(alloc.get("gapless.io/gpu-shared-count", "0")) > 0


def nodes_gpus(names):
    for n in names:
        wait_for(f"node {n}: 8 nvidia.com/gpu, shared-count, gapless.io/gpu-topology and "
                 "gapless.io/device-plugin",
                 lambda: gpus_ready(n), 120)
    print(f"nodes advertise 8 GPUs each: {' '.join(names)}", flush=True)


# ---- pods -------------------------------------------------------------------------------------

def pod(name, limits, node=None):
    spec = {"schedulerName": "gapless-scheduler", "terminationGracePeriodSeconds": 1,
            "enableServiceLinks": False, "automountServiceAccountToken": False,
            "containers": [{"name": "main", "image": "e2e.local/cuda:1",
                            "imagePullPolicy": "IfNotPresent", "resources": {"limits": limits}}]}
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": {"e2e": "gapless"}},
            "spec": spec}


def whole(n):
    return {"nvidia.com/gpu": str(n)}


def share(mib, milli):
    return {"gapless.io/gpu-memory": str(mib), "gapless.io/gpu-compute": str(milli),
            "gapless.io/gpu-shared-count": "1"}


def round_burst(r):
    """>= 16 pods: 6 same-size 1-GPU pods, a 2-GPU and a 4-GPU pod, 8 shares of 4 sizes."""
    pods = [pod(f"r{r}-g1-{i}", whole(1)) for i in range(6)]
    pods += [pod(f"r{r}-g2-0", whole(2)), pod(f"r{r}-g4-0", whole(4))]
    pods += [pod(f"r{r}-s{mib // 1024}g-{i}", share(mib, milli))
             for mib, milli in SHARES for i in range(2)]
    return pods


def one_node_burst(r, node):
    """16 pods on one node: 6 same-size 1-GPU pods and 10 same-size shares on the other GPUs:
    every pod is ambiguous with others of its kind (same resource, same count)."""
    return [pod(f"n{r}-g1-{i}", whole(1), node) for i in range(6)] + \
        [pod(f"n{r}-s-{i}", share(4096, 100), node) for i in range(10)]


def create(pods):
    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda p: call("POST", f"/api/v1/namespaces/{NS}/pods", p), pods))


def list_pods(ns=NS, selector="?labelSelector=e2e%3Dgapless"):
    return call("GET", f"/api/v1/namespaces/{ns}/pods{selector}")["items"]


def running(p):
    return p.get("status", {}).get("phase") == "Running" and all(
        "running" in c.get("state", {}) for c in p["status"].get("containerStatuses", []))


def unschedulable(p):
    return any(c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
               for c in p.get("status", {}).get("conditions", []))


def wait_burst(names):
    """Polls until every pod of the burst is Running or RUN_TIMEOUT passed. Returns the time
    from the first bind seen to all Running (None if not all ran) and the final pods."""
    t0, first_bind = time.time(), None
    while True:
        pods = [p for p in list_pods() if p["metadata"]["name"] in names]
        now = time.time()
        if first_bind is None and any(p["spec"].get("nodeName") for p in pods):
            first_bind = now
        if len(pods) == len(names) and all(running(p) for p in pods):
            return now - first_bind, pods
        if now - t0 > RUN_TIMEOUT:
            return None, pods
        time.sleep(0.2)


def delete(names):
    def one(n):
        try:
            call("DELETE", f"/api/v1/namespaces/{NS}/pods/{n}", {"gracePeriodSeconds": 1})
        except urllib.error.HTTPError as e:
            if e.code != 404:
                raise
    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        list(ex.map(one, names))
    wait_for(f"{len(names)} deleted pods to be gone",
             lambda: not any(p["metadata"]["name"] in names for p in list_pods()), 120)


def churn(live):
    """Deletes half the live pods: the 2- and 4-GPU pods, every 1-GPU pod but the newest, then
    the oldest shares. What stays (one whole GPU, the shares) leaves room for the next burst on
    2 x 8 GPUs, and keeps pods whose GPUs a swap may have moved."""
    key = lambda p: (p["metadata"]["creationTimestamp"], p["metadata"]["name"])
    g1 = sorted([p for p in live if gpu_count(p) == 1], key=key)
    order = [p for p in live if gpu_count(p) > 1] + g1[:-1] + \
        sorted([p for p in live if gpu_count(p) == 0], key=key)
    victims = [p["metadata"]["name"] for p in order[:len(live) // 2]]
    delete(victims)
    return victims


# ---- checks -----------------------------------------------------------------------------------

def gpu_count(p):
    return int(p["spec"]["containers"][0]["resources"].get("limits", {}).get("nvidia.com/gpu", "0"))


def load_records(files):
    """(pod uid, container) -> the envs of its latest CreateContainer (highest attempt)."""
    out = {}
    for f in files:
        with open(f) as fh:
            for line in fh:
                if not line.strip():
                    continue
                r = json.loads(line)
                k = (r["uid"], r["container"])
                if k not in out or r["attempt"] >= out[k]["attempt"]:
                    out[k] = r
    return out


def expected_env(p):
    """What the pod's gapless.io/allocation record says its container must get."""
    text = p["metadata"].get("annotations", {}).get("gapless.io/allocation")
    if not text:
        return None
    rec = json.loads(text)
    gpus = rec.get("gpus", [])
    exp = {"NVIDIA_VISIBLE_DEVICES": ",".join(sorted(g["uuid"] for g in gpus))}
    shares = [g for g in gpus if g.get("memoryMiB") or g.get("computeMilli")]
    if shares:
        exp["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = f"0={shares[0]['memoryMiB']}M"
        exp["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(math.ceil(shares[0]["computeMilli"] / 10))
    return exp


def got_env(p, records):
    r = records.get((p["metadata"]["uid"], "main"))
    if r is None:
        return None
    env = dict(r["envs"])
    env["NVIDIA_VISIBLE_DEVICES"] = ",".join(sorted(
        x for x in env.get("NVIDIA_VISIBLE_DEVICES", "").split(",") if x))
    return env


def check(live, record_files, label):
    """Mismatches (container env != record) and GPUs given to two live containers."""
    records = load_records(record_files)
    mismatches, users = [], {}
    for p in sorted(live, key=lambda p: p["metadata"]["name"]):
        name, node = p["metadata"]["name"], p["spec"].get("nodeName")
        exp, got = expected_env(p), got_env(p, records)
        if got is None:
            continue  # never created: counted as stuck
        wrong = {k: (v, got.get(k)) for k, v in (exp or {}).items() if got.get(k) != v}
        if exp is None or wrong:
            mismatches.append(f"{name}@{node}: " + ("no gapless.io/allocation record" if exp is None
                              else "; ".join(f"{k} record {v[0]} got {v[1]}" for k, v in wrong.items())))
        for uuid in filter(None, got["NVIDIA_VISIBLE_DEVICES"].split(",")):
            users.setdefault((node, uuid), []).append((name, gpu_count(p) > 0))
    twice = {k: v for k, v in users.items() if len(v) > 1 and any(w for _, w in v)}
    for m in mismatches:
        print(f"  {label} mismatch: {m}")
    for (node, uuid), v in sorted(twice.items()):
        print(f"  {label} GPU given twice: {node} {uuid}: {', '.join(n for n, _ in v)}")
    return len(mismatches), len(twice)


def report_burst(label, names, record_files):
    t, pods = wait_burst(names)
    stuck = [p["metadata"]["name"] for p in pods if p["spec"].get("nodeName") and not running(p)]
    unsched = [p["metadata"]["name"] for p in pods if not p["spec"].get("nodeName")]
    live = [p for p in list_pods() if p["spec"].get("nodeName") and running(p)
            and not p["metadata"].get("deletionTimestamp")]
    mism, twice = check(live, record_files, label)
    for n in stuck:
        print(f"  {label} stuck (bound, not Running after {RUN_TIMEOUT} s): {n}")
    for n in unsched:
        print(f"  {label} not bound after {RUN_TIMEOUT} s: {n}")
    ts = "n/a" if t is None else f"{t:.2f} s"
    print(f"{label}: pods {len(names)}, live checked {len(live)}, mismatches {mism}, "
          f"GPUs given twice {twice}, stuck {len(stuck)}, unbound {len(unsched)}, "
          f"first bind -> all Running {ts}", flush=True)
    return {"mismatches": mism, "twice": twice, "stuck": len(stuck), "unbound": len(unsched),
            "time": t}


def rounds(n, record_files):
    results = []
    for r in range(1, n + 1):
        burst = round_burst(r)
        create(burst)
        results.append(report_burst(f"round {r}", {p["metadata"]["name"] for p in burst},
                                    record_files))
        live = [p for p in list_pods() if not p["metadata"].get("deletionTimestamp")]
        victims = churn(live)
        print(f"round {r}: deleted {len(victims)} of {len(live)} live pods", flush=True)
    # after the last churn: what is still running must still hold only its own GPUs
    live = [p for p in list_pods() if p["spec"].get("nodeName") and running(p)]
    fm, ft = check(live, record_files, "after churn")
    print(f"after churn: live checked {len(live)}, mismatches {fm}, GPUs given twice {ft}")
    tot = {k: sum(x[k] for x in results) for k in ("mismatches", "twice", "stuck", "unbound")}
    tot["mismatches"] += fm
    tot["twice"] += ft
    times = ", ".join("n/a" if x["time"] is None else f"{x['time']:.2f}" for x in results)
    print(f"SUMMARY: {n} rounds: mismatches {tot['mismatches']}, GPUs given twice {tot['twice']}, "
          f"stuck {tot['stuck']}, unbound {tot['unbound']}; first bind -> all Running (s): {times}")
    return 3 if any(tot.values()) else 0


def one_node(node, k, record_files):
    times, bad = [], 0
    for r in range(1, k + 1):
        burst = one_node_burst(r, node)
        create(burst)
        res = report_burst(f"one-node burst {r}", {p["metadata"]["name"] for p in burst},
                           record_files)
        bad += res["mismatches"] + res["twice"] + res["stuck"] + res["unbound"]
        if res["time"] is not None:
            times.append(res["time"])
        delete([p["metadata"]["name"] for p in list_pods()])
    times.sort()
    med = "n/a" if not times else f"{times[len(times) // 2]:.2f} s"
    print(f"SUMMARY: one node ({node}), {k} bursts of 16 pods: first bind -> all Running "
          f"median {med}, all {['%.2f' % t for t in times]}; problems {bad}")
    return 3 if bad else 0


def check_live(ns, name, record_files):
    """Every Running, not terminating pod of ns: its container's env against its record, no GPU
    in two of them; then what pod name's container received. Exit 3 on any problem."""
    live = [p for p in list_pods(ns, "") if running(p) and not p["metadata"].get("deletionTimestamp")]
    mism, twice = check(live, record_files, ns)
    print(f"live Running pods in {ns}: {len(live)} ({' '.join(sorted(p['metadata']['name'] + '@' + p['spec']['nodeName'] for p in live))}), "
          f"mismatches {mism}, GPUs given twice {twice}")
    records = load_records(record_files)
    mine = [p for p in live if p["metadata"]["name"] == name]
    got = got_env(mine[0], records) if mine else None
    gpus = [g for g in (got or {}).get("NVIDIA_VISIBLE_DEVICES", "").split(",") if g]
    print(f"{name}: NVIDIA_VISIBLE_DEVICES of its container: {','.join(gpus) or 'none'}")
    want = gpu_count(mine[0]) if mine else -1
    return 3 if mism or twice or len(gpus) != want else 0


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "nodes-ready":
        nodes_ready(sys.argv[2:])
    elif cmd == "nodes-gpus":
        nodes_gpus(sys.argv[2:])
    elif cmd == "rounds":
        sys.exit(rounds(int(sys.argv[2]), sys.argv[3:]))
    elif cmd == "one-node":
        sys.exit(one_node(sys.argv[2], int(sys.argv[3]), sys.argv[4:]))
    elif cmd == "check-live":
        sys.exit(check_live(sys.argv[2], sys.argv[3], sys.argv[4:]))
    else:
        die(f"unknown command {cmd}")
