"""The sim provider's warm pools, as an Auto Scaling group keeps one (scaler.core.config.warm).

A pool's warm pool holds `size` instances beside the group (ready, stopped, when the simulation starts). A
scale-out takes ready warm instances first, each a Ready node `timings.warm_start` seconds later (a running
warm pool's: `RUNNING_START`), and the group launches a replacement into the warm pool at once, which boots
(paid at full price, its GPUs paid) and then waits stopped (its root volume paid) or running (full price).
The provider's `warm_history` keeps every warm instance for the bill (`warm_cost`, `warm_gpu_hours`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from scaler.core.config.pool import Pool
from scaler.core.config.warm import RUNNING_START, instance_price


@dataclass(slots=True)
class WarmInstance:
    """One instance of a warm pool: launched (and paid in full) until `ready_at`, then waiting at `idle_price`
    until a scale-out takes it (`taken_at`)."""

    provider_id: str
    pool: str
    zone: str
    gpus: int
    full_price: float
    idle_price: float
    launched_at: float
    ready_at: float
    taken_at: float | None = None

    def cost(self, until: float) -> float:
        """Dollars paid up to `until`: its boot at full price, then its wait."""
        end = min(self.taken_at if self.taken_at is not None else until, until)
        boot = max(min(self.ready_at, end) - self.launched_at, 0.0)
        return (boot * self.full_price + max(end - self.ready_at, 0.0) * self.idle_price) / 3600

    def gpu_seconds(self, until: float, running: bool) -> float:
        """GPU-seconds paid: its boot, and its wait when running."""
        end = min(self.taken_at if self.taken_at is not None else until, until)
        paid_until = end if running else min(self.ready_at, end)
        return self.gpus * max(paid_until - self.launched_at, 0.0)

    @classmethod
    def launch(cls, provider_id: str, pool: Pool, zone: str, price: float, now: float, boot: float) -> WarmInstance:
        assert pool.warm is not None
        idle = instance_price(pool.warm.state, price, pool.root_volume_gib)
        return cls(provider_id, pool.name, zone, pool.gpus, price, idle, now, now + boot)


def refill_zones(pool: Pool, have: int, launched: int) -> list[str]:
    """The zones of the instances that bring the pool's warm pool back to its size, in turn."""
    missing = (pool.warm.size if pool.warm is not None else 0) - have
    return [pool.zones[(launched + i) % len(pool.zones)] for i in range(max(missing, 0))]


def warm_cost(history: Iterable[WarmInstance], until: float) -> float:
    """Dollars the warm pools cost up to `until` (boots in full, waits at their idle price)."""
    return sum(w.cost(until) for w in history)


def warm_gpu_hours(history: Iterable[WarmInstance], running: set[str], until: float) -> float:
    """GPU-hours the warm pools paid: every boot, and the waits of the `running` pools' instances."""
    return sum(w.gpu_seconds(until, w.pool in running) for w in history) / 3600


def take_ready(warm: list[WarmInstance], now: float) -> WarmInstance | None:
    """The warm instance a scale-out takes (the longest ready), out of the pool; None when none is ready."""
    ready = [w for w in warm if w.ready_at <= now]
    if not ready:
        return None
    w = min(ready, key=lambda x: x.ready_at)
    w.taken_at = now
    warm.remove(w)
    return w


def warm_start_of(pool: Pool, stopped: float) -> float:
    """Seconds from taking one of the pool's warm instances to a Ready node."""
    return RUNNING_START if pool.warm is not None and pool.warm.state == "running" else stopped
