"""A warm pool through the whole loop, on moto's server: the scaler reads the group's warm instances ready to start
(DescribeWarmPool, answered in its own shape: moto lists none) and starts them before any cold spot node.

On the fake API server, not the real control plane: the test's clock jumps minutes at a step (see
tests/integration/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from scaler.core.config.settings import parse_config
from tests.fakes.aws import MotoAws, WarmInstances
from tests.fakes.kubeapi import FakeKube
from tests.fakes.world import World

pytestmark = pytest.mark.integration

CONFIG = {
    "cluster": "burst", "cloud": "aws", "region": "us-east-1",
    "pools": [
        {"name": "gpu-spot-a", "capacity_type": "spot", "instance_types": ["g6.xlarge"], "zones": ["us-east-1a"],
         "max": 20, "fallback": "gpu-od"},
        {"name": "gpu-od", "instance_types": ["g6.xlarge"], "zones": ["us-east-1a"], "max": 20,
         "warm": {"size": 2}},
    ],
}


@pytest.fixture
def world(aws: MotoAws, kube: FakeKube, tmp_path: Path) -> Iterator[World]:
    w = World(aws, kube, parse_config(CONFIG, "test"), tmp_path)
    aws.asg.put_warm_pool(AutoScalingGroupName=w.groups["gpu-od"], MinSize=2, MaxGroupPreparedCapacity=2,
                          PoolState="Stopped")
    yield w
    w.close()


def test_pending_pods_start_the_warm_instances_first_then_spot(world: World) -> None:
    WarmInstances(world.provider.asg, world.groups["gpu-od"], ["Warmed:Stopped", "Warmed:Stopped"])
    world.gpu_pods("burst", 3, pending=True)
    world.step()
    # Two nodes Ready in warm_start from the warm pool, the third a cold spot node (cheaper, a boot away).
    assert (world.desired("gpu-od"), world.desired("gpu-spot-a")) == (2, 1)
    sample = world.runtime.metrics.registry.get_sample_value
    assert sample("gpuburst_pool_warm_instances", {"pool": "gpu-od"}) == 2
    world.step()  # the metrics of a pass read the sizes it observed: the next pass sees the new ones
    assert (world.desired("gpu-od"), world.desired("gpu-spot-a")) == (2, 1)  # the pods counted on the in-flight nodes
    standing = 2 * 100 * 0.08 / 730  # two stopped 100 GiB gp3 root volumes
    price = {p: sample("gpuburst_pool_price_per_node_hour", {"pool": p}) for p in ("gpu-spot-a", "gpu-od")}
    assert sample("gpuburst_cost_per_hour") == pytest.approx(2 * price["gpu-od"] + price["gpu-spot-a"] + standing)


def test_without_ready_warm_instances_spot_comes_first(world: World) -> None:
    WarmInstances(world.provider.asg, world.groups["gpu-od"], ["Warmed:Pending", "Warmed:Pending:Wait"])
    world.gpu_pods("burst", 3, pending=True)
    world.step()
    assert (world.desired("gpu-od"), world.desired("gpu-spot-a")) == (0, 3)
