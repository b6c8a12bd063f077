"""A pool's GPU repair settings: which signals make a node unhealthy, after how long, and the budget.

Defaults are what a user of the NVIDIA stack on EKS / AKS expects: a node whose device plugin advertises
fewer GPUs (or MIG devices) than its capacity for 10 minutes (a GPU fell off the bus, an XID 79), a
health condition held for 10 minutes (`AcceleratedHardwareReady=False`, EKS's node monitoring agent's
"Repair after 10m"; `GpuXidError=True`, a node-problem-detector rule), a DRA GPU tainted by the NVIDIA DRA
driver's health checks (`gpu.nvidia.com/xid`, `gpu.nvidia.com/gpu-lost`) for 10 minutes, NotReady for 30 minutes (EKS
auto repair's Ready timeout). At most 20 % of a pool's nodes are in repair at once (EKS and Karpenter
stop at 20 % unhealthy): a broken driver rollout must not drain the fleet. A node whose pods still run on
its healthy GPUs is drained when that loses less work than the dead GPUs have stood idle, or after
`max_hold` at the latest (scaler.core.planning.repair). Pure.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from scaler.core.config.specs import StrictModel
from scaler.core.model import keys

ConditionStatus = Literal["True", "False", "Unknown"]
WEEK = 7 * 86400.0

DEFAULT_CONDITIONS: dict[str, ConditionStatus] = {"AcceleratedHardwareReady": "False", "GpuXidError": "True"}
# DRA device taint keys the NVIDIA DRA driver sets on a GPU's health events (issue 39).
DEFAULT_DEVICE_TAINTS = [keys.DEVICE_TAINT_GPU_XID, keys.DEVICE_TAINT_GPU_LOST]


class RepairSpec(StrictModel):
    """`repair:` of a pool. A grace of 0 repairs at the first pass that sees the signal."""

    enabled: bool = True
    # A node advertising fewer GPU devices than its capacity for this long is unhealthy.
    lost_gpu_grace: float = Field(default=600, ge=0, le=WEEK)
    # Node condition type -> the status that means unhealthy, held for condition_grace.
    conditions: dict[str, ConditionStatus] = Field(default_factory=lambda: dict(DEFAULT_CONDITIONS))
    condition_grace: float = Field(default=600, ge=0, le=WEEK)
    # DRA: a device of the node tainted NoSchedule or NoExecute with one of these keys (its ResourceSlice or a
    # DeviceTaintRule), held for condition_grace, is a broken GPU too.
    device_taints: list[str] = Field(default_factory=lambda: list(DEFAULT_DEVICE_TAINTS))
    # Ready not True for this long (the instance still exists: a gone instance is the cloud's).
    not_ready_timeout: float = Field(default=1800, ge=0, le=WEEK)
    # At most this share of the pool's nodes in repair at once (at least one node while above 0).
    max_unhealthy_percent: float = Field(default=20, ge=0, le=100)
    max_per_pass: int = Field(default=1, ge=1, le=1000)
    # The longest a node that lost GPU devices is kept for the pods still running on its healthy ones, from the
    # signal's start: then it is drained whatever its pods lose. 0: drained as soon as the grace ends.
    max_hold: float = Field(default=4 * 3600, ge=0, le=WEEK)
    # Opt-in: a pod provably on the broken GPU (its status reports one of its devices Unhealthy, or it holds every
    # GPU device of the node, so whichever broke was one of its) is deleted (its grace period honoured) at the
    # repair's start instead of evicted, so its PodDisruptionBudget cannot hold a broken node. Other pods are always
    # evicted with their budgets honoured.
    force_evict: bool = False

    def graces(self) -> dict[str, float]:
        return {"lost_gpu_grace": self.lost_gpu_grace, "condition_grace": self.condition_grace,
                "not_ready_timeout": self.not_ready_timeout}

    def budget(self, nodes: int) -> int:
        """Nodes of a pool of `nodes` that may be in repair at once."""
        if self.max_unhealthy_percent <= 0 or nodes <= 0:
            return 0
        return max(1, int(nodes * self.max_unhealthy_percent / 100))
