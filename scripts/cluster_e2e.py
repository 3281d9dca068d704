#!/usr/bin/env python3
"""Checks for scripts/cluster_e2e.sh: Gapless applied with `kubectl apply -k` on real nodes.

  cluster_e2e.py --dir DIR --nodes N nodes-ready             waits for the Nodes to be Ready
  cluster_e2e.py --dir DIR --nodes N checks --applied-at T   every check, one line each

Talks to the cluster through kubectl (KUBECONFIG set by the script). Prints PASS/FAIL/INFO lines;
exit status 3 when a check failed, 2 when the harness could not go on. Never run in CI."""
import argparse, json, os, re, subprocess, sys, time
from datetime import datetime

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kubelet_e2e  # noqa: E402  (expected_env: what a record says a container must get)

SYS, NODE_NS, TEST_NS = "gapless-system", "gapless-node", "gapless-e2e"
LEASE = "gapless-scheduler"
failed = []


def kubectl(*args, stdin=None, check=True, timeout=120):
    r = subprocess.run(["kubectl", *args], input=stdin, capture_output=True, text=True,
                       timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {r.stderr.strip()}")
    return r.stdout


def get(*args):
    return json.loads(kubectl("get", *args, "-o", "json"))


def result(ok, name, detail):
    print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}", flush=True)
    if not ok:
        failed.append(name)
    return ok


def info(name, detail):
    print(f"INFO {name}: {detail}", flush=True)


def wait(pred, timeout, step=0.5):
    """pred() until truthy or timeout; returns its last value."""
    t0 = time.time()
    while True:
        try:
            v = pred()
        except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError):
            v = None
        if v or time.time() - t0 > timeout:
            return v
        time.sleep(step)


