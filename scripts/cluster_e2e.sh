#!/usr/bin/env bash
# Gapless installed as users install it, on a real control plane and real nodes running real
# containers (issue 37, docs/cluster-e2e.md). Local only, never in CI; run as root.
#
#   scripts/cluster_e2e.sh [K8S_TREE]          (or K8S_TREE=... in the environment)
#
# K8S_TREE is a Kubernetes v1.26 tree with vendor/ (docs/cluster-e2e.md names the one used).
# From it and this checkout the script
#   - builds kube-apiserver, kube-controller-manager, kube-scheduler and kubelet (once, into
#     $E2E_CACHE/k8s-bin, or takes them from K8S_BIN), the pause image (build/pause/linux/pause.c)
#     and a kube-scheduler image from the tree's binary;
#   - builds the image from the repository's Dockerfile with podman (base image from debootstrap,
#     no registry), and tags the same base image e2e.local/shell:1 for the test pods;
#   - starts etcd, kube-apiserver (Node,RBAC, default admission plugins), kube-controller-manager
#     and the default kube-scheduler; and NODES (default 2) nodes: containerd + runc + a CNI
#     bridge and a kubelet with its own node identity, in a private mount namespace each;
#   - applies tests/e2e/overlay (manifests/ with local image names, pull policy Never and the fake
#     NVML in place of the NVIDIA container runtime) with `kubectl apply -k`;
#   - runs the checks of scripts/cluster_e2e.py, one line each.
# Network: only 127.0.0.1, a veth pair with /32 addresses from 10.213.0.0/24 (.100 the
# API server, .1/.2 the nodes) and the nodes' CNI bridges (10.214.N.0/24). Nothing else.
# Environment: K8S_BIN (prebuilt binaries), E2E_CACHE (default /var/tmp/gapless-e2e: images and
# binaries kept between runs), NODES (1 or 2), JOBS (the Dockerfile's build-arg, default 2),
# OVERLAY (another kustomization to apply, for diagnosis only), SKIP_IMAGE_BUILD=1 (reuse the last
# image), IMAGES_ONLY=1 (build, then stop), KEEP=1 (keep the logs).
# Exit status: 0 all checks passed, 3 a check failed, other: the harness failed (message says).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd); repo=$(dirname "$here"); self="$here/$(basename "$0")"
net=10.213.0 pods=10.214 api_ip=10.213.0.100 svc_ip=10.96.0.1 veth=gle2e0

if [[ ${1:-} == __node ]]; then  # inside `unshare -m`: one node's mounts, containerd and kubelet
  shift; node=$1 nd=$2 bin=$3 images=$4
  mount --make-rprivate /
  mount --bind "$nd/kubelet" /var/lib/kubelet
  mount --bind "$nd/logs/pods" /var/log/pods
  mount --bind "$nd/logs/containers" /var/log/containers
  mount --bind "$nd/nvml" /var/lib/gapless-e2e/nvml
  mount -t tmpfs tmpfs /run/containerd
  mount -t tmpfs tmpfs /run/netns
  for kv in vm/overcommit_memory=1 vm/panic_on_oom=0 kernel/panic=10 kernel/panic_on_oops=1 \
            kernel/keys/root_maxkeys=1000000 kernel/keys/root_maxbytes=25000000; do
    f="$nd/sysctl/${kv%%=*}"; mkdir -p "$(dirname "$f")"; echo "${kv#*=}" > "$f"
    mount --bind "$f" "/proc/sys/${kv%%=*}"
  done
  containerd --config "$nd/containerd.toml" > "$nd/containerd.log" 2>&1 &
  for _ in $(seq 300); do [[ -S $nd/containerd.sock ]] && break; sleep 0.1; done
  [[ -S $nd/containerd.sock ]] || { echo "$node: containerd did not start" >&2; exit 1; }
  ctr --address "$nd/containerd.sock" -n k8s.io images import "$images" > "$nd/import.log" 2>&1
  cd "$nd/work"
  exec "$bin/kubelet" --config "$nd/kubelet.yaml" --kubeconfig "$nd/kubelet.kubeconfig" \
    --container-runtime-endpoint "unix://$nd/containerd.sock" \
    --pod-infra-container-image e2e.local/pause:3.9 --root-dir /var/lib/kubelet \
    --cert-dir "$nd/pki" --hostname-override "$node" --node-ip "$5" --v=2 > "$nd/kubelet.log" 2>&1
