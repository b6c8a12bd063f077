"""AWS: Auto Scaling groups as pools (boto3 Auto Scaling, EC2, SQS).

- Groups are found by the cluster's ownership tag in batched DescribeAutoScalingGroups calls;
  a configured pool is its `provider_ref` group, or the group tagged `gpuburst.io/pool=<name>`;
  with `discover: true` any other group tagged for cluster-autoscaler in this cluster is adopted
  (Pool.from_tags).
- SetDesiredCapacity never beyond the pool's max (the smaller of the config's and the group's).
- One node leaves with TerminateInstanceInAutoScalingGroup(ShouldDecrementDesiredCapacity=True).
- Launch failures come from DescribeScalingActivities' status messages (AWS gives no error code
  there, only the EC2 message text), parsed into LaunchFailure.
- A group with a warm pool (WarmPoolConfiguration in its description) has its warm instances read with
  DescribeWarmPool: those Warmed:Stopped / Running / Hibernated are ready to start (the planner's
  PoolObservation.warm); Warmed:Pending ones are still booting into the pool.
- Spot interruptions arrive as EventBridge events in an SQS queue; a notice is deleted from it only
  once acknowledged (handled).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import boto3
from botocore.config import Config as BotoConfig
from botocore.exceptions import BotoCoreError, ClientError, ConnectTimeoutError, EndpointConnectionError

from scaler.core.config.pool import Pool
from scaler.core.config.settings import ScalerConfig
from scaler.core.model import keys
from scaler.core.model.interruption import Interruption
from scaler.core.planning.snapshot import CloudInstance, LaunchFailure, PoolObservation
from scaler.providers import base
from scaler.providers.aws_messages import instance_id, parse_activity, parse_event, provider_id
from scaler.providers.aws_quotas import QuotaReader
from scaler.providers.base import ProviderError, check_size

log = logging.getLogger(__name__)

LIVE_STATES = ("Pending", "Pending:Wait", "Pending:Proceed", "InService")
WARM_READY_STATES = frozenset({"Warmed:Stopped", "Warmed:Running", "Warmed:Hibernated"})
# Seconds a notice read from the queue stays invisible to other readers before it is handed out
# again, unless acknowledged: a scaler that died after reading it gets it back (a restart takes ~30 s).

THROTTLED_CODES = frozenset({"Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequestsException",
                             "RequestThrottled", "SlowDown"})
AUTH_CODES = frozenset({"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "ExpiredToken",
                        "InvalidClientTokenId", "UnrecognizedClientException", "AuthFailure", "RequestExpired"})
BUSY_CODES = frozenset({"ScalingActivityInProgress", "ResourceContention"})  # retry: the group is busy


def provider_error(what: str, err: Exception) -> ProviderError:
    """A boto3 / botocore error as the typed ProviderError the loop understands."""
    message = f"aws {what}: {err}"
    if isinstance(err, ClientError):
        code = err.response.get("Error", {}).get("Code", "")
        status = int(err.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
        if code in THROTTLED_CODES:
            return base.Throttled(message)
        if status >= 500 or code in ("InternalFailure", "ServiceUnavailable", "InternalError"):
            return base.ServerError(message)
        if code in AUTH_CODES:
            return base.NotAuthorized(message)
        if code in ("LimitExceeded", "VcpuLimitExceeded", "InstanceLimitExceeded"):
            return base.QuotaExceeded(message)
        if code in BUSY_CODES:
            return ProviderError(message, kind="invalid", retryable=True)
        if code in ("ValidationError", "InvalidParameterValue"):
            return base.InvalidRequest(message)
        return ProviderError(message)
    if isinstance(err, EndpointConnectionError | ConnectTimeoutError):
        return base.NetworkError(message)
    return ProviderError(message)


@dataclass(slots=True)
class Group:
    name: str
    pool: Pool
    desired: int
    min_size: int
    max_size: int
    instances: list[dict[str, Any]] = field(default_factory=list)
    has_warm_pool: bool = False

    @property
    def live(self) -> list[dict[str, Any]]:
        return [i for i in self.instances if i.get("LifecycleState") in LIVE_STATES]

    @property
    def max_allowed(self) -> int:
        return min(self.max_size, self.pool.max_size)


class AwsProvider:
    name = "aws"

    def __init__(self, config: ScalerConfig, *, session: boto3.session.Session | None = None,
                 queue_url: str | None = None, endpoint_url: str | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.queue_url = queue_url
        self.notice_visibility = config.runtime.notice_visibility
        self._clock = clock
        session = session or boto3.session.Session(region_name=config.region or None)
        rt = config.runtime
        bc = BotoConfig(retries={"mode": "standard", "max_attempts": 3}, connect_timeout=rt.cloud_connect_timeout,
                        read_timeout=rt.cloud_read_timeout)
        extra = {"endpoint_url": endpoint_url} if endpoint_url else {}
        self.asg = session.client("autoscaling", config=bc, **extra)
        self.ec2 = session.client("ec2", config=bc, **extra)
        self.sqs = session.client("sqs", config=bc, **extra) if queue_url else None
        self.quotas = QuotaReader(session.client("service-quotas", config=bc, **extra), self.ec2, clock,
                                  every=rt.quota_refresh)
        self._configured = {p.name: p for p in config.pools}
        self._groups: dict[str, Group] = {}
        self._by_instance: dict[str, str] = {}
        self._seen_activities: set[str] = set()
        self._watch_until: dict[str, float] = {}  # pool -> read its scaling activities until then
        self._started = clock()
        self._refreshed = False
        self._launched: dict[str, float] = {}  # instance id -> launch time (it never changes)

    # --- calls --------------------------------------------------------------------------------
    def _call(self, what: str, fn: Callable[..., Any], **kwargs: Any) -> Any:
        try:
            return fn(**kwargs)
        except (ClientError, BotoCoreError) as err:
            raise provider_error(what, err) from err

    # --- discovery ------------------------------------------------------------------------------
    def refresh(self) -> None:
        cluster_tag = keys.tag_ca_cluster(self.config.cluster)
        raw: list[dict[str, Any]] = []
        token: str | None = None
        while True:  # batched: 100 groups per call
            kwargs: dict[str, Any] = {"Filters": [{"Name": "tag-key", "Values": [cluster_tag]}], "MaxRecords": 100}
            if token:
                kwargs["NextToken"] = token
            page = self._call("DescribeAutoScalingGroups", self.asg.describe_auto_scaling_groups, **kwargs)
            raw.extend(page.get("AutoScalingGroups") or ())
            token = page.get("NextToken")
            if not token:
                break
        groups: dict[str, Group] = {}
        for g in raw:
            tags = {t["Key"]: t["Value"] for t in g.get("Tags") or ()}
            pool = self._pool_for(g, tags)
            if pool is None or pool.name in groups:
                continue
            groups[pool.name] = Group(g["AutoScalingGroupName"], pool, int(g["DesiredCapacity"]), int(g["MinSize"]),
                                      int(g["MaxSize"]), list(g.get("Instances") or ()),
                                      bool(g.get("WarmPoolConfiguration")))
        missing = sorted(set(self._configured) - set(groups))
        if missing:
            log.warning("no Auto Scaling group found for pools %s (tag %s=owned and %s=<pool> or provider_ref)",
                        missing, cluster_tag, keys.TAG_POOL)
        self._groups = groups
        self._by_instance = {i["InstanceId"]: name for name, grp in groups.items() for i in grp.live}
        self._refreshed = True

    def _pool_for(self, group: dict[str, Any], tags: dict[str, str]) -> Pool | None:
        name = group["AutoScalingGroupName"]
        for pool in self._configured.values():
            if pool.provider_ref == name or (pool.provider_ref is None and tags.get(keys.TAG_POOL) == pool.name):
                return pool
        if not self.config.discover:
            return None
        types = [o["InstanceType"] for o in (((group.get("MixedInstancesPolicy") or {}).get("LaunchTemplate") or {})
                                            .get("Overrides") or ()) if o.get("InstanceType")]
        types = types or [t for t in {tags.get(keys.TAG_CA_TEMPLATE_LABEL + keys.LABEL_INSTANCE_TYPE)} if t]
        types = types or sorted({i["InstanceType"] for i in group.get("Instances") or () if i.get("InstanceType")})
        try:
            return Pool.from_tags(tags, cloud="aws", cluster=self.config.cluster, provider_ref=name,
                                  instance_types=types, zones=list(group.get("AvailabilityZones") or ()),
                                  min_size=int(group["MinSize"]), max_size=int(group["MaxSize"]),
                                  catalogue=self.config.full_catalogue())
        except ValueError as err:
            log.warning("not adopting Auto Scaling group %s: %s", name, err)
            return None

    def group(self, pool: str) -> Group:
        if not self._refreshed:
            self.refresh()
        try:
            return self._groups[pool]
        except KeyError:
            raise base.NotFound(f"aws: no Auto Scaling group for pool {pool!r}") from None

    # --- the PoolProvider interface -----------------------------------------------------------
    def observe(self, now: float) -> dict[str, PoolObservation]:
        self.refresh()
        self._launch_times()
        out: dict[str, PoolObservation] = {}
        for name, grp in self._groups.items():
            # Launch failures matter while a launch is owed or was asked for recently.
            watching = grp.desired > len(grp.live) or self._clock() < self._watch_until.get(name, 0.0)
            failures = self._failures(grp) if watching else []
            pool = grp.pool
            if grp.max_allowed < pool.max_size:  # the group's own MaxSize is lower: plan within it
                pool = pool.model_copy(update={"max_size": grp.max_allowed,
                                               "min_size": min(pool.min_size, grp.max_allowed)})
            members = [CloudInstance(provider_id(str(i["AvailabilityZone"]), str(i["InstanceId"])),
                                     str(i["AvailabilityZone"]), self._launched.get(i["InstanceId"], 0.0))
                       for i in grp.live]
            out[name] = PoolObservation(pool=pool, desired=grp.desired, instances=len(grp.live), failures=failures,
                                        members=members, warm=self._warm_ready(grp) if grp.has_warm_pool else 0)
        for name, quota in self.quotas.for_pools(o.pool for o in out.values()).items():
            out[name].quota = quota
        return out

    def _warm_ready(self, grp: Group) -> int:
        """Warm-pool instances ready to start (DescribeWarmPool, 50 a page)."""
        ready, token = 0, None
        while True:
            page = self._call("DescribeWarmPool", self.asg.describe_warm_pool, AutoScalingGroupName=grp.name,
                              MaxRecords=50, **({"NextToken": token} if token else {}))
            ready += sum(1 for i in page.get("Instances") or () if i.get("LifecycleState") in WARM_READY_STATES)
            token = page.get("NextToken")
            if not token:
                return ready

    def _launch_times(self) -> None:
        """Launch times of instances not seen before (DescribeInstances; the group listing has none): a
        node that never registers is due `provision_timeout` after its launch, whatever restarts between."""
        live = {i["InstanceId"] for grp in self._groups.values() for i in grp.live}
        self._launched = {k: v for k, v in self._launched.items() if k in live}
        new = sorted(live - set(self._launched))
        for start in range(0, len(new), 200):
            page = self._call("DescribeInstances", self.ec2.describe_instances, InstanceIds=new[start:start + 200])
            for reservation in page.get("Reservations") or ():
                for inst in reservation.get("Instances") or ():
                    at = inst.get("LaunchTime")
                    if isinstance(at, datetime):
                        self._launched[inst["InstanceId"]] = at.timestamp()

    def _failures(self, grp: Group) -> list[LaunchFailure]:
        page = self._call("DescribeScalingActivities", self.asg.describe_scaling_activities,
                          AutoScalingGroupName=grp.name, MaxRecords=20)
        out = []
        horizon = self._started - self.config.timings.unavailable_ttl
        for activity in page.get("Activities") or ():
            aid = activity.get("ActivityId", "")
            if aid in self._seen_activities:
                continue
            failure = parse_activity(activity)
            if failure is None:
                continue
            self._seen_activities.add(aid)
            if failure.at >= horizon:
                out.append(failure)
                log.warning("pool %s: launch failed in %s: %s (%s)", grp.pool.name, failure.zone or "?",
                            failure.reason, failure.message)
        return out

    def set_desired(self, pool: str, desired: int) -> None:
        grp = self.group(pool)
        check_size("aws", pool, desired, grp.min_size, grp.max_allowed)
        self._call("SetDesiredCapacity", self.asg.set_desired_capacity, AutoScalingGroupName=grp.name,
                   DesiredCapacity=desired, HonorCooldown=False)
        if desired > grp.desired:
            self._watch_until[pool] = self._clock() + self.config.timings.provision_timeout
        grp.desired = desired

    def delete_node(self, pool: str, provider_id: str) -> None:
        iid = instance_id(provider_id)
        grp = self.group(pool)
        if iid is None or iid not in {i["InstanceId"] for i in grp.instances}:
            raise base.NotFound(f"aws: {provider_id!r} is not an instance of pool {pool!r} ({grp.name})")
        self._call("TerminateInstanceInAutoScalingGroup", self.asg.terminate_instance_in_auto_scaling_group,
                   InstanceId=iid, ShouldDecrementDesiredCapacity=True)
        grp.desired = max(grp.min_size, grp.desired - 1)
        grp.instances = [i for i in grp.instances if i["InstanceId"] != iid]

    def pool_of(self, provider_id: str) -> str | None:
        iid = instance_id(provider_id)
        return self._by_instance.get(iid) if iid else None

    # --- spot interruptions ---------------------------------------------------------------------
    def interruptions(self, max_batches: int = 10) -> list[Interruption]:
        """Read the interruption queue (10 messages a call). A notice stays in the queue, invisible for
        `runtime.notice_visibility` seconds, until the loop has handled it and calls acknowledge(): a scaler that
        dies in between gets it again. Other events are deleted at once."""
        if self.sqs is None or self.queue_url is None:
            return []
        out: list[Interruption] = []
        for _ in range(max_batches):
            resp = self._call("ReceiveMessage", self.sqs.receive_message, QueueUrl=self.queue_url,
                              MaxNumberOfMessages=10, WaitTimeSeconds=0, VisibilityTimeout=self.notice_visibility)
            messages = resp.get("Messages") or []
            for msg in messages:
                parsed = parse_event(msg.get("Body", ""), self._clock())
                if parsed is not None:
                    zone = self._zone_of(parsed.instance)
                    out.append(dataclasses.replace(parsed, handle=msg["ReceiptHandle"],
                                                   instance=provider_id(zone, parsed.instance) if zone else
                                                   parsed.instance))
                else:
                    self._delete_message(msg["ReceiptHandle"])
            if len(messages) < 10:
                break
        return out

    def acknowledge(self, notices: Iterable[Interruption]) -> None:
        """Delete handled notices from the queue (best effort: a notice seen twice is handled once)."""
        for notice in notices:
            if notice.handle:
                try:
                    self._delete_message(notice.handle)
                except ProviderError as err:
                    log.warning("interruption notice for %s not deleted: %s", notice.instance, err)

    def _delete_message(self, receipt: str) -> None:
        assert self.sqs is not None
        self._call("DeleteMessage", self.sqs.delete_message, QueueUrl=self.queue_url, ReceiptHandle=receipt)

    def _zone_of(self, iid: str) -> str | None:
        for grp in self._groups.values():
            for i in grp.instances:
                if i["InstanceId"] == iid:
                    return str(i.get("AvailabilityZone"))
        return None