def ts(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp() if s else None


def cond(obj, kind):
    return next((c for c in obj.get("status", {}).get("conditions", []) if c["type"] == kind), {})


# ---- nodes ---------------------------------------------------------------------------------------
def nodes_ready(n):
    def ready():
        items = get("nodes")["items"]
        ok = [x for x in items if cond(x, "Ready").get("status") == "True"
              and not any(t["key"] == "node.kubernetes.io/not-ready" for t in x["spec"].get("taints", []))]
        return len(items) == n and len(ok) == n
    if not wait(ready, 240):
        print(kubectl("get", "nodes", "-o", "wide", check=False), file=sys.stderr)
        sys.exit("cluster_e2e: nodes not Ready (and untainted) within 240 s")


# ---- the scheduler Deployment --------------------------------------------------------------------
def sched_pods():
    return [p for p in get("pods", "-n", SYS, "-l", "app.kubernetes.io/name=gapless-scheduler")["items"]
            if not p["metadata"].get("deletionTimestamp")]


def pod_ready(p):
    return cond(p, "Ready").get("status") == "True"


def explain_pods(pods):
    for p in pods:
        for cs in p.get("status", {}).get("containerStatuses", []):
            st = cs.get("state", {}); last = cs.get("lastState", {})
            print(f"  {p['metadata']['name']}/{cs['name']}: ready={cs['ready']} "
                  f"restarts={cs['restartCount']} state={json.dumps(st)} last={json.dumps(last)}")
        ev = kubectl("get", "events", "-n", p["metadata"]["namespace"], "--field-selector",
                     f"involvedObject.name={p['metadata']['name']}", check=False)
        print("  " + "\n  ".join(ev.strip().splitlines()[-8:]))


def started_at(p, container):
    cs = next((c for c in p["status"].get("containerStatuses", []) if c["name"] == container), {})
    return ts(cs.get("state", {}).get("running", {}).get("startedAt"))


def check_scheduler(applied_at):
    seen_ready = {}  # pod -> when its extender container was first seen ready (polled)

    def both_ready():
        ps = sched_pods()
        for p in ps:
            for cs in p["status"].get("containerStatuses", []):
                if cs["name"] == "gapless-extender" and cs["ready"]:
                    seen_ready.setdefault(p["metadata"]["name"], time.time())
        return ps if len(ps) == 2 and all(map(pod_ready, ps)) else None
    pods = wait(both_ready, 360)
    if not result(bool(pods), "scheduler replicas Ready",
                  f"2/2 after {time.time() - applied_at:.0f} s" if pods else "not 2 Ready in 360 s"):
        explain_pods(sched_pods())
        return None
    for p in pods:
        name, ext, ks = p["metadata"]["name"], started_at(p, "gapless-extender"), started_at(p, "kube-scheduler")
        seen = seen_ready.get(name)
        info("extender time to Ready", f"{name}: readiness probe passing {seen - ext:.0f} s after "
             f"the container started (5 s probe period); kube-scheduler started {ks - ext:.0f} s "
             f"after it (the postStart hook holds it until /readyz)" if seen else f"{name}: ?")
    holder = wait(lambda: lease_holder(pods), 60)
    result(bool(holder), "one lease holder", f"{holder} holds {LEASE}" if holder else
           f"no replica holds the lease {LEASE}")
    return pods


def lease_holder(pods):
    h = get("lease", "-n", SYS, LEASE)["spec"].get("holderIdentity", "")
    names = [p["metadata"]["name"] for p in pods]
    return next((n for n in names if h.startswith(n + "_")), None)


def container_identity(ns, pod, container):
    """uid and whether / is writable, as the running container sees them (the image has sh)."""
    out = kubectl("exec", "-n", ns, pod, "-c", container, "--", "sh", "-c",
                  "id -u; if touch /.rw-probe 2>/dev/null; then rm -f /.rw-probe; echo rw; "
                  "else echo ro; fi", check=False)
    lines = out.split()
    return (lines[0], lines[1]) if len(lines) == 2 else (None, out.strip() or "exec failed")


def check_runs_as_declared(sched_pods_ready):
    """The Gapless containers run with the uid and read-only root the manifests declare."""
    want = {"gapless-extender": ("65532", "ro"), "gapless-agent": ("0", "ro")}
    agents = [(NODE_NS, p["metadata"]["name"], "gapless-agent")
              for p in get("pods", "-n", NODE_NS)["items"]]
    scheds = [(SYS, p["metadata"]["name"], "gapless-extender") for p in sched_pods_ready or []]
    for ns, pod, c in scheds + agents:
        uid, root = container_identity(ns, pod, c)
        result((uid, root) == want[c], f"{c} runs as declared ({pod})",
               f"uid {uid}, root filesystem {'read-only' if root == 'ro' else root}")


# ---- the agent DaemonSet and its device plugin ---------------------------------------------------
def check_agents(n):
    def ds_ready():
        st = get("daemonset", "-n", NODE_NS, "gapless-agent")["status"]
        return st if st.get("desiredNumberScheduled") == n and st.get("numberReady") == n else None
    st = wait(ds_ready, 240)
    if not result(bool(st), "agent DaemonSet Ready on every node", f"{n}/{n}" if st else
                  json.dumps(get("daemonset", "-n", NODE_NS, "gapless-agent")["status"])):
        explain_pods(get("pods", "-n", NODE_NS)["items"])

    def plugins():
        out = {}
        for node in get("nodes")["items"]:
            alloc = node["status"].get("allocatable", {})
            topo = node["metadata"].get("annotations", {}).get("gapless.io/gpu-topology")
            if alloc.get("nvidia.com/gpu", "0") == "0" or not topo:
                return None
            out[node["metadata"]["name"]] = {k: v for k, v in alloc.items()
                                             if k.startswith(("nvidia.com/", "gapless.io/"))}
        return out
    got = wait(plugins, 180)
    result(bool(got), "device plugin registered (allocatable, topology annotation)",
           json.dumps(got) if got else "a node lacks nvidia.com/gpu or gapless.io/gpu-topology")


# ---- GPU pods ------------------------------------------------------------------------------------
def gpu_pod(name, limits):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": TEST_NS, "labels": {"e2e": "gapless"}},
            "spec": {"schedulerName": "gapless-scheduler", "terminationGracePeriodSeconds": 1,
                     "automountServiceAccountToken": False, "enableServiceLinks": False,
                     "containers": [{"name": "main", "image": "e2e.local/shell:1",
                                     "imagePullPolicy": "Never", "command": ["sleep", "infinity"],
                                     "resources": {"limits": limits}}]}}


