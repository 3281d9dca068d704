# shellcheck shell=bash disable=SC2154  # dir, pids: the caller's
# A local Kubernetes control plane for the local checks (scripts/agent_policy_check.sh,
# scripts/bind_trust_check.sh): etcd and kube-apiserver on 127.0.0.1 ports the kernel picks,
# --authorization-mode=Node,RBAC with NodeRestriction, an admin token, no kubelet. Sourced, not
# run; the caller has cd'ed into its temporary directory $dir, keeps the pids to stop in the
# array pids and defines die MESSAGE.
#
#   start_control_plane K8S_BIN_DIR [extra kube-apiserver flags...]
#
# stop_local_cluster NAME is the caller's EXIT trap (stops pids newest first, removes $dir
# unless KEEP=1).
#
# Sets api (its URL), writes admin.kubeconfig and defines kc FILE TOKEN (a kubeconfig for a
# token), admin (kubectl as system:masters) and apply_manifests DIR. Returns once /readyz
# answers.

stop_local_cluster() {  # NAME: the EXIT trap of a check; stops what it started, newest first
  # Newest first: a kube-apiserver whose etcd is gone takes a minute to stop.
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    kill "${pids[i]}" 2>/dev/null || true; wait "${pids[i]}" 2>/dev/null || true
  done
  if [[ ${KEEP:-} == 1 ]]; then echo "$1: logs in $dir" >&2; else rm -rf "$dir"; fi
}

kc() {  # kubeconfig FILE TOKEN
  printf '%s\n' "apiVersion: v1" "kind: Config" \
    "clusters: [{name: c, cluster: {server: \"$api\", insecure-skip-tls-verify: true}}]" \
    "users: [{name: u, user: {token: \"$2\"}}]" \
    "contexts: [{name: c, context: {cluster: c, user: u}}]" "current-context: c" > "$1"
}
admin() { kubectl --kubeconfig "$dir/admin.kubeconfig" "$@"; }

# kubectl apply -k DIR, as users install it (manifests/ holds no cert-manager objects: the
# admission webhook is the opt-in Component manifests/webhook/). Output in apply.log.
apply_manifests() {
  admin apply -k "$1" > apply.log 2>&1
}

free_ports() {  # N: N free TCP ports on 127.0.0.1, one line
  python3 -c '
import socket, sys
s = [socket.socket() for _ in range(int(sys.argv[1]))]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])' "$1"
}

start_control_plane() {
  local bin=$1; shift
  local etcd_port peer_port api_port
  read -r etcd_port peer_port api_port < <(free_ports 3)
  api=https://127.0.0.1:$api_port
  openssl genrsa -out sa.key 2048 2>/dev/null; openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  echo "admintoken,admin,admin,system:masters" > tokens.csv
  kc admin.kubeconfig admintoken
  etcd --data-dir etcd --listen-client-urls "http://127.0.0.1:$etcd_port" \
    --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-cluster "default=http://127.0.0.1:$peer_port" > etcd.log 2>&1 & pids+=($!)
  "$bin/kube-apiserver" --etcd-servers="http://127.0.0.1:$etcd_port" --bind-address=127.0.0.1 \
    --advertise-address=127.0.0.1 --secure-port="$api_port" --cert-dir=certs \
    --service-account-issuer=https://kubernetes.default.svc --service-account-key-file=sa.pub \
    --service-account-signing-key-file=sa.key --token-auth-file=tokens.csv \
    --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
    --service-cluster-ip-range=10.96.0.0/16 "$@" > apiserver.log 2>&1 & pids+=($!)
  for _ in $(seq 120); do
    curl -skf -H "Authorization: Bearer admintoken" "$api/readyz" >/dev/null 2>&1 && return 0
    sleep 1
  done
  die "kube-apiserver did not become ready (KEEP=1 keeps apiserver.log)"
}
