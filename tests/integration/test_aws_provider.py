"""The AWS provider through boto3 against moto's server (Auto Scaling, EC2, SQS)."""

from __future__ import annotations

import time

import pytest

from scaler.core.config.settings import ScalerConfig, parse_config
from scaler.providers.aws import AwsProvider
from scaler.providers.aws_messages import provider_id
from scaler.providers.base import ProviderError
from tests.fakes.aws import Faults, MotoAws, WarmInstances

pytestmark = pytest.mark.integration

CONFIG = {
    "cluster": "burst", "cloud": "aws", "region": "us-east-1",
    "pools": [
        {"name": "gpu-spot-a", "capacity_type": "spot", "instance_types": ["g6.xlarge"], "zones": ["us-east-1a"],
         "max": 4, "fallback": "gpu-od"},
        {"name": "gpu-od", "instance_types": ["g6.xlarge"], "zones": ["us-east-1a", "us-east-1b"], "max": 3},
    ],
}


@pytest.fixture
def config() -> ScalerConfig:
    return parse_config(CONFIG, "test")


def provider(aws: MotoAws, config: ScalerConfig, **kw: object) -> AwsProvider:
    return AwsProvider(config, session=aws.session, endpoint_url=aws.endpoint, **kw)  # type: ignore[arg-type]


def test_observe_scale_and_remove_one_node(aws: MotoAws, config: ScalerConfig) -> None:
    names = aws.make_groups(config, desired={"gpu-spot-a": 1})
    p = provider(aws, config)
    obs = p.observe(0)
    assert {k: (o.desired, o.instances) for k, o in obs.items()} == {"gpu-spot-a": (1, 1), "gpu-od": (0, 0)}
    p.set_desired("gpu-spot-a", 3)
    assert aws.desired(names["gpu-spot-a"]) == 3
    inst = aws.instances(names["gpu-spot-a"])
    assert len(inst) == 3
    pid = provider_id(inst[0]["AvailabilityZone"], inst[0]["InstanceId"])
    p.observe(0)
    assert p.pool_of(pid) == "gpu-spot-a"
    assert p.pool_of("aws:///us-east-1a/i-0000000000000000f") is None
    p.delete_node("gpu-spot-a", pid)
    assert aws.desired(names["gpu-spot-a"]) == 2
    assert inst[0]["InstanceId"] not in {i["InstanceId"] for i in aws.instances(names["gpu-spot-a"])}


def test_never_beyond_max_and_never_someone_elses_instance(aws: MotoAws, config: ScalerConfig) -> None:
    names = aws.make_groups(config, desired={"gpu-od": 1})
    p = provider(aws, config)
    p.observe(0)
    with pytest.raises(ProviderError) as err:
        p.set_desired("gpu-od", 4)
    assert err.value.kind == "invalid" and "max 3" in str(err.value)
    assert aws.desired(names["gpu-od"]) == 1
    od = aws.instances(names["gpu-od"])[0]
    with pytest.raises(ProviderError, match="not an instance of pool 'gpu-spot-a'"):
        p.delete_node("gpu-spot-a", provider_id(od["AvailabilityZone"], od["InstanceId"]))
    assert len(aws.instances(names["gpu-od"])) == 1


def test_discovers_groups_tagged_for_the_cluster_only(aws: MotoAws, config: ScalerConfig) -> None:
    aws.make_groups(config)
    lt = aws.launch_template()
    for name, cluster in (("eksctl-burst-ng-gpu", "burst"), ("other-cluster-ng", "other")):
        aws.asg.create_auto_scaling_group(
            AutoScalingGroupName=name, MinSize=0, MaxSize=5, DesiredCapacity=0, AvailabilityZones=["us-east-1b"],
            LaunchTemplate={"LaunchTemplateName": lt, "Version": "$Latest"},
            Tags=[{"Key": k, "Value": v, "PropagateAtLaunch": False, "ResourceId": name,
                   "ResourceType": "auto-scaling-group"} for k, v in {
                "k8s.io/cluster-autoscaler/enabled": "true", f"k8s.io/cluster-autoscaler/{cluster}": "owned",
                "k8s.io/cluster-autoscaler/node-template/label/node.kubernetes.io/instance-type": "g5.xlarge",
            }.items()])
    discovering = provider(aws, config.model_copy(update={"discover": True}))
    pools = {name: obs.pool for name, obs in discovering.observe(0).items()}
    assert set(pools) == {"gpu-spot-a", "gpu-od", "eksctl-burst-ng-gpu"}
    found = pools["eksctl-burst-ng-gpu"]
    assert (found.instance_types, found.zones, found.max_size, found.role, found.gpus) == \
        (["g5.xlarge"], ["us-east-1b"], 5, "gpu", 1)
    assert set(provider(aws, config).observe(0)) == {"gpu-spot-a", "gpu-od"}


