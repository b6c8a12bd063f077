"""An existing cluster's Auto Scaling groups as `NodeGroup`s (for `import-pools`), and tagging them.

Reads every group of the region (DescribeAutoScalingGroups, 100 a page) and, for the instance type
and whether it is spot, what launches its instances: a mixed instances policy (its overrides, and
spot when no on-demand capacity is asked for), a launch template version (InstanceType,
InstanceMarketOptions) or a launch configuration (InstanceType, SpotPrice), the kind the
kubernetes-ec2-autoscaler recipes and kops made. Which groups belong to the cluster is the core's
call (scaler.core.config.adopt).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import boto3
from botocore.config import Config as BotoConfig
from botocore.exceptions import BotoCoreError, ClientError

from scaler.core.config.adopt import NodeGroup
from scaler.providers.aws import provider_error


class AwsGroups:
    def __init__(self, *, session: boto3.session.Session | None = None, region: str | None = None,
                 endpoint_url: str | None = None) -> None:
        session = session or boto3.session.Session(region_name=region)
        bc = BotoConfig(retries={"mode": "standard", "max_attempts": 3}, connect_timeout=5, read_timeout=20)
        extra = {"endpoint_url": endpoint_url} if endpoint_url else {}
        self.asg = session.client("autoscaling", config=bc, **extra)
        self.ec2 = session.client("ec2", config=bc, **extra)

    def _call(self, what: str, fn: Callable[..., Any], **kwargs: Any) -> Any:
        try:
            return fn(**kwargs)
        except (ClientError, BotoCoreError) as err:
            raise provider_error(what, err) from err

    def _pages(self, what: str, fn: Callable[..., Any], field: str, **kwargs: Any) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            page = self._call(what, fn, **kwargs, **({"NextToken": token} if token else {}))
            out.extend(page.get(field) or ())
            token = page.get("NextToken")
            if not token:
                return out

    def groups(self) -> list[NodeGroup]:
        raw = self._pages("DescribeAutoScalingGroups", self.asg.describe_auto_scaling_groups, "AutoScalingGroups",
                          MaxRecords=100)
        names = sorted({g["LaunchConfigurationName"] for g in raw if g.get("LaunchConfigurationName")})
        configs: dict[str, dict[str, Any]] = {}
        for start in range(0, len(names), 50):
            for lc in self._pages("DescribeLaunchConfigurations", self.asg.describe_launch_configurations,
                                  "LaunchConfigurations", LaunchConfigurationNames=names[start:start + 50]):
                configs[lc["LaunchConfigurationName"]] = lc
        templates: dict[tuple[str, str], dict[str, Any]] = {}
        return [self._group(g, configs, templates) for g in raw]

    def _template(self, spec: Mapping[str, Any], cache: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
        """The LaunchTemplateData of the version a group launches ({} when the template is gone)."""
        ident = spec.get("LaunchTemplateId") or spec.get("LaunchTemplateName") or ""
        version = str(spec.get("Version") or "$Default")
        if (ident, version) not in cache:
            which = {"LaunchTemplateId": ident} if spec.get("LaunchTemplateId") else {"LaunchTemplateName": ident}
            try:
                page = self.ec2.describe_launch_template_versions(**which, Versions=[version])
                versions = page.get("LaunchTemplateVersions") or [{}]
                cache[(ident, version)] = dict(versions[0].get("LaunchTemplateData") or {})
            except ClientError as err:
                if "NotFound" not in err.response.get("Error", {}).get("Code", ""):
                    raise provider_error("DescribeLaunchTemplateVersions", err) from err
                cache[(ident, version)] = {}
        return cache[(ident, version)]

    def _group(self, g: dict[str, Any], configs: Mapping[str, dict[str, Any]],
               templates: dict[tuple[str, str], dict[str, Any]]) -> NodeGroup:
        types: list[str] = []
        spot = False
        mixed = g.get("MixedInstancesPolicy") or {}
        if mixed:
            lt = mixed.get("LaunchTemplate") or {}
            types = [o["InstanceType"] for o in lt.get("Overrides") or () if o.get("InstanceType")]
            if not types:
                data = self._template(lt.get("LaunchTemplateSpecification") or {}, templates)
                types = [data["InstanceType"]] if data.get("InstanceType") else []
            dist = mixed.get("InstancesDistribution") or {}
            spot = int(dist.get("OnDemandBaseCapacity", 0)) == 0 and \
                int(dist.get("OnDemandPercentageAboveBaseCapacity", 100)) == 0
        elif g.get("LaunchTemplate"):
            data = self._template(g["LaunchTemplate"], templates)
            types = [data["InstanceType"]] if data.get("InstanceType") else []
            spot = (data.get("InstanceMarketOptions") or {}).get("MarketType") == "spot"
        elif g.get("LaunchConfigurationName") in configs:
            lc = configs[g["LaunchConfigurationName"]]
            types = [lc["InstanceType"]] if lc.get("InstanceType") else []
            spot = bool(lc.get("SpotPrice"))
        return NodeGroup(
            name=g["AutoScalingGroupName"], tags={t["Key"]: t.get("Value", "") for t in g.get("Tags") or ()},
            instance_types=tuple(dict.fromkeys(types)), zones=tuple(g.get("AvailabilityZones") or ()),
            min_size=int(g["MinSize"]), max_size=int(g["MaxSize"]), spot=spot)

    def add_tags(self, group: str, tags: Mapping[str, str]) -> None:
        """Add (or overwrite) tags on the group; not propagated to instances (they are the group's)."""
        items = [{"ResourceId": group, "ResourceType": "auto-scaling-group", "Key": k, "Value": v,
                  "PropagateAtLaunch": False} for k, v in sorted(tags.items())]
        for start in range(0, len(items), 50):  # the API takes at most 50 tags per call
            self._call("CreateOrUpdateTags", self.asg.create_or_update_tags, Tags=items[start:start + 50])
