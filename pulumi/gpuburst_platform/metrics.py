"""The GPU metrics chain: dcgm-exporter, then the custom metrics API (prometheus-adapter, its TLS
from the Ansible metrics_certs role) or KEDA.

prometheus-adapter's own APIService is not rendered (its rules come from our ConfigMap via
`rules.existing`, so `rules.default`/`rules.custom` are empty); the APIService is declared here,
verified with the CA (`metrics_ca_bundle`), never insecureSkipTLSVerify.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi_kubernetes as k8s
import yaml

import pulumi
from gpuburst_platform import monitoring as mon
from gpuburst_platform import render
from gpuburst_platform.base import Ctx, meta
from gpuburst_platform.prometheus import PROMETHEUS_PORT, PROMETHEUS_URL
from gpuburst_platform.settings import ADAPTER_SERVICE, CUSTOM_METRICS_APISERVICE, KEDA_NAMESPACE, MONITORING_NAMESPACE
from scaler.core.model import keys

SERVING_CERT_DIR = "/var/run/serving-cert"


@dataclass
class MetricsChain:
    dcgm_exporter: k8s.helm.v3.Release
    adapter: k8s.helm.v3.Release | None = None
    apiservice: k8s.apiregistration.v1.APIService | None = None
    keda: k8s.helm.v3.Release | None = None

    def serving(self) -> list[pulumi.Resource]:
        """What serves GPU utilisation to autoscalers: the APIService, or KEDA."""
        return [r for r in (self.apiservice, self.keda) if r is not None]


def dcgm_values(ctx: Ctx) -> dict[str, Any]:
    return {
        "nodeSelector": {keys.LABEL_GPU_PRESENT: "true"},
        "tolerations": render.gpu_daemonset_tolerations(ctx.config),
        "serviceMonitor": {
            "enabled": True,
            "interval": "15s",
            # The exporter labels each GPU's series with the pod holding it (namespace, pod,
            # container); honorLabels keeps those instead of the exporter pod's own.
            "honorLabels": True,
            # Each GPU's series names its node, to join with kube_node_labels (pools on the dashboard).
            "relabelings": [dict(mon.DCGM_NODE_RELABELING)],
        },
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}},
    }


def adapter_values(ctx: Ctx) -> dict[str, Any]:
    return {
        "fullnameOverride": ADAPTER_SERVICE,
        "replicas": 2,
        "prometheus": {"url": PROMETHEUS_URL, "port": PROMETHEUS_PORT},
        "rules": {"default": False, "custom": [], "external": [], "existing": f"{ADAPTER_SERVICE}-rules"},
        "tls": {"enable": False},  # the chart would put the private key in its values; we mount the Secret
        "extraArguments": [f"--tls-cert-file={SERVING_CERT_DIR}/tls.crt",
                           f"--tls-private-key-file={SERVING_CERT_DIR}/tls.key"],
        "extraVolumes": [{"name": "serving-cert", "secret": {"secretName": ctx.settings.metrics_tls_secret}}],
        "extraVolumeMounts": [{"name": "serving-cert", "mountPath": SERVING_CERT_DIR, "readOnly": True}],
        "nodeSelector": render.system_node_selector(),
        "podDisruptionBudget": {"enabled": True, "maxUnavailable": 1},
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
    }


def apiservice_spec(ca_bundle: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "group": "custom.metrics.k8s.io",
        "version": "v1beta1",
        "service": {"name": ADAPTER_SERVICE, "namespace": MONITORING_NAMESPACE, "port": 443},
        "groupPriorityMinimum": 100,
        "versionPriority": 100,
        "insecureSkipTLSVerify": False,
    }
    if ca_bundle is not None:
        # The PEM file's exact bytes (one final newline), as the Ansible role encodes it: same value, no churn.
        spec["caBundle"] = base64.b64encode((ca_bundle.strip() + "\n").encode()).decode()
    # Without the CA in the stack the APIService fails closed (unavailable) until
    # `ansible-playbook playbooks/cluster.yml` sets caBundle; Pulumi never claims the field then,
    # so a later `pulumi up` leaves the role's value alone.
    return spec


def keda_values() -> dict[str, Any]:
    limits = {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}}
    return {"nodeSelector": render.system_node_selector(),
            "resources": {"operator": dict(limits), "metricServer": dict(limits)}}


def declare(ctx: Ctx, monitoring: k8s.core.v1.Namespace, prometheus: pulumi.Resource,
            keda_namespace: k8s.core.v1.Namespace | None) -> MetricsChain:
    chain = MetricsChain(ctx.release("dcgm-exporter", "dcgm-exporter", MONITORING_NAMESPACE, dcgm_values(ctx),
                                     [monitoring, prometheus]))
    if ctx.settings.metrics == "keda":
        deps: Sequence[pulumi.Resource] = [keda_namespace] if keda_namespace else []
        chain.keda = ctx.release("keda", "keda", KEDA_NAMESPACE, keda_values(), deps)
        return chain
    rules_cm = k8s.core.v1.ConfigMap(
        ctx.rname("adapter-rules"),
        metadata=meta(f"{ADAPTER_SERVICE}-rules", MONITORING_NAMESPACE),
        data={"config.yaml": yaml.safe_dump(render.adapter_rules(), sort_keys=True)},
        opts=ctx.child([monitoring]),
    )
    # Not awaited: its pods start once the Ansible role has written their Secret, which comes after
    # this `pulumi up` (the kubelet mounts it as soon as it exists).
    chain.adapter = ctx.release("prometheus-adapter", "prometheus-adapter", MONITORING_NAMESPACE, adapter_values(ctx),
                                [monitoring, rules_cm, prometheus], wait=False)
    chain.apiservice = k8s.apiregistration.v1.APIService(
        ctx.rname("custom-metrics-apiservice"), metadata=meta(CUSTOM_METRICS_APISERVICE),
        spec=apiservice_spec(ctx.settings.metrics_ca_bundle), opts=ctx.child([chain.adapter]),
    )
    return chain
