"""Scale-down: what may be removed, where the evicted pods go, and the limits on removals."""

from __future__ import annotations

from typing import Any

import pytest
from core_builders import POOLS, config, example_config, node_of, plan, pod, snapshot

from scaler.core.config.settings import ScalerConfig
from scaler.core.model import keys
from scaler.core.model.objects import Node, PodDisruptionBudget
from scaler.core.planning.decisions import Plan
from scaler.core.planning.snapshot import Snapshot
from scaler.core.planning.state import State

T0 = 10_000.0
CFG = example_config(scale_down=example_config().scale_down.model_copy(update={"budget_fraction": 1.0}))
LATER = T0 + CFG.timings.unneeded_time


def two_passes(snap_at: Any, cfg: ScalerConfig = CFG) -> Plan:
    """Observe at T0 (the nodes become unneeded), decide at T0 + unneeded_time."""
    _, state = plan(snap_at(T0), State(), cfg)
    result, _ = plan(snap_at(LATER), state, cfg)
    return result


def removed(result: Plan) -> list[str]:
    return sorted(d.node for d in result.scale_downs)


def cpu_node(name: str, *pods: Any) -> Node:
    return node_of(CFG, "cpu-spot", name, list(pods))


# --- unneeded ---------------------------------------------------------------------------------------
def test_busy_node_is_never_unneeded_and_unneeded_needs_time() -> None:
    nodes = [cpu_node("idle"), cpu_node("busy", pod("w", cpu="6"))]
    first, state = plan(snapshot(CFG, [], nodes, now=T0), State(), CFG)
    assert first.unneeded == {"idle": T0} and first.scale_downs == []
    early, state = plan(snapshot(CFG, [], nodes, now=LATER - 1), state, CFG)
    assert early.scale_downs == []
    on_time, _ = plan(snapshot(CFG, [], nodes, now=LATER), state, CFG)
    assert removed(on_time) == ["idle"]
    d = on_time.scale_downs[0]
    assert (d.pool, d.provider_id, d.evict) == ("cpu-spot", "aws:///idle", ())


def test_gpu_node_utilization_counts_gpus_only() -> None:
    # A 1-GPU node whose only pod uses no GPU but most of the cpu is idle as a GPU node.
    gpu = node_of(CFG, "gpu1-od", "gpu-n", [pod("cpu-hog", cpu="3")])
    helper = cpu_node("half", pod("w", cpu="4500m"))  # busy enough to stay, room for the cpu pod
    result = two_passes(lambda now: snapshot(CFG, [], [gpu, helper], now=now))
    assert removed(result) == ["gpu-n"]


def test_empty_nodes_go_first_within_the_budget() -> None:
    cfg = example_config()  # default budget: 10% of the nodes, at least 1
    nodes = [node_of(cfg, "cpu-spot", "low", [pod("w", cpu="1")]), node_of(cfg, "cpu-spot", "empty"),
             node_of(cfg, "cpu-spot", "full", [pod("x", cpu="7")])]
    result = two_passes(lambda now: snapshot(cfg, [], nodes, now=now), cfg)
    assert removed(result) == ["empty"]


# --- drainability ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("kwargs", "removable"), [
    ({}, True),
    ({"annotations": {keys.ANNOTATION_SAFE_TO_EVICT: "false"}}, False),
    ({"annotations": {keys.ANNOTATION_KARPENTER_DO_NOT_DISRUPT: "true"}}, False),
    ({"annotations": {keys.ANNOTATION_OPENAI_DO_NOT_DRAIN: "true"}}, False),
    ({"owner": None}, False),  # a bare pod would be lost
    ({"owner": None, "annotations": {keys.ANNOTATION_SAFE_TO_EVICT: "true"}}, True),
    ({"owner": "DaemonSet"}, True),  # dies with its node, not evicted
    ({"owner": "Node", "annotations": {keys.ANNOTATION_MIRROR_POD: "x"}}, True),  # static pod
])
def test_only_evictable_pods_allow_removal(kwargs: dict[str, Any], removable: bool) -> None:
    nodes = [cpu_node("n1", pod("w", cpu="1", **kwargs)), cpu_node("n2", pod("keep", cpu="6"))]
    result = two_passes(lambda now: snapshot(CFG, [], nodes, now=now))
    assert removed(result) == (["n1"] if removable else [])
    if removable and kwargs.get("owner", "ReplicaSet") in ("ReplicaSet", None):
        assert result.scale_downs[0].evict == ("default/w",)
    if not removable:
        assert any("n1" in n for n in result.notes)


