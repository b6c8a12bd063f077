"""A node that lost a GPU but still runs pods on its healthy ones: kept while a drain would lose more work than
its dead GPU stands idle, drained when idle, just after its pods checkpoint, or at the bound
(scaler/core/planning/repair.py, hold_reason; issue 40)."""

from __future__ import annotations

from typing import Any

from core_builders import POOLS, config, node_of, plan, pod, snapshot

from scaler.core.config.settings import ScalerConfig
from scaler.core.model import keys
from scaler.core.model.objects import Node, Pod
from scaler.core.planning.state import State

GPU8 = [p for p in POOLS if p["name"].startswith("gpu8")]
FIRST_SEEN = 1000.0  # the pass that first sees the lost GPU
GRACE = 60.0


def _config(**repair: Any) -> ScalerConfig:
    pools = [{**p, "repair": {"lost_gpu_grace": GRACE, **repair}} if p["name"] == "gpu8-spot-a" else p for p in GPU8]
    return config(pools, timings={"scan_interval": 10})


def _broken(cfg: ScalerConfig, pods: list[Pod]) -> Node:
    node = node_of(cfg, "gpu8-spot-a", "b1", pods, zone="us-east-1a", gpus=7)
    node.capacity = {keys.RES_GPU: 8}
    return node


def _train(started_at: float, checkpoint: str | None = "1800") -> Pod:
    annotations = {keys.ANNOTATION_CHECKPOINT_INTERVAL: checkpoint} if checkpoint is not None else {}
    p = pod("train-0", gpu=4, annotations=annotations, node="b1")
    p.started_at = started_at
    return p


def _drained_at(cfg: ScalerConfig, node: Node, times: list[float]) -> list[bool]:
    """Whether the repair drains the node at each pass time (the first pass at FIRST_SEEN starts its grace)."""
    state = State()
    _, state = plan(snapshot(cfg, [], [node], now=FIRST_SEEN), state, cfg)
    out = []
    for now in times:
        result, state = plan(snapshot(cfg, [], [node], now=now), state, cfg)
        out.append(any(d.node == "b1" and d.repair for d in result.scale_downs))
    return out


def test_an_idle_broken_node_is_replaced_when_its_grace_ends() -> None:
    cfg = _config()
    assert _drained_at(cfg, _broken(cfg, []), [FIRST_SEEN + GRACE]) == [True]


def test_a_node_is_kept_until_its_pods_have_just_checkpointed_and_then_drained() -> None:
    cfg = _config()
    # 4 GPUs have run 1,000 s since their last checkpoint at the grace's end: 4,000 GPU-s at stake against 60 s
    # of one dead GPU. Just after the checkpoint at 1,800 s of run (10 s later at the next pass) only 40 GPU-s are.
    started = FIRST_SEEN + GRACE - 1000.0
    node = _broken(cfg, [_train(started)])
    result, _ = plan(snapshot(cfg, [], [node], now=FIRST_SEEN + GRACE),
                     plan(snapshot(cfg, [], [node], now=FIRST_SEEN), State(), cfg)[1], cfg)
    [repair] = result.repairs
    assert not repair.started and "kept: a drain would lose 1.11 GPU-h since their last checkpoints" in repair.signal
    assert _drained_at(cfg, node, [FIRST_SEEN + GRACE, started + 1790.0, started + 1810.0]) == [False, False, True]


def test_a_broken_node_is_never_held_past_the_bound() -> None:
    cfg = _config(max_hold=3600)
    # No checkpoint interval declared: all the pod ran is at stake, so only the bound (from the signal's start)
    # ends the hold.
    node = _broken(cfg, [_train(0.0, checkpoint=None)])
    assert _drained_at(cfg, node, [FIRST_SEEN + 3590.0, FIRST_SEEN + 3610.0]) == [False, True]


def test_a_broken_node_with_no_gpu_pod_is_replaced_without_waiting_for_its_grace() -> None:
    cfg = _config(lost_gpu_grace=600)
    state = State()
    result, _ = plan(snapshot(cfg, [], [_broken(cfg, [])], now=FIRST_SEEN), state, cfg)
    assert [(d.node, d.repair) for d in result.scale_downs] == [("b1", True)]


def _crash_looping(started_at: float, gpus: int = 2) -> Pod:
    """A pod whose container restarts in place on the dead GPU: the kubelet reports that device Unhealthy in its
    status (KEP-4680's allocatedResourcesStatus)."""
    p = pod("crashing-0", gpu=gpus, annotations={keys.ANNOTATION_CHECKPOINT_INTERVAL: "1800"}, node="b1")
    p.started_at = started_at
    p.unhealthy_devices = 1
    return p


def test_a_pod_on_the_dead_gpu_counts_as_idle_so_the_node_goes_sooner() -> None:
    cfg = _config()
    # A 2-GPU pod 200 s into its run at the signal: 2 x (200 + t) GPU-s at stake t seconds later, its checkpoint
    # 1,600 s away. Against the dead GPU alone (1 x t) that holds the node until the checkpoint; with a 4-GPU pod
    # crash-looping on the dead GPU, its 4 GPUs stand idle (4 x t) and match the stake after 200 s.
    healthy = pod("train-0", gpu=2, annotations={keys.ANNOTATION_CHECKPOINT_INTERVAL: "1800"}, node="b1")
    healthy.started_at = FIRST_SEEN - 200.0
    times = [FIRST_SEEN + 190.0, FIRST_SEEN + 210.0]
    assert _drained_at(cfg, _broken(cfg, [healthy, _crash_looping(0.0, gpus=4)]), times) == [False, True]
    assert _drained_at(cfg, _broken(cfg, [healthy]), times) == [False, False]


def test_a_node_whose_only_gpu_pod_crash_loops_on_the_dead_gpu_is_replaced_at_once() -> None:
    cfg = _config(lost_gpu_grace=600)
    # Its pod runs nothing, so nothing is at stake and waiting out the grace would only pay for the node.
    result, _ = plan(snapshot(cfg, [], [_broken(cfg, [_crash_looping(0.0)])], now=FIRST_SEEN), State(), cfg)
    assert [(d.node, d.repair) for d in result.scale_downs] == [("b1", True)]


def test_force_evict_deletes_the_pod_its_status_proves_on_the_dead_gpu_and_evicts_the_rest() -> None:
    cfg = _config(force_evict=True, max_hold=0)
    node = _broken(cfg, [_train(0.0), _crash_looping(0.0)])
    [drain] = _drains(cfg, node)
    # 2 of 8 GPUs: without the status no pod is provably on the dead one; with it this one is.
    assert drain.delete == ("default/crashing-0",)


def _drains(cfg: ScalerConfig, node: Node) -> list[Any]:
    _, state = plan(snapshot(cfg, [], [node], now=FIRST_SEEN), State(), cfg)
    result, _ = plan(snapshot(cfg, [], [node], now=FIRST_SEEN + GRACE), state, cfg)
    return [d for d in result.scale_downs if d.repair]