def create(pods):
    kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": pods}))


def running(names):
    pods = {p["metadata"]["name"]: p for p in get("pods", "-n", TEST_NS)["items"]}
    return pods if all(pods.get(n, {}).get("status", {}).get("phase") == "Running" for n in names) else None


def container_env(pod):
    out = kubectl("exec", "-n", TEST_NS, pod, "-c", "main", "--", "env")
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def check_env(p):
    """The container's environment against its gapless.io/allocation record."""
    name = p["metadata"]["name"]
    rec = json.loads(p["metadata"].get("annotations", {}).get("gapless.io/allocation", "null"))
    if rec is None:
        return result(False, f"pod {name} record", "no gapless.io/allocation annotation"), None
    env = container_env(name)
    got = sorted(x for x in env.get("NVIDIA_VISIBLE_DEVICES", "").split(",") if x)
    if rec.get("mig"):
        ok = len(got) == 1 and got[0].startswith("MIG-")
        return result(ok, f"pod {name} (MIG {json.dumps(rec['mig'])})",
                      f"NVIDIA_VISIBLE_DEVICES={','.join(got)}"), got
    exp = kubelet_e2e.expected_env(p)
    wrong = {k: (v, env.get(k)) for k, v in exp.items()
             if (",".join(got) if k == "NVIDIA_VISIBLE_DEVICES" else env.get(k)) != v}
    detail = "; ".join(f"{k}={v}" for k, v in exp.items()) if not wrong else \
        "; ".join(f"{k}: record {a} container {b}" for k, (a, b) in wrong.items())
    return result(not wrong, f"pod {name} on {p['spec']['nodeName']} env = record", detail), got


def check_gpu_pods(n):
    kubectl("create", "namespace", TEST_NS, check=False)
    pods = [gpu_pod("whole-1", {"nvidia.com/gpu": "1"}),
            gpu_pod("whole-2", {"nvidia.com/gpu": "2"}),
            gpu_pod("nvlink-4", {"nvidia.com/gpu": "4"}),
            gpu_pod("share-10g", {"gapless.io/gpu-memory": "10240", "gapless.io/gpu-compute": "150",
                                  "gapless.io/gpu-shared-count": "1"}),
            gpu_pod("share-20g", {"gapless.io/gpu-memory": "20480", "gapless.io/gpu-compute": "300",
                                  "gapless.io/gpu-shared-count": "1"})]
    if n > 1:
        pods.append(gpu_pod("mig-1g", {"nvidia.com/mig-1g.10gb": "1"}))
    names = [p["metadata"]["name"] for p in pods]
    t0 = time.time()
    create(pods)
    live = wait(lambda: running(names), 240)
    if not result(bool(live), "GPU pods Running", f"{len(names)} pods in {time.time() - t0:.0f} s"
                  if live else "not all Running in 240 s"):
        explain_pods([p for p in get("pods", "-n", TEST_NS)["items"]
                      if p["status"].get("phase") != "Running"])
        live = {p["metadata"]["name"]: p for p in get("pods", "-n", TEST_NS)["items"]
                if p["status"].get("phase") == "Running"}
    for name in names:
        if name in live:
            check_env(live[name])
    nvl = live.get("nvlink-4")
    if nvl:
        check_nvlink(nvl)


