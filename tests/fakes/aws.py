"""Helpers that shape moto's server into a gpuburst cluster's AWS side (groups, tags, a queue)."""

from __future__ import annotations

import contextlib
import json
import urllib.request
from datetime import UTC, datetime
from typing import Any

import boto3

from scaler.core.config.settings import ScalerConfig


class MotoAws:
    def __init__(self, endpoint: str, region: str = "us-east-1") -> None:
        self.endpoint = endpoint
        self.region = region
        self.session = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing",
                                             region_name=region)
        self.asg = self.session.client("autoscaling", endpoint_url=endpoint)
        self.ec2 = self.session.client("ec2", endpoint_url=endpoint)
        self.sqs = self.session.client("sqs", endpoint_url=endpoint)

    def reset(self) -> None:
        urllib.request.urlopen(urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST"))

    def launch_template(self) -> str:
        ami = "ami-12c6146b"  # one of moto's built-in images (listing them all takes seconds)
        self.ec2.describe_images(ImageIds=[ami])
        name = "gpuburst-nodes"
        with contextlib.suppress(self.ec2.exceptions.ClientError):
            self.ec2.create_launch_template(LaunchTemplateName=name,
                                            LaunchTemplateData={"ImageId": ami, "InstanceType": "m6i.large"})
        return name

    def make_groups(self, config: ScalerConfig, *, desired: dict[str, int] | None = None,
                    protect: bool = True) -> dict[str, str]:
        """One ASG per pool, tagged from the pool model exactly as the Pulumi program tags them."""
        lt = self.launch_template()
        names = {}
        for pool in config.pools:
            name = pool.provider_ref or f"{config.cluster}-{pool.name}"
            n = (desired or {}).get(pool.name, pool.min_size)
            self.asg.create_auto_scaling_group(
                AutoScalingGroupName=name, MinSize=pool.min_size, MaxSize=pool.max_size, DesiredCapacity=n,
                AvailabilityZones=list(pool.zones), NewInstancesProtectedFromScaleIn=protect,
                LaunchTemplate={"LaunchTemplateName": lt, "Version": "$Latest"},
                Tags=[{"Key": k, "Value": v, "PropagateAtLaunch": False, "ResourceId": name,
                       "ResourceType": "auto-scaling-group"} for k, v in pool.to_tags(config.cluster).items()],
            )
            names[pool.name] = name
        return names

    def instances(self, group: str) -> list[dict[str, Any]]:
        g = self.asg.describe_auto_scaling_groups(AutoScalingGroupNames=[group])["AutoScalingGroups"][0]
        return list(g["Instances"])

    def desired(self, group: str) -> int:
        g = self.asg.describe_auto_scaling_groups(AutoScalingGroupNames=[group])["AutoScalingGroups"][0]
        return int(g["DesiredCapacity"])

    def queue(self, name: str = "interruptions") -> str:
        return str(self.sqs.create_queue(QueueName=name)["QueueUrl"])

    def send_event(self, queue_url: str, detail_type: str, instance_id: str, zone: str = "us-east-1a",
                   at: float | None = None, **detail: str) -> None:
        """An EventBridge event as its SQS target receives it (the event JSON is the body)."""
        body = {
            "version": "0", "id": "7e5d2a31-5f1f-4c1b-9c47-0b1c8f4f2f10", "detail-type": detail_type,
            "source": "aws.ec2", "account": "123456789012", "time": "2026-11-22T03:00:00Z" if at is None else
            datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "region": self.region, "resources": [f"arn:aws:ec2:{zone}:instance/{instance_id}"],
            "detail": {"instance-id": instance_id, **detail},
        }
        if detail_type == "EC2 Spot Instance Interruption Warning":
            body["detail"].setdefault("instance-action", "terminate")
        self.sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps(body))


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Any:
        yield self._body


class Faults:
    """Answer the next `count` calls of `operation` with an AWS error, before they reach moto.

    Registered on botocore's before-send hook, so the client's real retry logic and error parsing
    run on a real AWS error document (the Query protocol's ErrorResponse XML).
    """

    def __init__(self, client: Any, operation: str, code: str, status: int, count: int,
                 message: str = "Rate exceeded", group: str | None = None) -> None:
        """`group`: only calls about this Auto Scaling group fail (and are counted in `seen`)."""
        self.operation, self.code, self.status, self.left = operation, code, status, count
        self.message = message
        self.group = group
        self.seen = 0
        client.meta.events.register(f"before-send.{client.meta.service_model.endpoint_prefix}.{operation}", self)

    def __call__(self, request: Any, **_: Any) -> Any:
        from urllib.parse import parse_qs
        from xml.sax.saxutils import escape

        from botocore.awsrequest import AWSResponse

        if self.group is not None:
            body = parse_qs(request.body.decode() if isinstance(request.body, bytes) else request.body or "")
            if body.get("AutoScalingGroupName") != [self.group]:
                return None
        self.seen += 1
        if self.left <= 0:
            return None
        self.left -= 1
        body = (f'<ErrorResponse xmlns="https://autoscaling.amazonaws.com/doc/2011-01-01/"><Error><Type>Sender</Type>'
                f"<Code>{self.code}</Code><Message>{escape(self.message)}</Message></Error>"
                "<RequestId>3b1d3b5a-0000-4000-8000-000000000000</RequestId></ErrorResponse>").encode()
        return AWSResponse(request.url, self.status, {"Content-Type": "text/xml"}, _Raw(body))


