#!/usr/bin/env bash
# Checks the deployment in manifests/:
#   - manifests/policy.yaml is byte-for-byte policies/default.yaml (kustomize can only read files
#     under manifests/, so the policy is a copy that must never drift);
#   - with a gapless-extender binary as $1: the policy passes --check-policy, and the binary accepts
#     the arguments the Deployment passes it; gapless-agent beside it accepts the DaemonSet's;
#   - `kubectl kustomize manifests/` builds and holds the expected objects, and the generated
#     KubeSchedulerConfiguration has nodeCacheCapable, the bind verb and no percentageOfNodesToScore
#     (kube-scheduler samples as it does alone: docs/policies.md, "Sampling");
#   - with python3 + PyYAML: the objects fit together (ConfigMap names, mounts, lease, probes,
#     security context, Service selector, RBAC subjects; the agent DaemonSet's identity, RBAC,
#     NODE_NAME and tolerations);
#   - manifests/node-policy/ (the agent's admission policy) builds apart from manifests/, and names
#     the DaemonSet's user and the pod annotations the agent writes;
#   - manifests/ holds no cert-manager object and no webhook (it must install on a plain cluster),
#     and with the opt-in webhook Component (manifests/webhook/) it builds, adds only the
#     webhook's pieces and they fit together (webhook_variant.py).
# Usage: tests/manifests/kustomize_test.sh [path/to/gapless-extender]
# Exit: 0 pass, 1 failure, 77 kubectl missing (ctest SKIP_RETURN_CODE) after the other checks pass.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="${1:-}"
fail=0
bad() { echo "FAIL: $*" >&2; fail=1; }
ok() { echo "ok: $*"; }

# 1. The policy copy.
if cmp -s "$root/policies/default.yaml" "$root/manifests/policy.yaml"; then
  ok "manifests/policy.yaml == policies/default.yaml"
else
  bad "manifests/policy.yaml differs from policies/default.yaml; run: cp policies/default.yaml manifests/policy.yaml"
fi

# 2. The policy as the extender reads it.
if [ -n "$bin" ]; then
  if out="$("$bin" --check-policy "$root/manifests/policy.yaml" 2>&1)"; then
    ok "$out"
  else
    bad "gapless-extender --check-policy manifests/policy.yaml: $out"
  fi
fi

# 3. kustomize.
if ! command -v kubectl >/dev/null 2>&1; then
  echo "SKIP: kubectl not found; manifests/ not built" >&2
  [ "$fail" -eq 0 ] && exit 77 || exit 1
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
if ! kubectl kustomize "$root/manifests" >"$tmp/out.yaml" 2>"$tmp/err"; then
  cat "$tmp/err" >&2
  echo "FAIL: kubectl kustomize manifests/" >&2
  exit 1
fi
ok "kubectl kustomize manifests/ ($(grep -c '^kind: ' "$tmp/out.yaml") objects)"

# Top-level kinds start at column 0 in kustomize's output; nested ones are indented.
expect_kind() {  # kind, minimum count, maximum count
  local n
  n="$(grep -cx "kind: $1" "$tmp/out.yaml" || true)"
  if [ "$n" -ge "$2" ] && [ "$n" -le "$3" ]; then ok "$n x $1"; else bad "$n x $1, want $2..$3"; fi
}
expect_kind Namespace 2 2
expect_kind ServiceAccount 2 2
expect_kind ClusterRole 1 9
expect_kind ClusterRoleBinding 1 9
expect_kind Role 1 9
expect_kind RoleBinding 1 9
expect_kind ConfigMap 3 3
expect_kind Deployment 1 1
expect_kind DaemonSet 1 1
expect_kind Service 1 1
expect_kind MutatingWebhookConfiguration 0 0     # the webhook is opt-in (manifests/webhook/)
expect_kind ValidatingWebhookConfiguration 0 0
expect_kind Certificate 0 0                      # cert-manager's kinds: the base must apply
expect_kind Issuer 0 0                           # on a cluster without cert-manager
expect_kind PodDisruptionBudget 1 1
expect_kind NetworkPolicy 2 2

