"""The PoolProvider contract, the same cases against every implementation: aws (boto3 against moto's
server), azure (the real SDK clients against the ARM fake) and sim (the simulator's cloud).

Each harness gives a spot pool with two instances and an empty on-demand pool, and the cloud-side
levers a case needs: a reclaim notice for an instance, a throttled API, waiting for asynchronous
operations to land."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
import responses

from scaler.core.config.settings import ScalerConfig, parse_config
from scaler.core.model.objects import Node
from scaler.core.planning.interruptions import node_of
from scaler.providers.aws import AwsProvider
from scaler.providers.azure import AzureProvider
from scaler.providers.base import NotFound, PoolProvider, ProviderError, Throttled
from scaler.providers.sim import SimProvider
from tests.fakes.arm import FakeArm, FakeCredential
from tests.fakes.aws import Faults, MotoAws

pytestmark = pytest.mark.integration
SUB, RG = "00000000-0000-0000-0000-000000000003", "burst-rg"
AWS = {
    "cluster": "burst", "cloud": "aws", "region": "us-east-1",
    "pools": [
        {"name": "spot", "capacity_type": "spot", "instance_types": ["g6.xlarge"], "zones": ["us-east-1a"],
         "max": 5, "fallback": "od"},
        {"name": "od", "instance_types": ["g6.xlarge"], "zones": ["us-east-1a", "us-east-1b"], "max": 3},
    ],
}
AZURE = {
    "cluster": "burst", "cloud": "azure", "region": "eastus",
    "pools": [
        {"name": "spot", "azure_kind": "vmss", "provider_ref": "gpu-vmss", "capacity_type": "spot",
         "vm_size": "Standard_NC4as_T4_v3", "zones": ["1"], "max": 5, "fallback": "od"},
        {"name": "od", "provider_ref": "gpuod", "vm_size": "Standard_NC4as_T4_v3", "zones": ["1"], "max": 3},
    ],
}


@dataclass
class Harness:
    provider: PoolProvider
    config: ScalerConfig
    unknown_instance: str  # a well-formed providerID of no instance of the pools
    foreign_instance: str  # an instance of a group that is no pool of ours
    notice: Callable[[str], None]  # the cloud announces it will take this instance back
    throttle: Callable[[], None]  # the next reads are throttled
    settle: Callable[[], None] = lambda: None  # asynchronous operations land
    redeliver: Callable[[], None] = lambda: None  # a notice read but not acknowledged is handed out again
    extra: list[object] = field(default_factory=list)


def _aws(aws: MotoAws) -> Harness:
    config = parse_config(AWS, "aws")
    aws.make_groups(config, desired={"spot": 2})
    queue = aws.queue()
    provider = AwsProvider(config, session=aws.session, endpoint_url=aws.endpoint, queue_url=queue)
    provider.notice_visibility = 1

    def notice(pid: str) -> None:
        aws.send_event(queue, "EC2 Spot Instance Interruption Warning", pid.rsplit("/", 1)[-1])

    def throttle() -> None:
        Faults(provider.asg, "DescribeAutoScalingGroups", "Throttling", 400, count=10)

    unknown = "aws:///us-east-1a/i-0000000000000dead"
    return Harness(provider, config, unknown, unknown, notice, throttle, redeliver=lambda: time.sleep(1.5))


def _azure(rsps: responses.RequestsMock) -> Harness:
    config = parse_config(AZURE, "azure")
    arm = FakeArm(rsps, SUB, RG, "burst")
    arm.add_scale_set("gpu-vmss", 2, "Standard_NC4as_T4_v3", spot=True)
    arm.add_agent_pool("gpuod", 0, "Standard_NC4as_T4_v3")
    provider = AzureProvider(config, subscription_id=SUB, resource_group=RG, credential=FakeCredential(),
                             polling_interval=0)

    def notice(pid: str) -> None:
        arm.evict("gpu-vmss", pid.rsplit("/", 1)[-1])
        provider.observe(0)  # Azure says it in the instance view: the next observation sees it

    def throttle() -> None:
        arm.throttle = 10

    def settle() -> None:
        deadline = time.monotonic() + 10
        while any(not p.done() for ps in provider._pollers.values() for _, p in ps) and time.monotonic() < deadline:
            time.sleep(0.02)

    sets = f"azure:///subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Compute/virtualMachineScaleSets"
    return Harness(provider, config, f"{sets}/gpu-vmss/virtualMachines/99", f"{sets}/other/virtualMachines/0",
                   notice, throttle, settle, extra=[arm])


def _sim() -> Harness:
    config = parse_config(AWS, "sim")
    provider = SimProvider(config)
    provider.set_desired("spot", 2)

    def notice(pid: str) -> None:
        provider.reclaim(pid, provider.now + 60)
        provider.advance(provider.now)

    def throttle() -> None:
        provider.fail_next["observe"] = [Throttled("sim: rate exceeded")]

    return Harness(provider, config, "aws:///us-east-1a/i-ffffffff", "aws:///us-east-1a/i-ffffffff", notice, throttle)


@pytest.fixture(params=["aws", "azure", "sim"])
def cloud(request: pytest.FixtureRequest) -> Iterator[Harness]:
    if request.param == "aws":
        yield _aws(request.getfixturevalue("aws"))
    elif request.param == "azure":
        with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
            yield _azure(rsps)
    else:
        yield _sim()


def test_the_pools_are_the_configured_ones(cloud: Harness) -> None:
    assert sorted(cloud.provider.observe(0)) == ["od", "spot"]


def test_observe_lists_every_instance_with_its_zone(cloud: Harness) -> None:
    obs = cloud.provider.observe(0)
    spot = obs["spot"]
    assert (spot.desired, spot.instances, len(spot.members)) == (2, 2, 2)
    assert (obs["od"].desired, obs["od"].instances, obs["od"].members) == (0, 0, [])
    for member in spot.members:
        assert member.zone in spot.pool.zones
        assert cloud.provider.pool_of(member.provider_id) == "spot"
    assert cloud.provider.pool_of(cloud.foreign_instance) is None


def test_set_desired_within_the_max_and_never_beyond(cloud: Harness) -> None:
    cloud.provider.observe(0)
    cloud.provider.set_desired("od", 2)
    cloud.settle()
    assert cloud.provider.observe(1)["od"].desired == 2
    with pytest.raises(ProviderError) as err:
        cloud.provider.set_desired("od", 4)  # max 3
    assert (err.value.kind, err.value.retryable) == ("invalid", False)
    cloud.settle()
    assert cloud.provider.observe(2)["od"].desired == 2


def test_delete_node_removes_exactly_that_instance(cloud: Harness) -> None:
    victim, survivor = cloud.provider.observe(0)["spot"].members
    cloud.provider.delete_node("spot", victim.provider_id)
    cloud.settle()
    after = cloud.provider.observe(1)["spot"]
    assert (after.desired, after.instances) == (1, 1)
    assert [m.provider_id for m in after.members] == [survivor.provider_id]
    with pytest.raises(NotFound) as err:
        cloud.provider.delete_node("spot", cloud.unknown_instance)
    assert not err.value.retryable


def test_an_interruption_notice_names_the_node_and_goes_once_acknowledged(cloud: Harness) -> None:
    victim = cloud.provider.observe(0)["spot"].members[0]
    cloud.notice(victim.provider_id)
    [notice] = cloud.provider.interruptions()
    assert notice.kind == "spot-interruption"
    node = Node("n1", provider_id=victim.provider_id)
    assert node_of(notice, {victim.provider_id.lower(): node, victim.provider_id.lower().rsplit("/", 1)[-1]: node})
    cloud.redeliver()
    again = cloud.provider.interruptions()  # not acknowledged: handed out again
    assert [n.instance for n in again] == [notice.instance]
    cloud.provider.acknowledge(again)
    cloud.redeliver()
    assert cloud.provider.interruptions() == []


def test_a_throttled_api_is_a_typed_retryable_error(cloud: Harness) -> None:
    cloud.throttle()
    with pytest.raises(Throttled) as err:
        cloud.provider.observe(0)
    assert err.value.kind == "throttled" and err.value.retryable
