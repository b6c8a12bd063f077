"""An AKS cluster's agent pools and a resource group's VM scale sets as `NodeGroup`s (for `import-pools`),
and tagging them.

Agent pools are the managed cluster's (azure-mgmt-containerservice): VM size, zones, Spot priority,
System mode, node labels and taints, and the autoscaler bounds when AKS's own autoscaler is on. Scale
sets are listed in the resource group (azure-mgmt-compute); which belong to the cluster is the
core's call (cluster-autoscaler's tags, scaler.core.config.adopt). Tags are merged, never replaced.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from azure.core.credentials import TokenCredential
from azure.core.exceptions import HttpResponseError, ServiceRequestError
from azure.mgmt.compute import ComputeManagementClient
from azure.mgmt.compute import models as cm
from azure.mgmt.containerservice import ContainerServiceClient

from scaler.core.config.adopt import NodeGroup
from scaler.core.model import keys
from scaler.providers.azure import default_credential, provider_error


def _text(value: Any) -> str:
    """An SDK enum (a str subclass whose str() is its class name) or a string, lower case."""
    return str(getattr(value, "value", value) or "").lower()


class AzureGroups:
    def __init__(self, *, subscription_id: str, resource_group: str, cluster_name: str,
                 credential: TokenCredential | None = None, base_url: str | None = None,
                 polling_interval: float = 5.0) -> None:
        self.resource_group, self.cluster_name = resource_group, cluster_name
        cred = credential or default_credential()
        extra: dict[str, Any] = {"retry_total": 3, **({"base_url": base_url} if base_url else {})}
        self.aks = ContainerServiceClient(cred, subscription_id, polling_interval=polling_interval, **extra)
        self.compute = ComputeManagementClient(cred, subscription_id, polling_interval=polling_interval, **extra)

    def _call(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (HttpResponseError, ServiceRequestError) as err:
            raise provider_error(what, err) from err

    def groups(self) -> list[NodeGroup]:
        pools = self._call("list agent pools", lambda: list(self.aks.agent_pools.list(self.resource_group,
                                                                                        self.cluster_name)))
        sets = self._call("list scale sets",
                          lambda: list(self.compute.virtual_machine_scale_sets.list(self.resource_group)))
        # The scale sets AKS makes for its agent pools are read as the agent pools.
        own = [s for s in sets if not any(k.startswith(keys.TAG_AKS_MANAGED_PREFIX) for k in s.tags or {})]
        return [self._agent_pool(p) for p in pools] + [self._scale_set(s) for s in own]

    @staticmethod
    def _agent_pool(p: Any) -> NodeGroup:
        count = int(p.count or 0)
        if p.enable_auto_scaling and p.max_count is not None:
            low, high, note = int(p.min_count or 0), int(p.max_count), ""
        else:
            low, high = 0, count
            note = (f"AKS autoscaling is off: max is its node count ({count}), min 0; raise max in the pools "
                    "file to let the scaler grow it")
        return NodeGroup(
            name=str(p.name), tags=dict(p.tags or {}), instance_types=(str(p.vm_size),) if p.vm_size else (),
            zones=tuple(p.availability_zones or ()), min_size=low, max_size=high,
            spot=_text(p.scale_set_priority) == "spot", labels=dict(p.node_labels or {}),
            taints=tuple(p.node_taints or ()), system=_text(p.mode) == "system",
            azure_kind="agentpool", bounds_note=note)

    @staticmethod
    def _scale_set(s: Any) -> NodeGroup:
        tags = dict(s.tags or {})
        capacity = int(s.sku.capacity or 0) if s.sku else 0
        bounds = (tags.get(keys.TAG_CA_AZURE_MIN, ""), tags.get(keys.TAG_CA_AZURE_MAX, ""))
        if all(b.isdigit() for b in bounds):
            low, high, note = int(bounds[0]), int(bounds[1]), ""
        else:
            low, high = 0, capacity
            note = (f"no {keys.TAG_CA_AZURE_MIN} / {keys.TAG_CA_AZURE_MAX} tags: max is its capacity ({capacity}), "
                    "min 0; raise max in the pools file to let the scaler grow it")
        profile = s.virtual_machine_profile
        return NodeGroup(
            name=str(s.name), tags=tags, instance_types=(str(s.sku.name),) if s.sku and s.sku.name else (),
            zones=tuple(s.zones or ()), min_size=low, max_size=high,
            spot=_text(getattr(profile, "priority", None)) == "spot", azure_kind="vmss", bounds_note=note)

    def add_tags(self, group: NodeGroup, tags: Mapping[str, str]) -> None:
        """Merge tags into the agent pool (AKS copies them to its scale set) or the scale set."""
        if group.azure_kind == "agentpool":
            pool = self._call("get agent pool", self.aks.agent_pools.get, self.resource_group, self.cluster_name,
                              group.name)
            pool.tags = {**(pool.tags or {}), **tags}
            poller = self._call("update agent pool", self.aks.agent_pools.begin_create_or_update,
                                self.resource_group, self.cluster_name, group.name, pool)
        else:
            current = self._call("get scale set", self.compute.virtual_machine_scale_sets.get, self.resource_group,
                                 group.name)
            update = cm.VirtualMachineScaleSetUpdate(tags={**(current.tags or {}), **tags})
            poller = self._call("update scale set", self.compute.virtual_machine_scale_sets.begin_update,
                                self.resource_group, group.name, update)
        self._call("tag update", poller.result)