# The scheduler configuration, as text inside its ConfigMap (indented under data).
for line in 'kind: KubeSchedulerConfiguration' 'nodeCacheCapable: true' 'bindVerb: bind' \
            '- schedulerName: gapless-scheduler'; do
  if grep -Eq "^ +${line}( |$)" "$tmp/out.yaml"; then ok "scheduler config: $line"; else bad "scheduler config lacks '$line'"; fi
done

# 4. Structure, when python3 with PyYAML is there.
if command -v python3 >/dev/null 2>&1 && python3 -c 'import yaml' 2>/dev/null; then
  python3 - "$tmp/out.yaml" "$root" "$tmp/extender-args" "$tmp/agent-args" <<'PY' || fail=1
import sys, yaml
out, root, args_file, agent_args_file = sys.argv[1:5]
docs = [d for d in yaml.safe_load_all(open(out)) if d]
errors = []
def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what, file=sys.stdout if cond else sys.stderr)
    if not cond:
        errors.append(what)
def objs(kind):
    return [d for d in docs if d["kind"] == kind]
def one(kind, name):
    found = [d for d in objs(kind) if d["metadata"]["name"] == name]
    check(len(found) == 1, f"{kind} {name} exists")
    return found[0] if found else {}

NS = "gapless-system"
AGENT_NS = "gapless-node"  # the agent alone: its own Pod Security level (namespace.yaml)
AGENT_OBJECTS = {("DaemonSet", "gapless-agent"), ("ServiceAccount", "gapless-node-agent"),
                 ("NetworkPolicy", "gapless-agent")}
check(sorted(d["metadata"]["name"] for d in objs("Namespace")) == [AGENT_NS, NS],
      f"namespaces {NS} and {AGENT_NS}")
