"""The Pod Security Standards' checks (baseline and restricted, policy version "latest"), for
pod templates in rendered manifests.

The PodSecurity admission plugin (on by default since Kubernetes v1.25) refuses to create a pod
that breaks its namespace's `pod-security.kubernetes.io/enforce` level, and `kubectl apply` of the
Deployment or DaemonSet that owns it only prints a warning: the workload is "created" and its
pods never appear. These checks follow the standard's published controls
(kubernetes.io/docs/concepts/security/pod-security-standards/) so a test can hold every shipped
pod template against its namespace's level before any cluster sees it.

violations(pod_spec, metadata, level) -> list of strings, empty when the pod is admitted.
"""

BASELINE_CAPABILITIES = {
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
    "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
}
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
RESTRICTED_VOLUMES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
    "projected", "secret",
}
LEVELS = ("privileged", "baseline", "restricted")


def _containers(spec):
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for c in spec.get(key) or []:
            yield c


def _baseline(spec, metadata):
    bad = []
    psc = spec.get("securityContext") or {}
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field):
            bad.append(f"{field}: true")
    if (psc.get("windowsOptions") or {}).get("hostProcess"):
        bad.append("pod windowsOptions.hostProcess")
    for v in spec.get("volumes") or []:
        if "hostPath" in v:
            bad.append(f"volume {v.get('name')}: hostPath")
    if (psc.get("seccompProfile") or {}).get("type") == "Unconfined":
        bad.append("pod seccompProfile Unconfined")
    for s in psc.get("sysctls") or []:
        if s.get("name") not in SAFE_SYSCTLS:
            bad.append(f"sysctl {s.get('name')}")
    bad += _selinux(psc.get("seLinuxOptions"), "pod")
    for key, value in ((metadata or {}).get("annotations") or {}).items():
        if key.startswith("container.apparmor.security.beta.kubernetes.io/") and \
                value != "runtime/default" and not value.startswith("localhost/"):
            bad.append(f"AppArmor {key}: {value}")
    for c in _containers(spec):
        name = c.get("name")
        sc = c.get("securityContext") or {}
        if sc.get("privileged"):
            bad.append(f"{name}: privileged")
        if (sc.get("windowsOptions") or {}).get("hostProcess"):
            bad.append(f"{name}: windowsOptions.hostProcess")
        for cap in (sc.get("capabilities") or {}).get("add") or []:
            if cap not in BASELINE_CAPABILITIES:
                bad.append(f"{name}: capability {cap} added")
        for p in c.get("ports") or []:
            if p.get("hostPort"):
                bad.append(f"{name}: hostPort {p['hostPort']}")
        if sc.get("procMount", "Default") != "Default":
            bad.append(f"{name}: procMount {sc['procMount']}")
        if (sc.get("seccompProfile") or {}).get("type") == "Unconfined":
            bad.append(f"{name}: seccompProfile Unconfined")
        if (sc.get("appArmorProfile") or {}).get("type") == "Unconfined":
            bad.append(f"{name}: appArmorProfile Unconfined")
        bad += _selinux(sc.get("seLinuxOptions"), name)
    return bad


def _selinux(options, where):
    options = options or {}
    bad = []
    if options.get("type", "") not in SELINUX_TYPES:
        bad.append(f"{where}: seLinuxOptions.type {options['type']}")
    for field in ("user", "role"):
        if options.get(field):
            bad.append(f"{where}: seLinuxOptions.{field}")
    return bad


def _restricted(spec):
    bad = []
    psc = spec.get("securityContext") or {}
    for v in spec.get("volumes") or []:
        kinds = set(v) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            bad.append(f"volume {v.get('name')}: {', '.join(sorted(kinds - RESTRICTED_VOLUMES))}")
    if psc.get("runAsUser") == 0:
        bad.append("pod runAsUser: 0")
    pod_seccomp = (psc.get("seccompProfile") or {}).get("type")
    for c in _containers(spec):
        name = c.get("name")
        sc = c.get("securityContext") or {}
        if sc.get("allowPrivilegeEscalation") is not False:
            bad.append(f"{name}: allowPrivilegeEscalation is not false")
        if sc.get("runAsNonRoot", psc.get("runAsNonRoot")) is not True:
            bad.append(f"{name}: runAsNonRoot is not true")
        if sc.get("runAsUser") == 0:
            bad.append(f"{name}: runAsUser: 0")
        seccomp = (sc.get("seccompProfile") or {}).get("type", pod_seccomp)
        if seccomp not in ("RuntimeDefault", "Localhost"):
            bad.append(f"{name}: seccompProfile is not RuntimeDefault or Localhost")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            bad.append(f"{name}: capabilities do not drop ALL")
        for cap in caps.get("add") or []:
            if cap != "NET_BIND_SERVICE":
                bad.append(f"{name}: capability {cap} added")
    return bad


def violations(spec, metadata, level):
    """What the PodSecurity admission plugin would refuse a pod for at `level`."""
    if level not in LEVELS:
        return [f"unknown Pod Security level {level!r}"]
    if level == "privileged":
        return []
    bad = _baseline(spec, metadata)
    if level == "restricted":
        bad += _restricted(spec)
    return list(dict.fromkeys(bad))  # a hostPath breaks both levels' volume rules: say it once


def pod_templates(docs):
    """(kind, name, namespace, pod metadata, pod spec) of every object that makes pods."""
    for d in docs:
        kind, meta = d.get("kind"), d.get("metadata", {})
        if kind == "Pod":
            template = {"metadata": meta, "spec": d.get("spec", {})}
        elif kind in ("Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "Job"):
            template = d.get("spec", {}).get("template", {})
        elif kind == "CronJob":
            template = d.get("spec", {}).get("jobTemplate", {}).get("spec", {}).get("template", {})
        else:
            continue
        yield kind, meta.get("name"), meta.get("namespace", "default"), \
            template.get("metadata", {}), template.get("spec", {})


def enforce_levels(docs):
    """Each Namespace's enforced level; a namespace without the label admits everything
    (the admission plugin's default, unless the cluster's configuration sets another)."""
    return {d["metadata"]["name"]:
            d["metadata"].get("labels", {}).get("pod-security.kubernetes.io/enforce", "privileged")
            for d in docs if d.get("kind") == "Namespace"}
