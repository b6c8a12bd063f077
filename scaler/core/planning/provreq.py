"""ProvisioningRequests (autoscaling.x-k8s.io/v1), the way Kueue's ProvisioningRequest admission check asks
for capacity, answered by the same planner as everything else. Pure.

Two classes, as cluster-autoscaler serves them:

- `check-capacity.autoscaling.x-k8s.io`: do all the pod sets fit now, on the nodes that are up (what a pool
  could add does not count: Kueue starts the workload on the answer)? Provisioned=True (CapacityIsFound),
  and the room found is booked, so a second request for the same room is refused; or Provisioned=False
  (CapacityIsNotFound, asked again next pass). Nothing is added for it. As cluster-autoscaler's
  checkcapacity provisioning class (provisioningrequest/checkcapacity/provisioningclass.go): requests in
  creation order, each placed on the cluster as the ones before it left it. The nodes coming for an atomic
  request still Provisioning are that request's: the room its pods take there is no check's.
- `best-effort-atomic-scale-up.autoscaling.x-k8s.io`: add every node the pod sets need, or none. The
  request's pods stand in as one pending gang (all or none, the gang rules of the planner); when every one
  of them fits on a node that is up, Provisioned=True (CapacityIsProvisioned, upstream's reason). A gang
  the pools can never hold (a pool's max, a
  cap) is Failed with the planner's reasons.

A Provisioned request books its capacity for `timings.booking_ttl` seconds: its stand-in pods, less the real pods
that consume it (annotation autoscaling.x-k8s.io/consume-provisioning-request) and already run, are placed
on the nodes as pods without a controller, all or none, so scale-down keeps those nodes; while they all
find room, the real consumers pending meanwhile are the booking's, not a reason to scale up, and when they
do not (another pod took the room, a node went) those consumers ask for nodes like any pending pod. The
nodes a booking holds are remembered (State.booked); when one of them is gone (a spot reclaim) before the
booking ends, the request gets CapacityRevoked, else BookingExpired when it ends. Parameters other than
`ValidUntilSeconds` are refused with a reason, as is any other class. A request not provisioned within its
`ValidUntilSeconds` is Failed (Expired) and no longer Provisioned=False (Provisioning): it asks for nothing more.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from scaler.core.model import keys
from scaler.core.model.conditions import Condition, set_condition
from scaler.core.model.objects import Node, Pod
from scaler.core.model.provreq import (
    ACCEPTED,
    BOOKING_EXPIRED,
    CAPACITY_REVOKED,
    FAILED,
    PROVISIONED,
    ProvisioningRequest,
)
from scaler.core.planning.context import PlanningContext
from scaler.core.planning.decisions import Plan, PodVerdict
from scaler.core.planning.injected import Injected
from scaler.core.planning.planner import plan
from scaler.core.planning.snapshot import PoolObservation, Snapshot
from scaler.core.planning.state import State
from scaler.core.scheduling.predicates import fits

CHECK_CAPACITY = "check-capacity.autoscaling.x-k8s.io"
ATOMIC_SCALE_UP = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
CLASSES = (CHECK_CAPACITY, ATOMIC_SCALE_UP)
PARAM_VALID_UNTIL = "ValidUntilSeconds"
SUPPORTED_PARAMETERS = frozenset({PARAM_VALID_UNTIL})

_FITS = frozenset({"fits-existing", "fits-in-flight", "scale-up"})


def refusal(req: ProvisioningRequest) -> str | None:
    """Why the scaler will not serve the request, or None."""
    if req.problem:
        return req.problem
    if req.class_name not in CLASSES:
        return f"provisioningClassName {req.class_name!r} is not served (served: {', '.join(CLASSES)})"
    unknown = sorted(set(req.parameters) - SUPPORTED_PARAMETERS)
    if unknown:
        return f"parameters {unknown} are not supported (supported: {sorted(SUPPORTED_PARAMETERS)})"
    raw = req.parameters.get(PARAM_VALID_UNTIL)
    if raw is not None and (not raw.isdigit() or int(raw) <= 0):
        return f"parameter {PARAM_VALID_UNTIL}={raw!r} must be a whole number of seconds above 0"
    if not req.pod_sets or any(s.count <= 0 for s in req.pod_sets):
        return "podSets must name at least one pod, each with a count above 0"
    return None


def stand_ins(req: ProvisioningRequest, ctx: PlanningContext, count: int | None = None) -> list[Pod]:
    """The request's pods as the planner sees them: one gang of all of them (or the first `count`)."""
    out: list[Pod] = []
    gang = f"{keys.PROVREQ_GANG_PREFIX}{req.name}"
    for i, pod_set in enumerate(req.pod_sets):
        for j in range(pod_set.count):
            t = pod_set.template
            out.append(dataclasses.replace(
                t, name=f"{req.name}-provreq-{i}-{j}", namespace=req.namespace, uid="", node_name=None,
                phase="Pending", owner_kind=None, created_at=req.created_at,
                scheduling_group=None,  # the request's own gang, not the PodGroup its template's pods name
                labels={**t.labels, ctx.gang_label: gang},
                annotations={**t.annotations, ctx.gang_min_annotation: str(req.total)}))
    return out[:count] if count is not None else out


