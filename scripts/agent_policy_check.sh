#!/usr/bin/env bash
# Does the node agent's token speak only for its own node? (issue 38, docs/security.md "A node
# speaks only for itself"). Local only, never in CI; needs no root.
#
#   scripts/agent_policy_check.sh K8S_BIN_DIR
#
# K8S_BIN_DIR holds kube-apiserver (v1.26 here: docs/cluster-e2e.md says how it is built; any
# later version works too); etcd (Debian's etcd-server), kubectl, openssl, curl and python3 come
# from PATH. On 127.0.0.1 ports the kernel picks, in a temporary directory, the script starts etcd
# and kube-apiserver with --authorization-mode=Node,RBAC and ValidatingAdmissionPolicy on (on
# 1.26-1.29 its feature gate and runtime-config), no kubelet; applies manifests/ as shipped, and
# manifests/node-policy/ (converted to the API version the server serves, as docs/security.md
# tells 1.26-1.29 users to); creates node-a and node-b, an agent pod and a tenant pod bound to
# each; asks a token for the agent's ServiceAccount bound to the agent pod on node-a (what the
# kubelet mounts into it); and tries, with that token, what a compromised agent would. One line
# per check, PASS or FAIL. Where the token carries no node name (Kubernetes < 1.30, or
# ServiceAccountTokenPodNodeInfo off) the policy cannot tell node-b from node-a: those checks
# expect the write to go through and say so ("allowed: token names no node").
# Environment: KEEP=1 keeps the temporary directory with the logs.
# Exit status: 0 all checks passed, 3 a check failed, other: the harness failed (message says).
set -euo pipefail
bin=$(realpath "${1:?K8S_BIN_DIR (kube-apiserver)}")
here=$(cd "$(dirname "$0")" && pwd); repo=$(dirname "$here")
die() { echo "agent_policy_check: $*" >&2; exit 2; }
for c in etcd kubectl openssl curl python3; do command -v $c >/dev/null || die "$c not found"; done
[[ -x $bin/kube-apiserver ]] || die "missing $bin/kube-apiserver"
dir=$(mktemp -d); pids=()
cd "$dir"
# shellcheck source=local_control_plane.sh
. "$here/local_control_plane.sh"
trap "stop_local_cluster agent_policy_check" EXIT

# ---- control plane ----------------------------------------------------------------------------
version=$("$bin/kube-apiserver" --version | sed 's/.*v\([0-9]*\.[0-9]*\).*/\1/')
minor=${version#*.}
case $minor in  # the ValidatingAdmissionPolicy API each version serves (docs/security.md)
  26|27) vap=v1alpha1 ;;
  28|29) vap=v1beta1 ;;
  *) vap=v1 ;;
esac
extra=()
if [[ $vap != v1 ]]; then
  extra=(--feature-gates=ValidatingAdmissionPolicy=true
         --runtime-config=admissionregistration.k8s.io/$vap=true)
fi
start_control_plane "$bin" ${extra[@]+"${extra[@]}"}
echo "agent_policy_check: kube-apiserver v$version, ValidatingAdmissionPolicy $vap" >&2

fails=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

# ---- Gapless as shipped ------------------------------------------------------------------------
if apply_manifests "$repo/manifests"; then
  pass "manifests/ (no admission policy in it) applies on v$version"
else
  fail "applying manifests/ on v$version: $(tail -3 apply.log)"
fi
kubectl kustomize "$repo/manifests/node-policy" > policy-v1.yaml
if [[ $vap != v1 ]]; then
  if admin apply -f policy-v1.yaml > v1.log 2>&1; then
    fail "manifests/node-policy/ as shipped (v1) applied on v$version: expected no such API"
  else
    pass "manifests/node-policy/ as shipped (admissionregistration.k8s.io/v1) is refused by v$version" \
      "($(grep -o 'no matches for kind "[^"]*" in version "[^"]*"' v1.log | head -1)): it stays out of manifests/"
  fi