def check_nvlink(p):
    """The GPUs of nvlink-4 are pairwise NVLink-connected in its node's topology annotation."""
    rec = json.loads(p["metadata"]["annotations"]["gapless.io/allocation"])
    node = get("node", p["spec"]["nodeName"])
    topo = json.loads(node["metadata"]["annotations"]["gapless.io/gpu-topology"])
    nvl = {frozenset((l["a"], l["b"])) for l in topo.get("links", [])
           if l.get("type") == "NVLink" and not l.get("degraded")}
    idx = sorted(g["index"] for g in rec.get("gpus", []))
    missing = [(a, b) for i, a in enumerate(idx) for b in idx[i + 1:] if frozenset((a, b)) not in nvl]
    result(len(idx) == 4 and not missing, "nvlink-4 holds an NVLink set",
           f"GPUs {idx} of {p['spec']['nodeName']}" + (f", not NVLinked: {missing}" if missing else ""))


def double_booked():
    """GPUs a whole-GPU pod holds that any other live pod also holds (container envs)."""
    users = {}
    for p in get("pods", "-n", TEST_NS)["items"]:
        if p["status"].get("phase") != "Running" or p["metadata"].get("deletionTimestamp"):
            continue
        whole = "nvidia.com/gpu" in p["spec"]["containers"][0]["resources"].get("limits", {})
        env = container_env(p["metadata"]["name"])
        for u in filter(None, env.get("NVIDIA_VISIBLE_DEVICES", "").split(",")):
            users.setdefault((p["spec"]["nodeName"], u), []).append((p["metadata"]["name"], whole))
    return {k: v for k, v in users.items() if len(v) > 1 and any(w for _, w in v)}


def bound(name, timeout):
    """The pod once kube-scheduler has bound it (spec.nodeName), or None after timeout."""
    return wait(lambda: (lambda x: x if x["spec"].get("nodeName") else None)(
        get("pod", "-n", TEST_NS, name)), timeout, 0.2)


def bound_then_env(name, p, seconds, label, since):
    if result(bool(p), label, f"on {p['spec']['nodeName']} {seconds:.1f} s after {since}" if p
              else f"{name} not bound"):
        if wait(lambda: running([name]), 120):
            check_env(get("pod", "-n", TEST_NS, name))


def check_no_double_booking(label):
    twice = double_booked()
    result(not twice, f"no GPU double-booked {label}",
           "every whole GPU in one live container" if not twice else json.dumps(
               {f"{k[0]}/{k[1]}": v for k, v in twice.items()}))


# ---- leader failover -----------------------------------------------------------------------------
def check_failover(pods, logdir):
    leader = lease_holder(pods)
    if not leader:
        return result(False, "failover", "no leader to delete")
    standby = next(p["metadata"]["name"] for p in pods if p["metadata"]["name"] != leader)
    save_logs(logdir)
    t0 = time.time()
    kubectl("delete", "pod", "-n", SYS, leader, "--wait=false")
    create([gpu_pod("after-failover", {"nvidia.com/gpu": "1"})])

    def new_holder():
        h = get("lease", "-n", SYS, LEASE)["spec"].get("holderIdentity", "")
        return h if h and not h.startswith(leader + "_") else None
    h = wait(new_holder, 120, 0.2)
    t_lease = time.time() - t0
    if not result(bool(h), "failover: a replica takes the lease",
                  f"{h.split('_')[0]} after {t_lease:.1f} s" if h else "no new holder in 120 s"):
        return
    # Either may win: the standby retries every 2 s (retryPeriod), the replacement tries as soon
    # as its kube-scheduler starts, which its postStart hook holds back until its extender is ready.
    info("failover: new holder", "the warm standby" if h.startswith(standby + "_") else
         f"the replacement replica {h.split('_')[0]}, not the warm standby {standby}")
    p = bound("after-failover", 120)
    bound_then_env("after-failover", p, time.time() - t0, "failover: the next GPU pod is bound",
                   "the leader's deletion")
    check_no_double_booking("across the hand-over")


