#!/usr/bin/env python3
"""Checks manifests/ with the opt-in admission webhook Component (manifests/webhook/) against
manifests/ alone, both rendered by `kubectl kustomize`:

- the Component only adds the webhook's objects (cert-manager Issuers and Certificates, the
  Service, the NetworkPolicy, both webhook configurations) and, in the Deployment, the extender's
  --webhook-* flags, its port and the Secret's mount; every other object is as in manifests/;
- the pieces fit: the flags read the mounted Secret, the Secret is the Certificate's, the
  Certificate names the Service, the Service reaches the port the listener serves, the
  configurations call that Service with cert-manager's CA and the failure policy, timeout and
  side effects docs/admission-webhook.md explains, and NetworkPolicy admits the port.

Usage: webhook_variant.py BASE.yaml VARIANT.yaml EXTENDER_ARGS_OUT REPO_ROOT (the variant's
extender arguments are written to EXTENDER_ARGS_OUT, one a line, the policy path made the
checkout's, for kustomize_test.sh to pass to the binary). Exit 0 pass, 1 fail.
"""
import copy
import sys

import yaml

NS = "gapless-system"
AGENT_NS = "gapless-node"
MOUNT = "/etc/gapless/webhook"
WEBHOOK_ARGS = ["--webhook-listen=0.0.0.0:9443", f"--webhook-tls-cert={MOUNT}/tls.crt",
                f"--webhook-tls-key={MOUNT}/tls.key"]
ADDED = {("Issuer", NS, "gapless-selfsigned"), ("Issuer", NS, "gapless-webhook-ca"),
         ("Certificate", NS, "gapless-webhook-ca"), ("Certificate", NS, "gapless-webhook"),
         ("Service", NS, "gapless-webhook"), ("NetworkPolicy", NS, "gapless-webhook"),
         ("MutatingWebhookConfiguration", "", "gapless"),
         ("ValidatingWebhookConfiguration", "", "gapless")}

errors = []


def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + "webhook: " + what, file=sys.stdout if cond else sys.stderr)
    if not cond:
        errors.append(what)