fi
# The conversion docs/security.md gives for 1.26-1.29.
sed -e "s#^apiVersion: admissionregistration.k8s.io/v1\$#apiVersion: admissionregistration.k8s.io/$vap#" \
  policy-v1.yaml > policy.yaml
[[ $minor == 26 ]] && sed -i '/^  validationActions:$/{N;d}' policy.yaml  # a 1.27 field
admin apply -f policy.yaml > policy.log 2>&1 || die "applying the policy: $(cat policy.log)"
pass "manifests/node-policy/ applied as admissionregistration.k8s.io/$vap"

# ---- two nodes, an agent pod and a tenant pod on each ---------------------------------------------
for n in a b; do
  admin apply -f - > /dev/null <<EOF
apiVersion: v1
kind: Node
metadata:
  name: node-$n
  labels: {kubernetes.io/hostname: node-$n, nvidia.com/gpu.present: "true"}
  annotations: {example.com/owner: ops}
spec: {}
EOF
done
admin create namespace tenant > /dev/null
admin -n tenant create serviceaccount default > /dev/null  # no controller-manager makes it
for n in a b; do
  admin apply -f - > /dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: agent-$n, namespace: gapless-node}
spec:
  nodeName: node-$n
  serviceAccountName: gapless-node-agent
  containers: [{name: agent, image: example.invalid/agent}]
---
apiVersion: v1
kind: Pod
metadata:
  name: work-$n
  namespace: tenant
  labels: {app: work}
  annotations: {example.com/team: ml}
spec:
  nodeName: node-$n
  containers: [{name: main, image: example.invalid/work}]
EOF
done

# ---- the agent's token, as the kubelet mounts it into agent-a --------------------------------------
token=$(admin -n gapless-node create token gapless-node-agent --bound-object-kind Pod \
  --bound-object-name agent-a --duration 1h)
kc agent.kubeconfig "$token"
agent() { kubectl --kubeconfig "$dir/agent.kubeconfig" "$@"; }
review=$(admin create -o json -f - <<EOF
{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "$token"}}
EOF
)
keys=$(python3 -c 'import json,sys; u=json.load(sys.stdin)["status"]["user"]
print(u["username"], " ".join(sorted(u.get("extra", {}))))' <<<"$review")
echo "agent_policy_check: the agent's token authenticates as: $keys" >&2
named=0
[[ $keys == *authentication.kubernetes.io/node-name* ]] && named=1

auth=(-H "Authorization: Bearer $token")  # who acall speaks as: the agent's token
acall() {  # METHOD PATH JSON [content type]: as the agent; prints the API's message on failure
  local code
  code=$(curl -sk -o "$dir/answer.json" -w '%{http_code}' -X "$1" "${auth[@]}" \
    -H "Content-Type: ${4:-application/merge-patch+json}" --data "$3" "$api$2")
  [[ $code == 2* ]] && return 0
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("message"))' "$dir/answer.json"
  return 1
}
ppatch() { acall PATCH "/api/v1/namespaces/tenant/pods/$1" "$2" "${3:-}"; }  # pod JSON [type]
ann() { echo "{\"metadata\":{\"annotations\":{\"$1\":$2}}}"; }  # key, JSON value

# The policy takes effect once the API server's informers see it.
for _ in $(seq 40); do
  if ! ppatch work-a "$(ann example.com/probe '"1"')" >/dev/null 2>&1; then
    break
  fi
  sleep 0.5
done

