"""What AWS says, parsed: failed launch activities of an Auto Scaling group (EC2's own message texts,
since the activity carries no code), EventBridge's EC2 notices from the interruption queue, and the
providerIDs of EC2 nodes. No SDK calls."""

from __future__ import annotations

import json
import re
import time
from datetime import datetime
from typing import Any

from scaler.core.model.interruption import NOTICE_LEAD, REBALANCE_LEAD, Interruption
from scaler.core.planning.snapshot import FailureKind, LaunchFailure

_PROVIDER_ID = re.compile(r"^aws:///(?P<zone>[a-z0-9-]+)/(?P<id>i-[0-9a-f]+)$")
_ZONE_IN_TEXT = re.compile(r"\(([a-z]{2}(?:-gov)?-[a-z]+-\d[a-z])\)")
# (needle in the activity's status message, kind, the EC2 error code it stands for). First match wins;
# the messages are EC2's own texts (the ASG activity carries no code), the codes name them in metrics.
FAILURE_PATTERNS: tuple[tuple[str, FailureKind, str], ...] = (
    ("InsufficientInstanceCapacity", "capacity", "InsufficientInstanceCapacity"),
    ("UnfulfillableCapacity", "capacity", "UnfulfillableCapacity"),
    ("InsufficientCapacity", "capacity", "InsufficientCapacity"),
    ("do not have sufficient", "capacity", "InsufficientInstanceCapacity"),
    ("There is no Spot capacity available", "capacity", "InsufficientInstanceCapacity"),
    ("SpotMaxPriceTooLow", "price", "SpotMaxPriceTooLow"),
    ("lower than the minimum required Spot request fulfillment price", "price", "SpotMaxPriceTooLow"),
    ("MaxSpotInstanceCountExceeded", "quota", "MaxSpotInstanceCountExceeded"),
    ("Max spot instance count exceeded", "quota", "MaxSpotInstanceCountExceeded"),
    ("VcpuLimitExceeded", "quota", "VcpuLimitExceeded"),
    ("more vCPU capacity than your current vCPU limit", "quota", "VcpuLimitExceeded"),
    ("InstanceLimitExceeded", "quota", "InstanceLimitExceeded"),
    ("more instances", "quota", "InstanceLimitExceeded"),
    ("InvalidFleetConfiguration", "config", "InvalidFleetConfiguration"),
    ("is not supported in your requested Availability Zone", "config", "Unsupported"),
    ("Unsupported", "config", "Unsupported"),
    ("InvalidParameter", "config", "InvalidParameterValue"),
    ("launch template", "config", "InvalidLaunchTemplate"),
)


def parse_activity(activity: dict[str, Any]) -> LaunchFailure | None:
    """A failed launch activity (DescribeScalingActivities) as a LaunchFailure; None if not a failed launch."""
    if activity.get("StatusCode") not in ("Failed", "Cancelled"):
        return None
    description = activity.get("Description") or ""
    if "Launching" not in description and "Placing Spot" not in description:
        return None
    message = activity.get("StatusMessage") or description.partition("Status Reason:")[2].strip() or description
    kind: FailureKind = "other"
    reason = "LaunchFailed"
    for needle, k, code in FAILURE_PATTERNS:
        if needle in message:
            kind, reason = k, code
            break
    zone: str | None = None
    try:
        zone = json.loads(activity.get("Details") or "{}").get("Availability Zone")
    except (ValueError, AttributeError):
        zone = None
    if zone is None:
        m = _ZONE_IN_TEXT.search(message)
        zone = m.group(1) if m else None
    start = activity.get("StartTime")
    at = start.timestamp() if isinstance(start, datetime) else time.time()
    return LaunchFailure(zone=zone, kind=kind, reason=reason, message=message, at=at)


def instance_id(provider_id: str) -> str | None:
    m = _PROVIDER_ID.match(provider_id)
    return m.group("id") if m else None


def provider_id(zone: str, iid: str) -> str:
    return f"aws:///{zone}/{iid}"


def parse_event(body: str, received: float) -> Interruption | None:
    """The notice an EventBridge event (the SQS message body) about an EC2 instance carries, or None if it is
    another event; `instance` is the bare instance id (the provider turns it into the providerID when it
    knows the instance's zone)."""
    try:
        event = json.loads(body)
    except ValueError:
        return None
    if not isinstance(event, dict) or event.get("source") != "aws.ec2":
        return None
    detail = event.get("detail") or {}
    iid = detail.get("instance-id")
    if not iid:
        return None
    try:
        at = datetime.fromisoformat(str(event.get("time"))).timestamp()
    except ValueError:
        at = received
    kind = event.get("detail-type")
    if kind == "EC2 Spot Instance Interruption Warning":
        return Interruption("spot-interruption", iid, at, at + NOTICE_LEAD["aws"])
    if kind == "EC2 Instance Rebalance Recommendation":
        return Interruption("rebalance", iid, at, at + REBALANCE_LEAD)
    if kind == "EC2 Instance State-change Notification":
        state = str(detail.get("state", ""))
        if state in ("stopping", "stopped", "shutting-down", "terminated"):
            return Interruption("terminating", iid, at, at)
    return None
