#!/usr/bin/env bash
# Does consolidation make room on a real control plane? (issue 40, docs/consolidation.md "On
# Kubernetes"). Local only, never in CI; no root (--kubelets: root).
#
#   scripts/consolidation_e2e.sh K8S_BIN_DIR [GAPLESS_EXTENDER]
#   scripts/consolidation_e2e.sh --kubelets GAPLESS_BUILD_DIR K8S_BIN_DIR   (as root)
#
# K8S_BIN_DIR holds kube-apiserver, kube-controller-manager and kube-scheduler (v1.26);
# GAPLESS_EXTENDER defaults to build/gapless-extender; etcd, kubectl, openssl, curl and python3
# come from PATH. On 127.0.0.1 ports the kernel picks, in a temporary directory: etcd and
# kube-apiserver with RBAC (scripts/local_control_plane.sh), manifests/ as shipped,
# kube-controller-manager (replicaset, deployment and disruption controllers: it recreates
# evicted replicas and fills PodDisruptionBudgets' status), kube-scheduler with
# manifests/scheduler-config.yaml (leader election on its lease gapless-system/gapless-scheduler,
# as shipped), gapless-extender with its own ServiceAccount's token, --scheduler-lease and a
# policy that is policies/default.yaml with consolidation.enabled: true.
#
# Two GPU nodes, node-a and node-b, 8 GPUs each, written by the script as an admin: NO kubelet
# and NO gapless-agent run on them. A bound pod only gets spec.nodeName; nothing runs it, and an
# evicted pod stays Terminating until the script deletes it with --grace-period=0 (what a
# kubelet does once its containers stop).
#
# --kubelets: the nodes are real ones instead (scripts/kubelet_nodes.sh, as scripts/kubelet_e2e.sh
# runs them): a v1.26 kubelet (K8S_BIN_DIR/kubelet) on gapless-fakecri (K8S_BIN_DIR) and
# gapless-agent --device-plugin over the fake NVML (GAPLESS_BUILD_DIR, whose gapless-extender is
# used). Nothing is force-deleted: the kubelets stop evicted pods and delete them, pods must be
# Running, and every live container's recorded env must be its allocation record (kubelet_e2e.py
# check-live): train's lists its 8 GPUs, no GPU is in two live containers.
#
# Scenario: Deployment serve (2 replicas x 2 GPUs, gapless.io/movable: "true") lands on one node
# (X); a bare pod fixed (3 GPUs, never movable) is pinned to the other (Y). Pod train asks 8 GPUs:
# no node has them. 1) A PodDisruptionBudget minAvailable: 2 on serve: Gapless evicts nothing and
# says why on train (Event ConsolidationNoPlan). 2) The budget removed: Gapless evicts both serve
# pods from X (Events on them and on train); while they terminate X is kept for train (the
# extender's /debug/explain refuses a 2-GPU pod there), their replacements are bound to Y and none
# to X before train, train to X, and nothing more is evicted.
# One line per check, PASS or FAIL. Environment: KEEP=1 keeps the temporary directory.
# Exit status: 0 all checks passed, 3 a check failed, other: the harness failed.
set -euo pipefail
gbuild=""  # --kubelets: real nodes
if [[ ${1:-} == --kubelets ]]; then gbuild=$(realpath "${2:?GAPLESS_BUILD_DIR}"); shift 2; fi
bin=$(realpath "${1:?K8S_BIN_DIR (kube-apiserver, kube-controller-manager, kube-scheduler)}")
here=$(cd "$(dirname "$0")" && pwd); repo=$(dirname "$here")
ext=$(realpath "${2:-${gbuild:-$repo/build}/gapless-extender}")
die() { echo "consolidation_e2e: $*" >&2; exit 2; }
for c in etcd kubectl openssl curl python3; do command -v $c >/dev/null || die "$c not found"; done
for b in "$bin/kube-apiserver" "$bin/kube-controller-manager" "$bin/kube-scheduler" "$ext" \
         ${gbuild:+"$bin/kubelet" "$bin/gapless-fakecri" "$gbuild/gapless-agent"}; do
  [[ -x $b ]] || die "missing $b"