# check allow|policy|rbac|where WHAT -- kubectl args. policy: refused by the admission policy;
# rbac: refused by RBAC; where: refused by the policy when the token names its node, allowed (the
# documented gap) when it does not. Pods are written as the agent writes them, by merge patch
# with curl (its RBAC has no pod get, which kubectl annotate, label and patch do first).
check() {
  local want=$1 what=$2; shift 3
  local out rc=0
  out=$("$@" 2>&1) || rc=$?
  if [[ $want == where ]]; then
    if [[ $named == 1 ]]; then want=policy; else want=gap; fi
  fi
  case $want in
    allow) [[ $rc == 0 ]] && pass "allowed: $what" || fail "refused, want allowed: $what: $out" ;;
    gap) [[ $rc == 0 ]] && pass "allowed: $what (token names no node: not confinable here)" ||
           fail "refused, want allowed (token names no node): $what: $out" ;;
    policy) if [[ $rc != 0 && $out == *"ValidatingAdmissionPolicy 'gapless-node-agent'"* ]]; then
              pass "refused by the policy: $what (${out##*denied request: })"
            else
              fail "want refused by the policy: $what: rc=$rc $out"
            fi ;;
    rbac) if [[ $rc != 0 && $out == *"cannot "*" resource"* ]]; then
            pass "refused by RBAC: $what"
          else
            fail "want refused by RBAC: $what: rc=$rc $out"
          fi ;;
  esac
}
topo='{"metadata":{"annotations":{"gapless.io/gpu-topology":"{\"gpus\":[]}"}}}'
check allow "agent patches node-a's gapless.io/gpu-topology" -- \
  agent patch node node-a --type merge -p "$topo"
check allow "agent sets node-a's label nvidia.com/gpu.product" -- \
  agent label node node-a --overwrite nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3
check policy "agent changes node-a's label nvidia.com/gpu.present" -- \
  agent label node node-a --overwrite nvidia.com/gpu.present=false
check policy "agent adds a label to node-a" -- agent label node node-a evil=1
check policy "agent changes node-a's annotation example.com/owner" -- \
  agent annotate node node-a --overwrite example.com/owner=me
check policy "agent taints node-a" -- agent taint node node-a evil=1:NoSchedule
check policy "agent cordons node-a (spec.unschedulable)" -- \
  agent patch node node-a --type merge -p '{"spec":{"unschedulable":true}}'
check policy "agent adds a finalizer to node-a" -- \
  agent patch node node-a --type merge -p '{"metadata":{"finalizers":["example.com/hold"]}}'
check rbac "agent patches node-a's status (nodes/status)" -- agent patch node node-a \
  --subresource status --type merge -p '{"status":{"capacity":{"nvidia.com/gpu":"64"}}}'
check rbac "agent deletes node-b" -- agent delete node node-b --wait=false
check where "agent patches node-b's gapless.io/gpu-topology" -- \
  agent patch node node-b --type merge -p "$topo"
check policy "agent adds a label to node-b" -- agent label node node-b evil=1
check policy "agent taints node-b" -- agent taint node node-b evil=1:NoSchedule

alloc='"{\"node\":\"node-a\"}"'
check allow "agent marks pod work-a (node-a) gapless.io/allocated" -- \
  ppatch work-a "$(ann gapless.io/allocated "$alloc")"
check allow "agent marks pod work-a gapless.io/share-overuse" -- \
  ppatch work-a "$(ann gapless.io/share-overuse '"1"')"
check allow "agent removes pod work-a's gapless.io/share-overuse" -- \
  ppatch work-a "$(ann gapless.io/share-overuse null)"
check policy "agent writes pod work-a's gapless.io/allocation (the extender's record)" -- \
  ppatch work-a "$(ann gapless.io/allocation '"{}"')"
check policy "agent writes a non-Gapless annotation on pod work-a" -- \
  ppatch work-a "$(ann example.com/x '"1"')"
check policy "agent removes pod work-a's annotation example.com/team" -- \
  ppatch work-a "$(ann example.com/team null)"
check policy "agent relabels pod work-a" -- \
  ppatch work-a '{"metadata":{"labels":{"app":"other"}}}'
check policy "agent changes pod work-a's spec (activeDeadlineSeconds)" -- \
  ppatch work-a '{"spec":{"activeDeadlineSeconds":1}}'
check policy "agent changes pod work-a's image" -- ppatch work-a \
  '{"spec":{"containers":[{"name":"main","image":"example.invalid/evil"}]}}' \
  application/strategic-merge-patch+json
check policy "agent adds a finalizer to pod work-a" -- \
  ppatch work-a '{"metadata":{"finalizers":["example.com/hold"]}}'