fi

say() { echo "cluster_e2e: $*" >&2; }
die() { say "$*"; exit 2; }
tree=${1:-${K8S_TREE:-}}
cache=${E2E_CACHE:-/var/tmp/gapless-e2e}; nodes_n=${NODES:-2}
[[ $(id -u) == 0 ]] || die "needs root (mount namespaces, cgroups, a veth pair)"
for c in etcd podman containerd ctr runc debootstrap gcc openssl iptables ip kubectl python3 cmake; do
  command -v "$c" >/dev/null || die "$c not found (docs/cluster-e2e.md: prerequisites)"
done
[[ -x /usr/lib/cni/bridge ]] || die "/usr/lib/cni/bridge missing (containernetworking-plugins)"
[[ $nodes_n == 1 || $nodes_n == 2 ]] || die "NODES is 1 or 2"
if ip -o addr | grep -q " $net\.\| $pods\." || ip route | grep -q "^$net\.\|^$pods\."; then
  die "$net.0/24 or $pods.0.0/16 is in use on this machine: this script only uses unused ranges"
fi
for l in gle2e0 gle2e1 gle2e-a gle2e-b; do
  ! ip link show "$l" >/dev/null 2>&1 || die "network interface $l exists: another run? (ip link del $l)"
done
! iptables -t nat -S GAPLESS-E2E >/dev/null 2>&1 || die "iptables nat chain GAPLESS-E2E exists: another run?"
mkdir -p "$cache"; cache=$(realpath "$cache")
t_start=$(date +%s)
elapsed() { echo $(($(date +%s) - $1)); }

# ---- binaries and images (kept in $E2E_CACHE between runs) --------------------------------------
kbin=${K8S_BIN:-$cache/k8s-bin}; mkdir -p "$kbin"; kbin=$(realpath "$kbin")
want_tag=$(awk '/name: registry.k8s.io\/kube-scheduler/{f=1} f&&/newTag:/{print $2; exit}' \
  "$repo/tests/e2e/overlay/kustomization.yaml")
