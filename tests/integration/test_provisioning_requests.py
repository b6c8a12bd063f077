"""ProvisioningRequests through the scaler end to end: the real loop, the sim provider, the fake API server
(PodTemplates, ProvisioningRequests and their status subresource) through the official client.

A request of each class: check-capacity says Provisioned only when every pod set fits; an atomic one gets
all its nodes or none, is Provisioned once they are all up, keeps them from scale-down until its booking
expires, and is Failed with the reason when a pool's max forbids it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scaler.core.config.settings import ScalerConfig, parse_config
from scaler.core.model import keys
from scaler.core.model.resources import format_resources
from scaler.core.planning import provreq
from scaler.core.planning.decisions import Plan
from scaler.kube.actions import KubeActions
from scaler.kube.cache import ClusterCache
from scaler.kube.client import api_client
from scaler.loop import Runtime
from scaler.metrics import Metrics
from scaler.providers.sim import SimProvider
from tests.fakes.kubeapi import FakeKube

pytestmark = pytest.mark.integration

CONFIG = {
    "cluster": "burst", "cloud": "aws", "region": "us-east-1",
    "timings": {"scan_interval": 10, "unneeded_time": 60, "gpu_boot": 120, "provision_timeout": 600},
    "pools": [{"name": "gpu8-od", "instance_types": ["g6.48xlarge"], "zones": ["us-east-1a"], "max": 6}],
}
GPU_TOLERATIONS = [{"key": keys.TAINT_GPU, "operator": "Exists", "effect": "NoSchedule"}]


class SimWorld:
    """The scaler's loop on the sim provider; the test plays the kubelet (a Node per ready instance) and the
    cloud controller (a Node whose instance is gone is deleted)."""

    def __init__(self, kube: FakeKube, config: ScalerConfig, tmp: Path) -> None:
        self.kube, self.config = kube, config
        self.t = time.time()
        self.provider = SimProvider(config)
        api = api_client(str(kube.kubeconfig(tmp / "kubeconfig")))
        self.cache = ClusterCache(api, watch_timeout=5, backoff_initial=0.05, backoff_max=0.2)
        self.cache.start()
        assert self.cache.wait_synced(5)
        kube = KubeActions(api, "gpuburst-system", nodes=self.cache.raw_node)
        self.runtime = Runtime(config, self.provider, self.cache, kube, metrics=Metrics(), clock=lambda: self.t)

    def kubelet(self) -> None:
        self.provider.advance(self.t)
        alive = {i.provider_id: i for i in self.provider.alive() if i.ready_at <= self.t}
        nodes = {n["spec"]["providerID"]: n for n in self.kube.objects("nodes")}
        for pid, inst in alive.items():
            if pid in nodes:
                continue
            pool = self.config.pool(inst.pool)
            name = f"node-{pid.rsplit('/', 1)[-1]}"
            tmpl = pool.template_node(inst.zone)
            self.kube.put("nodes", {
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {**tmpl.labels, keys.LABEL_HOSTNAME: name}},
                "spec": {"providerID": pid, "taints": [{"key": t.key, "value": t.value, "effect": t.effect}
                                                       for t in pool.node_taints()]},
                "status": {"allocatable": format_resources(tmpl.allocatable),
                           "capacity": format_resources(pool.capacity()),
                           "conditions": [{"type": "Ready", "status": "True"}]}})
        for pid, node in nodes.items():
            if pid not in alive and not any(i.provider_id == pid for i in self.provider.alive()):
                self.kube.delete("nodes", f"/{node['metadata']['name']}")

    def step(self, seconds: float = 10.0) -> Plan | None:
        self.t += seconds
        self.kubelet()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            mine = {o["metadata"]["name"] for o in self.cache.nodes.items()}
            if self.cache.fresh and mine == {o["metadata"]["name"] for o in self.kube.objects("nodes")}:
                break
            time.sleep(0.02)
        return self.runtime.run_once()

    def run(self, seconds: float, every: float = 10.0) -> None:
        for _ in range(int(seconds // every)):
            self.step(every)

    def desired(self) -> int:
        return self.provider.observe(self.t)["gpu8-od"].desired

    def conditions(self, name: str) -> dict[str, tuple[str, str, str]]:
        obj = self.kube.get("provisioningrequests", f"ml/{name}")
        assert obj is not None
        return {c["type"]: (c["status"], c["reason"], c["message"]) for c in (obj.get("status") or {}).get(
            "conditions") or ()}

    def request(self, name: str, cls: str, counts: list[int], **parameters: str) -> None:
        """A ProvisioningRequest with one PodTemplate (8 GPUs a pod) per pod set, as Kueue makes them."""
        sets = []
        for i, count in enumerate(counts):
            template = f"{name}-ps{i}"
            self.kube.put("podtemplates", {
                "apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": template, "namespace": "ml"},
                "template": {"metadata": {"labels": {"job": name}}, "spec": {
                    "tolerations": GPU_TOLERATIONS,
                    "containers": [{"name": "train", "image": "trainer:1", "resources": {
                        "requests": {"cpu": "16", "memory": "64Gi", keys.RES_GPU: "8"}}}]}}})
            sets.append({"podTemplateRef": {"name": template}, "count": count})
        spec: dict[str, Any] = {"provisioningClassName": cls, "podSets": sets}
        if parameters:
            spec["parameters"] = parameters
        self.kube.put("provisioningrequests", {"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
                                               "metadata": {"name": name, "namespace": "ml"}, "spec": spec})


@pytest.fixture
def world(kube: FakeKube, tmp_path: Path) -> Iterator[SimWorld]:
    w = SimWorld(kube, parse_config(CONFIG, "test"), tmp_path)
    yield w
    w.cache.stop()


def test_check_capacity_is_provisioned_only_when_every_pod_set_fits(world: SimWorld) -> None:
    world.step()
    world.provider.set_desired("gpu8-od", 5)
    world.run(130)  # five nodes are up
    world.request("fits", provreq.CHECK_CAPACITY, [3, 2])  # 5 nodes' worth
    world.request("too-much", provreq.CHECK_CAPACITY, [1])  # the room is booked by the first
    world.step()
    assert world.conditions("fits")["Provisioned"][:2] == ("True", "CapacityIsFound")
    status, reason, message = world.conditions("too-much")["Provisioned"]
    assert (status, reason) == ("False", "CapacityIsNotFound") and "nodes that are up" in message
    assert world.desired() == 5  # a question: nothing was added


def test_atomic_request_books_its_nodes_until_the_booking_expires(world: SimWorld) -> None:
    world.request("train", provreq.ATOMIC_SCALE_UP, [4])
    world.step()
    assert world.desired() == 4  # all four nodes at once
    assert world.conditions("train")["Provisioned"][:2] == ("False", "Provisioning")
    assert world.conditions("train")["Accepted"][:2] == ("True", "Accepted")
    world.run(130)  # the nodes boot and register
    assert len(world.kube.objects("nodes")) == 4
    assert world.conditions("train")["Provisioned"][:2] == ("True", "CapacityIsProvisioned")
    # Booked: four empty nodes, long past the 60 s unneeded time, are kept for the request's pods.
    world.run(world.config.timings.booking_ttl - 60)
    assert world.desired() == 4 and len(world.kube.objects("nodes")) == 4
    assert "BookingExpired" not in world.conditions("train")
    # The booking expires without the pods coming: the request says so and the nodes go.
    world.run(120)
    assert world.conditions("train")["BookingExpired"][:2] == ("True", "CapacityReservationTimeExpired")
    world.run(300)
    assert world.desired() < 4


def test_atomic_request_a_pool_max_forbids_fails_with_the_reason(world: SimWorld) -> None:
    world.request("huge", provreq.ATOMIC_SCALE_UP, [4, 3])  # 7 nodes of a pool whose max is 6
    world.step()
    status, reason, message = world.conditions("huge")["Failed"]
    assert (status, reason) == ("True", "CapacityIsNotFound")
    assert "gpu8-od" in message and "max" in message
    world.run(30)
    assert world.desired() == 0  # none rather than six of seven


def test_an_unsupported_parameter_is_refused_with_a_reason(world: SimWorld) -> None:
    world.request("odd", provreq.ATOMIC_SCALE_UP, [1], MaxRunDurationSeconds="3600")
    world.step()
    conds = world.conditions("odd")
    assert conds["Accepted"][:2] == ("False", "Rejected") and conds["Failed"][:2] == ("True", "Rejected")
    assert "MaxRunDurationSeconds" in conds["Failed"][2]
    assert world.desired() == 0


def test_a_check_capacity_request_never_takes_the_nodes_coming_for_an_atomic_one(kube: FakeKube,
                                                                                 tmp_path: Path) -> None:
    """Issue 37: a check-capacity request waiting since before an atomic one for the same 4 x 8 GPUs was answered
    CapacityIsFound from the atomic request's nodes as they registered, and the atomic request then bought 4
    more: 8 nodes for 4 pods' worth. The nodes coming for a request are that request's until it is Provisioned."""
    config = parse_config({**CONFIG, "pools": [{**CONFIG["pools"][0], "max": 12}]}, "test")
    world = SimWorld(kube, config, tmp_path)
    try:
        world.step()
        world.request("check", provreq.CHECK_CAPACITY, [4])
        world.step()
        assert world.conditions("check")["Provisioned"][:2] == ("False", "CapacityIsNotFound")
        world.request("train", provreq.ATOMIC_SCALE_UP, [4])
        world.step()
        assert world.desired() == 4
        world.run(300)  # the four nodes boot and register, and stay the atomic request's
        assert world.desired() == 4 and len(world.kube.objects("nodes")) == 4  # (before: 8 nodes bought)
        assert world.conditions("train")["Provisioned"][:2] == ("True", "CapacityIsProvisioned")
        assert world.conditions("check")["Provisioned"][:2] == ("False", "CapacityIsNotFound")
    finally:
        world.cache.stop()


def test_a_request_that_expires_while_its_node_boots_says_so_once_and_lets_the_node_go(world: SimWorld) -> None:
    """Issue 37: an atomic request that expired while its node booted said Failed=True (Expired) and
    Provisioned=False (Provisioning) at once. Expired, it is no longer provisioning, and the node bought for it is
    removed like any idle node."""
    world.request("late", provreq.ATOMIC_SCALE_UP, [1], ValidUntilSeconds="60")
    world.step()
    assert world.desired() == 1
    assert world.conditions("late")["Provisioned"][:2] == ("False", "Provisioning")
    world.run(70)  # expired; the node (120 s to boot) is not up yet
    conds = world.conditions("late")
    assert conds["Failed"][:2] == ("True", "Expired")
    assert conds["Provisioned"][:2] == ("False", "Expired")
    world.run(120)  # the node registers: nobody's
    assert len(world.kube.objects("nodes")) == 1
    world.run(200)  # the 60 s unneeded time, the drain
    assert world.desired() == 0 and world.kube.objects("nodes") == []