for d in docs:
    if d["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding",
                         "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        if not (d["kind"] == "RoleBinding" and d["metadata"].get("namespace") == "kube-system"):
            want = AGENT_NS if (d["kind"], d["metadata"]["name"]) in AGENT_OBJECTS else NS
            check(d["metadata"].get("namespace") == want, f"{d['kind']} {d['metadata']['name']} in {want}")

cms = {d["metadata"]["name"]: d for d in objs("ConfigMap")}
sched_cm = [n for n in cms if n.startswith("gapless-scheduler-config")]
check(len(sched_cm) == 1, "one gapless-scheduler-config ConfigMap")
check("gapless-policy" in cms, "ConfigMap gapless-policy (no hash suffix: the extender reloads it in place)")
cfg = yaml.safe_load(cms[sched_cm[0]]["data"]["config.yaml"]) if sched_cm else {}
policy_text = cms.get("gapless-policy", {}).get("data", {}).get("policy.yaml")
check(policy_text == open(f"{root}/policies/default.yaml").read(), "gapless-policy holds policies/default.yaml")

check(cfg.get("apiVersion") == "kubescheduler.config.k8s.io/v1", "KubeSchedulerConfiguration v1")
check("percentageOfNodesToScore" not in cfg and all("percentageOfNodesToScore" not in p for p in cfg.get("profiles", [])),
      "no percentageOfNodesToScore: kube-scheduler's adaptive sample")
check([p.get("schedulerName") for p in cfg.get("profiles", [])] == ["gapless-scheduler"], "profile gapless-scheduler")
ext = cfg.get("extenders", [])
check(len(ext) == 1, "one extender")
e = ext[0] if ext else {}
check(e.get("urlPrefix") == "http://127.0.0.1:8888", "urlPrefix http://127.0.0.1:8888 (sidecar on loopback)")
for verb in ("filter", "prioritize", "bind", "preempt"):
    check(e.get(verb + "Verb") == verb, f"{verb}Verb: {verb}")
check(e.get("nodeCacheCapable") is True, "nodeCacheCapable: true")
check(e.get("ignorable") is False, "ignorable: false")
# Gapless's 10 against 9 must outweigh every score plugin left enabled (1000 points at most).
check(isinstance(e.get("weight"), int) and e["weight"] * 10 > 1000, "weight x 10 > 1000")
check(not e.get("managedResources"), "no managedResources: every pod reaches Gapless")
prof = cfg["profiles"][0]
disabled = {p["name"] for p in prof.get("plugins", {}).get("score", {}).get("disabled", [])}
check({"NodeResourcesFit", "NodeResourcesBalancedAllocation"} <= disabled,
      "the resource-spreading score plugins are disabled")
fit_args = [p.get("args", {}) for p in prof.get("pluginConfig", []) if p.get("name") == "NodeResourcesFit"]
check(len(fit_args) == 1 and "gapless.io" in fit_args[0].get("ignoredResourceGroups", []),
      "NodeResourcesFit ignores the gapless.io share resources")
le = cfg.get("leaderElection", {})
check(le.get("leaderElect") is True and le.get("resourceName") == "gapless-scheduler"
      and le.get("resourceNamespace") == NS, "leader election lease gapless-system/gapless-scheduler")

# The lease the config names is one the ServiceAccount may update.
SA = {"kind": "ServiceAccount", "name": "gapless-scheduler", "namespace": NS}
one("ServiceAccount", "gapless-scheduler")
def bound_roles(binding_kind):
    return [b for b in objs(binding_kind) if SA in b.get("subjects", [])]
lease_ok = False
for rb in bound_roles("RoleBinding"):
    if rb["roleRef"]["kind"] != "Role" or rb["metadata"]["namespace"] != le.get("resourceNamespace"):
        continue
    for role in objs("Role"):
        if role["metadata"]["name"] == rb["roleRef"]["name"] and role["metadata"]["namespace"] == rb["metadata"]["namespace"]:
            for r in role["rules"]:
                if "leases" in r["resources"] and {"get", "update"} <= set(r["verbs"]) \
                        and le.get("resourceName") in r.get("resourceNames", [le.get("resourceName")]):
                    lease_ok = True
check(lease_ok, "a Role bound to the ServiceAccount allows get/update on the lease")
crb = {b["roleRef"]["name"] for b in bound_roles("ClusterRoleBinding")}
for role in ("system:kube-scheduler", "system:volume-scheduler", "gapless-extender"):
    check(role in crb, f"ServiceAccount bound to ClusterRole {role}")
AGENT_SA = {"kind": "ServiceAccount", "name": "gapless-node-agent", "namespace": AGENT_NS}
for b in objs("ClusterRoleBinding") + objs("RoleBinding"):
    if b.get("subjects") == [AGENT_SA]:
        continue  # the node agent's, checked below
    check(b.get("subjects") == [SA], f"{b['kind']} {b['metadata']['name']} binds only the ServiceAccount")
rules = one("ClusterRole", "gapless-extender").get("rules", [])
def allowed(group, res, verb):
    return any(group in r.get("apiGroups", []) and res in r["resources"] and verb in r["verbs"] for r in rules)
for group, res, verb in [("", "nodes", "watch"), ("", "pods", "watch"), ("", "nodes", "list"),
                         ("", "pods", "list"), ("", "namespaces", "list"), ("", "namespaces", "watch"),
                         ("policy", "poddisruptionbudgets", "list"),
                         ("policy", "poddisruptionbudgets", "watch"),
                         ("", "pods/binding", "create"), ("", "pods", "patch"),
                         ("", "pods/eviction", "create"),
                         ("", "events", "create"),
                         ("events.k8s.io", "events", "create")]:
    check(allowed(group, res, verb), f"gapless-extender may {verb} {group or 'core'}/{res}")
check(not any("*" in r["verbs"] or "*" in r["resources"] or "secrets" in r["resources"] for r in rules),
      "gapless-extender has no wildcards and no secrets")

# The Deployment.
dep = one("Deployment", "gapless-scheduler")
spec = dep.get("spec", {})
pod = spec.get("template", {}).get("spec", {})
# High availability: two replicas, replaced one at a time, one kept through drains.
check(spec.get("replicas") == 2 and spec.get("strategy", {}).get("type") == "RollingUpdate"
      and spec["strategy"].get("rollingUpdate", {}).get("maxUnavailable") == 0,
      "replicas 2, RollingUpdate with maxUnavailable 0")
pdb = one("PodDisruptionBudget", "gapless-scheduler")
check(pdb.get("spec", {}).get("minAvailable") == 1
      and pdb["spec"].get("selector", {}).get("matchLabels") == spec.get("selector", {}).get("matchLabels"),
      "PodDisruptionBudget keeps 1 of the Deployment's pods")
claims_ok = False
for rb in bound_roles("RoleBinding"):
    for role in objs("Role"):
        if role["metadata"]["name"] == rb["roleRef"]["name"] and rb["metadata"]["namespace"] == NS \
                and role["metadata"]["namespace"] == NS:
            for r in role["rules"]:
                if "configmaps" in r["resources"] and {"get", "create", "update"} <= set(r["verbs"]):
                    claims_ok = True
check(claims_ok, "the extender may get/create/update its claim ConfigMaps in gapless-system")
check(pod.get("serviceAccountName") == "gapless-scheduler", "serviceAccountName gapless-scheduler")
psc = pod.get("securityContext", {})
check(psc.get("runAsNonRoot") is True and psc.get("runAsUser") == 65532, "pod runs as non-root 65532")
check(psc.get("seccompProfile", {}).get("type") == "RuntimeDefault", "seccomp RuntimeDefault")
volumes = {v["name"]: v for v in pod.get("volumes", [])}
for v in volumes.values():
    if "configMap" in v:
        check(v["configMap"]["name"] in cms, f"volume {v['name']} mounts an existing ConfigMap")
containers = {c["name"]: c for c in pod.get("containers", [])}
check(set(containers) == {"kube-scheduler", "gapless-extender"}, "containers kube-scheduler and gapless-extender")
for c in containers.values():
    sc = c.get("securityContext", {})
    check(sc.get("readOnlyRootFilesystem") is True and sc.get("allowPrivilegeEscalation") is False
          and sc.get("capabilities", {}).get("drop") == ["ALL"], f"{c['name']}: read-only root, no escalation, drop ALL")
    req = c.get("resources", {}).get("requests", {})
    check("cpu" in req and "memory" in req, f"{c['name']}: cpu and memory requests")
    check("memory" in c.get("resources", {}).get("limits", {}), f"{c['name']}: memory limit")
def mounted_file(c, path):
    # The ConfigMap key a container sees at `path`, via a directory mount.
    for m in c.get("volumeMounts", []):
        if path.startswith(m["mountPath"].rstrip("/") + "/"):
            v = volumes.get(m["name"], {})
            cm = cms.get(v.get("configMap", {}).get("name"), {})
            return cm.get("data", {}).get(path[len(m["mountPath"].rstrip("/")) + 1:])
    return None
ks = containers.get("kube-scheduler", {})
check(ks.get("image", "").startswith("registry.k8s.io/kube-scheduler:v"), "kube-scheduler image from registry.k8s.io")
ks_args = ks.get("command", []) + ks.get("args", [])
conf = [a.split("=", 1)[1] for a in ks_args if a.startswith("--config=")]
check(len(conf) == 1 and mounted_file(ks, conf[0]) == (cms[sched_cm[0]]["data"]["config.yaml"] if sched_cm else 0),
      "kube-scheduler --config points at the mounted KubeSchedulerConfiguration")
for kind in ("startupProbe", "readinessProbe"):
    g = ks.get(kind, {}).get("httpGet", {})
    check(g.get("port") == 10259 and g.get("scheme") == "HTTPS" and g.get("path") == "/healthz",
          f"kube-scheduler {kind} HTTPS 10259 /healthz")
# kube-scheduler lives only while its extender is ready: restarted, it gives up the lease.
g = ks.get("livenessProbe", {}).get("httpGet", {})
check(g.get("port") == 8889 and g.get("path") == "/readyz" and g.get("scheme", "HTTP") == "HTTP",
      "kube-scheduler livenessProbe: the extender's /readyz on its probe listener 8889")
ge = containers.get("gapless-extender", {})
ge_args = ge.get("args", [])
check(not any(a.startswith("--cluster") for a in ge_args), "extender runs in-cluster (no --cluster)")
pol = [a.split("=", 1)[1] for a in ge_args if a.startswith("--policy=")]
check(len(pol) == 1 and mounted_file(ge, pol[0]) == policy_text, "extender --policy points at the mounted policy")
sched = [a.split("=", 1)[1] for a in ge_args if a.startswith("--scheduler-name=")] or ["gapless-scheduler"]
check(sched == [p.get("schedulerName") for p in cfg.get("profiles", [])],
      "extender --scheduler-name is the scheduler profile's schedulerName")
listen = [a.split("=", 1)[1] for a in ge_args if a.startswith("--listen=")]
lease = [a.split("=", 1)[1] for a in ge_args if a.startswith("--scheduler-lease=")]
check(lease == [f"{le.get('resourceNamespace')}/{le.get('resourceName')}"],
      "extender --scheduler-lease is kube-scheduler's leader lease")
check(listen == ["127.0.0.1:8888"], "extender verbs, /debug and /ui on loopback 127.0.0.1:8888 only")
probe_listen = [a.split("=", 1)[1] for a in ge_args if a.startswith("--probe-listen=")]
check(probe_listen == ["0.0.0.0:8889"], "extender probe listener on 0.0.0.0:8889")
ports = {p.get("name"): p["containerPort"] for p in ge.get("ports", [])}
check(list(ports.values()) == [8889], "the extender exposes only the probe port 8889")
# The admission webhook is opt-in (manifests/webhook/, needs cert-manager; webhook_variant.py
# checks it): the base runs on a cluster without cert-manager, so nothing here may need it.
check(not any(a.startswith("--webhook-") for a in ge_args), "extender runs without --webhook-* flags")
check(not any("secret" in v for v in volumes.values()), "the scheduler pods mount no Secret")
check(not any(d["apiVersion"].startswith("cert-manager.io/") for d in docs), "no cert-manager objects")
check(not objs("MutatingWebhookConfiguration") and not objs("ValidatingWebhookConfiguration"),
      "no webhook configurations")
def probe_port(probe):
    p = probe.get("httpGet", {}).get("port")
    return ports.get(p) if isinstance(p, str) else p
for kind, path in (("startupProbe", "/healthz"), ("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
    check(ge.get(kind, {}).get("httpGet", {}).get("path") == path and probe_port(ge.get(kind, {})) == 8889,
          f"extender {kind} {path} on 8889")
# kube-scheduler takes the lease only after its extender is ready: the extender is the first
# container and its postStart hook waits for /readyz (the kubelet starts the next container after).
check([c["name"] for c in pod.get("containers", [])] == ["gapless-extender", "kube-scheduler"],
      "gapless-extender is the first container, kube-scheduler the second")
hook = ge.get("lifecycle", {}).get("postStart", {}).get("exec", {}).get("command", [])
check(hook[:1] == ["/usr/local/bin/gapless-extender"] and any(a.startswith("--wait-ready=") for a in hook)
      and "--probe-listen=" + (probe_listen or [""])[0] in hook,
      "extender postStart hook: gapless-extender --wait-ready on the probe listener")
with open(args_file + ".hook", "w") as f:
    f.write("\n".join(hook[1:]) + "\n")
genv = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") for e in ge.get("env", [])}
check(genv.get("POD_NAME") == "metadata.name" and genv.get("POD_NAMESPACE") == "metadata.namespace",
      "extender gets POD_NAME and POD_NAMESPACE (claims: replica name, claim namespace)")
with open(args_file, "w") as f:
    f.write("\n".join(a.replace("/etc/gapless/policy/", f"{root}/manifests/") for a in ge_args) + "\n")

# The metrics Service reaches the extender.
svc = one("Service", "gapless-extender-metrics")
labels = spec.get("template", {}).get("metadata", {}).get("labels", {})
sel = svc.get("spec", {}).get("selector", {})
check(sel and all(labels.get(k) == v for k, v in sel.items()), "Service selector matches the pod")
check(all(k not in sel or spec.get("selector", {}).get("matchLabels", {}).get(k) == v for k, v in sel.items()),
      "Service selects only labels the Deployment selects on")
sp = svc.get("spec", {}).get("ports", [])
check(len(sp) == 1 and sp[0].get("name") == "http-metrics" and sp[0].get("port") == 8889
      and ports.get(sp[0].get("targetPort"), sp[0].get("targetPort")) == 8889, "Service port http-metrics -> 8889 (probe listener)")
check(svc.get("metadata", {}).get("annotations", {}).get("prometheus.io/port") == "8889", "prometheus port 8889")

# NetworkPolicies: ingress to the scheduler pods only on 8889 and 10259, to the agents only on 9400.
def ingress_ports(name, ns):
    nps = [n for n in objs("NetworkPolicy") if n["metadata"]["name"] == name and n["metadata"].get("namespace") == ns]
    if len(nps) != 1:
        return None
    np = nps[0]["spec"]
    return (np.get("podSelector", {}).get("matchLabels"), np.get("policyTypes"),
            sorted(p["port"] for r in np.get("ingress", []) for p in r.get("ports", [])),
            all("from" not in r for r in np.get("ingress", [])))
check(ingress_ports("gapless-scheduler", NS) == (spec.get("selector", {}).get("matchLabels"), ["Ingress"], [8889, 10259], True),
      "NetworkPolicy gapless-scheduler: ingress only on 8889 and 10259")
check(svc.get("metadata", {}).get("annotations", {}).get("prometheus.io/scrape") == "true", "prometheus scrape annotation")

# The node agent: its own identity, allowed to get and patch Nodes, list Pods and patch them (the
# share over-use mark, docs/gpu-map.md) and create Events (GaplessShareOveruse), nothing else.
one("ServiceAccount", "gapless-node-agent")
agent_roles = [b["roleRef"]["name"] for b in objs("ClusterRoleBinding") + objs("RoleBinding")
               if AGENT_SA in b.get("subjects", [])]
check(agent_roles == ["gapless-node-agent"], "the agent's ServiceAccount is bound to gapless-node-agent only")
check(one("ClusterRole", "gapless-node-agent").get("rules") ==
      [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]},
       {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "patch"]},
       {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}],
      "gapless-node-agent: nodes get/patch, pods list/patch and events create only")
