#!/usr/bin/env bash
# Does every container get the GPUs of its pod's gapless.io/allocation record on REAL kubelets?
# (issue 25, docs/kubelet-e2e.md). Local only, never in CI; run as root (mount namespaces).
#
#   scripts/kubelet_e2e.sh K8S_BIN_DIR GAPLESS_BUILD_DIR [rounds [N] | one-node [K]]
#
# K8S_BIN_DIR holds kube-apiserver, kube-scheduler, kubelet (v1.26, built from a Kubernetes tree
# with `GOFLAGS=-mod=vendor CGO_ENABLED=0 go build -tags providerless`) and gapless-fakecri
# (scripts/kubelet_e2e/fakecri/main.go, built inside that tree); etcd comes from Debian's
# etcd-server. GAPLESS_BUILD_DIR holds gapless-extender, gapless-agent and
# the fake NVML (fake_nvml/libnvidia-ml.so.1, target fake_nvml).
#
# Runs on 127.0.0.1, everything in a temporary directory: etcd, kube-apiserver, gapless-extender
# (--kubeconfig), kube-scheduler with manifests/scheduler-config.yaml (pointing at that
# extender), and two nodes, node-a and node-b (scripts/kubelet_nodes.sh). A node is a real
# kubelet in its own mount namespace (the v1.26 device manager hard-codes /var/lib/kubelet/device-plugins: a per-node
# directory is bind-mounted there; the kernel settings the kubelet insists on are files
# bind-mounted over /proc/sys so the host keeps its own), gapless-fakecri as its runtime (it
# records what each container would receive), and gapless-agent --device-plugin over the fake
# NVML with 8 H100s. Then:
#   rounds N (default 3): N bursts of 16 pods (6 x 1 GPU, 2 GPUs, 4 GPUs, 8 shares of 4 sizes),
#     each followed by deleting half of the live pods; per round: mismatches (container env !=
#     record), GPUs given to two live containers, pods stuck, time from first bind to all Running.
#   one-node K (default 3): K bursts of 16 pods pinned to node-a; time from first bind to all
#     Running.
# Environment: SCHEDULER_CONFIG (default manifests/scheduler-config.yaml of this checkout: use the
# one of the tree the binaries come from), EXTENDER_ARGS and AGENT_ARGS (extra flags, split on
# spaces), KEEP=1 keeps the temporary directory with every log.
# Exit status: 0 all checks passed, 3 a check failed, other: the harness failed (message says).
set -euo pipefail
bin=$(realpath "${1:?K8S_BIN_DIR (kube-apiserver, kube-scheduler, kubelet, gapless-fakecri)}")
gbuild=$(realpath "${2:?GAPLESS_BUILD_DIR (gapless-extender, gapless-agent, fake_nvml/libnvidia-ml.so.1)}")
mode=${3:-rounds}; count=${4:-3}
here=$(cd "$(dirname "$0")" && pwd); repo=$(dirname "$here")
for f in "$bin"/{kube-apiserver,kube-scheduler,kubelet,gapless-fakecri} \
         "$gbuild"/{gapless-extender,gapless-agent,fake_nvml/libnvidia-ml.so.1}; do
  [[ -x $f || -f $f ]] || { echo "kubelet_e2e: missing $f" >&2; exit 2; }
done
command -v etcd >/dev/null || { echo "kubelet_e2e: etcd not found (apt-get install etcd-server)" >&2; exit 2; }
[[ $(id -u) == 0 ]] || { echo "kubelet_e2e: needs root (mount namespaces)" >&2; exit 2; }
case $mode in rounds|one-node) ;; *) echo "kubelet_e2e: mode is rounds or one-node" >&2; exit 2;; esac

dir=$(mktemp -d /tmp/kubelet-e2e.XXXXXX); cd "$dir"
# shellcheck source=kubelet_nodes.sh
. "$here/kubelet_nodes.sh"  # start_group, wait_url, start_kubelet_nodes, stop_kubelet_nodes
cleanup() {
  local rc=$?
  stop_kubelet_nodes
  wait 2>/dev/null || true
  if [[ -n ${KEEP:-} || $rc -ne 0 && $rc -ne 3 ]]; then
    echo "kubelet_e2e: logs kept in $dir" >&2
  else
    rm -rf "$dir"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- control plane (as scripts/kube_throughput.sh) ---------------------------------------------
openssl genrsa -out sa.key 2048 2>/dev/null; openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
echo "e2etoken,admin,admin,system:masters" > tokens.csv
cat > kubeconfig <<K
apiVersion: v1
kind: Config
clusters: [{name: e2e, cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}}]
users: [{name: admin, user: {token: e2etoken}}]
contexts: [{name: e2e, context: {cluster: e2e, user: admin}}]
current-context: e2e
K
start_group etcd etcd --data-dir etcd --listen-client-urls http://127.0.0.1:2379 \
  --advertise-client-urls http://127.0.0.1:2379 --listen-peer-urls http://127.0.0.1:2380
start_group apiserver "$bin/kube-apiserver" --etcd-servers=http://127.0.0.1:2379 \
  --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port=6443 --cert-dir=certs \
  --service-account-issuer=https://kubernetes.default.svc --service-account-key-file=sa.pub \
  --service-account-signing-key-file=sa.key --token-auth-file=tokens.csv \
  --authorization-mode=AlwaysAllow --service-cluster-ip-range=10.96.0.0/16 \
  --disable-admission-plugins=ServiceAccount
wait_url kube-apiserver https://127.0.0.1:6443/readyz 120 -k -H "Authorization: Bearer e2etoken"
curl -sfk -H "Authorization: Bearer e2etoken" -H "Content-Type: application/json" \
  -d '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"gapless-system"}}' \
  https://127.0.0.1:6443/api/v1/namespaces >/dev/null  # where the extender writes its claims
# shellcheck disable=SC2086  # extra flags split on spaces
start_group extender "$gbuild/gapless-extender" --kubeconfig kubeconfig --listen 127.0.0.1:8899 \
  ${EXTENDER_ARGS:-}
wait_url gapless-extender http://127.0.0.1:8899/readyz 60
conn="clientConnection: {kubeconfig: $dir/kubeconfig, qps: 200, burst: 400}"
sed -e "s|^leaderElection:.*|$conn\nleaderElection: {leaderElect: false}|" \
  -e 's|http://127.0.0.1:8888|http://127.0.0.1:8899|' \
  "${SCHEDULER_CONFIG:-$repo/manifests/scheduler-config.yaml}" > scheduler.yaml
start_group scheduler "$bin/kube-scheduler" --config scheduler.yaml --secure-port=0

# ---- nodes --------------------------------------------------------------------------------------
nodes=(node-a node-b)
start_kubelet_nodes "$bin" "$gbuild" "$dir/kubeconfig" "${nodes[@]}"
py="python3 $here/kubelet_e2e.py"

# ---- the checks ---------------------------------------------------------------------------------
echo "gapless binaries: $gbuild ($("$gbuild/gapless-extender" --version)), extender flags:" \
  "${EXTENDER_ARGS:-none}, agent flags: ${AGENT_ARGS:-none}, $("$bin/kubelet" --version)"
records=("$dir/node-a/creates.jsonl" "$dir/node-b/creates.jsonl")
touch "${records[@]}"
if [[ $mode == rounds ]]; then
  $py rounds "$count" "${records[@]}"
else
  $py one-node node-a "$count" "${records[@]}"
fi