check where "agent marks pod work-b (node-b) gapless.io/allocated" -- \
  ppatch work-b "$(ann gapless.io/allocated "$alloc")"
check policy "agent writes a non-Gapless annotation on pod work-b (node-b)" -- \
  ppatch work-b "$(ann example.com/x '"1"')"
check rbac "agent creates a pod" -- agent -n tenant run evil --image=example.invalid/evil

event() {  # reason kind host
  printf '{"apiVersion":"v1","kind":"Event","metadata":{"generateName":"work-a.","namespace":"tenant"},"involvedObject":{"kind":"%s","namespace":"tenant","name":"work-a","apiVersion":"v1"},"reason":"%s","message":"m","type":"Warning","source":{"component":"gapless-agent","host":"%s"}}' "$2" "$1" "$3" > event.json
  echo "$dir/event.json"
}
check allow "agent posts a GaplessDrift Event on pod work-a as node-a" -- \
  agent create -f "$(event GaplessDrift Pod node-a)"
check policy "agent posts a Scheduled Event" -- agent create -f "$(event Scheduled Pod node-a)"
check policy "agent posts a GaplessDrift Event on a Node" -- agent create -f "$(event GaplessDrift Node node-a)"
check where "agent posts a GaplessDrift Event as node-b" -- \
  agent create -f "$(event GaplessDrift Pod node-b)"

# The same token as Kubernetes 1.30+ issues it (ServiceAccountTokenPodNodeInfo): on an API server
# whose tokens name no node, an admin impersonates the agent with the node name in its extra
# fields, which is the identity such a token authenticates as. RBAC and the policy see the same.
if [[ $named == 0 ]]; then
  named=1
  auth=(-H "Authorization: Bearer admintoken"
        -H "Impersonate-User: system:serviceaccount:gapless-node:gapless-node-agent"
        -H "Impersonate-Group: system:serviceaccounts"
        -H "Impersonate-Group: system:serviceaccounts:gapless-node"
        -H "Impersonate-Group: system:authenticated"
        -H "Impersonate-Extra-authentication.kubernetes.io%2fnode-name: node-a"
        -H "Impersonate-Extra-authentication.kubernetes.io%2fpod-name: agent-a")
  echo "agent_policy_check: now as the agent with node-name node-a (impersonated; a 1.30+ token)" >&2
  npatch() { acall PATCH "/api/v1/nodes/$1" "$2"; }
  epost() { acall POST /api/v1/namespaces/tenant/events "$(cat "$1")" application/json; }
  check allow "[node-name node-a] agent patches node-a's gapless.io/gpu-topology" -- \
    npatch node-a "$topo"
  check where "[node-name node-a] agent patches node-b's gapless.io/gpu-topology" -- \
    npatch node-b "$topo"
  check allow "[node-name node-a] agent marks pod work-a (node-a) gapless.io/allocated" -- \
    ppatch work-a "$(ann gapless.io/allocated '"{}"')"
  check where "[node-name node-a] agent marks pod work-b (node-b) gapless.io/allocated" -- \
    ppatch work-b "$(ann gapless.io/allocated '"{}"')"
  check where "[node-name node-a] agent marks pod work-b (node-b) gapless.io/share-overuse" -- \
    ppatch work-b "$(ann gapless.io/share-overuse '"1"')"
  check allow "[node-name node-a] agent posts a GaplessDrift Event as node-a" -- \
    epost "$(event GaplessDrift Pod node-a)"
  check where "[node-name node-a] agent posts a GaplessDrift Event as node-b" -- \
    epost "$(event GaplessDrift Pod node-b)"
fi

# Nobody else is confined by it.
if admin label node node-a --overwrite nvidia.com/gpu.present=true team=a > /dev/null &&
   admin -n tenant annotate pod work-a --overwrite example.com/x=admin > /dev/null; then
  pass "allowed: an admin changes node-a's labels and work-a's annotations (the policy is the agent's only)"
else
  fail "the policy refused an admin's change"
fi
echo "agent_policy_check: $fails failed" >&2
[[ $fails == 0 ]] || exit 3
