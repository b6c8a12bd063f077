"""Properties of the planner on random clusters (hypothesis): every plan is re-checked with the predicates.

- a plan never takes a pool beyond its max;
- a pod that fits no pool's template is never a scale-up;
- every pod packed onto a new node fits that node's template, together with the other pods packed
  there; every pod placed on an existing node fits it, together with the others placed there;
- scale-down never picks a node that holds a pod it may not evict, and never leaves a pool below min.
"""

from __future__ import annotations

import copy
from typing import Any

from core_builders import GPU_TOL, MIN_GPUS_TOL, POOLS, config, node_of, plan, pod
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scaler.core.model import keys
from scaler.core.model.objects import Node, Pod, SelectorRequirement
from scaler.core.model.resources import fits, total
from scaler.core.model.workload import blocker
from scaler.core.planning.advance import advance
from scaler.core.planning.context import planning_context
from scaler.core.planning.room import Room
from scaler.core.planning.scaledown import plan_scale_down
from scaler.core.planning.scaleup import plan_scale_up
from scaler.core.planning.snapshot import LaunchFailure, PoolObservation, Snapshot
from scaler.core.planning.state import Backoff, State
from scaler.core.scheduling import predicates

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ZONES = ["us-east-1a", "us-east-1b"]


def small_pools() -> list[dict[str, Any]]:
    out = []
    for p in POOLS:
        q = dict(p)
        q["max"] = min(q["max"], 3)  # small maxima so that the limits are actually hit
        out.append(q)
    return out


CFG = config(small_pools())
POOL_NAMES = [p.name for p in CFG.pools]


@st.composite
def pods(draw: st.DrawFn, prefix: str, running: bool = False) -> Pod:
    gpu = draw(st.sampled_from([0, 0, 1] if running else [0, 0, 1, 2, 8, 16]))
    tolerations = draw(st.sampled_from([(), (GPU_TOL,), (GPU_TOL, MIN_GPUS_TOL)]))
    selector = draw(st.sampled_from([{}, {}, {keys.LABEL_ZONE: "us-east-1b"}, {keys.LABEL_POOL: "gpu1-od"}]))
    affinity = draw(st.sampled_from([
        (), ((SelectorRequirement(keys.LABEL_CAPACITY_TYPE, "NotIn", ("spot",)),),),
        ((SelectorRequirement(keys.LABEL_GPU_COUNT, "Gt", ("4",)),), (SelectorRequirement(keys.LABEL_ZONE, "In",
                                                                                          ("us-east-1a",)),)),
    ]))
    annotations = draw(st.sampled_from([{}, {}, {}, {keys.ANNOTATION_SAFE_TO_EVICT: "false"},
                                        {keys.ANNOTATION_OPENAI_DO_NOT_DRAIN: "true"}]))
    owner = draw(st.sampled_from(["ReplicaSet", "ReplicaSet", "Job", None, "DaemonSet"] if running
                                 else ["ReplicaSet", "Job"]))
    labels = {keys.LABEL_POD_GROUP: draw(st.sampled_from(["g1", "g2"]))} if gpu and draw(st.booleans()) else {}
    n = draw(st.integers(min_value=0, max_value=10**6))
    cpus = ["250m", "1", "3"] if running else ["250m", "1", "3", "7", "40"]  # running pods fit somewhere
    mems = ["1Gi", "8Gi"] if running else ["1Gi", "8Gi", "100Gi"]
    return pod(f"{prefix}{n}", cpu=draw(st.sampled_from(cpus)),
               memory=draw(st.sampled_from(mems)), gpu=gpu, tolerations=tolerations,
               selector=selector, affinity=affinity, annotations=annotations, owner=owner, labels=labels)


