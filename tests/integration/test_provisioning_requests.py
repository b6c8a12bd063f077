"""`SimWorld`: the scaler's loop on the sim provider against the fake API server, for the tests that feed
it what a real API server would refuse (a malformed ProvisioningRequest, a CapacityBuffer the CRD's schema
would not admit) or a fault it cannot be made to show. The ProvisioningRequest scenarios themselves run
on the real control plane: tests/controlplane/test_provisioning_requests.py."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scaler.core.config.settings import ScalerConfig, parse_config
from scaler.core.model import keys
from scaler.core.model.resources import format_resources
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