def test_pdb_limits_disruptions() -> None:
    nodes = [cpu_node("a", pod("wa", cpu="1", labels={"app": "db"})),
             cpu_node("b", pod("wb", cpu="1", labels={"app": "db"})),
             cpu_node("big", pod("keep", cpu="2"))]

    def snap(allowed: int) -> Any:
        def at(now: float) -> Snapshot:
            s = snapshot(CFG, [], nodes, now=now)
            s.pdbs = [PodDisruptionBudget("db", "default", {"app": "db"}, allowed)]
            return s
        return at

    assert removed(two_passes(snap(0))) == ["big"]  # the db pods cannot move; "big" can
    assert len([n for n in removed(two_passes(snap(1))) if n in ("a", "b")]) == 1


def test_evicted_pods_must_fit_elsewhere_without_double_booking() -> None:
    # Three nodes at ~40%: the pod of one fits on another, but not two pods on the same one.
    nodes = [cpu_node(n, pod(f"w-{n}", cpu="3")) for n in ("a", "b", "c")]
    result = two_passes(lambda now: snapshot(CFG, [], nodes, now=now))
    assert len(result.scale_downs) == 1
    gone = result.scale_downs[0].node
    assert result.scale_downs[0].evict == (f"default/w-{gone}",)


def test_pods_that_fit_nowhere_else_keep_their_node() -> None:
    gpu = node_of(CFG, "gpu1-od", "gpu-n", [pod("trainer", gpu=1, cpu="1")])
    gpu2 = node_of(CFG, "gpu1-od", "gpu-m", [pod("t2", gpu=1, cpu="1")])
    result = two_passes(lambda now: snapshot(CFG, [], [gpu, gpu2], now=now))
    assert result.scale_downs == []  # both full on GPUs: not even unneeded
    idle = node_of(CFG, "gpu8-od", "gpu8", [pod("small8", cpu="1", gpu=2)])  # 2 of 8 GPUs: 25%
    result = two_passes(lambda now: snapshot(CFG, [], [idle], now=now))
    assert "gpu8" in result.unneeded and result.scale_downs == []
    assert any("do not fit" in n for n in result.notes)


# --- limits ---------------------------------------------------------------------------------------
def test_never_below_min_counting_only_registered_nodes() -> None:
    pools = [dict(p) for p in POOLS]
    for p in pools:
        if p["name"] == "cpu-od":
            p["min"] = 1
    cfg = config(pools, scale_down={"budget_fraction": 1.0})
    nodes = [node_of(cfg, "cpu-od", n) for n in ("a", "b")]
    # 2 registered + 1 in flight; min 1: one removal, not two (the booting node may never come).
    result = two_passes(lambda now: snapshot(cfg, [], nodes, now=now, desired={"cpu-od": 3}), cfg)
    assert len(result.scale_downs) == 1
    system = [node_of(cfg, "system", n) for n in ("s1", "s2")]  # system min is 2
    assert two_passes(lambda now: snapshot(cfg, [], system, now=now), cfg).scale_downs == []


def test_no_scale_down_on_a_stale_snapshot() -> None:
    nodes = [cpu_node("idle")]
    result = two_passes(lambda now: snapshot(CFG, [], nodes, now=now, fresh=now < LATER))
    assert result.scale_downs == [] and "idle" in result.unneeded


def test_no_scale_down_in_a_pool_scaling_up_this_pass() -> None:
    # A pending pod too big for the idle node makes cpu-spot scale up; its idle node stays this pass.
    nodes = [node_of(CFG, "cpu-spot", "idle", [pod("w", cpu="1")]), node_of(CFG, "cpu-spot", "x", [pod("y", cpu="6")])]
    big = pod("big", cpu="7")
    _, state = plan(snapshot(CFG, [], nodes, now=T0), State(), CFG)
    result, _ = plan(snapshot(CFG, [big], nodes, now=LATER), state, CFG)
    assert [u.pool for u in result.scale_ups] == ["cpu-spot"]
    assert result.scale_downs == []


def test_node_taking_a_pending_pod_is_not_removed() -> None:
    nodes = [cpu_node("idle")]
    _, state = plan(snapshot(CFG, [], nodes, now=T0), State(), CFG)
    result, _ = plan(snapshot(CFG, [pod("p", cpu="1")], nodes, now=LATER), state, CFG)
    assert result.verdicts["default/p"].node == "idle"
    assert result.scale_downs == []


