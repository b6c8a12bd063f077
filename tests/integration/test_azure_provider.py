"""The Azure provider through the real azure-mgmt SDK clients against a fake of the ARM endpoints."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import responses

from scaler.core.config.settings import ScalerConfig, parse_config
from scaler.providers.azure import AzureProvider
from scaler.providers.base import ProviderError
from tests.fakes.arm import FakeArm, FakeCredential
from tests.fakes.world import Clock

pytestmark = pytest.mark.integration
SUB, RG, CLUSTER = "00000000-0000-0000-0000-000000000001", "burst-rg", "burst"

CONFIG = {
    "cluster": CLUSTER, "cloud": "azure", "region": "eastus",
    "pools": [
        {"name": "gpu-spot-1", "provider_ref": "gpuspot1", "capacity_type": "spot",
         "vm_size": "Standard_NC4as_T4_v3", "zones": ["1"], "max": 4, "fallback": "gpu-od"},
        {"name": "gpu-od", "vm_size": "Standard_NC4as_T4_v3", "zones": ["1", "2"], "max": 3},
        {"name": "gpu-vmss", "azure_kind": "vmss", "provider_ref": "gpu-vmss", "capacity_type": "spot",
         "vm_size": "Standard_NC4as_T4_v3", "zones": ["1"], "max": 5, "fallback": "gpu-od"},
    ],
}


@pytest.fixture
def config() -> ScalerConfig:
    return parse_config(CONFIG, "test")


@pytest.fixture
def arm() -> Iterator[FakeArm]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        fake = FakeArm(rsps, SUB, RG, CLUSTER)
        fake.add_agent_pool("gpuspot1", 1, "Standard_NC4as_T4_v3", spot=True)
        fake.add_agent_pool("gpuod", 0, "Standard_NC4as_T4_v3")
        fake.add_scale_set("gpu-vmss", 2, "Standard_NC4as_T4_v3", spot=True)
        yield fake


@pytest.fixture
def provider(config: ScalerConfig, arm: FakeArm) -> AzureProvider:
    return AzureProvider(config, subscription_id=SUB, resource_group=RG, credential=FakeCredential(),
                         polling_interval=0)


def wait_for(provider: AzureProvider, pool: str) -> None:
    deadline = time.monotonic() + 10
    while any(not p.done() for _, p in provider._pollers.get(pool, [])) and time.monotonic() < deadline:
        time.sleep(0.02)


def test_observe_agent_pools_and_scale_sets(provider: AzureProvider, arm: FakeArm) -> None:
    obs = provider.observe(0)
    assert {k: (o.desired, o.instances) for k, o in obs.items()} == \
        {"gpu-spot-1": (1, 1), "gpu-od": (0, 0), "gpu-vmss": (2, 2)}
    node = "azure://" + arm.vmss_vm_id(arm.aks_vmss("gpuspot1"), "0")
    assert provider.pool_of(node) == "gpu-spot-1"
    assert provider.pool_of(node.replace("/resourceGroups/", "/resourcegroups/").lower()) == "gpu-spot-1"
    assert provider.pool_of("azure://" + arm.vmss_vm_id("gpu-vmss", "1", RG)) == "gpu-vmss"
    assert provider.pool_of("aws:///us-east-1a/i-0aa") is None


def test_set_count_runs_the_long_running_operation(provider: AzureProvider, arm: FakeArm) -> None:
    provider.observe(0)
    provider.set_desired("gpu-od", 2)
    provider.set_desired("gpu-vmss", 3)
    wait_for(provider, "gpu-od")
    wait_for(provider, "gpu-vmss")
    obs = provider.observe(1)
    assert (obs["gpu-od"].desired, obs["gpu-od"].instances, obs["gpu-od"].failures) == (2, 2, [])
    assert (obs["gpu-vmss"].desired, obs["gpu-vmss"].instances) == (3, 3)
    assert ("PUT agentPool", "gpuod count=2") in arm.calls and ("PATCH vmss", "gpu-vmss capacity=3") in arm.calls
    with pytest.raises(ProviderError, match="beyond its max 3"):
        provider.set_desired("gpu-od", 4)


def test_allocation_failures_become_launch_failures(provider: AzureProvider, arm: FakeArm) -> None:
    provider.observe(0)
    arm.fail_next[("gpuspot1", "scale")] = (
        "OverconstrainedAllocationRequest", "Allocation failed. VM(s) with the following constraints cannot be "
        "allocated, because the condition is too restrictive. Please remove some constraints and try again.")
    arm.fail_next[("gpu-vmss", "scale")] = (
        "ZonalAllocationFailed", "Allocation failed. We do not have sufficient capacity for the requested VM size "
        "in this zone. Read more about improving likelihood of allocation success at http://aka.ms/allocation-guidance")
    provider.set_desired("gpu-spot-1", 3)
    provider.set_desired("gpu-vmss", 3)
    wait_for(provider, "gpu-spot-1")
    wait_for(provider, "gpu-vmss")
    obs = provider.observe(5)
    [aks] = obs["gpu-spot-1"].failures
    assert (aks.kind, aks.reason, aks.zone) == ("capacity", "OverconstrainedAllocationRequest", None)
    [vmss] = obs["gpu-vmss"].failures  # the instance's failure (with its zone), not the operation's again
    assert (vmss.kind, vmss.reason, vmss.zone) == ("capacity", "ZonalAllocationFailed", "1")
    assert "sufficient capacity" in vmss.message
    assert obs["gpu-vmss"].instances == 2  # the failed instance does not count as capacity
    assert provider.observe(6)["gpu-vmss"].failures == []  # reported once


QUOTA = ("Operation could not be completed as it results in exceeding approved standardNCASv3_T4Family Cores quota. "
         "Additional details - Deployment Model: Resource Manager, Location: eastus, Current Limit: 8, "
         "Current Usage: 8, Additional Required: 4, (Minimum) New Limit Required: 12. Submit a request "
         "for Quota increase at https://aka.ms/ProdportalCRP/#blade/Microsoft_Azure_Capacity/UsageAndQuota.ReactView "
         "by specifying parameters listed in the 'Details' section for deployment to succeed.")
REGION_FULL = ("Allocation failed. We do not have sufficient capacity for the requested VM size in this region. Read "
               "more about improving likelihood of allocation success at http://aka.ms/allocation-guidance")


@pytest.mark.parametrize(("code", "message", "kind"), [
    ("SKUFamilyQuotaExceeded", QUOTA, "quota"), ("AllocationFailed", REGION_FULL, "capacity")])
def test_an_agent_pools_failed_scale_is_read_in_the_pass_that_sees_it(provider: AzureProvider, arm: FakeArm,
                                                                      code: str, message: str, kind: str) -> None:
    provider.observe(0)
    arm.fail_next[("gpuspot1", "scale")] = (code, message)
    provider.set_desired("gpu-spot-1", 3)
    wait_for(provider, "gpu-spot-1")
    [failure] = provider.observe(5)["gpu-spot-1"].failures
    assert (failure.kind, failure.reason, failure.zone, failure.message) == (kind, code, None, message)


def test_remove_one_node(provider: AzureProvider, arm: FakeArm) -> None:
    provider.observe(0)
    node = "azure://" + arm.vmss_vm_id(arm.aks_vmss("gpuspot1"), "0")
    provider.delete_node("gpu-spot-1", node)
    assert ("POST deleteMachines", "gpuspot1 ['aks-gpuspot1-12345678-vmss000000']") in arm.calls
    vm = "azure://" + arm.vmss_vm_id("gpu-vmss", "1", RG)
    with pytest.raises(ProviderError, match="not an instance of pool 'gpu-od'"):
        provider.delete_node("gpu-od", vm)
    provider.delete_node("gpu-vmss", vm)
    wait_for(provider, "gpu-vmss")
    assert ("POST vmss delete", "gpu-vmss ['1']") in arm.calls
    obs = provider.observe(1)
    assert (obs["gpu-spot-1"].desired, obs["gpu-vmss"].desired, obs["gpu-vmss"].instances) == (0, 1, 1)


def test_evicted_spot_instances_are_reported(provider: AzureProvider, arm: FakeArm) -> None:
    provider.observe(0)
    arm.evict("gpu-vmss", "0")
    obs = provider.observe(1)
    assert obs["gpu-vmss"].instances == 1
    [notice] = provider.interruptions()
    assert notice.kind == "spot-interruption"
    assert notice.instance == "azure://" + arm.vmss_vm_id("gpu-vmss", "0", RG).lower()


def test_throttling_and_server_errors(provider: AzureProvider, arm: FakeArm) -> None:
    arm.throttle = 2
    assert provider.observe(0)["gpu-od"].desired == 0  # azure-core's retry policy honours Retry-After
    arm.throttle = 1000
    with pytest.raises(ProviderError) as err:
        provider.observe(0)
    assert (err.value.kind, err.value.retryable) == ("throttled", True)
    arm.throttle, arm.server_errors = 0, 1000
    with pytest.raises(ProviderError) as err:
        provider.observe(0)
    assert (err.value.kind, err.value.retryable) == ("server", True)
    arm.server_errors = 0
    arm.agent_pools.pop("gpuod")
    with pytest.raises(ProviderError) as err:
        provider.observe(0)
    assert err.value.kind == "not-found"


def test_compute_quotas_are_read_as_caps_at_most_every_five_minutes(config: ScalerConfig, arm: FakeArm) -> None:
    clock = Clock()
    provider = AzureProvider(config, subscription_id=SUB, resource_group=RG, credential=FakeCredential(),
                             polling_interval=0, clock=clock)
    arm.usages["lowPriorityCores"] = (12, 16)
    obs = provider.observe(clock.t)
    # On-demand VMs count against their size's family; Spot VMs against the region's low-priority vCPUs.
    assert {n: (o.quota.name, o.quota.headroom) for n, o in obs.items() if o.quota} == {
        "gpu-od": ("standardNCASv3_T4Family", 16), "gpu-spot-1": ("lowPriorityCores", 4),
        "gpu-vmss": ("lowPriorityCores", 4)}
    arm.usages["standardNCASv3_T4Family"] = (24, 24)
    clock.t += 299
    assert provider.observe(clock.t)["gpu-od"].quota.headroom == 16  # type: ignore[union-attr]
    assert arm.usage_reads == 1
    clock.t += 1
    assert provider.observe(clock.t)["gpu-od"].quota.headroom == 0  # type: ignore[union-attr]
    assert arm.usage_reads == 2
    arm.usages.pop("standardNCASv3_T4Family")  # a family the usage list does not name: no cap
    clock.t += 300
    assert provider.observe(clock.t)["gpu-od"].quota is None
