"""The scaler as users run it, on the real thing: the loop as its own ServiceAccount against a 1.37 control
plane (the real kube-scheduler binds, the real controller-manager makes claims and collects garbage, the
real API server enforces PodDisruptionBudgets on policy/v1 Evictions), AWS through boto3 against moto's
server, and the node agent as every instance's kubelet.

Each scenario reports what a user's bill would show: pods bound, nodes bought against the minimum, nodes
bought that no pod used, idle nodes left, and how long after each pod's creation its cloud request went out
(the `report` line in the test's output: `pytest -s`)."""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from scaler.core.config.settings import ScalerConfig, parse_config
from scaler.core.dra import nvidia
from scaler.core.model import keys
from scaler.permissions import LEASE_NAME
from tests.controlplane import diffgen
from tests.controlplane.fixtures import SCALER_NAMESPACE, Cluster
from tests.controlplane.world import MotoCloud, RealWorld, create_all, gpu_pod
from tests.fakes.aws import MotoAws

pytestmark = pytest.mark.integration

ZONES = ("us-east-1a", "us-east-1b")


def pools_config(max_gpu8: int = 10, extra: Iterable[dict[str, object]] = ()) -> ScalerConfig:
    """The shape of examples/pools-aws.yaml, small: 1- and 8-GPU spot pools per zone falling back to
    on-demand, the 8-GPU pools tainted for pods of 8 GPUs."""
    pools: list[dict[str, object]] = []
    for zone in ZONES:
        z = zone[-1]
        pools += [
            {"name": f"gpu1-spot-{z}", "capacity_type": "spot", "instance_types": ["g6.xlarge"], "zones": [zone],
             "max": 40, "fallback": f"gpu1-od-{z}"},
            {"name": f"gpu1-od-{z}", "instance_types": ["g6.xlarge"], "zones": [zone], "max": 40},
            {"name": f"gpu8-spot-{z}", "capacity_type": "spot", "instance_types": ["g6.48xlarge"], "zones": [zone],
             "min_pod_gpus": 8, "max": max_gpu8, "fallback": f"gpu8-od-{z}"},
            {"name": f"gpu8-od-{z}", "instance_types": ["g6.48xlarge"], "zones": [zone], "min_pod_gpus": 8,
             "max": max_gpu8},
        ]
    return parse_config({"cluster": "burst", "cloud": "aws", "region": "us-east-1",
                         "timings": {"scan_interval": 10, "unneeded_time": 60, "provision_timeout": 600},
                         "pools": [*pools, *extra]}, "test")


@pytest.fixture
def world(aws: MotoAws, cluster: Cluster) -> Iterator[RealWorld]:
    config = pools_config()
    w = RealWorld(MotoCloud(aws, config), cluster, config)
    try:
        yield w
    finally:
        w.close()


def burst_pods() -> list[dict[str, object]]:
    """38 pods: 1- and 8-GPU, some pinned to a zone, the rest anywhere."""
    pods = [gpu_pod(f"pin-a-{i}", 1, zone=ZONES[0]) for i in range(8)]
    pods += [gpu_pod(f"pin-b-{i}", 1, zone=ZONES[1]) for i in range(6)]
    pods += [gpu_pod(f"any-{i}", 1) for i in range(16)]
    pods += [gpu_pod(f"big-a-{i}", 8, zone=ZONES[0], cpu="8") for i in range(3)]
    pods += [gpu_pod(f"big-{i}", 8, cpu="8") for i in range(5)]
    return pods


def test_a_burst_buys_at_most_the_minimum_plus_one_whichever_node_the_scheduler_fills_first(
        aws: MotoAws, cluster: Cluster) -> None:
    config = pools_config()
    world = RealWorld(MotoCloud(aws, config), cluster, config, device_plugin_delay=True)
    try:
        create_all(cluster.admin, burst_pods())
        minimum = 30 + 8  # one 1-GPU node per 1-GPU pod, one 8-GPU node per 8-GPU pod
        plan = world.step()
        assert plan is not None and sum(u.count for u in plan.scale_ups) == minimum
        # Nodes finish booting a few at a time in an order of their own, each registering before its device
        # plugin advertises the GPUs; the real scheduler binds each pod to whatever fits when it looks. The
        # planner before issue 37's fix bet on which pod it would bind and bought again when it lost the bet
        # (40-42 nodes bought, 2-4 never used).
        order = sorted(world.bought)
        random.Random(37).shuffle(order)
        for _ in range(12):
            world.register(limit=4, order=order)
            world.step(30)
        for _ in range(10):
            world.register()
            world.step(30)
            if not world.pending():
                break
        line = world.report(minimum)
        assert world.pending() == [], line
        assert len(world.bought) <= minimum + 1, line
        assert world.unused_nodes() == [], line
    finally:
        world.close()


