"""The adaptive unneeded time: each pool keeps its idle nodes for as long as its own recent idle periods say
pays, within the configured bounds; a fixed `timings.unneeded_time` overrides it."""

from __future__ import annotations

import math

import pytest
from core_builders import POOLS, config, node_of, plan, pod, snapshot

from scaler.core.planning.context import planning_context
from scaler.core.planning.idle_time import choose, explain, rebuy_seconds
from scaler.core.planning.state import IdleHistory, State
from scaler.core.scheduling.scoring import BINPACK_SCHEDULER_NAME, DEFAULT_SCHEDULER_NAME

CFG = config(POOLS, adaptive=True)
T0 = 10_000.0


def removed_at(state: State, times: list[float], name: str = "idle") -> float | None:
    """The first of `times` (seconds after T0) at which the idle cpu-spot node is removed."""
    nodes = [node_of(CFG, "cpu-spot", name), node_of(CFG, "cpu-spot", "busy", [pod("w", cpu="6")])]
    _, state = plan(snapshot(CFG, [], nodes, now=T0), state, CFG)
    for t in times:
        result, state = plan(snapshot(CFG, [], nodes, now=T0 + t), state, CFG)
        if any(d.node == name for d in result.scale_downs):
            return t
    return None


def test_no_history_keeps_an_idle_node_one_boot_not_ten_minutes() -> None:
    assert CFG.timings.unneeded_time is None
    assert removed_at(State(), [110, 120]) == 120  # cpu_boot: the break-even with nothing seen yet


def test_capacity_always_needed_back_soon_keeps_idle_nodes_through_the_gap() -> None:
    # Back after 100 s each time: keeping (100 s) is cheaper than removing at 30 s and booting back (30 + 120).
    state = State(idle={"cpu-spot": IdleHistory(gaps=(100.0,) * 20)})
    assert removed_at(state, [30, 100, 110]) == 110  # kept through the usual gap (plus the pass)


def test_capacity_never_needed_back_goes_at_the_minimum() -> None:
    state = State(idle={"cpu-spot": IdleHistory(gaps=(math.inf,) * 20)})
    assert removed_at(state, [10, 20]) == 20  # scale_down.unneeded_time_min


def test_a_fixed_unneeded_time_overrides_the_history() -> None:
    fixed = config(POOLS, timings={"unneeded_time": 600})
    state = State(idle={"cpu-spot": IdleHistory(gaps=(math.inf,) * 20)})
    nodes = [node_of(fixed, "cpu-spot", "idle")]
    _, state = plan(snapshot(fixed, [], nodes, now=T0), state, fixed)
    early, state = plan(snapshot(fixed, [], nodes, now=T0 + 590), state, fixed)
    late, state = plan(snapshot(fixed, [], nodes, now=T0 + 600), state, fixed)
    assert early.scale_downs == [] and [d.node for d in late.scale_downs] == ["idle"]
    assert "600s (timings.unneeded_time)" in explain(state, planning_context(fixed), fixed.pool("cpu-spot"))


def test_a_removal_asked_back_by_a_scale_up_becomes_a_gap() -> None:
    nodes = [node_of(CFG, "cpu-spot", "idle")]
    _, state = plan(snapshot(CFG, [], nodes, now=T0), State(), CFG)
    gone, state = plan(snapshot(CFG, [], nodes, now=T0 + 120), state, CFG)
    assert [d.node for d in gone.scale_downs] == ["idle"]
    assert state.idle["cpu-spot"].removed == (T0,)
    # 400 s after it became unneeded, a pod needs a cpu-spot node again: that is the gap.
    up, state = plan(snapshot(CFG, [pod("p", cpu="6")], [], now=T0 + 400, desired={"cpu-spot": 0}), state, CFG)
    assert [u.pool for u in up.scale_ups] == ["cpu-spot"]
    assert state.idle["cpu-spot"].gaps == (400.0,) and state.idle["cpu-spot"].removed == ()
    # A 400 s gap costs more kept (400) than removed at the minimum and bought back (20 + 120): next pass, 20 s.
    _, state = plan(snapshot(CFG, [], [], now=T0 + 410), state, CFG)
    assert state.unneeded_time["cpu-spot"] == 20
    assert "1 recent idle periods, 0 never needed again, the others after 400s" in \
        explain(state, planning_context(CFG), CFG.pool("cpu-spot"))


UNTAINTED = config([
    {"name": "small", "instance_types": ["g6.xlarge"], "zones": ["us-east-1a"], "max": 10},
    {"name": "big", "instance_types": ["g6.48xlarge"], "zones": ["us-east-1a"], "max": 10},
], adaptive=True)


