"""Pods whose claims are plain counts (one ExactCount request from a template, no constraints) are placed by
the count, like nvidia.com/gpu pods, where every device of the nodes they may reach is one their claims may
take (`Filtered.counted`); elsewhere (a MIG node: devices on counters; a selector only some GPUs pass) one
at a time through the allocator. On random DRA clusters (examples/pools-aws-dra.yaml: whole L4 and A100
GPUs, A100 MIG slices; some GPUs held by running pods' claims, some tainted by the NVIDIA driver's health
taint, which a template's request tolerates) and random pending claim pods:

- with no pool able to grow, the plan is the allocator path's, pod for pod (`counted` forced off);
- with scale-ups, every pod the plan puts on a node (existing or new) allocates there, node by node in
  the plan's order, with the allocator.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from core_builders import plan
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scaler.configfile import load_config
from scaler.core.config.settings import Limits, ScalerConfig
from scaler.core.dra.allocator import Allocator
from scaler.core.dra.nvidia import DEVICE_CLASSES, DRIVER, GPU_CLASS, MIG_CLASS
from scaler.core.dra.pools import NodeRef
from scaler.core.model import keys
from scaler.core.model.dra import (
    Allocation,
    ClaimSpec,
    DeviceRequest,
    DeviceResult,
    DeviceTaint,
    DeviceToleration,
    DraObjects,
    ExactRequest,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)
from scaler.core.model.objects import Node, Pod, PodResourceClaim, SelectorRequirement, Toleration
from scaler.core.planning import constrained, planner
from scaler.core.planning.decisions import Plan
from scaler.core.planning.scaleup import ScaleUpResult, plan_scale_up
from scaler.core.planning.snapshot import PoolObservation, Snapshot
from scaler.core.planning.state import State
from scaler.core.scheduling.filters.dra import DraState

ROOT = Path(__file__).resolve().parents[3]
TOL = (Toleration(keys.TAINT_GPU, "Exists", "", "NoSchedule"),)
MEM_40 = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0"
XID = "gpu.nvidia.com/xid"  # the driver's health taint (bench/plan_scale_dra.py taints one GPU of a node so)
TOLERATE = (DeviceToleration(XID, "Exists"),)
# (template name, class, count, selectors[, tolerations]): plain counts, a selector every A100 passes and no L4
# does (classes asking it are placed by the count only if no L4 node is in reach), MIG slices, and a GPU
# request tolerating the health taint (always one at a time)
TEMPLATES = [(f"gpu-{n}", GPU_CLASS.name, n, ()) for n in (1, 2, 4, 8)] + [
    ("gpu-40g", GPU_CLASS.name, 1, (MEM_40,)), ("mig-2", MIG_CLASS.name, 2, ()),
    ("gpu-1-tolerant", GPU_CLASS.name, 1, (), TOLERATE)]
DRA_POOLS = ("l4-dra", "a100-dra", "a100-mig-dra")


def _spec(cls: str, n: int, selectors: tuple[str, ...], tolerations: tuple[DeviceToleration, ...] = ()) -> ClaimSpec:
    return ClaimSpec((DeviceRequest("r", ExactRequest("r", cls, count=n, selectors=selectors,
                                                      tolerations=tolerations)),))


def _config(grow: bool) -> ScalerConfig:
    cfg = load_config(ROOT / "examples" / "pools-aws-dra.yaml")
    if grow:
        return cfg
    return cfg.model_copy(update={"limits": Limits(max_nodes=0)})  # the cluster's cap: no new node


@st.composite
def cluster(draw: st.DrawFn, grow: bool) -> tuple[Snapshot, ScalerConfig]:
    cfg = _config(grow)
    by_name = {p.name: p for p in cfg.pools}
    objects = DraObjects(classes={c.name: c for c in DEVICE_CLASSES}, templates={
        f"ml/{t[0]}": ResourceClaimTemplate("ml", t[0], _spec(*t[1:])) for t in TEMPLATES})
    nodes: list[Node] = []
    for pool_name in DRA_POOLS:
        pool = by_name[pool_name]
        for i in range(draw(st.integers(0, 2))):
            tmpl = pool.template_node(pool.zones[0], cfg.region)
            name = f"{pool_name}-{i}"
            effect = draw(st.sampled_from((None, None, "NoSchedule", "NoExecute", "None")))
            slices = _taint(pool.dra_slices(name), effect)
            objects.slices.extend(slices)
            devices = [d for s in slices for d in s.devices]
            held = draw(st.lists(st.sampled_from([d.name for d in devices]), max_size=3, unique=True))
            pods = []
            if held:  # one running pod holding them through an allocated claim of its own
                claim = ResourceClaim("ml", f"run-{name}", _spec(GPU_CLASS.name, len(held), ()), Allocation(
                    tuple(DeviceResult("r", DRIVER, slices[0].pool.name, d) for d in held),
                    ((SelectorRequirement("metadata.name", "In", (name,), field=True),),)), (f"run-{name}",))
                objects.claims[claim.key] = claim
                pods.append(Pod(f"run-{name}", "ml", {keys.RES_CPU: 1000}, node_name=name, phase="Running",
                                tolerations=TOL, resource_claims=(PodResourceClaim("r", claim_name=claim.name),),
                                owner_kind="Job"))
            labels = {**tmpl.labels, keys.LABEL_HOSTNAME: name}
            nodes.append(Node(name, labels, tmpl.taints, tmpl.allocatable, pool=pool_name, pods=pods,
                              provider_id=f"aws:///{name}"))
    pending = []
    for i in range(draw(st.integers(1, 14))):
        claims = draw(st.lists(st.sampled_from([t[0] for t in TEMPLATES]), min_size=1, max_size=2))
        pool = draw(st.sampled_from((None, *DRA_POOLS, "l4-dra", "a100-dra")))  # a MIG pool in reach: one by one
        pending.append(Pod(f"p{i}", "ml", {keys.RES_CPU: draw(st.sampled_from((500, 2000, 8000)))},
                           node_selector={keys.LABEL_POOL: pool} if pool else {},
                           tolerations=TOL, created_at=float(draw(st.integers(0, 3))),
                           resource_claims=tuple(PodResourceClaim(f"c{j}", template_name=t)
                                                 for j, t in enumerate(claims))))
    count = {p: sum(1 for n in nodes if n.pool == p) for p in by_name}
    pools = {p.name: PoolObservation(p, count[p.name], count[p.name]) for p in cfg.pools}
    return Snapshot(now=1000.0, pending=pending, nodes=nodes, pools=pools, dra=objects), cfg


def _taint(slices: tuple[ResourceSlice, ...], effect: str | None) -> tuple[ResourceSlice, ...]:
    """The node's slices with the last device of its last slice of devices tainted (no effect: untouched)."""
    if effect is None:
        return slices
    i = max(i for i, s in enumerate(slices) if s.devices)
    last = dataclasses.replace(slices[i].devices[-1], taints=(DeviceTaint(XID, "79", effect),))
    return (*slices[:i], dataclasses.replace(slices[i], devices=(*slices[i].devices[:-1], last)), *slices[i + 1:])


