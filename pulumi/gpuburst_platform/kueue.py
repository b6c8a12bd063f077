"""Kueue wired to gpuburst, as plain data: the ProvisioningRequest CRD the scaler serves, Kueue's chart values,
a ProvisioningRequestConfig and an AdmissionCheck that ask gpuburst for capacity, and a GPU ClusterQueue
whose quota is what the GPU pools can hold (their max x GPUs per node), so Kueue never admits more than the
scaler could ever add.

A workload queued there is admitted only when its ProvisioningRequest (class
best-effort-atomic-scale-up.autoscaling.x-k8s.io) is Provisioned: when every node it needs is up.
`examples/kueue-gpu-job.yaml` is the worked example (a batch Job of 4 x 8-GPU pods).

Everything but `declare` is plain data (tests/platform/test_kueue.py reads it); `declare` makes it
resources of the platform component.
"""

from __future__ import annotations

from typing import Any

import pulumi_kubernetes as k8s

import pulumi
from gpuburst_platform import render
from gpuburst_platform.base import Ctx
from gpuburst_platform.settings import KUEUE_NAMESPACE
from gpuburst_platform.versions import CHARTS
from scaler.core.config.settings import ScalerConfig
from scaler.core.model import keys
from scaler.core.planning.provreq import ATOMIC_SCALE_UP, CLASSES

KUEUE_API = "kueue.x-k8s.io/v1beta2"
ADMISSION_CHECK = "gpuburst"
PROVREQ_CONFIG = "gpuburst"
GPU_FLAVOR = "gpuburst-gpu"
GPU_QUEUE = "gpuburst-gpu"
KUEUE_IMAGE = "registry.k8s.io/kueue/kueue"
# Kueue's controller for ProvisioningRequest admission checks (spelled by Kueue).
PROVREQ_CONTROLLER = "kueue.x-k8s.io/provisioning-request"


def kueue_values(node_selector: dict[str, str], version: str) -> dict[str, Any]:
    return {
        "controllerManager": {
            "nodeSelector": node_selector,
            "manager": {"image": {"repository": KUEUE_IMAGE, "tag": f"v{version}", "pullPolicy": "IfNotPresent"}},
        },
    }


def _str(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **extra}


def provisioning_request_crd() -> dict[str, Any]:
    """autoscaling.x-k8s.io/v1 ProvisioningRequest: the fields the scaler reads and writes (its status through
    the status subresource). The API is cluster-autoscaler's; this definition is written from its documented
    shape, for clusters that do not run cluster-autoscaler."""
    condition = {"type": "object", "required": ["type", "status", "lastTransitionTime", "reason", "message"],
                 "properties": {
                     "type": _str("Accepted, Provisioned, Failed, BookingExpired or CapacityRevoked", maxLength=316),
                     "status": _str("True, False or Unknown", enum=["True", "False", "Unknown"]),
                     "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
                     "lastTransitionTime": _str("when the condition last changed", format="date-time"),
                     "reason": _str("CamelCase reason", maxLength=1024, minLength=1),
                     "message": _str("human-readable detail", maxLength=32768)}}
    spec = {"type": "object", "required": ["podSets", "provisioningClassName"],
            "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "Value is immutable"}],
            "properties": {
                "podSets": {"type": "array", "minItems": 1, "maxItems": 32, "items": {
                    "type": "object", "required": ["count", "podTemplateRef"],
                    "properties": {
                        "count": {"type": "integer", "format": "int32", "minimum": 1},
                        "podTemplateRef": {"type": "object", "required": ["name"], "properties": {
                            "name": _str("a PodTemplate in the request's namespace", maxLength=253, minLength=1)}},
                    }}},
                "provisioningClassName": _str(f"served by gpuburst: {', '.join(CLASSES)}", maxLength=253,
                                              minLength=1),
                "parameters": {"type": "object", "maxProperties": 100,
                               "additionalProperties": {"type": "string", "maxLength": 255}},
            }}
    status = {"type": "object", "properties": {
        "conditions": {"type": "array", "items": condition, "x-kubernetes-list-map-keys": ["type"],
                       "x-kubernetes-list-type": "map"},
        "provisioningClassDetails": {"type": "object", "maxProperties": 64,
                                     "additionalProperties": {"type": "string", "maxLength": 32768}},
    }}
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "provisioningrequests.autoscaling.x-k8s.io"},
        "spec": {
            "group": "autoscaling.x-k8s.io", "scope": "Namespaced",
            "names": {"kind": "ProvisioningRequest", "listKind": "ProvisioningRequestList",
                      "plural": "provisioningrequests", "singular": "provisioningrequest", "shortNames": ["provreq"]},
            "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                          "schema": {"openAPIV3Schema": {"type": "object", "required": ["spec"], "properties": {
                              "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                              "metadata": {"type": "object"}, "spec": spec, "status": status}}}}],
        },
    }