done
[[ -z $gbuild || $(id -u) == 0 ]] || die "--kubelets needs root (mount namespaces)"
dir=$(mktemp -d); pids=()
# shellcheck source=local_control_plane.sh
. "$here/local_control_plane.sh"
if [[ -n $gbuild ]]; then
  # shellcheck source=kubelet_nodes.sh
  . "$here/kubelet_nodes.sh"
  trap "stop_kubelet_nodes; stop_local_cluster consolidation_e2e" EXIT
else
  trap "stop_local_cluster consolidation_e2e" EXIT
fi
cd "$dir"
start_control_plane "$bin"
echo "consolidation_e2e: kube-apiserver $("$bin/kube-apiserver" --version | cut -d' ' -f2)" >&2

fails=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
jq_py() { python3 -c "import json,sys; d=json.load(sys.stdin); $1"; }

apply_manifests "$repo/manifests" || die "applying manifests/: $(tail -3 apply.log)"
admin create namespace ml > /dev/null
admin -n ml create serviceaccount default > /dev/null  # no serviceaccount controller here

node() {  # NAME
  python3 - "$1" <<'EOF' > node.json
import json, sys
name = sys.argv[1]
gpus = [{"index": i, "uuid": f"{name}-GPU-{i}", "model": "NVIDIA-H100-80GB-HBM3",
         "memoryMiB": 81920, "healthy": True} for i in range(8)]
links = [{"a": a, "b": b, "type": "NVLink", "count": 18} for a in range(8) for b in range(a + 1, 8)]
res = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"}
print(json.dumps({"apiVersion": "v1", "kind": "Node",
  "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name},
               "annotations": {"gapless.io/gpu-topology": json.dumps(
                   {"version": 1, "gpus": gpus, "links": links})}},
  "status": {"capacity": res, "allocatable": res,
             "conditions": [{"type": "Ready", "status": "True"}]}}))
EOF
  admin create -f node.json > /dev/null
  admin patch node "$1" --subresource status --type merge \
    -p "$(jq_py 'print(json.dumps({"status": d["status"]}))' < node.json)" > /dev/null
  admin patch node "$1" --type merge -p '{"spec":{"taints":null}}' > /dev/null
}
if [[ -n $gbuild ]]; then
  # shellcheck disable=SC2154  # api: set by start_control_plane
  export KUBE_API=$api KUBE_TOKEN=admintoken  # for kubelet_e2e.py
  start_kubelet_nodes "$bin" "$gbuild" "$dir/admin.kubeconfig" \
    node-a node-b
else
  node node-a
  node node-b
fi

# ---- controllers, the extender, kube-scheduler ------------------------------------------------
read -r kcm_port verbs probes sched_port < <(free_ports 4)
"$bin/kube-controller-manager" --kubeconfig admin.kubeconfig --leader-elect=false \
  --controllers=replicaset,deployment,disruption --bind-address=127.0.0.1 \
  --secure-port="$kcm_port" --cert-dir=kcm-certs > kcm.log 2>&1 & pids+=($!)
python3 - "$repo/policies/default.yaml" <<'EOF' > policy.yaml
import sys
lines = open(sys.argv[1]).read().split("\n")
i = lines.index("consolidation:")
assert lines[i + 1].startswith("  enabled: false")
lines[i + 1] = lines[i + 1].replace("enabled: false", "enabled: true ")
print("\n".join(lines))
EOF
token=$(admin -n gapless-system create token gapless-scheduler --duration 1h)
kc extender.kubeconfig "$token"
pairing=(--pairing-wait 0)  # no kubelet, no device plugin: binds have nothing to wait for
[[ -z $gbuild ]] || pairing=()
host=$(hostname)  # kube-scheduler's lease identity is "<host name>_<uuid>"
"$ext" --kubeconfig extender.kubeconfig --listen "127.0.0.1:$verbs" \
  --probe-listen "127.0.0.1:$probes" --claims-namespace gapless-system --policy policy.yaml \
  --replica-name "$host" --scheduler-lease gapless-system/gapless-scheduler \
  "${pairing[@]}" > extender.log 2>&1 & pids+=($!)