def check_extender_restart():
    """The leader's extender restarts (its process ends) while its kube-scheduler keeps the lease:
    the next GPU pod must still be bound, to GPUs nobody holds (the model is rebuilt first)."""
    pods = sched_pods()
    leader = lease_holder(pods)
    if not leader:
        return result(False, "extender restart in the leader", "no leader")
    r0 = restarts(get("pod", "-n", SYS, leader))
    kubectl("exec", "-n", SYS, leader, "-c", "gapless-extender", "--", "bash", "-c", "kill -TERM 1")
    t0 = time.time()
    create([gpu_pod("after-restart", {"nvidia.com/gpu": "1"})])
    p = bound("after-restart", 180)
    t_bind = time.time() - t0
    holder = lease_holder(sched_pods())
    wait(lambda: restarts(get("pod", "-n", SYS, leader)) > r0, 30)
    evs = [e for e in get("events", "-n", TEST_NS)["items"]
           if e["involvedObject"]["name"] == "after-restart" and e.get("reason") == "FailedScheduling"]
    # A pod kube-scheduler parked on the extender's error is requeued by the extender once ready
    # (the annotation gapless.io/requeue, docs/high-availability.md).
    mark = ((p or {}).get("metadata", {}).get("annotations") or {}).get("gapless.io/requeue")
    info("extender restart in the leader", f"{leader}: restarts {r0} -> "
         f"{restarts(get('pod', '-n', SYS, leader))}, lease holder now {holder}, "
         f"{len(evs)} FailedScheduling events" + (f", e.g. {evs[0]['message'][:200]}" if evs else "")
         + f"; gapless.io/requeue {mark or 'not set'}")
    bound_then_env("after-restart", p, t_bind, "extender restart: the next GPU pod is bound",
                   "the extender was stopped")
    check_no_double_booking("after the extender restart")


def check_drift():
    """The agents' drift check (docs/node-drift.md) finds nothing: every container got its record."""
    evs = [e for e in get("events", "-n", TEST_NS)["items"] if e.get("reason") == "GaplessDrift"]
    per_pod = {}
    for e in evs:
        n = e["involvedObject"]["name"]
        per_pod[n] = per_pod.get(n, 0) + 1
    result(not evs, "no GaplessDrift Warning on the test pods",
           "none" if not evs else f"{json.dumps(per_pod)}; e.g. {evs[0].get('message', '')[:300]}")


# ---- policy reload -------------------------------------------------------------------------------
RELOAD = "policy reloaded from"


def extender_logs(pod):
    return kubectl("logs", "-n", SYS, pod, "-c", "gapless-extender", check=False)


def check_reload():
    pods = wait(lambda: (lambda ps: ps if len(ps) == 2 and all(map(pod_ready, ps)) else None)(
        sched_pods()), 300)
    if not result(bool(pods), "two Ready replicas again after the failover",
                  ", ".join(p["metadata"]["name"] for p in pods or [])):
        pods = sched_pods()
    before = {p["metadata"]["name"]: (extender_logs(p["metadata"]["name"]).count(RELOAD),
                                      restarts(p)) for p in pods}
    cm = get("configmap", "-n", SYS, "gapless-policy")
    cm["data"]["policy.yaml"] += f"\n# edited by scripts/cluster_e2e.sh at {int(time.time())}\n"
    for k in ("resourceVersion", "uid", "creationTimestamp", "managedFields"):
        cm["metadata"].pop(k, None)
    t0 = time.time()
    kubectl("apply", "-f", "-", stdin=json.dumps(cm))
    for name, (n0, r0) in before.items():
        ok = wait(lambda: extender_logs(name).count(RELOAD) > n0, 180, 1)
        p = get("pod", "-n", SYS, name)
        result(bool(ok) and restarts(p) == r0, f"policy reload without restart ({name})",
               f"'{RELOAD}' {time.time() - t0:.0f} s after the ConfigMap edit, restarts {restarts(p)}"
               if ok else f"no '{RELOAD}' line within 180 s")


def restarts(p):
    return sum(c["restartCount"] for c in p["status"].get("containerStatuses", []))


