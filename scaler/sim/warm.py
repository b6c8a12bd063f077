"""`simulate --warm SIZE`: warm pools on the pools that may have one, and their bill in the report.

The pools that may have one (scaler.core.config.warm): AWS GPU pools of on-demand capacity with one instance
type; on examples/pools-aws.yaml the on-demand GPU pools (gpu1-od-*, gpu1m-od-*, gpu1l-od-*, gpu4-od-*,
gpu8-od-*). Their size is capped at each pool's max.
"""

from __future__ import annotations

from typing import Any

from scaler.core.config.pool import Pool
from scaler.core.config.settings import ScalerConfig
from scaler.core.config.warm import WarmPool
from scaler.providers.sim_warm import warm_cost, warm_gpu_hours
from scaler.sim.records import SimResult


def may_have_warm(pool: Pool) -> bool:
    return (pool.cloud == "aws" and pool.gpus > 0 and pool.capacity_type == "on-demand"
            and len(pool.instance_types) == 1)


def with_warm(config: ScalerConfig, size: int) -> ScalerConfig:
    """The config with a warm pool of `size` (stopped) on each pool that may have one; ValueError when none may."""
    if not any(may_have_warm(p) for p in config.pools):
        raise ValueError("no pool may have a warm pool (an AWS on-demand GPU pool of one instance type)")
    return config.model_copy(update={"pools": [
        p.model_copy(update={"warm": WarmPool(size=min(size, p.max_size))}) if may_have_warm(p) else p
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


def warm_lines(section: dict[str, Any] | None, width: int) -> list[str]:
    if not section:
        return []
    return [f"  {'warm_pools':<{width}}  pools={len(section['pools'])} instances={section['instances']} "
            f"started={section['started']} cost_usd={section['cost_usd']} paid_gpu_hours={section['paid_gpu_hours']}"]