def expired(req: ProvisioningRequest, now: float) -> bool:
    """Not provisioned within its ValidUntilSeconds: Failed (Expired), it asks for nothing more."""
    valid_until = req.parameters.get(PARAM_VALID_UNTIL)
    return not req.true(PROVISIONED) and bool(valid_until) and now > req.created_at + int(valid_until or 0)


def consumers(req: ProvisioningRequest, pods: Iterable[Pod]) -> list[Pod]:
    names = (keys.ANNOTATION_CONSUME_PROVREQ, keys.ANNOTATION_CONSUME_PROVREQ_CA)
    return [p for p in pods if p.namespace == req.namespace and any(p.annotations.get(n) == req.name for n in names)]


def booked(req: ProvisioningRequest, now: float, ttl: float) -> bool:
    cond = req.conditions.get(PROVISIONED)
    return req.class_name in CLASSES and cond is not None and cond.status == "True" and not req.done \
        and now < cond.at + ttl


def inject(snapshot: Snapshot, requests: Iterable[ProvisioningRequest], ctx: PlanningContext,
           state: State, out: Injected) -> None:
    """Put the requests into the snapshot (its pending list and nodes' pod lists changed in place; give it
    copies): an accepted atomic request not yet provisioned asks as pending stand-ins; a booked one holds its
    nodes with stand-ins placed on them. `state.booked`: the nodes each booking held in earlier passes."""
    remembered = state.booked
    present = {n.name for n in snapshot.nodes}
    running = [p for n in snapshot.nodes for p in n.pods]
    for req in requests:
        if req.done or refusal(req) is not None:
            continue
        if booked(req, snapshot.now, ctx.timings.booking_ttl):
            # Room is held for every pod of the request not running yet (a consumer back to pending after
            # its node went needs room again). While it is all held, the booking's pending pods are its own,
            # not a reason for another scale-up; when it is not, the booking is revoked and they ask again.
            mine = consumers(req, running)
            hosts = _place(stand_ins(req, ctx, max(0, req.total - len(mine))), snapshot.nodes)
            if hosts is not None:
                taken = {p.key for p in consumers(req, snapshot.pending)}
                snapshot.pending = [p for p in snapshot.pending if p.key not in taken]
            held = remembered.get(req.key)
            if held is None:  # the first pass of the booking (or after a restart): what it holds now
                held = frozenset({p.node_name for p in mine if p.node_name} | (hosts or set()))
            out.booked[req.key] = held
            out.lost[req.key] = sorted(held - present)
        elif not req.true(PROVISIONED) and req.class_name == ATOMIC_SCALE_UP and not expired(req, snapshot.now):
            pods = stand_ins(req, ctx)
            snapshot.pending.extend(pods)
            out.asking[req.key] = [p.key for p in pods]


