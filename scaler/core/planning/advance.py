"""Folds a Snapshot into the State (`state`): in-flight requests, backoff, unavailable offerings, and what the
actuator reported (`drains.fold`: drains in progress, nodes removed, notices acknowledged, refusals).

Everything there is re-derivable: what is in flight is `desired - registered nodes` of each pool,
recomputed every pass, and an instance that has not registered is due `provision_timeout` after its
launch as the cloud reports it, so a restart neither asks twice nor extends a deadline. `advance`
folds a Snapshot's observations into the State and says which sizes to give back.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from scaler.core.config.settings import Timings
from scaler.core.model.objects import Node
from scaler.core.model.workload import node_pool
from scaler.core.planning.decisions import ScaleUp, SetSize
from scaler.core.planning.drains import fold
from scaler.core.planning.memo import Memo
from scaler.core.planning.snapshot import PoolObservation, Snapshot
from scaler.core.planning.state import Backoff, InFlight, State, fmt_time

# Launch failures that mean "this offering has no capacity now": mark (pool, zone) unavailable.
CAPACITY_KINDS = frozenset({"capacity", "price", "quota"})




def may_still_boot(node: Node, now: float, provision_timeout: float) -> bool:
    """Younger than the provision timeout, or of unknown age: a node not ready yet may still become so."""
    return node.created_at <= 0 or now - node.created_at < provision_timeout


def copy_state(state: State) -> State:
    return State(
        in_flight={p: list(v) for p, v in state.in_flight.items()},
        backoff=dict(state.backoff),
        unavailable=dict(state.unavailable),
        unneeded_since=dict(state.unneeded_since),
        unneeded_until=dict(state.unneeded_until),
        unneeded_time=dict(state.unneeded_time),
        idle=dict(state.idle),
        gone_since=dict(state.gone_since),
        held=dict(state.held),
        refused=dict(state.refused),
        booked=dict(state.booked),
        unhealthy_since=dict(state.unhealthy_since),
        repair_paused=state.repair_paused,
        notices=list(state.notices),
        drains=dict(state.drains),
        removed=dict(state.removed),
    )


@dataclass(slots=True)
class Advanced:
    """The State after this pass's observations, and what the planners build on."""

    state: State
    desired: dict[str, int]  # effective desired size per pool, after the resets below
    registered: dict[str, int]
    resets: list[SetSize] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    leaving: set[str] = field(default_factory=set)  # nodes whose capacity is going (interruptions)
    gone: set[str] = field(default_factory=set)  # nodes whose instance no longer exists
    # What the last passes worked out that this one may reuse (the Reconciler keeps it): never changes a plan.
    # None: a plan from scratch (a snapshot file, a test), without the cost of keeping anything.
    memo: Memo | None = None

    def in_flight(self, pool: str) -> int:
        return max(0, self.desired.get(pool, 0) - self.registered.get(pool, 0))


def _bump_backoff(state: State, pool: str, now: float, t: Timings) -> Backoff:
    prev = state.backoff.get(pool)
    failures = (prev.failures if prev else 0) + 1
    delay = min(t.backoff_initial * 2 ** (failures - 1), t.backoff_max)
    entry = Backoff(until=now + delay, failures=failures)
    state.backoff[pool] = entry
    return entry


def mark_unavailable(state: State, pool: str, zone: str, until: float) -> None:
    state.unavailable[(pool, zone)] = max(state.unavailable.get((pool, zone), 0.0), until)


def advance(snapshot: Snapshot, state: State, t: Timings, memo: Memo | None = None) -> Advanced:
    """Fold launch failures, registrations and timeouts into a new State (the input is not changed)."""
    now = snapshot.now
    new = copy_state(state)
    fold(snapshot, new)
    new.notices = [n for n in state.notices if n not in snapshot.acted.acknowledged]
    for notice in snapshot.interruptions:  # the provider hands a notice out again until it is acknowledged
        if notice not in new.notices:
            new.notices.append(notice)
    new.unavailable = {k: until for k, until in new.unavailable.items() if until > now}
    new.refused = {p: r for p, r in new.refused.items() if r[0] > now}
    gone = gone_nodes(snapshot)
    new.gone_since = {n: new.gone_since.get(n, now) for n in gone}
    registered: dict[str, int] = {}
    for node in snapshot.nodes:
        name = node_pool(node)
        if name is not None and node.name not in gone:
            registered[name] = registered.get(name, 0) + 1
    out = Advanced(state=new, desired={}, registered=registered, gone=gone, memo=memo)
    for name, message in snapshot.acted.refused.items():
        new.refused[name] = (now + t.backoff_max, message)
        out.notes.append(f"pool {name}: the cloud refused ({message}); its actions stop until "
                         f"{fmt_time(now + t.backoff_max)}")
    for name, obs in snapshot.pools.items():
        desired = _failures(obs, registered.get(name, 0), now, t, out)
        records = _in_flight(snapshot, obs, desired - registered.get(name, 0), now, t.provision_timeout, new)
        desired, records = _timeouts(obs, records, desired, registered.get(name, 0), now, t, out)
        # Forget old failures once the pool has been quiet for a whole maximum backoff.
        b = new.backoff.get(name)
        if b is not None and b.until + t.backoff_max <= now:
            del new.backoff[name]
        if records:
            new.in_flight[name] = records
        else:
            new.in_flight.pop(name, None)
        out.desired[name] = desired
    for name in list(new.in_flight):
        if name not in snapshot.pools:
            del new.in_flight[name]
    return out


