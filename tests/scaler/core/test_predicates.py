"""Scheduling predicates, table-driven, following kube-scheduler's documented semantics.

NodeResourcesFit (every requested resource incl. extended ones; init containers vs. containers;
overhead), NodeAffinity (nodeSelector AND required affinity; terms ORed, expressions ANDed, an empty
term matches nothing), TaintToleration (NoSchedule / NoExecute filter, PreferNoSchedule only scores),
NodeUnschedulable.
"""

from __future__ import annotations

import pytest

from scaler.core.model import keys
from scaler.core.model.objects import Node, Pod, SelectorRequirement, Taint, Toleration
from scaler.core.model.resources import parse_resources
from scaler.core.scheduling.predicates import (
    REASON_SELECTOR,
    REASON_UNSCHEDULABLE,
    effective_request,
    fit_reason,
    fits,
    matches_node_affinity,
    static_reason,
    toleration_matches,
    untolerated_taint,
)

MIG = "nvidia.com/mig-1g.10gb"


def R(**kw: str | int) -> dict[str, int]:
    """R(cpu="1", gpu=1): a resource vector; `gpu` is nvidia.com/gpu."""
    return parse_resources({keys.RES_GPU if k == "gpu" else k: v for k, v in kw.items()})


# --- effective request ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("containers", "inits", "overhead", "expected"),
    [
        # sum of containers
        ([{"cpu": "500m"}, {"cpu": "250m", "memory": "1Gi"}], [], None, {"cpu": "750m", "memory": "1Gi"}),
        # an init container bigger than the sum wins, per resource
        ([{"cpu": "1", "memory": "1Gi"}], [{"cpu": "2", "memory": "512Mi"}], None, {"cpu": "2", "memory": "1Gi"}),
        # init containers run one at a time: max, not sum
        ([{"cpu": "1"}], [{"cpu": "3"}, {"cpu": "2"}], None, {"cpu": "3"}),
        # overhead (RuntimeClass) adds on top
        ([{"cpu": "1"}], [{"cpu": "3"}], {"cpu": "250m", "memory": "120Mi"}, {"cpu": "3250m", "memory": "120Mi"}),
        # GPUs, MIG slices and any extended resource are summed the same way
        ([{"nvidia.com/gpu": 1}, {"nvidia.com/gpu": 2}], [], None, {"nvidia.com/gpu": 3}),
        ([{MIG: 2}], [{MIG: 1}], None, {MIG: 2}),
        ([{"example.com/fpga": 1}], [{"example.com/fpga": 4}], None, {"example.com/fpga": 4}),
    ],
)
def test_effective_request(containers: list[dict[str, str]], inits: list[dict[str, str]],
                           overhead: dict[str, str] | None, expected: dict[str, str]) -> None:
    got = effective_request([parse_resources(c) for c in containers], [parse_resources(i) for i in inits],
                            parse_resources(overhead) if overhead else None)
    assert got == {**parse_resources(expected), keys.RES_PODS: 1}


# --- resources --------------------------------------------------------------------------------
NODE_ALLOC = R(cpu="8", memory="32Gi", pods=110, gpu=1)


@pytest.mark.parametrize(
    ("request_", "alloc", "reason"),
    [
        (R(cpu="8", memory="32Gi"), NODE_ALLOC, None),  # exactly full fits
        (R(cpu="8001m"), NODE_ALLOC, "Insufficient cpu"),
        (R(memory="33Gi"), NODE_ALLOC, "Insufficient memory"),
        ({keys.RES_GPU: 2}, NODE_ALLOC, "Insufficient nvidia.com/gpu"),
        ({keys.RES_GPU: 1}, R(cpu="8", memory="32Gi", pods=110), "Insufficient nvidia.com/gpu"),  # no GPUs at all
        ({MIG: 1}, NODE_ALLOC, f"Insufficient {MIG}"),  # a full GPU is not a MIG slice
        ({MIG: 3}, {**NODE_ALLOC, MIG: 7}, None),
        ({"example.com/fpga": 1}, NODE_ALLOC, "Insufficient example.com/fpga"),
        ({keys.RES_PODS: 1}, R(cpu="1", pods=0), "Too many pods"),
        ({keys.RES_GPU: 0, "example.com/fpga": 0}, R(cpu="1"), None),  # a zero request needs nothing
        (R(cpu="9", gpu=2), NODE_ALLOC, "Insufficient cpu, Insufficient nvidia.com/gpu"),
    ],
)
def test_resources_fit(request_: dict[str, int], alloc: dict[str, int], reason: str | None) -> None:
    pod = Pod("p", requests=request_)
    node = Node("n", allocatable=alloc)
    assert fit_reason(pod, node) == reason


def test_running_pods_use_up_the_node() -> None:
    node = Node("n", allocatable=R(cpu="4", pods=110), pods=[Pod("a", requests=R(cpu="3"))])
    assert fit_reason(Pod("b", requests=R(cpu="1")), node) is None
    assert fit_reason(Pod("b", requests=R(cpu="1500m")), node) == "Insufficient cpu"


# --- node affinity ------------------------------------------------------------------------------
def req(key: str, op: str, *values: str) -> SelectorRequirement:
    return SelectorRequirement(key, op, values)  # type: ignore[arg-type]


LABELS = {"zone": "a", "gpu.count": "4", "team": "ml"}


