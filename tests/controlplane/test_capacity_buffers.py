"""CapacityBuffers on the real control plane: the CRD our chart installs (its schema, its status subresource),
written by the scaler as its ServiceAccount with the chart's RBAC, PodTemplates and Deployments read as the
API server serves them, AWS through moto's server, every booted instance's kubelet the node agent.

A buffer's room is bought and kept while the buffer exists (placeholder pods, never created), given back when it
is deleted; its status says so with upstream's conditions. A buffer that cannot be served gets a Warning Event
and says why in its status, and the pass goes on. (What the CRD's schema refuses at admission, a negative or
non-integer replicas, is shown skipped on the fake server: tests/integration/test_capacity_buffers.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from scaler.core.config.settings import parse_config
from scaler.core.model import keys
from tests.controlplane.fixtures import Cluster
from tests.controlplane.world import MotoCloud, RealWorld, create_all
from tests.fakes.aws import MotoAws

pytestmark = pytest.mark.integration

CONFIG = {
    "cluster": "burst", "cloud": "aws", "region": "us-east-1",
    "timings": {"scan_interval": 10, "unneeded_time": 60, "provision_timeout": 600},
    "pools": [{"name": "gpu8-od", "instance_types": ["g6.48xlarge"], "zones": ["us-east-1a"], "max": 6}],
}
GROUP, VERSION, PLURAL = keys.API_GROUP_AUTOSCALING, "v1beta1", "capacitybuffers"
POD_SPEC = {"tolerations": [{"key": keys.TAINT_GPU, "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "train", "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": "16", "memory": "64Gi", keys.RES_GPU: "8"},
                                          "limits": {keys.RES_GPU: "8"}}}]}


@pytest.fixture
def world(aws: MotoAws, cluster: Cluster) -> Iterator[RealWorld]:
    config = parse_config(CONFIG, "test")
    cluster.core.create_namespace({"metadata": {"name": "ml"}})
    w = RealWorld(MotoCloud(aws, config), cluster, config, kubelet=True)
    try:
        yield w
    finally:
        w.close()


def buffer(cluster: Cluster, name: str, spec: dict[str, Any]) -> None:
    cluster.custom.create_namespaced_custom_object(GROUP, VERSION, "ml", PLURAL, {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "CapacityBuffer", "metadata": {"name": name}, "spec": spec})


def status(cluster: Cluster, name: str) -> dict[str, Any]:
    return cluster.custom.get_namespaced_custom_object(GROUP, VERSION, "ml", PLURAL, name).get("status") or {}


def conditions(cluster: Cluster, name: str) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status(cluster, name).get("conditions") or ()}


def caught_up(world: RealWorld, kind: str, count: int) -> None:
    world.cluster.wait(lambda: len(getattr(world.cache, kind).items()) == count, f"the scaler's {kind} watch")


def test_a_buffer_keeps_its_nodes_and_says_so_in_its_status(world: RealWorld, cluster: Cluster) -> None:
    create_all(cluster.admin, [{"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "gpu8",
                                                                                        "namespace": "ml"},
                                "template": {"spec": POD_SPEC}}])
    buffer(cluster, "ready", {"podTemplateRef": {"name": "gpu8"}, "replicas": 2})
    buffer(cluster, "missing", {"podTemplateRef": {"name": "nope"}, "replicas": 1})
    caught_up(world, "buffers", 2)
    caught_up(world, "pod_templates", 1)
    world.step()
    assert world.desired("gpu8-od") == 2  # two placeholders of 8 GPUs: two new nodes; nothing for the other
    assert conditions(cluster, "ready") == {"ReadyForProvisioning": ("True", "AttributesSetSuccessfully"),
                                            "Provisioning": ("True", "FakePodsInjected")}
    st = status(cluster, "ready")
    assert (st["replicas"], st["podTemplateRef"], st["provisioningStrategy"]) == \
        (2, {"name": "gpu8"}, keys.BUFFER_STRATEGY_ACTIVE)
    assert conditions(cluster, "missing") == {"ReadyForProvisioning": ("False", "error"),
                                              "Provisioning": ("False", "NotReadyForProvisioning")}
    events = cluster.core.list_namespaced_event("ml").items
    assert [(e.involved_object.name, e.type) for e in events if e.reason == "BufferNotReady"] == \
        [("missing", "Warning")]
    assert "PodTemplate nope not found in namespace ml" in next(
        c["message"] for c in status(cluster, "missing")["conditions"] if c["type"] == "ReadyForProvisioning")
    world.run(300, every=60)  # up, then empty for five times the unneeded time: kept for the buffer
    assert world.desired("gpu8-od") == 2 and len(world.names) == 2
    assert world.pods() == []  # placeholders are never created
    cluster.custom.delete_namespaced_custom_object(GROUP, VERSION, "ml", PLURAL, "ready")
    caught_up(world, "buffers", 1)
    world.run(300, every=60)
    assert world.desired("gpu8-od") == 0  # the room goes with the buffer


def test_a_percentage_of_a_deployments_replicas(world: RealWorld, cluster: Cluster) -> None:
    create_all(cluster.admin, [{
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "serve", "namespace": "ml"},
        "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "serve"}},
                 "template": {"metadata": {"labels": {"app": "serve"}}, "spec": POD_SPEC}}}])
    buffer(cluster, "headroom", {"scalableRef": {"apiGroup": "apps", "kind": "Deployment", "name": "serve"},
                                 "percentage": 50})
    caught_up(world, "buffers", 1)
    cluster.wait(lambda: len(world.pods()) == 4, "the Deployment's pods")
    world.step()
    world.step()
    # Four serving pods of 8 GPUs and a buffer of half their count: six nodes, four of them running the pods.
    assert world.desired("gpu8-od") == 6, world.report(6)
    assert conditions(cluster, "headroom")["Provisioning"] == ("True", "FakePodsInjected")
    assert status(cluster, "headroom")["replicas"] == 2
    assert world.pending() == [] and len(world.used) == 4
