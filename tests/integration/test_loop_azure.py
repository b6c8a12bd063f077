"""The loop on Azure: the real SDK clients against the fake ARM, the kube adapter against the fake API
server. A pending pod grows an AKS agent pool; an evicted Spot instance of a scale set is drained,
replaced in the fallback pool and deleted.

On the fake API server, not the real control plane: the test's clock jumps minutes at a step (see
tests/integration/conftest.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import responses

from scaler.core.config.settings import ScalerConfig, parse_config
from scaler.core.model.resources import format_resources
from scaler.kube.actions import KubeActions, Leader
from scaler.kube.cache import ClusterCache
from scaler.kube.client import api_client
from scaler.loop import Runtime
from scaler.providers.azure import AzureProvider
from tests.fakes.arm import FakeArm, FakeCredential
from tests.fakes.kubeapi import FakeKube, pod
from tests.fakes.world import Clock

pytestmark = pytest.mark.integration
SUB, RG, CLUSTER = "00000000-0000-0000-0000-000000000002", "burst-rg", "burst"
CONFIG = {
    "cluster": CLUSTER, "cloud": "azure", "region": "eastus",
    "pools": [
        {"name": "gpu-vmss", "azure_kind": "vmss", "provider_ref": "gpu-vmss", "capacity_type": "spot",
         "vm_size": "Standard_NC4as_T4_v3", "zones": ["1"], "max": 5, "fallback": "gpu-od"},
        {"name": "gpu-od", "provider_ref": "gpuod", "vm_size": "Standard_NC4as_T4_v3", "zones": ["1"], "max": 3},
    ],
}


@pytest.fixture
def config() -> ScalerConfig:
    return parse_config(CONFIG, "test")


@pytest.fixture
def arm() -> Iterator[FakeArm]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        fake = FakeArm(rsps, SUB, RG, CLUSTER)
        fake.add_scale_set("gpu-vmss", 2, "Standard_NC4as_T4_v3", spot=True)
        fake.add_agent_pool("gpuod", 0, "Standard_NC4as_T4_v3")
        yield fake


def add_node(kube: FakeKube, config: ScalerConfig, pool_name: str, name: str, provider_id: str) -> None:
    pool = config.pool(pool_name)
    tmpl = pool.template_node("1")
    kube.put("nodes", {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {**tmpl.labels, "kubernetes.io/hostname": name}},
        "spec": {"providerID": provider_id,
                 "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in pool.node_taints()]},
        "status": {"allocatable": format_resources(tmpl.allocatable),
                   "conditions": [{"type": "Ready", "status": "True"}]}})


def settle(cache: ClusterCache, kube: FakeKube) -> None:
    """Let the watch deliver what the fake API server holds."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        cached = {o["metadata"]["resourceVersion"] for o in cache.pods.items() + cache.nodes.items()}
        stored = {o["metadata"]["resourceVersion"] for o in kube.objects("pods") + kube.objects("nodes")}
        if cached == stored:
            return
        time.sleep(0.02)


def test_azure_scale_up_and_spot_eviction(arm: FakeArm, kube: FakeKube, config: ScalerConfig,
                                          tmp_path: Path) -> None:
    api = api_client(str(kube.kubeconfig(tmp_path / "kc")))
    cache = ClusterCache(api, watch_timeout=5, backoff_initial=0.05, backoff_max=0.2)
    cache.start()
    try:
        assert cache.wait_synced(5)
        clock = Clock()
        provider = AzureProvider(config, subscription_id=SUB, resource_group=RG, credential=FakeCredential(),
                                 polling_interval=0, clock=clock)
        leader = Leader(api, "gpuburst-system", "r")
        actions = KubeActions(api, "gpuburst-system", nodes=cache.raw_node, before_change=leader.check)
        runtime = Runtime(config, provider, cache, actions, leader=leader, clock=clock)
        spot_nodes = []
        for i in ("0", "1"):  # the scale set's two Spot instances are nodes, each running a job
            name = f"gpu-vmss00000{i}"
            add_node(kube, config, "gpu-vmss", name, "azure://" + arm.vmss_vm_id("gpu-vmss", i, RG))
            kube.put("pods", pod(f"job-{i}", node_name=name, gpus=1, cpu="1"))
            spot_nodes.append(name)
        kube.recreate_evicted = True

        def step(seconds: float = 10) -> None:
            clock.t += seconds
            settle(cache, kube)
            runtime.run_once()

        step()
        assert arm.scale_sets["gpu-vmss"]["sku"]["capacity"] == 2
        arm.evict("gpu-vmss", "0")  # Azure reclaims one Spot VM (eviction policy Deallocate)
        step()
        node = kube.get("nodes", f"/{spot_nodes[0]}")
        assert node is not None and node["spec"]["unschedulable"] is True
        assert ("default/job-0", 201) in kube.evictions
        assert ("PUT agentPool", "gpuod count=1") in arm.calls  # the replacement, in the fallback pool
        step()
        assert ("POST vmss delete", "gpu-vmss ['0']") in arm.calls  # the evicted VM is deleted
        assert arm.scale_sets["gpu-vmss"]["sku"]["capacity"] == 1
        names = {p["metadata"]["name"] for p in kube.objects("pods")}
        assert names == {"job-1", "job-0-r"}  # no pod lost: the evicted job waits for the replacement
        step()
        assert arm.agent_pools["gpuod"]["properties"]["count"] == 1  # not asked twice
    finally:
        cache.stop()


