"""Pure, deterministic renderings the platform component declares: no Pulumi, no I/O.

Everything here is derived from the pool model (`ScalerConfig`) and `PlatformSettings`, so the same
stack always renders the same objects (the offline render snapshot can include them).
"""

from __future__ import annotations

from typing import Any, Final

import yaml

from gpuburst_platform import versions
from gpuburst_platform.settings import DRA_DRIVER_NAME
from scaler.core.config.settings import ScalerConfig
from scaler.core.model import keys
from scaler.core.model.objects import Taint
from scaler.core.scheduling import scoring as profiles

SCALER_NAME: Final = "gpuburst-scaler"
SCALER_CONFIG_DIR: Final = "/etc/gpuburst"
SCALER_CONFIG_FILE: Final = "config.yaml"
SCALER_PORT: Final = 8085  # metrics, /healthz, /readyz (scaler runtime)
NON_ROOT_UID: Final = 65532

SCHEDULER_NAME: Final = profiles.BINPACK.scheduler_name
SCHEDULER_CONFIG_FILE: Final = "scheduler-config.yaml"

# The per-pod metric the custom metrics API serves and the example HPA targets (percent, 0-100).
GPU_UTIL_METRIC: Final = "gpu_utilization"
PRIORITY_TRAINING: Final = "gpuburst-gpu-training"
PRIORITY_INFERENCE: Final = "gpuburst-gpu-inference"


# --- the scaler's configuration ---------------------------------------------------------------
def scaler_config_yaml(config: ScalerConfig) -> str:
    """The scaler's config file: the same validated pools that made the cloud groups.

    `scaler.core.config.settings.parse_config(yaml.safe_load(text), ...)` gives back an equal ScalerConfig.
    """
    data = config.model_dump(mode="json", by_alias=True, exclude_none=True)
    return yaml.safe_dump(data, sort_keys=True, default_flow_style=False)


# --- tolerations for what runs on GPU nodes ---------------------------------------------------
def gpu_taints(config: ScalerConfig) -> list[Taint]:
    """Every taint any GPU pool's nodes carry, sorted, without repeats."""
    seen = {t for pool in config.pools if pool.role == "gpu" for t in pool.node_taints()}
    return sorted(seen, key=lambda t: (t.key, t.value, t.effect))


def tolerations_for(taints: list[Taint]) -> list[dict[str, str]]:
    out = []
    for t in taints:
        if t.value:
            out.append({"key": t.key, "operator": "Equal", "value": t.value, "effect": t.effect})
        else:
            out.append({"key": t.key, "operator": "Exists", "effect": t.effect})
    return out


def gpu_daemonset_tolerations(config: ScalerConfig) -> list[dict[str, str]]:
    """A per-node agent on GPU nodes must tolerate every GPU pool's taints (min-gpus ones included)."""
    return tolerations_for(gpu_taints(config))


def single_gpu_pod_tolerations(config: ScalerConfig) -> list[dict[str, str]]:
    """What a 1-GPU pod tolerates: the GPU and spot taints, never a pool's min-gpus taint."""
    return tolerations_for([t for t in gpu_taints(config) if t.key != keys.TAINT_MIN_GPUS])


# --- which GPU agent runs where: the device plugin or the DRA driver -------------------------------
def dra_pool_names(config: ScalerConfig) -> list[str]:
    """The pools whose GPUs the NVIDIA DRA driver serves (`gpu_allocation: dra`), sorted."""
    return sorted(p.name for p in config.pools if p.dra)


def pool_affinity(pools: list[str], operator: str) -> dict[str, Any]:
    """Required node affinity on the pool label: `In` these pools, or `NotIn` them (nodes without the
    label, e.g. static GPU hosts, match NotIn). A node runs the device plugin or the DRA driver, never both."""
    term = {"key": keys.LABEL_POOL, "operator": operator, "values": pools}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [term]}]}}}


