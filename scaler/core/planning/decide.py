"""The core's one entry: `decide(snapshot, state, config, memo) -> (Plan, State)`, one pass of decisions. Pure.

Room for pods that do not exist yet is asked two ways, and both are injected here, in one place, as pods-to-be
the planner places with the real ones (as cluster-autoscaler's pod list processors do), into one `Injected`:
the ProvisioningRequests in the Snapshot (`provreq`: stand-ins for a request's pod sets, and the stand-ins of
the bookings it holds placed on their nodes), and the CapacityBuffers (`buffers`: placeholders, planned after
the real pending and displaced pods, at the lowest priority). `plan` (planner.py) decides everything else.
The settings tree stops here: the planners get the pass's `PlanningContext` (context.py), what they read of it.
The Plan carries each request's conditions (`Plan.requests`) beside each buffer's outcome (`Plan.buffers`);
only this pass writes the next State (bookings and interruption notices included).
`scaler.reconcile.Reconciler` calls it for `scaler run` and the simulator alike, and `plan` / `explain`
on a snapshot file.
"""

from __future__ import annotations

import dataclasses

from scaler.core.config.settings import ScalerConfig
from scaler.core.model.provreq import PROVISIONED
from scaler.core.planning import buffers, provreq
from scaler.core.planning.context import planning_context
from scaler.core.planning.decisions import Plan
from scaler.core.planning.injected import Injected
from scaler.core.planning.memo import Memo
from scaler.core.planning.planner import plan
from scaler.core.planning.snapshot import Snapshot
from scaler.core.planning.state import State


def decide(snapshot: Snapshot, state: State, config: ScalerConfig, memo: Memo | None = None) -> tuple[Plan, State]:
    """One pass with the requests and buffers in it: the plan (scale-ups for atomic requests and buffers,
    booked nodes kept from scale-down, each request's conditions in `Plan.requests`, each buffer's outcome in
    `Plan.buffers`) and the next state. The input state is not changed. `memo`: what the last passes worked
    out that this one may reuse (the Reconciler's; None: from scratch); a plan is the same with it or without."""
    ctx = planning_context(config, memo)  # what the planners read of the settings (the whole tree stops here)
    injected = Injected()
    requests, view = snapshot.requests, snapshot
    answers: dict[str, tuple[bool, str]] = {}
    if requests:
        # `inject` adds stand-ins to the nodes' pod lists and changes nothing else: each node gets a list of its own.
        view = dataclasses.replace(snapshot, pending=list(snapshot.pending),
                                   nodes=[dataclasses.replace(n, pods=list(n.pods), version=0) for n in snapshot.nodes])
        provreq.inject(view, requests, ctx, state, injected)
        answers = provreq.book_checks(view, requests, ctx, injected)
    buffers.inject(snapshot.buffers, injected)
    result, new_state = plan(view, state, ctx, memo, injected.placeholders)
    result.buffers = buffers.outcomes(snapshot.buffers, injected, result.verdicts, snapshot.now)
    new_state.booked = {k: v for k, v in injected.booked.items() if not injected.lost.get(k)}
    nodes = {n.name: n for n in snapshot.nodes}
    for req in requests:
        live = not req.done and provreq.refusal(req) is None and not req.true(PROVISIONED)
        never = provreq.check(req, snapshot, ctx) if live and req.key in injected.asking else None
        result.requests[req.key] = provreq.conditions(
            req, now=snapshot.now, plan=result, injected=injected, nodes=nodes, checked=answers.get(req.key),
            never=never, ttl=ctx.timings.booking_ttl)
    return result, new_state