def test_a_pod_the_removed_node_could_have_held_starting_on_a_bigger_node_asks_it_back() -> None:
    """Pools without min-GPUs taints: once the idle 1-GPU node is gone, the next 1-GPU pod starts on a half-used
    8-GPU node (pinning it). The small pool's removal was needed again after 300 s, though it never scaled up."""
    half = [pod(f"w{i}", gpu=1) for i in range(4)]
    idle = node_of(UNTAINTED, "small", "s")
    _, state = plan(snapshot(UNTAINTED, [], [idle, node_of(UNTAINTED, "big", "b", half)], now=T0), State(), UNTAINTED)
    gone, state = plan(snapshot(UNTAINTED, [], [idle, node_of(UNTAINTED, "big", "b", half)], now=T0 + 240),
                       state, UNTAINTED)
    assert [d.node for d in gone.scale_downs] == ["s"]  # no history yet: kept one boot
    newcomer = pod("new", gpu=1)
    newcomer.created_at = T0 + 290
    _, state = plan(snapshot(UNTAINTED, [], [node_of(UNTAINTED, "big", "b", [*half, newcomer])], now=T0 + 300),
                    state, UNTAINTED)
    assert state.idle["small"].gaps == (300.0,) and state.idle["small"].removed == ()


@pytest.mark.parametrize(("scheduler", "asked"), [(BINPACK_SCHEDULER_NAME, True), (DEFAULT_SCHEDULER_NAME, False)])
def test_while_the_pool_has_an_idle_node_only_a_packing_pods_start_elsewhere_asks_back(scheduler: str,
                                                                                       asked: bool) -> None:
    """A packing profile scores a half-used bigger node above the pool's empty one (binpack fills the hole), yet the
    pool's removal took room its next pods could have had (PHILLY-A untainted binpack: 0.4 % above the fixed timer
    when these were not counted); a spreading profile would have taken the empty node, so its pod went elsewhere
    for another reason (PHILLY-A untainted default: 1 % more when counted)."""
    half = [pod(f"w{i}", gpu=1) for i in range(4)]
    newcomer = pod("new", gpu=1)
    newcomer.created_at, newcomer.scheduler_name = T0 + 290, scheduler
    state = State(idle={"small": IdleHistory(removed=(T0,), seen=T0 + 240)}, unneeded_since={"s2": T0 + 200})
    nodes = [node_of(UNTAINTED, "small", "s2"), node_of(UNTAINTED, "big", "b", [*half, newcomer])]
    _, state = plan(snapshot(UNTAINTED, [], nodes, now=T0 + 300), state, UNTAINTED)
    if asked:
        assert state.idle["small"].gaps == (300.0,) and state.idle["small"].removed == ()
    else:
        assert state.idle["small"].gaps == () and state.idle["small"].removed == (T0,)


def test_a_node_busy_again_becomes_a_gap() -> None:
    idle = [node_of(CFG, "cpu-spot", "n")]
    busy = [node_of(CFG, "cpu-spot", "n", [pod("w", cpu="6")])]
    _, state = plan(snapshot(CFG, [], idle, now=T0), State(), CFG)
    _, state = plan(snapshot(CFG, [], busy, now=T0 + 90), state, CFG)
    assert state.idle["cpu-spot"].gaps == (90.0,)


def test_the_rule_weighs_keeping_against_buying_back() -> None:
    low, high, step = 30.0, 600.0, 10.0
    assert choose((), 240, low, high, step) == 240  # nothing seen: the break-even
    assert choose((), 5000, low, high, step) == 600  # within the bounds
    assert choose((100.0,) * 9 + (math.inf,), 240, low, high, step) == 110  # mostly back in 100 s: keep
    assert choose((500.0,) * 5 + (math.inf,) * 5, 240, low, high, step) == 30  # back late or never: remove
    # An 8-GPU node costs more to buy back than a 1-GPU one: the same history keeps it longer.
    big, small = rebuy_seconds(CFG.pool("gpu8-spot-a"), planning_context(CFG)), \
        rebuy_seconds(CFG.pool("gpu1-spot-a"), planning_context(CFG))
    assert big > small == CFG.timings.gpu_boot
    gaps = (400.0,) * 5 + (math.inf,) * 5
    assert choose(gaps, small, low, high, step) == 30 and choose(gaps, big, low, high, step) == 410


def test_a_node_with_pods_to_move_waits_the_maximum_not_the_adaptive_time() -> None:
    # Consolidating running jobs on a short timer evicts them over and over, each losing the work since its
    # last checkpoint (PHILLY-A without taints, binpack: one job never finished). Only empty nodes go early.
    light = pod("small", cpu="1")
    nodes = [node_of(CFG, "cpu-spot", "light", [light]), node_of(CFG, "cpu-spot", "busy", [pod("w", cpu="4")])]
    state = State()
    _, state = plan(snapshot(CFG, [], nodes, now=T0), state, CFG)
    removals = {}
    for t in (120, 300, 590, 600):
        result, state = plan(snapshot(CFG, [], nodes, now=T0 + t), state, CFG)
        removals[t] = [d.node for d in result.scale_downs]
    assert removals == {120: [], 300: [], 590: [], 600: ["light"]}
    assert "a node with pods to move waits 600s" in explain(state, planning_context(CFG), CFG.pool("cpu-spot"))
