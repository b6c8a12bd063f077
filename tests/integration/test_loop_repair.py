"""GPU repair end to end (issue 26): real planner and actuator, the AWS provider on moto's server, the kube
adapter on the fake API server. A node whose device plugin stops advertising a GPU is replaced; a fleet
going unhealthy at once is repaired only up to the budget; a GPU that comes back stops its repair.

On the fake API server, not the real control plane: the test's clock jumps minutes at a step (see
tests/integration/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scaler.core.config.settings import ScalerConfig, parse_config
from scaler.core.model import keys
from tests.fakes.aws import MotoAws
from tests.fakes.kubeapi import FakeKube, pdb, pod
from tests.fakes.world import World

pytestmark = pytest.mark.integration
POOL = "gpu8"


def _config(**repair: Any) -> ScalerConfig:
    # max_hold 0: a broken node is repaired after its grace even while its pods' work since their last checkpoint
    # is at stake; that hold is the planner's own rule (tests/scaler/core/test_repair.py), these are the loop's.
    return parse_config({
        "cluster": "burst", "cloud": "aws", "region": "us-east-1",
        "timings": {"scan_interval": 10, "unneeded_time": 600, "provision_timeout": 600, "drain_timeout": 30},
        "pools": [{"name": POOL, "instance_types": ["g6.48xlarge"], "zones": ["us-east-1a"], "max": 20,
                   "repair": {"lost_gpu_grace": 60, "max_hold": 0, **repair}}],
    }, "test")


def _world(aws: MotoAws, kube: FakeKube, tmp: Path, nodes: int, **repair: Any) -> World:
    w = World(aws, kube, _config(**repair), tmp, desired={POOL: nodes})
    w.register(POOL)
    kube.recreate_evicted = True  # the ReplicaSet controller: an evicted pod comes back pending
    return w


@pytest.fixture
def world(aws: MotoAws, kube: FakeKube, tmp_path: Path) -> Iterator[World]:
    w = _world(aws, kube, tmp_path, 1)
    yield w
    w.close()


def _lose_gpu(kube: FakeKube, node: str, left: int = 7) -> None:
    """The device plugin marks a GPU unhealthy: the node's allocatable drops below its capacity."""
    obj = kube.get("nodes", f"/{node}")
    assert obj is not None
    obj["status"]["allocatable"][keys.RES_GPU] = str(left)
    kube.put("nodes", obj)


def _node_names(kube: FakeKube) -> list[str]:
    return sorted(n["metadata"]["name"] for n in kube.objects("nodes"))


def _events(kube: FakeKube, reason: str) -> list[str]:
    return sorted(e["involvedObject"]["name"] for e in kube.objects("events") if e["reason"] == reason)


def test_a_node_losing_one_of_8_gpus_is_replaced_within_grace_plus_two_passes(world: World, kube: FakeKube) -> None:
    [node] = _node_names(kube)
    [old] = world.instance_ids(POOL)
    for i in range(3):  # healthy pods on the healthy GPUs
        kube.put("pods", pod(f"train-{i}", gpus=2, cpu="1", node_name=node, labels={"app": "train"}))
    world.step()
    _lose_gpu(kube, node)
    first = world.step()  # the pass that first sees the signal
    assert first is not None and first.unhealthy == {POOL: 1} and first.scale_downs == []
    for _ in range(5):
        world.step()
    started = world.step()  # grace (60 s) after the first sighting: repair, replacement bought ahead
    assert started is not None
    assert [(d.node, d.repair) for d in started.scale_downs] == [(node, True)]
    assert world.desired(POOL) == 2
    assert kube.get("nodes", f"/{node}")["spec"]["unschedulable"] is True  # type: ignore[index]
    assert _events(kube, "GpuRepair") == sorted([node, "train-0", "train-1", "train-2"])
    world.step()  # evictions (on a pod list read after the cordon)
    assert {k for k, code in kube.evictions if code == 201} == {f"default/train-{i}" for i in range(3)}
    world.step()  # nothing left: exactly that instance is given back
    assert old not in world.instance_ids(POOL) and len(world.instance_ids(POOL)) == 1
    metrics = world.runtime.metrics.registry
    assert metrics.get_sample_value("gpuburst_gpu_repairs_total", {"pool": POOL, "result": "replaced"}) == 1
    # The pods their controller recreated fit the replacement once it registers: nothing more is bought.
    [new] = world.register(POOL)
    after = world.step()
    assert after is not None and after.scale_ups == []
    assert {k: (v.outcome, v.node) for k, v in after.verdicts.items()} == {
        f"default/train-{i}-r": ("fits-existing", new) for i in range(3)}
    assert node not in _node_names(kube)


def test_thirty_percent_unhealthy_at_once_repairs_exactly_the_budget_and_pauses(
        aws: MotoAws, kube: FakeKube, tmp_path: Path) -> None:
    w = _world(aws, kube, tmp_path, 10, lost_gpu_grace=0, max_per_pass=5)
    try:
        broken = _node_names(kube)[:3]
        for name in broken:
            _lose_gpu(kube, name)
        plan = w.step()
        assert plan is not None
        assert len(plan.scale_downs) == 2  # 20 % of 10 nodes
        assert plan.repair_paused == {POOL: "2 of 10 node(s) in repair, the budget (20 %); "
                                            "1 more unhealthy node(s) wait"}
        [waiting] = set(broken) - {d.node for d in plan.scale_downs}
        assert _events(kube, "GpuRepairPaused") == [waiting]
        metrics = w.runtime.metrics.registry
        assert metrics.get_sample_value("gpuburst_gpu_repair_paused", {"pool": POOL}) == 1
        assert metrics.get_sample_value("gpuburst_gpu_unhealthy_nodes", {"pool": POOL}) == 3
        cordoned = [n["metadata"]["name"] for n in kube.objects("nodes") if n["spec"].get("unschedulable")]
        assert sorted(cordoned) == sorted(d.node for d in plan.scale_downs)
        again = w.step()
        assert again is not None and again.scale_downs == [] and POOL in again.repair_paused
        assert _events(kube, "GpuRepairPaused") == [waiting]  # said once
    finally:
        w.close()


def test_a_gpu_that_recovers_stops_its_repair(world: World, kube: FakeKube) -> None:
    [node] = _node_names(kube)
    kube.put("pods", pod("train-0", gpus=2, cpu="1", node_name=node, labels={"app": "train"}))
    kube.put("poddisruptionbudgets", pdb("train", {"app": "train"}, allowed=0))  # the drain waits
    _lose_gpu(kube, node)
    for _ in range(12):  # the drain outlives drain_timeout (30 s): a broken node is not uncordoned for a PDB
        world.step()
    assert node in world.runtime.reconciler.actuator.drains
    assert kube.get("nodes", f"/{node}")["spec"]["unschedulable"] is True  # type: ignore[index]
    assert _events(kube, "ScaleDownFailed") == [] and len(_events(kube, "GpuRepair")) == 2  # node + pod, once
    _lose_gpu(kube, node, left=8)  # the GPU is back (a transient fault, a driver reload)
    plan = world.step()
    assert plan is not None and plan.recovered == [node]
    assert not kube.get("nodes", f"/{node}")["spec"].get("unschedulable")  # type: ignore[index]
    assert _events(kube, "GpuRecovered") == [node]
    assert kube.get("pods", "default/train-0") is not None
    metrics = world.runtime.metrics.registry
    assert metrics.get_sample_value("gpuburst_gpu_repairs_total", {"pool": POOL, "result": "recovered"}) == 1
