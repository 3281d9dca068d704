#!/usr/bin/env bash
# Pods per second through a real kube-scheduler, without an extender and with Gapless as its
# extender (README, "Through a real kube-scheduler"). Local only, never in CI: needs etcd
# (Debian's etcd-server), kube-apiserver and kube-scheduler built from a Kubernetes tree, e.g.
#   GOFLAGS="-mod=vendor -p=2" CGO_ENABLED=0 go build -tags providerless ./cmd/kube-apiserver
# and a Release gapless-extender.
#
#   scripts/kube_throughput.sh K8S_BIN_DIR build-rel/gapless-extender [NODES] [PODS] [BURSTS]
#
# Everything runs on 127.0.0.1 from a temporary directory: etcd, the API server (token auth,
# no admission of service accounts), NODES fake Nodes x 8 GPUs, then kube-scheduler twice: with
# no extender, and with manifests/scheduler-config.yaml pointing at gapless-extender.
set -euo pipefail
bin=${1:?kube binaries dir}; ext=${2:?gapless-extender}; nodes=${3:-1000}; pods=${4:-200}
bursts=${5:-4}
here=$(cd "$(dirname "$0")" && pwd); repo=$(dirname "$here")
ext=$(realpath "$ext")
dir=$(mktemp -d); cd "$dir"
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
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
etcd --data-dir etcd --listen-client-urls http://127.0.0.1:2379 \
  --advertise-client-urls http://127.0.0.1:2379 --listen-peer-urls http://127.0.0.1:2380 \
  > etcd.log 2>&1 & pids+=($!)
"$bin/kube-apiserver" --etcd-servers=http://127.0.0.1:2379 --bind-address=127.0.0.1 \
  --advertise-address=127.0.0.1 --secure-port=6443 --cert-dir=certs \
  --service-account-issuer=https://kubernetes.default.svc --service-account-key-file=sa.pub \
  --service-account-signing-key-file=sa.key --token-auth-file=tokens.csv \
  --authorization-mode=AlwaysAllow --service-cluster-ip-range=10.96.0.0/16 \
  --disable-admission-plugins=ServiceAccount > apiserver.log 2>&1 & pids+=($!)
until curl -skf -H "Authorization: Bearer e2etoken" https://127.0.0.1:6443/readyz >/dev/null; do
  sleep 1
done
py="python3 $here/kube_throughput.py"
$py nodes "$nodes"
curl -sk -H "Authorization: Bearer e2etoken" -H "Content-Type: application/json" \
  -d '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"gapless-system"}}' \
  https://127.0.0.1:6443/api/v1/namespaces >/dev/null  # where the extender writes its claims
conn="clientConnection: {kubeconfig: $dir/kubeconfig, qps: 200, burst: 400}"
printf '%s\n' "apiVersion: kubescheduler.config.k8s.io/v1" "kind: KubeSchedulerConfiguration" \
  "$conn" "leaderElection: {leaderElect: false}" "percentageOfNodesToScore: 100" \
  "profiles: [{schedulerName: gapless-scheduler}]" > none.yaml
sed -e "s|^leaderElection:.*|$conn\nleaderElection: {leaderElect: false}|" \
  -e 's|http://127.0.0.1:8888|http://127.0.0.1:8899|' \
  "$repo/manifests/scheduler-config.yaml" > gapless.yaml
run() {  # label config
  "$bin/kube-scheduler" --config "$2" --secure-port=0 > "$1.log" 2>&1 & local s=$!
  sleep 5
  $py bursts "$pods" "$bursts" "$1"
  kill $s; wait $s 2>/dev/null || true
}
run none none.yaml
"$ext" --kubeconfig kubeconfig --listen 127.0.0.1:8899 > extender.log 2>&1 & pids+=($!)
until curl -sf 127.0.0.1:8899/readyz >/dev/null; do sleep 1; done
run gapless gapless.yaml
curl -s 127.0.0.1:8899/metrics | grep -E '^gapless_extender_request_duration_seconds_(sum|count)'