ds = one("DaemonSet", "gapless-agent")
dpod = ds.get("spec", {}).get("template", {}).get("spec", {})
check(dpod.get("serviceAccountName") == "gapless-node-agent", "DaemonSet runs as gapless-node-agent")
# The hostPaths: the kubelet's device plugin directory, where the plugin's sockets live, its
# PodResources directory (the drift check), and the host's /proc, read-only, where GPU
# processes' cgroups name their pods (per-pod usage).
host_paths = [v["hostPath"].get("path") for v in dpod.get("volumes", []) if "hostPath" in v]
check(host_paths == ["/var/lib/kubelet/device-plugins", "/var/lib/kubelet/pod-resources", "/proc"],
      "DaemonSet's hostPaths are the device plugin dir, the PodResources dir and /proc")
pr_mounts = [m for c in dpod.get("containers", []) for m in c.get("volumeMounts", [])
             if m.get("name") == "pod-resources"]
check(len(pr_mounts) == 1 and pr_mounts[0].get("readOnly") is True,
      "the kubelet's PodResources directory is mounted read-only")
proc_mounts = [m for c in dpod.get("containers", []) for m in c.get("volumeMounts", [])
               if m.get("name") == "host-proc"]
check(len(proc_mounts) == 1 and proc_mounts[0].get("readOnly") is True
      and proc_mounts[0].get("mountPath") == "/host/proc", "the host's /proc is mounted read-only at /host/proc")
