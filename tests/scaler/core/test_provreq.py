"""ProvisioningRequests through the planner: check-capacity answers, atomic scale-ups all or none, bookings
that keep their nodes until they expire, refusals with a reason."""

from __future__ import annotations

import dataclasses

from core_builders import config, node_of, pod, snapshot

from scaler.core.config.settings import ScalerConfig
from scaler.core.model import keys
from scaler.core.model.objects import Node, Pod
from scaler.core.model.provreq import BOOKING_EXPIRED, CAPACITY_REVOKED, PROVISIONED, PodSet, ProvisioningRequest
from scaler.core.planning.decide import decide
from scaler.core.planning.decisions import Plan
from scaler.core.planning.provreq import ATOMIC_SCALE_UP, CHECK_CAPACITY
from scaler.core.planning.snapshot import Snapshot
from scaler.core.planning.state import State

POOLS = [
    {"name": "system", "role": "system", "instance_types": ["m6i.large"], "zones": ["us-east-1a"], "min": 1,
     "max": 2},
    {"name": "gpu8-od", "instance_types": ["g6.48xlarge"], "zones": ["us-east-1a"], "max": 6},
]


def request(cls: str, count: int = 4, **kw: object) -> ProvisioningRequest:
    return ProvisioningRequest(namespace="ml", name="train", class_name=cls,
                               pod_sets=[PodSet(pod("worker", cpu="8", memory="64Gi", gpu=8), count)],
                               created_at=900.0, **kw)  # type: ignore[arg-type]


def step(req: ProvisioningRequest, snap: Snapshot, state: State, cfg: ScalerConfig) -> tuple[Plan, State]:
    result, state = decide(dataclasses.replace(snap, requests=[req]), state, cfg)
    req.conditions = result.requests[req.key]
    return result, state


def status(req: ProvisioningRequest) -> dict[str, tuple[str, str]]:
    return {k: (c.status, c.reason) for k, c in req.conditions.items()}


def test_check_capacity_says_yes_only_on_the_nodes_that_are_up_and_adds_nothing() -> None:
    """As cluster-autoscaler's check-capacity class: what the pools could add does not count (issue 23)."""
    cfg = config(POOLS)
    req = request(CHECK_CAPACITY)
    result, _ = step(req, snapshot(cfg, []), State(), cfg)
    assert status(req) == {"Accepted": ("True", "Accepted"), "Provisioned": ("False", "CapacityIsNotFound")}
    assert result.scale_ups == []  # a question, not an order

    nodes = [node_of(cfg, "gpu8-od", f"n{i}") for i in range(4)]
    req = request(CHECK_CAPACITY)
    result, _ = step(req, snapshot(cfg, [], nodes, desired={"gpu8-od": 4}), State(), cfg)
    assert status(req)["Provisioned"] == ("True", "CapacityIsFound") and result.scale_ups == []


def test_atomic_scale_up_provisions_when_every_node_is_up_then_books_them_until_expiry() -> None:
    cfg = config(POOLS, timings={"unneeded_time": 60})
    req = request(ATOMIC_SCALE_UP)
    result, state = step(req, snapshot(cfg, [], now=1000.0), State(), cfg)
    assert [(u.pool, u.new_desired) for u in result.scale_ups] == [("gpu8-od", 4)]
    assert status(req)["Provisioned"] == ("False", "Provisioning")

    # The four nodes come up: every pod set fits on a node that is up.
    nodes = [node_of(cfg, "gpu8-od", f"n{i}") for i in range(4)]
    result, state = step(req, snapshot(cfg, [], nodes, now=1300.0, desired={"gpu8-od": 4}), state, cfg)
    assert status(req)["Provisioned"] == ("True", "CapacityIsProvisioned") and result.scale_ups == []
    provisioned = req.conditions["Provisioned"].at

    # Booked: the empty nodes are not removed, pass after pass, past the unneeded time.
    for now in (1400.0, 1500.0, 1600.0, provisioned + cfg.timings.booking_ttl - 10):
        nodes = [node_of(cfg, "gpu8-od", f"n{i}") for i in range(4)]
        result, state = step(req, snapshot(cfg, [], nodes, now=now, desired={"gpu8-od": 4}), state, cfg)
        assert result.scale_downs == [] and result.unneeded == {} and not req.true(BOOKING_EXPIRED)

    # The booking expires: the request says so, and the idle nodes go like any other.
    nodes = [node_of(cfg, "gpu8-od", f"n{i}") for i in range(4)]
    now = provisioned + cfg.timings.booking_ttl + 1
    step(req, snapshot(cfg, [], nodes, now=now, desired={"gpu8-od": 4}), state, cfg)
    assert status(req)["BookingExpired"] == ("True", "CapacityReservationTimeExpired")
    for later in (now + 10, now + 100):
        result, state = step(req, snapshot(cfg, [], nodes, now=later, desired={"gpu8-od": 4}), state, cfg)
    assert set(result.unneeded) == {"n0", "n1", "n2", "n3"} and result.scale_downs  # within the drain budget


