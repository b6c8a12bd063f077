"""Prepaid capacity in a simulation: what reserved pools and Capacity Blocks cost, how much of them was used,
and the jobs moved off a block before EC2 took it back.

A prepaid pool is paid for its whole window whether used or not: its `max` nodes (the reservation's
instance count) x the window's hours x the pool's list price. A Capacity Block's window is its start to
its end; a reserved pool's is the whole run. Its instances are therefore priced at zero by the provider
(the planner's marginal price) and the window's charge is added once, here.

Use: the GPUs the pods on the pool's nodes hold, integrated over time. `utilisation` is used GPU-hours over
paid GPU-hours in the window; `utilisation_while_pending` the same over the time the block could take new
nodes (from its start to `min_remaining` or the drain lead before its end) and a pod it fits was pending,
the acceptance figure of issue 25 (a block left idle while pods wait for spot would show there).
Moved off: jobs whose pods were evicted from a block's node once its drain lead had begun; lost: jobs whose
pods were still running on it when EC2 terminated its instances (30 minutes before the end).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scaler.core.config.pool import Pool
from scaler.core.config.reservation import show_time
from scaler.core.model.objects import Node, Pod
from scaler.core.model.workload import gpu_devices, is_daemonset


def window(pool: Pool, end: float) -> tuple[float, float]:
    """The paid window of a prepaid pool in a run that ended at `end`: a block's dates, else the whole run."""
    r = pool.reservation
    if pool.capacity_type == "capacity-block" and r is not None and r.start is not None and r.end is not None:
        return r.start, r.end
    return 0.0, end


def check_blocks(pools: Iterable[Pool], first_submit: float, last_end: float) -> None:
    """A Capacity Block whose window misses the trace's time (real dates, where the simulator counts seconds from
    the trace's start; or a window that closes before the first job or opens after the last one ends) would be
    paid for without ever serving a pod: ValueError naming the pool's field."""
    for pool in pools:
        r = pool.reservation
        if pool.capacity_type != "capacity-block" or r is None or r.start is None or r.end is None:
            continue
        if r.window_closes() <= first_submit or r.start >= last_end:
            raise ValueError(f"pools[{pool.name}].reservation: the block takes nodes from {show_time(r.start)} to "
                             f"{show_time(r.window_closes())} and the trace's jobs run from {first_submit:g} s to "
                             f"{last_end:g} s: it would be paid for and never used (the simulator's times are "
                             "seconds from the trace's start, not dates)")


def usable(pool: Pool, now: float) -> bool:
    """Whether the planner may put new nodes on the pool now (a block between its start and its closing)."""
    r = pool.reservation
    if pool.capacity_type != "capacity-block" or r is None or r.start is None or r.end is None:
        return True
    return r.start <= now < r.window_closes()


def block_times(pools: Iterable[Pool]) -> list[float]:
    """The times the planner decides differently about a Capacity Block on its own: its start, its closing to
    new nodes, the start of its drain (the engine runs a pass then even when nothing else happened)."""
    out = []
    for pool in pools:
        r = pool.reservation
        if pool.capacity_type == "capacity-block" and r is not None and r.start is not None and r.end is not None:
            out += [r.start, r.window_closes(), r.end - r.drain_lead]
    return out