class FailedLaunch:
    """DescribeScalingActivities for `group` answers with one failed launch activity carrying AWS's own
    status message (moto records no failed activities); other groups reach moto. `refused`: the group's
    instances moto launched are left out of DescribeAutoScalingGroups too (AWS launched none of them)."""

    def __init__(self, client: Any, group: str, message: str, zone: str, at: float, *, refused: bool = False) -> None:
        self.group, self.message, self.zone, self.at = group, message, zone, at
        client.meta.events.register("before-send.autoscaling.DescribeScalingActivities", self)
        if refused:
            client.meta.events.register("after-call.autoscaling.DescribeAutoScalingGroups", self._hide)

    def _hide(self, parsed: dict[str, Any], **_: Any) -> None:
        for group in parsed.get("AutoScalingGroups") or ():
            if group.get("AutoScalingGroupName") == self.group:
                group["Instances"] = []

    def __call__(self, request: Any, **_: Any) -> Any:
        from urllib.parse import parse_qs
        from xml.sax.saxutils import escape

        from botocore.awsrequest import AWSResponse

        body = parse_qs(request.body.decode() if isinstance(request.body, bytes) else request.body)
        if body.get("AutoScalingGroupName") != [self.group]:
            return None
        when = datetime.fromtimestamp(self.at, UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        details = json.dumps({"Subnet ID": "subnet-0f77a91e1abb847ae", "Availability Zone": self.zone})
        xml = (
            '<DescribeScalingActivitiesResponse xmlns="http://autoscaling.amazonaws.com/doc/2011-01-01/">'
            "<DescribeScalingActivitiesResult><Activities><member>"
            "<ActivityId>5625d008-fbbd-d50b-581c-5b8c634ab00e</ActivityId>"
            f"<AutoScalingGroupName>{escape(self.group)}</AutoScalingGroupName>"
            f"<Description>Launching a new EC2 instance.  Status Reason: {escape(self.message)}</Description>"
            "<Cause>At 2026-11-22T03:00:00Z an instance was started in response to a difference between desired "
            "and actual capacity, increasing the capacity from 0 to 1.</Cause>"
            f"<StartTime>{when}</StartTime><EndTime>{when}</EndTime><StatusCode>Failed</StatusCode>"
            f"<StatusMessage>{escape(self.message)}</StatusMessage><Progress>100</Progress>"
            f"<Details>{escape(details)}</Details>"
            "</member></Activities></DescribeScalingActivitiesResult>"
            "<ResponseMetadata><RequestId>6f2b4c8e-0000-4000-8000-000000000000</RequestId></ResponseMetadata>"
            "</DescribeScalingActivitiesResponse>").encode()
        return AWSResponse(request.url, 200, {"Content-Type": "text/xml"}, _Raw(xml))


class WarmInstances:
    """DescribeWarmPool answers with these instances of the group's warm pool (moto keeps the pool's configuration
    but lists no instance in it), in the response's own shape; `calls` counts the DescribeWarmPool calls."""

    def __init__(self, client: Any, group: str, states: list[str], zone: str = "us-east-1a") -> None:
        self.group = group
        self.calls = 0
        self.instances = [{"InstanceId": f"i-0a{n:015x}", "InstanceType": "g6.xlarge", "AvailabilityZone": zone,
                           "LifecycleState": state, "HealthStatus": "Healthy", "ProtectedFromScaleIn": True,
                           "LaunchTemplate": {"LaunchTemplateId": "lt-0123456789abcdef0",
                                              "LaunchTemplateName": "gpuburst-nodes", "Version": "1"}}
                          for n, state in enumerate(states)]
        client.meta.events.register("after-call.autoscaling.DescribeWarmPool", self)

    def __call__(self, parsed: dict[str, Any], **_: Any) -> None:
        self.calls += 1
        if parsed.get("WarmPoolConfiguration"):
            parsed["Instances"] = list(self.instances)
