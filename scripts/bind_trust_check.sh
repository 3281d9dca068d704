#!/usr/bin/env bash
# Can a crafted /filter + /bind make Gapless place a pod where kube-scheduler would not? (issue 38,
# docs/security.md "Bind trusts the cluster, not the caller"). Local only, never in CI; no root.
#
#   scripts/bind_trust_check.sh K8S_BIN_DIR [GAPLESS_EXTENDER]
#
# K8S_BIN_DIR holds kube-apiserver and kube-scheduler (v1.26 here: docs/cluster-e2e.md says how
# they are built); GAPLESS_EXTENDER defaults to build/gapless-extender; etcd (Debian's
# etcd-server), kubectl, openssl, curl and python3 come from PATH. On 127.0.0.1 ports the kernel
# picks, in a temporary directory: etcd and kube-apiserver with --authorization-mode=Node,RBAC
# and NodeRestriction (scripts/local_control_plane.sh); manifests/ as shipped;
# a token for the extender's ServiceAccount gapless-system/gapless-scheduler (TokenRequest, what
# the kubelet would mount), with which gapless-extender runs in Kubernetes mode (verbs on
# --listen, probes and /metrics on --probe-listen, as in manifests/deployment.yaml); kube-scheduler
# with manifests/scheduler-config.yaml pointed at it. Two GPU nodes: node-a (pool=train) and
# node-b (pool=infer, tainted dedicated=infra:NoSchedule), 8 GPUs each in a gapless.io/gpu-topology
# annotation and status.capacity written by the script as an admin: NO kubelet and NO gapless-agent
# run on them (nothing runs the pods; a bound pod only gets spec.nodeName).
#
# Pods (namespace tenant, schedulerName gapless-scheduler, one GPU each): legit (nodeSelector
# pool=train: kube-scheduler binds it through Gapless), and three that kube-scheduler cannot place:
# selective (nodeSelector pool=reserved, no node has it), picky (required node affinity pool In
# [reserved]) and intolerant (nodeSelector pool=infer, no toleration of node-b's taint). For each
# of those the script then does what their owner could: a /filter for the same name and UID with
# the constraint removed (or a toleration added), which Gapless's model passes, then a /bind to the
# node it chose. One line per check, PASS or FAIL.
# Environment: KEEP=1 keeps the temporary directory with the logs.
# Exit status: 0 all checks passed, 3 a check failed, other: the harness failed (message says).
set -euo pipefail
bin=$(realpath "${1:?K8S_BIN_DIR (kube-apiserver, kube-scheduler)}")
here=$(cd "$(dirname "$0")" && pwd); repo=$(dirname "$here")
ext=$(realpath "${2:-$repo/build/gapless-extender}")
die() { echo "bind_trust_check: $*" >&2; exit 2; }
for c in etcd kubectl openssl curl python3; do command -v $c >/dev/null || die "$c not found"; done
for b in "$bin/kube-apiserver" "$bin/kube-scheduler" "$ext"; do [[ -x $b ]] || die "missing $b"; done
dir=$(mktemp -d); pids=()
# shellcheck source=local_control_plane.sh
. "$here/local_control_plane.sh"
trap "stop_local_cluster bind_trust_check" EXIT
cd "$dir"
start_control_plane "$bin"
echo "bind_trust_check: kube-apiserver $("$bin/kube-apiserver" --version | cut -d' ' -f2)," \
  "authorization Node,RBAC" >&2

fails=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
jq_py() { python3 -c "import json,sys; d=json.load(sys.stdin); $1"; }  # PYTHON over JSON on stdin

apply_manifests "$repo/manifests" || die "applying manifests/: $(tail -3 apply.log)"
admin create namespace tenant > /dev/null
admin -n tenant create serviceaccount default > /dev/null  # no controller-manager makes it

# ---- two GPU nodes, as an agent and a kubelet would have left them (neither runs here) -----------
node() {  # NAME POOL TAINTS-JSON
  python3 - "$@" <<'EOF' > node.json
import json, sys
name, pool, taints = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
gpus = [{"index": i, "uuid": f"{name}-GPU-{i}", "model": "NVIDIA-H100-80GB-HBM3",
         "memoryMiB": 81920, "healthy": True} for i in range(8)]
links = [{"a": a, "b": b, "type": "NVLink", "count": 18} for a in range(8) for b in range(a + 1, 8)]
topo = {"version": 1, "gpus": gpus, "links": links}
res = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"}
print(json.dumps({"apiVersion": "v1", "kind": "Node",
  "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "pool": pool},
               "annotations": {"gapless.io/gpu-topology": json.dumps(topo)}},
  "spec": {"taints": taints},
  "status": {"capacity": res, "allocatable": res,
             "conditions": [{"type": "Ready", "status": "True"}]}}))
