"""One pass of decisions: Snapshot + State + the settings' PlanningContext -> Plan + next State. Pure.

`plan` decides everything the actuator does: sizes, replacements ahead of interruptions, the
instances that never registered to terminate, drains. It is built from `advance` (what outlives a
pass), `interruptions` (notices and drains in progress), `scaleup` and `scaledown`. The core's entry
`decide.decide` calls it, after making the context from the settings (`context`) and adding the pods-to-be of
the ProvisioningRequests and CapacityBuffers in play. See docs/planner.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from scaler.core.config.warm import RUNNING_START, standing_price
from scaler.core.model.objects import Pod
from scaler.core.planning.advance import advance, record_scale_ups
from scaler.core.planning.context import PlanningContext
from scaler.core.planning.decisions import Plan, SetSize, WarmStanding
from scaler.core.planning.drains import orphans
from scaler.core.planning.interruptions import ending_blocks, read_notices
from scaler.core.planning.memo import Memo
from scaler.core.planning.repair import plan_repairs
from scaler.core.planning.room import Room
from scaler.core.planning.scaledown import plan_scale_down
from scaler.core.planning.scaleup import plan_scale_up
from scaler.core.planning.snapshot import Snapshot
from scaler.core.planning.state import State


def plan(snapshot: Snapshot, state: State, ctx: PlanningContext, memo: Memo | None = None,
         placeholders: Sequence[Pod] = ()) -> tuple[Plan, State]:
    """Decide scale-ups, size resets and drains for one pass. The input state is not changed; `memo`: what
    the last passes worked out (never changes the plan); `placeholders`: the CapacityBuffers' pods-to-be,
    planned after every real pending and displaced pod."""
    adv = advance(snapshot, state, ctx.timings, memo)
    leaving = read_notices(snapshot, adv.state.notices, adv.state.drains, adv.gone)
    ending_blocks(snapshot, adv.state.drains, leaving, ctx.gang_label)
    fix = plan_repairs(snapshot, adv.state, adv.gone)
    adv.leaving = leaving.nodes | fix.nodes
    seen = {p.key for p in leaving.displaced}
    displaced = [*leaving.displaced, *(p for p in fix.displaced if p.key not in seen)]
    # Placeholders of the CapacityBuffers go last, at the lowest priority: real pods always win the room.
    extra = [*displaced, *placeholders]
    view = dataclasses.replace(snapshot, pending=[*snapshot.pending, *extra]) if extra else snapshot
    up = plan_scale_up(view, ctx, adv)
    record_scale_ups(adv.state, up.scale_ups, snapshot.now, ctx.timings.provision_timeout)
    down = plan_scale_down(view, ctx, adv, up.scale_ups, Room(up.packer, up.filtered))
    up.packer.release()
    result = Plan(
        now=snapshot.now,
        scale_ups=up.scale_ups,
        resets=[with_strays(r, snapshot) for r in adv.resets],
        scale_downs=[*leaving.drains, *fix.drains, *down.scale_downs],
        verdicts=up.verdicts,
        unneeded=down.unneeded,
        handled=leaving.handled,
        events=[*leaving.events, *fix.events],
        delete_nodes=sorted(n for n, since in adv.state.gone_since.items()
                            if snapshot.now - since >= ctx.timings.node_gone_grace),
        refused={p: m for p, m in snapshot.acted.refused.items() if p in snapshot.pools},
        in_flight={name: adv.in_flight(name) for name in snapshot.pools},
        notes=[*adv.notes, *leaving.notes, *fix.notes, *up.notes, *down.notes, *up.quotas.values()],
        quotas=up.quotas,
        repairs=fix.repairs,
        unhealthy=fix.unhealthy,
        repair_paused=fix.paused,
        recovered=fix.recovered,
        warm=warm_pools(snapshot, ctx.timings.warm_start, ctx.spot_price_factor),
    )
    stop_refused(result, adv.state)
    if not snapshot.fresh:
        hold_back(result, snapshot)
    elif not snapshot.pdbs_fresh:
        hold_evicting(result)
    result.draining = adv.state.drains
    result.release = orphans(snapshot, adv.state, {d.node for d in result.scale_downs})
    return result, adv.state


def warm_pools(snapshot: Snapshot, warm_start: float, spot_price_factor: float) -> dict[str, WarmStanding]:
    """Each warm pool's ready instances, time to Ready (a stopped instance's: `warm_start`) and standing cost (the
    plan's cost of keeping it)."""
    out = {}
    for name, obs in snapshot.pools.items():
        w = obs.pool.warm
        if w is None or not w.size:
            continue
        ready_in = RUNNING_START if w.state == "running" else warm_start
        price = standing_price(w, obs.pool.list_price(spot_price_factor), obs.pool.root_volume_gib)
        out[name] = WarmStanding(w.size, obs.warm, w.state, ready_in, price)
    return out


def hold_evicting(plan: Plan) -> None:
    """On a failing PodDisruptionBudget watch only the drains that must evict a pod wait for it: an empty
    node (DaemonSet and mirror pods aside) disrupts no budget, and stays paid for if held back."""
    evicting = [d for d in plan.scale_downs if not d.forced and d.evict]
    if evicting:
        plan.notes.append(f"the PodDisruptionBudget watch is failing: {len(evicting)} drain(s) that evict pods "
                          "wait for it (" + ", ".join(d.node for d in evicting[:5]) + ")")
        plan.scale_downs = [d for d in plan.scale_downs if d not in evicting]


def stop_refused(plan: Plan, state: State) -> None:
    """No action on a pool whose cloud refused in a way asking again cannot fix, until its long backoff
    ends (the expander already plans its pods elsewhere)."""
    if not state.refused:
        return
    stopped = {p for p in state.refused}
    plan.resets = [r for r in plan.resets if r.pool not in stopped]
    plan.scale_downs = [d for d in plan.scale_downs if d.pool not in stopped or d.forced]


def with_strays(reset: SetSize, snapshot: Snapshot) -> SetSize:
    """A size given back below the instances that exist names the instances that never registered to
    terminate, oldest first."""
    obs = snapshot.pools.get(reset.pool)
    if obs is None or obs.instances <= reset.desired:
        return reset
    registered = {n.provider_id for n in snapshot.nodes if n.provider_id}
    strays = sorted((m for m in obs.members if m.provider_id not in registered), key=lambda m: m.launched_at)
    return dataclasses.replace(reset, strays=tuple(m.provider_id for m in strays[:obs.instances - reset.desired]))


def hold_back(plan: Plan, snapshot: Snapshot) -> None:
    """On stale cluster data nothing that removes capacity is acted on: no scale-down (interruption drains
    aside: the cloud takes those nodes anyway), and no size reset below the instances that
    exist (those would be terminated as "never registered" on the word of a Node list that may be old)."""
    planned = [d for d in plan.scale_downs if not d.forced]
    if planned:
        plan.notes.append(f"cluster state is stale: {len(planned)} scale-down(s) held back")
        plan.scale_downs = [d for d in plan.scale_downs if d.forced]
    held = [r for r in plan.resets if r.pool in snapshot.pools and r.desired < snapshot.pools[r.pool].instances]
    if held:
        plan.notes.append("cluster state is stale: size reset(s) below the existing instances held back: "
                          + ", ".join(f"{r.pool} -> {r.desired}" for r in held))
        plan.resets = [r for r in plan.resets if r not in held]
