# shellcheck shell=bash disable=SC2154  # dir: the caller's
# Real GPU nodes for the local checks (scripts/kubelet_e2e.sh, scripts/consolidation_e2e.sh
# --kubelets; docs/kubelet-e2e.md): per node a real v1.26 kubelet in its own mount namespace,
# gapless-fakecri as its runtime (it records what each container would receive) and
# gapless-agent --device-plugin over the fake NVML with 8 H100s. Root only. Sourced, not run
# (but run as `bash kubelet_nodes.sh __node ...` inside `unshare -m` for one node); the caller
# has cd'ed into its temporary directory $dir.
#
#   start_group LOG COMMAND...       runs COMMAND in its own process group, output in $dir/LOG.log
#   wait_url WHAT URL SECONDS [curl args...]
#   start_kubelet_nodes K8S_BIN_DIR GAPLESS_BUILD_DIR KUBECONFIG NODE...
#       (K8S_BIN_DIR: kubelet, gapless-fakecri; GAPLESS_BUILD_DIR: gapless-agent and
#       fake_nvml/libnvidia-ml.so.1; returns once every node is Ready, untainted and advertises
#       8 nvidia.com/gpu; the node's files in $dir/NODE, its runtime's records in
#       $dir/NODE/creates.jsonl; kubelet_e2e.py talks to KUBE_API with KUBE_TOKEN)
#   stop_kubelet_nodes                ends every process group started here, newest first, and
#       removes the host mount points it had to create (call it from the EXIT trap)
# AGENT_ARGS: extra flags of the agents (split on spaces).
if [[ ${BASH_SOURCE[0]} == "$0" && ${1:-} == __node ]]; then  # one node's mounts, runtime, kubelet
  set -euo pipefail
  shift; node=$1 dir=$2 bin=$3 kc=$4
  mount --make-rprivate /
  mount --bind "$dir/plugins" /var/lib/kubelet/device-plugins
  mount --bind "$dir/logs/pods" /var/log/pods
  mount --bind "$dir/logs/containers" /var/log/containers
  for kv in vm/overcommit_memory=1 vm/panic_on_oom=0 kernel/panic=10 kernel/panic_on_oops=1 \
            kernel/keys/root_maxkeys=1000000 kernel/keys/root_maxbytes=25000000; do
    f="$dir/sysctl/${kv%%=*}"; mkdir -p "$(dirname "$f")"; echo "${kv#*=}" > "$f"
    mount --bind "$f" "/proc/sys/${kv%%=*}"
  done
  "$bin/gapless-fakecri" -socket "$dir/cri.sock" -records "$dir/creates.jsonl" \
    > "$dir/fakecri.log" 2>&1 &
  for _ in $(seq 100); do [[ -S $dir/cri.sock ]] && break; sleep 0.1; done
  [[ -S $dir/cri.sock ]] || { echo "$node: gapless-fakecri did not start" >&2; exit 1; }
  cd "$dir/work"  # an empty working directory
  exec "$bin/kubelet" --config "$dir/kubelet.yaml" --kubeconfig "$kc" \
    --container-runtime-endpoint "unix://$dir/cri.sock" \
    --image-service-endpoint "unix://$dir/cri.sock" --root-dir "$dir/root" \
    --cert-dir "$dir/pki" --hostname-override "$node" --v=2 > "$dir/kubelet.log" 2>&1
fi
nodes_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=local_control_plane.sh
. "$nodes_here/local_control_plane.sh"  # free_ports
pgroups=()  # process groups to end (each started with setsid)
made=()    # host mount points created here, removed again if still empty

start_group() {  # LOG COMMAND...: runs it in its own process group
  local log=$1; shift
  setsid "$@" > "$dir/$log.log" 2>&1 & pgroups+=($!)
}

wait_url() {  # WHAT URL SECONDS [curl args...]
  local what=$1 url=$2 secs=$3; shift 3
  for _ in $(seq $((secs * 2))); do curl -sf "$@" "$url" >/dev/null 2>&1 && return 0; sleep 0.5; done
  echo "$what not up after $secs s (logs in $dir)" >&2; exit 2
}

stop_kubelet_nodes() {
  for p in "${pgroups[@]}"; do kill -TERM -- "-$p" 2>/dev/null || true; done
  for p in "${pgroups[@]}"; do
    for _ in $(seq 50); do kill -0 -- "-$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$p" 2>/dev/null || true
  done
  for ((i = ${#made[@]} - 1; i >= 0; i--)); do rmdir "${made[i]}" 2>/dev/null || true; done
}

kubelet_config() {  # NODE-DIR PORT HEALTHZ-PORT
  cat <<Y
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $2
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $3
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
evictionHard: {}
makeIPTablesUtilChains: false
imageGCHighThresholdPercent: 100
staticPodPath: ""
cpuManagerPolicy: none
topologyManagerPolicy: none
volumePluginDir: $1/volume-plugins
Y
}

start_kubelet_nodes() {  # K8S_BIN_DIR GAPLESS_BUILD_DIR KUBECONFIG NODE...
  local bin=$1 gbuild=$2 kc=$3; shift 3
  local names=("$@") nd i port healthz agent_port
  for d in /var/lib/kubelet /var/lib/kubelet/device-plugins /var/log/pods /var/log/containers; do
    [[ -d $d ]] || { mkdir "$d"; made+=("$d"); }
  done
  local healthz_ports=()
  for i in "${!names[@]}"; do
    nd="$dir/${names[i]}"
    mkdir -p "$nd"/{plugins,logs/pods,logs/containers,root,pki,work,volume-plugins}
    read -r port healthz < <(free_ports 2)
    healthz_ports+=("$healthz")
    kubelet_config "$nd" "$port" "$healthz" > "$nd/kubelet.yaml"
    start_group "${names[i]}-node" unshare -m --propagation private \
      bash "$nodes_here/kubelet_nodes.sh" __node "${names[i]}" "$nd" "$bin" "$kc"
  done
  for i in "${!names[@]}"; do
    wait_url "kubelet ${names[i]}" "http://127.0.0.1:${healthz_ports[i]}/healthz" 120
  done
  python3 "$nodes_here/kubelet_e2e.py" nodes-ready "${names[@]}"
  # 8 H100s per node; the UUIDs differ per node so a GPU is named by its node and UUID alike
  for i in "${!names[@]}"; do
    nd="$dir/${names[i]}"
    sed -e "s/\"GPU-[0-9a-f]\{2\}/\"GPU-${i}b/g" "$nodes_here/../tests/fixtures/nvml/hgx-h100.json" \
      > "$nd/nvml.json"
    touch "$nd/creates.jsonl"
    read -r agent_port < <(free_ports 1)
    # shellcheck disable=SC2086  # extra flags split on spaces
    GAPLESS_FAKE_NVML_CONFIG="$nd/nvml.json" start_group "${names[i]}-agent" \
      "$gbuild/gapless-agent" --device-plugin --device-plugin-dir "$nd/plugins" \
      --node-name "${names[i]}" --kubeconfig "$kc" --listen "127.0.0.1:$agent_port" \
      --nvml-library "$gbuild/fake_nvml/libnvidia-ml.so.1" --poll-interval 5 ${AGENT_ARGS:-}
  done
  python3 "$nodes_here/kubelet_e2e.py" nodes-gpus "${names[@]}"
}