@st.composite
def clusters(draw: st.DrawFn) -> Snapshot:
    pending = draw(st.lists(pods("p-"), max_size=25, unique_by=lambda p: p.name))
    nodes: list[Node] = []
    for i in range(draw(st.integers(min_value=0, max_value=8))):
        pool = draw(st.sampled_from(POOL_NAMES))
        zone = draw(st.sampled_from(CFG.pool(pool).zones))
        running = draw(st.lists(pods(f"r{i}-", running=True), max_size=4, unique_by=lambda p: p.name))
        node = node_of(CFG, pool, f"n{i}", zone=zone, gpus=draw(st.sampled_from([None, None, None, 0])))
        free = predicates.free_resources(node)
        for p in running:  # keep the existing nodes honest: only what fits runs there
            if fits(p.requests, free):
                node.pods.append(p)
                free = predicates.free_resources(node)
        nodes.append(node)
    registered: dict[str, int] = {}
    for n in nodes:
        assert n.pool is not None
        registered[n.pool] = registered.get(n.pool, 0) + 1
    obs = {}
    for p in CFG.pools:
        reg = registered.get(p.name, 0)
        desired = draw(st.integers(min_value=reg, max_value=max(reg, p.max_size)))
        obs[p.name] = PoolObservation(p, desired, desired)
    return Snapshot(now=5000.0, pending=pending, nodes=nodes, pools=obs)


def fits_some_template(p: Pod) -> bool:
    return any(predicates.fits(p, pool.template_node(zone, CFG.region)) for pool in CFG.pools for zone in pool.zones)


@SETTINGS
@given(clusters())
def test_scale_up_respects_max_and_every_placement_rechecks(snap: Snapshot) -> None:
    adv = advance(snap, State(), CFG.timings)
    up = plan_scale_up(snap, planning_context(CFG), adv)
    # every pending pod has a verdict
    assert set(up.verdicts) == {p.key for p in snap.pending}
    # never beyond a pool's max
    added: dict[str, int] = {}
    for u in up.scale_ups:
        added[u.pool] = added.get(u.pool, 0) + u.count
        assert u.new_desired <= CFG.pool(u.pool).max_size
    for name, n in added.items():
        assert adv.desired[name] + n <= CFG.pool(name).max_size
    # never a scale-up for a pod no template can take
    by_key = {p.key: p for p in snap.pending}
    planned = {k for u in up.scale_ups for k in u.pods}
    for key, v in up.verdicts.items():
        if not fits_some_template(by_key[key]):
            assert v.outcome != "scale-up" and key not in planned
    # every pod packed on a new node fits its template together with its node-mates
    assert sum(len(nn.pods) for nn in up.new_nodes) == len(planned)
    for nn in up.new_nodes:
        assert nn.template.is_template and nn.template.pool == nn.pool
        for p in nn.pods:
            assert predicates.static_reason(p, nn.template) is None
            assert up.verdicts[p.key].pool == nn.pool
        assert fits(total(p.requests for p in nn.pods), predicates.free_resources(nn.template))
    # every pod placed on an existing node fits it together with the others placed there
    nodes = {n.name: n for n in snap.nodes}
    on: dict[str, list[Pod]] = {}
    for key, node_name in up.placed_on.items():
        on.setdefault(node_name, []).append(by_key[key])
    for node_name, placed in on.items():
        node = nodes[node_name]
        gpu_coming = node.allocatable.get(keys.RES_GPU, 0) == 0 and CFG.pool(node.pool or "").gpus > 0
        ref = Node(node.name, node.labels, node.taints, CFG.pool(node.pool or "").allocatable() if gpu_coming
                   else node.allocatable, pods=node.pods)
        for p in placed:
            assert predicates.static_reason(p, ref) is None
        assert fits(total(p.requests for p in placed), predicates.free_resources(ref))