def gpu_quota(config: ScalerConfig) -> dict[str, int]:
    """What the GPU pools can hold at their max: GPUs, cpu (cores) and memory (GiB) of their nodes'
    allocatable, capped by limits.max_gpus; Kueue admits no more than the scaler could ever add."""
    gpus = cpu = mem = 0
    for pool in config.pools:
        if pool.role != "gpu":
            continue
        alloc = pool.allocatable()
        gpus += pool.max_size * pool.gpus
        cpu += pool.max_size * alloc[keys.RES_CPU] // 1000
        mem += pool.max_size * alloc[keys.RES_MEMORY] // 2**30
    if config.limits.max_gpus is not None:
        gpus = min(gpus, config.limits.max_gpus)
    return {keys.RES_GPU: gpus, keys.RES_CPU: cpu, keys.RES_MEMORY: mem}


def queue_objects(config: ScalerConfig, example_namespace: str) -> list[dict[str, Any]]:
    """ProvisioningRequestConfig, AdmissionCheck, ResourceFlavor, ClusterQueue and a LocalQueue in the
    example namespace."""
    quota = gpu_quota(config)
    meta = {"labels": {"app.kubernetes.io/part-of": "gpuburst"}}
    return [
        {"apiVersion": KUEUE_API, "kind": "ProvisioningRequestConfig",
         "metadata": {"name": PROVREQ_CONFIG, **meta},
         "spec": {"provisioningClassName": ATOMIC_SCALE_UP, "managedResources": [keys.RES_GPU]}},
        {"apiVersion": KUEUE_API, "kind": "AdmissionCheck", "metadata": {"name": ADMISSION_CHECK, **meta},
         "spec": {"controllerName": PROVREQ_CONTROLLER, "parameters": {
             "apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": PROVREQ_CONFIG}}},
        {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": GPU_FLAVOR, **meta},
         "spec": {"nodeLabels": {keys.LABEL_GPU_PRESENT: "true"}}},
        {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": GPU_QUEUE, **meta},
         "spec": {
             "namespaceSelector": {},
             "resourceGroups": [{"coveredResources": [keys.RES_CPU, keys.RES_MEMORY, keys.RES_GPU], "flavors": [{
                 "name": GPU_FLAVOR, "resources": [
                     {"name": keys.RES_CPU, "nominalQuota": str(quota[keys.RES_CPU])},
                     {"name": keys.RES_MEMORY, "nominalQuota": f"{quota[keys.RES_MEMORY]}Gi"},
                     {"name": keys.RES_GPU, "nominalQuota": str(quota[keys.RES_GPU])}]}]}],
             "admissionChecksStrategy": {"admissionChecks": [{"name": ADMISSION_CHECK}]},
         }},
        {"apiVersion": KUEUE_API, "kind": "LocalQueue",
         "metadata": {"name": GPU_QUEUE, "namespace": example_namespace, **meta},
         "spec": {"clusterQueue": GPU_QUEUE}},
    ]


def declare(ctx: Ctx, namespace: k8s.core.v1.Namespace, example_ns: k8s.core.v1.Namespace | None) -> pulumi.Resource:
    """Kueue, the ProvisioningRequest CRD gpuburst serves, and the queue objects wired to it."""
    crd = k8s.apiextensions.v1.CustomResourceDefinition(
        ctx.rname("provreq-crd"), **{k: v for k, v in provisioning_request_crd().items()
                                     if k in ("metadata", "spec")}, opts=ctx.child())
    release = ctx.release("kueue", "kueue", KUEUE_NAMESPACE,
                          kueue_values(render.system_node_selector(), CHARTS["kueue"].version), [namespace, crd])
    deps: list[pulumi.Resource] = [release, *([example_ns] if example_ns else [])]
    for obj in queue_objects(ctx.config, ctx.settings.example_namespace):
        kind = obj["kind"]
        k8s.apiextensions.CustomResource(
            ctx.rname(f"kueue-{kind.lower()}"), api_version=obj["apiVersion"], kind=kind,
            metadata=obj["metadata"], spec=obj["spec"], opts=ctx.child(deps),
        )
    return release