EOF
  admin create -f node.json > /dev/null
  # The status a kubelet would report; admission adds node.kubernetes.io/not-ready, which no
  # node lifecycle controller clears here: put the node's own taints back.
  admin patch node "$1" --subresource status --type merge \
    -p "$(jq_py 'print(json.dumps({"status": d["status"]}))' < node.json)" > /dev/null
  admin patch node "$1" --type merge -p "{\"spec\":{\"taints\":$3}}" > /dev/null
}
node node-a train null
node node-b infer '[{"key":"dedicated","value":"infra","effect":"NoSchedule"}]'

pod() {  # NAME SPEC-EXTRA-JSON (merged into spec)
  python3 - "$@" <<'EOF' | admin create -f - > /dev/null
import json, sys
spec = {"schedulerName": "gapless-scheduler",
        "containers": [{"name": "main", "image": "example.invalid/train",
                        "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}
spec.update(json.loads(sys.argv[2]))
print(json.dumps({"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": sys.argv[1], "namespace": "tenant"}, "spec": spec}))
EOF
}
pod legit '{"nodeSelector": {"pool": "train"}}'
pod selective '{"nodeSelector": {"pool": "reserved"}}'
pod picky '{"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
  {"nodeSelectorTerms": [{"matchExpressions":
    [{"key": "pool", "operator": "In", "values": ["reserved"]}]}]}}}}'
pod intolerant '{"nodeSelector": {"pool": "infer"}}'

# ---- gapless-extender with its own ServiceAccount's token, kube-scheduler pointed at it ----------
token=$(admin -n gapless-system create token gapless-scheduler --duration 1h)
kc extender.kubeconfig "$token"
read -r verbs probes sched_port < <(free_ports 3)
"$ext" --kubeconfig extender.kubeconfig --listen "127.0.0.1:$verbs" \
  --probe-listen "127.0.0.1:$probes" --claims-namespace gapless-system \
  --replica-name bind-trust-check > extender.log 2>&1 & pids+=($!)
for _ in $(seq 60); do curl -sf "127.0.0.1:$probes/readyz" >/dev/null && break; sleep 0.5; done
curl -sf "127.0.0.1:$probes/readyz" >/dev/null || die "gapless-extender not ready: $(tail -5 extender.log)"
sed -e "s|^leaderElection:.*|clientConnection: {kubeconfig: $dir/admin.kubeconfig}\nleaderElection: {leaderElect: false}|" \
  -e "s|http://127.0.0.1:8888|http://127.0.0.1:$verbs|" "$repo/manifests/scheduler-config.yaml" \
  > scheduler.yaml
"$bin/kube-scheduler" --config scheduler.yaml --secure-port="$sched_port" \
  --bind-address=127.0.0.1 --cert-dir=scheduler-certs > scheduler.log 2>&1 & pids+=($!)

getpod() { admin -n tenant get pod "$1" -o json; }
node_of() { getpod "$1" | jq_py 'print(d["spec"].get("nodeName", ""))'; }
for _ in $(seq 60); do [[ -n $(node_of legit) ]] && break; sleep 0.5; done
record=$(getpod legit | jq_py 'print(d["metadata"].get("annotations", {}).get("gapless.io/allocation", ""))')
if [[ $(node_of legit) == node-a && -n $record ]]; then
  pass "kube-scheduler binds pod legit (nodeSelector pool=train) to node-a through Gapless (gapless.io/allocation $record)"
else
  fail "pod legit not bound to node-a through Gapless: node '$(node_of legit)', record '$record'"