check(any(t.get("key") == "nvidia.com/gpu" and t.get("operator") == "Exists" for t in dpod.get("tolerations", [])),
      "DaemonSet tolerates nvidia.com/gpu taints")
check(dpod.get("securityContext", {}).get("runAsUser") == 0, "agent runs as root (the plugin dir is root's)")
ac = (dpod.get("containers") or [{}])[0]
check(ac.get("command") == ["/usr/local/bin/gapless-agent"], "agent container runs gapless-agent")
env = {e["name"]: e for e in ac.get("env", [])}
check(env.get("NODE_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName",
      "NODE_NAME comes from the downward API's spec.nodeName")
check("nvidia.com/gpu" not in ac.get("resources", {}).get("limits", {}), "the agent takes no GPU")
aports = {p.get("name"): p["containerPort"] for p in ac.get("ports", [])}
lp = ac.get("livenessProbe", {}).get("httpGet", {})
check(lp.get("path") == "/healthz" and aports.get(lp.get("port"), lp.get("port")) == 9400, "agent livenessProbe /healthz on 9400")
check("--listen=0.0.0.0:9400" in ac.get("args", []), "agent listens on 0.0.0.0:9400")
check(ingress_ports("gapless-agent", AGENT_NS) == (ds.get("spec", {}).get("selector", {}).get("matchLabels"), ["Ingress"], [9400], True),
      "NetworkPolicy gapless-agent: ingress only on 9400")
check("--device-plugin" in ac.get("args", []), "agent serves the device plugin")
mounts = {m.get("name"): m.get("mountPath") for m in ac.get("volumeMounts", [])}
check("--device-plugin-dir=" + str(mounts.get("device-plugins")) in ac.get("args", []),
      "the plugin dir flag names the mounted device plugin dir")
with open(agent_args_file, "w") as f:
    f.write("\n".join(ac.get("args", [])) + "\n")

sys.exit(1 if errors else 0)
PY
fi

# 6. The node agent's admission policy (manifests/node-policy/, applied separately: an
#    admissionregistration.k8s.io/v1 object in manifests/ would fail `kubectl apply -k manifests/`
#    on clusters older than 1.30). It must name the agent's real user and the annotations the
#    agent really writes; scripts/agent_policy_check.sh runs it on a real API server.
if grep -qx 'kind: ValidatingAdmissionPolicy' "$tmp/out.yaml"; then
  bad "manifests/ holds a ValidatingAdmissionPolicy: it belongs in manifests/node-policy/"
fi
if ! kubectl kustomize "$root/manifests/node-policy" >"$tmp/policy.yaml" 2>"$tmp/err"; then
  cat "$tmp/err" >&2
  bad "kubectl kustomize manifests/node-policy/"
elif command -v python3 >/dev/null 2>&1 && python3 -c 'import yaml' 2>/dev/null; then
  python3 - "$tmp/policy.yaml" "$tmp/out.yaml" "$root" <<'PY' || fail=1
import re, sys, yaml
policy_file, base_file, root = sys.argv[1:4]
docs = [d for d in yaml.safe_load_all(open(policy_file)) if d]
base = [d for d in yaml.safe_load_all(open(base_file)) if d]
errors = 0
def check(cond, what):
    global errors
    print(("ok: " if cond else "FAIL: ") + "node-policy: " + what, file=sys.stdout if cond else sys.stderr)
    errors += 0 if cond else 1
kinds = sorted((d["kind"], d["apiVersion"]) for d in docs)
check(kinds == [("ValidatingAdmissionPolicy", "admissionregistration.k8s.io/v1"),
                ("ValidatingAdmissionPolicyBinding", "admissionregistration.k8s.io/v1")],
      f"one v1 ValidatingAdmissionPolicy and its binding ({kinds})")
vap = next((d for d in docs if d["kind"] == "ValidatingAdmissionPolicy"), {})
binding = next((d for d in docs if d["kind"] == "ValidatingAdmissionPolicyBinding"), {})
check(binding.get("spec", {}).get("policyName") == vap.get("metadata", {}).get("name")
      and binding.get("spec", {}).get("validationActions") == ["Deny"], "the binding denies for the policy")
check(vap.get("spec", {}).get("failurePolicy") == "Fail", "failurePolicy Fail")
ds = next(d for d in base if d["kind"] == "DaemonSet" and d["metadata"]["name"] == "gapless-agent")
user = "system:serviceaccount:%s:%s" % (ds["metadata"]["namespace"], ds["spec"]["template"]["spec"]["serviceAccountName"])
rules = [v["expression"] for v in vap.get("spec", {}).get("validations", [])]
check(rules and all(e.startswith(f"request.userInfo.username != '{user}' ||") for e in rules),
      f"every rule starts by passing users other than the DaemonSet's ({user})")
# The pod annotations the agent writes, as its sources spell them.
src = open(f"{root}/include/gapless/k8s/device_asks.h").read() + open(f"{root}/include/gapless/agent/usage_report.h").read()
written = set(re.findall(r'k(?:Allocated|ShareOveruse)Annotation = "([^"]+)"', src))
allowed = set(re.findall(r"k in \[([^\]]*)\]", " ".join(rules))[0].replace("'", "").replace(" ", "").split(",")) \
    if any("k in [" in e for e in rules) else set()
check(len(written) == 2 and written == allowed, f"the pod annotations it allows {sorted(allowed)} are the ones the agent writes {sorted(written)}")
sys.exit(1 if errors else 0)
PY
fi

# 7. The opt-in admission webhook (manifests/webhook/, a kustomize Component; needs cert-manager):
#    turned on as docs/admission-webhook.md "Installing" says, by uncommenting its lines in
#    manifests/kustomization.yaml or from an overlay of one's own (the two must render the same),
#    it adds the webhook and changes nothing else (webhook_variant.py).
if ! bash "$root/tests/manifests/render_webhook.sh" "$root" >"$tmp/webhook.yaml" 2>"$tmp/err"; then
  cat "$tmp/err" >&2
  bad "manifests/ with the webhook Component does not build"
else
  ok "kubectl kustomize manifests/ with components: [webhook] ($(grep -c '^kind: ' "$tmp/webhook.yaml") objects)"
  mkdir -p "$tmp/own-overlay"
  rel="$(realpath --relative-to="$tmp/own-overlay" "$root/manifests")"
  printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [%s]\ncomponents: [%s/webhook]\n' \
    "$rel" "$rel" >"$tmp/own-overlay/kustomization.yaml"
  if kubectl kustomize "$tmp/own-overlay" 2>"$tmp/err" | cmp -s - "$tmp/webhook.yaml"; then
    ok "an overlay of one's own with components: [manifests/webhook] renders the same"
  else
    cat "$tmp/err" >&2
    bad "an overlay with components: [manifests/webhook] renders differently from the uncommented lines"
  fi
  if command -v python3 >/dev/null 2>&1 && python3 -c 'import yaml' 2>/dev/null; then
    python3 "$root/tests/manifests/webhook_variant.py" "$tmp/out.yaml" "$tmp/webhook.yaml" \
      "$tmp/webhook-args" "$root" || fail=1
  fi
fi

# 5. The binaries accept the arguments the manifests pass them (--version returns after parsing).
accepts() {  # binary, file of arguments (one a line), what they are
  [ -x "$1" ] && [ -s "$2" ] || return 0
  local args out
  mapfile -t args <"$2"
  if out="$("$1" "${args[@]}" --version 2>&1)"; then
    ok "$(basename "$1") accepts $3: ${args[*]}"
  else
    bad "$(basename "$1") rejects $3 ${args[*]}: $out"
  fi
}
if [ -n "$bin" ]; then
  accepts "$bin" "$tmp/extender-args" "the Deployment's arguments"
  accepts "$bin" "$tmp/extender-args.hook" "the postStart hook's arguments"
  accepts "$bin" "$tmp/webhook-args" "the Deployment's arguments with the webhook Component"
  accepts "$(dirname "$bin")/gapless-agent" "$tmp/agent-args" "the DaemonSet's arguments"
fi

if [ "$fail" -ne 0 ]; then
  echo "manifests: FAILED" >&2
  exit 1
fi
echo "manifests: all checks passed"
