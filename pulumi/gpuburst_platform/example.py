"""The example users copy: a 1-GPU inference Deployment scaled on GPU utilisation (an HPA on the custom
metrics API, or a KEDA ScaledObject); its new pods make the scaler add nodes."""

from __future__ import annotations

from typing import Any

import pulumi_kubernetes as k8s

import pulumi
from gpuburst_platform import render
from gpuburst_platform.base import APP_LABEL, Ctx, meta
from gpuburst_platform.prometheus import PROMETHEUS_PORT, PROMETHEUS_URL
from scaler.core.model import keys

EXAMPLE_NAME = "gpu-inference-example"
MAX_REPLICAS = 20
SCALE_DOWN_WINDOW = 600  # s: GPU nodes take minutes to boot: scale up at once, scale down slowly


def pod_spec(ctx: Ctx) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "priorityClassName": render.PRIORITY_INFERENCE,
        "nodeSelector": {keys.LABEL_GPU_PRESENT: "true"},
        "tolerations": render.single_gpu_pod_tolerations(ctx.config),
        "securityContext": render.pod_security(),
        "containers": [{
            "name": "server",
            # A placeholder that holds one GPU: put your model server here (Triton, vLLM, ...).
            "image": ctx.settings.example_image,
            "command": ["sh", "-c", "nvidia-smi && exec sleep infinity"],
            "resources": {"requests": {"cpu": "2", "memory": "8Gi", keys.RES_GPU: "1"},
                          "limits": {"memory": "8Gi", keys.RES_GPU: "1"}},
            "securityContext": render.container_security(),
        }],
    }
    if ctx.settings.binpack_scheduler:
        spec["schedulerName"] = render.SCHEDULER_NAME
    return spec


def hpa_spec(target: int) -> dict[str, Any]:
    return {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": EXAMPLE_NAME},
        "minReplicas": 1,
        "maxReplicas": MAX_REPLICAS,
        "metrics": [{"type": "Pods", "pods": {
            "metric": {"name": render.GPU_UTIL_METRIC},
            "target": {"type": "AverageValue", "averageValue": str(target)},
        }}],
        "behavior": {"scaleDown": {"stabilizationWindowSeconds": SCALE_DOWN_WINDOW}},
    }


def scaled_object_spec(namespace: str, target: int) -> dict[str, Any]:
    return {
        "scaleTargetRef": {"name": EXAMPLE_NAME},
        # Back to 0 when its GPUs sit idle for the cooldown; from 0 only by hand (no pod, no metric).
        "minReplicaCount": 0,
        "cooldownPeriod": SCALE_DOWN_WINDOW,
        "maxReplicaCount": MAX_REPLICAS,
        "advanced": {"horizontalPodAutoscalerConfig": {
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": SCALE_DOWN_WINDOW}}}},
        "triggers": [{
            "type": "prometheus",
            "metricType": "Value",
            "metadata": {
                "serverAddress": f"{PROMETHEUS_URL}:{PROMETHEUS_PORT}",
                "query": render.keda_query(namespace, EXAMPLE_NAME),
                "threshold": str(target),
            },
        }],
    }


def declare(ctx: Ctx, namespace: k8s.core.v1.Namespace, priority_classes: list[pulumi.Resource],
            serving: list[pulumi.Resource]) -> pulumi.Resource:
    """`serving`: what serves the metric (the APIService or KEDA), so the autoscaler comes after it."""
    ns, labels = ctx.settings.example_namespace, {APP_LABEL: EXAMPLE_NAME}
    # Parked at 0 replicas, so an idle cluster keeps no GPU node for it: `kubectl scale --replicas=1`
    # starts it and the autoscaler takes over. The autoscaler owns replicas from then on.
    deployment = k8s.apps.v1.Deployment(
        ctx.rname("example-inference"), metadata=meta(EXAMPLE_NAME, ns, **labels),
        spec={"replicas": 0, "selector": {"matchLabels": labels},
              "template": {"metadata": {"labels": labels}, "spec": pod_spec(ctx)}},
        opts=pulumi.ResourceOptions.merge(ctx.child([namespace, *priority_classes]),
                                          pulumi.ResourceOptions(ignore_changes=["spec.replicas"])),
    )
    target = ctx.settings.gpu_utilization_target
    if ctx.settings.metrics == "prometheus-adapter":
        return k8s.autoscaling.v2.HorizontalPodAutoscaler(
            ctx.rname("example-hpa"), metadata=meta(EXAMPLE_NAME, ns, **labels), spec=hpa_spec(target),
            opts=ctx.child([deployment, *serving]),
        )
    return k8s.apiextensions.CustomResource(
        ctx.rname("example-scaledobject"), api_version="keda.sh/v1alpha1", kind="ScaledObject",
        metadata=meta(EXAMPLE_NAME, ns, **labels), spec=scaled_object_spec(ns, target),
        opts=ctx.child([deployment, *serving]),
    )
