"""A pod crash-looping on a dead GPU, on the real thing (issue 40): the 1.37 API server keeps what the kubelet
reports of its devices' health (KEP-4680's `allocatedResourcesStatus`, which the repair reads), and the real
Eviction API lets such a pod of a gang go past its budget only when the budget says AlwaysAllow. The simulator's
API (`scaler/sim/kubeapi.py`) answers evictions by the same rule; this is where that rule is checked."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes import client

from scaler.core.model import keys
from scaler.kube.actions import KubeActions
from scaler.kube.client import api_client
from scaler.kube.convert import pdb_from_json, pod_from_json
from tests.controlplane.agent import NodeSpec
from tests.controlplane.fixtures import SCALER_NAMESPACE, Cluster
from tests.controlplane.world import create_all, gpu_pod

pytestmark = pytest.mark.integration

NODE = "gpu8-0"


def _budget(name: str, policy: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"minAvailable": 2, "selector": {"matchLabels": {"job": name}}}
    if policy is not None:
        spec["unhealthyPodEvictionPolicy"] = policy
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def _member(name: str, job: str) -> dict[str, Any]:
    pod = gpu_pod(name, 1, labels={"job": job})
    pod["spec"]["nodeName"] = NODE  # placed, as the scheduler would: the agent starts it
    return pod


def _crash_loop_on_a_dead_gpu(cluster: Cluster, name: str) -> None:
    """What the kubelet writes for a container restarting on the GPU the device plugin marked Unhealthy."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    cluster.core.patch_namespaced_pod_status(name, "default", {"status": {
        "conditions": [{"type": t, "status": "False", "lastTransitionTime": now, "reason": "ContainersNotReady"}
                       for t in ("ContainersReady", "Ready")],
        "containerStatuses": [{
            "name": "main", "image": "registry.k8s.io/pause:3.10", "imageID": "", "ready": False, "restartCount": 4,
            "started": False, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "allocatedResourcesStatus": [{"name": keys.RES_GPU, "resources": [
                {"resourceID": "GPU-3f1c", "health": "Unhealthy"}]}]}]}})


def test_a_pod_on_a_dead_gpu_reads_as_such_and_leaves_past_its_budget_only_with_always_allow(
        cluster: Cluster) -> None:
    cluster.agent.register(NodeSpec(NODE, {keys.LABEL_POOL: "gpu8"}, (), {"cpu": 32, "memory": 128 * 2**30,
                                                                         keys.RES_GPU: 8}))
    names = [f"{job}-{i}" for job in ("always", "default") for i in range(2)]
    create_all(cluster.admin, [_budget("always", "AlwaysAllow"), _budget("default", None),
                               *(_member(name, name.split("-")[0]) for name in names)])
    cluster.wait(lambda: {f"default/{n}" for n in names} <= cluster.agent.started, "the agent starts the four pods")
    for name in ("always-1", "default-1"):
        _crash_loop_on_a_dead_gpu(cluster, name)
    policy = client.PolicyV1Api(cluster.admin)

    def short(name: str) -> bool:
        status = policy.read_namespaced_pod_disruption_budget(name, "default").status
        return status is not None and status.current_healthy == 1 and status.disruptions_allowed == 0

    cluster.wait(lambda: short("always") and short("default"), "the disruption controller counts one healthy pod")
    raw = client.CoreV1Api(cluster.admin).read_namespaced_pod("always-1", "default")
    assert pod_from_json(cluster.admin.sanitize_for_serialization(raw)).unhealthy_devices == 1  # kept by the server
    budgets = {b.name: b for b in (pdb_from_json(cluster.admin.sanitize_for_serialization(o)) for o in
                                   policy.list_namespaced_pod_disruption_budget("default").items)}
    assert budgets["always"].always_allow_unhealthy and not budgets["default"].always_allow_unhealthy
    kube = KubeActions(api_client(str(cluster.scaler_kubeconfig)), SCALER_NAMESPACE)
    assert kube.evict("default", "default-1") == "blocked"  # IfHealthyBudget: the budget is short, it stays
    assert kube.evict("default", "always-0") == "blocked"  # a healthy pod is held by the budget either way
    assert kube.evict("default", "always-1") == "evicted"
