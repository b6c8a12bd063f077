"""`simulate --warm SIZE`: warm pools on the pools that may have one, and their bill in the report.

The pools that get one: the cheapest of the pools that may have one (scaler.core.config.warm: AWS, on-demand,
one instance type) with 1-GPU nodes; on examples/pools-aws.yaml gpu1-od-a and gpu1-od-b (g6.xlarge). A warm
instance is on-demand, the expander starts one before any cold node, and a pod that starts on it runs there
to its end: on the multi-GPU pools that is hours of training at 2.5 times the spot price to save a few
minutes of boot, on a larger 1-GPU shape several times a g6.xlarge spot node's price; a 1-GPU pod waiting
for a boot is what a warm pool is for. The size is capped at each pool's max.
"""

from __future__ import annotations

from typing import Any

from scaler.core.config.pool import Pool
from scaler.core.config.settings import ScalerConfig
from scaler.core.config.warm import WarmPool
from scaler.providers.sim_warm import warm_cost, warm_gpu_hours
from scaler.sim.records import SimResult


def may_have_warm(pool: Pool) -> bool:
    return (pool.cloud == "aws" and pool.gpus == 1 and pool.capacity_type == "on-demand"
            and len(pool.instance_types) == 1)


def with_warm(config: ScalerConfig, size: int) -> ScalerConfig:
    """The config with a warm pool of `size` (stopped) on the pools that get one; ValueError when none may."""
    able = [p for p in config.pools if may_have_warm(p)]
    if not able:
        raise ValueError("no pool takes a warm pool (an AWS on-demand pool of 1-GPU nodes, one instance type)")
    cheapest = min(config.price(p) for p in able)
    chosen = {p.name for p in able if config.price(p) == cheapest}
    return config.model_copy(update={"pools": [
        p.model_copy(update={"warm": WarmPool(size=min(size, p.max_size))}) if p.name in chosen else p
        for p in config.pools]})


def warm_section(result: SimResult, end: float) -> dict[str, Any]:
    """The warm pools' bill: every instance launched into one (its boot paid in full, then its wait), and how
    many a scale-out started."""
    history = result.provider.warm_history
    running = {p.name for p in result.config.pools if p.warm is not None and p.warm.state == "running"}
    sizes = {p.name: p.warm.size for p in result.config.pools if p.warm is not None and p.warm.size}
    return {"pools": sizes, "instances": len(history),
            "started": sum(1 for w in history if w.taken_at is not None),
            "cost_usd": round(warm_cost(history, end), 2),
            "paid_gpu_hours": round(warm_gpu_hours(history, running, end), 1)}
