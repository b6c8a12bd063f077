"""The planner assumes the scheduler profile a pending pod names: on existing nodes it puts each pod
where that profile would bind it, in the scheduler's queue order, and scales up for what is left."""

from __future__ import annotations

import dataclasses
import random

import pytest
from core_builders import example_config, node_of, plan, pod, snapshot

from scaler.core.model.objects import Node, Pod
from scaler.core.model.resources import fits
from scaler.core.planning.state import State
from scaler.core.scheduling import scoring
from scaler.core.scheduling.predicates import free_resources, static_reason

CFG = example_config()
BINPACK = scoring.BINPACK.scheduler_name
DEFAULT = scoring.DEFAULT.scheduler_name


def named(p: Pod, scheduler: str, *, created_at: float = 0.0, priority: int = 0) -> Pod:
    return dataclasses.replace(p, scheduler_name=scheduler, created_at=created_at, priority=priority)


def gpu8(name: str, used_gpus: int, used_cpu: int) -> Node:
    """An 8-GPU node of the example's spot pool running one pod of `used_gpus` GPUs and `used_cpu` cpus."""
    return node_of(CFG, "gpu8-spot-a", name, [pod(f"{name}-job", cpu=str(used_cpu), gpu=used_gpus)])


@pytest.mark.parametrize(("scheduler", "node"), [(DEFAULT, "emptier"), (BINPACK, "fuller")])
def test_a_pod_is_planned_onto_the_node_its_scheduler_would_pick(scheduler: str, node: str) -> None:
    # LeastAllocated (default) spreads to the emptier node; MostAllocated on GPUs (binpack) packs.
    nodes = [gpu8("emptier", 2, 8), gpu8("fuller", 6, 80)]
    pending = [named(pod("p", cpu="4", gpu=2), scheduler)]
    result, _ = plan(snapshot(CFG, pending, nodes), State(), CFG)
    verdict = result.verdicts["default/p"]
    assert (verdict.outcome, verdict.node) == ("fits-existing", node)
    assert result.scale_ups == []


@pytest.mark.parametrize(("scheduler", "scale_up"), [(DEFAULT, 1), (BINPACK, 0)])
def test_queue_order_and_profile_decide_whether_a_later_pod_still_fits(scheduler: str, scale_up: int) -> None:
    # 6 and 2 GPUs free. The older 2-GPU pod is bound first: the default profile puts it on the
    # emptier node, so the newer 6-GPU pod no longer fits anywhere and needs a new node now (planning
    # largest-first would have said it fits, and it would have waited a pass for nothing). Binpack
    # puts the small pod on the fuller node and both fit.
    nodes = [gpu8("emptier", 2, 8), gpu8("fuller", 6, 80)]
    pending = [named(pod("big", cpu="8", gpu=6), scheduler, created_at=200.0),
               named(pod("small", cpu="4", gpu=2), scheduler, created_at=100.0)]
    result, _ = plan(snapshot(CFG, pending, nodes), State(), CFG)
    v = result.verdicts
    assert sum(u.count for u in result.scale_ups) == scale_up
    if scheduler == DEFAULT:
        assert (v["default/small"].outcome, v["default/small"].node) == ("fits-existing", "emptier")
        assert v["default/big"].outcome == "scale-up"
    else:
        assert (v["default/small"].node, v["default/big"].node) == ("fuller", "emptier")


def test_priority_goes_before_age_in_the_queue() -> None:
    # The same pods, but the newer 6-GPU pod has the higher priority: it is bound first, to the
    # emptier node, and the small one still fits the other: no scale-up even under default scoring.
    nodes = [gpu8("emptier", 2, 8), gpu8("fuller", 6, 80)]
    pending = [named(pod("big", cpu="8", gpu=6), DEFAULT, created_at=200.0, priority=10),
               named(pod("small", cpu="4", gpu=2), DEFAULT, created_at=100.0)]
    result, _ = plan(snapshot(CFG, pending, nodes), State(), CFG)
    assert result.scale_ups == []
    assert (result.verdicts["default/big"].node, result.verdicts["default/small"].node) == ("emptier", "fuller")


def test_an_unknown_scheduler_is_assumed_to_score_like_the_default() -> None:
    assert scoring.for_scheduler("volcano") is scoring.DEFAULT
    nodes = [gpu8("emptier", 2, 8), gpu8("fuller", 6, 80)]
    result, _ = plan(snapshot(CFG, [named(pod("p", cpu="4", gpu=2), "volcano")], nodes), State(), CFG)
    assert result.verdicts["default/p"].node == "emptier"


@pytest.mark.parametrize("profile", [scoring.DEFAULT, scoring.BINPACK])
def test_the_planner_and_the_simulators_scheduler_agree_pod_by_pod(profile: scoring.ScoringProfile) -> None:
    # Random clusters of partly used 1- and 8-GPU nodes and a queue of pods: each pod the planner puts
    # on an existing node is where one kube-scheduler profile (scoring.select_node, the binder's
    # choice) binds it when the pods are bound one after the other in the same queue order.
    rng = random.Random(11)
    for case in range(30):
        nodes: list[Node] = []
        for i in range(rng.randint(2, 7)):
            if rng.random() < 0.5:
                gpus = rng.choice([0, 2, 4, 6])
                nodes.append(gpu8(f"n{i}", gpus, rng.randint(1, 150)) if gpus else
                             node_of(CFG, "gpu8-spot-a", f"n{i}"))
            else:
                nodes.append(node_of(CFG, "gpu1-spot-a", f"n{i}", [pod(f"n{i}-job", cpu="1")] if rng.random() < 0.5
                                     else []))
        ages = rng.sample(range(100), rng.randint(1, 6))
        pending = [named(pod(f"p{j}", cpu=str(rng.randint(1, 3)), gpu=rng.choice([1, 2, 2, 4])), profile.scheduler_name,
                         created_at=float(age)) for j, age in enumerate(ages)]
        result, _ = plan(snapshot(CFG, pending, nodes), State(), CFG)
        free = {n.name: free_resources(n) for n in nodes}
        for p in sorted(pending, key=lambda p: p.created_at):  # the scheduler's queue order
            feasible = [(n, free[n.name]) for n in nodes
                        if static_reason(p, n) is None and fits(p.requests, free[n.name])]
            chosen = scoring.select_node(p, feasible, profile)
            verdict = result.verdicts[p.key]
            assert verdict.node == (chosen.name if chosen else None), f"case {case}, pod {p.name}"
            if chosen is not None:
                for r, v in p.requests.items():
                    free[chosen.name][r] -= v
