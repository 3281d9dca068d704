#!/usr/bin/env python3
"""Every pod template in manifests/ is admitted by its namespace's Pod Security level, and the
local end-to-end check's overlay (tests/e2e/overlay) changes nothing users would not have. The
same holds for manifests/ with the opt-in admission webhook Component (manifests/webhook/).

Issue 37: installed by hand, the agent DaemonSet was refused by PodSecurity admission (hostPath
volumes and root in a namespace enforcing "restricted"); `kubectl apply -k` said "created" and no
agent pod ever appeared. This test renders manifests/ with `kubectl kustomize` and holds each
Deployment/DaemonSet/... pod template against the enforce label of the Namespace it lands in
(which must itself be declared in manifests/). It first checks the checker: each control it
implements refuses a pod that breaks it, and the agent's template is refused under "restricted".

Usage: pod_security_test.py REPO_ROOT. Exit 0 pass, 1 fail, 77 kubectl missing (ctest skip).
"""
import copy
import os
import shutil
import subprocess
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pod_security as pss  # noqa: E402

errors = []


def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what, file=sys.stdout if cond else sys.stderr)
    if not cond:
        errors.append(what)


RESTRICTED_POD = {
    "securityContext": {"runAsNonRoot": True, "runAsUser": 65532,
                        "seccompProfile": {"type": "RuntimeDefault"}},
    "containers": [{"name": "c", "securityContext": {
        "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}],
    "volumes": [{"name": "tmp", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "x"}}],
}


def broken(change):
    spec = copy.deepcopy(RESTRICTED_POD)
    change(spec)
    return spec


def checker_cases():
    check(pss.violations(RESTRICTED_POD, {}, "restricted") == [], "a restricted pod passes restricted")
    restricted_only = {
        "root user": lambda s: s["securityContext"].update(runAsUser=0),
        "no runAsNonRoot": lambda s: s["securityContext"].pop("runAsNonRoot"),
        "escalation allowed": lambda s: s["containers"][0]["securityContext"].pop("allowPrivilegeEscalation"),
        "capabilities kept": lambda s: s["containers"][0]["securityContext"].pop("capabilities"),
        "no seccomp profile": lambda s: s["securityContext"].pop("seccompProfile"),
        "an NFS volume": lambda s: s["volumes"].append({"name": "n", "nfs": {"server": "x", "path": "/"}}),
    }
    for what, change in restricted_only.items():
        spec = broken(change)
        check(pss.violations(spec, {}, "restricted") != [], f"restricted refuses {what}")
        check(pss.violations(spec, {}, "baseline") == [], f"baseline admits {what}")
    both = {
        "a hostPath volume": lambda s: s["volumes"].append({"name": "h", "hostPath": {"path": "/"}}),
        "hostNetwork": lambda s: s.update(hostNetwork=True),
        "a privileged container": lambda s: s["containers"][0]["securityContext"].update(privileged=True),
        "SYS_ADMIN added": lambda s: s["containers"][0]["securityContext"]["capabilities"].update(add=["SYS_ADMIN"]),
        "a hostPort": lambda s: s["containers"][0].update(ports=[{"containerPort": 80, "hostPort": 80}]),
        "seccomp Unconfined": lambda s: s["securityContext"].update(seccompProfile={"type": "Unconfined"}),
        "an unsafe sysctl": lambda s: s["securityContext"].update(sysctls=[{"name": "kernel.msgmax", "value": "1"}]),
    }
    for what, change in both.items():
        spec = broken(change)
        check(pss.violations(spec, {}, "baseline") != [], f"baseline refuses {what}")
        check(pss.violations(spec, {}, "privileged") == [], f"privileged admits {what}")
    unconfined = {"annotations": {"container.apparmor.security.beta.kubernetes.io/c": "unconfined"}}
    check(pss.violations(RESTRICTED_POD, unconfined, "baseline") != [], "baseline refuses AppArmor unconfined")
    check(pss.violations(RESTRICTED_POD, {}, "strict") != [], "an unknown level is an error")


def render(root, folder, command=None):
    """`kubectl kustomize` of folder, or what command prints (a rendering of its own)."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        print(f"SKIP: kubectl not found; {folder} not rendered", file=sys.stderr)
        sys.exit(77 if not errors else 1)
    out = subprocess.run(command or [kubectl, "kustomize", os.path.join(root, folder)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        print(out.stderr, file=sys.stderr)
        check(False, f"kubectl kustomize {folder}")
        return []
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def without_overlay_changes(doc):
    """The object with what tests/e2e/overlay may change taken out: image names and tags, pull
    policies, and the fake NVML's volume, mounts and variable (docs/cluster-e2e.md)."""
    doc = copy.deepcopy(doc)
    spec = doc.get("spec", {}).get("template", {}).get("spec")
    if spec is None:
        return doc
    spec["volumes"] = [v for v in spec.get("volumes", []) if v.get("name") != "fake-nvml"]
    for c in spec.get("containers", []):
        c.pop("image", None)
        c.pop("imagePullPolicy", None)
        c["volumeMounts"] = [m for m in c.get("volumeMounts", []) if m.get("name") != "fake-nvml"]
        c["env"] = [e for e in c.get("env", []) if e.get("name") != "GAPLESS_FAKE_NVML_CONFIG"]
    return doc


def overlay_cases(base, overlay):
    """scripts/cluster_e2e.sh applies manifests/ through tests/e2e/overlay: what it verifies is
    what users apply only if the overlay changes nothing else (RBAC, flags, probes, security
    contexts, namespaces)."""
    key = lambda d: (d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"])
    base_by, overlay_by = {key(d): d for d in base}, {key(d): d for d in overlay}
    check(sorted(base_by) == sorted(overlay_by), "the e2e overlay holds the same objects as manifests/")
    for k in sorted(set(base_by) & set(overlay_by)):
        check(without_overlay_changes(base_by[k]) == without_overlay_changes(overlay_by[k]),
              f"the e2e overlay changes only images, pull policy and the fake NVML in {' '.join(k)}")


def manifests_cases(docs, variant=""):
    levels = pss.enforce_levels(docs)
    templates = list(pss.pod_templates(docs))
    check(len(templates) >= 2, f"{variant}{len(templates)} pod templates found")
    for kind, name, ns, meta, spec in templates:
        check(ns in levels, f"{variant}{kind} {name}: its namespace {ns} is declared in manifests/")
        level = levels.get(ns, "undeclared")
        bad = pss.violations(spec, meta, level)
        check(not bad, f"{variant}{kind} {ns}/{name} admitted at its namespace's level {level!r}"
              + (": " + "; ".join(bad) if bad else ""))
    # The defect this test exists for: the agent's template under "restricted" is refused, so it
    # must never share a namespace that enforces it.
    agent = [t for t in templates if t[0] == "DaemonSet" and t[1] == "gapless-agent"]
    check(len(agent) == 1 and pss.violations(agent[0][4], agent[0][3], "restricted") != [],
          f"{variant}the agent's template would be refused under restricted (hostPath, root)")
    scheduler = [t for t in templates if t[0] == "Deployment" and t[1] == "gapless-scheduler"]
    check(len(scheduler) == 1 and levels.get(scheduler[0][2]) == "restricted",
          f"{variant}the scheduler's namespace enforces restricted")


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../..")
    checker_cases()
    base = render(root, "manifests")
    manifests_cases(base)
    # The opt-in admission webhook Component adds a Secret volume to the scheduler's pods.
    webhook = render(root, "manifests with components: [webhook]",
                     ["bash", os.path.join(root, "tests/manifests/render_webhook.sh"), root])
    check(any(d["kind"] == "MutatingWebhookConfiguration" for d in webhook),
          "manifests/ with the webhook Component rendered")
    manifests_cases(webhook, "with the webhook: ")
    overlay_cases(base, render(root, "tests/e2e/overlay"))
    print("pod security: " + ("FAILED" if errors else "all checks passed"))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
