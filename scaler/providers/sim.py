"""The `sim` provider: an in-memory cloud behind the same PoolProvider interface as aws and azure.

It behaves like an Auto Scaling group / VM scale set seen from outside: `set_desired` starts
launches, an instance becomes a ready node `boot` seconds after it was requested (GPU and CPU
pools differ), spot capacity can be out in a zone for a window (every launch there fails with the
cloud's capacity error, returned as a LaunchFailure on the next `observe`, as AWS reports
InsufficientInstanceCapacity in the group's scaling activities), spot instances can be reclaimed
at a random rate (with the cloud's notice ahead of the reclaim: two minutes on AWS, 30 s on Azure,
handed out by `interruptions()` until acknowledged), and a group whose desired size exceeds its
instances retries its launches every `retry_interval` seconds (the group keeps trying, as a real one
does). Every instance records its life and price, so the simulator's bill is the provider's.

Prepaid capacity: a Capacity Block's instances exist only inside its window: a launch before its start
or in its last 30 minutes fails (as EC2 refuses a launch into a reservation that is not active), and
EC2's termination of what is left 30 minutes before the end ends them (reason `block-ended`, returned
as taken back by the cloud). Quotas (`quotas`: an EC2 quota family, e.g. ("G", True) for the G and VT
spot vCPUs, -> its vCPU limit) are observed as each pool's `PoolObservation.quota` (limit minus the
vCPUs of the instances that count against it), and a launch beyond one fails with EC2's
`MaxSpotInstanceCountExceeded` (spot) or `VcpuLimitExceeded` (on-demand).
`fail_next` makes the next calls of an operation fail with a given error (an API fault). Warm pools
(`pool.warm`): a scale-out starts ready warm instances first (scaler/providers/sim_warm.py).

Clock: the provider has no clock of its own; `advance(now)` (called by `observe` and by the
simulator) moves it and returns what happened since.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from scaler.core.config.ec2_quota_classes import QUOTAS, quota_key
from scaler.core.config.pool import Pool
from scaler.core.config.reservation import EC2_BLOCK_TERMINATION
from scaler.core.config.settings import ScalerConfig
from scaler.core.model.interruption import NOTICE_LEAD, Interruption
from scaler.core.planning.snapshot import CloudInstance, LaunchFailure, PoolObservation, Quota
from scaler.providers.base import NotFound, ProviderError, check_size
from scaler.providers.sim_warm import WarmInstance, refill_zones, take_ready, warm_start_of

CAPACITY_REASON = {"aws": "InsufficientInstanceCapacity", "azure": "ZonalAllocationFailed"}
Operation = Literal["observe", "set_desired", "delete_node", "interruptions"]


@dataclass(frozen=True, slots=True)
class Outage:
    """Spot capacity of a zone is out from `start` to `end` (seconds of simulated time)."""

    zone: str
    start: float
    end: float

    @classmethod
    def parse(cls, text: str) -> Outage:
        """`ZONE:START_S:END_S`, e.g. `us-east-1a:7200:14400`."""
        zone, _, times = text.partition(":")
        start_s, _, end_s = times.partition(":")
        try:
            start, end = float(start_s), float(end_s)
        except ValueError:
            raise ValueError(f"spot outage {text!r}: expected ZONE:START_S:END_S with seconds") from None
        if not zone or not math.isfinite(start) or not math.isfinite(end) or start < 0 or end <= start:
            raise ValueError(f"spot outage {text!r}: expected ZONE:START_S:END_S with 0 <= START < END")
        return cls(zone, start, end)


@dataclass(slots=True)
class Instance:
    provider_id: str
    pool: str
    zone: str
    spot: bool
    gpus: int
    price_per_hour: float
    requested_at: float
    ready_at: float
    interrupt_at: float = math.inf
    ended_at: float | None = None
    end_reason: str = ""

    @property
    def alive(self) -> bool:
        return self.ended_at is None

    def life(self, until: float) -> float:
        """Seconds paid: from the request (boot included) to the end, or to `until` if still alive."""
        end = self.ended_at if self.ended_at is not None else until
        return max(end - self.requested_at, 0.0)


@dataclass(slots=True)
class Happenings:
    """What `advance` found: instances that became ready, instances the cloud took back."""

    ready: list[Instance] = field(default_factory=list)
    interrupted: list[Instance] = field(default_factory=list)
    noticed: list[Instance] = field(default_factory=list)  # a reclaim notice went out


@dataclass(slots=True)
class _Group:
    pool: Pool
    price: float
    boot: float
    desired: int
    instances: dict[str, Instance] = field(default_factory=dict)  # alive only
    failures: list[LaunchFailure] = field(default_factory=list)
    next_retry: float = 0.0
    warm: list[WarmInstance] = field(default_factory=list)  # waiting or booting into the warm pool
    warm_start: float = 0.0  # a warm instance taken: seconds to a Ready node


class SimProvider:
    """In-memory cloud for the simulator and the tests."""

    name = "sim"

    def __init__(
        self,
        config: ScalerConfig,
        *,
        outages: Iterable[Outage] = (),
        interruption_rate: float | Mapping[str, float] = 0.0,
        seed: int = 0,
        retry_interval: float = 60.0,
        quotas: dict[tuple[str, bool], int] | None = None,
        warm_start: float | None = None,
    ) -> None:
        """`interruption_rate`: expected reclaims per spot instance-hour (0 disables them), one for every pool or
        per pool name (a pool not named: none); `quotas`: EC2 quota
        family (class, spot) -> vCPU limit; `warm_start`: a stopped warm instance's time to Ready (default the
        config's timings.warm_start)."""
        self.quotas = dict(quotas or {})
        self.config = config
        self.outages = list(outages)
        self.interruption_rate = interruption_rate
        self.retry_interval = retry_interval
        self.now = 0.0
        self._rng = random.Random(seed)  # noqa: S311 - a reproducible simulation, not cryptography
        self._seq = 0
        self._groups: dict[str, _Group] = {}
        for pool in config.pools:
            boot = config.timings.gpu_boot if pool.gpus else config.timings.cpu_boot
            self._groups[pool.name] = _Group(pool, config.price(pool), boot, pool.min_size)
        self._by_id: dict[str, Instance] = {}
        self.history: list[Instance] = []  # every instance ever launched, for the bill
        self.warm_history: list[WarmInstance] = []  # every warm-pool instance, for the bill
        self._booting: list[tuple[float, str]] = []  # heap of (ready_at, provider_id)
        self._reclaims: list[tuple[float, str]] = []  # heap of (interrupt_at, provider_id)
        self._notices: list[tuple[float, str]] = []  # heap of (notice time, provider_id)
        self._noticed: dict[str, Interruption] = {}  # notices handed out, not acknowledged yet
        self.fail_next: dict[Operation, list[ProviderError]] = {}
        stopped_start = config.timings.warm_start if warm_start is None else warm_start
        for group in self._groups.values():  # the warm pools and the min-size nodes are there at the start
            group.warm_start = warm_start_of(group.pool, stopped_start)
            self._refill(group, boot=0.0)
            self._launch(group, boot=0.0)

    # --- PoolProvider -------------------------------------------------------------------------
    def observe(self, now: float) -> dict[str, PoolObservation]:
        self._fault("observe")
        self.advance(now)
        out: dict[str, PoolObservation] = {}
        for name, group in self._groups.items():
            members = [CloudInstance(i.provider_id, i.zone, i.requested_at) for i in group.instances.values()]
            out[name] = PoolObservation(group.pool, group.desired, len(group.instances), group.failures, members,
                                        self._quota(group.pool), sum(w.ready_at <= self.now for w in group.warm))
            group.failures = []
        return out

    def set_desired(self, pool: str, desired: int) -> None:
        self._fault("set_desired")
        group = self._group(pool)
        check_size("sim", pool, desired, 0, group.pool.max_size)
        group.desired = desired
        # A lower target terminates instances as a group does: those still booting first, newest first.
        excess = len(group.instances) - desired
        if excess > 0:
            victims = sorted(group.instances.values(), key=lambda i: (i.ready_at <= self.now, -i.requested_at))
            for inst in victims[:excess]:
                self._end(group, inst, "scaled-in")
        group.next_retry = self.now
        self._launch(group)

    def delete_node(self, pool: str, provider_id: str) -> None:
        self._fault("delete_node")
        group = self._group(pool)
        inst = group.instances.get(provider_id)
        if inst is None:
            raise NotFound(f"sim: pool {pool}: no instance {provider_id}")
        self._end(group, inst, "deleted")
        group.desired = max(group.desired - 1, 0)

    def pool_of(self, provider_id: str) -> str | None:
        inst = self._by_id.get(provider_id)
        return inst.pool if inst is not None and inst.alive else None

    def interruptions(self) -> list[Interruption]:
        self._fault("interruptions")
        return list(self._noticed.values())

    def acknowledge(self, notices: Iterable[Interruption]) -> None:
        for notice in notices:
            self._noticed.pop(notice.instance, None)

    # --- simulation ---------------------------------------------------------------------------
    def reclaim(self, provider_id: str, at: float) -> None:
        """The cloud will take this spot instance back at `at`, with its notice ahead (a scripted reclaim, as
        the provider conformance cases use it)."""
        inst = self._by_id[provider_id]
        inst.interrupt_at = at
        heapq.heappush(self._reclaims, (at, provider_id))
        pool = self._groups[inst.pool].pool
        heapq.heappush(self._notices, (max(self.now, at - NOTICE_LEAD[pool.cloud]), provider_id))

    def advance(self, now: float) -> Happenings:
        """Move the clock to `now`: instances that finished booting, reclaims, launch retries."""
        self.now = max(self.now, now)
        out = Happenings()
        while self._booting and self._booting[0][0] <= self.now:
            _, pid = heapq.heappop(self._booting)
            inst = self._by_id[pid]
            if inst.alive:
                out.ready.append(inst)
        while self._notices and self._notices[0][0] <= self.now:
            at, pid = heapq.heappop(self._notices)
            inst = self._by_id[pid]
            if inst.alive:
                self._noticed[pid] = Interruption("spot-interruption", pid, at, inst.interrupt_at)
                out.noticed.append(inst)
        while self._reclaims and self._reclaims[0][0] <= self.now:
            at, pid = heapq.heappop(self._reclaims)
            inst = self._by_id[pid]
            self._noticed.pop(pid, None)
            if inst.alive:
                self._end(self._groups[inst.pool], inst, "interrupted", at)
                out.interrupted.append(inst)
        for group in self._groups.values():
            ends = self._block_ends(group.pool)
            if group.instances and ends <= self.now:
                for inst in list(group.instances.values()):
                    self._end(group, inst, "block-ended", ends)
                    out.interrupted.append(inst)
            if len(group.instances) < group.desired and group.next_retry <= self.now:
                self._launch(group)
        return out

    def next_event(self) -> float:
        """The earliest time something will happen in the cloud without being asked."""
        times = [math.inf]
        if self._booting:
            times.append(self._booting[0][0])
        if self._reclaims:
            times.append(self._reclaims[0][0])
        if self._notices:
            times.append(self._notices[0][0])
        for group in self._groups.values():
            if len(group.instances) < group.desired:
                times.append(max(group.next_retry, self.now))
            if group.instances:
                times.append(max(self._block_ends(group.pool), self.now))
        return min(times)

    def has_unreported_failures(self) -> bool:
        return any(g.failures for g in self._groups.values())

    def alive(self) -> list[Instance]:
        return [i for g in self._groups.values() for i in g.instances.values()]

    def instance(self, provider_id: str) -> Instance:
        return self._by_id[provider_id]

    def spot_out(self, zone: str, at: float) -> bool:
        return any(o.zone == zone and o.start <= at < o.end for o in self.outages)

    # --- internals ----------------------------------------------------------------------------
    @staticmethod
    def _block_ends(pool: Pool) -> float:
        """When EC2 terminates a Capacity Block's instances (30 minutes before its end); inf for other pools."""
        r = pool.reservation
        if pool.capacity_type != "capacity-block" or r is None or r.end is None:
            return math.inf
        return r.end - EC2_BLOCK_TERMINATION

    def _block_refuses(self, pool: Pool) -> bool:
        r = pool.reservation
        if pool.capacity_type != "capacity-block" or r is None:
            return False
        return (r.start is not None and self.now < r.start) or self.now >= self._block_ends(pool)

    def _quota_used(self, key: tuple[str, bool]) -> int:
        return sum(g.pool.itype.vcpu * len(g.instances) for g in self._groups.values() if quota_key(g.pool) == key)

    def _quota(self, pool: Pool) -> Quota | None:
        key = quota_key(pool)
        if key is None or key not in self.quotas:
            return None
        return Quota(QUOTAS[key][1], self.quotas[key] - self._quota_used(key))

    def _refusal(self, pool: Pool, zone: str) -> LaunchFailure | None:
        """Why the cloud refuses one more instance of the pool in the zone now, or None."""
        if self._block_refuses(pool):
            block = pool.reservation.id if pool.reservation is not None else ""
            return LaunchFailure(zone=zone, kind="capacity", reason="InsufficientInstanceCapacity", at=self.now,
                                 message=f"The Capacity Block reservation {block} is not active.")
        key = quota_key(pool)
        quota = self._quota(pool)
        if key is not None and quota is not None and quota.headroom < pool.itype.vcpu:
            reason = "MaxSpotInstanceCountExceeded" if key[1] else "VcpuLimitExceeded"
            return LaunchFailure(zone=zone, kind="quota", reason=reason, at=self.now,
                                 message=f"You have requested more vCPU capacity than your current vCPU limit of "
                                         f"{self.quotas[key]} allows for the instance bucket that the specified "
                                         f"instance type belongs to ({quota.name}).")
        if pool.capacity_type == "spot" and self.spot_out(zone, self.now):
            return LaunchFailure(
                zone=zone, kind="capacity", reason=CAPACITY_REASON[pool.cloud], at=self.now,
                message=f"We currently do not have sufficient {pool.itype.name} capacity in the "
                        f"Availability Zone you requested ({zone}).")
        return None

    def _fault(self, operation: Operation) -> None:
        queued = self.fail_next.get(operation)
        if queued:
            raise queued.pop(0)

    def _group(self, pool: str) -> _Group:
        group = self._groups.get(pool)
        if group is None:
            raise NotFound(f"sim: no pool {pool!r} in this cloud")
        return group

    def _launch(self, group: _Group, boot: float | None = None) -> None:
        """Launch instances up to the desired size, balancing zones; spot outages refuse them."""
        missing = group.desired - len(group.instances)
        if missing <= 0:
            return
        pool = group.pool
        spot = pool.capacity_type == "spot"
        per_zone = {z: 0 for z in pool.zones}
        for inst in group.instances.values():
            per_zone[inst.zone] = per_zone.get(inst.zone, 0) + 1
        refused: set[str] = set()
        for _ in range(missing):
            if boot is None and self._start_warm(group):
                continue
            zones = [z for z in pool.zones if z not in refused]
            zone = min(zones, key=lambda z: (per_zone[z], pool.zones.index(z)), default=None)
            while zone is not None and (failure := self._refusal(pool, zone)) is not None:
                refused.add(zone)
                group.failures.append(failure)
                zones = [z for z in pool.zones if z not in refused]
                zone = min(zones, key=lambda z: (per_zone[z], pool.zones.index(z)), default=None)
            if zone is None:
                group.next_retry = self.now + self.retry_interval
                return
            per_zone[zone] += 1
            self._seq += 1
            inst = Instance(
                provider_id=f"{pool.cloud}:///{zone}/i-{self._seq:08x}", pool=pool.name, zone=zone, spot=spot,
                gpus=pool.gpus, price_per_hour=group.price, requested_at=self.now,
                ready_at=self.now + (group.boot if boot is None else boot),
            )
            rate = self.interruption_rate if isinstance(self.interruption_rate, float | int) else \
                self.interruption_rate.get(pool.name, 0.0)
            if spot and rate > 0:
                inst.interrupt_at = self.now + self._rng.expovariate(rate / 3600)
                heapq.heappush(self._reclaims, (inst.interrupt_at, inst.provider_id))
                notice = max(self.now, inst.interrupt_at - NOTICE_LEAD[pool.cloud])
                heapq.heappush(self._notices, (notice, inst.provider_id))
            self._add(inst)

    def _start_warm(self, group: _Group) -> bool:
        """Take a ready warm instance into service (Ready after warm_start); the group launches its replacement."""
        w = take_ready(group.warm, self.now)
        if w is not None:
            self._add(Instance(w.provider_id, w.pool, w.zone, False, w.gpus, group.price, self.now,
                               self.now + group.warm_start))
            self._refill(group)
        return w is not None

    def _refill(self, group: _Group, boot: float | None = None) -> None:
        """Launch instances into the warm pool up to its size; each boots, then waits."""
        for zone in refill_zones(group.pool, len(group.warm), len(self.warm_history)):
            self._seq += 1
            w = WarmInstance.launch(f"{group.pool.cloud}:///{zone}/i-{self._seq:08x}", group.pool, zone, group.price,
                                    self.now, group.boot if boot is None else boot)
            group.warm.append(w)
            self.warm_history.append(w)

    def _add(self, inst: Instance) -> None:
        self._groups[inst.pool].instances[inst.provider_id] = inst
        self._by_id[inst.provider_id] = inst
        self.history.append(inst)
        heapq.heappush(self._booting, (inst.ready_at, inst.provider_id))

    def _end(self, group: _Group, inst: Instance, reason: str, at: float | None = None) -> None:
        inst.ended_at = self.now if at is None else at
        inst.end_reason = reason
        group.instances.pop(inst.provider_id, None)
        self._noticed.pop(inst.provider_id, None)