for _ in $(seq 60); do curl -sf "127.0.0.1:$probes/readyz" >/dev/null && break; sleep 0.5; done
curl -sf "127.0.0.1:$probes/readyz" >/dev/null || die "gapless-extender not ready: $(tail -5 extender.log)"
sed -e "s|^leaderElection:|clientConnection: {kubeconfig: $dir/admin.kubeconfig}\nleaderElection:|" \
  -e "s|http://127.0.0.1:8888|http://127.0.0.1:$verbs|" "$repo/manifests/scheduler-config.yaml" \
  > scheduler.yaml
"$bin/kube-scheduler" --config scheduler.yaml --secure-port="$sched_port" \
  --bind-address=127.0.0.1 --cert-dir=scheduler-certs > scheduler.log 2>&1 & pids+=($!)

# ---- workloads ----------------------------------------------------------------------------------
# Where a pod is: its node once bound; on real nodes once it is Running there (need=Running).
need=""; at="bound to"
[[ -z $gbuild ]] || { need=Running; at="Running on"; }
placed='(p["spec"].get("nodeName", "") if NEED in ("", p.get("status", {}).get("phase")) else "")'
pods_json() { admin -n ml get pods -o json; }
node_of() { admin -n ml get pod "$1" -o json | jq_py "NEED='$need'; p=d; print($placed)"; }
serve_nodes() {  # "name node" per live serve pod (not terminating)
  pods_json | jq_py "NEED='$need'"'
for p in d["items"]:
    m = p["metadata"]
    if m.get("labels", {}).get("app") == "serve" and not m.get("deletionTimestamp"):
        print(m["name"], '"$placed"')'
}
gpu_pod() {  # NAME GPUS EXTRA-SPEC-JSON: a bare pod of gapless-scheduler
  python3 - "$@" <<'EOF' | admin create -f - > /dev/null
import json, sys
spec = {"schedulerName": "gapless-scheduler", "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "containers": [{"name": "main", "image": "example.invalid/gpu",
                        "resources": {"limits": {"nvidia.com/gpu": sys.argv[2]}}}]}
spec.update(json.loads(sys.argv[3]))
print(json.dumps({"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": sys.argv[1], "namespace": "ml"}, "spec": spec}))
EOF
}
admin -n ml apply -f - > /dev/null <<'EOF'
apiVersion: apps/v1
kind: Deployment
metadata: {name: serve, namespace: ml}
spec:
  replicas: 2
  selector: {matchLabels: {app: serve}}
  template:
    metadata:
      labels: {app: serve}
      annotations: {gapless.io/movable: "true"}
    spec:
      schedulerName: gapless-scheduler
      terminationGracePeriodSeconds: 5
      automountServiceAccountToken: false  # no token controller, no kube-root-ca.crt here
      enableServiceLinks: false
      containers:
      - {name: main, image: example.invalid/serve, resources: {limits: {nvidia.com/gpu: "2"}}}
EOF
for _ in $(seq 120); do
  [[ $(serve_nodes | awk '$2 != ""' | wc -l) == 2 ]] && break; sleep 0.5
