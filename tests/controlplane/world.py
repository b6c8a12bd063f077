"""A whole scaler against the real control plane, moto's server and the node agent, as `scaler run` runs.

The scaler reads and writes the cluster as its own ServiceAccount (the chart's RBAC), the real
kube-scheduler binds pods to whichever node is there, the real controller-manager makes ResourceClaims
from templates and garbage-collects, and `register()` plays the kubelet of each Auto Scaling instance
that has booted. The clock the scaler sees starts at the real time and moves on when a test says (the
API server's own timestamps are real), so a test need not wait out boot times or idle timers.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from statistics import median
from typing import Any

from kubernetes import client, utils

from scaler.core.config.settings import ScalerConfig, parse_config
from scaler.core.model import keys
from scaler.core.planning.decisions import Plan
from scaler.kube.actions import KubeActions, Leader
from scaler.kube.cache import ClusterCache
from scaler.kube.client import api_client
from scaler.loop import Runtime
from scaler.metrics import Metrics
from scaler.providers.aws import AwsProvider
from scaler.providers.aws_messages import provider_id
from scaler.providers.base import PoolProvider
from scaler.providers.sim import SimProvider
from tests.controlplane.agent import NodeSpec
from tests.controlplane.fixtures import SCALER_NAMESPACE, Cluster
from tests.fakes.aws import MotoAws
from tests.fakes.world import Clock


@dataclass(frozen=True)
class Machine:
    pool: str
    instance_id: str
    zone: str
    provider_id: str
    ready: bool  # booted: its kubelet would register now


class MotoCloud:
    """AWS through boto3 against moto's server: Auto Scaling groups made from the pools."""

    def __init__(self, aws: MotoAws, config: ScalerConfig, desired: dict[str, int] | None = None) -> None:
        self.aws, self.config = aws, config
        self.groups = aws.make_groups(config, desired=desired)

    def provider(self, clock: Clock) -> PoolProvider:
        return AwsProvider(self.config, session=self.aws.session, endpoint_url=self.aws.endpoint, clock=clock)

    def machines(self, now: float) -> list[Machine]:
        return [Machine(pool.name, i["InstanceId"], i["AvailabilityZone"],
                        provider_id(i["AvailabilityZone"], i["InstanceId"]), True)
                for pool in self.config.pools for i in self.aws.instances(self.groups[pool.name])]

    def desired(self, pool: str, now: float) -> int:
        return self.aws.desired(self.groups[pool])


class SimCloud:
    """The simulator's cloud (scaler.providers.sim): instances boot in the pool's boot time of the clock."""

    def __init__(self, config: ScalerConfig) -> None:
        self.sim = SimProvider(config)

    def provider(self, clock: Clock) -> PoolProvider:
        return self.sim

    def machines(self, now: float) -> list[Machine]:
        self.sim.advance(now)
        return [Machine(i.pool, i.provider_id.rsplit("/", 1)[-1], i.zone, i.provider_id, i.ready_at <= now)
                for i in self.sim.alive()]

    def desired(self, pool: str, now: float) -> int:
        return self.sim.observe(now)[pool].desired