def key(d):
    return (d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"])


def extender(deployment):
    pod = deployment["spec"]["template"]["spec"]
    return next((c for c in pod.get("containers", []) if c["name"] == "gapless-extender"), {})


def without_webhook(deployment):
    """The Deployment with what the Component adds taken out."""
    d = copy.deepcopy(deployment)
    pod = d["spec"]["template"]["spec"]
    pod["volumes"] = [v for v in pod.get("volumes", []) if v.get("name") != "webhook-tls"]
    c = extender(d)
    c["args"] = [a for a in c.get("args", []) if not a.startswith("--webhook-")]
    c["ports"] = [p for p in c.get("ports", []) if p.get("name") != "https-webhook"]
    c["volumeMounts"] = [m for m in c.get("volumeMounts", []) if m.get("name") != "webhook-tls"]
    return d


def only_additions(base, variant):
    base_by, var_by = {key(d): d for d in base}, {key(d): d for d in variant}
    check(set(var_by) == set(base_by) | ADDED and not (set(base_by) & ADDED),
          "adds exactly the webhook's objects: " + ", ".join(" ".join(k) for k in sorted(ADDED)))
    dep = ("Deployment", NS, "gapless-scheduler")
    changed = [k for k in base_by if k != dep and var_by.get(k) != base_by[k]]
    check(not changed, f"changes no object of manifests/ but the Deployment (changed: {changed})")
    if dep in base_by and dep in var_by:
        check(without_webhook(var_by[dep]) == base_by[dep],
              "changes the Deployment only by the extender's --webhook-* flags, port and Secret mount")
    return var_by


def deployment_fits(var_by, args_out, root):
    dep = var_by.get(("Deployment", NS, "gapless-scheduler"), {})
    pod = dep.get("spec", {}).get("template", {}).get("spec", {})
    check([c["name"] for c in pod.get("containers", [])][:1] == ["gapless-extender"],
          "containers/0 is gapless-extender (deployment-args.yaml patches it by index)")
    ge = extender(dep) if dep else {}
    args = ge.get("args", [])
    check(args[-3:] == WEBHOOK_ARGS, "extender args end with " + " ".join(WEBHOOK_ARGS))
    ports = {p.get("name"): p.get("containerPort") for p in ge.get("ports", [])}
    check(ports.get("https-webhook") == 9443 and sorted(ports.values()) == [8889, 9443],
          "extender ports: the probe port 8889 and https-webhook 9443, the --webhook-listen port")
    mounts = [m for m in ge.get("volumeMounts", []) if m.get("name") == "webhook-tls"]
    check(len(mounts) == 1 and mounts[0].get("mountPath") == MOUNT and mounts[0].get("readOnly") is True
          and "subPath" not in mounts[0], f"webhook-tls mounted read-only at {MOUNT}, no subPath (renewals reach it)")
    vol = [v for v in pod.get("volumes", []) if v.get("name") == "webhook-tls"]
    cert = var_by.get(("Certificate", NS, "gapless-webhook"), {}).get("spec", {})
    check(len(vol) == 1 and vol[0].get("secret", {}).get("secretName") == cert.get("secretName") == "gapless-webhook-tls",
          "the mounted Secret is the one cert-manager's Certificate gapless-webhook writes")
    check(bool(vol) and vol[0].get("secret", {}).get("defaultMode") == 0o440,
          "the Secret's files are readable by fsGroup 65532 (0440)")
    with open(args_out, "w") as f:
        f.write("\n".join(a.replace("/etc/gapless/policy/", f"{root}/manifests/") for a in args) + "\n")
    return dep


def certificates(var_by):
    cert = var_by.get(("Certificate", NS, "gapless-webhook"), {}).get("spec", {})
    check(f"gapless-webhook.{NS}.svc" in cert.get("dnsNames", []),
          f"the serving certificate names the Service: gapless-webhook.{NS}.svc")
    ca_issuer = var_by.get(("Issuer", NS, cert.get("issuerRef", {}).get("name", "")), {}).get("spec", {})
    ca = var_by.get(("Certificate", NS, "gapless-webhook-ca"), {}).get("spec", {})
    root = var_by.get(("Issuer", NS, ca.get("issuerRef", {}).get("name", "")), {}).get("spec", {})
    check(ca.get("isCA") is True and ca_issuer.get("ca", {}).get("secretName") == ca.get("secretName")
          and "selfSigned" in root, "the serving certificate is issued by a self-signed CA of its own")


def service_and_policies(var_by, dep):
    labels = dep.get("spec", {}).get("template", {}).get("metadata", {}).get("labels", {})
    svc = var_by.get(("Service", NS, "gapless-webhook"), {}).get("spec", {})
    sel = svc.get("selector", {})
    check(sel and all(labels.get(k) == v for k, v in sel.items()), "Service gapless-webhook selects the scheduler pods")
    sp = svc.get("ports", [])
    check(len(sp) == 1 and sp[0].get("port") == 443 and sp[0].get("targetPort") == "https-webhook",
          "Service gapless-webhook 443 -> https-webhook")
    open_ports = sorted(p["port"] for (kind, ns, _), np in var_by.items()
                        if kind == "NetworkPolicy" and ns == NS
                        and np["spec"].get("podSelector", {}).get("matchLabels", {}).items() <= labels.items()
                        for r in np["spec"].get("ingress", []) for p in r.get("ports", []))
    check(open_ports == [8889, 9443, 10259], f"NetworkPolicies admit the scheduler pods on 8889, 9443, 10259 ({open_ports})")


def configurations(var_by):
    for kind, path in (("MutatingWebhookConfiguration", "/mutate"), ("ValidatingWebhookConfiguration", "/validate")):
        cfg = var_by.get((kind, "", "gapless"), {})
        check(cfg.get("metadata", {}).get("annotations", {}).get("cert-manager.io/inject-ca-from") == f"{NS}/gapless-webhook",
              f"{kind}: caBundle injected by cert-manager from the Certificate gapless-webhook")
        hooks = cfg.get("webhooks", [])
        check(len(hooks) == 1, f"{kind}: one webhook")
        for h in hooks:
            excluded = [v for e in h.get("namespaceSelector", {}).get("matchExpressions", [])
                        if e.get("key") == "kubernetes.io/metadata.name" and e.get("operator") == "NotIn"
                        for v in e.get("values", [])]
            check(h.get("clientConfig", {}).get("service") == {"name": "gapless-webhook", "namespace": NS, "path": path, "port": 443},
                  f"{kind} {h.get('name')}: the Service gapless-webhook, {path}")
            check(h.get("failurePolicy") == "Ignore" and h.get("timeoutSeconds") == 5 and h.get("sideEffects") == "None"
                  and h.get("admissionReviewVersions") == ["v1"],
                  f"{kind} {h.get('name')}: failurePolicy Ignore, timeoutSeconds 5, sideEffects None, v1")
            check({"kube-system", NS, AGENT_NS} <= set(excluded),
                  f"{kind} {h.get('name')}: never the control plane's or Gapless's own namespaces")
            check(h.get("rules") == [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                      "resources": ["pods"], "scope": "Namespaced"}],
                  f"{kind} {h.get('name')}: pod CREATE only")


def main():
    base_file, variant_file, args_out, root = sys.argv[1:5]
    base = [d for d in yaml.safe_load_all(open(base_file)) if d]
    variant = [d for d in yaml.safe_load_all(open(variant_file)) if d]
    var_by = only_additions(base, variant)
    dep = deployment_fits(var_by, args_out, root)
    certificates(var_by)
    service_and_policies(var_by, dep)
    configurations(var_by)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
