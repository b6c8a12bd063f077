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
