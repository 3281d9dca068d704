#!/usr/bin/env bash
# The admission webhook against a real API server (docs/admission-webhook.md "Checked against a
# real API server"). Local only, never in CI: needs etcd (Debian's etcd-server), kube-apiserver
# from a Kubernetes tree, kubectl and openssl.
#   scripts/webhook_e2e.sh /work/k8s-bin-v build/gapless-extender
# Runs on 127.0.0.1 from a temporary directory (ports 23790-23791 etcd, 16443 the API server,
# 19443 the webhook, 18899 the extender's verbs): two fake GPU nodes (Tesla-T4,
# NVIDIA-H100-80GB-HBM3), the extender watching them with --webhook-listen and a certificate
# made here, both webhook configurations registered with that CA as caBundle; then creates a
# pod with a bad Gapless annotation (must be refused, the message naming the field) and a pod
# pinned with gapless.io/gpu-models (must come back with the node affinity).
set -euo pipefail
bin=${1:?kube binaries dir}; ext=$(realpath "${2:?gapless-extender}")
dir=$(mktemp -d); cd "$dir"
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
api=https://127.0.0.1:16443
openssl genrsa -out sa.key 2048 2>/dev/null; openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
echo "e2etoken,admin,admin,system:masters" > tokens.csv
cat > kubeconfig <<K
apiVersion: v1
kind: Config
clusters: [{name: e2e, cluster: {server: "$api", insecure-skip-tls-verify: true}}]
users: [{name: admin, user: {token: e2etoken}}]
contexts: [{name: e2e, context: {cluster: e2e, user: admin}}]
current-context: e2e
K
export KUBECONFIG=$dir/kubeconfig
# The webhook's certificate: a CA and a serving certificate for 127.0.0.1.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.crt \
  -days 1 -subj /CN=webhook-e2e-ca 2>/dev/null
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout tls.key -out tls.csr \
  -subj /CN=127.0.0.1 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' > ext.cnf
openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -set_serial 1 -days 1 -extfile ext.cnf \
  -out tls.crt 2>/dev/null
etcd --data-dir etcd --listen-client-urls http://127.0.0.1:23790 \
  --advertise-client-urls http://127.0.0.1:23790 --listen-peer-urls http://127.0.0.1:23791 \
  > etcd.log 2>&1 & pids+=($!)
"$bin/kube-apiserver" --etcd-servers=http://127.0.0.1:23790 --bind-address=127.0.0.1 \
  --advertise-address=127.0.0.1 --secure-port=16443 --cert-dir=certs \
  --service-account-issuer=https://kubernetes.default.svc --service-account-key-file=sa.pub \
  --service-account-signing-key-file=sa.key --token-auth-file=tokens.csv \
  --authorization-mode=AlwaysAllow --service-cluster-ip-range=10.96.0.0/16 \
  --disable-admission-plugins=ServiceAccount > apiserver.log 2>&1 & pids+=($!)
until kubectl get --raw /readyz >/dev/null 2>&1; do sleep 1; done
echo "== API server $(kubectl version -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["serverVersion"]["gitVersion"])')"
node() {  # name product
  kubectl create -f - >/dev/null <<N
{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "$1", "labels":
 {"kubernetes.io/hostname": "$1", "nvidia.com/gpu.product": "$2", "nvidia.com/gpu.count": "8",
  "nvidia.com/gpu.memory": "81559"}}}
N
  kubectl patch node "$1" --subresource=status --type=merge -p \
    '{"status":{"capacity":{"nvidia.com/gpu":"8","pods":"110"},"allocatable":{"nvidia.com/gpu":"8","pods":"110"}}}' >/dev/null
}
node node-t4 Tesla-T4
node node-h100 NVIDIA-H100-80GB-HBM3
kubectl create namespace gapless-system >/dev/null
"$ext" --kubeconfig kubeconfig --listen 127.0.0.1:18899 --scheduler-name gapless-scheduler \
  --webhook-listen 127.0.0.1:19443 --webhook-tls-cert tls.crt --webhook-tls-key tls.key \
  > extender.log 2>&1 & pids+=($!)
until curl -sf --cacert ca.crt https://127.0.0.1:19443/readyz >/dev/null; do sleep 1; done
ca=$(base64 -w0 ca.crt)
for kind in Mutating Validating; do
  path=$([ $kind = Mutating ] && echo mutate || echo validate)
  kubectl apply -f - <<W
apiVersion: admissionregistration.k8s.io/v1
kind: ${kind}WebhookConfiguration
metadata: {name: gapless}
webhooks:
- name: $([ $kind = Mutating ] && echo pin || echo check).gapless.io
  clientConfig: {url: "https://127.0.0.1:19443/$path", caBundle: "$ca"}
  rules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods], scope: Namespaced}]
  failurePolicy: Ignore
  timeoutSeconds: 5
  sideEffects: None
  admissionReviewVersions: [v1]
  namespaceSelector:
    matchExpressions:
    - {key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system, gapless-system, gapless-node]}
W
done
sleep 2  # the API server picks up new webhook configurations asynchronously
pod() {  # name annotations-json limits-json
  cat <<P
{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "$1", "annotations": $2},
 "spec": {"schedulerName": "gapless-scheduler",
  "containers": [{"name": "main", "image": "busybox", "resources": {"limits": $3}}]}}
P
}
echo "== a pod with a bad Gapless annotation"
set +e
pod bad '{"gapless.io/topology": "sometimes"}' '{"nvidia.com/gpu": "2"}' > bad.json
echo "\$ kubectl apply -f bad.json"; kubectl apply -f bad.json; echo "exit $?"
pod typo '{"gapless.io/gpu-model": "Tesla-T4"}' '{"nvidia.com/gpu": "1"}' > typo.json
echo "\$ kubectl apply -f typo.json"; kubectl apply -f typo.json; echo "exit $?"
pod nomodel '{"gapless.io/gpu-models": "B200"}' '{"nvidia.com/gpu": "1"}' > nomodel.json
echo "\$ kubectl apply -f nomodel.json"; kubectl apply -f nomodel.json; echo "exit $?"
pod nomig '{}' '{"nvidia.com/mig-3g.40gb": "1"}' > nomig.json
echo "\$ kubectl apply -f nomig.json"; kubectl apply -f nomig.json; echo "exit $?"
set -e
echo "== a pinned pod"
pod pinned '{"gapless.io/gpu-models": "tesla-t4"}' '{"nvidia.com/gpu": "1"}' > pinned.json
echo "\$ kubectl apply -f pinned.json"; kubectl apply -f pinned.json
echo "\$ kubectl get pod pinned -o jsonpath='{.spec.affinity}'"
kubectl get pod pinned -o jsonpath='{.spec.affinity}'; echo
echo "== the same manifest applied again: the pin stays (kubectl's patch does not remove it)"
kubectl apply -f pinned.json
echo "== a pinned pod with its own required affinity: the pin is ANDed into each term"
python3 - pinned.json > zoned.json <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["metadata"]["name"] = "zoned"
p["metadata"]["annotations"]["gapless.io/gpu-models"] = "TESLA-T4,nvidia-h100-80gb-hbm3"
term = lambda z: {"matchExpressions": [{"key": "zone", "operator": "In", "values": [z]}]}
p["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                                          {"nodeSelectorTerms": [term("a"), term("b")]}}}
print(json.dumps(p))
PY
kubectl apply -f zoned.json
echo "\$ kubectl get pod zoned -o jsonpath='{.spec.affinity}'"
kubectl get pod zoned -o jsonpath='{.spec.affinity}'; echo
echo "== extender log (webhook lines)"
grep -i webhook extender.log || true
