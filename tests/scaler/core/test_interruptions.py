"""Interruption notices are decided by the core: drains, replacements through the same expander and caps."""

from __future__ import annotations

from core_builders import POOLS, config, example_config, node_of, plan, pod, snapshot

from scaler.core.config.settings import ScalerConfig
from scaler.core.model.drain import DrainState
from scaler.core.model.interruption import Interruption
from scaler.core.planning.snapshot import Snapshot
from scaler.core.planning.state import Backoff, State


def _interrupted(kind: str = "spot-interruption", **limits: float) -> tuple[ScalerConfig, Snapshot]:
    # with limits, without the 8-GPU pools: a cap below one of their nodes is refused when the config loads
    cfg = config([p for p in POOLS if not p["name"].startswith("gpu8")], limits=limits) if limits \
        else example_config()
    busy = node_of(cfg, "gpu1-spot-a", "a1", [pod("train-0", gpu=1)], zone="us-east-1a")
    other = node_of(cfg, "gpu1-spot-a", "a2", [pod("train-1", gpu=1)], zone="us-east-1a")
    snap = snapshot(cfg, [], [busy, other])
    snap.interruptions = [Interruption(kind, "a1", 1000.0, 1120.0)]  # AWS names the instance id
    return cfg, snap


def test_a_spot_interruption_drains_the_node_and_plans_its_replacement_ahead() -> None:
    cfg, snap = _interrupted()
    result, state = plan(snap, State(), cfg)
    [drain] = result.scale_downs
    assert (drain.node, drain.forced, drain.deadline, drain.evict) == ("a1", True, 1120.0, ("default/train-0",))
    # The displaced pod does not count on its own node: a new node is asked for in this pass.
    [up] = result.scale_ups
    assert up.pods == ("default/train-0",) and up.pool == "gpu1-spot-a"
    assert result.handled == snap.interruptions
    assert state.in_flight["gpu1-spot-a"][0].count == 1


def test_a_notice_read_by_a_pass_that_stopped_is_decided_again_until_acknowledged() -> None:
    """The State keeps a notice until the actuator reports it acknowledged: a pass that stopped before acting
    (the lease ran out, an SQS notice is invisible to other readers for a while) loses no two-minute warning."""
    cfg, snap = _interrupted()
    notices = snap.interruptions
    _, state = plan(snap, State(), cfg)  # decided; then the pass stopped before the actuator acknowledged it
    snap.interruptions = []  # not handed out again by the queue
    again, state = plan(snap, state, cfg)
    assert [d.node for d in again.scale_downs] == ["a1"] and again.handled == notices
    snap.acted.acknowledged = notices  # this time the pass acted to the end
    done, state = plan(snap, state, cfg)
    assert done.handled == [] and state.notices == []


def test_a_replacement_obeys_the_cluster_limits_like_any_scale_up() -> None:
    cfg, snap = _interrupted(max_gpus=2)  # two 1-GPU nodes run: no room for a third GPU
    result, _ = plan(snap, State(), cfg)
    assert [d.node for d in result.scale_downs] == ["a1"]
    assert result.scale_ups == []
    verdict = result.verdicts["default/train-0"]
    assert verdict.outcome == "waiting"
    assert "cluster limit max_gpus reached (2)" in verdict.reasons.values()


def test_a_replacement_follows_the_fallback_of_a_pool_in_backoff() -> None:
    cfg, snap = _interrupted()
    state = State()
    state.backoff["gpu1-spot-a"] = Backoff(until=5000.0, failures=1)
    result, _ = plan(snap, state, cfg)
    assert [u.pool for u in result.scale_ups] == ["gpu1-od"]


def test_a_rebalance_notice_leaves_a_node_with_a_pod_that_may_not_move() -> None:
    cfg = example_config()
    bare = node_of(cfg, "gpu1-spot-a", "a1", [pod("notebook", gpu=1, owner=None)], zone="us-east-1a")
    snap = snapshot(cfg, [], [bare])
    snap.interruptions = [Interruption("rebalance", "aws:///a1", 1000.0, 1600.0)]
    result, _ = plan(snap, State(), cfg)
    assert result.scale_downs == [] and result.scale_ups == []
    assert [e.reason for e in result.events] == ["SpotRebalanceIgnored"]
    assert result.handled == snap.interruptions  # decided: acknowledged, not asked about again


def test_a_node_draining_for_a_notice_keeps_its_pods_planned_and_is_not_drained_twice() -> None:
    cfg, snap = _interrupted()
    state = State(drains={"a1": DrainState("a1", "gpu1-spot-a", 1000.0, 1120.0, forced=True, notice=True)})
    snap.pools["gpu1-spot-a"].desired = 3  # the replacement asked for in the notice's pass
    again, _ = plan(snap, state, cfg)
    assert again.scale_downs == []
    assert again.scale_ups == []  # still covered by the replacement in flight
    assert again.verdicts["default/train-0"].outcome == "fits-in-flight"