def test_node_that_never_becomes_ready_is_removed_once_it_had_time_to_boot() -> None:
    broken = node_of(CFG, "gpu1-spot-a", "broken", ready=False, created_at=T0)
    young, _ = plan(snapshot(CFG, [], [broken], now=T0 + 60), State(), CFG)
    assert young.scale_downs == []  # still booting: coming capacity
    old, _ = plan(snapshot(CFG, [], [broken], now=T0 + CFG.timings.provision_timeout), State(), CFG)
    assert [(d.node, d.evict) for d in old.scale_downs] == [("broken", ())]
    assert old.scale_downs[0].reason == f"NotReady since created for {CFG.timings.provision_timeout:.0f}s"
    with_work = node_of(CFG, "gpu1-spot-a", "busy", [pod("w", gpu=1)], ready=False, created_at=T0)
    kept, _ = plan(snapshot(CFG, [], [with_work], now=T0 + 3600), State(), CFG)
    assert kept.scale_downs == []  # pods on it: not ours to lose


# --- consolidation (keeping nodes whole) ----------------------------------------------------------
GPU4 = {"name": "gpu4-od", "instance_types": ["g6.12xlarge"], "zones": ["us-east-1a", "us-east-1b"],
        "min_pod_gpus": 2, "max": 10}


def test_small_pod_pinning_a_big_node_moves_to_a_cheaper_pool() -> None:
    # A 2-GPU pod alone on an 8-GPU g6.48xlarge ($13.35/h): a 4-GPU g6.12xlarge ($4.60/h) holds it.
    cfg = config([*POOLS, GPU4])
    idle = node_of(cfg, "gpu8-od", "gpu8", [pod("small8", cpu="1", gpu=2)])
    result = two_passes(lambda now: snapshot(cfg, [], [idle], now=now), cfg)
    assert removed(result) == ["gpu8"]
    assert result.scale_downs[0].evict == ("default/small8",)
    assert "consolidation" in result.scale_downs[0].reason and "gpu4-od" in result.scale_downs[0].reason


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"consolidate": False}, "switched off"),
        ({}, "do-not-disrupt"),
        ({}, "gang"),
    ],
)
def test_consolidation_keeps_the_node_when_it_may_not_move(change: dict[str, Any], why: str) -> None:
    cfg = config([*POOLS, GPU4], scale_down=change) if change else config([*POOLS, GPU4])
    annotations = {keys.ANNOTATION_SAFE_TO_EVICT: "false"} if why == "do-not-disrupt" else None
    labels = {keys.LABEL_POD_GROUP: "job-1"} if why == "gang" else None
    idle = node_of(cfg, "gpu8-od", "gpu8", [pod("small8", cpu="1", gpu=2, annotations=annotations, labels=labels)])
    result = two_passes(lambda now: snapshot(cfg, [], [idle], now=now), cfg)
    assert "gpu8" in result.unneeded and result.scale_downs == []


def test_no_consolidation_onto_a_pool_whose_nodes_would_cost_more() -> None:
    # Three 2-GPU pods on an 8-GPU node (75%, so lower the threshold to make it unneeded): three
    # 4-GPU nodes would cost 3 x $4.60 > $13.35, so the node stays.
    cfg = config([*POOLS, GPU4], scale_down={"utilization_threshold": 0.9})
    busy = node_of(cfg, "gpu8-od", "gpu8", [pod(f"p{i}", cpu="1", gpu=2) for i in range(3)])
    result = two_passes(lambda now: snapshot(cfg, [], [busy], now=now), cfg)
    assert "gpu8" in result.unneeded and result.scale_downs == []


def test_a_node_whose_pods_found_no_room_still_takes_a_later_candidates_pods() -> None:
    """Within a pass scale-down remembers pods that found no room on the other nodes and gives up at once on
    later candidates with such pods, except where the node then tried still has room: "a" (least used) is
    tried first and its 3-cpu pod fits nowhere; "d"'s 3-cpu pod then goes to "a", its 2-cpu pod to "e"."""
    cfg = CFG.model_copy(update={"scale_down": CFG.scale_down.model_copy(
        update={"utilization_threshold": 1.0, "consolidate": False})})
    nodes = [cpu_node("a", pod("a3", cpu="3")), cpu_node("d", pod("d3", cpu="3"), pod("d2", cpu="2")),
             cpu_node("e", pod("e5", cpu="5"))]
    result = two_passes(lambda now: snapshot(cfg, [], nodes, now=now), cfg)
    assert removed(result) == ["d"]
    assert "a: its pods do not fit on the other nodes" in " ".join(result.notes)