def dra_driver_values(config: ScalerConfig) -> dict[str, Any]:
    """The NVIDIA DRA driver chart's values: its GPU kubelet plugin on the DRA pools' nodes only,
    tolerating their taints; no ComputeDomain part (see gpuburst_platform/dra.py)."""
    pools = dra_pool_names(config)
    taints = {t for p in config.pools if p.dra for t in p.node_taints()}
    dynamic = any(p.dra and p.sharing is not None and p.sharing.dynamic for p in config.pools)
    return {
        "featureGates": versions.dra_driver_gates(dynamic),
        # Object names as the chart made them before its rename (settings.DRA_DRIVER_NAME).
        "nameOverride": DRA_DRIVER_NAME,
        # The chart ships GPU allocation behind this switch (its validation refuses gpus.enabled without it).
        "gpuResourcesEnabledOverride": True,
        "resources": {"gpus": {"enabled": True}, "computeDomains": {"enabled": False}},
        # The EKS AL2023 NVIDIA AMI, AKS and the Ansible nvidia_driver role install the driver on the host.
        "nvidiaDriverRoot": "/",
        # featureGates (above): the health check (an unhealthy device is tainted in the node's ResourceSlice), or
        # DynamicMIG in its place when a pool cuts its GPUs per claim (versions.py). GPUs shared by memory (consumable
        # capacity) are published by no pinned release (versions.DRA_DRIVER_SHARES_MEMORY_FROM).
        "kubeletPlugin": {
            "affinity": pool_affinity(pools, "In"),
            "tolerations": tolerations_for(sorted(taints, key=lambda t: (t.key, t.value, t.effect))),
            # The chart's NetworkPolicy: the plugin may reach the API server (TCP 443, 6443) and nothing else.
            "networkPolicy": {"enabled": True},
        },
        # No admission webhook (the chart's default): it needs cert-manager or a CA bundle, which the platform
        # does not run; a bad opaque device config in a claim then fails when the node prepares it.
    }


# --- security contexts ------------------------------------------------------------------------
def pod_security() -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "runAsUser": NON_ROOT_UID,
        "runAsGroup": NON_ROOT_UID,
        "fsGroup": NON_ROOT_UID,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security() -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }


def system_node_selector() -> dict[str, str]:
    return {keys.LABEL_ROLE: "system"}


# --- GPU metrics --------------------------------------------------------------------------------
# dcgm-exporter's default counters include both fields the chain reads: DCGM_FI_DEV_GPU_UTIL (reads 0
# on MIG instances) and DCGM_FI_PROF_GR_ENGINE_ACTIVE (a ratio, what a MIG slice reports instead).
# Per GPU (or MIG slice): GR_ENGINE_ACTIVE x 100 where the series is a MIG instance (GPU_I_ID set),
# GPU_UTIL elsewhere; then averaged over the pod's GPUs. `<<...>>` are the adapter's template marks.
GPU_UTIL_QUERY: Final = (
    "avg by (<<.GroupBy>>) ("
    '(DCGM_FI_PROF_GR_ENGINE_ACTIVE{<<.LabelMatchers>>,GPU_I_ID!=""} * 100)'
    ' or DCGM_FI_DEV_GPU_UTIL{<<.LabelMatchers>>,GPU_I_ID=""}'
    ")"
)


def adapter_rules() -> dict[str, Any]:
    """prometheus-adapter's config: one pods metric, `gpu_utilization`, per namespace/pod."""
    return {
        "rules": [{
            "seriesQuery": 'DCGM_FI_DEV_GPU_UTIL{namespace!="",pod!=""}',
            "resources": {"overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}},
            "name": {"matches": "^DCGM_FI_DEV_GPU_UTIL$", "as": GPU_UTIL_METRIC},
            "metricsQuery": GPU_UTIL_QUERY,
        }],
    }


def keda_query(namespace: str, pod_prefix: str) -> str:
    """The same reading as the adapter's rule, for one workload's pods (KEDA's Prometheus trigger)."""
    match = f'namespace="{namespace}",pod=~"{pod_prefix}-.*"'
    return (
        f'avg((DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{match},GPU_I_ID!=""}} * 100)'
        f' or DCGM_FI_DEV_GPU_UTIL{{{match},GPU_I_ID=""}})'
    )


# --- the bin-packing scheduler ------------------------------------------------------------------
def scheduler_configuration() -> dict[str, Any]:
    """Exactly the profile the simulator models (`scaler.core.scheduling.scoring.BINPACK`)."""
    return profiles.kube_scheduler_configuration(profiles.BINPACK)


def scheduler_config_yaml() -> str:
    return yaml.safe_dump(scheduler_configuration(), sort_keys=True, default_flow_style=False)
