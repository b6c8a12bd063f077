"""A pool's warm pool: instances launched ahead, kept stopped (or running) beside the pool, that become
nodes sooner than a cold launch because their boot, driver and image pulls are behind them.

On AWS it is the Auto Scaling group's warm pool (PutWarmPool with MinSize = MaxGroupPreparedCapacity =
`size`, so the pool holds exactly `size` instances whatever the group's desired size; the group launches a
replacement into it after each use, which boots and stops). AWS refuses a warm pool on a group with a
mixed instances policy or one that launches Spot Instances (PutWarmPool's API reference), so a warm pool
needs one on-demand instance type (gpuburst then launches from the template, without the policy).
Prepaid capacity is paid whether used or not: keep its nodes with `min` instead.

Azure is refused: AKS node pools have no fixed-size warm pool. `scaleDownMode: Deallocate` keeps every
node the pool scales in deallocated (no size, no refill, not on Spot), and standby pools attach to scale
sets of Flexible orchestration only, while AKS node pools are Uniform scale sets.

Standing cost: a stopped instance pays its root volume only (EBS gp3); a running one its full price. Pure.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from scaler.core.config.catalogue import Cloud
from scaler.core.config.specs import StrictModel
from scaler.core.model.errors import FieldError

WarmState = Literal["stopped", "running"]
# EBS gp3 in us-east-1: $0.08 per GiB-month, a month being 730 hours (the AWS pricing page's convention).
EBS_GIB_MONTH: Final = 0.08
HOURS_A_MONTH: Final = 730.0
# A running warm instance is up already: it becomes a node once its kubelet starts and registers.
RUNNING_START: Final = 30.0


class WarmPool(StrictModel):
    """`warm:` of a pool."""

    size: int = Field(ge=0, le=2**31 - 1, description="instances kept in the warm pool")
    state: WarmState = Field(default="stopped", description="stopped (root volume paid) or running (full price)")


def check_warm(warm: WarmPool, *, cloud: Cloud, capacity_type: str, instance_types: list[str],
               max_size: int) -> None:
    """Refuse what the cloud would refuse, naming the field."""
    if cloud == "azure":
        raise FieldError("warm", "AKS node pools have no fixed-size warm pool (scaleDownMode Deallocate keeps "
                                 "what was scaled in, standby pools serve Flexible scale sets only): drop warm")
    if warm.size > max_size:
        raise FieldError(("warm", "size"), f"{warm.size} is above the pool's max ({max_size}): the group could "
                                           "never use that many")
    if capacity_type == "spot":
        raise FieldError("warm", "AWS refuses a warm pool on a group that launches Spot Instances: put it on the "
                                 "spot pool's on-demand fallback")
    if capacity_type in ("reserved", "capacity-block"):
        raise FieldError("warm", f"a {capacity_type} pool is paid whether used or not: keep its nodes with min "
                                 "instead of a warm pool")
    if len(instance_types) > 1:
        raise FieldError("warm", "AWS refuses a warm pool on a group with a mixed instances policy, which "
                                 "several instance_types need: give one instance type")


def standing_price(warm: WarmPool, list_price: float, root_volume_gib: int) -> float:
    """What the warm pool costs an hour while nobody uses it."""
    if warm.state == "running":
        return warm.size * list_price
    return warm.size * root_volume_gib * EBS_GIB_MONTH / HOURS_A_MONTH


def instance_price(state: WarmState, list_price: float, root_volume_gib: int) -> float:
    """One warm instance's hourly price while it waits."""
    return standing_price(WarmPool(size=1, state=state), list_price, root_volume_gib)