def book_checks(snapshot: Snapshot, requests: Iterable[ProvisioningRequest], ctx: PlanningContext,
                injected: Injected) -> dict[str, tuple[bool, str]]:
    """Answer the check-capacity requests not provisioned yet, oldest first, from the nodes that are up:
    one whose pods all fit books that room at once (its stand-ins are placed on the snapshot's nodes and
    its nodes recorded in `injected.booked`), so the next request sees it taken."""
    out: dict[str, tuple[bool, str]] = {}
    live = [r for r in requests if r.class_name == CHECK_CAPACITY and not r.done and refusal(r) is None
            and not r.true(PROVISIONED) and not expired(r, snapshot.now)]
    if not live:
        return out
    running = [p for n in snapshot.nodes for p in n.pods]
    # The nodes coming for an atomic request are its own before it is Provisioned: while they register, the
    # room its stand-ins take on the nodes up is no check-capacity request's (held for the answers, then let go).
    held = _hold([p for r in requests if _coming_for(r) for p in stand_ins(r, ctx)], snapshot.nodes)
    for req in sorted(live, key=lambda r: (r.created_at, r.key)):
        mine = consumers(req, running)
        hosts = _place(stand_ins(req, ctx, max(0, req.total - len(mine))), snapshot.nodes)
        if hosts is None:
            out[req.key] = (False, f"Capacity is not found: the {req.total} pods do not all fit on the nodes "
                                   "that are up (check-capacity adds no node); asked again next pass")
            continue
        injected.booked[req.key] = frozenset({p.node_name for p in mine if p.node_name} | hosts)
        injected.lost[req.key] = []
        out[req.key] = (True, f"Capacity is found in the cluster: all {req.total} pods fit on the nodes that are "
                              f"up, booked for {ctx.timings.booking_ttl:g} s")
    for node, pod in held:
        node.pods.remove(pod)
    return out


def _coming_for(req: ProvisioningRequest) -> bool:
    """An atomic request whose nodes were asked for and are still coming (Provisioned=False, Provisioning)."""
    cond = req.conditions.get(PROVISIONED)
    return req.class_name == ATOMIC_SCALE_UP and not req.done and refusal(req) is None and cond is not None \
        and cond.status == "False" and cond.reason == "Provisioning"


def _hold(pods: list[Pod], nodes: list[Node]) -> list[tuple[Node, Pod]]:
    """First fit of each stand-in onto ready, schedulable nodes, as many as fit (not all or none): they become
    pods there; returns them, for the caller to take back."""
    ordered = sorted((n for n in nodes if n.ready and not n.unschedulable and not n.is_template),
                     key=lambda n: n.name)
    placed: list[tuple[Node, Pod]] = []
    for pod in pods:
        node = next((n for n in ordered if fits(pod, n)), None)
        if node is not None:
            placed.append((node, dataclasses.replace(pod, node_name=node.name, phase="Running")))
            node.pods.append(placed[-1][1])
    return placed


def _place(pods: list[Pod], nodes: list[Node]) -> set[str] | None:
    """First fit of the stand-ins onto ready, schedulable nodes, all or none: when every one finds a node they
    become pods there and the names of those nodes are returned, else nothing is placed and None is."""
    placed = _hold(pods, nodes)
    if len(placed) < len(pods):
        for node, pod in placed:
            node.pods.remove(pod)
        return None
    return {node.name for node, _ in placed}


def check(req: ProvisioningRequest, snapshot: Snapshot, ctx: PlanningContext) -> tuple[bool, str]:
    """Plan the request's pods alone on an empty cluster whose pools may all grow to their max: False there
    means never."""
    pending = stand_ins(req, ctx)
    pools = {name: PoolObservation(pool=obs.pool, desired=0, instances=0) for name, obs in snapshot.pools.items()}
    alone = Snapshot(now=snapshot.now, pending=pending, nodes=[], pools=pools)
    result, _ = plan(alone, State(), ctx)
    verdicts = [result.verdicts[p.key] for p in pending if p.key in result.verdicts]
    stuck = [v for v in verdicts if v.outcome not in _FITS]
    if len(verdicts) == req.total and not stuck:
        return True, f"all {req.total} pods fit on an empty cluster"
    return False, _why(stuck)


