#!/usr/bin/env bash
# Pods per second through a real kube-scheduler, without an extender and with Gapless as its
# extender (README, "Through a real kube-scheduler"). Local only, never in CI: needs etcd
# (Debian's etcd-server), kube-apiserver and kube-scheduler built from a Kubernetes tree, e.g.
#   GOFLAGS="-mod=vendor -p=2" CGO_ENABLED=0 go build -tags providerless ./cmd/kube-apiserver
# and a gapless-extender (scripts/test.sh or scripts/demo.sh build it, Release, in build/).
#
#   scripts/kube_throughput.sh K8S_BIN_DIR build/gapless-extender [NODES] [PODS] [BURSTS]
#   RUNS="defaults full gapless" CONFIGS="a.yaml b.yaml" scripts/kube_throughput.sh ...
#   RUNS="defaults a defaults" CONFIGS=a.yaml ...   # alternating: RUNS may name a CONFIGS label
#                                                   # (it runs there, and once more at the end)
#   EXTENDER_ARGS="--bind-threads 0" scripts/kube_throughput.sh ...   # extra extender flags
#   PINNED=10 [AFFINITY=1] scripts/kube_throughput.sh ...   # pods pinned to a model on every
#                                   # 10th node, [also by node affinity] (kube_throughput.py)
#   TOPOLOGY=1 scripts/kube_throughput.sh ...   # nodes also carry the agent's topology annotation,
#                                   # no Gapless device plugin (kube_throughput.py)
#
# Everything runs on 127.0.0.1 from a temporary directory: etcd, the API server (token auth,
# no admission of service accounts), NODES fake Nodes x 8 GPUs, then kube-scheduler once per run
# in RUNS (default "full gapless"): "defaults", no extender and kube-scheduler's default
# configuration (adaptive percentageOfNodesToScore); "full", no extender and
# percentageOfNodesToScore: 100; "gapless", manifests/scheduler-config.yaml pointing at
# gapless-extender. Each file in CONFIGS is a further run with Gapless (a variant of the shipped
# configuration; its extender urlPrefix is pointed at the test's extender), labelled by its name.
# kube-scheduler's own metrics are scraped after each run (its extension point durations), and
# the API server's apiserver_request_total before and after it: requests per pod bound, by verb
# and resource (the pod creator's create/list/delete of pods included; watches count once).
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
plain() {  # [percentage line]
  printf '%s\n' "apiVersion: kubescheduler.config.k8s.io/v1" "kind: KubeSchedulerConfiguration" \
    "$conn" "leaderElection: {leaderElect: false}" "$@" \
    "profiles: [{schedulerName: gapless-scheduler}]"
}
plain > defaults.yaml
plain "percentageOfNodesToScore: 100" > full.yaml
with_gapless() {  # config file
  sed -e "s|^leaderElection:.*|$conn\nleaderElection: {leaderElect: false}|" \
    -e 's|http://127.0.0.1:8888|http://127.0.0.1:8899|' "$1"
}
with_gapless "$repo/manifests/scheduler-config.yaml" > gapless.yaml
runs=(${RUNS:-full gapless})
for c in ${CONFIGS:-}; do
  label=$(basename "$c" .yaml); with_gapless "$c" > "$label.yaml"; runs+=("$label")
done
api_requests() {  # "verb resource[/subresource] count" per line, summed over codes and groups
  curl -sk -H "Authorization: Bearer e2etoken" https://127.0.0.1:6443/metrics |
    awk '/^apiserver_request_total\{/ {
      v = r = s = ""
      if (match($0, /verb="[A-Z]+"/)) v = substr($0, RSTART + 6, RLENGTH - 7)
      if (match($0, /[{,]resource="[a-z.]*"/)) r = substr($0, RSTART + 11, RLENGTH - 12)
      if (match($0, /subresource="[a-z]*"/)) s = substr($0, RSTART + 13, RLENGTH - 14)
      if (s != "") r = r "/" s
      n[v " " r] += $NF } END { for (k in n) print k, n[k] }'
}
extender_started=
run() {  # label: config file $label.yaml
  if [ -z "$extender_started" ] && grep -q '^extenders:' "$1.yaml"; then
    # shellcheck disable=SC2086  # EXTENDER_ARGS: words, as on a command line
    "$ext" --kubeconfig kubeconfig --listen 127.0.0.1:8899 ${EXTENDER_ARGS:-} > extender.log 2>&1 &
    pids+=($!)
    until curl -sf 127.0.0.1:8899/readyz >/dev/null; do sleep 1; done
    extender_started=1
  fi
  "$bin/kube-scheduler" --config "$1.yaml" --secure-port=10259 --bind-address=127.0.0.1 \
    --cert-dir="$dir/scheduler-certs" --authorization-always-allow-paths=/healthz,/metrics \
    > "$1.log" 2>&1 & local s=$!
  sleep 5
  api_requests > "$1.api-before"
  $py bursts "$pods" "$bursts" "$1"
  api_requests > "$1.api-after"
  # API requests per pod bound during the bursts (those above 0.05 per pod).
  awk -v l="$1" -v pods=$((pods * bursts)) 'NR == FNR { b[$1 " " $2] = $3; next }
    { d = ($3 - b[$1 " " $2]) / pods; if (d >= 0.05) s = s sprintf(" %s %s=%.2f", $1, $2, d) }
    END { print l ": API requests per pod bound:" s }' "$1.api-before" "$1.api-after"
  # Where kube-scheduler's time went: seconds summed per extension point over the run.
  curl -sk https://127.0.0.1:10259/metrics 2>/dev/null |
    awk -v l="$1" '/^scheduler_framework_extension_point_duration_seconds_sum/ {
      match($0, /extension_point="[A-Za-z]+"/); p = substr($0, RSTART + 17, RLENGTH - 18)
      t[p] += $2 } END { s = l ": kube-scheduler seconds per extension point:"
      for (p in t) s = s " " p "=" sprintf("%.2f", t[p]); print s }'
  if [ -n "$extender_started" ]; then  # nodes the extender's filter turned down so far, by reason
    curl -s 127.0.0.1:8899/metrics | sed -n "s/^gapless_filter_rejections_total/$1: &/p"
  fi
  kill $s; wait $s 2>/dev/null || true
}
for r in "${runs[@]}"; do run "$r"; done
if [ -n "$extender_started" ]; then
  curl -s 127.0.0.1:8899/metrics |
    grep -E '^gapless_extender_request_duration_seconds_(sum|count)|^gapless_bind_phase_seconds_(sum|count)|^gapless_pairing_(waits|expired)_total'
fi
