"""Parsing what AWS really says: Auto Scaling activity status messages and EventBridge events.

The status messages are verbatim texts of real failed launch activities (DescribeScalingActivities
carries the EC2 message, not its error code); moto returns no failed activities, so they are fed here.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from scaler.providers.aws import provider_error
from scaler.providers.aws_messages import parse_activity, parse_event
from scaler.providers.base import NetworkError, NotAuthorized, ServerError, Throttled


def activity(message: str, *, zone: str | None = "us-east-1a", status: str = "Failed") -> dict[str, object]:
    out: dict[str, object] = {
        "ActivityId": "d25597f4-007b-e8ad-2474-fb39d1b0e21b",
        "AutoScalingGroupName": "gpuburst-dev-gpu1-spot-a",
        "Description": f"Launching a new EC2 instance.  Status Reason: {message}",
        "Cause": "At 2026-11-22T02:00:00Z an instance was started in response to a difference between desired "
                 "and actual capacity, increasing the capacity from 0 to 2.",
        "StartTime": datetime(2026, 11, 22, 2, 0, 1, tzinfo=UTC),
        "StatusCode": status, "StatusMessage": message, "Progress": 100,
    }
    if zone:
        out["Details"] = json.dumps({"Subnet ID": "subnet-0f77a91e1abb847ae", "Availability Zone": zone})
    return out


REAL = [
    ("We currently do not have sufficient g5.xlarge capacity in the Availability Zone you requested (us-east-1a). "
     "Our system will be working on provisioning additional capacity. You can currently get g5.xlarge capacity by "
     "not specifying an Availability Zone in your request or choosing us-east-1b, us-east-1c. Launching EC2 "
     "instance failed.", "capacity", "InsufficientInstanceCapacity"),
    ("There is no Spot capacity available that matches your request. Launching EC2 instance failed.",
     "capacity", "InsufficientInstanceCapacity"),
    ("Could not launch Spot Instances. UnfulfillableCapacity - Unable to fulfill capacity due to your request "
     "configuration. Please adjust your request and try again. Launching EC2 instance failed.",
     "capacity", "UnfulfillableCapacity"),
    ("Could not launch Spot Instances. SpotMaxPriceTooLow - Your Spot request price of 0.3 is lower than the "
     "minimum required Spot request fulfillment price of 0.3218. Launching EC2 instance failed.",
     "price", "SpotMaxPriceTooLow"),
    ("Max spot instance count exceeded. Launching EC2 instance failed.", "quota", "MaxSpotInstanceCountExceeded"),
    ("You have requested more vCPU capacity than your current vCPU limit of 384 allows for the instance bucket that "
     "the specified instance type belongs to. Please visit http://aws.amazon.com/contact-us/ec2-request to request "
     "an adjustment to this limit. Launching EC2 instance failed.", "quota", "VcpuLimitExceeded"),
    ("You have requested more instances (7) than your current instance limit of 6 allows for the specified "
     "instance type. Please visit http://aws.amazon.com/contact-us/ec2-request to request an adjustment to this "
     "limit. Launching EC2 instance failed.", "quota", "InstanceLimitExceeded"),
    ("Could not launch Spot Instances. InvalidFleetConfiguration - Your requested instance type (p3.8xlarge) is not "
     "supported in your requested Availability Zone (us-east-2c). Launching EC2 instance failed.",
     "config", "InvalidFleetConfiguration"),
]


@pytest.mark.parametrize(("message", "kind", "reason"), REAL)
def test_real_launch_failure_messages_are_classified(message: str, kind: str, reason: str) -> None:
    failure = parse_activity(activity(message))
    assert failure is not None
    assert (failure.kind, failure.reason, failure.zone) == (kind, reason, "us-east-1a")
    assert failure.message == message
    assert failure.at == datetime(2026, 11, 22, 2, 0, 1, tzinfo=UTC).timestamp()


def test_zone_comes_from_the_message_when_details_lack_it() -> None:
    failure = parse_activity(activity(REAL[0][0], zone=None))
    assert failure is not None and failure.zone == "us-east-1a"


def test_successful_and_non_launch_activities_are_not_failures() -> None:
    assert parse_activity(activity("", status="Successful")) is None
    terminating = activity("Instance was taken out of service")
    terminating["Description"] = "Terminating EC2 instance: i-0a1b2c3d4e5f"
    assert parse_activity(terminating) is None


def _event(detail_type: str, **detail: str) -> str:
    return json.dumps({
        "version": "0", "id": "1e5527d7-bb36-4607-3370-4164db56a40e", "detail-type": detail_type,
        "source": "aws.ec2", "account": "123456789012", "time": "2026-11-22T03:00:00Z", "region": "us-east-1",
        "resources": ["arn:aws:ec2:us-east-1a:instance/i-1234567890abcdef0"],
        "detail": {"instance-id": "i-1234567890abcdef0", **detail},
    })


def test_eventbridge_events() -> None:
    t0 = datetime(2026, 11, 22, 3, 0, tzinfo=UTC).timestamp()
    spot = parse_event(_event("EC2 Spot Instance Interruption Warning", **{"instance-action": "terminate"}), 0)
    assert spot is not None and spot.kind == "spot-interruption" and spot.deadline == t0 + 120
    assert spot.instance == "i-1234567890abcdef0"
    rebalance = parse_event(_event("EC2 Instance Rebalance Recommendation"), 0)
    assert rebalance is not None and rebalance.kind == "rebalance"
    stopping = parse_event(_event("EC2 Instance State-change Notification", state="shutting-down"), 0)
    assert stopping is not None and stopping.kind == "terminating"
    assert parse_event(_event("EC2 Instance State-change Notification", state="running"), 0) is None
    assert parse_event("not json", 0) is None
    assert parse_event(json.dumps({"source": "aws.health", "detail": {}}), 0) is None


def test_errors_are_typed_with_retryable() -> None:
    throttled = ClientError({"Error": {"Code": "Throttling", "Message": "Rate exceeded"},
                             "ResponseMetadata": {"HTTPStatusCode": 400}}, "DescribeAutoScalingGroups")
    err = provider_error("DescribeAutoScalingGroups", throttled)
    assert isinstance(err, Throttled) and (err.kind, err.retryable) == ("throttled", True)
    server = ClientError({"Error": {"Code": "InternalFailure", "Message": "x"},
                          "ResponseMetadata": {"HTTPStatusCode": 500}}, "SetDesiredCapacity")
    assert isinstance(provider_error("SetDesiredCapacity", server), ServerError)
    for code in ("AccessDenied", "ExpiredToken"):  # retrying cannot help: the operator must act
        denied = ClientError({"Error": {"Code": code, "Message": "not authorized"},
                              "ResponseMetadata": {"HTTPStatusCode": 403}}, "SetDesiredCapacity")
        err = provider_error("SetDesiredCapacity", denied)
        assert isinstance(err, NotAuthorized) and not err.retryable
    net = provider_error("x", EndpointConnectionError(endpoint_url="https://autoscaling.us-east-1.amazonaws.com"))
    assert isinstance(net, NetworkError) and net.retryable