done
mapfile -t where < <(serve_nodes | awk '{print $2}' | sort -u)
if [[ ${#where[@]} == 1 && -n ${where[0]} ]]; then
  X=${where[0]}; pass "Deployment serve's 2 replicas (2 GPUs each) are $at $X: $(serve_nodes | tr '\n' ' ')"
else
  fail "serve's replicas are not $at one node: $(serve_nodes | tr '\n' ' ')"; exit 3
fi
Y=node-a; [[ $X == node-a ]] && Y=node-b
# 3 GPUs, so that train's drain target (drain.minGpus: the node closest to taking it, 4 GPUs to
# free on X, 3 on Y) is Y, not the node the plan frees: only the held room keeps X for train.
gpu_pod fixed 3 "{\"nodeSelector\": {\"kubernetes.io/hostname\": \"$Y\"}}"
for _ in $(seq 60); do [[ -n $(node_of fixed) ]] && break; sleep 0.5; done
[[ $(node_of fixed) == "$Y" ]] && pass "bare pod fixed (3 GPUs) $at $Y" \
  || { fail "pod fixed not $at $Y"; exit 3; }

# ---- 1) a budget forbids the evictions: Gapless waits ------------------------------------------
admin -n ml apply -f - > /dev/null <<'EOF'
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: serve, namespace: ml}
spec: {minAvailable: 2, selector: {matchLabels: {app: serve}}}
EOF
for _ in $(seq 60); do
  [[ $(admin -n ml get pdb serve -o jsonpath='{.status.observedGeneration}') != "" ]] && break
  sleep 0.5
done
gpu_pod train 8 '{}'
events_on() {  # POD: "reason: message" lines of Gapless's consolidation Events
  admin -n ml get events -o json | jq_py "
for e in d['items']:
    if e['involvedObject']['name'] == '$1' and e['reason'].startswith('Consolidation'):
        print(e['reason'] + ': ' + e['message'])"
}
for _ in $(seq 60); do [[ -n $(events_on train) ]] && break; sleep 0.5; done
sleep 5  # a few more consolidation steps
evicted=$(grep -c 'consolidation: pod ml/train: evicted' extender.log || true)
if [[ -z $(node_of train) && $evicted == 0 && $(serve_nodes | wc -l) == 2 ]] &&
   events_on train | grep -q 'PodDisruptionBudget'; then
  pass "with PDB serve (minAvailable 2) nothing is evicted; train waits: $(events_on train | head -1)"
else
  fail "with the PDB: train on '$(node_of train)', evictions logged $evicted, events: $(events_on train)"
fi

# ---- 2) the budget removed: Gapless evicts, the replicas come back on Y, train runs on X --------
admin -n ml delete pdb serve > /dev/null
terminating() {  # names of evicted pods not deleted yet
  pods_json | jq_py '
for p in d["items"]:
    if p["metadata"].get("deletionTimestamp"): print(p["metadata"]["name"])'
}
evicted_pods() {  # names of the pods Gapless evicted (its ConsolidationEviction Events)
  admin -n ml get events -o json | jq_py "
for e in d['items']:
    if e['reason'] == 'ConsolidationEviction': print(e['involvedObject']['name'])" | sort -u
}
# While the evicted pods terminate (they still hold their GPUs, X has 4 free), the extender keeps
# X for train: a 2-GPU pod, as serve's replacements ask, is refused there. (A real kubelet may
# have deleted them already: the room is held until train is bound.)
for _ in $(seq 90); do [[ -n $(terminating) || -n $(evicted_pods) ]] && break; sleep 0.5; done
while="while the evicted pods terminate"
[[ -z $gbuild ]] || while="after the evictions ($(terminating | wc -l) still terminating), before train is bound"
probe='{"Pod":{"metadata":{"name":"probe","namespace":"ml","uid":"uid-probe"},"spec":{"containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":"2"}}}]}},"NodeNames":["node-a","node-b"]}'
held=$(curl -s "127.0.0.1:$verbs/debug/explain" -d "$probe" | X=$X jq_py '
import os
for n in d["Nodes"]:
    if n["Node"] == os.environ["X"]: print(n["Verdict"] + ": " + n["Reason"])')
if [[ $held == "unresolvable: "*"consolidation made room"* ]]; then
  pass "$while, $X is kept for train: a 2-GPU pod there is $held"
else
  fail "$X is not kept for train $while: '$held' (terminating: $(terminating | tr '\n' ' '))"
fi
# Without kubelets the script does what a kubelet does with an evicted pod once its containers
# stop: delete it for good. Until train is bound, no live serve pod may be bound to X (the room
# freed for train).
on_x_early=""
for _ in $(seq 120); do
  [[ -n $gbuild ]] || terminating | while read -r p; do
    admin -n ml delete pod "$p" --grace-period=0 --force > /dev/null 2>&1 || true
  done
  [[ -n $(need="" node_of train) ]] && break
  on_x_early+=$(need="" serve_nodes | awk -v x="$X" '$2 == x {printf "%s ", $1}')
  sleep 1
done
for _ in $(seq 120); do [[ -n $(node_of train) ]] && break; sleep 0.5; done  # Running, on nodes
if [[ $(node_of train) == "$X" ]]; then
  pass "train (8 GPUs) $at $X after Gapless evicted serve's replicas there"
else
  fail "train not $at $X (node '$(need="" node_of train)'); extender log: $(grep consolidation extender.log | tail -3)"
fi
for _ in $(seq 60); do
  [[ $(serve_nodes | awk -v y="$Y" '$2 == y' | wc -l) == 2 ]] && break; sleep 0.5
done
if [[ $(serve_nodes | awk -v y="$Y" '$2 == y' | wc -l) == 2 ]]; then
  pass "serve's replacement replicas $at $Y: $(serve_nodes | tr '\n' ' ')"
else
  fail "serve's replicas: $(serve_nodes | tr '\n' ' ')"
fi
evictions=$(admin -n ml get events -o json |
  jq_py "print(sum(1 for e in d['items'] if e['reason'] == 'ConsolidationEviction'))")
if [[ -z $on_x_early && $evictions == 2 ]]; then
  pass "no replacement was bound to $X before train (polled every second), and Gapless evicted 2 pods in all"
else
  early=$(tr ' ' '\n' <<< "$on_x_early" | sort -u | tr '\n' ' ')
  fail "replacements on $X before train was bound:$early; evictions in all: $evictions"
fi
if [[ -n $gbuild ]]; then
  # Only the kubelets delete pods here (no pod GC, no force-delete): gone means X's kubelet
  # stopped the evicted pods' containers and removed them.
  gone="" killed=""
  for p in $(evicted_pods); do
    admin -n ml get pod "$p" > /dev/null 2>&1 || gone+="$p "
    grep -q "Killing container with a grace period.*ml/$p" "$dir/$X/kubelet.log" && killed+="$p "
  done
  if [[ -n $gone && $gone == "$killed" && $gone == "$(evicted_pods | tr '\n' ' ')" ]]; then
    pass "the evicted pods ${gone}were stopped by $X's kubelet ('Killing container with a grace period') and are gone, none force-deleted"
  else
    fail "evicted: $(evicted_pods | tr '\n' ' '); gone: $gone; killed by $X's kubelet: $killed"
  fi
  if live=$(python3 "$here/kubelet_e2e.py" check-live ml train "$dir"/node-{a,b}/creates.jsonl); then
    pass "every Running container got its record's GPUs, none twice; $(tr '\n' ';' <<< "$live")"
  else
    fail "containers against their records: $(tr '\n' ';' <<< "$live")"
  fi
fi
echo "events on train:"; events_on train | sed 's/^/  /'
echo "events on evicted pods:"
admin -n ml get events -o json | jq_py "
for e in d['items']:
    if e['reason'] == 'ConsolidationEviction': print('  ' + e['involvedObject']['name'] + ': ' + e['message'])"
echo "extender log (consolidation):"; grep 'consolidation' extender.log | sed 's/^/  /' | tail -8
[[ $fails == 0 ]] || exit 3