def test_a_gpu_with_the_health_taint_leaves_its_node_on_the_count_path() -> None:
    """One sick GPU does not send every GPU pod in reach one at a time through the allocator: its node still
    allocates plain claims by the count (the tainted GPU is counted apart, keys.RES_DRA_UNTAINTED, and never
    taken), while a claim that tolerates the taint is allocated by the allocator."""
    pool = next(p for p in _config(True).pools if p.name == "a100-dra")
    objects = DraObjects(classes={c.name: c for c in DEVICE_CLASSES}, templates={
        f"ml/{t[0]}": ResourceClaimTemplate("ml", t[0], _spec(*t[1:])) for t in TEMPLATES})
    objects.slices.extend(_taint(pool.dra_slices("sick"), "NoSchedule"))
    state = DraState(objects)
    tmpl = pool.template_node(pool.zones[0], "us-east-1")
    node = Node("sick", {**tmpl.labels, keys.LABEL_HOSTNAME: "sick"}, tmpl.taints, tmpl.allocatable, pool=pool.name)

    def pod(template: str) -> Pod:
        return Pod(template, "ml", {}, resource_claims=(PodResourceClaim("r", template_name=template),))

    plain = state.counted.specs(pod("gpu-2"))
    assert plain is not None
    assert state.counted.uniform(node, plain)
    assert state.counted.specs(pod("gpu-1-tolerant")) is None


def _run(snap: Snapshot, cfg: ScalerConfig) -> Plan:
    return plan(snap, State(), cfg)[0]


def _where(p: Plan) -> dict[str, tuple[str, str | None, str | None]]:
    return {k: (v.outcome, v.pool, v.node) for k, v in p.verdicts.items()}


@settings(max_examples=120, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster(grow=False))
def test_by_the_count_places_as_the_allocator_does(case: tuple[Snapshot, ScalerConfig]) -> None:
    snap, cfg = case
    counted = _run(snap, cfg)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(constrained.Filtered, "counted", lambda self, cls: False)
        checked = _run(snap, cfg)
    assert _where(counted) == _where(checked)
    assert [d.node for d in counted.scale_downs] == [d.node for d in checked.scale_downs]


@settings(max_examples=120, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster(grow=True))
def test_every_pod_placed_allocates_where_it_is_placed(case: tuple[Snapshot, ScalerConfig]) -> None:
    snap, cfg = case
    ups: list[ScaleUpResult] = []

    def keep(*args: Any) -> ScaleUpResult:
        ups.append(plan_scale_up(*args))
        return ups[-1]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(planner, "plan_scale_up", keep)
        result = _run(snap, cfg)
    by_pod = {p.key: p for p in snap.pending}
    on: dict[str, list[Pod]] = {}
    for key, v in result.verdicts.items():
        if v.outcome == "fits-existing":
            assert v.node is not None
            on.setdefault(v.node, []).append(by_pod[key])
    nodes = {n.name: n for n in snap.nodes}
    held = {r.device_id for c in snap.dra.claims.values() if c.allocation for r in c.allocation.results}
    for name, pods in on.items():
        _allocate_in_turn(snap, nodes[name], snap.dra.slices, held, pods)
    for new in ups[0].new_nodes:
        _allocate_in_turn(snap, new.template, list(new.template.slices), set(), new.pods)


def _allocate_in_turn(snap: Snapshot, node: Node, slices: Any, held: set[Any], pods: list[Pod]) -> None:
    used = set(held)
    ref = NodeRef(next((s.node_name for s in node.slices), None) or node.name, node.labels)
    for pod in pods:
        claims = [ResourceClaim(pod.namespace, f"{pod.name}-{c.name}", snap.dra.templates[f"ml/{c.template_name}"].spec)
                  for c in pod.resource_claims]
        outcome = Allocator(snap.dra.classes, slices, used).allocate(ref, claims)
        assert outcome.ok, (node.name, pod.key, outcome.reason)
        used |= {r.device_id for a in outcome.allocations or () for r in a.results}