@pytest.mark.parametrize(
    ("term", "matches"),
    [
        ((req("zone", "In", "a", "b"),), True),
        ((req("zone", "In", "b"),), False),
        ((req("missing", "In", "a"),), False),
        ((req("zone", "NotIn", "b"),), True),
        ((req("zone", "NotIn", "a"),), False),
        ((req("missing", "NotIn", "a"),), True),  # NotIn matches a node without the label
        ((req("team", "Exists"),), True),
        ((req("missing", "Exists"),), False),
        ((req("missing", "DoesNotExist"),), True),
        ((req("team", "DoesNotExist"),), False),
        ((req("gpu.count", "Gt", "2"),), True),
        ((req("gpu.count", "Gt", "4"),), False),
        ((req("gpu.count", "Lt", "8"),), True),
        ((req("gpu.count", "Lt", "4"),), False),
        ((req("team", "Gt", "1"),), False),  # a label that is not an integer never matches Gt/Lt
        ((req("missing", "Lt", "9"),), False),
        ((req("zone", "In", "a"), req("team", "In", "ml")), True),  # expressions are ANDed
        ((req("zone", "In", "a"), req("team", "In", "infra")), False),
        ((), False),  # an empty term matches nothing
    ],
)
def test_required_affinity_single_term(term: tuple[SelectorRequirement, ...], matches: bool) -> None:
    assert matches_node_affinity(Pod("p", required_affinity=(term,)), LABELS) is matches


def test_terms_are_ored_and_selector_is_anded() -> None:
    terms = ((req("zone", "In", "b"),), (req("team", "In", "ml"),))
    assert matches_node_affinity(Pod("p", required_affinity=terms), LABELS)
    both = Pod("p", required_affinity=terms, node_selector={"zone": "b"})
    assert not matches_node_affinity(both, LABELS)  # nodeSelector must hold as well
    assert matches_node_affinity(Pod("p", node_selector={"zone": "a", "team": "ml"}), LABELS)
    assert not matches_node_affinity(Pod("p", node_selector={"zone": "a", "team": "x"}), LABELS)
    assert static_reason(both, Node("n", labels=LABELS)) == REASON_SELECTOR


# --- taints and tolerations -----------------------------------------------------------------
GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")


@pytest.mark.parametrize(
    ("tol", "taint", "ok"),
    [
        (Toleration("nvidia.com/gpu", "Equal", "present", "NoSchedule"), GPU_TAINT, True),
        (Toleration("nvidia.com/gpu", "Equal", "absent", "NoSchedule"), GPU_TAINT, False),
        (Toleration("nvidia.com/gpu", "Exists", "", "NoSchedule"), GPU_TAINT, True),
        (Toleration("nvidia.com/gpu", "Exists", "", ""), GPU_TAINT, True),  # empty effect: every effect
        (Toleration("nvidia.com/gpu", "Exists", "", "NoExecute"), GPU_TAINT, False),
        (Toleration("", "Exists", "", ""), GPU_TAINT, True),  # empty key + Exists tolerates everything
        (Toleration("other", "Exists", "", ""), GPU_TAINT, False),
        (Toleration("dedicated", "Equal", "", "NoSchedule"), Taint("dedicated", "", "NoSchedule"), True),
    ],
)
def test_toleration_matches(tol: Toleration, taint: Taint, ok: bool) -> None:
    assert toleration_matches(tol, taint) is ok


@pytest.mark.parametrize(
    ("taints", "tolerations", "reason"),
    [
        ((GPU_TAINT,), (), "node(s) had untolerated taint {nvidia.com/gpu: present}"),
        ((Taint("dedicated", "", "NoExecute"),), (), "node(s) had untolerated taint {dedicated: }"),
        ((Taint("soft", "x", "PreferNoSchedule"),), (), None),  # only scores, never filters
        ((GPU_TAINT, Taint("team", "ml", "NoSchedule")), (Toleration("nvidia.com/gpu", "Exists"),),
         "node(s) had untolerated taint {team: ml}"),
        ((GPU_TAINT, Taint("team", "ml", "NoSchedule")),
         (Toleration("nvidia.com/gpu", "Exists"), Toleration("team", "Equal", "ml")), None),
    ],
)
def test_taints(taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...], reason: str | None) -> None:
    node = Node("n", taints=taints, allocatable=R(cpu="1", pods=10))
    pod = Pod("p", requests=R(cpu="1"), tolerations=tolerations)
    assert static_reason(pod, node) == reason
    assert fits(pod, node) is (reason is None)
    assert (untolerated_taint(tolerations, taints) is None) is (reason is None)


def test_unschedulable_node_takes_only_pods_tolerating_it() -> None:
    node = Node("n", unschedulable=True, allocatable=R(cpu="1", pods=10))
    assert static_reason(Pod("p"), node) == REASON_UNSCHEDULABLE
    tol = Toleration(keys.TAINT_UNSCHEDULABLE, "Exists", "", "NoSchedule")
    assert static_reason(Pod("p", tolerations=(tol,)), node) is None


def test_terminated_pods_free_their_resources() -> None:
    done = Pod("done", requests=R(cpu="3"), phase="Succeeded")
    failed = Pod("failed", requests=R(cpu="1"), phase="Failed")
    node = Node("n", allocatable=R(cpu="4", pods=110), pods=[done, failed, Pod("run", requests=R(cpu="1"))])
    assert fit_reason(Pod("b", requests=R(cpu="3")), node) is None
