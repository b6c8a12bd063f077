"""Gangs as the Workload API declares them (issue 39), on the real thing: PodGroups (scheduling.k8s.io/v1beta1)
and pods naming them by spec.schedulingGroup on a 1.37 control plane with GenericWorkload on, whose real
kube-scheduler (its GangScheduling plugin) binds a gang all or nothing. The scaler's pass plans; the real
scheduler binds what the plan said it would."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from scaler.core.config.settings import ScalerConfig, parse_config
from tests.controlplane.fixtures import Cluster
from tests.controlplane.scheduler_diff import Report, describe, run_seed
from tests.controlplane.world import MotoCloud, RealWorld, create_all, gpu_pod
from tests.fakes.aws import MotoAws

pytestmark = pytest.mark.integration

ZONE = "us-east-1a"


def gang_pools() -> ScalerConfig:
    """examples/pools-aws-gangs.yaml's shape: an 8-GPU pool of max 2 (whole nodes for 8-GPU pods)."""
    return parse_config({"cluster": "burst", "cloud": "aws", "region": "us-east-1",
                         "timings": {"scan_interval": 10, "unneeded_time": 600, "provision_timeout": 600},
                         "pools": [{"name": "gpu8", "instance_types": ["g6.48xlarge"], "zones": [ZONE],
                                    "min_pod_gpus": 8, "max": 2}]}, "test")


def pod_group(name: str, min_count: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}}


def member(name: str, group: str) -> dict[str, Any]:
    pod = gpu_pod(name, 8, cpu="8")
    pod["spec"]["schedulingGroup"] = {"podGroupName": group}
    return pod


@pytest.fixture
def world(aws: MotoAws, cluster: Cluster) -> Iterator[RealWorld]:
    config = gang_pools()
    w = RealWorld(MotoCloud(aws, config), cluster, config)
    try:
        yield w
    finally:
        w.close()


def test_the_gang_that_fits_binds_and_the_one_that_never_can_buys_nothing(world: RealWorld, cluster: Cluster) -> None:
    for group in (pod_group("big", 3), pod_group("pair", 2)):
        cluster.custom.create_namespaced_custom_object("scheduling.k8s.io", "v1beta1", "default", "podgroups", group)
    create_all(cluster.admin, [*(member(f"big-{i}", "big") for i in range(3)),
                               *(member(f"pair-{i}", "pair") for i in range(2)),
                               member("ghost-0", "ghost")])  # its PodGroup never made
    tried = {f"big-{i}" for i in range(3)} | {"pair-0", "pair-1"}  # ghost-0 is held back: never tried
    plan = step(world, cluster, lambda pods: all(pods[n].status.conditions for n in tried))
    assert plan is not None
    assert [(u.pool, u.count, sorted(u.pods)) for u in plan.scale_ups] == \
        [("gpu8", 2, ["default/pair-0", "default/pair-1"])]
    assert [n for n in plan.notes if "default/big" in n and "nothing bought" in n]
    world.register()
    step(world, cluster, lambda pods: pods["pair-0"].spec.node_name and pods["pair-1"].spec.node_name)
    step(world, cluster, lambda pods: True)
    bound = {p.metadata.name: p.spec.node_name for p in world.pods()}
    # the real scheduler binds the pair on the two nodes bought for it, and none of the others
    assert bound["pair-0"] != bound["pair-1"]
    assert sorted(n for n, node in bound.items() if node is None) == ["big-0", "big-1", "big-2", "ghost-0"]
    assert len(world.bought) == 2 and world.unused_nodes() == []


def step(world: RealWorld, cluster: Cluster, ready: Callable[[dict[str, Any]], Any]) -> Any:
    """A pass once the scheduler has done what `ready` waits for and the scaler's cache has it (`world.settle`
    would wait its whole timeout for a pod that is never tried: the one held back)."""
    cluster.wait(lambda: ready({p.metadata.name: p for p in world.pods()}), "the scheduler's attempts")
    cluster.wait(world.caught_up, "the scaler's cache")
    for p in world.pods():
        if p.spec.node_name:
            world.used.add(p.spec.node_name)
    return world.step(settle=False)


def test_the_api_server_refuses_min_count_0_as_the_snapshot_reader_does(cluster: Cluster) -> None:
    with pytest.raises(ApiException) as refused:
        cluster.custom.create_namespaced_custom_object("scheduling.k8s.io", "v1beta1", "default", "podgroups",
                                                       pod_group("none", 0))
    assert refused.value.status == 422 and "minCount" in refused.value.body


def test_the_gang_rule_agrees_with_kube_schedulers_gang_scheduling(cluster: Cluster) -> None:
    """`make scheduler-diff`'s gangs on one small random cluster: minCount members together on the nodes there
    are, or none, as the planner says."""
    report = Report()
    run_seed(cluster.plane, 7, 0, report, agent=cluster.agent, gangs=10)
    outcomes = report.outcomes
    assert len(outcomes) == 10
    assert any(o.scheduled for o in outcomes) and any(o.scheduled is None for o in outcomes)
    disagreements = [describe(o) + f"\n  {o.message}" for o in outcomes if not o.agree]
    assert not disagreements, "\n".join(disagreements)
