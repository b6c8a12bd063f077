"""ProvisioningRequests end to end on the real control plane: the CRD as cluster-autoscaler installs it
(its status validated by the real API server), PodTemplates, the scaler's loop as its own ServiceAccount,
the simulator's cloud, and the node agent registering each instance once it has booted.

A request of each class: check-capacity says Provisioned only when every pod set fits; an atomic one gets
all its nodes or none, is Provisioned once they are all up, keeps them from scale-down until its booking
expires, and is Failed with the reason when a pool's max forbids it. Moved here from tests/integration,
where the fake API server accepted any status the scaler wrote."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from scaler.core.config.settings import parse_config
from scaler.core.model import keys
from scaler.core.planning import provreq
from tests.controlplane.fixtures import Cluster
from tests.controlplane.world import RealWorld, SimCloud, create_all
from tests.integration.test_provisioning_requests import CONFIG, GPU_TOLERATIONS

pytestmark = pytest.mark.integration



class Requests:
    def __init__(self, world: RealWorld) -> None:
        self.world = world
        self.cluster = world.cluster

    def conditions(self, name: str) -> dict[str, tuple[str, str, str]]:
        obj = self.cluster.custom.get_namespaced_custom_object("autoscaling.x-k8s.io", "v1", "ml",
                                                               "provisioningrequests", name)
        return {c["type"]: (c["status"], c["reason"], c["message"])
                for c in (obj.get("status") or {}).get("conditions") or ()}

    def request(self, name: str, cls: str, counts: list[int], **parameters: str) -> None:
        """A ProvisioningRequest with one PodTemplate (8 GPUs a pod) per pod set, as Kueue makes them."""
        objs: list[dict[str, Any]] = []
        sets = []
        for i, count in enumerate(counts):
            template = f"{name}-ps{i}"
            objs.append({
                "apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": template, "namespace": "ml"},
                "template": {"metadata": {"labels": {"job": name}}, "spec": {
                    "tolerations": GPU_TOLERATIONS,
                    "containers": [{"name": "train", "image": "trainer:1", "resources": {
                        "requests": {"cpu": "16", "memory": "64Gi", keys.RES_GPU: "8"},
                        "limits": {keys.RES_GPU: "8"}}}]}}})
            sets.append({"podTemplateRef": {"name": template}, "count": count})
        spec: dict[str, Any] = {"provisioningClassName": cls, "podSets": sets}
        if parameters:
            spec["parameters"] = parameters
        create_all(self.cluster.admin, objs)
        self.cluster.custom.create_namespaced_custom_object(
            "autoscaling.x-k8s.io", "v1", "ml", "provisioningrequests", {
            "apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
            "metadata": {"name": name, "namespace": "ml"}, "spec": spec})

    def nodes(self) -> int:
        return len(self.cluster.core.list_node().items)


@pytest.fixture
def reqs(cluster: Cluster) -> Iterator[Requests]:
    cluster.core.create_namespace({"metadata": {"name": "ml"}})
    world = RealWorld(SimCloud(parse_config(CONFIG, "test")), cluster, parse_config(CONFIG, "test"), kubelet=True)
    try:
        yield Requests(world)
    finally:
        world.close()


def test_check_capacity_is_provisioned_only_when_every_pod_set_fits(reqs: Requests) -> None:
    world = reqs.world
    world.step()
    world.provider.set_desired("gpu8-od", 5)
    world.run(130)  # five nodes are up
    reqs.request("fits", provreq.CHECK_CAPACITY, [3, 2])  # 5 nodes' worth
    reqs.request("too-much", provreq.CHECK_CAPACITY, [1])  # the room is booked by the first
    world.step()
    assert reqs.conditions("fits")["Provisioned"][:2] == ("True", "CapacityIsFound")
    status, reason, message = reqs.conditions("too-much")["Provisioned"]
    assert (status, reason) == ("False", "CapacityIsNotFound") and "nodes that are up" in message
    assert world.desired("gpu8-od") == 5  # a question: nothing was added


def test_atomic_request_books_its_nodes_until_the_booking_expires(reqs: Requests) -> None:
    world = reqs.world
    reqs.request("train", provreq.ATOMIC_SCALE_UP, [4])
    world.step()
    assert world.desired("gpu8-od") == 4  # all four nodes at once
    assert reqs.conditions("train")["Provisioned"][:2] == ("False", "Provisioning")
    assert reqs.conditions("train")["Accepted"][:2] == ("True", "Accepted")
    world.run(130)  # the nodes boot and register
    assert reqs.nodes() == 4
    assert reqs.conditions("train")["Provisioned"][:2] == ("True", "CapacityIsProvisioned")
    # Booked: four empty nodes, long past the 60 s unneeded time, are kept for the request's pods.
    world.run(world.config.timings.booking_ttl - 60)
    assert world.desired("gpu8-od") == 4 and reqs.nodes() == 4
    assert "BookingExpired" not in reqs.conditions("train")
    # The booking expires without the pods coming: the request says so and the nodes go.
    world.run(120)
    assert reqs.conditions("train")["BookingExpired"][:2] == ("True", "CapacityReservationTimeExpired")
    world.run(300)
    assert world.desired("gpu8-od") < 4


def test_atomic_request_a_pool_max_forbids_fails_with_the_reason(reqs: Requests) -> None:
    world = reqs.world
    reqs.request("huge", provreq.ATOMIC_SCALE_UP, [4, 3])  # 7 nodes of a pool whose max is 6
    world.step()
    status, reason, message = reqs.conditions("huge")["Failed"]
    assert (status, reason) == ("True", "CapacityIsNotFound")
    assert "gpu8-od" in message and "max" in message
    world.run(30)
    assert world.desired("gpu8-od") == 0  # none rather than six of seven


def test_an_unsupported_parameter_is_refused_with_a_reason(reqs: Requests) -> None:
    world = reqs.world
    reqs.request("odd", provreq.ATOMIC_SCALE_UP, [1], MaxRunDurationSeconds="3600")
    world.step()
    conds = reqs.conditions("odd")
    assert conds["Accepted"][:2] == ("False", "Rejected") and conds["Failed"][:2] == ("True", "Rejected")
    assert "MaxRunDurationSeconds" in conds["Failed"][2]
    assert world.desired("gpu8-od") == 0


def test_a_check_capacity_request_never_takes_the_nodes_coming_for_an_atomic_one(cluster: Cluster) -> None:
    """Issue 37: a check-capacity request waiting since before an atomic one for the same 4 x 8 GPUs was answered
    CapacityIsFound from the atomic request's nodes as they registered, and the atomic request then bought 4
    more: 8 nodes for 4 pods' worth. The nodes coming for a request are that request's until it is Provisioned."""
    cluster.core.create_namespace({"metadata": {"name": "ml"}})
    config = parse_config({**CONFIG, "pools": [{**CONFIG["pools"][0], "max": 12}]}, "test")
    world = RealWorld(SimCloud(config), cluster, config, kubelet=True)
    reqs = Requests(world)
    try:
        world.step()
        reqs.request("check", provreq.CHECK_CAPACITY, [4])
        world.step()
        assert reqs.conditions("check")["Provisioned"][:2] == ("False", "CapacityIsNotFound")
        reqs.request("train", provreq.ATOMIC_SCALE_UP, [4])
        world.step()
        assert world.desired("gpu8-od") == 4
        world.run(300)  # the four nodes boot and register, and stay the atomic request's
        assert world.desired("gpu8-od") == 4 and reqs.nodes() == 4  # (before: 8 nodes bought)
        assert reqs.conditions("train")["Provisioned"][:2] == ("True", "CapacityIsProvisioned")
        assert reqs.conditions("check")["Provisioned"][:2] == ("False", "CapacityIsNotFound")
    finally:
        world.close()


def test_a_request_that_expires_while_its_node_boots_says_so_once_and_lets_the_node_go(reqs: Requests) -> None:
    """Issue 37: an atomic request that expired while its node booted said Failed=True (Expired) and
    Provisioned=False (Provisioning) at once. Expired, it is no longer provisioning, and the node bought for it is
    removed like any idle node."""
    world = reqs.world
    reqs.request("late", provreq.ATOMIC_SCALE_UP, [1], ValidUntilSeconds="60")
    world.step()
    assert world.desired("gpu8-od") == 1
    assert reqs.conditions("late")["Provisioned"][:2] == ("False", "Provisioning")
    world.run(70)  # expired; the node (120 s to boot) is not up yet
    conds = reqs.conditions("late")
    assert conds["Failed"][:2] == ("True", "Expired")
    assert conds["Provisioned"][:2] == ("False", "Expired")
    world.run(120)  # the node registers: nobody's
    assert reqs.nodes() == 1
    world.run(200)  # the 60 s unneeded time, the drain
    assert world.desired("gpu8-od") == 0 and reqs.nodes() == 0
