"""Broken GPU nodes are the core's decision: signals past their grace, the replacement planned ahead, the
budget, recovery (scaler/core/planning/repair.py)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from core_builders import POOLS, config, node_of, plan, pod, snapshot

from scaler.core.config.settings import ConfigError, ScalerConfig
from scaler.core.model import keys
from scaler.core.model.dra import Device, DeviceTaint, DraObjects, PoolRef, ResourceSlice
from scaler.core.model.drain import DrainState
from scaler.core.model.objects import Node, NodeCondition
from scaler.core.planning.state import Backoff, State

GPU8 = [p for p in POOLS if p["name"].startswith("gpu8")]


def _config(**repair: Any) -> ScalerConfig:
    # These cases are about the drain itself: drained as the grace ends (max_hold 0). The hold for the pods on a
    # node's healthy GPUs has its own cases (test_repair_hold.py).
    repair = {"max_hold": 0, **repair}
    pools = [{**p, "repair": repair} if p["name"] == "gpu8-spot-a" else p for p in GPU8]
    return config(pools, timings={"scan_interval": 10})


def _broken(cfg: ScalerConfig, name: str, pods: list[Any] | None = None, *, lost: int = 1) -> Node:
    """An 8-GPU node whose device plugin advertises `lost` GPUs fewer than its capacity."""
    node = node_of(cfg, "gpu8-spot-a", name, pods, zone="us-east-1a", gpus=8 - lost)
    node.capacity = {keys.RES_GPU: 8}
    return node


def _healthy(cfg: ScalerConfig, name: str, pods: list[Any] | None = None) -> Node:
    node = node_of(cfg, "gpu8-spot-a", name, pods, zone="us-east-1a")
    node.capacity = {keys.RES_GPU: 8}
    return node


def test_a_node_that_lost_a_gpu_is_repaired_after_the_grace_with_its_pods_replanned_ahead() -> None:
    cfg = _config(lost_gpu_grace=60)
    nodes = [_broken(cfg, "b1", [pod("train-0", gpu=4)]), _healthy(cfg, "h1", [pod("train-1", gpu=8)])]
    state = State()
    first, state = plan(snapshot(cfg, [], nodes, now=1000.0), state, cfg)
    assert first.unhealthy == {"gpu8-spot-a": 1}
    assert first.repairs == [] and first.scale_downs == []  # within the grace: nothing yet
    result, state = plan(snapshot(cfg, [], nodes, now=1060.0), state, cfg)
    [repair] = result.repairs
    assert (repair.node, repair.signal, repair.since, repair.started) == (
        "b1", "1 of 8 GPU devices not allocatable", 1000.0, True)
    [drain] = result.scale_downs
    assert (drain.node, drain.repair, drain.forced, drain.evict) == ("b1", True, False, ("default/train-0",))
    # Its 4-GPU pod is planned as pending: a replacement is bought in the same pass, before the drain ends.
    assert [(u.pool, u.pods) for u in result.scale_ups] == [("gpu8-spot-a", ("default/train-0",))]
    assert [e.reason for e in result.events] == ["GpuRepair"]
    assert "repairs" in result.to_dict()


def test_health_conditions_and_not_ready_are_signals_with_their_own_grace() -> None:
    cfg = _config(condition_grace=0, not_ready_timeout=600)
    xid = _healthy(cfg, "x1")
    xid.conditions = (NodeCondition("GpuXidError", "True", since=990.0, reason="Xid79"),)
    hw = _healthy(cfg, "x2")
    hw.conditions = (NodeCondition("AcceleratedHardwareReady", "False", since=900.0),)
    fine = _healthy(cfg, "x3")
    fine.conditions = (NodeCondition("AcceleratedHardwareReady", "True", since=900.0),)
    down = dataclasses.replace(_healthy(cfg, "x4"), ready=False,
                               conditions=(NodeCondition("Ready", "Unknown", since=300.0),))
    late = dataclasses.replace(_healthy(cfg, "x5"), ready=False,
                               conditions=(NodeCondition("Ready", "False", since=950.0),))
    cfg = _config(condition_grace=0, not_ready_timeout=600, max_unhealthy_percent=100, max_per_pass=10)
    result, _ = plan(snapshot(cfg, [], [xid, hw, fine, down, late], now=1000.0), State(), cfg)
    assert {r.node: r.signal for r in result.repairs} == {
        "x1": "condition GpuXidError=True (Xid79)", "x2": "condition AcceleratedHardwareReady=False",
        "x4": "NotReady"}
    assert result.unhealthy == {"gpu8-spot-a": 4}  # x5: NotReady for 50 s of its 600


def test_thirty_percent_unhealthy_repairs_exactly_the_budget_and_pauses_once() -> None:
    cfg = _config(lost_gpu_grace=0, max_per_pass=5)  # 20 % of 10 nodes: 2
    nodes = [_broken(cfg, f"b{i}") for i in range(3)] + [_healthy(cfg, f"h{i}") for i in range(7)]
    result, state = plan(snapshot(cfg, [], nodes), State(), cfg)
    assert sorted(d.node for d in result.scale_downs) == ["b0", "b1"]
    assert result.repair_paused == {"gpu8-spot-a": "2 of 10 node(s) in repair, the budget (20 %); "
                                                   "1 more unhealthy node(s) wait"}
    assert [(e.node, e.reason) for e in result.events if e.reason == "GpuRepairPaused"] == [("b2", "GpuRepairPaused")]
    # Next pass, b0 and b1 draining: still paused, no new drain, the Event not repeated.
    snap = snapshot(cfg, [], nodes, now=1010.0)
    state.drains = {n: DrainState(n, "gpu8-spot-a", 1000.0, 1600.0, repair=True) for n in ("b0", "b1")}
    again, _ = plan(snap, state, cfg)
    assert again.scale_downs == [] and "gpu8-spot-a" in again.repair_paused
    assert [e for e in again.events if e.reason == "GpuRepairPaused"] == []


def test_repairs_start_at_most_max_per_pass() -> None:
    cfg = _config(lost_gpu_grace=0, max_unhealthy_percent=100, max_per_pass=1)
    nodes = [_broken(cfg, f"b{i}") for i in range(3)]
    result, _ = plan(snapshot(cfg, [], nodes), State(), cfg)
    assert [d.node for d in result.scale_downs] == ["b0"]
    assert result.repair_paused == {}  # the rate, not the budget: the others start in later passes


def test_a_node_whose_gpu_comes_back_during_its_drain_is_named_recovered() -> None:
    cfg = _config(lost_gpu_grace=0)
    snap = snapshot(cfg, [], [_healthy(cfg, "b1", [pod("train-0", gpu=4)])])
    drains = {"b1": DrainState("b1", "gpu8-spot-a", 990.0, 1590.0, repair=True)}
    result, state = plan(snap, State(unhealthy_since={"b1": 900.0}, drains=drains), cfg)
    assert result.recovered == ["b1"] and result.repairs == [] and state.unhealthy_since == {}


def test_a_pod_that_may_not_move_keeps_its_node_out_of_repair_and_says_why() -> None:
    cfg = _config(lost_gpu_grace=0)
    result, _ = plan(snapshot(cfg, [], [_broken(cfg, "b1", [pod("notebook", gpu=1, owner=None)])]), State(), cfg)
    assert result.scale_downs == []
    assert "not repaired: pod default/notebook has no controller" in " ".join(result.notes)


def test_repair_disabled_sees_nothing() -> None:
    cfg = _config(enabled=False, lost_gpu_grace=0)
    result, _ = plan(snapshot(cfg, [], [_broken(cfg, "b1")]), State(), cfg)
    assert result.repairs == [] and result.unhealthy == {}


@pytest.mark.parametrize(("repair", "message"), [
    ({"max_unhealthy_percent": 120}, "pools[gpu8-spot-a].repair.max_unhealthy_percent: Input should be less than"),
    ({"max_unhealthy_percent": -5}, "pools[gpu8-spot-a].repair.max_unhealthy_percent: Input should be greater"),
    ({"conditions": {"GpuXidError": "Maybe"}}, "pools[gpu8-spot-a].repair.conditions.GpuXidError: Input should be "
                                               "'True', 'False' or 'Unknown'"),
    ({"lost_gpu_grace": 5}, "pools[gpu8-spot-a].repair.lost_gpu_grace: 5 s is shorter than scan_interval (10 s)"),
])
def test_bad_repair_settings_name_the_field(repair: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        _config(**repair)
    [line] = str(err.value).splitlines()
    assert message in line


def test_the_replacement_goes_down_the_fallback_chain_when_the_pool_cannot_take_it() -> None:
    cfg = _config(lost_gpu_grace=0)
    state = State(backoff={"gpu8-spot-a": Backoff(until=5000.0, failures=1)})
    result, _ = plan(snapshot(cfg, [], [_broken(cfg, "b1", [pod("train-0", gpu=4)])]), state, cfg)
    assert [d.node for d in result.scale_downs] == ["b1"]
    assert [(u.pool, u.pods) for u in result.scale_ups] == [("gpu8-od", ("default/train-0",))]


@pytest.mark.parametrize("force", [False, True])
def test_force_evict_deletes_only_a_pod_that_holds_every_gpu_of_the_broken_node(force: bool) -> None:
    # Opted in, the pod holding all 8 GPUs (the broken one among them) is deleted, not evicted, so its
    # PodDisruptionBudget cannot hold the broken node; a pod holding 4 of 8 may be on a healthy GPU, and a
    # CPU pod holds none: both are evicted with their budgets honoured. Not opted in: nothing is deleted.
    cfg = _config(lost_gpu_grace=0, max_unhealthy_percent=100, max_per_pass=5, force_evict=force)
    whole = _broken(cfg, "b1", [pod("train-0", gpu=8), pod("sidecar-0")])
    half = _broken(cfg, "b2", [pod("train-1", gpu=4)])
    result, _ = plan(snapshot(cfg, [], [whole, half], now=1000.0), State(), cfg)
    drains = {d.node: (d.evict, d.delete) for d in result.scale_downs}
    assert drains == {
        "b1": (("default/train-0", "default/sidecar-0"), ("default/train-0",) if force else ()),
        "b2": (("default/train-1",), ())}


def test_a_dra_gpu_tainted_by_the_drivers_health_check_is_a_signal() -> None:
    """A GPU whose ResourceSlice device carries the NVIDIA DRA driver's health taint (NoSchedule or NoExecute)
    is broken as a health condition is: repaired after condition_grace from the taint's timeAdded. A taint of
    another key (a user's maintenance rule) or of effect None is not a health signal."""
    cfg = _config(condition_grace=60, max_unhealthy_percent=100, max_per_pass=10)

    def dra_node(name: str, *taints: DeviceTaint) -> tuple[Node, ResourceSlice]:
        devices = tuple(Device(f"gpu-{i}", taints=taints if i == 3 else ()) for i in range(8))
        return _healthy(cfg, name), ResourceSlice(f"{name}-gpu", "gpu.nvidia.com", PoolRef(name), node_name=name,
                                                  devices=devices)

    pairs = [dra_node("t1", DeviceTaint("gpu.nvidia.com/xid", "79", "NoSchedule", since=900.0)),
             dra_node("t2", DeviceTaint("gpu.nvidia.com/gpu-lost", "", "NoExecute", since=990.0)),
             dra_node("t3", DeviceTaint("example.com/maintenance", "", "NoSchedule", since=900.0)),
             dra_node("t4", DeviceTaint("gpu.nvidia.com/xid", "79", "None", since=900.0))]
    snap = snapshot(cfg, [], [n for n, _ in pairs], now=1000.0)
    snap.dra = DraObjects(slices=[s for _, s in pairs])
    result, _ = plan(snap, State(), cfg)
    assert {r.node: r.signal for r in result.repairs} == {"t1": "device gpu-3 tainted gpu.nvidia.com/xid=79:NoSchedule"}
    assert result.unhealthy == {"gpu8-spot-a": 2}  # t2: tainted 10 s of its 60