MIG_POOL = {"name": "mig-a", "instance_types": ["p4d.24xlarge"], "zones": [ZONES[0]], "max": 2,
            "gpu_allocation": "dra", "gpu_sharing": {"mig": {"strategy": "mixed", "layout": "all-balanced"}}}


def mixed_pods() -> list[dict[str, Any]]:
    """A mixed pending workload, 15 pods: plain 1-GPU pods; 1-GPU pods spread over the zones (maxSkew 1,
    DoNotSchedule); a gang of two 8-GPU pods (scheduler-plugins' pod-group label and min-member); MIG slices
    claimed through DRA, one claim asking for two 1g slices of the same GPU (matchAttribute parentUUID).
    Minimum: 4 + 4 one-GPU nodes, 2 eight-GPU nodes, 1 MIG node."""
    pods = [gpu_pod(f"plain-{i}", 1) for i in range(4)]
    for i in range(4):
        pod = gpu_pod(f"spread-{i}", 1, labels={"app": "spread"})
        pod["spec"]["topologySpreadConstraints"] = [{
            "maxSkew": 1, "topologyKey": keys.LABEL_ZONE, "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "spread"}}}]
        pods.append(pod)
    for i in range(2):
        pod = gpu_pod(f"gang-{i}", 8, cpu="8", labels={"app": "gang", keys.LABEL_POD_GROUP: "allreduce"})
        pod["metadata"]["annotations"] = {keys.ANNOTATION_POD_GROUP_MIN: "2"}
        pods.append(pod)
    objs: list[dict[str, Any]] = [diffgen.device_class(c) for c in nvidia.DEVICE_CLASSES]
    objs += [diffgen.claim_template(0, spec) for spec in ("mig-1g", "mig-2x1g-one-gpu")]
    for i, spec in enumerate(("mig-1g", "mig-1g", "mig-1g", "mig-2x1g-one-gpu", "mig-2x1g-one-gpu")):
        pod = gpu_pod(f"mig-{i}", 0)
        pod["spec"]["resourceClaims"] = [{"name": "mig", "resourceClaimTemplateName": f"s0-{spec}"}]
        pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "mig"}]
        pods.append(pod)
    return objs + pods


def web_deployment(name: str, host: str) -> dict[str, Any]:
    spec = gpu_pod(name, 0, labels={"app": "web"}, cpu="100m")["spec"]  # tolerates the GPU taint, not a cordon
    spec["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
        "weight": 100, "preference": {"matchExpressions": [
            {"key": keys.LABEL_HOSTNAME, "operator": "In", "values": [host]}]}}]}}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web", "deployment": name}},
                     "template": {"metadata": {"labels": {"app": "web", "deployment": name}}, "spec": spec}}}


def web_ready(world: RealWorld) -> list[str]:
    return [p.metadata.name for p in world.pods() if p.metadata.name.startswith("web-")
            and p.metadata.deletion_timestamp is None and p.spec.node_name and p.status.phase == "Running"]


def test_a_mixed_workload_is_bound_by_the_real_scheduler_then_scaled_down_through_evictions_the_budget_allows(
        aws: MotoAws, cluster: Cluster) -> None:
    config = pools_config(extra=[MIG_POOL])
    world = RealWorld(MotoCloud(aws, config), cluster, config, device_plugin_delay=True)
    try:
        create_all(cluster.admin, mixed_pods())
        minimum = 4 + 4 + 2 + 1
        plan = world.step()
        assert plan is not None and sum(u.count for u in plan.scale_ups) == minimum, plan.scale_ups
        order = sorted(world.bought)
        random.Random(41).shuffle(order)  # nodes finish booting in an order of their own, a few at a time
        for _ in range(6):
            world.register(limit=3, order=order)
            world.step(30)
            if not world.pending() and len(world.names) == len(world.bought):
                break
        line = world.report(minimum)
        assert world.pending() == [], line
        assert len(world.bought) == minimum and world.unused_nodes() == [], line
        claims = cluster.custom.list_namespaced_custom_object("resource.k8s.io", "v1", "default", "resourceclaims")
        allocated = [c for c in claims["items"] if c.get("status", {}).get("allocation")]
        assert len(allocated) == 5  # the real scheduler allocated every MIG claim on the node bought for them

        # A web service runs beside the jobs, one replica on each of two GPU nodes (two Deployments, each
        # preferring its node), under one budget of minAvailable 1; then the jobs finish.
        # Two nodes of the cheapest pool: on a dearer node (the MIG one) the scaler may rightly consolidate the
        # replicas onto a new 1-GPU node instead, and the nodes' names (hence a pick by name) are random.
        cheapest = sorted(n for n in world.names.values()
                          if cluster.core.read_node(n).metadata.labels.get(keys.LABEL_POOL, "").startswith("gpu1-"))
        hosts = cheapest[:2]
        create_all(cluster.admin, [*(web_deployment(f"web-{i}", host) for i, host in enumerate(hosts)), {
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}}])
        cluster.wait(lambda: len(web_ready(world)) == 2, "the web replicas run")
        assert {p.spec.node_name for p in world.pods() if p.metadata.name.startswith("web-")} == set(hosts)
        for pod in world.pods():
            if not pod.metadata.name.startswith("web-"):
                cluster.core.delete_namespaced_pod(pod.metadata.name, "default", grace_period_seconds=0)
        fewest, seen = 2, set(web_ready(world))
        for _ in range(25):
            world.register()  # a node the scaler buys meanwhile boots, as a real one would
            world.step(20)
            ready = web_ready(world)
            fewest, seen = min(fewest, len(ready)), seen | set(ready)
            if len(world.names) == 1 and len(ready) == 2:
                break
        line = f"{world.report(minimum)}; web replicas: {len(seen)} made, fewest ready {fewest}"
        # Every GPU node the jobs left idle is gone; the web replicas of at least one removed node were moved by
        # real Evictions (their ReplicaSets made new ones), and the service never had fewer ready replicas than
        # its budget asks.
        assert len(world.names) == 1 and len(seen) > 2 and fewest >= 1, line
    finally:
        world.close()