def test_interruption_queue(aws: MotoAws, config: ScalerConfig) -> None:
    names = aws.make_groups(config, desired={"gpu-spot-a": 2})
    queue = aws.queue()
    # How long a notice being handled stays invisible is the config's (runtime.notice_visibility, 45 s by default).
    p = provider(aws, parse_config({**CONFIG, "runtime": {"notice_visibility": 1}}, "test"), queue_url=queue)
    inst = aws.instances(names["gpu-spot-a"])
    aws.send_event(queue, "EC2 Spot Instance Interruption Warning", inst[0]["InstanceId"])
    aws.send_event(queue, "EC2 Instance Rebalance Recommendation", inst[1]["InstanceId"])
    aws.sqs.send_message(QueueUrl=queue, MessageBody='{"source": "aws.health", "detail-type": "AWS Health Event"}')
    p.observe(0)
    got = p.interruptions()
    # The notice names the instance as its node's providerID does (the zone comes from the group).
    expected = sorted([("spot-interruption", provider_id(inst[0]["AvailabilityZone"], inst[0]["InstanceId"])),
                       ("rebalance", provider_id(inst[1]["AvailabilityZone"], inst[1]["InstanceId"]))])
    assert sorted((i.kind, i.instance) for i in got) == expected
    assert p.interruptions() == []  # invisible to other readers while being handled
    time.sleep(1.5)
    # Not acknowledged (the scaler died after reading them): handed out again. The other event is gone.
    again = p.interruptions()
    assert sorted((i.kind, i.instance) for i in again) == expected
    p.acknowledge(again)
    time.sleep(1.5)
    assert p.interruptions() == []  # handled: deleted from the queue


def test_throttling_is_retried_then_reported_as_throttled(aws: MotoAws, config: ScalerConfig) -> None:
    aws.make_groups(config)
    p = provider(aws, config)
    flaky = Faults(p.asg, "DescribeAutoScalingGroups", "Throttling", 400, count=2)
    assert set(p.observe(0)) == {"gpu-spot-a", "gpu-od"}  # botocore's standard retries absorb two
    assert flaky.seen == 3
    Faults(p.asg, "DescribeAutoScalingGroups", "Throttling", 400, count=10)
    with pytest.raises(ProviderError) as err:
        p.observe(0)
    assert (err.value.kind, err.value.retryable) == ("throttled", True)


def test_server_errors_are_reported_as_server(aws: MotoAws, config: ScalerConfig) -> None:
    names = aws.make_groups(config)
    p = provider(aws, config)
    p.observe(0)
    Faults(p.asg, "SetDesiredCapacity", "InternalFailure", 500, count=10)
    with pytest.raises(ProviderError) as err:
        p.set_desired("gpu-od", 2)
    assert err.value.kind == "server"
    assert aws.desired(names["gpu-od"]) == 0


def test_a_group_max_below_the_config_max_is_what_the_planner_plans_with(aws: MotoAws, config: ScalerConfig) -> None:
    # Someone set the group's MaxSize to 2 (config max 4): scale-ups are planned within 2, not refused.
    names = aws.make_groups(config)
    aws.asg.update_auto_scaling_group(AutoScalingGroupName=names["gpu-spot-a"], MaxSize=2)
    obs = provider(aws, config).observe(0)
    assert obs["gpu-spot-a"].pool.max_size == 2
    assert obs["gpu-od"].pool.max_size == 3


def test_warm_pool_instances_ready_to_start_are_read_only_where_a_group_has_a_warm_pool(
        aws: MotoAws, config: ScalerConfig) -> None:
    names = aws.make_groups(config)
    aws.asg.put_warm_pool(AutoScalingGroupName=names["gpu-od"], MinSize=3, MaxGroupPreparedCapacity=3,
                          PoolState="Stopped")
    p = provider(aws, config)
    warm = WarmInstances(p.asg, names["gpu-od"], ["Warmed:Stopped", "Warmed:Stopped", "Warmed:Pending:Wait"])
    obs = p.observe(0)
    # The two stopped ones start on a scale-out; the one still booting into the pool does not count.
    assert (obs["gpu-od"].warm, obs["gpu-spot-a"].warm) == (2, 0)
    assert warm.calls == 1  # only the group with a warm pool is asked
    aws.asg.delete_warm_pool(AutoScalingGroupName=names["gpu-od"], ForceDelete=True)
    assert p.observe(0)["gpu-od"].warm == 0 and warm.calls == 1