fi
# What gapless-agent writes once the kubelet has allocated legit's GPU (neither runs here): until
# then Gapless holds further one-GPU binds to node-a (docs/node-pairing.md), which would answer
# the crafted binds below before their constraints are even looked at.
admin -n tenant annotate pod legit 'gapless.io/allocated={"node":"node-a"}' > /dev/null
unschedulable() {  # POD: kube-scheduler's PodScheduled=False message, empty until it gave up
  getpod "$1" | jq_py '
c = [c for c in d.get("status", {}).get("conditions", []) if c["type"] == "PodScheduled"]
print(c[0].get("message", "") if c and c[0]["status"] == "False" else "")'
}
for p in selective picky intolerant; do
  for _ in $(seq 60); do [[ -n $(unschedulable $p) ]] && break; sleep 0.5; done
  why=$(unschedulable $p)
  if [[ -n $why && -z $(node_of $p) ]]; then
    pass "kube-scheduler cannot place pod $p: $why"
  else
    fail "kube-scheduler did not report pod $p unschedulable (node '$(node_of $p)')"
  fi
done

# ---- the owner's crafted /filter + /bind ---------------------------------------------------------
verb() {  # VERB JSON: POST to the extender's verb listener, the answer on stdout
  curl -s -X POST -H 'Content-Type: application/json' --data-binary @- \
    "127.0.0.1:$verbs/$1" <<<"$2"
}
refused() { curl -s "127.0.0.1:$probes/metrics" | sed -n 's/^gapless_binds_total{outcome="refused"} //p'; }
before=$(refused); before=${before:-0}
attempts=0
attack() {  # POD NODE PYTHON (edits the API's pod p into the crafted body) WHAT
  local pod=$1 node=$2 edit=$3 what=$4 filtered bound uid events
  getpod "$pod" > api-pod.json
  uid=$(jq_py 'print(d["metadata"]["uid"])' < api-pod.json)
  filtered=$(verb filter "$(jq_py "p = d; $edit
print(json.dumps({'Pod': p, 'NodeNames': ['$node']}))" < api-pod.json)")
  if [[ $(jq_py 'print(d.get("NodeNames"))' <<<"$filtered") != "['$node']" ]]; then
    fail "crafted /filter for pod $pod ($what) did not pass $node: $filtered"; return
  fi
  bound=$(verb bind "{\"PodName\":\"$pod\",\"PodNamespace\":\"tenant\",\"PodUID\":\"$uid\",\"Node\":\"$node\"}")
  attempts=$((attempts + 1))
  local error; error=$(jq_py 'print(d.get("Error", ""))' <<<"$bound")
  sleep 1  # the Event is posted after the answer
  events=$(admin -n tenant get events --field-selector "involvedObject.name=$pod,reason=FailedBinding" \
    -o json | jq_py "print('; '.join(e['message'] for e in d['items'] if e['type'] == 'Warning'
                                   and 'to node $node:' in e['message']))")
  if [[ -n $error && -z $(node_of "$pod") && -n $events ]]; then
    pass "crafted /filter ($what, Gapless's model passes $node) + /bind of pod $pod to $node:" \
      "refused (\"$error\"), pod unbound, Event FailedBinding \"$events\""
  else
    fail "crafted /bind of pod $pod to $node ($what): answer $bound, node '$(node_of "$pod")', events '$events'"
  fi
}
attack selective node-a 'del p["spec"]["nodeSelector"]' "nodeSelector removed"
attack picky node-a 'del p["spec"]["affinity"]' "required node affinity removed"
attack intolerant node-b \
  'p["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]' \
  "toleration of dedicated=infra:NoSchedule added"
attack intolerant node-a 'del p["spec"]["nodeSelector"]' "nodeSelector removed, to the untainted node"
after=$(refused); after=${after:-0}
if (( ${after%.*} - ${before%.*} == attempts )); then
  pass "gapless_binds_total{outcome=\"refused\"} counted the $attempts refusals ($before -> $after)"
else
  fail "gapless_binds_total{outcome=\"refused\"} went $before -> $after for $attempts refused binds"
fi
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
  --data '{"PodName":"selective","PodNamespace":"tenant","Node":"node-a"}' "127.0.0.1:$probes/bind")
if [[ $code == 404 && -z $(node_of selective) ]]; then
  pass "the probe listener (the one the pod network reaches) does not serve /bind ($code)"
else
  fail "POST /bind on the probe listener answered $code"
fi
sleep 2  # kube-scheduler keeps retrying them; still nowhere
for p in selective picky intolerant; do
  where=$(node_of $p)
  if [[ -z $where ]]; then pass "pod $p is still unbound"; else fail "pod $p was bound to $where"; fi
done
where=$(node_of legit)
if [[ $where == node-a ]]; then pass "pod legit is still on node-a"; else fail "pod legit on '$where'"; fi
echo "bind_trust_check: $fails failed" >&2
[[ $fails == 0 ]] || exit 3
