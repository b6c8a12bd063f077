"""DRA through the live adapter (issue 24): the watch cache reads DeviceClasses, ResourceClaims,
ResourceClaimTemplates and ResourceSlices (resource.k8s.io/v1) from the fake API server, and the real
loop scales up the DRA pool for a pending pod whose only GPU request is a claim. An API server without
resource.k8s.io/v1 is an empty DRA part, not a failing watch; an object that does not convert is skipped
and named.

On the fake API server, not the real control plane: the test's clock jumps minutes at a step (see
tests/integration/conftest.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scaler.core.config.settings import ScalerConfig, parse_config
from tests.fakes.aws import MotoAws
from tests.fakes.kubeapi import DRA, FakeKube, pod
from tests.fakes.world import World

pytestmark = pytest.mark.integration

CONFIG = {
    "cluster": "burst", "cloud": "aws", "region": "us-east-1",
    "timings": {"scan_interval": 10, "unneeded_time": 60, "provision_timeout": 300},
    "pools": [
        {"name": "cpu", "role": "general", "instance_types": ["m6i.xlarge"], "zones": ["us-east-1a"], "max": 10},
        {"name": "l4-dra", "instance_types": ["g6.xlarge"], "zones": ["us-east-1a"], "max": 10,
         "gpu_allocation": "dra"},
    ],
}
GPU_CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"},
             "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com' && "
                                             "device.attributes['gpu.nvidia.com'].type == 'gpu'"}}]}}
ONE_GPU = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
           "metadata": {"name": "one-gpu", "namespace": "default"},
           "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
               "deviceClassName": "gpu.nvidia.com"}}]}}}}


def dra_pod(name: str) -> dict[str, Any]:
    obj = pod(name, cpu="1", pending=True)
    obj["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    obj["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return obj


@pytest.fixture
def config() -> ScalerConfig:
    return parse_config(CONFIG, "test")


def _world(aws: MotoAws, kube: FakeKube, config: ScalerConfig, tmp_path: Path) -> World:
    return World(aws, kube, config, tmp_path)


@pytest.fixture
def world(aws: MotoAws, kube: FakeKube, config: ScalerConfig, tmp_path: Path) -> Iterator[World]:
    w = _world(aws, kube, config, tmp_path)
    yield w
    w.close()


def test_a_pending_pod_with_a_claim_scales_up_the_dra_pool(world: World, kube: FakeKube) -> None:
    kube.put("deviceclasses", GPU_CLASS)
    kube.put("resourceclaimtemplates", ONE_GPU)
    kube.put("pods", dra_pod("train-0"))
    plan = world.step()
    assert plan is not None
    assert [(u.pool, u.new_desired, u.pods) for u in plan.scale_ups] == [("l4-dra", 1, ("default/train-0",))]
    assert world.desired("l4-dra") == 1 and world.desired("cpu") == 0
    events = {(e["involvedObject"]["name"], e["reason"]) for e in kube.objects("events")}
    assert ("train-0", "TriggeredScaleUp") in events


def test_without_the_class_the_pod_gets_no_node_and_says_why(world: World, kube: FakeKube) -> None:
    kube.put("resourceclaimtemplates", ONE_GPU)
    broken = {**GPU_CLASS, "metadata": {"name": "gpu.nvidia.com"}, "spec": {"selectors": "x"}}
    kube.put("deviceclasses", broken)  # does not convert: skipped (a Warning Event), so the class is missing
    kube.put("pods", dra_pod("train-0"))
    plan = world.step()
    assert plan is not None and plan.scale_ups == []
    [stuck] = [e for e in kube.objects("events") if e["involvedObject"]["name"] == "train-0"]
    assert stuck["reason"] == "NotTriggerScaleUp"
    assert "DeviceClass gpu.nvidia.com not found" in stuck["message"]
    [skipped] = [e for e in kube.objects("events") if e["reason"] == "FailedToRead"]
    assert (skipped["involvedObject"]["kind"], skipped["involvedObject"]["name"]) == ("DeviceClass", "gpu.nvidia.com")
    assert "spec.selectors: expected list" in skipped["message"]
    assert world.cache.stale() == []


def test_a_selector_that_does_not_compile_is_a_warning_and_the_pods_reason(world: World, kube: FakeKube) -> None:
    kube.put("deviceclasses", GPU_CLASS)
    exact = {**ONE_GPU["spec"]["spec"]["devices"]["requests"][0]["exactly"],
             "selectors": [{"cel": {"expression": "device.driver =="}}]}
    kube.put("resourceclaimtemplates", {**ONE_GPU, "spec": {"spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": exact}]}}}})
    kube.put("pods", dra_pod("train-0"))
    plan = world.step()  # the pass runs: the broken template is left out, the pod says it is missing
    assert plan is not None and plan.scale_ups == []
    [stuck] = [e for e in kube.objects("events") if e["involvedObject"]["name"] == "train-0"]
    assert "ResourceClaimTemplate default/one-gpu not found" in stuck["message"]
    [skipped] = [e for e in kube.objects("events") if e["reason"] == "FailedToRead"]
    assert skipped["type"] == "Warning"
    assert (skipped["involvedObject"]["kind"], skipped["involvedObject"]["name"]) == ("ResourceClaimTemplate",
                                                                                       "one-gpu")
    assert "CEL compile error" in skipped["message"] and "\n" not in skipped["message"]


def test_an_api_server_without_resource_k8s_io_v1_is_an_empty_dra_part(
        aws: MotoAws, kube: FakeKube, config: ScalerConfig, tmp_path: Path) -> None:
    kube.absent = set(DRA)  # Kubernetes before 1.34 (or DRA disabled): 404 on every DRA list
    w = _world(aws, kube, config, tmp_path)  # World waits for every watch to sync
    try:
        assert w.cache.stale() == [] and w.cache.fresh
        kube.put("pods", pod("web-0", cpu="1", pending=True, tolerations=[]))
        plan = w.step()
        assert plan is not None and [u.pool for u in plan.scale_ups] == ["cpu"]
        time.sleep(0.1)
        assert all(inf.errors == 0 for inf in w.cache.informers)
    finally:
        w.close()
