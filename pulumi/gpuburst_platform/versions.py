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
    # The DRA driver for NVIDIA GPUs (driver gpu.nvidia.com; kubernetes-sigs/dra-driver-nvidia-gpu, formerly NVIDIA's
    # chart nvidia-dra-driver-gpu, renamed at 0.4.0, SemVer since): on pools with `gpu_allocation: dra` only. Published
    # as an OCI artifact on registry.k8s.io (its docs/install.md), image registry.k8s.io/dra-driver-nvidia/
    # dra-driver-nvidia-gpu:v<version> (the chart's default). The tests render it from tests/platform/charts/.
    "dra-driver-nvidia-gpu": Chart("oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu", "0.4.1", ""),
}

# The driver's feature gates (v0.4.1 pkg/featuregates/featuregates.go; every release of the renamed chart knows
# both, alpha and off by default). NVMLDeviceHealthCheck watches NVML for critical XIDs and a lost GPU and taints the
# device in the node's ResourceSlice (cmd/gpu-kubelet-plugin/device_health.go: gpu.nvidia.com/xid NoSchedule, or
# None for an XID it deems an application's; gpu.nvidia.com/gpu-lost NoSchedule; gpu.nvidia.com/unmonitored None):
# the device taints the scaler repairs on (scaler/core/config/repair.py). DynamicMIG publishes each Hopper GPU whole
# beside every MIG device it could hold (a pool's `gpu_sharing: {mig: {dynamic: true}}`, docs/gpu-sharing.md) and at
# startup deletes every MIG device no prepared claim holds, a boot layout's too. ValidateFeatureGates there refuses
# DynamicMIG beside NVMLDeviceHealthCheck, MPSSupport or PassthroughSupport, and PassthroughSupport beside
# NVMLDeviceHealthCheck; the platform sets neither MPSSupport nor PassthroughSupport.
DRA_DRIVER_HEALTH_GATE: Final = "NVMLDeviceHealthCheck"
DRA_DRIVER_DYNAMIC_MIG_GATE: Final = "DynamicMIG"
# The first release of the driver that publishes GPUs for several claims with consumable `memory` (a pool's
# `gpu_sharing: {memory: ...}`). Upstream has it as the alpha `ConsumableShares` gate with
# `--consumable-shares memory` (kubernetes-sigs/dra-driver-nvidia-gpu PR #1257, merged July 2026) on main only:
# v0.4.1 has no such gate and publishes no device with allowMultipleAllocations. Until a release with it is
# pinned, a stack declaring such a pool is refused.
DRA_DRIVER_SHARES_MEMORY_FROM: Final[str | None] = None


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("-", maxsplit=1)[0].split("."))


def dra_driver_gates(dynamic_mig: bool = False) -> dict[str, bool]:
    """The driver's feature gates the platform turns on: the health check, or DynamicMIG in its place when a pool
    cuts its GPUs per claim (the driver refuses to start with both)."""
    return {DRA_DRIVER_DYNAMIC_MIG_GATE if dynamic_mig else DRA_DRIVER_HEALTH_GATE: True}


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
