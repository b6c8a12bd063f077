"""What the planners read of the settings: a small frozen `PlanningContext`, made from the `ScalerConfig` by the
core's entry (`decide`), which alone takes the whole settings tree. Pure.

The planners take this context, or the one part of it a function needs (`Timings` for the deadlines and the
backoff, `ScaleDownSettings` for the idle history); what they never read (the cluster's name, the cloud,
`discover`, the catalogue, `runtime`) is not in it. A pool's repair settings travel with the pool
(`Pool.repair`), so repair needs none of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from scaler.core.config.pool import Pool
from scaler.core.config.settings import Limits, ScaleDownSettings, ScalerConfig, Timings
from scaler.core.planning.memo import Memo


@dataclass(frozen=True, slots=True)
class PlanningContext:
    """The settings one pass plans with."""

    pools: tuple[Pool, ...]  # every configured pool (consolidation's cheaper homes), in config order
    region: str  # the templates' region label
    spot_price_factor: float  # a spot pool's price: its list price times this (`price`)
    gang_label: str  # the pod label naming a gang (coscheduling)
    gang_min_annotation: str  # a gang's minimum, when no PodGroup gives it
    expander: Literal["price", "least-waste", "random"]  # which pool new nodes come from
    limits: Limits  # the cluster's caps on new nodes
    timings: Timings
    scale_down: ScaleDownSettings

    def price(self, pool: Pool) -> float:
        """The pool's price per hour of a node (`ScalerConfig.price`)."""
        return pool.hourly_price(self.spot_price_factor)


def planning_context(config: ScalerConfig, memo: Memo | None = None) -> PlanningContext:
    """The context of a pass on `config`. With a memo, the same object for as long as the config is the same
    (it is kept under the config's id, with the config: the id stays its own), so what the memo keeps under
    the context's id (`homes.Homes.kept`) is found again on the next pass."""
    def made() -> PlanningContext:
        return PlanningContext(
            pools=tuple(config.pools), region=config.region, spot_price_factor=config.spot_price_factor,
            gang_label=config.gang_label, gang_min_annotation=config.gang_min_annotation, expander=config.expander,
            limits=config.limits, timings=config.timings, scale_down=config.scale_down)

    if memo is None:
        return made()
    return memo.get(("context", id(config)), lambda: (config, made()))[1]
