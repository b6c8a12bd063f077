"""Azure: AKS agent pools (azure-mgmt-containerservice) and plain VM scale sets (azure-mgmt-compute).

- agentpool pools: read `count` and the machines; set `count` (PUT agentPools, a long-running
  operation left to finish in the background, its error read on a later pass); remove one node with
  the agent pool's delete-machines operation (the pool's count drops with it).
- vmss pools: read `sku.capacity` and the instances (with their instance view); set the capacity
  (PATCH); remove one node by deleting that instance.
- Allocation failures (SkuNotAvailable, ZonalAllocationFailed, OverconstrainedAllocationRequest,
  quota errors) come from the failed operations and from instances whose provisioning failed; they
  become LaunchFailures, which mark the offering unavailable.
- An evicted Spot instance (deallocated, eviction policy Deallocate) is reported by `interruptions()`
  until acknowledged, so the planner drains and replaces it and the actuator deletes it.

Credentials: azure-identity's WorkloadIdentityCredential in the cluster (the federated token the
workload identity webhook mounts), DefaultAzureCredential elsewhere. Never a static secret.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable, Iterable
from typing import Any

from azure.core.credentials import TokenCredential
from azure.core.exceptions import (
    ClientAuthenticationError,
    HttpResponseError,
    ResourceNotFoundError,
    ServiceRequestError,
)
from azure.core.polling import LROPoller
from azure.identity import DefaultAzureCredential, WorkloadIdentityCredential
from azure.mgmt.compute import ComputeManagementClient
from azure.mgmt.compute import models as cm
from azure.mgmt.containerservice import ContainerServiceClient
from azure.mgmt.containerservice import models as csm

from scaler.core.config.pool import Pool
from scaler.core.config.settings import ScalerConfig
from scaler.core.model.interruption import Interruption
from scaler.core.planning.snapshot import CloudInstance, FailureKind, LaunchFailure, PoolObservation
from scaler.providers import base
from scaler.providers.azure_quotas import AzureQuotaReader
from scaler.providers.base import ProviderError, check_size

log = logging.getLogger(__name__)
# azure-identity logs a failed token as a WARNING of many paragraphs, then raises the same text: the loop
# logs the error once (provider_error), so its own copy is silenced.
logging.getLogger("azure.identity").setLevel(logging.ERROR)

_VMSS_VM = re.compile(r"^/subscriptions/[^/]+/resourcegroups/[^/]+/providers/microsoft\.compute/"
                      r"virtualmachinescalesets/(?P<vmss>[^/]+)/virtualmachines/(?P<id>[^/]+)$")
_AKS_VMSS = re.compile(r"^aks-(?P<pool>[a-z0-9]+)-\d+-vmss$")

# Azure error codes of a refused allocation -> kind. Quota errors come as QuotaExceeded or as
# OperationNotAllowed with a quota message.
FAILURE_CODES: dict[str, FailureKind] = {
    "SkuNotAvailable": "capacity",
    "ZonalAllocationFailed": "capacity",
    "AllocationFailed": "capacity",
    "OverconstrainedAllocationRequest": "capacity",
    "OverconstrainedZonalAllocationRequest": "capacity",
    "SpotAllocationFailed": "capacity",
    "QuotaExceeded": "quota",
    "SKUFamilyQuotaExceeded": "quota",
    "LowPriorityCoresQuotaExceeded": "quota",
    "SubscriptionRequestsThrottled": "other",
    "InvalidParameter": "config",
}


def failure_kind(code: str, message: str) -> FailureKind:
    if code in FAILURE_CODES:
        return FAILURE_CODES[code]
    if "quota" in message.lower():
        return "quota"
    return "other"


def pool_zone(pool: Pool, zone: str | None) -> str | None:
    """Azure names a zone "1"; a pool (and the node's topology label) "eastus-1": the pool's form."""
    if zone is None:
        return None
    return next((z for z in pool.zones if z == zone or z.endswith(f"-{zone}")), zone)


def aks_pool_name(pool: Pool) -> str:
    """AKS agent pool names are 1-12 lower-case letters and digits: the pool's name without the rest."""
    return pool.provider_ref or re.sub(r"[^a-z0-9]", "", pool.name)[:12]


def vm_resource_id(provider_id: str) -> str:
    """azure:///subscriptions/... -> /subscriptions/... (lower case: Azure ids are case-insensitive)."""
    return provider_id.removeprefix("azure://").lower()


def provider_error(what: str, err: Exception) -> ProviderError:
    """An azure-core error as the typed ProviderError the loop understands."""
    message = f"azure {what}: {err}"
    if isinstance(err, ClientAuthenticationError):
        # azure-identity's message is a paragraph per credential it tried: its first line and the link say it.
        lines = [line.strip() for line in str(err).splitlines() if line.strip()] or [type(err).__name__]
        link = re.search(r"https://\S+?(?=[.,]?$)", lines[-1]) if len(lines) > 1 else None
        return base.NotAuthorized(f"azure {what}: {lines[0]}" + (f" (see {link.group(0)})" if link else ""))
    if isinstance(err, ResourceNotFoundError):
        return base.NotFound(message)
    if isinstance(err, HttpResponseError):
        status = err.status_code or 0
        code = (err.error.code if err.error else None) or ""
        if status == 429:
            return base.Throttled(message)
        if status >= 500:
            return base.ServerError(message)
        if status in (401, 403):
            return base.NotAuthorized(message)
        kind = failure_kind(code, str(err))
        if kind == "quota":
            return base.QuotaExceeded(message)
        if kind == "capacity":
            return base.CapacityUnavailable(message)
        if status == 400:
            return base.InvalidRequest(message)
        return ProviderError(message)
    if isinstance(err, ServiceRequestError):
        return base.NetworkError(message)
    return ProviderError(message)


def default_credential() -> TokenCredential:
    if os.environ.get("AZURE_FEDERATED_TOKEN_FILE"):
        return WorkloadIdentityCredential()
    return DefaultAzureCredential(exclude_interactive_browser_credential=True)


class AzureProvider:
    name = "azure"

    def __init__(self, config: ScalerConfig, *, subscription_id: str, resource_group: str,
                 cluster_name: str | None = None, credential: TokenCredential | None = None,
                 base_url: str | None = None, clock: Callable[[], float] = time.time,
                 polling_interval: float = 5.0) -> None:
        self.config = config
        self.resource_group = resource_group
        self.cluster_name = cluster_name or config.cluster
        self._clock = clock
        cred = credential or default_credential()
        # Few retries: a pass that fails is retried by the loop with its own jittered backoff.
        extra: dict[str, Any] = {"retry_total": 3, **({"base_url": base_url} if base_url else {})}
        self.aks = ContainerServiceClient(cred, subscription_id, polling_interval=polling_interval, **extra)
        self.compute = ComputeManagementClient(cred, subscription_id, polling_interval=polling_interval, **extra)
        self._pools = {p.name: p for p in config.pools}
        self.quotas = AzureQuotaReader(self.compute, config.region, clock, every=config.runtime.quota_refresh)
        self._instances: dict[str, str] = {}  # VM resource id (lower) -> pool
        self._machines: dict[str, str] = {}  # VM resource id (lower) -> AKS machine name
        self._pollers: dict[str, list[tuple[str, LROPoller[Any]]]] = {}
        self._failed_instances: set[str] = set()
        self._evicted: list[str] = []
        self._acknowledged: set[str] = set()  # evicted instances already handled (until they are deleted)

    def _call(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (HttpResponseError, ServiceRequestError) as err:
            raise provider_error(what, err) from err

    # --- the PoolProvider interface -------------------------------------------------------------
    def pool(self, name: str) -> Pool:
        try:
            return self._pools[name]
        except KeyError:
            raise base.NotFound(f"azure: no pool {name!r}") from None

    def observe(self, now: float) -> dict[str, PoolObservation]:
        out: dict[str, PoolObservation] = {}
        instances: dict[str, str] = {}
        self._evicted = []
        for pool in self._pools.values():
            if pool.azure_kind == "agentpool":
                obs = self._observe_agent_pool(pool, instances)
            else:
                obs = self._observe_vmss(pool, instances, now)
            zonal = {f.reason for f in obs.failures}  # an instance's failure says which zone; prefer it
            obs.failures = [f for f in self._operation_failures(pool.name, now) if f.reason not in zonal] + obs.failures
            out[pool.name] = obs
        for name, quota in self.quotas.for_pools(self._pools.values()).items():
            out[name].quota = quota
        self._instances = instances
        self._acknowledged &= set(self._evicted)
        return out

    def _observe_agent_pool(self, pool: Pool, instances: dict[str, str]) -> PoolObservation:
        name = aks_pool_name(pool)
        ap = self._call("get agent pool", self.aks.agent_pools.get, self.resource_group, self.cluster_name, name)
        machines = list(self._call("list machines", self.aks.machines.list, self.resource_group, self.cluster_name,
                                   name))
        members = []
        for m in machines:
            rid = ((m.properties.resource_id if m.properties else None) or "").lower()
            if rid:
                instances[rid] = pool.name
                self._machines[rid] = str(m.name)
                members.append(CloudInstance(f"azure://{rid}", pool_zone(pool, m.zones[0] if m.zones else None)))
        return PoolObservation(pool=pool, desired=int(ap.count or 0), instances=len(machines), members=members)

    def _observe_vmss(self, pool: Pool, instances: dict[str, str], now: float) -> PoolObservation:
        name = pool.provider_ref or pool.name
        ss = self._call("get scale set", self.compute.virtual_machine_scale_sets.get, self.resource_group, name)
        vms = list(self._call("list instances", self.compute.virtual_machine_scale_set_vms.list, self.resource_group,
                              name, expand="instanceView"))
        spot = (ss.virtual_machine_profile.priority if ss.virtual_machine_profile else None) in ("Spot", "Low")
        failures: list[LaunchFailure] = []
        members = []
        for vm in vms:
            rid = str(vm.id).lower()
            instances[rid] = pool.name
            statuses = [s.code or "" for s in (vm.instance_view.statuses if vm.instance_view else None) or ()]
            zone = pool_zone(pool, vm.zones[0] if vm.zones else None)
            failed = [c for c in statuses if c.startswith("ProvisioningState/failed/")]
            if failed:
                if rid not in self._failed_instances:
                    self._failed_instances.add(rid)
                    code = failed[0].rsplit("/", 1)[-1]
                    msgs = [s.message or "" for s in (vm.instance_view.statuses if vm.instance_view else ())
                            if (s.code or "") == failed[0]]
                    failures.append(LaunchFailure(zone, failure_kind(code, msgs[0] if msgs else ""), code,
                                                  msgs[0] if msgs else code, now))
                continue
            if spot and "PowerState/deallocated" in statuses:
                self._evicted.append(rid)
                continue
            created = vm.time_created.timestamp() if vm.time_created else 0.0
            members.append(CloudInstance(f"azure://{rid}", zone, created))
        capacity = int(ss.sku.capacity or 0) if ss.sku else 0
        return PoolObservation(pool=pool, desired=capacity, instances=len(members), failures=failures, members=members)

    def _operation_failures(self, pool: str, now: float) -> list[LaunchFailure]:
        out = []
        keep = []
        for what, poller in self._pollers.get(pool, []):
            if not poller.done():
                keep.append((what, poller))
                continue
            try:
                poller.result(timeout=0)
            except HttpResponseError as err:
                code = (err.error.code if err.error else None) or "OperationFailed"
                message = (err.error.message if err.error else None) or str(err)
                log.warning("pool %s: %s failed: %s: %s", pool, what, code, message)
                out.append(LaunchFailure(None, failure_kind(code, message), code, message, now))
        self._pollers[pool] = keep
        return out

    def set_desired(self, pool: str, desired: int) -> None:
        p = self.pool(pool)
        check_size("azure", pool, desired, p.min_size, p.max_size)
        if p.azure_kind == "agentpool":
            name = aks_pool_name(p)
            ap = self._call("get agent pool", self.aks.agent_pools.get, self.resource_group, self.cluster_name, name)
            ap.count = desired
            poller = self._call("set agent pool count", self.aks.agent_pools.begin_create_or_update,
                                self.resource_group, self.cluster_name, name, ap)
        else:
            name = p.provider_ref or p.name
            ss = self._call("get scale set", self.compute.virtual_machine_scale_sets.get, self.resource_group, name)
            update = cm.VirtualMachineScaleSetUpdate(sku=cm.Sku(name=ss.sku.name, tier=ss.sku.tier, capacity=desired))
            poller = self._call("set scale set capacity", self.compute.virtual_machine_scale_sets.begin_update,
                                self.resource_group, name, update)
        self._pollers.setdefault(pool, []).append((f"scale to {desired}", poller))

    def delete_node(self, pool: str, provider_id: str) -> None:
        p = self.pool(pool)
        rid = vm_resource_id(provider_id)
        m = _VMSS_VM.match(rid)
        if m is None or self._instances.get(rid) != pool:
            raise base.NotFound(f"azure: {provider_id!r} is not an instance of pool {pool!r}")
        if p.azure_kind == "agentpool":
            machine = self._machines.get(rid)
            if machine is None:
                raise base.NotFound(f"azure: no machine of pool {pool!r} for {provider_id!r}")
            poller = self._call("delete machine", self.aks.agent_pools.begin_delete_machines, self.resource_group,
                                self.cluster_name, aks_pool_name(p),
                                csm.AgentPoolDeleteMachinesParameter(machine_names=[machine]))
        else:
            poller = self._call("delete instance", self.compute.virtual_machine_scale_sets.begin_delete_instances,
                                self.resource_group, p.provider_ref or p.name,
                                cm.VirtualMachineScaleSetVMInstanceRequiredIDs(instance_ids=[m.group("id")]))
        self._pollers.setdefault(pool, []).append((f"delete {m.group('id')}", poller))
        self._instances.pop(rid, None)

    def pool_of(self, provider_id: str) -> str | None:
        rid = vm_resource_id(provider_id)
        found = self._instances.get(rid)
        if found is not None:
            return found
        m = _VMSS_VM.match(rid)
        if m is None:
            return None
        for p in self._pools.values():  # an AKS node that registered before its machine was listed
            if p.azure_kind == "agentpool":
                a = _AKS_VMSS.match(m.group("vmss"))
                if a and a.group("pool") == aks_pool_name(p):
                    return p.name
            elif m.group("vmss") == (p.provider_ref or p.name).lower():
                return p.name
        return None

    def interruptions(self) -> list[Interruption]:
        """Evicted (deallocated) Spot instances seen by the last observe and not acknowledged yet: they are
        gone already, so the deadline is now."""
        now = self._clock()
        return [Interruption("spot-interruption", f"azure://{rid}", now, now) for rid in self._evicted
                if rid not in self._acknowledged]

    def acknowledge(self, notices: Iterable[Interruption]) -> None:
        self._acknowledged.update(vm_resource_id(n.instance) for n in notices)
