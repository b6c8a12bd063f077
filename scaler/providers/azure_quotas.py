"""Azure's compute quotas as the planner's caps: the region's usages (azure-mgmt-compute `usage.list`, one
call for every family) read at most every `every` seconds; a refused scale meanwhile is read from its
failed operation in the pass that sees it (SKUFamilyQuotaExceeded).

Azure counts vCPUs per VM family for regular VMs (`standardNCASv3_T4Family`, ...) and, for Spot VMs, in
one regional pool (`lowPriorityCores`). A pool on a capacity reservation group is left uncapped here (its
VMs use the quota the reservation already holds). A quota that cannot be read caps nothing (logged).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from typing import Any, Final

from azure.core.exceptions import HttpResponseError, ServiceRequestError

from scaler.core.config.pool import Pool
from scaler.core.config.runtime import Runtime
from scaler.core.planning.snapshot import Quota

log = logging.getLogger(__name__)

SPOT_QUOTA: Final = "lowPriorityCores"
# VM size -> the family quota it counts against (the usage's name.value; Azure's own spelling varies in
# case between its APIs, so names are matched case-insensitively).
FAMILIES: Final = (
    (re.compile(r"^Standard_NC\d+as_T4_v3$", re.I), "standardNCASv3_T4Family"),
    (re.compile(r"^Standard_NC\d+ads_A100_v4$", re.I), "standardNCADSA100v4Family"),
    (re.compile(r"^Standard_ND96asr_v4$", re.I), "standardNDASv4_A100Family"),
    (re.compile(r"^Standard_ND96amsr_A100_v4$", re.I), "standardNDAMSv4_A100Family"),
    (re.compile(r"^Standard_ND96isr_H100_v5$", re.I), "standardNDSH100v5Family"),
    (re.compile(r"^Standard_D\d+s_v5$", re.I), "standardDSv5Family"),
    (re.compile(r"^Standard_F\d+s_v2$", re.I), "standardFSv2Family"),
)


def family(vm_size: str) -> str | None:
    return next((name for pattern, name in FAMILIES if pattern.match(vm_size)), None)


def quota_name(pool: Pool) -> str | None:
    """The quota the pool's new VMs count against: Spot's regional one, else its size's family (None: a
    reservation's pool, or a size of no family known here)."""
    if pool.prepaid:
        return None
    if pool.capacity_type == "spot":
        return SPOT_QUOTA
    return family(pool.instance_types[0])


class AzureQuotaReader:
    def __init__(self, compute: Any, location: str, clock: Callable[[], float],
                 every: float = Runtime().quota_refresh) -> None:
        self.compute = compute
        self.location = location
        self._clock = clock
        self.every = every
        self._read_at = -float("inf")
        self._headroom: dict[str, Quota] = {}  # lower-cased quota name -> its headroom

    def for_pools(self, pools: Iterable[Pool]) -> dict[str, Quota]:
        """Pool name -> its quota's headroom (pools whose quota is unknown are left out)."""
        pools = list(pools)
        wanted = {n for n in map(quota_name, pools) if n is not None}
        if wanted and self._clock() - self._read_at >= self.every:
            try:
                self._headroom = self._read()
            except (HttpResponseError, ServiceRequestError) as err:
                log.warning("Azure compute quotas not read (%s): pools are not capped by them", err.message
                            if isinstance(err, HttpResponseError) else err)
                self._headroom = {}
            self._read_at = self._clock()
        out = {}
        for pool in pools:
            name = quota_name(pool)
            if name is not None and name.lower() in self._headroom:
                out[pool.name] = self._headroom[name.lower()]
        return out

    def _read(self) -> dict[str, Quota]:
        out = {}
        for usage in self.compute.usage.list(self.location):
            name = usage.name.value if usage.name is not None else None
            if name:
                out[name.lower()] = Quota(name, int(usage.limit) - int(usage.current_value))
        return out
