"""The scaler, installed from our chart (charts/gpuburst-scaler) as one Helm release: its only definition.

The values come from the pool model and the stack: the config file is the validated `ScalerConfig`
that also made the cloud pools; the ServiceAccount carries the scaler's cloud identity (IRSA role ARN
or workload-identity client id, never a static key); the image is pinned by digest when the stack
gives one; only Prometheus' pods may reach its metrics port. What the chart renders from them
(non-root, read-only root, RBAC generated from `scaler.permissions`, PDB, ...) is in its README.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pulumi_kubernetes as k8s
import yaml

import pulumi
from gpuburst_platform import render
from gpuburst_platform.base import Ctx
from gpuburst_platform.prometheus import PROMETHEUS_POD_LABELS
from gpuburst_platform.settings import MONITORING_NAMESPACE

CHART_DIR = Path(__file__).resolve().parents[2] / "charts" / "gpuburst-scaler"
# Annotations / labels the clouds' identity webhooks read (spelled by AWS and Azure, not by us).
IRSA_ANNOTATION = "eks.amazonaws.com/role-arn"
WORKLOAD_IDENTITY_ANNOTATION = "azure.workload.identity/client-id"
WORKLOAD_IDENTITY_POD_LABEL = "azure.workload.identity/use"
# The scaler's environment variables the chart takes as named values (the rest go to extraEnv).
CHART_ENV: dict[str, dict[str, str]] = {
    "aws": {"GPUBURST_INTERRUPTION_QUEUE_URL": "interruptionQueueUrl"},
    "azure": {"AZURE_SUBSCRIPTION_ID": "subscriptionId", "GPUBURST_AZURE_RESOURCE_GROUP": "resourceGroup",
              "GPUBURST_AKS_CLUSTER": "aksCluster"},
}


def chart_path() -> str:
    """The chart's folder relative to where `pulumi up` runs the program: the same on every machine, so the
    Release's `chart` input never changes between a laptop and CI."""
    return os.path.relpath(CHART_DIR)


def chart_image(ref: str) -> dict[str, str]:
    """`repo:tag`, `repo@sha256:...` or `repo:tag@sha256:...` as the chart's image values."""
    name, _, digest = ref.partition("@")
    slash = name.rfind("/")
    repo, colon, tag = name.rpartition(":") if ":" in name[slash + 1:] else (name, "", "")
    return {"repository": repo if colon else name, "tag": tag, "digest": digest}


def values(ctx: Ctx, identity: pulumi.Input[str], service_account: str,
           env: Mapping[str, pulumi.Input[str]]) -> dict[str, Any]:
    """The chart's values: `env` is the stack's settings and outputs for the scaler (queue URL, AKS cluster)."""
    settings, cloud = ctx.settings, ctx.cloud
    rest: dict[str, pulumi.Input[str]] = {**settings.scaler_env, **env}
    named = CHART_ENV[cloud]
    section: dict[str, pulumi.Input[str]] = {("roleArn" if cloud == "aws" else "clientId"): identity}
    section.update({named[k]: rest.pop(k) for k in sorted(rest) if k in named})
    return {
        "image": chart_image(settings.scaler_image_ref()),
        "imagePullSecrets": [{"name": n} for n in settings.scaler_image_pull_secrets],
        "replicas": settings.scaler_replicas,
        "config": yaml.safe_load(render.scaler_config_yaml(ctx.config)),
        "serviceAccount": {"name": service_account},
        "dryRun": settings.scaler_dry_run,
        "nodeSelector": render.system_node_selector(),
        "networkPolicy": {"enabled": True, "prometheus": {"namespace": MONITORING_NAMESPACE,
                                                          "podLabels": dict(PROMETHEUS_POD_LABELS)}},
        cloud: section,
        "extraEnv": [{"name": k, "value": v} for k, v in sorted(rest.items())],
    }


def declare(ctx: Ctx, namespace: k8s.core.v1.Namespace, prometheus: pulumi.Resource, identity: pulumi.Input[str],
            service_account: str, env: Mapping[str, pulumi.Input[str]]) -> k8s.helm.v3.Release:
    return k8s.helm.v3.Release(
        ctx.rname("scaler"), name=render.SCALER_NAME, chart=chart_path(), namespace=ctx.scaler_namespace,
        values=values(ctx, identity, service_account, env), atomic=True, skip_await=False,
        cleanup_on_fail=True, timeout=600,
        opts=ctx.child([namespace, prometheus]),  # its ServiceMonitor needs the operator's CRDs
    )