QUOTA = ("Operation could not be completed as it results in exceeding approved standardNCASv3_T4Family Cores quota. "
         "Additional details - Deployment Model: Resource Manager, Location: eastus, Current Limit: 8, "
         "Current Usage: 8, Additional Required: 4, (Minimum) New Limit Required: 12.")
FAILED_SCALES = {
    "SKUFamilyQuotaExceeded": QUOTA,
    "AllocationFailed": "Allocation failed. We do not have sufficient capacity for the requested VM size in this "
    "region. Read more about improving likelihood of allocation success at http://aka.ms/allocation-guidance",
    "OverconstrainedAllocationRequest": "Allocation failed. VM(s) with the following constraints cannot be "
    "allocated, because the condition is too restrictive. Please remove some constraints and try again.",
}
LADDER = {**CONFIG, "pools": [
    {"name": "gpu-spot", "provider_ref": "gpuspot", "capacity_type": "spot", "vm_size": "Standard_NC4as_T4_v3",
     "zones": ["1"], "max": 3, "fallback": "gpu-od"},
    {"name": "gpu-od", "provider_ref": "gpuod", "vm_size": "Standard_NC4as_T4_v3", "zones": ["1"], "max": 3}]}
SPOT_GPU = [{"key": "kubernetes.azure.com/scalesetpriority", "operator": "Equal", "value": "spot",
             "effect": "NoSchedule"}, {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


@pytest.fixture
def ladder(arm: FakeArm, kube: FakeKube, tmp_path: Path) -> Iterator[tuple[Runtime, AzureProvider, Clock]]:
    """A Spot agent pool falling back to a regular one, a scaler on them and one pending 1-GPU pod."""
    config = parse_config(LADDER, "test")
    arm.add_agent_pool("gpuspot", 0, "Standard_NC4as_T4_v3", spot=True)
    api = api_client(str(kube.kubeconfig(tmp_path / "kc")))
    cache = ClusterCache(api, watch_timeout=5, backoff_initial=0.05, backoff_max=0.2)
    cache.start()
    try:
        assert cache.wait_synced(5)
        clock = Clock()
        provider = AzureProvider(config, subscription_id=SUB, resource_group=RG, credential=FakeCredential(),
                                 polling_interval=0, clock=clock)
        leader = Leader(api, "gpuburst-system", "r")
        actions = KubeActions(api, "gpuburst-system", nodes=cache.raw_node, before_change=leader.check)
        kube.put("pods", pod("job-0", gpus=1, cpu="1", pending=True, tolerations=SPOT_GPU))
        settle(cache, kube)
        yield Runtime(config, provider, cache, actions, leader=leader, clock=clock), provider, clock
    finally:
        cache.stop()


@pytest.mark.parametrize("code", sorted(FAILED_SCALES))
def test_an_agent_pools_failed_scale_sends_the_pod_to_the_next_rung_in_the_pass_that_reads_it(
        arm: FakeArm, ladder: tuple[Runtime, AzureProvider, Clock], code: str) -> None:
    runtime, provider, clock = ladder
    arm.fail_next[("gpuspot", "scale")] = (code, FAILED_SCALES[code])
    assert runtime.run_once() is not None
    assert ("PUT agentPool", "gpuspot count=1") in arm.calls
    deadline = time.monotonic() + 10  # the operation fails in the background, as ARM's would
    while any(not p.done() for _, p in provider._pollers.get("gpu-spot", [])) and time.monotonic() < deadline:
        time.sleep(0.02)
    clock.t += 10
    plan = runtime.run_once()  # the pass that reads the failure asks the fallback: no provision timeout
    assert plan is not None
    assert {u.pool: u.count for u in plan.scale_ups} == {"gpu-od": 1}
    assert ("PUT agentPool", "gpuod count=1") in arm.calls
    assert ("gpu-spot", "1") in runtime.state.unavailable


def test_an_exhausted_spot_quota_sends_the_pod_to_the_next_rung_in_the_first_pass(
        arm: FakeArm, kube: FakeKube, ladder: tuple[Runtime, AzureProvider, Clock]) -> None:
    runtime, _, _ = ladder
    arm.usages["lowPriorityCores"] = (100, 100)  # Spot's regional vCPUs all used
    plan = runtime.run_once()
    assert plan is not None
    assert {u.pool: u.count for u in plan.scale_ups} == {"gpu-od": 1}  # never asked Spot for what it refuses
    assert not [c for c in arm.calls if c[0] == "PUT agentPool" and c[1].startswith("gpuspot")]
    assert "lowPriorityCores" in plan.quotas
    events = [e for e in kube.objects("events") if e["reason"] == "QuotaExhausted"]
    assert events and "lowPriorityCores" in events[0]["message"]
    sample = runtime.metrics.registry.get_sample_value
    assert sample("gpuburst_quota_exhausted", {"quota": "lowPriorityCores"}) == 1
    assert sample("gpuburst_quota_headroom_vcpus", {"quota": "standardNCASv3_T4Family"}) == 16