@SETTINGS
@given(clusters())
def test_scale_down_moves_evicted_pods_without_double_booking(snap: Snapshot) -> None:
    cfg = CFG.model_copy(update={"scale_down": CFG.scale_down.model_copy(update={"budget_fraction": 1.0})})
    state = State(unneeded_since={n.name: 0.0 for n in snap.nodes})
    ctx = planning_context(cfg)
    adv = advance(snap, state, cfg.timings)
    up = plan_scale_up(snap, ctx, adv)
    down = plan_scale_down(snap, ctx, adv, up.scale_ups, Room(up.packer, up.filtered))
    gone = {d.node for d in down.scale_downs}
    evicted = {k for d in down.scale_downs for k in d.evict}
    # Evicted pods move to a remaining node, or, when their node is consolidated, wait for a new
    # node of a cheaper pool (the reason says so).
    consolidated = {k for d in down.scale_downs if "consolidation" in d.reason for k in d.evict}
    assert set(down.moves) == evicted - consolidated
    by_key = {p.key: p for p in snap.pending} | {p.key: p for n in snap.nodes for p in n.pods}
    arriving: dict[str, list[Pod]] = {}
    for key, target in [*up.placed_on.items(), *down.moves.items()]:
        arriving.setdefault(target, []).append(by_key[key])
    nodes = {n.name: n for n in snap.nodes}
    for target, pods_in in arriving.items():
        node = nodes[target]
        assert target not in gone
        if target in {k for k in up.placed_on.values()} and node.allocatable.get(keys.RES_GPU, 0) == 0 and \
                CFG.pool(node.pool or "").gpus > 0:
            continue  # a coming GPU node: checked against its template in the scale-up property
        for p in pods_in:
            assert predicates.static_reason(p, node) is None
        assert fits(total(p.requests for p in pods_in), predicates.free_resources(node))


@SETTINGS
@given(clusters())
def test_scale_down_only_removes_nodes_whose_pods_may_be_evicted(snap: Snapshot) -> None:
    cfg = CFG.model_copy(update={"scale_down": CFG.scale_down.model_copy(update={"budget_fraction": 1.0})})
    snap.pending = []
    _, state = plan(snap, State(), cfg)
    snap.now += cfg.timings.unneeded_time
    result, _ = plan(snap, state, cfg)
    nodes = {n.name: n for n in snap.nodes}
    per_pool: dict[str, int] = {}
    for d in result.scale_downs:
        node = nodes[d.node]
        assert all(blocker(p) is None for p in node.pods)
        assert d.provider_id == node.provider_id and d.pool == node.pool
        per_pool[d.pool] = per_pool.get(d.pool, 0) + 1
    registered: dict[str, int] = {}
    for n in snap.nodes:
        registered[n.pool or ""] = registered.get(n.pool or "", 0) + 1
    for name, n in per_pool.items():
        assert registered[name] - n >= cfg.pool(name).min_size


@SETTINGS
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6), st.booleans(), st.integers(0, 400)),
                min_size=1, max_size=8))
def test_in_flight_always_equals_desired_minus_registered(passes: list[tuple[int, int, bool, int]]) -> None:
    """Whatever the cloud reports pass after pass, the recorded requests add up to what is in flight,
    a size given back is never below what exists, and backoff never exceeds its maximum."""
    pool = CFG.pool("gpu1-spot-a")
    state, now = State(), 1000.0
    for desired, registered, failed, step in passes:
        now += step
        nodes = [node_of(CFG, pool.name, f"n{i}") for i in range(registered)]
        instances = max(registered, desired - 1 if failed else desired)
        fails = [LaunchFailure(None, "other", "x", "y", now)] if failed else []
        snap = Snapshot(now=now, pending=[], nodes=nodes,
                        pools={pool.name: PoolObservation(pool, desired, instances, fails)})
        adv = advance(snap, state, CFG.timings)
        state = adv.state
        assert sum(r.count for r in state.in_flight.get(pool.name, [])) == adv.in_flight(pool.name)
        assert adv.desired[pool.name] >= min(desired, registered)  # a reset never cuts below what registered
        for reset in adv.resets:
            assert reset.desired >= registered and reset.desired < desired
        for b in state.backoff.values():
            assert b.until - now <= CFG.timings.backoff_max


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_plan_is_pure_and_deterministic(snap: Snapshot) -> None:
    state = State(unneeded_since={n.name: 0.0 for n in snap.nodes}, backoff={"gpu1-spot-a": Backoff(6000.0, 1)})
    before_snap, before_state = copy.deepcopy(snap), copy.deepcopy(state)
    first, next_state = plan(snap, state, CFG)
    assert snap == before_snap and state == before_state  # nothing the caller passed in was changed
    again, again_state = plan(snap, state, CFG)
    assert first == again and next_state == again_state
