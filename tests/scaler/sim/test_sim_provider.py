"""The sim provider behaves like a cloud's node group seen through the PoolProvider interface."""

from __future__ import annotations

import pytest

from scaler.core.config.settings import ScalerConfig
from scaler.providers.base import PoolProvider, ProviderError
from scaler.providers.sim import Outage, SimProvider


def test_is_a_pool_provider(small_config: ScalerConfig) -> None:
    provider: PoolProvider = SimProvider(small_config)
    assert set(provider.observe(0)) == {p.name for p in small_config.pools}


def test_instances_become_ready_after_the_boot_delay(small_config: ScalerConfig) -> None:
    provider = SimProvider(small_config)
    provider.advance(100)
    provider.set_desired("gpu1-spot-a", 2)
    obs = provider.observe(101)["gpu1-spot-a"]
    assert (obs.desired, obs.instances, obs.failures) == (2, 2, [])
    assert provider.advance(100 + small_config.timings.gpu_boot - 1).ready == []
    ready = provider.advance(100 + small_config.timings.gpu_boot).ready
    assert len(ready) == 2
    assert all(i.zone == "us-east-1a" and i.spot for i in ready)
    assert provider.pool_of(ready[0].provider_id) == "gpu1-spot-a"


def test_never_beyond_max(small_config: ScalerConfig) -> None:
    provider = SimProvider(small_config)
    with pytest.raises(ProviderError) as err:
        provider.set_desired("gpu8-spot-a", 11)
    assert err.value.kind == "invalid"
    assert provider.observe(0)["gpu8-spot-a"].instances == 0


def test_spot_outage_returns_a_capacity_launch_failure(small_config: ScalerConfig) -> None:
    provider = SimProvider(small_config, outages=[Outage("us-east-1a", 50, 150)])
    provider.advance(60)
    provider.set_desired("gpu1-spot-a", 1)
    obs = provider.observe(70)["gpu1-spot-a"]
    assert obs.instances == 0 and obs.desired == 1
    assert len(obs.failures) == 1
    failure = obs.failures[0]
    assert (failure.zone, failure.kind, failure.reason, failure.at) == (
        "us-east-1a", "capacity", "InsufficientInstanceCapacity", 60)
    assert provider.observe(71)["gpu1-spot-a"].failures == []  # reported once
    # On-demand in the same zone is not affected.
    provider.set_desired("gpu1-od", 1)
    assert provider.observe(72)["gpu1-od"].instances == 1
    # The group keeps retrying; once the window closes the instance launches.
    provider.advance(200)
    assert provider.observe(200)["gpu1-spot-a"].instances == 1


def test_delete_node_terminates_that_instance_and_decrements(small_config: ScalerConfig) -> None:
    provider = SimProvider(small_config)
    provider.set_desired("gpu1-spot-b", 3)
    ready = provider.advance(1000).ready
    victim = ready[1]
    provider.delete_node("gpu1-spot-b", victim.provider_id)
    obs = provider.observe(1001)["gpu1-spot-b"]
    assert (obs.desired, obs.instances) == (2, 2)
    assert victim.ended_at == 1000 and victim.end_reason == "deleted"
    assert victim.life(5000) == 1000  # paid from the request, boot included, to the termination
    with pytest.raises(ProviderError, match="no instance"):
        provider.delete_node("gpu1-spot-b", victim.provider_id)


def test_lower_desired_terminates_booting_instances_first(small_config: ScalerConfig) -> None:
    provider = SimProvider(small_config)
    provider.set_desired("gpu1-od", 1)
    provider.advance(500)
    provider.set_desired("gpu1-od", 3)
    provider.set_desired("gpu1-od", 1)
    alive = [i for i in provider.alive() if i.pool == "gpu1-od"]
    assert len(alive) == 1 and alive[0].requested_at == 0


def test_spot_interruptions_at_the_given_rate_are_reproducible(small_config: ScalerConfig) -> None:
    def reclaimed(seed: int) -> list[float]:
        provider = SimProvider(small_config, interruption_rate=1.0, seed=seed)
        provider.set_desired("gpu1-spot-a", 20)
        lost = provider.advance(3600).interrupted
        return sorted(i.ended_at or 0 for i in lost)

    first = reclaimed(7)
    assert first == reclaimed(7)
    assert 5 <= len(first) <= 20  # about 1 - e^-1 of 20 within the hour, replacements included


def test_outage_spec_parsing() -> None:
    assert Outage.parse("us-east-1a:3600:10800") == Outage("us-east-1a", 3600, 10800)
    for bad in ("us-east-1a", "us-east-1a:10:5", ":1:2", "z:a:b"):
        with pytest.raises(ValueError, match="ZONE:START_S:END_S"):
            Outage.parse(bad)