def test_a_booking_serves_its_own_pods_and_is_revoked_when_its_nodes_go() -> None:
    cfg = config(POOLS)
    req = request(ATOMIC_SCALE_UP)
    nodes = [node_of(cfg, "gpu8-od", f"n{i}") for i in range(4)]
    _, state = step(req, snapshot(cfg, [], nodes, now=1000.0, desired={"gpu8-od": 4}), State(), cfg)
    assert req.true(PROVISIONED)
    # Kueue admits the job: its pods (pending a moment) consume the request; no further scale-up for them.
    consumers = [dataclasses.replace(pod(f"job-{i}", cpu="8", memory="64Gi", gpu=8, ns="ml"),
                                     annotations={keys.ANNOTATION_CONSUME_PROVREQ: "train"}) for i in range(4)]
    result, state = step(req, snapshot(cfg, consumers, nodes, now=1100.0, desired={"gpu8-od": 4}), state, cfg)
    assert result.scale_ups == []
    # A spot reclaim takes two of the booked nodes before the pods land.
    result, state = step(req, snapshot(cfg, [], nodes[:2], now=1200.0, desired={"gpu8-od": 4}), state, cfg)
    assert status(req)["CapacityRevoked"] == ("True", "CapacityRevoked")


def test_atomic_fails_with_the_reason_when_a_pool_max_forbids_it() -> None:
    cfg = config([POOLS[0], {**POOLS[1], "max": 3}])
    req = request(ATOMIC_SCALE_UP)
    result, _ = step(req, snapshot(cfg, []), State(), cfg)
    assert result.scale_ups == []  # none rather than three of four
    assert status(req)["Failed"] == ("True", "CapacityIsNotFound")
    assert "gpu8-od" in req.conditions["Failed"].message and "max" in req.conditions["Failed"].message


def test_unsupported_class_or_parameter_is_refused_with_a_reason() -> None:
    cfg = config(POOLS)
    odd = request("queued-provisioning.gke.io")
    step(odd, snapshot(cfg, []), State(), cfg)
    assert status(odd)["Failed"] == ("True", "Rejected") and "not served" in odd.conditions["Failed"].message
    param = request(ATOMIC_SCALE_UP, parameters={"MaxRunDurationSeconds": "3600"})
    result, _ = step(param, snapshot(cfg, []), State(), cfg)
    assert status(param)["Accepted"] == ("False", "Rejected") and result.scale_ups == []
    assert "MaxRunDurationSeconds" in param.conditions["Failed"].message


def _running(cfg: ScalerConfig, names: list[str], workers: list[Pod]) -> list[Node]:
    nodes = [node_of(cfg, "gpu8-od", n) for n in names]
    for node, worker in zip(nodes, workers, strict=False):
        node.pods.append(dataclasses.replace(worker, node_name=node.name, phase="Running"))
    return nodes


