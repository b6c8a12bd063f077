"""A whole scaler against moto's server and the fake API server, with a clock the test drives.

`register()` plays the kubelet: every Auto Scaling instance gets a Node whose labels, taints and
allocatable come from its pool (as the bootstrap gives them). `step()` advances the clock, waits until
the watch-fed cache has caught up with the fake, and runs one pass of the real loop (real planner).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from scaler.core.config.settings import ScalerConfig
from scaler.core.planning.decisions import Plan
from scaler.kube.actions import KubeActions, Leader
from scaler.kube.cache import ClusterCache
from scaler.kube.client import api_client
from scaler.loop import Runtime
from scaler.metrics import Metrics
from scaler.providers.aws import AwsProvider
from scaler.providers.aws_messages import provider_id
from tests.fakes.aws import MotoAws
from tests.fakes.kubeapi import FakeKube, pod, pool_node


class Clock:
    """Starts at the real time (the clouds' fakes stamp launches and the API server creations with it),
    then moves only when the test says."""

    def __init__(self, t: float | None = None) -> None:
        self.t = float(int(time.time())) if t is None else t

    def __call__(self) -> float:
        return self.t


class World:
    def __init__(self, aws: MotoAws, kube: FakeKube, config: ScalerConfig, tmp: Path, *,
                 desired: dict[str, int] | None = None, queue: bool = False) -> None:
        self.aws, self.kube, self.config = aws, kube, config
        self.groups = aws.make_groups(config, desired=desired)
        self.queue = aws.queue() if queue else None
        self.api = api_client(str(kube.kubeconfig(tmp / "kubeconfig")))
        self.cache = ClusterCache(self.api, watch_timeout=5, backoff_initial=0.05, backoff_max=0.2)
        self.cache.start()
        assert self.cache.wait_synced(5)
        self.clock = Clock()
        self.node_gc = True  # the cloud controller deletes Nodes of terminated instances before each pass
        self.runtime = self.new_runtime()

    def new_runtime(self) -> Runtime:
        """A scaler process: a new provider and an empty State (what a restart gives)."""
        provider = AwsProvider(self.config, session=self.aws.session, endpoint_url=self.aws.endpoint,
                               queue_url=self.queue, clock=self.clock)
        self.provider = provider
        leader = Leader(self.api, "gpuburst-system", "test-replica")
        kube = KubeActions(self.api, "gpuburst-system", nodes=self.cache.raw_node, before_change=leader.check)
        return Runtime(self.config, provider, self.cache, kube, leader=leader, metrics=Metrics(), clock=self.clock)

    def close(self) -> None:
        self.cache.stop()

    # --- the cluster side -----------------------------------------------------------------------
    def register(self, pool_name: str | None = None) -> list[str]:
        """Nodes for every instance of the pool(s) that has none yet; returns the new node names."""
        known = {(n.get("spec") or {}).get("providerID") for n in self.kube.objects("nodes")}
        made = []
        for pool in self.config.pools:
            if pool_name not in (None, pool.name):
                continue
            for inst in self.aws.instances(self.groups[pool.name]):
                pid = provider_id(inst["AvailabilityZone"], inst["InstanceId"])
                if pid in known:
                    continue
                name = f"ip-{inst['InstanceId'][2:10]}.ec2.internal"
                self.kube.put("nodes", pool_node(pool, inst["AvailabilityZone"], name, pid))
                made.append(name)
        return made

    def gpu_pods(self, prefix: str, n: int, **kw: Any) -> list[str]:
        names = [f"{prefix}-{i}" for i in range(n)]
        for name in names:
            self.kube.put("pods", pod(name, gpus=1, cpu="1", labels={"app": prefix}, **kw))
        return names

    def bind(self, pod_name: str, node: str, namespace: str = "default") -> None:
        """The scheduler's work: put a pending pod on a node."""
        obj = self.kube.get("pods", f"{namespace}/{pod_name}")
        assert obj is not None
        obj["spec"]["nodeName"] = node
        obj["status"] = {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}]}
        self.kube.put("pods", obj)

    def caught_up(self) -> bool:
        for inf, resource in ((self.cache.pods, "pods"), (self.cache.nodes, "nodes"),
                              (self.cache.pvcs, "persistentvolumeclaims"), (self.cache.pvs, "persistentvolumes"),
                              (self.cache.resource_claims, "resourceclaims"),
                              (self.cache.claim_templates, "resourceclaimtemplates"),
                              (self.cache.device_classes, "deviceclasses"),
                              (self.cache.resource_slices, "resourceslices")):
            mine = {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in inf.items()}
            theirs = {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in self.kube.objects(resource)}
            if mine != theirs:
                return False
        return True

    def cloud_controller(self) -> None:
        """The cloud node lifecycle controller: a Node whose instance is gone is deleted."""
        alive = {provider_id(i["AvailabilityZone"], i["InstanceId"])
                 for g in self.groups.values() for i in self.aws.instances(g)}
        for node in self.kube.objects("nodes"):
            if node["spec"].get("providerID") not in alive:
                self.kube.delete("nodes", f"/{node['metadata']['name']}")
                for p in self.kube.objects("pods"):
                    if p["spec"].get("nodeName") == node["metadata"]["name"]:
                        self.kube.delete("pods", f"{p['metadata']['namespace']}/{p['metadata']['name']}")

    def node_lifecycle(self) -> None:
        """kube-controller-manager's node lifecycle controller: a Node whose kubelet is gone (its instance
        terminated) turns NotReady. It runs whether or not a cloud controller manager does."""
        alive = {provider_id(i["AvailabilityZone"], i["InstanceId"])
                 for g in self.groups.values() for i in self.aws.instances(g)}
        for node in self.kube.objects("nodes"):
            conditions = node["status"].get("conditions") or []
            if node["spec"].get("providerID") not in alive and any(
                    c["type"] == "Ready" and c["status"] == "True" for c in conditions):
                node["status"]["conditions"] = [{"type": "Ready", "status": "False", "reason": "NodeStatusUnknown"}]
                self.kube.put("nodes", node)

    def step(self, seconds: float = 10.0, *, settle: bool = True) -> Plan | None:
        self.clock.t += seconds
        if self.node_gc:
            self.cloud_controller()
        else:
            self.node_lifecycle()
        if settle:
            deadline = time.monotonic() + 5
            while not (self.cache.fresh and self.caught_up()) and time.monotonic() < deadline:
                time.sleep(0.02)
        return self.runtime.run_once()

    def desired(self, pool: str) -> int:
        return self.aws.desired(self.groups[pool])

    def instance_ids(self, pool: str) -> set[str]:
        return {i["InstanceId"] for i in self.aws.instances(self.groups[pool])}
