"""The caps on new nodes: each pool's max, the cluster's limits (nodes, GPUs, cost per hour), the per-pass
rate; and whether a pool may launch now (backoff, unavailable offerings, a cloud's refusal, a Capacity
Block's window, its cloud quota's headroom). Pure.

A quota is shared by every pool that counts against it; its headroom (read by the provider against the
instances that exist) is lessened by the nodes asked for and not launched yet and by this pass's."""

from __future__ import annotations

from scaler.core.model import keys
from scaler.core.model.workload import node_pool
from scaler.core.planning.advance import Advanced
from scaler.core.planning.context import PlanningContext
from scaler.core.planning.packing import Slot
from scaler.core.planning.snapshot import Snapshot
from scaler.core.planning.state import fmt_time


class Caps:
    """Pool room and the cluster limits, as counters a `Trial` can roll back; why a slot may not open
    a node now (backoff, an unavailable offering, a refusal) or at all (a cap)."""

    def __init__(self, snapshot: Snapshot, ctx: PlanningContext, adv: Advanced) -> None:
        self.now = snapshot.now
        self.state = adv.state
        lim = ctx.limits
        self.room = {n: max(0, o.pool.max_size - adv.desired.get(n, o.desired)) for n, o in snapshot.pools.items()}
        self.max_size = {n: o.pool.max_size for n, o in snapshot.pools.items()}
        unmanaged = sum(1 for node in snapshot.nodes if node_pool(node) not in snapshot.pools)
        self.nodes = unmanaged + sum(adv.desired.values())
        self.gpus = sum(n.allocatable.get(keys.RES_GPU, 0) for n in snapshot.nodes
                        if node_pool(n) not in snapshot.pools)
        self.gpus += sum(adv.desired.get(n, 0) * o.pool.gpus for n, o in snapshot.pools.items())
        self.cost = sum(adv.desired.get(n, 0) * ctx.price(o.pool) for n, o in snapshot.pools.items())
        self.added: dict[str, int] = {}
        self.this_pass = 0
        self.limits = lim
        # A gang's nodes are asked for together: the per-pass cap (a rate limit) would starve a gang
        # larger than it forever, so it counts them but does not stop them. Pool max and limits do.
        self.gang = False
        self.quota_left: dict[str, int] = {}
        for o in snapshot.pools.values():
            if o.quota is not None:
                owed = max(0, adv.desired.get(o.pool.name, o.desired) - o.instances) * o.pool.itype.vcpu
                left = self.quota_left.get(o.quota.name, o.quota.headroom)
                self.quota_left[o.quota.name] = left - owed
        self.quota_of = {n: o.quota.name for n, o in snapshot.pools.items() if o.quota is not None}
        # Warm-pool instances ready to start, per pool (a group another tool gave a warm pool counts too).
        self.warm = {n: o.warm for n, o in snapshot.pools.items() if o.warm > 0}
        self.exhausted: dict[str, str] = {}  # quota -> why a pool could not have a node (the Event's text)
        self._saved: tuple[dict[str, int], int, int, float, int, dict[str, int]] = ({}, 0, 0, 0.0, 0, {})

    # --- Tentative (scaler.core.planning.trial) ---------------------------------------------------
    def begin(self) -> None:
        self._saved = (dict(self.added), self.nodes, self.gpus, self.cost, self.this_pass, dict(self.quota_left))

    def commit(self) -> None:
        return None

    def rollback(self) -> None:
        self.added, self.nodes, self.gpus, self.cost, self.this_pass = dict(self._saved[0]), *self._saved[1:5]
        self.quota_left = dict(self._saved[5])

    def warm_left(self, pool: str) -> int:
        """Warm instances of the pool no node of this pass has taken (the group starts those first)."""
        return self.warm.get(pool, 0) - self.added.get(pool, 0)

    def availability(self, slot: Slot) -> str | None:
        """Why the pool cannot launch now (the fallback takes over), or None. A pool across zones can
        while one of its zones can: the cloud launches where it has capacity."""
        name = slot.pool.name
        block = slot.pool.reservation if slot.pool.capacity_type == "capacity-block" else None
        if block is not None and block.start is not None and self.now < block.start:
            return f"the Capacity Block starts at {fmt_time(block.start)}"
        if block is not None and block.end is not None and self.now >= block.window_closes():
            return (f"the Capacity Block ends at {fmt_time(block.end)}: less than "
                    f"{max(block.min_remaining, block.drain_lead) / 60:g} min left")
        b = self.state.backoff.get(name)
        if b is not None and b.until > self.now:
            return f"backoff until {fmt_time(b.until)}"
        refused = self.state.refused.get(name)
        if refused is not None:
            return f"the cloud refused ({refused[1]}); not asked again before {fmt_time(refused[0])}"
        why = self.quota(slot)
        if why is not None:
            return why
        zones = (slot.zone,) if slot.zone else slot.pool.zones
        until = min(self.state.unavailable.get((name, z), 0.0) for z in zones)
        if until > self.now:
            what = "spot" if slot.spot else "capacity"
            return f"{what} unavailable in {', '.join(zones)} until {fmt_time(until)}"
        return None

    def quota(self, slot: Slot) -> str | None:
        """Why the pool's cloud quota has no room for one more node, or None. An availability (the fallback
        takes over) and a cap (a node opened this pass uses the room up)."""
        name = slot.pool.name
        quota = self.quota_of.get(name)
        if quota is None or self.quota_left[quota] >= slot.pool.itype.vcpu:
            return None
        why = (f"quota {quota!r} exhausted: {max(0, self.quota_left[quota])} vCPUs left, a node of {name} needs "
               f"{slot.pool.itype.vcpu}")
        self.exhausted.setdefault(quota, why)
        return why

    def limit(self, slot: Slot) -> str | None:
        """Why one more node of the slot would break the pool max, its quota or a cluster limit, or None."""
        name = slot.pool.name
        if self.quota(slot) is not None:
            return self.quota(slot)
        if self.added.get(name, 0) >= self.room.get(name, 0):
            return f"pool at max ({self.max_size[name]})"
        lim = self.limits
        if self.this_pass >= lim.max_nodes_per_pass and not self.gang:
            return f"max_nodes_per_pass ({lim.max_nodes_per_pass}) reached"
        if lim.max_nodes is not None and self.nodes + 1 > lim.max_nodes:
            return f"cluster limit max_nodes reached ({lim.max_nodes})"
        if lim.max_gpus is not None and slot.pool.gpus and self.gpus + slot.pool.gpus > lim.max_gpus:
            return f"cluster limit max_gpus reached ({lim.max_gpus})"
        if lim.max_cost_per_hour is not None and self.cost + slot.price > lim.max_cost_per_hour + 1e-9:
            return f"cluster limit max_cost_per_hour reached ({lim.max_cost_per_hour:g})"
        return None

    def take(self, slot: Slot) -> None:
        name = slot.pool.name
        self.added[name] = self.added.get(name, 0) + 1
        self.this_pass += 1
        self.nodes += 1
        self.gpus += slot.pool.gpus
        self.cost += slot.price
        quota = self.quota_of.get(name)
        if quota is not None:
            self.quota_left[quota] -= slot.pool.itype.vcpu