@dataclass(slots=True)
class PrepaidUse:
    """Fed by the engine: nodes registered on prepaid pools, samples of the cluster, evictions, lost nodes."""

    pools: dict[str, Pool]
    nodes: dict[str, str] = field(default_factory=dict)  # node name -> prepaid pool
    used_s: dict[str, float] = field(default_factory=dict)  # pool -> GPU-seconds the pods held
    pending_used_s: dict[str, float] = field(default_factory=dict)  # the same while a pod it fits waited
    pending_paid_s: dict[str, float] = field(default_factory=dict)  # the block's GPU-seconds meanwhile
    moved_off: dict[str, set[str]] = field(default_factory=dict)  # pool -> job ids
    lost: dict[str, set[str]] = field(default_factory=dict)
    _last: float = 0.0
    _held: dict[str, int] = field(default_factory=dict)
    _waiting: dict[str, bool] = field(default_factory=dict)

    @classmethod
    def of(cls, pools: Iterable[Pool]) -> PrepaidUse:
        return cls({p.name: p for p in pools if p.prepaid})

    def registered(self, node: str, pool: str) -> None:
        if pool in self.pools:
            self.nodes[node] = pool

    def sample(self, now: float, nodes: Mapping[str, Node], pending: Mapping[str, Pod]) -> None:
        """Integrate what was held since the last sample, then read what is held and waiting now."""
        if not self.pools:
            return
        dt = max(now - self._last, 0.0)
        for name, pool in self.pools.items():
            held = self._held.get(name, 0) * dt
            self.used_s[name] = self.used_s.get(name, 0.0) + held
            if self._waiting.get(name):
                self.pending_used_s[name] = self.pending_used_s.get(name, 0.0) + held
                self.pending_paid_s[name] = self.pending_paid_s.get(name, 0.0) + pool.max_size * pool.gpus * dt
        self._last = now
        self._held = dict.fromkeys(self.pools, 0)
        for node_name, pool_name in list(self.nodes.items()):
            node = nodes.get(node_name)
            if node is None:
                del self.nodes[node_name]
                continue
            self._held[pool_name] += sum(gpu_devices(p.requests) for p in node.pods if not is_daemonset(p))
        for name, pool in self.pools.items():
            self._waiting[name] = usable(pool, now) and any(
                pool.min_pod_gpus <= gpu_devices(p.requests) <= pool.gpus and gpu_devices(p.requests) > 0
                for p in pending.values())

    def evicted(self, pod: Pod, job_id: str, now: float) -> None:
        """A pod evicted from a block's node after its drain began was moved off the ending block."""
        pool = self.pools.get(self.nodes.get(pod.node_name or "", ""))
        r = pool.reservation if pool is not None else None
        if pool is not None and r is not None and r.end is not None and now >= r.end - r.drain_lead:
            self.moved_off.setdefault(pool.name, set()).add(job_id)

    def ended(self, node: Node | None, job_of: Mapping[str, Any]) -> None:
        """EC2 terminated a block's node: the jobs of the pods still on it were not moved off in time."""
        pool = self.nodes.get(node.name) if node is not None else None
        if node is None or pool is None:
            return
        for pod in node.pods:
            if not is_daemonset(pod) and pod.key in job_of:
                self.lost.setdefault(pool, set()).add(job_of[pod.key].job.job_id)


def charges(pools: Iterable[Pool], end: float, spot_price_factor: float) -> dict[str, tuple[float, float]]:
    """Prepaid pool -> (GPU-hours, dollars) paid for its window, used or not."""
    out = {}
    for pool in pools:
        if pool.prepaid:
            start, stop = window(pool, end)
            hours = max(stop - start, 0.0) / 3600
            out[pool.name] = (pool.max_size * pool.gpus * hours,
                              pool.max_size * hours * pool.list_price(spot_price_factor))
    return out


def section(use: PrepaidUse | None, pools: Iterable[Pool], end: float, spot_price_factor: float) -> dict[str, Any]:
    """The report's `prepaid` entry: per prepaid pool, its window, what it cost, its use, the jobs moved off."""
    out: dict[str, Any] = {}
    by_name = {p.name: p for p in pools}
    for name, (gpu_hours, dollars) in charges(by_name.values(), end, spot_price_factor).items():
        pool = by_name[name]
        start, stop = window(pool, end)
        used = (use.used_s.get(name, 0.0) if use else 0.0) / 3600
        p_used = (use.pending_used_s.get(name, 0.0) if use else 0.0) / 3600
        p_paid = (use.pending_paid_s.get(name, 0.0) if use else 0.0) / 3600
        out[name] = {
            "capacity_type": pool.capacity_type, "nodes": pool.max_size, "window_s": [start, stop],
            "paid_gpu_hours": round(gpu_hours, 1), "cost_usd": round(dollars, 2),
            "used_gpu_hours": round(used, 1), "utilisation": round(used / gpu_hours, 4) if gpu_hours else None,
            "utilisation_while_pending": round(p_used / p_paid, 4) if p_paid else None,
            "pending_hours": round(p_paid / (pool.max_size * pool.gpus), 2) if p_paid else 0.0,
            "jobs_moved_off": len(use.moved_off.get(name, ())) if use else 0,
            "jobs_lost_at_end": sorted(use.lost.get(name, ())) if use else [],
        }
    return out


def summary_lines(prepaid: dict[str, Any], width: int) -> list[str]:
    return [f"  {'prepaid ' + name:<{width}}  {p['capacity_type']} {p['nodes']} nodes, "
            f"window {p['window_s'][0]:g}-{p['window_s'][1]:g} s, ${p['cost_usd']:,.0f}, "
            f"utilisation {p['utilisation']} (while pods it fits waited: {p['utilisation_while_pending']}, "
            f"{p['pending_hours']} h), jobs moved off {p['jobs_moved_off']}, "
            f"lost at end {len(p['jobs_lost_at_end'])}" for name, p in prepaid.items()]
