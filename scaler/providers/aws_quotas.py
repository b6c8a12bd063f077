"""EC2's vCPU quotas as the planner's caps: Service Quotas' limits against the vCPUs of the instances that
run, read at most every `every` seconds (both change slowly; a launch refused meanwhile is read from its
scaling activity in the pass that sees it).

EC2 counts vCPUs per instance class and market: the on-demand "Running On-Demand ... instances" and the
"All ... Spot Instance Requests" quotas of the G and VT, P and Standard classes. Prepaid pools launch
into their reservation and are left uncapped here. A quota that cannot be read caps nothing (logged).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from scaler.core.config.ec2_quota_classes import QUOTAS, instance_class, quota_key
from scaler.core.config.pool import Pool
from scaler.core.config.runtime import Runtime
from scaler.core.planning.snapshot import Quota

log = logging.getLogger(__name__)


class QuotaReader:
    def __init__(self, quotas: Any, ec2: Any, clock: Callable[[], float],
                 every: float = Runtime().quota_refresh) -> None:
        self.quotas = quotas
        self.ec2 = ec2
        self._clock = clock
        self.every = every
        self._read_at = -float("inf")
        self._headroom: dict[tuple[str, bool], Quota] = {}

    def for_pools(self, pools: Iterable[Pool]) -> dict[str, Quota]:
        """Pool name -> its quota's headroom (pools whose quota is unknown are left out)."""
        pools = list(pools)
        wanted = {k for k in map(quota_key, pools) if k is not None}
        if wanted and self._clock() - self._read_at >= self.every:
            try:
                self._headroom = self._read(wanted)
            except (ClientError, BotoCoreError) as err:
                log.warning("EC2 vCPU quotas not read (%s): pools are not capped by them", err)
                self._headroom = {}
            self._read_at = self._clock()
        out = {}
        for pool in pools:
            key = quota_key(pool)
            if key in self._headroom:
                out[pool.name] = self._headroom[key]
        return out

    def _read(self, wanted: set[tuple[str, bool]]) -> dict[tuple[str, bool], Quota]:
        limits = {}
        for key in sorted(wanted):
            code, _ = QUOTAS[key]
            page = self.quotas.get_service_quota(ServiceCode="ec2", QuotaCode=code)
            limits[key] = float(page["Quota"]["Value"])
        used = dict.fromkeys(wanted, 0)
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"Filters": [{"Name": "instance-state-name", "Values": ["pending", "running"]}],
                                      "MaxResults": 1000}
            if token:
                kwargs["NextToken"] = token
            page = self.ec2.describe_instances(**kwargs)
            for reservation in page.get("Reservations") or ():
                for inst in reservation.get("Instances") or ():
                    cls = instance_class(str(inst.get("InstanceType", "")))
                    key = (cls or "", inst.get("InstanceLifecycle") == "spot")
                    if key in used:
                        cpu = inst.get("CpuOptions") or {}
                        used[key] += int(cpu.get("CoreCount", 0)) * int(cpu.get("ThreadsPerCore", 1))
            token = page.get("NextToken")
            if not token:
                break
        return {k: Quota(QUOTAS[k][1], int(limits[k]) - used[k]) for k in wanted}
