"""The bin-packing second scheduler (`gpuburst-binpack`): kube-scheduler running exactly the profile the
simulator models (`scaler.core.scheduling.scoring.BINPACK`), two replicas with leader election, on the system pool."""

from __future__ import annotations

import pulumi_kubernetes as k8s

import pulumi
from gpuburst_platform import render
from gpuburst_platform.base import APP_LABEL, RBAC_GROUP, Ctx, meta

HEALTH_PORT = 10259  # kube-scheduler's secure port: /healthz


def _rbac(ctx: Ctx, sa: k8s.core.v1.ServiceAccount) -> None:
    """What a kube-scheduler needs: the two built-in ClusterRoles, plus reading the authentication ConfigMap
    in kube-system; and its own leader-election Lease (the built-in role only grants get/update on the
    Lease named "kube-scheduler")."""
    name, ns = render.SCHEDULER_NAME, ctx.scaler_namespace
    labels = {APP_LABEL: name}
    subject = [{"kind": "ServiceAccount", "name": name, "namespace": ns}]
    for role in ("system:kube-scheduler", "system:volume-scheduler"):
        short = role.split(":")[1]
        k8s.rbac.v1.ClusterRoleBinding(
            ctx.rname(f"scheduler-{short}"), metadata=meta(f"{name}-{short}", **labels), subjects=subject,
            role_ref={"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role}, opts=ctx.child([sa]),
        )
    k8s.rbac.v1.RoleBinding(
        ctx.rname("scheduler-auth-reader"), metadata=meta(f"{name}-auth-reader", "kube-system", **labels),
        subjects=subject, role_ref={"apiGroup": RBAC_GROUP, "kind": "Role",
                                    "name": "extension-apiserver-authentication-reader"},
        opts=ctx.child([sa]),
    )
    election = render.scheduler_configuration()["leaderElection"]
    lease_ns = election["resourceNamespace"]
    lease_role = k8s.rbac.v1.Role(
        ctx.rname("scheduler-lease"), metadata=meta(f"{name}-lease", lease_ns, **labels),
        rules=[
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
             "resourceNames": [election["resourceName"]], "verbs": ["get", "update"]},
        ],
        opts=ctx.child(),
    )
    k8s.rbac.v1.RoleBinding(
        ctx.rname("scheduler-lease"), metadata=meta(f"{name}-lease", lease_ns, **labels), subjects=subject,
        role_ref={"apiGroup": RBAC_GROUP, "kind": "Role", "name": f"{name}-lease"},
        opts=ctx.child([lease_role, sa]),
    )


def declare(ctx: Ctx, namespace: k8s.core.v1.Namespace, image: str) -> pulumi.Resource:
    name, ns = render.SCHEDULER_NAME, ctx.scaler_namespace
    labels = {APP_LABEL: name}
    sa = k8s.core.v1.ServiceAccount(ctx.rname("scheduler-sa"), metadata=meta(name, ns, **labels),
                                    opts=ctx.child([namespace]))
    _rbac(ctx, sa)
    cm = k8s.core.v1.ConfigMap(
        ctx.rname("scheduler-config"), metadata=meta(f"{name}-config", ns, **labels),
        data={render.SCHEDULER_CONFIG_FILE: render.scheduler_config_yaml()}, opts=ctx.child([namespace]),
    )
    probe = {"httpGet": {"path": "/healthz", "port": HEALTH_PORT, "scheme": "HTTPS"}, "periodSeconds": 10}
    container = {
        "name": "kube-scheduler",
        "image": image,
        "command": ["kube-scheduler", f"--config=/etc/kubernetes/{render.SCHEDULER_CONFIG_FILE}", "--v=2"],
        "livenessProbe": {**probe, "initialDelaySeconds": 15},
        "readinessProbe": probe,
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
        "securityContext": render.container_security(),
        "volumeMounts": [{"name": "config", "mountPath": "/etc/kubernetes", "readOnly": True}],
    }
    deployment = k8s.apps.v1.Deployment(
        ctx.rname("scheduler"), metadata=meta(name, ns, **labels),
        spec={"replicas": 2, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {
                "serviceAccountName": name,
                "priorityClassName": "system-cluster-critical",
                "nodeSelector": render.system_node_selector(),
                "securityContext": render.pod_security(),
                "containers": [container],
                "volumes": [{"name": "config", "configMap": {"name": f"{name}-config"}}],
            },
        }},
        opts=ctx.child([cm, sa]),
    )
    k8s.policy.v1.PodDisruptionBudget(
        ctx.rname("scheduler-pdb"), metadata=meta(name, ns, **labels),
        spec={"maxUnavailable": 1, "selector": {"matchLabels": labels}}, opts=ctx.child([namespace]),
    )
    return deployment
