"""A small fake of the Azure Resource Manager endpoints the Azure provider calls, for `responses`.

Serves the documented JSON shapes of AKS agent pools and machines and of VM scale sets and their
instances, and runs every write as a long-running operation: the PUT/PATCH/POST answers 200/201/202
with an Azure-AsyncOperation (or Location) header, the status URL answers InProgress once, then
Succeeded or Failed with an ARM error body. `fail_next[(pool, verb)] = (code, message)` makes the next
such operation fail the way Azure reports an allocation failure. `usages` is the region's compute usage
list (GET .../providers/Microsoft.Compute/locations/eastus/usages), name -> (current, limit); every GET
is counted in `usage_reads`.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import responses
from azure.core.credentials import AccessToken

from scaler.core.model import keys

ARM = "https://management.azure.com"
JSON = dict[str, Any]


class FakeCredential:
    """A TokenCredential that never goes to the network."""

    def __init__(self) -> None:
        self.scopes: list[str] = []

    def get_token(self, *scopes: str, **_: Any) -> AccessToken:
        self.scopes.extend(scopes)
        return AccessToken("fake-arm-token", 4102444800)


class FakeArm:
    def __init__(self, rsps: responses.RequestsMock, subscription: str, rg: str, cluster: str) -> None:
        self.sub, self.rg, self.cluster = subscription, rg, cluster
        self.node_rg = f"MC_{rg}_{cluster}_eastus"
        self.agent_pools: dict[str, JSON] = {}
        self.machines: dict[str, list[str]] = {}  # agent pool -> VMSS instance ids
        self.scale_sets: dict[str, JSON] = {}
        self.vms: dict[str, list[JSON]] = {}
        self.ops: dict[str, list[JSON]] = {}  # operation id -> remaining status bodies
        self.fail_next: dict[tuple[str, str], tuple[str, str]] = {}
        self.calls: list[tuple[str, str]] = []
        self.usages: dict[str, tuple[int, int]] = {
            "cores": (12, 100), "lowPriorityCores": (0, 100), "standardNCASv3_T4Family": (8, 24),
            "standardDSv5Family": (4, 50), "standardNCADSA100v4Family": (0, 0)}
        self.usage_reads = 0
        self.throttle = 0  # answer this many agent pool GETs with 429 (ARM's throttling)
        self.server_errors = 0  # then this many with 500
        base = f"{ARM}/subscriptions/{subscription}/resourceGroups/{rg}/providers"
        aks = re.escape(f"{base}/Microsoft.ContainerService/managedClusters/{cluster}/agentPools/")
        vmss = re.escape(f"{base}/Microsoft.Compute/virtualMachineScaleSets/")
        cb = rsps.add_callback
        cb("GET", re.compile(aks[:-1] + r"\?"), self._list_pools)
        cb("GET", re.compile(vmss[:-1] + r"\?"), self._list_vmss)
        cb("GET", re.compile(aks + r"(?P<p>[^/?]+)\?"), self._get_pool)
        cb("PUT", re.compile(aks + r"(?P<p>[^/?]+)\?"), self._put_pool)
        cb("GET", re.compile(aks + r"(?P<p>[^/?]+)/machines\?"), self._list_machines)
        cb("POST", re.compile(aks + r"(?P<p>[^/?]+)/deleteMachines\?"), self._delete_machines)
        cb("GET", re.compile(vmss + r"(?P<s>[^/?]+)\?"), self._get_vmss)
        cb("PATCH", re.compile(vmss + r"(?P<s>[^/?]+)\?"), self._patch_vmss)
        cb("GET", re.compile(vmss + r"(?P<s>[^/?]+)/virtualMachines\?"), self._list_vms)
        cb("POST", re.compile(vmss + r"(?P<s>[^/?]+)/delete\?"), self._delete_instances)
        cb("GET", re.compile(re.escape(f"{ARM}/subscriptions/{subscription}/providers/") +
                             r"[^/]+/locations/eastus/operations/(?P<op>[^/?]+)"), self._operation)
        cb("GET", re.compile(re.escape(f"{ARM}/subscriptions/{subscription}/providers/Microsoft.Compute/locations/"
                                       "eastus/usages?")), self._usages)

    # --- state ------------------------------------------------------------------------------------
    def vmss_vm_id(self, scale_set: str, instance: str, rg: str | None = None) -> str:
        return (f"/subscriptions/{self.sub}/resourceGroups/{rg or self.node_rg}/providers/Microsoft.Compute/"
                f"virtualMachineScaleSets/{scale_set}/virtualMachines/{instance}")

    def aks_vmss(self, pool: str) -> str:
        return f"aks-{pool}-12345678-vmss"

    def add_agent_pool(self, name: str, count: int, vm_size: str, *, spot: bool = False,
                       zones: tuple[str, ...] = ("1",), **props: Any) -> None:
        """`props`: more agent pool properties as ARM spells them (nodeLabels, nodeTaints, mode, tags...)."""
        props = {"count": count, "vmSize": vm_size, "osType": "Linux", "mode": "User",
                 "type": "VirtualMachineScaleSets", "availabilityZones": list(zones),
                 "enableAutoScaling": False, "provisioningState": "Succeeded",
                 "powerState": {"code": "Running"}, "orchestratorVersion": "1.31.1", **props}
        if spot:
            # AKS labels and taints the nodes of a Spot pool itself.
            spot_taint = f"{keys.TAINT_AZURE_SPOT}={keys.TAINT_AZURE_SPOT_VALUE}:NoSchedule"
            props |= {"scaleSetPriority": "Spot", "scaleSetEvictionPolicy": "Delete", "spotMaxPrice": -1,
                      "nodeLabels": {**props.get("nodeLabels", {}), keys.LABEL_AZURE_SCALESET_PRIORITY: "spot"},
                      "nodeTaints": [*props.get("nodeTaints", []), spot_taint]}
        self.agent_pools[name] = {
            "id": f"/subscriptions/{self.sub}/resourceGroups/{self.rg}/providers/Microsoft.ContainerService/"
                  f"managedClusters/{self.cluster}/agentPools/{name}",
            "name": name, "type": "Microsoft.ContainerService/managedClusters/agentPools", "properties": props}
        self.machines[name] = [str(i) for i in range(count)]

    def add_scale_set(self, name: str, capacity: int, vm_size: str, *, spot: bool = False,
                      tags: dict[str, str] | None = None) -> None:
        self.scale_sets[name] = {"tags": dict(tags or {}),
            "id": f"/subscriptions/{self.sub}/resourceGroups/{self.rg}/providers/Microsoft.Compute/"
                  f"virtualMachineScaleSets/{name}",
            "name": name, "type": "Microsoft.Compute/virtualMachineScaleSets", "location": "eastus",
            "zones": ["1"], "sku": {"name": vm_size, "tier": "Standard", "capacity": capacity},
            "properties": {"provisioningState": "Succeeded", "orchestrationMode": "Uniform",
                           "virtualMachineProfile": {"priority": "Spot" if spot else "Regular",
                                                     **({"evictionPolicy": "Deallocate"} if spot else {})}}}
        self.vms[name] = [self._vm(name, str(i)) for i in range(capacity)]

    def _vm(self, scale_set: str, instance: str, statuses: list[JSON] | None = None) -> JSON:
        return {"id": self.vmss_vm_id(scale_set, instance, self.rg), "name": f"{scale_set}_{instance}",
                "instanceId": instance, "type": "Microsoft.Compute/virtualMachineScaleSets/virtualMachines",
                "location": "eastus", "zones": ["1"],
                "properties": {"provisioningState": "Succeeded", "latestModelApplied": True, "instanceView": {
                    "statuses": statuses or [
                        {"code": "ProvisioningState/succeeded", "level": "Info",
                         "displayStatus": "Provisioning succeeded"},
                        {"code": "PowerState/running", "level": "Info", "displayStatus": "VM running"}]}}}

    # --- operations ---------------------------------------------------------------------------
    def _start(self, provider: str, key: tuple[str, str], header: str = "Azure-AsyncOperation") -> dict[str, str]:
        op = str(uuid.uuid4())
        failure = self.fail_next.pop(key, None)
        final: JSON = {"name": op, "status": "Succeeded", "startTime": "2026-11-22T03:00:00Z"}
        if failure:
            final = {"name": op, "status": "Failed", "startTime": "2026-11-22T03:00:00Z",
                     "error": {"code": failure[0], "message": failure[1]}}
        self.ops[op] = [{"name": op, "status": "InProgress"}, final]
        url = (f"{ARM}/subscriptions/{self.sub}/providers/{provider}/locations/eastus/operations/{op}"
               "?api-version=2024-01-01")
        return {header: url, "Retry-After": "0"}

    def _operation(self, request: Any) -> tuple[int, dict[str, str], str]:
        op = re.search(r"operations/([^/?]+)", request.url).group(1)  # type: ignore[union-attr]
        bodies = self.ops[op]
        body = bodies.pop(0) if len(bodies) > 1 else bodies[0]
        return 200, {"Retry-After": "0"}, json.dumps(body)

    def _name(self, request: Any, group: str) -> str:
        for pattern in (r"agentPools/(?P<p>[^/?]+)", r"virtualMachineScaleSets/(?P<s>[^/?]+)"):
            m = re.search(pattern, request.url)
            if m and group in m.groupdict():
                return m.group(group)
        raise AssertionError(request.url)

    # --- AKS ------------------------------------------------------------------------------------
    def _get_pool(self, request: Any) -> tuple[int, dict[str, str], str]:
        name = self._name(request, "p")
        self.calls.append(("GET agentPool", name))
        if self.throttle > 0:
            self.throttle -= 1
            return 429, {"Retry-After": "0"}, json.dumps({"error": {
                "code": "TooManyRequests", "message": "The request is being throttled as the limit has been reached "
                "for operation type - Read_ObservationWindow_00:05:00."}})
        if self.server_errors > 0:
            self.server_errors -= 1
            return 500, {"Retry-After": "0"}, json.dumps({"error": {
                "code": "InternalServerError", "message": "Encountered internal server error."}})
        if name not in self.agent_pools:
            return 404, {}, json.dumps({"error": {"code": "NotFound", "message": f"agent pool {name} not found"}})
        return 200, {}, json.dumps(self.agent_pools[name])

    def _put_pool(self, request: Any) -> tuple[int, dict[str, str], str]:
        name = self._name(request, "p")
        body = json.loads(request.body)
        self.calls.append(("PUT agentPool", f"{name} count={body['properties']['count']}"))
        headers = self._start("Microsoft.ContainerService", (name, "scale"))
        pool = self.agent_pools[name]
        if not any(b["status"] == "Failed" for b in self.ops[headers["Azure-AsyncOperation"].split("/")[-1]
                                                             .split("?")[0]]):
            count = int(body["properties"]["count"])
            have = self.machines[name]
            nxt = max((int(i) for i in have), default=-1) + 1
            self.machines[name] = have[:count] + [str(nxt + i) for i in range(max(0, count - len(have)))]
            pool["properties"]["count"] = count
            if "tags" in body["properties"]:
                pool["properties"]["tags"] = body["properties"]["tags"]
        return 200, headers, json.dumps(pool | {"properties": pool["properties"] | {"provisioningState": "Updating"}})

    def _list_machines(self, request: Any) -> tuple[int, dict[str, str], str]:
        name = self._name(request, "p")
        vmss = self.aks_vmss(name)
        value = [{"id": f"{self.agent_pools[name]['id']}/machines/{vmss}{int(i):06d}",
                  "name": f"{vmss}{int(i):06d}",
                  "type": "Microsoft.ContainerService/managedClusters/agentPools/machines",
                  "zones": ["1"], "properties": {"resourceId": self.vmss_vm_id(vmss, i),
                                                 "network": {"ipAddresses": [{"family": "IPv4", "ip": "10.224.0.4"}]}}}
                 for i in self.machines[name]]
        return 200, {}, json.dumps({"value": value})

    def _delete_machines(self, request: Any) -> tuple[int, dict[str, str], str]:
        name = self._name(request, "p")
        names = json.loads(request.body)["machineNames"]
        self.calls.append(("POST deleteMachines", f"{name} {names}"))
        vmss = self.aks_vmss(name)
        self.machines[name] = [i for i in self.machines[name] if f"{vmss}{int(i):06d}" not in names]
        self.agent_pools[name]["properties"]["count"] = len(self.machines[name])
        return 202, self._start("Microsoft.ContainerService", (name, "delete"), "Location"), ""

    def _list_pools(self, request: Any) -> tuple[int, dict[str, str], str]:
        return 200, {}, json.dumps({"value": list(self.agent_pools.values())})

    def _list_vmss(self, request: Any) -> tuple[int, dict[str, str], str]:
        return 200, {}, json.dumps({"value": list(self.scale_sets.values())})

    # --- VMSS -----------------------------------------------------------------------------------
    def _get_vmss(self, request: Any) -> tuple[int, dict[str, str], str]:
        return 200, {}, json.dumps(self.scale_sets[self._name(request, "s")])

    def _patch_vmss(self, request: Any) -> tuple[int, dict[str, str], str]:
        name = self._name(request, "s")
        body = json.loads(request.body)
        if "sku" not in body:  # a tags update
            self.calls.append(("PATCH vmss", f"{name} tags"))
            self.scale_sets[name]["tags"] = body.get("tags", {})
            return 200, self._start("Microsoft.Compute", (name, "update")), json.dumps(self.scale_sets[name])
        capacity = int(body["sku"]["capacity"])
        self.calls.append(("PATCH vmss", f"{name} capacity={capacity}"))
        headers = self._start("Microsoft.Compute", (name, "scale"))
        failure = self.ops[headers["Azure-AsyncOperation"].split("/")[-1].split("?")[0]][-1].get("error")
        ss = self.scale_sets[name]
        have = self.vms[name]
        nxt = max((int(v["instanceId"]) for v in have), default=-1) + 1
        new = [self._vm(name, str(nxt + i), [
            {"code": f"ProvisioningState/failed/{failure['code']}", "level": "Error",
             "displayStatus": "Provisioning failed", "message": failure["message"]}] if failure else None)
            for i in range(max(0, capacity - len(have)))]
        self.vms[name] = have[:capacity] + new
        ss["sku"]["capacity"] = capacity
        return 200, headers, json.dumps(ss)

    def _list_vms(self, request: Any) -> tuple[int, dict[str, str], str]:
        assert "%24expand=instanceView" in request.url or "$expand=instanceView" in request.url
        return 200, {}, json.dumps({"value": self.vms[self._name(request, "s")]})

    def _delete_instances(self, request: Any) -> tuple[int, dict[str, str], str]:
        name = self._name(request, "s")
        ids = json.loads(request.body)["instanceIds"]
        self.calls.append(("POST vmss delete", f"{name} {ids}"))
        self.vms[name] = [v for v in self.vms[name] if v["instanceId"] not in ids]
        self.scale_sets[name]["sku"]["capacity"] = len(self.vms[name])
        return 202, self._start("Microsoft.Compute", (name, "delete"), "Location"), ""

    def _usages(self, request: Any) -> tuple[int, dict[str, str], str]:
        """Compute usages as ARM lists them (Usages_List: unit, currentValue, limit, name.value/localizedValue)."""
        self.usage_reads += 1
        local = {"cores": "Total Regional vCPUs", "lowPriorityCores": "Total Regional Low-priority vCPUs"}
        value = [{"unit": "Count", "currentValue": cur, "limit": lim,
                  "name": {"value": name, "localizedValue": local.get(name, f"Standard {name[8:-6]} Family vCPUs")}}
                 for name, (cur, lim) in self.usages.items()]
        return 200, {}, json.dumps({"value": value})

    def evict(self, scale_set: str, instance: str) -> None:
        """A Spot eviction with policy Deallocate: the instance stays, deallocated."""
        for vm in self.vms[scale_set]:
            if vm["instanceId"] == instance:
                vm["properties"]["instanceView"]["statuses"] = [
                    {"code": "ProvisioningState/succeeded", "level": "Info"},
                    {"code": "PowerState/deallocated", "level": "Info", "displayStatus": "VM deallocated"}]
