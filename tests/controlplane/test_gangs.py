"""Gangs as the Workload API declares them (issue 39), on the real thing: PodGroups (scheduling.k8s.io/v1beta1)
and pods naming them by spec.schedulingGroup on a 1.37 control plane with GenericWorkload on, whose real
kube-scheduler (its GangScheduling plugin) binds a gang all or nothing. The scaler's pass plans; the real
scheduler binds what the plan said it would."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from scaler.cli import main
from scaler.core.config.settings import ScalerConfig, parse_config
from scaler.core.planning.context import planning_context
from scaler.core.planning.planner import plan as plan_of
from scaler.core.planning.state import State
from scaler.sim.plan_command import load_snapshot
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


def test_the_gang_that_fits_binds_and_the_one_that_never_can_buys_nothing(world: RealWorld, cluster: Cluster,
                                                                         tmp_path: Path) -> None:
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
    # `scaler snapshot` (the scaler's own read permissions) writes the PodGroups; `plan` on it says the same
    path = tmp_path / "cluster.json"
    assert main(["snapshot", "--kubeconfig", str(cluster.scaler_kubeconfig), "--output", str(path)]) == 0
    groups = [o for o in json.loads(path.read_text())["items"] if o["kind"] == "PodGroup"]
    assert sorted((o["apiVersion"], o["metadata"]["name"]) for o in groups) == \
        [("scheduling.k8s.io/v1beta1", "big"), ("scheduling.k8s.io/v1beta1", "pair")]
    snapshot, _ = load_snapshot(path, world.config)
    again, _ = plan_of(snapshot, State(), planning_context(world.config))
    assert [(u.pool, u.count, sorted(u.pods)) for u in again.scale_ups] == \
        [("gpu8", 2, ["default/pair-0", "default/pair-1"])]
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


VOLCANO_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "podgroups.scheduling.volcano.sh"},
    "spec": {"group": "scheduling.volcano.sh", "scope": "Namespaced",
             "names": {"plural": "podgroups", "singular": "podgroup", "kind": "PodGroup"},
             # without Volcano's schema (minMember's Minimum=0): an object its API would refuse gets stored
             "versions": [{"name": "v1beta1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                 "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}


def test_a_pod_group_the_scaler_cannot_read_gets_a_warning_event_and_the_pass_goes_on(
        aws: MotoAws, cluster: Cluster) -> None:
    """A CRD installed without its schema stores what Volcano's API refuses (minMember -1): the running scaler
    leaves that PodGroup out with a Warning Event and still plans the gang that is fine."""
    ext = client.ApiextensionsV1Api(cluster.admin)
    ext.create_custom_resource_definition(VOLCANO_CRD)
    try:
        cluster.wait(lambda: served(cluster, "scheduling.volcano.sh", "v1beta1", "podgroups"), "the CRD served")
        for name, minimum in (("bad", -1), ("vc", 2)):
            cluster.custom.create_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", "default", "podgroups", {
                "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                "metadata": {"name": name, "namespace": "default"}, "spec": {"minMember": minimum}})
        config = gang_pools()
        w = RealWorld(MotoCloud(aws, config), cluster, config)
        try:
            pods = [gpu_pod(f"vc-{i}", 8, cpu="8") for i in range(2)]
            for p in pods:
                p["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": "vc"}
            create_all(cluster.admin, pods)
            plan = step(w, cluster, lambda found: all(found[f"vc-{i}"].status.conditions for i in range(2)))
            assert plan is not None and [(u.pool, u.count) for u in plan.scale_ups] == [("gpu8", 2)]
            events = cluster.core.list_namespaced_event("default").items
            [warning] = [e for e in events if e.reason == "FailedToRead" and e.involved_object.name == "bad"]
            assert warning.type == "Warning" and "spec.minMember: -1 is below 0" in warning.message
        finally:
            w.close()
    finally:
        ext.delete_custom_resource_definition(VOLCANO_CRD["metadata"]["name"])


def served(cluster: Cluster, group: str, version: str, plural: str) -> bool:
    try:
        cluster.custom.list_cluster_custom_object(group, version, plural)
    except ApiException as err:
        if err.status == 404:
            return False
        raise
    return True
