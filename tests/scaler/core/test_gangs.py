"""Gangs from their own objects (issue 39): the Workload API's PodGroups, scheduler-plugins' coscheduling and
Volcano's. One rule: room for the minimum together or nothing; members beyond it planned as single pods after
it; a pod whose Workload (or Volcano) PodGroup is missing waits, as kube-scheduler's GangScheduling plugin holds
it back (PreEnqueue, pkg/scheduler/framework/plugins/gangscheduling); a gang that can never fit buys nothing,
says why once, and does not block a gang that fits."""

from __future__ import annotations

import dataclasses

from core_builders import GPU_TOL, config, node_of, plan, pod, snapshot

from scaler.core.model import keys
from scaler.core.model.objects import Pod
from scaler.core.model.podgroup import COSCHEDULING, VOLCANO, WORKLOAD, GroupApi, PodGroup
from scaler.core.planning.decisions import Plan
from scaler.core.planning.state import State

CFG = config([
    {"name": "gpu1", "instance_types": ["g6.xlarge"], "zones": ["us-east-1a"], "max": 3},
    {"name": "gpu8", "instance_types": ["p4d.24xlarge"], "zones": ["us-east-1a"], "min_pod_gpus": 8, "max": 2},
])


def member(name: str, gpus: int, minute: int, **fields: object) -> Pod:
    tolerations = None if gpus >= 8 else (GPU_TOL,)  # pods of fewer than 8 GPUs stay off the 8-GPU pool
    return dataclasses.replace(pod(name, gpu=gpus, tolerations=tolerations), created_at=60.0 * minute,
                               **fields)  # type: ignore[arg-type]


def run(pending: list[Pod], *groups: PodGroup, nodes: list | None = None) -> Plan:  # type: ignore[type-arg]
    snap = snapshot(CFG, pending, nodes)
    snap.pod_groups = {g.key: g for g in groups}
    return plan(snap, State(), CFG)[0]


def outcomes(result: Plan) -> dict[str, tuple[str, str | None]]:
    return {k: (v.outcome, v.pool) for k, v in result.verdicts.items()}


def group(api: GroupApi, name: str, minimum: int | None) -> PodGroup:
    return PodGroup(api, "default", name, minimum)


def test_a_workload_gang_that_can_never_fit_buys_nothing_and_the_one_that_fits_gets_its_nodes() -> None:
    big = [member(f"big-{i}", 8, 1, scheduling_group="big") for i in range(3)]
    pair = [member(f"pair-{i}", 8, 2, scheduling_group="pair") for i in range(2)]
    result = run([*big, *pair], group(WORKLOAD, "big", 3), group(WORKLOAD, "pair", 2))
    assert [(u.pool, u.count) for u in result.scale_ups] == [("gpu8", 2)]
    assert sorted(result.scale_ups[0].pods) == ["default/pair-0", "default/pair-1"]
    for p in big:
        v = result.verdicts[p.key]
        assert v.outcome == "waiting" and "room for 2 of the 3" in v.reasons["*"]
    said = [n for n in result.notes if "default/big" in n]
    assert len(said) == 1 and "pool at max (2)" in said[0]  # why, once


def test_coscheduling_gang_gets_its_minimum_and_the_member_beyond_it_is_a_single_pod() -> None:
    pods = [member(f"c-{i}", 1, 1, labels={keys.LABEL_POD_GROUP: "c"}) for i in range(4)]
    result = run(pods, group(COSCHEDULING, "c", 3))
    assert [(u.pool, u.count) for u in result.scale_ups] == [("gpu1", 3)]
    assert sorted(o for o, _ in outcomes(result).values()) == ["scale-up"] * 3 + ["waiting"]
    [late] = [v for v in result.verdicts.values() if v.outcome == "waiting"]
    assert "*" not in late.reasons and late.reasons["gpu1"] == "pool at max (3)"  # a single pod at the max


def test_a_pod_whose_workload_pod_group_is_missing_waits_and_buys_nothing() -> None:
    result = run([member("ghost-0", 8, 1, scheduling_group="ghost")])
    assert result.scale_ups == []
    v = result.verdicts["default/ghost-0"]
    assert v.outcome == "waiting" and "does not exist" in v.reasons["*"]


def test_a_volcano_gang_is_read_from_its_annotation_and_its_pod_group() -> None:
    pods = [member(f"v-{i}", 1, 1, annotations={keys.ANNOTATION_VOLCANO_GROUP: "v"}) for i in range(4)]
    assert run(pods, group(VOLCANO, "v", 4)).scale_ups == []  # four 1-GPU nodes, the pool's max is 3
    assert [(u.pool, u.count) for u in run(pods, group(VOLCANO, "v", 2)).scale_ups] == [("gpu1", 3)]
    assert run(pods).scale_ups == []  # its PodGroup missing: Volcano schedules none of them


def test_basic_policy_pods_are_single_pods_and_bound_members_count_towards_the_minimum() -> None:
    pods = [member(f"b-{i}", 8, 1, scheduling_group="b") for i in range(3)]
    assert [(u.pool, u.count) for u in run(pods, group(WORKLOAD, "b", None)).scale_ups] == [("gpu8", 2)]
    running = node_of(CFG, "gpu8", "n1", [member("g-0", 8, 0, scheduling_group="g")])
    pending = [member(f"g-{i}", 8, 1, scheduling_group="g") for i in (1, 2)]
    # minCount 2 is met with one bound and one more: the second pending member is a single pod, and gets a node
    result = run(pending, group(WORKLOAD, "g", 2), nodes=[running])
    assert [(u.pool, u.count) for u in result.scale_ups] == [("gpu8", 1)]
    # minCount 3 needs both pending together: one node is left below the max (2), so nothing is bought
    assert run(pending, group(WORKLOAD, "g", 3), nodes=[running]).scale_ups == []