def _workers() -> list[Pod]:
    return [dataclasses.replace(pod(f"job-{i}", cpu="8", memory="64Gi", gpu=8, ns="ml"),
                                annotations={keys.ANNOTATION_CONSUME_PROVREQ: "train"}) for i in range(4)]


def test_a_consumer_back_to_pending_after_its_node_went_asks_for_a_node_at_once() -> None:
    cfg = config(POOLS)
    req = request(ATOMIC_SCALE_UP)
    nodes = [node_of(cfg, "gpu8-od", f"n{i}") for i in range(4)]
    _, state = step(req, snapshot(cfg, [], nodes, now=1000.0, desired={"gpu8-od": 4}), State(), cfg)
    workers = _workers()
    # The job runs on the four booked nodes.
    running = _running(cfg, ["n0", "n1", "n2", "n3"], workers)
    _, state = step(req, snapshot(cfg, [], running, now=1050.0, desired={"gpu8-od": 4}), state, cfg)
    assert state.booked == {req.key: frozenset({"n0", "n1", "n2", "n3"})} and not req.done
    # A spot reclaim takes n3 and its worker is pending again, while the booking still has minutes to go:
    # the booking is revoked and the worker asks for a node now, not when the booking expires.
    left = _running(cfg, ["n0", "n1", "n2"], workers)
    result, state = step(req, snapshot(cfg, [workers[3]], left, now=1100.0, desired={"gpu8-od": 3}), state, cfg)
    assert status(req)["CapacityRevoked"] == ("True", "CapacityRevoked")
    assert "n3" in req.conditions["CapacityRevoked"].message
    assert [(u.pool, u.new_desired) for u in result.scale_ups] == [("gpu8-od", 4)]


def test_room_taken_by_another_pod_is_asked_for_again_without_revoking_the_booking() -> None:
    cfg = config(POOLS)
    req = request(ATOMIC_SCALE_UP)
    nodes = [node_of(cfg, "gpu8-od", f"n{i}") for i in range(4)]
    _, state = step(req, snapshot(cfg, [], nodes, now=1000.0, desired={"gpu8-od": 4}), State(), cfg)
    _, state = step(req, snapshot(cfg, [], nodes, now=1050.0, desired={"gpu8-od": 4}), state, cfg)  # booked
    # Kueue admits the job; before its pods bind, another team's 8-GPU pod lands on n3. Nothing the booking
    # holds is gone, so it is not revoked (Kueue would deactivate the job), but the fourth worker asks for a
    # node like any pending pod instead of waiting for the booking to expire.
    workers = _workers()
    taken = [*(node_of(cfg, "gpu8-od", f"n{i}") for i in range(3)),
             _running(cfg, ["n3"], [pod("other", cpu="8", memory="64Gi", gpu=8, ns="team-b")])[0]]
    result, state = step(req, snapshot(cfg, workers, taken, now=1100.0, desired={"gpu8-od": 4}), state, cfg)
    assert not req.true(CAPACITY_REVOKED) and req.true(PROVISIONED)
    assert [(u.pool, u.new_desired) for u in result.scale_ups] == [("gpu8-od", 5)]


def test_serving_leaves_the_callers_snapshot_as_it_was() -> None:
    cfg = config(POOLS)
    req = request(ATOMIC_SCALE_UP)
    nodes = [node_of(cfg, "gpu8-od", f"n{i}") for i in range(4)]
    before = [list(n.pods) for n in nodes]
    _, state = step(req, snapshot(cfg, [], nodes, now=1000.0, desired={"gpu8-od": 4}), State(), cfg)
    snap = snapshot(cfg, [], nodes, now=1100.0, desired={"gpu8-od": 4})
    result, _ = step(req, snap, state, cfg)  # booked: the stand-ins sit on the nodes of the planner's view only
    assert req.true(PROVISIONED) and result.scale_downs == [] and result.unneeded == {}
    assert [list(n.pods) for n in snap.nodes] == before and snap.pending == []