[[ -z ${OVERLAY:-} ]] || say "OVERLAY=$OVERLAY instead of tests/e2e/overlay: not the shipped manifests"
for n in kube-apiserver kube-controller-manager kube-scheduler kubelet; do
  [[ -x $kbin/$n ]] && continue
  [[ -d $tree/vendor ]] || die "$kbin/$n missing and no Kubernetes tree with vendor/ given"
  command -v go >/dev/null || die "go not found (apt-get install golang-go)"
  # A plain `go build` stamps v0.0.0-master; the release is the newest entry of the tree's
  # CHANGELOG (hack/lib/version.sh would take it from git tags, which a snapshot lacks).
  ver=${K8S_VERSION:-$(sed -n 's/^# \(v[0-9]*\.[0-9]*\.[0-9]*\)$/\1/p' "$tree"/CHANGELOG/CHANGELOG-*.md |
    sort -V | tail -1)}
  minor=${ver#v*.}; minor=${minor%%.*}; t=$(date +%s) v=k8s.io/component-base/version
  ld="-X $v.gitVersion=$ver -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean"
  (cd "$tree" && GOFLAGS="-mod=vendor -p=2" CGO_ENABLED=0 nice -n 19 \
     go build -tags providerless -ldflags "$ld" -o "$kbin/$n" "./cmd/$n")
  say "built $n $ver in $(elapsed "$t") s"
done
k8s_version=$("$kbin/kube-scheduler" --version | awk '{print $2}')
[[ $k8s_version == "$want_tag" ]] ||
  die "kube-scheduler is $k8s_version, tests/e2e/overlay names $want_tag: change the overlay's tag"

export CONTAINERS_CONF="$cache/containers.conf" CONTAINERS_STORAGE_CONF="$cache/storage.conf"
cat > "$CONTAINERS_CONF" <<EOF
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]  # no CAP_SYS_RESOURCE in the VM
[engine]
runtime = "runc"             # crun refuses the hybrid cgroup layout
cgroup_manager = "cgroupfs"  # no systemd
EOF
cat > "$CONTAINERS_STORAGE_CONF" <<EOF
[storage]
driver = "overlay"
graphroot = "$cache/podman/storage"
runroot = "$cache/podman/run"
EOF
has_image() { podman image exists "$1"; }
if ! has_image docker.io/library/debian:bookworm-slim; then  # the base image, from Debian's mirror
  mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/*.sources)
  rootfs="$cache/rootfs"; rm -rf "$rootfs"; t=$(date +%s)
  nice -n 19 debootstrap --variant=minbase bookworm "$rootfs" "$mirror" > "$cache/debootstrap.log"
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* "$rootfs"/usr/share/doc/* \
    "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/var/log/*.log
  find "$rootfs"/usr/share/locale -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
  rm -f "$rootfs/etc/apt/sources.list"; cp /etc/apt/sources.list.d/*.sources "$rootfs/etc/apt/sources.list.d/"
  tar -C "$rootfs" -c . | podman import --change 'CMD ["bash"]' - docker.io/library/debian:bookworm-slim >/dev/null
  podman tag docker.io/library/debian:bookworm-slim docker.io/library/debian:bookworm
  rm -rf "$rootfs"; say "base image from debootstrap in $(elapsed "$t") s"
fi
podman tag docker.io/library/debian:bookworm-slim e2e.local/shell:1
if ! has_image e2e.local/pause:3.9; then
  [[ -f $tree/build/pause/linux/pause.c ]] || die "no pause image and no Kubernetes tree given"
  pb="$cache/pause-build"; mkdir -p "$pb"
  gcc -Os -static -o "$pb/pause" "$tree/build/pause/linux/pause.c"
  printf 'FROM scratch\nCOPY pause /pause\nENTRYPOINT ["/pause"]\n' > "$pb/Containerfile"
  podman build -q -t e2e.local/pause:3.9 "$pb" >/dev/null
fi
sb="$cache/kube-scheduler-build"; mkdir -p "$sb"; cp "$kbin/kube-scheduler" "$sb/"
printf 'FROM scratch\nCOPY kube-scheduler /usr/local/bin/kube-scheduler\n' > "$sb/Containerfile"
podman build -q -t "e2e.local/kube-scheduler:$want_tag" "$sb" >/dev/null
if [[ -z ${SKIP_IMAGE_BUILD:-} ]] || ! has_image e2e.local/gapless-extender:e2e; then
  t=$(date +%s)
  nice -n 19 podman build --network=host --build-arg "JOBS=${JOBS:-2}" \
    -t e2e.local/gapless-extender:e2e "$repo" > "$cache/image-build.log" 2>&1 ||
    { tail -20 "$cache/image-build.log" >&2; die "podman build failed (log: $cache/image-build.log)"; }
  image_build_s=$(elapsed "$t")
fi
image_size=$(podman image inspect e2e.local/gapless-extender:e2e --format '{{.Size}}')
images_tar="$cache/images.tar"; rm -f "$images_tar"
podman save -q -m -o "$images_tar" e2e.local/gapless-extender:e2e "e2e.local/kube-scheduler:$want_tag" \
  e2e.local/pause:3.9 e2e.local/shell:1
mkdir -p "$cache/bin"; cid=$(podman create e2e.local/gapless-extender:e2e)  # kubectl gapless
podman cp "$cid:/usr/local/bin/kubectl-gapless" "$cache/bin/" || say "no kubectl-gapless in the image"
podman rm "$cid" >/dev/null
export PATH="$cache/bin:$PATH"
gbuild="$repo/build"
[[ -f $gbuild/CMakeCache.txt ]] || cmake -S "$repo" -B "$gbuild" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$gbuild" -j2 --target fake_nvml >/dev/null  # the fake NVML of this checkout
say "images ready after $(elapsed "$t_start") s (Dockerfile build: ${image_build_s:-cached} s)"
[[ -z ${IMAGES_ONLY:-} ]] || exit 0

# ---- everything below is undone on exit -------------------------------------------------------
dir=$(mktemp -d /tmp/cluster-e2e.XXXXXX); cd "$dir"
pids=() made=() cgroups=() nodes=()
forward_before=$(cat /proc/sys/net/ipv4/ip_forward)
chains() {  # user-defined chains, per table
  iptables-save 2>/dev/null | awk '/^\*/{t=$1} /^:/ && $1 !~ /^:(INPUT|OUTPUT|FORWARD|PREROUTING|POSTROUTING)$/{print t, $1}' | sort
}
chains_before=$(chains)
cleanup() {
  local rc=$?
  trap - EXIT
  for p in "${pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 -- "-$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$p" 2>/dev/null || true
  done
  local cg pid
  for cg in "${cgroups[@]}"; do  # the containers: every process in the nodes' cgroups
    for pid in $(find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null); do
      kill -KILL "$pid" 2>/dev/null || true
    done
  done
  for n in "${nodes[@]}"; do  # containerd's shims (their own sessions), found by our socket path
    for pid in $(grep -l -a -F -- "$dir/$n/containerd.sock" /proc/[0-9]*/cmdline 2>/dev/null |
                 cut -d/ -f3); do
      kill -KILL "$pid" 2>/dev/null || true
    done
  done
  wait 2>/dev/null || true
  for cg in "${cgroups[@]}"; do
    for _ in $(seq 50); do
      find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null || true
      [[ -d $cg ]] || break; sleep 0.1
    done
  done
  iptables -t nat -D PREROUTING -j GAPLESS-E2E 2>/dev/null || true
  iptables -t nat -D OUTPUT -j GAPLESS-E2E 2>/dev/null || true
  iptables -t nat -F GAPLESS-E2E 2>/dev/null && iptables -t nat -X GAPLESS-E2E 2>/dev/null || true
  for n in "${nodes[@]}"; do ip link del "gle2e-${n: -1}" 2>/dev/null || true; done
  ip link del "$veth" 2>/dev/null || true
  echo "$forward_before" > /proc/sys/net/ipv4/ip_forward
  local left; left=$(comm -13 <(echo "$chains_before") <(chains) | tr '\n' ' ')
  [[ -z $left ]] || say "iptables chains left behind: $left"
  for ((i = ${#made[@]} - 1; i >= 0; i--)); do rmdir "${made[i]}" 2>/dev/null || true; done
  if [[ -n ${KEEP:-} || $rc -ne 0 ]]; then say "logs kept in $dir"; else rm -rf "$dir"; fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM
start() {  # log-name command...: runs it in its own process group
  local log=$1; shift
  setsid "$@" > "$dir/$log.log" 2>&1 & pids+=($!)
}
wait_url() {  # what url seconds [curl args...]
  local what=$1 url=$2 secs=$3; shift 3
  for _ in $(seq $((secs * 2))); do curl -sf "$@" "$url" >/dev/null 2>&1 && return 0; sleep 0.5; done
  die "$what not up after $secs s (logs in $dir)"
}
mkpoint() { [[ -e $1 ]] || { mkdir -p "$1"; made+=("$1"); }; }
mkpoint /var/lib/kubelet; mkpoint /var/log/pods; mkpoint /var/log/containers
mkpoint /var/lib/gapless-e2e; mkpoint /var/lib/gapless-e2e/nvml; mkpoint /run/containerd
mkpoint /run/netns

# ---- network: a veth pair holding the API server's and the nodes' /32 addresses ----------------
ip link add "$veth" type veth peer name "${veth%0}1"
ip addr add "$api_ip/32" dev "$veth"
for i in $(seq "$nodes_n"); do ip addr add "$net.$i/32" dev "$veth"; done
ip link set "$veth" up; ip link set "${veth%0}1" up
# No kube-proxy: the `kubernetes` Service IP reaches the API server through this DNAT only.
iptables -t nat -N GAPLESS-E2E
iptables -t nat -A GAPLESS-E2E -d "$svc_ip/32" -p tcp --dport 443 -j DNAT --to-destination "$api_ip:6443"
iptables -t nat -A PREROUTING -j GAPLESS-E2E; iptables -t nat -A OUTPUT -j GAPLESS-E2E

# ---- PKI ------------------------------------------------------------------------------------------
mkdir pki; cd pki
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj /CN=e2e-ca 2>/dev/null
cert() {  # name subject [subjectAltName]
  openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
  printf 'extendedKeyUsage=clientAuth,serverAuth\n%s\n' "${3:+subjectAltName=$3}" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
    -extfile "$1.ext" -out "$1.crt" 2>/dev/null
}
cert apiserver /CN=kube-apiserver \
  "IP:$api_ip,IP:$svc_ip,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
cert admin "/O=system:masters/CN=e2e-admin"
cert front-proxy-client /CN=front-proxy-client  # the aggregation layer's identity, as kubeadm sets it up
cert controller-manager /CN=system:kube-controller-manager
cert scheduler /CN=system:kube-scheduler
openssl genrsa -out sa.key 2048 2>/dev/null; openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
cd "$dir"
kubeconfig() {  # file cert-name
  cat > "$1" <<K
apiVersion: v1
kind: Config
clusters: [{name: e2e, cluster: {server: "https://$api_ip:6443", certificate-authority: $dir/pki/ca.crt}}]
users: [{name: u, user: {client-certificate: $dir/pki/$2.crt, client-key: $dir/pki/$2.key}}]
contexts: [{name: e2e, context: {cluster: e2e, user: u}}]
current-context: e2e
K
}
kubeconfig admin.kubeconfig admin; kubeconfig kcm.kubeconfig controller-manager
kubeconfig scheduler.kubeconfig scheduler

# ---- control plane --------------------------------------------------------------------------------
cat > audit-policy.yaml <<A
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules: [{level: Metadata}]   # who did what, and the answer's code: the 403 and RBAC checks read it
A
t=$(date +%s)
start etcd etcd --data-dir etcd --listen-client-urls http://127.0.0.1:23790 \
  --advertise-client-urls http://127.0.0.1:23790 --listen-peer-urls http://127.0.0.1:23800
start kube-apiserver "$kbin/kube-apiserver" --etcd-servers=http://127.0.0.1:23790 \
  --bind-address="$api_ip" --advertise-address="$api_ip" --secure-port=6443 \
  --tls-cert-file=pki/apiserver.crt --tls-private-key-file=pki/apiserver.key \
  --client-ca-file=pki/ca.crt --kubelet-client-certificate=pki/apiserver-kubelet-client.crt \
  --kubelet-client-key=pki/apiserver-kubelet-client.key \
  --kubelet-preferred-address-types=InternalIP --service-account-issuer=https://kubernetes.default.svc \
  --service-account-key-file=pki/sa.pub --service-account-signing-key-file=pki/sa.key \
  --authorization-mode=Node,RBAC --service-cluster-ip-range=10.96.0.0/16 \
  --audit-policy-file=audit-policy.yaml --audit-log-path=audit.log \
  --requestheader-client-ca-file=pki/ca.crt --requestheader-allowed-names=front-proxy-client \
  --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
  --requestheader-extra-headers-prefix=X-Remote-Extra- --proxy-client-cert-file=pki/front-proxy-client.crt \
  --proxy-client-key-file=pki/front-proxy-client.key
export KUBECONFIG=$dir/admin.kubeconfig
for _ in $(seq 240); do kubectl get --raw /readyz >/dev/null 2>&1 && break; sleep 0.5; done
kubectl get --raw /readyz >/dev/null || die "kube-apiserver not ready (logs in $dir)"
start kube-controller-manager "$kbin/kube-controller-manager" --kubeconfig=kcm.kubeconfig \
  --service-account-private-key-file=pki/sa.key --root-ca-file=pki/ca.crt \
  --use-service-account-credentials=true --leader-elect=false --secure-port=0 \
  --cluster-signing-cert-file=pki/ca.crt --cluster-signing-key-file=pki/ca.key
start kube-scheduler "$kbin/kube-scheduler" --kubeconfig=scheduler.kubeconfig \
  --leader-elect=false --secure-port=0
say "control plane up in $(elapsed "$t") s ($k8s_version)"

# ---- nodes ----------------------------------------------------------------------------------------
letters=(a b) fixtures=(hgx-h100 dgx-a100)  # a: 8 H100 on NVSwitch; b: 8 A100, MIG on GPUs 6, 7
cd "$dir"
for i in $(seq "$nodes_n"); do
  n=node-${letters[i - 1]} node="e2e-node-${letters[i - 1]}" nd="$dir/$n" ip="$net.$i"
  nodes+=("$n")
  mkdir -p "$nd"/{kubelet,logs/pods,logs/containers,nvml,work,pki,cni,cni-data,containerd}
  cp "$gbuild/fake_nvml/libnvidia-ml.so.1" "$repo/tests/fixtures/nvml/${fixtures[i - 1]}.json" "$nd/nvml/"
  sed -i "s/\"GPU-[0-9a-f]\{2\}/\"GPU-${i}e/g" "$nd/nvml/${fixtures[i - 1]}.json"  # distinct UUIDs
  mv "$nd/nvml/${fixtures[i - 1]}.json" "$nd/nvml/nvml.json"
  (cd pki && cert "$n" "/O=system:nodes/CN=system:node:$node")
  kubeconfig "$nd/kubelet.kubeconfig" "$n"
  cat > "$nd/cni/10-bridge.conflist" <<C
{"cniVersion": "0.4.0", "name": "gle2e-$n", "plugins": [
  {"type": "bridge", "bridge": "gle2e-${n: -1}", "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "dataDir": "$nd/cni-data",
            "ranges": [[{"subnet": "$pods.$((i - 1)).0/24"}]], "routes": [{"dst": "0.0.0.0/0"}]}}]}
C
  cat > "$nd/containerd.toml" <<C
version = 2
root = "$nd/containerd/root"
state = "/run/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = "$nd/containerd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "$nd/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "e2e.local/pause:3.9"
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "/usr/sbin/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$nd/cni"
C
  for h in /sys/fs/cgroup/*/; do  # the nodes' cgroupRoot in every v1 hierarchy
    [[ -f $h/cgroup.procs && ! -f $h/cgroup.controllers ]] || continue
    mkdir "$h/gapless-e2e-$n"; cgroups+=("$h/gapless-e2e-$n")
    if [[ -f $h/cpuset.cpus ]]; then
      cat "$h/cpuset.cpus" > "$h/gapless-e2e-$n/cpuset.cpus"
      cat "$h/cpuset.mems" > "$h/gapless-e2e-$n/cpuset.mems"
    fi
  done
  cat > "$nd/kubelet.yaml" <<Y
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $ip
port: 10250
readOnlyPort: 0
healthzBindAddress: $ip
healthzPort: 10248
authentication: {anonymous: {enabled: false}, webhook: {enabled: true}, x509: {clientCAFile: $dir/pki/ca.crt}}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
cgroupsPerQOS: true
cgroupRoot: /gapless-e2e-$n
enforceNodeAllocatable: [pods]
failSwapOn: false
protectKernelDefaults: false
makeIPTablesUtilChains: false
oomScoreAdj: 0
evictionHard: {}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
staticPodPath: ""
serializeImagePulls: false
volumePluginDir: $nd/volume-plugins
Y
  start "$n" unshare -m --propagation private bash "$self" __node "$node" "$nd" "$kbin" \
    "$images_tar" "$ip"
done
for i in $(seq "$nodes_n"); do wait_url "kubelet $net.$i" "http://$net.$i:10248/healthz" 180; done
say "kubelets up after $(elapsed "$t_start") s"

# ---- Gapless, as users install it -----------------------------------------------------------------
py=(python3 "$here/cluster_e2e.py" --dir "$dir" --nodes "$nodes_n")
"${py[@]}" nodes-ready
kubectl label node --all nvidia.com/gpu.present=true >/dev/null
t_apply=$(date +%s)
kubectl apply -k "${OVERLAY:-$repo/tests/e2e/overlay}" > apply.log 2>&1 || { cat apply.log >&2; die "kubectl apply -k failed"; }
grep -i warn apply.log >&2 || true
echo "setup: Kubernetes $k8s_version, $nodes_n node(s), image $((image_size / 1000000)) MB" \
  "(Dockerfile build: ${image_build_s:-cached} s), ready to apply after $((t_apply - t_start)) s"
rc=0
"${py[@]}" checks --applied-at "$t_apply" || rc=$?
exit $rc