# ---- /metrics, logs, audit -----------------------------------------------------------------------
def check_metrics():
    try:
        out = kubectl("get", "--raw", f"/api/v1/namespaces/{SYS}/services/"
                      "gapless-extender-metrics:http-metrics/proxy/metrics")
        ok = "gapless_" in out
        result(ok, "/metrics through the Service (API server service proxy)",
               f"{len(out.splitlines())} lines, gapless_* series present" if ok else out[:200])
    except RuntimeError as e:
        result(False, "/metrics through the Service (API server service proxy)", str(e)[:300])
    for p in sched_pods():
        ip = p["status"].get("podIP")
        r = subprocess.run(["curl", "-s", "-m", "5", "-o", "/dev/null", "-w", "%{http_code}",
                            f"http://{ip}:8888/readyz"], capture_output=True, text=True)
        result(r.stdout in ("000", ""), f"verbs port 8888 not reachable on the pod IP ({ip})",
               f"HTTP {r.stdout or 'none'}")


def check_cli():
    """`kubectl gapless nodes` as users run it, and the GPU map through a port-forward."""
    r = subprocess.run(["kubectl", "gapless", "nodes"], capture_output=True, text=True, timeout=60)
    ok = r.returncode == 0 and "e2e-node-a" in r.stdout
    result(ok, "kubectl gapless nodes", f"{len(r.stdout.splitlines())} lines" if ok else
           f"exit {r.returncode}: {(r.stderr or r.stdout).strip()[:300]}")
    pods = sched_pods()
    if not pods:
        return
    pf = subprocess.Popen(["kubectl", "port-forward", "-n", SYS, f"pod/{pods[0]['metadata']['name']}",
                           "--address", "127.0.0.1", ":8888"], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    try:
        m = re.search(r"127\.0\.0\.1:(\d+)", pf.stdout.readline())
        if not result(bool(m), "kubectl port-forward to the extender's 8888", "listening" if m else
                      "no local port"):
            return
        url = f"http://127.0.0.1:{m.group(1)}"
        r = subprocess.run(["kubectl", "gapless", "--extender", url, "nodes"], capture_output=True,
                           text=True, timeout=60)
        ok = r.returncode == 0 and "e2e-node-a" in r.stdout
        result(ok, "GPU map through the port-forward (kubectl gapless --extender)",
               f"{len(r.stdout.splitlines())} lines" if ok else f"exit {r.returncode}: "
               f"{(r.stderr or r.stdout).strip()[:300]}")
        ui = subprocess.run(["curl", "-sf", "-m", "10", f"{url}/ui/"], capture_output=True, text=True)
        result(ui.returncode == 0, "GPU map page /ui/ through the port-forward",
               f"{len(ui.stdout)} bytes" if ui.returncode == 0 else f"curl exit {ui.returncode}")
    finally:
        pf.terminate()
        pf.wait()


def save_logs(logdir):
    os.makedirs(logdir, exist_ok=True)
    for ns in (SYS, NODE_NS):
        for p in get("pods", "-n", ns)["items"]:
            for c in p["spec"]["containers"]:
                for prev in ("", "--previous"):
                    out = kubectl("logs", "-n", ns, p["metadata"]["name"], "-c", c["name"],
                                  *([prev] if prev else []), check=False)
                    if out:
                        with open(f"{logdir}/{p['metadata']['name']}_{c['name']}{prev}.log", "w") as f:
                            f.write(out)


FORBIDDEN = re.compile(r"forbidden|\b403\b", re.I)
# The kubelet starts watching a new pod's ConfigMaps (kube-root-ca.crt, the policy, the scheduler
# configuration) before the Node authorizer's graph links the pod to its node: "no relationship
# found between node ... and this object", once per object, then it works. An upstream race of
# every cluster, not a permission Gapless lacks; the audit log shows the same requests.
NODE_GRAPH_RACE = re.compile(r"no relationship found between node")


def check_logs(d, logdir):
    save_logs(logdir)
    bad, races = [], 0
    files = [os.path.join(logdir, f) for f in sorted(os.listdir(logdir))]
    files += [os.path.join(d, n, f) for n in sorted(os.listdir(d))
              if n.startswith("node-") and os.path.isdir(os.path.join(d, n))
              for f in ("kubelet.log", "containerd.log")]
    for f in files:
        with open(f, errors="replace") as fh:
            for line in fh:
                if not FORBIDDEN.search(line):
                    continue
                if NODE_GRAPH_RACE.search(line) and "/kubelet.log" in f:
                    races += 1
                else:
                    bad.append(f"{os.path.relpath(f, d)}: {line.strip()[:200]}")
    result(not bad, "no 403/Forbidden in Gapless's containers, kubelets, containerd",
           f"{len(files)} logs clean" if not bad else f"{len(bad)} lines, e.g. " + " | ".join(bad[:4]))
    if races:
        info("kubelet watched a new pod's ConfigMap before the Node authorizer knew the pod "
             "(upstream race)",
             f"{races} log lines")
    denied = {}
    with open(os.path.join(d, "audit.log")) as fh:
        for line in fh:
            e = json.loads(line)
            if e.get("responseStatus", {}).get("code") == 403:
                o = e.get("objectRef", {})
                k = f"{e['user']['username']} {e['verb']} {o.get('resource')}/{o.get('subresource', '')}"
                denied[k] = denied.get(k, 0) + 1
    gapless = {k: v for k, v in denied.items() if ":gapless-" in k}
    result(not gapless, "no 403 answered to Gapless's service accounts (audit log)",
           "none" if not gapless else json.dumps(gapless))
    if denied.keys() - gapless.keys():
        info("403s answered to other clients (audit log)", json.dumps(
            {k: v for k, v in denied.items() if k not in gapless})[:400])
    unused_rbac(d)


def unused_rbac(d):
    """Rules of Gapless's own Roles/ClusterRoles that no request of its service accounts used."""
    used = set()
    with open(os.path.join(d, "audit.log")) as fh:
        for line in fh:
            e = json.loads(line)
            u = e["user"]["username"]
            if u.startswith(("system:serviceaccount:gapless-system:", "system:serviceaccount:gapless-node:")):
                o = e.get("objectRef", {})
                res = o.get("resource", "") + ("/" + o["subresource"] if o.get("subresource") else "")
                used.add((o.get("apiGroup", ""), res, e["verb"]))
    unused = []
    roles = get("clusterroles", "-l", "app.kubernetes.io/part-of=gapless")["items"]
    roles += get("roles", "-A", "-l", "app.kubernetes.io/part-of=gapless")["items"]
    for r in roles:
        for rule in r.get("rules", []):
            for g in rule.get("apiGroups", []):
                for res in rule.get("resources", []):
                    for v in rule.get("verbs", []):
                        if (g, res, v) not in used:
                            unused.append(f"{r['metadata']['name']}: {v} {g or 'core'}/{res}")
    info("RBAC rules of Gapless's roles that no request used in this run",
         "; ".join(unused) if unused else "none")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--nodes", type=int, required=True)
    ap.add_argument("--applied-at", type=float)
    ap.add_argument("cmd", choices=["nodes-ready", "checks"])
    a = ap.parse_args()
    if a.cmd == "nodes-ready":
        return nodes_ready(a.nodes)
    logdir = os.path.join(a.dir, "podlogs")
    pods = check_scheduler(a.applied_at)
    check_agents(a.nodes)
    check_runs_as_declared(pods)
    if pods:  # without a scheduler no GPU pod can be placed: the checks that need one are skipped
        check_gpu_pods(a.nodes)
        check_failover(pods, logdir)
        check_reload()
        check_extender_restart()
    else:
        print("SKIP GPU pods, failover, policy reload, extender restart: no Ready scheduler", flush=True)
    check_metrics()
    check_cli()
    check_drift()
    check_logs(a.dir, logdir)
    print(f"{'FAILED: ' + ', '.join(failed) if failed else 'all checks passed'}", flush=True)
    sys.exit(3 if failed else 0)


if __name__ == "__main__":
    main()