class RealWorld:
    def __init__(self, cloud: MotoCloud | SimCloud, cluster: Cluster, config: ScalerConfig, *,
                 identity: str = "replica-0", kubelet: bool = False, device_plugin_delay: bool = False) -> None:
        """`kubelet`: every booted instance registers its node before each pass (otherwise the test
        calls `register`, choosing how many and in which order). `device_plugin_delay`: a GPU node registers
        without its GPUs, which its device plugin advertises after the scaler's next pass (on a real GPU node
        the plugin starts tens of seconds after the kubelet registers; a pass is every 10 s)."""
        self.cloud, self.cluster, self.config = cloud, cluster, config
        self.api = api_client(str(cluster.scaler_kubeconfig))
        self.cache = ClusterCache(self.api, watch_timeout=5, backoff_initial=0.05, backoff_max=0.2)
        self.cache.start()
        assert self.cache.wait_synced(15), "the scaler's watches did not sync (RBAC?)"
        self.clock = Clock()
        self.identity = identity
        self.kubelet = kubelet
        self.device_plugin_delay = device_plugin_delay
        self.runtime = self.new_runtime()
        self.names: dict[str, str] = {}  # instance id -> node name
        self.used: set[str] = set()  # nodes some pod was ever bound to
        self.bought: set[str] = set()  # every instance id ever seen
        self.registered_at = 0.0  # when the last node registered (monotonic)
        self.delays: dict[tuple[str, str], float] = {}  # pod -> seconds from its creation to its cloud request

    def new_runtime(self, identity: str | None = None) -> Runtime:
        """A scaler process: a new provider and an empty State (what a restart gives)."""
        self.provider = self.cloud.provider(self.clock)
        leader = Leader(self.api, SCALER_NAMESPACE, identity or self.identity)
        kube = KubeActions(self.api, SCALER_NAMESPACE, nodes=self.cache.raw_node, before_change=leader.check)
        return Runtime(self.config, self.provider, self.cache, kube, leader=leader, metrics=Metrics(),
                       clock=self.clock)

    def close(self) -> None:
        self.cache.stop()

    # --- the cloud and the kubelets --------------------------------------------------------------
    def machines(self) -> list[Machine]:
        found = self.cloud.machines(self.clock.t)
        self.bought.update(m.instance_id for m in found)
        return found

    def register(self, limit: int | None = None, order: Iterable[str] | None = None) -> list[str]:
        """Nodes for booted instances that have none yet (at most `limit`, in `order` of instance ids if
        given: the order nodes finish booting in); returns the new node names."""
        pending = [m for m in self.machines() if m.ready and m.instance_id not in self.names]
        if order is not None:
            rank = {iid: n for n, iid in enumerate(order)}
            pending.sort(key=lambda m: rank.get(m.instance_id, len(rank)))
        made = []
        for m in pending[:limit]:
            pool = self.config.pool(m.pool)
            name = f"ip-{m.instance_id[-10:]}.ec2.internal"
            tmpl = pool.template_node(m.zone, self.config.region)
            self.cluster.agent.register(NodeSpec(
                name=name, labels=tmpl.labels, taints=[(t.key, t.value, t.effect) for t in pool.node_taints()],
                allocatable=tmpl.allocatable, capacity=pool.capacity(), provider_id=m.provider_id,
                slices=pool.dra_slices(name)), gpus_later=self.device_plugin_delay)
            self.names[m.instance_id] = name
            made.append(name)
        if made:
            self.registered_at = time.monotonic()
        return made

    def cloud_controller(self) -> None:
        """The cloud node controller: the Node of an instance that is gone is deleted, with its pods."""
        alive = {m.instance_id for m in self.machines()}
        for iid, name in list(self.names.items()):
            if iid not in alive:
                self.cluster.agent.forget(name)
                del self.names[iid]

    # --- the cluster -------------------------------------------------------------------------------
    def pods(self) -> list[Any]:
        return [p for p in self.cluster.core.list_pod_for_all_namespaces().items
                if p.metadata.namespace not in ("kube-system", SCALER_NAMESPACE)]

    def settle(self, quiet: float = 1.0, timeout: float = 30.0) -> None:
        """Until kube-scheduler is done: no pod waits for a first scheduling attempt, no binding for `quiet`
        seconds, and a pod that did not fit before the last node registered has been retried (the
        scheduler's backoff is 1 s here). Notes every node a pod was bound to."""
        deadline = time.monotonic() + timeout
        last, since = None, time.monotonic()
        while time.monotonic() < deadline:
            pods = self.pods()
            for p in pods:
                if p.spec.node_name:
                    self.used.add(p.spec.node_name)
            seen = sorted((p.metadata.name, p.spec.node_name or "") for p in pods)
            untried = [p for p in pods if not p.spec.node_name and not any(
                c.type == "PodScheduled" for c in (p.status.conditions or []))]
            if seen != last or untried:
                last, since = seen, time.monotonic()
            elif time.monotonic() - since >= quiet and time.monotonic() - self.registered_at >= quiet + 1.5:
                return
            time.sleep(0.1)

    def caught_up(self) -> bool:
        """The scaler's watch cache has every pod and node as the server has them now."""
        core = self.cluster.core
        theirs = {
            "pods": {(p.metadata.namespace, p.metadata.name): p.metadata.resource_version
                     for p in core.list_pod_for_all_namespaces().items},
            "nodes": {n.metadata.name: n.metadata.resource_version for n in core.list_node().items},
        }
        mine = {
            "pods": {(o["metadata"]["namespace"], o["metadata"]["name"]): o["metadata"]["resourceVersion"]
                     for o in self.cache.pods.items()},
            "nodes": {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in self.cache.nodes.items()},
        }
        return mine == theirs

    def step(self, seconds: float = 10.0, *, settle: bool = True) -> Plan | None:
        self.clock.t += seconds
        self.cloud_controller()
        if self.kubelet:
            self.register()
        if settle:
            self.settle()
            deadline = time.monotonic() + 10
            while not (self.cache.fresh and self.caught_up()) and time.monotonic() < deadline:
                time.sleep(0.05)
        plan = self.runtime.run_once()
        if plan is not None and plan.scale_ups:
            self.note_requests()
        if self.cluster.agent.advertise():
            self.registered_at = time.monotonic()  # new room for the scheduler: the next settle waits for it
        return plan

    def unused_nodes(self) -> list[str]:
        return sorted(set(self.names.values()) - self.used)

    def run(self, seconds: float, every: float = 10.0) -> None:
        for _ in range(int(seconds // every)):
            self.step(every)

    def desired(self, pool: str) -> int:
        return self.cloud.desired(pool, self.clock.t)

    def pending(self) -> list[str]:
        return sorted(f"{p.metadata.namespace}/{p.metadata.name}" for p in self.pods() if not p.spec.node_name)

    def note_requests(self) -> None:
        """Notes the delay of each pod's first cloud request (while the pod is there to read its creation)."""
        self.delays = {**request_delays(self.cluster), **self.delays}

    def report(self, minimum: int) -> str:
        """What a user's bill and `kubectl get events` would show, as one line printed to the test's output (once
        the scheduler is done with what the last pass changed)."""
        self.settle()
        self.note_requests()
        pods = self.pods()
        delays = sorted(self.delays.values())
        waited = (f"creation to cloud request median {median(delays):.0f} s, max {delays[-1]:.0f} s "
                  f"({len(delays)} pods)" if delays else "no cloud request")
        line = (f"report: pods bound {sum(1 for p in pods if p.spec.node_name)}/{len(pods)}, "
                f"nodes bought {len(self.bought)} (minimum {minimum}), unused {len(self.unused_nodes())}, "
                f"nodes left {len(self.names)}, {waited}")
        print(line)
        return line


def request_delays(cluster: Cluster) -> dict[tuple[str, str], float]:
    """For each pod a scale-up was for, seconds from its creation (the API server's creationTimestamp) to the
    cloud request (the scaler's first TriggeredScaleUp Event on it, recorded right after the request)."""
    created = {(p.metadata.namespace, p.metadata.name): p.metadata.creation_timestamp
               for p in cluster.core.list_pod_for_all_namespaces().items}
    first: dict[tuple[str, str], Any] = {}
    for e in cluster.core.list_event_for_all_namespaces(field_selector="reason=TriggeredScaleUp").items:
        key = (e.involved_object.namespace, e.involved_object.name)
        at = e.first_timestamp or e.event_time
        if key in created and at is not None and (key not in first or at < first[key]):
            first[key] = at
    return {key: (at - created[key]).total_seconds() for key, at in first.items()}


def gpu_pod(name: str, gpus: int, *, namespace: str = "default", zone: str | None = None,
            tolerations: list[dict[str, Any]] | None = None, labels: dict[str, str] | None = None,
            cpu: str = "1", memory: str = "1Gi") -> dict[str, Any]:
    """A pod as a Job makes one: GPUs as the extended resource, the GPU taint tolerated, and the
    `gpuburst.io/min-gpus` taint of the pools whose `min_pod_gpus` (2, 4 or 8) it reaches, as docs/platform.md
    tells users to write it: a 1-GPU pod never lands on a multi-GPU node."""
    tol = tolerations if tolerations is not None else [
        {"key": keys.TAINT_GPU, "operator": "Exists", "effect": "NoSchedule"},
        *({"key": keys.TAINT_MIN_GPUS, "operator": "Equal", "value": str(v), "effect": "NoSchedule"}
          for v in (2, 4, 8) if gpus >= v)]
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": cpu, "memory": memory, **(
                            {keys.RES_GPU: str(gpus)} if gpus else {})},
                            "limits": {keys.RES_GPU: str(gpus)} if gpus else {}}}],
        "tolerations": tol, "terminationGracePeriodSeconds": 0}
    if zone:
        spec["nodeSelector"] = {keys.LABEL_ZONE: zone}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels or {"app": name.rsplit("-", 1)[0]}},
            "spec": spec}


def claim_pod(name: str, template: str) -> dict[str, Any]:
    """A pod of half a core asking for its GPU through one claim made from the ResourceClaimTemplate `template`."""
    pod = gpu_pod(name, 0, cpu="500m")
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": template}]
    pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return pod


@contextlib.contextmanager
def moto_world(aws: MotoAws, cluster: Cluster, data: dict[str, Any], **options: Any) -> Iterator[RealWorld]:
    """A RealWorld for the scaler config `data` on moto's Auto Scaling, closed after use (`options`: RealWorld's)."""
    config = parse_config(data, "test")
    w = RealWorld(MotoCloud(aws, config), cluster, config, **options)
    try:
        yield w
    finally:
        w.close()


def create_all(api: client.ApiClient, objs: Iterable[dict[str, Any]]) -> None:
    for obj in objs:
        utils.create_from_dict(api, obj, namespace=obj["metadata"].get("namespace", "default"))