def _why(stuck: list[PodVerdict]) -> str:
    if not stuck:
        return "the planner saw none of the request's pods"
    reasons = stuck[0].reasons
    detail = "; ".join(f"{pool}: {why}" for pool, why in sorted(reasons.items())) or "no pool fits them"
    return f"{len(stuck)} pods fit no pool: {detail}"


_set = set_condition


def conditions(req: ProvisioningRequest, *, now: float, plan: Plan | None, injected: Injected,
               nodes: Mapping[str, Node], checked: tuple[bool, str] | None = None,
               never: tuple[bool, str] | None = None, ttl: float) -> dict[str, Condition]:
    """The request's conditions after this pass (unchanged ones keep their transition time). `checked`: a
    check-capacity request's answer (`book_checks`); `never`: an atomic one's `check`; `ttl`: how long a
    booking holds (timings.booking_ttl)."""
    conds = dict(req.conditions)
    if req.done:
        return conds
    why = refusal(req)
    if why is not None:
        _set(conds, ACCEPTED, "False", "Rejected", why, now)
        _set(conds, FAILED, "True", "Rejected", why, now)
        return conds
    _set(conds, ACCEPTED, "True", "Accepted", "ProvisioningRequest is accepted by gpuburst", now)
    if expired(req, now):
        why = f"not provisioned within {PARAM_VALID_UNTIL}={req.parameters[PARAM_VALID_UNTIL]}"
        _set(conds, FAILED, "True", "Expired", why, now)
        if PROVISIONED in conds:  # no longer Provisioning: nothing is asked or held for it from now on
            _set(conds, PROVISIONED, "False", "Expired", f"{why}; the nodes asked for it are not held", now)
        return conds
    if req.class_name == CHECK_CAPACITY and not req.true(PROVISIONED):
        if checked is not None:
            ok, message = checked
            _set(conds, PROVISIONED, "True" if ok else "False",
                 "CapacityIsFound" if ok else "CapacityIsNotFound", message, now)
        return conds
    if req.true(PROVISIONED):
        provisioned = conds[PROVISIONED].at
        if injected.lost.get(req.key):
            _set(conds, CAPACITY_REVOKED, "True", "CapacityRevoked",
                 f"booked nodes are gone: {', '.join(injected.lost[req.key])}", now)
        elif now >= provisioned + ttl:
            _set(conds, BOOKING_EXPIRED, "True", "CapacityReservationTimeExpired",
                 f"capacity was kept for {ttl:g} s after it was provisioned", now)
        return conds
    keys_ = injected.asking.get(req.key, [])
    verdicts = [plan.verdicts[k] for k in keys_ if plan is not None and k in plan.verdicts]
    if len(verdicts) < len(keys_) or not keys_:
        return conds
    if all(v.outcome == "fits-existing" and v.node is not None and v.node in nodes and nodes[v.node].ready
           for v in verdicts):
        _set(conds, PROVISIONED, "True", "CapacityIsProvisioned", f"all {req.total} pods fit on nodes that are up",
             now)
        return conds
    if never is not None and not never[0]:
        _set(conds, FAILED, "True", "CapacityIsNotFound", never[1], now)
        return conds
    coming = sum(1 for v in verdicts if v.outcome in ("scale-up", "fits-in-flight"))
    if coming + sum(1 for v in verdicts if v.outcome == "fits-existing") == len(verdicts):
        _set(conds, PROVISIONED, "False", "Provisioning", f"{coming} of {req.total} pods wait for nodes to come up",
             now)
    else:
        stuck = [v for v in verdicts if v.outcome not in _FITS]
        _set(conds, PROVISIONED, "False", "CapacityIsNotFound", f"not now: {_why(stuck)}", now)
    return conds
