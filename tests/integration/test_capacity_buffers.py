"""CapacityBuffers the real API server would refuse at admission (a negative or non-integer replicas: the CRD's
schema), on the fake API server, which stores them: each is skipped or answered alone, with a Warning Event, and
the pass goes on. Everything a real server accepts is tested on the real control plane
(tests/controlplane/test_capacity_buffers.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scaler.core.config.settings import parse_config
from scaler.core.model import keys
from tests.fakes.kubeapi import FakeKube
from tests.integration.test_provisioning_requests import CONFIG, GPU_TOLERATIONS, SimWorld

pytestmark = pytest.mark.integration


@pytest.fixture
def world(kube: FakeKube, tmp_path: Path) -> Iterator[SimWorld]:
    w = SimWorld(kube, parse_config(CONFIG, "test"), tmp_path)
    yield w
    w.cache.stop()


def template(kube: FakeKube, name: str = "gpu8") -> None:
    kube.put("podtemplates", {
        "apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": name, "namespace": "ml"},
        "template": {"spec": {"tolerations": GPU_TOLERATIONS, "containers": [{"name": "train", "image": "t:1",
                     "resources": {"requests": {"cpu": "16", "memory": "64Gi", keys.RES_GPU: "8"}}}]}}})


def buffer(kube: FakeKube, name: str, spec: dict[str, Any]) -> None:
    kube.put("capacitybuffers", {"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
                                 "metadata": {"name": name, "namespace": "ml"}, "spec": spec})


def status(kube: FakeKube, name: str) -> dict[str, Any]:
    obj = kube.get("capacitybuffers", f"ml/{name}")
    assert obj is not None
    return obj.get("status") or {}


def conditions(kube: FakeKube, name: str) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status(kube, name).get("conditions") or ()}


def settle(world: SimWorld, kind: str, count: int) -> None:
    """Let the watch catch up with what the test just stored."""
    deadline = time.monotonic() + 5
    while len(getattr(world.cache, kind).items()) != count and time.monotonic() < deadline:
        time.sleep(0.02)


def test_a_buffer_that_cannot_be_served_gets_a_warning_and_the_pass_goes_on(world: SimWorld) -> None:
    template(world.kube)
    buffer(world.kube, "missing", {"podTemplateRef": {"name": "nope"}, "replicas": 1})
    buffer(world.kube, "negative", {"podTemplateRef": {"name": "gpu8"}, "replicas": -1})
    buffer(world.kube, "garbled", {"podTemplateRef": {"name": "gpu8"}, "replicas": "two"})
    buffer(world.kube, "good", {"podTemplateRef": {"name": "gpu8"}, "replicas": 1})
    settle(world, "buffers", 4)
    settle(world, "pod_templates", 1)
    assert world.step() is not None  # the pass ran
    assert world.desired() == 1  # the good buffer's room only
    for name, message in (("missing", "PodTemplate nope not found in namespace ml"),
                          ("negative", "spec.replicas: -1 is negative (at least 0)")):
        assert conditions(world.kube, name) == {"ReadyForProvisioning": ("False", "error"),
                                                "Provisioning": ("False", "NotReadyForProvisioning")}
        ready = next(c for c in status(world.kube, name)["conditions"] if c["type"] == "ReadyForProvisioning")
        assert ready["message"] == message
    warnings = {(e["involvedObject"]["name"], e["reason"]) for e in world.kube.objects("events")
                if e["type"] == "Warning" and e["involvedObject"]["kind"] == "CapacityBuffer"}
    assert warnings == {("missing", "BufferNotReady"), ("negative", "BufferNotReady"), ("garbled", "FailedToRead")}
    world.step()  # the same errors again: no new Event (the status says it)
    assert sum(1 for e in world.kube.objects("events") if e["reason"] == "BufferNotReady") == 2
    assert status(world.kube, "garbled") == {}  # not read, so not answered: its Event says why