def _failures(obs: PoolObservation, registered: int, now: float, t: Timings, out: Advanced) -> int:
    """A pool's launch failures: capacity ones mark their offering unavailable, the others back the pool
    off; the size is given back to what exists. Returns the pool's desired size after that."""
    new, pool, name = out.state, obs.pool, obs.pool.name
    desired = obs.desired
    if not obs.failures:
        return desired
    other = None
    for failure in obs.failures:
        if failure.kind in CAPACITY_KINDS:
            zones = [failure.zone] if failure.zone else list(pool.zones)
            for zone in zones:
                mark_unavailable(new, name, zone, now + t.unavailable_ttl)
            out.notes.append(f"pool {name}: {failure.reason} in {', '.join(zones)}: unavailable until "
                             f"{fmt_time(now + t.unavailable_ttl)}")
        else:
            other = failure
    if other is not None:  # one step of backoff per pass, however many activities failed
        step = _bump_backoff(new, name, now, t)
        out.notes.append(f"pool {name}: launch failed ({other.reason}); backoff until {fmt_time(step.until)}")
    floor = max(obs.instances, registered, pool.min_size)
    if desired > floor:
        last = obs.failures[-1]
        out.resets.append(SetSize(name, floor, f"launch failed: {last.reason}: {last.message}"))
        desired = floor
    return desired


def _in_flight(snapshot: Snapshot, obs: PoolObservation, outstanding: int, now: float, timeout: float,
               new: State) -> list[InFlight]:
    """In flight = desired - registered, matched against the recorded requests, oldest first."""
    name = obs.pool.name
    outstanding = max(0, outstanding)
    records = sorted(new.in_flight.get(name, []), key=lambda r: r.requested_at)
    recorded = sum(r.count for r in records)
    if recorded > outstanding:
        landed = recorded - outstanding
        kept: list[InFlight] = []
        for r in records:
            take = min(landed, r.count)
            landed -= take
            if r.count > take:
                kept.append(InFlight(r.pool, r.count - take, r.requested_at, r.deadline, r.zone))
        b = new.backoff.get(name)
        if b is not None and b.until <= now and not obs.failures:
            del new.backoff[name]  # a node registered after the backoff: the pool works again
        return kept
    if recorded < outstanding:
        # Not asked for by this process (it restarted): due after the instances' launch, as the
        # cloud reports it, oldest first; what has not launched yet from now (due `timeout` later).
        missing = outstanding - recorded
        ids = {n.provider_id for n in snapshot.nodes}
        launched = sorted(m.launched_at for m in obs.members if m.launched_at > 0 and m.provider_id not in ids)
        records.extend(InFlight(name, 1, at, at + timeout) for at in launched[:missing])
        if missing > len(launched):
            records.append(InFlight(name, missing - len(launched), now, now + timeout))
        records.sort(key=lambda r: r.requested_at)
    return records


def _timeouts(obs: PoolObservation, records: list[InFlight], desired: int, registered: int, now: float,
              t: Timings, out: Advanced) -> tuple[int, list[InFlight]]:
    """Requests past their provision deadline: the size is given back, the pool backs off and its zones
    are unavailable. Returns the desired size and the requests still in flight."""
    pool, name = obs.pool, obs.pool.name
    late = sum(r.count for r in records if r.deadline <= now)
    if not late:
        return desired, records
    records = [r for r in records if r.deadline > now]
    target = max(desired - late, registered, pool.min_size)
    if target < desired:
        out.resets.append(SetSize(name, target, f"{late} node(s) did not register within "
                                                f"{t.provision_timeout:.0f}s"))
        desired = target
    b = _bump_backoff(out.state, name, now, t)
    for zone in pool.zones:
        mark_unavailable(out.state, name, zone, now + t.unavailable_ttl)
    out.notes.append(f"pool {name}: {late} node(s) timed out; backoff until {fmt_time(b.until)}")
    return desired, records
def outside_pools(snapshot: Snapshot) -> set[str]:
    """Nodes of a pool whose instance the pool's (complete) listing does not hold, Ready or not: terminated
    with a kubelet not yet marked NotReady, detached, or taken by the cloud. Removing an instance goes
    through its pool, so such a node is never a scale-down candidate (the actuator would refuse it)."""
    out: set[str] = set()
    members: dict[str, set[str]] = {}
    for node in snapshot.nodes:
        name = node_pool(node)
        obs = snapshot.pools.get(name) if name else None
        if name is None or obs is None or not node.provider_id or len(obs.members) != obs.instances:
            continue
        if name not in members:
            members[name] = {m.provider_id.lower() for m in obs.members}
        if node.provider_id.lower() not in members[name]:
            out.add(node.name)
    return out


def gone_nodes(snapshot: Snapshot) -> set[str]:
    """Nodes of a pool whose instance the cloud no longer lists (terminated, or taken back) and whose
    kubelet stopped reporting (NotReady): an instance taken out of the group but still running (put in
    standby, detached) keeps its Ready node and is left alone."""
    out: set[str] = set()
    members: dict[str, set[str]] = {}
    for node in snapshot.nodes:
        if node.ready:
            continue
        name = node_pool(node)
        obs = snapshot.pools.get(name) if name else None
        if name is None or obs is None or not node.provider_id or len(obs.members) != obs.instances:
            continue  # not ours, or the cloud's listing is not complete enough to tell
        if name not in members:
            members[name] = {m.provider_id.lower() for m in obs.members}
        if node.provider_id.lower() not in members[name]:
            out.add(node.name)
    return out


def record_scale_ups(state: State, scale_ups: Iterable[ScaleUp], now: float, timeout: float) -> None:
    """Remember this pass's requests with their provision deadline (`timeout` from now)."""
    for up in scale_ups:
        state.in_flight.setdefault(up.pool, []).append(
            InFlight(up.pool, up.count, now, now + timeout, up.zone)
        )
