"""Random clusters for the planner-against-kube-scheduler diff (scheduler_diff.py). Pure: a seed in,
objects out (as the API takes them), nothing created here.

A `Scenario` is one seed's cluster: nodes of a handful of shapes (the pools of `POOLS`, each node as the
pool's template describes it: labels, taints, allocatable, and for DRA pools the NVIDIA driver's slices),
zone and extra labels, extra taints; the storage (zonal PVs bound to claims, WaitForFirstConsumer classes,
static local volumes); the DRA objects (the NVIDIA chart's DeviceClasses, claim templates, shared claims);
pods already bound; then the pending pods, one at a time, each with the features it exercises (the table's
rows) and the objects to create just before it (its own claims).

The pending pods carry no label that another pod's required pod affinity selects (`tier` is only on the
pods already bound), and no preferred pod affinity or ScheduleAnyway spread: kube-scheduler's
InterPodAffinity and PodTopologySpread scores would then rank nodes by what the planner does not score
(docs/planner.md, "Checked against the real kube-scheduler").
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field
from typing import Any

from scaler.core.config.settings import ScalerConfig, parse_config
from scaler.core.dra import nvidia
from scaler.core.model import keys
from scaler.core.model.dra import DeviceTaint, ResourceSlice
from scaler.core.model.resources import format_resources

JSON = dict[str, Any]
NS = "default"
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
GPU = "nvidia.com/gpu"
DRIVER = nvidia.DRIVER
GPU_TOLERATION: JSON = {"key": GPU, "operator": "Exists", "effect": "NoSchedule"}
# The pools the nodes are made from (their templates give labels, taints, allocatable and DRA slices), and
# how many nodes of each a scenario has. None can scale up (max 0 beyond what exists is not needed: the
# verdict compared is fits-existing and its node, against anything else).
POOLS: JSON = {"cluster": "diff", "cloud": "aws", "region": "us-east-1", "pools": [
    {"name": "cpu", "role": "general", "instance_types": ["m6i.2xlarge"], "zones": list(ZONES), "max": 50},
    {"name": "l4x1", "instance_types": ["g6.xlarge"], "zones": list(ZONES), "max": 50},
    {"name": "l4x4", "instance_types": ["g6.12xlarge"], "zones": list(ZONES), "max": 50},
    {"name": "a100x8", "instance_types": ["p4d.24xlarge"], "zones": list(ZONES), "max": 50},
    {"name": "dra-l4", "instance_types": ["g6.12xlarge"], "zones": list(ZONES), "max": 50, "gpu_allocation": "dra"},
    {"name": "dra-a100", "instance_types": ["p4d.24xlarge"], "zones": list(ZONES), "max": 50,
     "gpu_allocation": "dra"},
    {"name": "dra-mig", "instance_types": ["p4d.24xlarge"], "zones": list(ZONES), "max": 50,
     "gpu_allocation": "dra", "gpu_sharing": {"mig": {"strategy": "mixed", "layout": "all-balanced"}}},
    # GPUs shared by memory (consumable capacity, issue 39): nodes of their own (`Generator._shared_nodes`)
    {"name": "dra-shared", "instance_types": ["g6.12xlarge"], "zones": list(ZONES), "max": 50,
     "gpu_allocation": "dra", "gpu_sharing": {"memory": {"step_gib": 4}}},
]}
NODE_COUNTS = {"cpu": 4, "l4x1": 2, "l4x4": 1, "a100x8": 1, "dra-l4": 3, "dra-a100": 2, "dra-mig": 2}
EXTRA_TAINTS = (("dedicated", "team-a", "NoSchedule"), ("spot", "true", "PreferNoSchedule"))
APPS = ("web", "db", "cache", "batch")
Gi = 2**30


def config() -> ScalerConfig:
    return parse_config(POOLS, "scheduler-diff pools")


@dataclass
class NodePlan:
    name: str
    pool: str
    labels: dict[str, str]
    taints: list[tuple[str, str, str]]
    allocatable: dict[str, int]
    slices: tuple[ResourceSlice, ...]


@dataclass
class PendingPod:
    pod: JSON
    features: tuple[str, ...]
    before: list[JSON] = field(default_factory=list)  # objects to create just before the pod (its claims)

    @property
    def name(self) -> str:
        return str(self.pod["metadata"]["name"])


@dataclass
class Scenario:
    seed: int
    nodes: list[NodePlan]
    setup: list[JSON]  # classes, volumes, claims, templates: created before the nodes' pods
    bound: list[JSON]  # pods with spec.nodeName set
    pending: list[PendingPod]


# --- DRA objects ------------------------------------------------------------------------------------
def device_class(c: nvidia.DeviceClass) -> JSON:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": c.name},
            "spec": {"selectors": [{"cel": {"expression": e}} for e in c.selectors]}}


def _sel(*exprs: str) -> list[JSON]:
    return [{"cel": {"expression": e}} for e in exprs]


def _attr(name: str) -> str:
    return f"device.attributes['{DRIVER}'].{name}"


def _exactly(cls: str, count: int = 1, *selectors: str, mode: str = "ExactCount") -> JSON:
    out: JSON = {"deviceClassName": cls, "allocationMode": mode}
    if mode == "ExactCount":
        out["count"] = count
    if selectors:
        out["selectors"] = _sel(*selectors)
    return out


GPU_CLASS, MIG_CLASS = nvidia.GPU_CLASS.name, nvidia.MIG_CLASS.name
L4 = f"{_attr('productName')} == 'NVIDIA L4'"
A100 = f"{_attr('productName')}.startsWith('NVIDIA A100')"
BIG_MEMORY = f"device.capacity['{DRIVER}'].memory.compareTo(quantity('30Gi')) >= 0"


def _profile(p: str) -> str:
    return f"{_attr('profile')} == '{p}'"


# Claim specs by name: (features, spec.devices)
CLAIM_SPECS: dict[str, tuple[tuple[str, ...], JSON]] = {
    "gpu": ((), {"requests": [{"name": "gpu", "exactly": _exactly(GPU_CLASS)}]}),
    "gpu-l4": ((), {"requests": [{"name": "gpu", "exactly": _exactly(GPU_CLASS, 1, L4)}]}),
    "gpu-2": ((), {"requests": [{"name": "gpu", "exactly": _exactly(GPU_CLASS, 2)}]}),
    "gpu-3-bigmem": ((), {"requests": [{"name": "gpu", "exactly": _exactly(GPU_CLASS, 3, BIG_MEMORY)}]}),
    "gpu-6": ((), {"requests": [{"name": "gpu", "exactly": _exactly(GPU_CLASS, 6)}]}),
    "gpu-all-l4": (("dra-all",), {"requests": [{"name": "gpu", "exactly": _exactly(GPU_CLASS, 0, L4, mode="All")}]}),
    "mig-1g": (("dra-mig",), {"requests": [{"name": "mig", "exactly": _exactly(MIG_CLASS, 1, _profile("1g.5gb"))}]}),
    "mig-3g": (("dra-mig",), {"requests": [{"name": "mig", "exactly": _exactly(MIG_CLASS, 1, _profile("3g.20gb"))}]}),
    "mig-2x1g-one-gpu": (("dra-mig", "dra-matchAttribute"), {
        "requests": [{"name": "mig", "exactly": _exactly(MIG_CLASS, 2, _profile("1g.5gb"))}],
        "constraints": [{"requests": ["mig"], "matchAttribute": f"{DRIVER}/parentUUID"}]}),
    "mig-3x2g": (("dra-mig",), {"requests": [{"name": "mig", "exactly": _exactly(MIG_CLASS, 3, _profile("2g.10gb"))}]}),
    "two-gpus-same-product": (("dra-matchAttribute",), {
        "requests": [{"name": "a", "exactly": _exactly(GPU_CLASS)}, {"name": "b", "exactly": _exactly(GPU_CLASS)}],
        "constraints": [{"requests": ["a", "b"], "matchAttribute": f"{DRIVER}/productName"}]}),
    "a100-or-mig-or-l4": (("dra-firstAvailable", "dra-mig"), {"requests": [{"name": "gpu", "firstAvailable": [
        {"name": "a100", **_exactly(GPU_CLASS, 1, A100)},
        {"name": "mig", **_exactly(MIG_CLASS, 1, _profile("3g.20gb"))},
        {"name": "l4", **_exactly(GPU_CLASS, 1, L4)}]}]}),
    "2-l4-or-1-a100": (("dra-firstAvailable",), {"requests": [{"name": "gpu", "firstAvailable": [
        {"name": "l4", **_exactly(GPU_CLASS, 2, L4)},
        {"name": "a100", **_exactly(GPU_CLASS, 1, A100)}]}]}),
    "gpu-and-mig": (("dra-mig",), {"requests": [
        {"name": "gpu", "exactly": _exactly(GPU_CLASS)}, {"name": "mig", "exactly": _exactly(MIG_CLASS, 1)}]}),
}
TEMPLATED = tuple(CLAIM_SPECS)

# Device taints (issue 39): the NVIDIA DRA driver's health taints on some DRA GPUs, a DeviceTaintRule's on one,
# and claims that tolerate them (drawn from a random stream of their own: the other draws stay as they were).
DEVICE_TAINTS = (("gpu.nvidia.com/xid", "79", "NoSchedule"), ("gpu.nvidia.com/gpu-lost", "", "NoExecute"))
RULE_TAINT = ("example.com/maintenance", "", "NoSchedule")
TAINT_SPECS: dict[str, tuple[tuple[str, ...], JSON]] = {
    "gpu-tolerates-xid": (("dra-taints",), {"requests": [{"name": "gpu", "exactly": {
        **_exactly(GPU_CLASS), "tolerations": [{"key": "gpu.nvidia.com/xid", "operator": "Exists"}]}}]}),
    # (both effects named: kube-controller-manager's device-taint-eviction controller honours only a toleration
    # that names NoExecute, and would evict a pod whose claim tolerates it with an empty effect)
    "gpu-2-tolerates-all": (("dra-taints",), {"requests": [{"name": "gpu", "exactly": {
        **_exactly(GPU_CLASS, 2), "tolerations": [{"operator": "Exists", "effect": "NoSchedule"},
                                                  {"operator": "Exists", "effect": "NoExecute"}]}}]}),
    "mig-1g-tolerates-noschedule": (("dra-taints", "dra-mig"), {"requests": [{"name": "mig", "exactly": {
        **_exactly(MIG_CLASS, 1, _profile("1g.5gb")),
        "tolerations": [{"operator": "Exists", "effect": "NoSchedule"}]}}]}),
}
CLAIM_SPECS.update(TAINT_SPECS)
# Extended resources served by DRA (issue 39): a class of our own names one (the NVIDIA chart's name none), and
# a class's implicit `deviceclass.resource.kubernetes.io/<class>` serves too; only DRA nodes can give them.
EXTENDED_CLASS: JSON = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                        "metadata": {"name": "gpu-extended.example.com"},
                        "spec": {"selectors": [{"cel": {"expression": nvidia.GPU_CLASS.selectors[0]}}],
                                 "extendedResourceName": "example.com/gpu"}}
EXTENDED_RESOURCES = ("example.com/gpu", f"deviceclass.resource.kubernetes.io/{nvidia.GPU_CLASS.name}")
# Consumable capacity (issue 39): claims for a share of a GPU's memory, rounded up to the dra-shared pool's
# 4 GiB steps (6Gi -> 8Gi, 10Gi -> 12Gi); two shares of one GPU in one claim; on GPUs that allow multiple
# allocations only (a GPU of another pool has no requestPolicy: its request of memory takes it whole).
SHARED_NODES = 2


def _share(memory: str, *selectors: str) -> JSON:
    return {**_exactly(GPU_CLASS, 1, *selectors), "capacity": {"requests": {"memory": memory}}}


SHARE_SPECS: dict[str, tuple[tuple[str, ...], JSON]] = {
    "share-4gi": (("dra-consumable",), {"requests": [{"name": "gpu", "exactly": _share("4Gi")}]}),
    "share-6gi": (("dra-consumable",), {"requests": [{"name": "gpu", "exactly": _share("6Gi")}]}),
    "share-10gi-l4": (("dra-consumable",), {"requests": [{"name": "gpu", "exactly": _share("10Gi", L4)}]}),
    "two-shares-one-gpu": (("dra-consumable", "dra-matchAttribute"), {
        "requests": [{"name": "a", "exactly": _share("4Gi")}, {"name": "b", "exactly": _share("8Gi")}],
        "constraints": [{"requests": ["a", "b"], "matchAttribute": f"{DRIVER}/uuid"}]}),
}
CLAIM_SPECS.update(SHARE_SPECS)


def claim_template(seed: int, spec: str) -> JSON:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": f"s{seed}-{spec}", "namespace": NS},
            "spec": {"spec": {"devices": CLAIM_SPECS[spec][1]}}}


def resource_claim(name: str, spec: str) -> JSON:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name, "namespace": NS},
            "spec": {"devices": CLAIM_SPECS[spec][1]}}


# --- storage ----------------------------------------------------------------------------------------
def storage_class(name: str, provisioner: str, mode: str, zones: tuple[str, ...] = ()) -> JSON:
    out: JSON = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
                 "provisioner": provisioner, "volumeBindingMode": mode}
    if zones:
        out["allowedTopologies"] = [{"matchLabelExpressions": [
            {"key": keys.LABEL_ZONE, "values": list(zones)}]}]
    return out


def volume(name: str, cls: str, key: str, value: str, claim: str | None = None) -> JSON:
    spec: JSON = {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": cls,
                  "persistentVolumeReclaimPolicy": "Retain",
                  "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": f"vol-{name}"},
                  "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                      {"key": key, "operator": "In", "values": [value]}]}]}}}
    if claim:
        spec["claimRef"] = {"namespace": NS, "name": claim}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": spec}


def claim(name: str, cls: str, volume_name: str | None = None) -> JSON:
    spec: JSON = {"accessModes": ["ReadWriteOnce"], "storageClassName": cls,
                  "resources": {"requests": {"storage": "5Gi"}}}
    if volume_name:
        spec["volumeName"] = volume_name
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": NS},
            "spec": spec}


# --- the generator ----------------------------------------------------------------------------------
class Generator:
    def __init__(self, seed: int, pods: int) -> None:
        self.seed, self.count = seed, pods
        self.rng = random.Random(seed)
        self.cfg = config()
        self.nodes: list[NodePlan] = []
        self.setup: list[JSON] = []
        self.bound_pvcs: list[str] = []
        self.shared: list[str] = []  # shared claims made so far (a later pod may use one again)
        self.taint_rng = random.Random(seed * 1000 + 39)
        self.share_rng = random.Random(seed * 1000 + 4039)  # consumable capacity: other draws stay as they were

    def scenario(self) -> Scenario:
        self._nodes()
        self._device_taints()
        self._storage()
        self.setup += [device_class(c) for c in nvidia.DEVICE_CLASSES]
        self.setup.append(EXTENDED_CLASS)
        self.setup += [claim_template(self.seed, s) for s in (*TEMPLATED, *TAINT_SPECS, *SHARE_SPECS)]
        bound = self._bound()
        pending = [self._pending(i) for i in range(self.count)]
        self._shared_nodes()
        self._share_pods(pending)
        return Scenario(self.seed, self.nodes, self.setup, bound, pending)

    def _shared_nodes(self) -> None:
        """The dra-shared pool's nodes: four L4s each, shared by memory (no pod bound to them at first)."""
        pool = self.cfg.pool("dra-shared")
        for i in range(SHARED_NODES):
            name = f"s{self.seed}-dra-shared-{i}"
            t = pool.template_node(self.share_rng.choice(ZONES))
            self.nodes.append(NodePlan(name, "dra-shared", {**t.labels, keys.LABEL_HOSTNAME: name, "disk": "ssd"},
                                       [(x.key, x.value, x.effect) for x in t.taints], dict(t.allocatable),
                                       pool.dra_slices(name)))

    def _share_pods(self, pending: list[PendingPod]) -> None:
        """A pod in eight asks for shares of a GPU's memory, mixed among the others (later ones see the shares
        kube-scheduler allocated to earlier ones, read back from the claims' consumedCapacity)."""
        rng = self.share_rng
        for i in range(self.count // 8):  # none when a run asks for no pods (the gang test)
            name = f"s{self.seed}-share{i:03d}"
            pod = self._pod(name, {"diff": str(self.seed)}, rng.choice((250, 500, 1000)), rng.choice((1, 2)) * Gi)
            pod["spec"]["tolerations"] = [dict(GPU_TOLERATION)]
            spec = rng.choice(tuple(SHARE_SPECS))
            pod["spec"]["resourceClaims"] = [{"name": "c0", "resourceClaimTemplateName": f"s{self.seed}-{spec}"}]
            pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "c0"}]
            pending.insert(rng.randint(0, len(pending)), PendingPod(pod, ("dra", *SHARE_SPECS[spec][0])))

    def _nodes(self) -> None:
        rng = self.rng
        pools = {p.name: p for p in self.cfg.pools}
        for pool_name, n in NODE_COUNTS.items():
            for i in range(n):
                pool = pools[pool_name]
                zone = rng.choice(ZONES)
                name = f"s{self.seed}-{pool_name}-{i}"
                t = pool.template_node(zone)
                labels = {**t.labels, keys.LABEL_HOSTNAME: name, "disk": rng.choice(("ssd", "hdd"))}
                taints = [(x.key, x.value, x.effect) for x in t.taints]
                if rng.random() < 0.3:
                    taints.append(rng.choice(EXTRA_TAINTS))
                self.nodes.append(NodePlan(name, pool_name, labels, taints, dict(t.allocatable),
                                           pool.dra_slices(name)))

    def _device_taints(self) -> None:
        """A third of the DRA nodes get one device tainted as the driver's health checks do, and one device
        of another node is tainted by a DeviceTaintRule."""
        rng = self.taint_rng
        dra = [n for n in self.nodes if any(s.devices for s in n.slices)]
        for n in dra:
            if rng.random() < 0.35:
                n.slices = _taint_one(n.slices, rng, DeviceTaint(*rng.choice(DEVICE_TAINTS)))
        node = rng.choice(dra)
        s = next(s for s in node.slices if s.devices)
        device = rng.choice(s.devices).name
        key, value, effect = RULE_TAINT
        self.setup.append({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
                           "metadata": {"name": f"s{self.seed}-maintenance"},
                           "spec": {"deviceSelector": {"driver": s.driver, "pool": s.pool.name, "device": device},
                                    "taint": {"key": key, "effect": effect, **({"value": value} if value else {})}}})

    def _extended(self, pod: JSON, features: list[str]) -> None:
        """Now and then a GPU pod asks for its GPUs as an extended resource a DeviceClass serves instead."""
        rng = self.taint_rng
        if rng.random() >= 0.5:
            return
        name = rng.choice(EXTENDED_RESOURCES)
        resources = pod["spec"]["containers"][0]["resources"]
        for part in ("requests", "limits"):
            resources[part][name] = resources[part].pop(GPU)
        features.append("dra-extended-resource")

    def _tolerant(self, spec_name: str) -> str:
        """Now and then a claim that tolerates device taints instead."""
        rng = self.taint_rng
        return rng.choice(tuple(TAINT_SPECS)) if rng.random() < 0.2 else spec_name

    def _storage(self) -> None:
        s = self.seed
        self.setup += [storage_class(f"s{s}-zonal", "ebs.csi.aws.com", "Immediate"),
                       storage_class(f"s{s}-wffc", "ebs.csi.aws.com", "WaitForFirstConsumer", ZONES[:2]),
                       storage_class(f"s{s}-local", "kubernetes.io/no-provisioner", "WaitForFirstConsumer")]
        for i in range(6):
            zone = self.rng.choice(ZONES)
            pv, pvc = f"s{s}-pv-{i}", f"s{s}-data-{i}"
            self.setup += [volume(pv, f"s{s}-zonal", keys.LABEL_ZONE, zone, pvc),
                           claim(pvc, f"s{s}-zonal", pv)]
            self.bound_pvcs.append(pvc)
        for i, node in enumerate(self.rng.sample(self.nodes, 5)):
            self.setup.append(volume(f"s{s}-local-{i}", f"s{s}-local", keys.LABEL_HOSTNAME, node.name))

    def _bound(self) -> list[JSON]:
        """0-3 pods per node, each fitting what is left of it: labels others select, host ports, GPUs."""
        rng, out = self.rng, []
        for node in self.nodes:
            free = dict(node.allocatable)
            for j in range(rng.randint(0, 3)):
                cpu = rng.choice((500, 1000, 2000, 3000))
                mem = rng.choice((1, 2, 4, 8)) * Gi
                gpus = rng.choice((0, 1, 1, 2)) if free.get(GPU, 0) else 0
                gpus = min(gpus, free.get(GPU, 0))
                if cpu > free["cpu"] or mem > free["memory"]:
                    continue
                free["cpu"] -= cpu
                free["memory"] -= mem
                free[GPU] = free.get(GPU, 0) - gpus
                labels = {"tier": rng.choice(("front", "back")), "app": rng.choice(APPS)}
                pod = self._pod(f"s{self.seed}-bound-{node.name}-{j}", labels, cpu, mem, gpus)
                pod["spec"]["nodeName"] = node.name
                if rng.random() < 0.3:
                    self._host_port(pod, rng.choice((8080, 9090)))
                out.append(pod)
        return out

    def _pod(self, name: str, labels: dict[str, str], cpu: int, mem: int, gpus: int = 0) -> JSON:
        requests = format_resources({"cpu": cpu, "memory": mem, **({GPU: gpus} if gpus else {})})
        resources: JSON = {"requests": requests}
        if gpus:
            resources["limits"] = {GPU: str(gpus)}
        spec: JSON = {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": resources}],
                      "terminationGracePeriodSeconds": 0}
        if gpus:
            spec["tolerations"] = [dict(GPU_TOLERATION)]
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS, "labels": labels},
                "spec": spec}

    @staticmethod
    def _host_port(pod: JSON, port: int) -> None:
        pod["spec"]["containers"][0]["ports"] = [{"containerPort": port, "hostPort": port, "protocol": "TCP"}]

    def _pending(self, i: int) -> PendingPod:
        rng = self.rng
        name = f"s{self.seed}-p{i:03d}"
        labels = {"diff": str(self.seed)}
        if rng.random() < 0.6:
            labels["app"] = rng.choice(APPS)
        kind = rng.random()
        features: list[str] = []
        before: list[JSON] = []
        cpu = rng.choice((250, 500, 500, 1000, 1000, 2000, 4000, 8000, 16000))
        mem = rng.choice((1, 1, 2, 4, 8, 16, 64)) * Gi
        gpus = rng.choice((1, 1, 1, 2, 4, 8)) if 0.45 <= kind < 0.6 else 0
        pod = self._pod(name, labels, cpu, mem, gpus)
        spec = pod["spec"]
        if kind < 0.45:
            features.append("dra")
            spec["tolerations"] = [dict(GPU_TOLERATION)]
            self._claims(pod, features, before)
        elif gpus:
            features.append("gpu")
        elif rng.random() < 0.5:  # a CPU pod that may land on a GPU node
            spec["tolerations"] = [dict(GPU_TOLERATION)]
        if rng.random() < 0.2:
            key, value, effect = rng.choice(EXTRA_TAINTS)
            spec.setdefault("tolerations", []).append({"key": key, "operator": "Equal", "value": value,
                                                       "effect": effect})
            features.append("taints")
        if rng.random() < 0.15:
            spec["nodeSelector"] = rng.choice(({"disk": "ssd"}, {keys.LABEL_ZONE: rng.choice(ZONES)}))
            features.append("node-selector")
        affinity: JSON = {}
        if rng.random() < 0.15:
            zones = rng.sample(ZONES, 2)
            term = rng.choice(({"key": keys.LABEL_ZONE, "operator": "In", "values": zones},
                               {"key": "node.kubernetes.io/instance-type", "operator": "NotIn",
                                "values": ["p4d.24xlarge"]},
                               {"key": "disk", "operator": "Exists"}))
            affinity["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [term]}]}}
            features.append("affinity")
        if rng.random() < 0.2:
            pref = [{"weight": rng.randint(1, 100), "preference": {"matchExpressions": [
                {"key": rng.choice(("disk", keys.LABEL_ZONE)), "operator": "In",
                 "values": [rng.choice(("ssd", *ZONES))]}]}} for _ in range(rng.randint(1, 2))]
            affinity.setdefault("nodeAffinity", {})["preferredDuringSchedulingIgnoredDuringExecution"] = pref
            features.append("affinity-preferred")
        if rng.random() < 0.12:
            app = labels.setdefault("app", rng.choice(APPS))
            spec["topologySpreadConstraints"] = [{
                "maxSkew": rng.choice((1, 2)), "whenUnsatisfiable": "DoNotSchedule",
                "topologyKey": rng.choice((keys.LABEL_ZONE, keys.LABEL_HOSTNAME)),
                "labelSelector": {"matchLabels": {"app": app}}}]
            features.append("spread")
        if rng.random() < 0.12:
            topo = rng.choice((keys.LABEL_ZONE, keys.LABEL_HOSTNAME))
            if rng.random() < 0.5:
                affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [{
                    "topologyKey": topo, "labelSelector": {"matchLabels": {"tier": rng.choice(("front", "back"))}}}]}
                features.append("pod-affinity")
            else:
                app = rng.choice(APPS)
                affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [{
                    "topologyKey": topo, "labelSelector": {"matchLabels": {"app": app}}}]}
                features.append("pod-anti-affinity")
        if affinity:
            spec["affinity"] = affinity
        if rng.random() < 0.1:
            self._host_port(pod, rng.choice((8080, 9090)))
            features.append("host-ports")
        if rng.random() < 0.12:
            self._volume(pod, i, before)
            features.append("volumes")
        if gpus:
            self._extended(pod, features)
        if not features:
            features.append("plain")
        return PendingPod(pod, tuple(dict.fromkeys(features)), before)

    def _claims(self, pod: JSON, features: list[str], before: list[JSON]) -> None:
        """One or two claims: from a template, a claim of its own, or a shared claim (one a pod before may
        have used; a new one otherwise)."""
        rng = self.rng
        refs = []
        for k in range(1 if rng.random() < 0.85 else 2):
            spec_name = rng.choice(TEMPLATED)
            roll = rng.random()
            if roll < 0.15 and self.shared:
                claim_name = rng.choice(self.shared)
                refs.append({"name": f"c{k}", "resourceClaimName": claim_name})
                features.append("dra-shared-claim")
                continue
            spec_name = self._tolerant(spec_name)
            features.extend(CLAIM_SPECS[spec_name][0])
            if roll < 0.3:
                claim_name = f"{pod['metadata']['name']}-claim{k}"
                before.append(resource_claim(claim_name, spec_name))
                refs.append({"name": f"c{k}", "resourceClaimName": claim_name})
                if rng.random() < 0.5:
                    self.shared.append(claim_name)
            else:
                refs.append({"name": f"c{k}", "resourceClaimTemplateName": f"s{self.seed}-{spec_name}"})
        pod["spec"]["resourceClaims"] = refs
        pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": r["name"]} for r in refs]

    def _volume(self, pod: JSON, i: int, before: list[JSON]) -> None:
        rng = self.rng
        roll = rng.random()
        if roll < 0.5:
            name = rng.choice(self.bound_pvcs)
        else:
            name = f"{pod['metadata']['name']}-vol"
            before.append(claim(name, f"s{self.seed}-{'wffc' if roll < 0.8 else 'local'}"))
        pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": name}}]
        pod["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]


def _taint_one(slices: tuple[ResourceSlice, ...], rng: random.Random, taint: DeviceTaint) -> tuple[ResourceSlice, ...]:
    """The node's slices with one device (drawn) tainted."""
    i = next(k for k, s in enumerate(slices) if s.devices)
    s = slices[i]
    j = rng.randrange(len(s.devices))
    devices = (*s.devices[:j], dataclasses.replace(s.devices[j], taints=(taint,)), *s.devices[j + 1:])
    return (*slices[:i], dataclasses.replace(s, devices=devices), *slices[i + 1:])


def scenario(seed: int, pods: int) -> Scenario:
    return Generator(seed, pods).scenario()


# --- gangs: Workload API PodGroups (issue 39) ---------------------------------------------------------
WORKLOAD_API = "scheduling.k8s.io/v1beta1"


@dataclass
class PendingGang:
    """A Workload API PodGroup (gang policy, `min_count`) and its member pods, created together."""

    group: JSON
    pods: list[JSON]
    min_count: int

    @property
    def name(self) -> str:
        return str(self.group["metadata"]["name"])


def gangs(seed: int, count: int) -> list[PendingGang]:
    """`count` gangs of 2-6 alike pods (CPU only or 1-8 GPUs each), minCount 1 to all of them. Each is tried on the
    seed's cluster alone (scheduler_diff removes it after): whether kube-scheduler binds its minimum together on
    the nodes there are. A random stream of their own, so the pod scenario of a seed does not change."""
    rng, pod_of = random.Random(seed * 7919 + 39), Generator(seed, 0)._pod
    out = []
    for i in range(count):
        name, n = f"s{seed}-gang{i}", rng.randint(2, 6)
        gpus = rng.choice((0, 1, 1, 2, 4, 8))
        cpu, mem = rng.choice((500, 1000, 2000, 4000)), rng.choice((1, 2, 4, 8)) * Gi
        pods = [pod_of(f"{name}-{j}", {"diff": str(seed), "gang": name}, cpu, mem, gpus) for j in range(n)]
        for p in pods:
            p["spec"]["schedulingGroup"] = {"podGroupName": name}
        min_count = rng.randint(1, n)
        out.append(PendingGang({"apiVersion": WORKLOAD_API, "kind": "PodGroup",
                                "metadata": {"name": name, "namespace": NS},
                                "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}}, pods, min_count))
    return out
