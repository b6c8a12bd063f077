"""Every chart and image the platform installs, pinned in one place.

Bump a version here and nowhere else; the tests read these too, so a bump shows in the pull
request's preview of every stack.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class Chart:
    chart: str
    version: str
    repo: str


CHARTS: Final[dict[str, Chart]] = {
    # Prometheus (operator, ServiceMonitor CRDs, kube-state-metrics, node-exporter).
    "kube-prometheus-stack": Chart("kube-prometheus-stack", "67.8.0", "https://prometheus-community.github.io/helm-charts"),
    # NVIDIA's DCGM exporter: per-GPU metrics attributed to the pod that holds the GPU.
    "dcgm-exporter": Chart("dcgm-exporter", "4.1.3", "https://nvidia.github.io/dcgm-exporter/helm-charts"),
    # The custom metrics API (metrics path "prometheus-adapter").
    "prometheus-adapter": Chart("prometheus-adapter", "4.11.0", "https://prometheus-community.github.io/helm-charts"),
    # KEDA (metrics path "keda"): ScaledObjects with a Prometheus trigger.
    "keda": Chart("keda", "2.16.1", "https://kedacore.github.io/charts"),
    # Kueue (`platform.kueue`): job queueing, its ProvisioningRequest admission check answered by gpuburst.
    # Published as an OCI artifact only: the chart is its full reference, there is no repository.
    "kueue": Chart("oci://registry.k8s.io/kueue/charts/kueue", "0.19.2", ""),
    # NVIDIA's DRA driver for GPUs (driver gpu.nvidia.com): on pools with `gpu_allocation: dra` only. The tests
    # render 25.12.0 from tests/platform/charts/ (../shared/charts holds 25.8.1 only).
    "nvidia-dra-driver-gpu": Chart("nvidia-dra-driver-gpu", "25.12.0", "https://helm.ngc.nvidia.com/nvidia"),
}

# The NVIDIA DRA driver's feature gates the platform turns on, each with the first driver release that knows it
# (the driver refuses an unknown gate at startup, so a gate is set only once the pinned chart knows it).
# NVMLDeviceHealthCheck (alpha, off by default) watches NVML for critical XIDs: in v25.12.0 the GPU kubelet plugin
# then withdraws the device from its ResourceSlice (until the plugin restarts); upstream main, in no 25.x release,
# taints it instead (gpu.nvidia.com/xid, gpu.nvidia.com/gpu-lost: the device taints the scaler repairs on,
# scaler/core/config/repair.py). Either way no new claim gets the broken GPU.
DRA_DRIVER_GATES: Final[dict[str, str]] = {"NVMLDeviceHealthCheck": "25.12.0"}
# The first release of the driver that publishes GPUs for several claims with consumable `memory` (a pool's
# `gpu_sharing: {memory: ...}`). Upstream has it as the alpha `ConsumableShares` gate with
# `--consumable-shares memory` (kubernetes-sigs/dra-driver-nvidia-gpu PR #1257, merged July 2026), in no
# release under ../shared/charts: until one is pinned, a stack declaring such a pool is refused.
DRA_DRIVER_SHARES_MEMORY_FROM: Final[str | None] = None
# The first release whose DynamicMIG gate publishes each Hopper GPU whole beside every MIG device it could hold (a
# pool's `gpu_sharing: {mig: {dynamic: true}}`, docs/gpu-sharing.md; alpha; kubernetes-sigs/dra-driver-nvidia-gpu
# pull request 1018 keeps A100s out of it). The gate is the whole kubelet plugin's: v25.12.0 refuses to start with
# it beside NVMLDeviceHealthCheck, MPSSupport or PassthroughSupport (pkg/featuregates/featuregates.go), and at
# startup deletes every MIG device no prepared claim holds, a boot layout's too (DestroyUnknownMIGDevices).
DRA_DRIVER_DYNAMIC_MIG_FROM: Final[str | None] = "25.12.0"
DRA_DRIVER_NOT_WITH_DYNAMIC_MIG: Final = frozenset({"NVMLDeviceHealthCheck", "MPSSupport", "PassthroughSupport"})


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("-", maxsplit=1)[0].split("."))


def dra_driver_gates(version: str, dynamic_mig: bool = False) -> dict[str, bool]:
    """The gates of DRA_DRIVER_GATES that the driver release `version` knows, each on; with `dynamic_mig` (a pool
    cuts its GPUs per claim), DynamicMIG instead of those the driver refuses beside it."""
    gates = {gate: True for gate, since in DRA_DRIVER_GATES.items() if _release(version) >= _release(since)
             and not (dynamic_mig and gate in DRA_DRIVER_NOT_WITH_DYNAMIC_MIG)}
    return {**gates, "DynamicMIG": True} if dynamic_mig else gates


def dra_driver_has(since: str | None, version: str) -> bool:
    """Whether the driver release `version` has a feature first released in `since` (None: in no release yet)."""
    return since is not None and _release(version) >= _release(since)


# kube-scheduler of the second (bin-packing) scheduler must match the cluster's minor version.
KUBE_SCHEDULER_REGISTRY: Final = "registry.k8s.io/kube-scheduler"
KUBE_SCHEDULER_PATCH: Final[dict[str, str]] = {
    "1.30": "v1.30.14",
    "1.31": "v1.31.10",
    "1.32": "v1.32.6",
    "1.33": "v1.33.2",
    "1.34": "v1.34.1",
    "1.35": "v1.35.3",
    "1.36": "v1.36.1",  # released 2026-05-13 (kubernetes.io/releases/1.36)
}


def kube_scheduler_image(kubernetes_version: str) -> str:
    """`1.31` or `1.31.4` -> the pinned (or given) kube-scheduler image of that minor version."""
    parts = kubernetes_version.removeprefix("v").split(".")
    minor = ".".join(parts[:2])
    if len(parts) >= 3 and all(p.isdigit() for p in parts[:3]):
        return f"{KUBE_SCHEDULER_REGISTRY}:v{'.'.join(parts[:3])}"
    if minor not in KUBE_SCHEDULER_PATCH:
        raise ValueError(
            f"kubernetes_version {kubernetes_version!r}: no kube-scheduler image pinned for it "
            f"(known: {', '.join(sorted(KUBE_SCHEDULER_PATCH))}); add it to gpuburst_platform/versions.py"
        )
    return f"{KUBE_SCHEDULER_REGISTRY}:{KUBE_SCHEDULER_PATCH[minor]}"