def test_a_restart_mid_scale_up_buys_nothing_twice(world: RealWorld, cluster: Cluster) -> None:
    create_all(cluster.admin, [gpu_pod(f"train-{i}", 1, zone=ZONES[i % 2]) for i in range(14)])
    world.step()
    assert len(world.machines()) == 14
    world.runtime = world.new_runtime()  # the process dies: no memory of the request
    world.step()
    world.register(limit=5)
    world.runtime = world.new_runtime()
    world.step()
    world.register()
    world.step()
    line = world.report(14)
    assert world.pending() == [] and len(world.bought) == 14, line


def test_two_replicas_one_acts_and_the_standby_takes_over(world: RealWorld, cluster: Cluster) -> None:
    standby = world.new_runtime("replica-1")
    leader = world.runtime
    create_all(cluster.admin, [gpu_pod("train-0", 1, zone=ZONES[0])])
    assert world.step() is not None  # the first to try leads
    world.runtime = standby
    assert world.step() is None  # the standby only observes
    assert len(world.machines()) == 1
    assert leader.leader is not None
    leader.leader.release()  # the leader stops (SIGTERM): it hands the Lease over
    create_all(cluster.admin, [gpu_pod("train-1", 1, zone=ZONES[0])])
    plan = world.step()
    assert plan is not None and [u.count for u in plan.scale_ups] == [1]
    held = client.CoordinationV1Api(cluster.admin).read_namespaced_lease(LEASE_NAME, SCALER_NAMESPACE)
    assert held.spec.holder_identity == "replica-1"


def test_a_pod_waiting_for_a_pool_at_its_max_gets_its_event(aws: MotoAws, cluster: Cluster) -> None:
    config = pools_config(max_gpu8=1)
    w = RealWorld(MotoCloud(aws, config), cluster, config)
    try:
        create_all(cluster.admin, [gpu_pod(f"big-a-{i}", 8, zone=ZONES[0], cpu="8") for i in range(3)])
        w.step()
        w.step()
        events = cluster.core.list_namespaced_event("default").items
        waiting = [e for e in events if e.reason == "NotTriggerScaleUp"]
        assert waiting and any("max" in e.message for e in waiting)
    finally:
        w.close()


def test_the_api_server_refuses_a_status_the_crd_forbids(cluster: Cluster) -> None:
    """What the fake accepted: a condition without a reason is refused by the CRD's schema."""
    cluster.core.create_namespace({"metadata": {"name": "ml"}})
    cluster.custom.create_namespaced_custom_object("autoscaling.x-k8s.io", "v1", "ml", "provisioningrequests", {
        "apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest", "metadata": {"name": "r"},
        "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
                 "podSets": [{"count": 1, "podTemplateRef": {"name": "t"}}]}})
    with pytest.raises(ApiException) as refused:
        cluster.custom.patch_namespaced_custom_object_status(
            "autoscaling.x-k8s.io", "v1", "ml", "provisioningrequests", "r",
            {"status": {"conditions": [{"type": "Provisioned", "status": "True", "reason": "",
                                        "message": "", "lastTransitionTime": "2026-11-28T00:00:00Z"}]}})
    assert refused.value.status == 422
