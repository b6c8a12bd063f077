"""The gang stories of issue 39 as a cluster snapshot (examples/snapshot-aws-gangs.json, with
examples/pools-aws-gangs.yaml): `python tests/scaler/sim/gang_snapshot.py > examples/snapshot-aws-gangs.json`.

- ml/big: a Workload API PodGroup (scheduling.k8s.io/v1beta1) of three 8-GPU pods, minCount 3, on an 8-GPU pool
  of max 2: it can never run, so nothing is bought for it; ml/pair (minCount 2, two 8-GPU pods) fits and gets two
  nodes. ml/ghost-0 names a PodGroup that does not exist: kube-scheduler holds it back, nothing is bought.
- ml/cosched: scheduler-plugins' PodGroup (scheduling.x-k8s.io/v1alpha1, minMember 3) with four 1-GPU pods
  on a 1-GPU pool of max 3: three go together, the fourth waits for the pool's max.
- ml/vc: Volcano's PodGroup (scheduling.volcano.sh/v1beta1, minMember 2) of two 1-GPU pods on the
  same 1-GPU pool, after the coscheduling gang: no room left (the pool's max), nothing bought for it.
"""

from __future__ import annotations

import json
from typing import Any

T = "2026-11-20T09:00:00Z"
WORKLOAD_API = "scheduling.k8s.io/v1beta1"
COSCHEDULING_API = "scheduling.x-k8s.io/v1alpha1"
VOLCANO_API = "scheduling.volcano.sh/v1beta1"
GPU_TOL = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
           {"key": "gpuburst.io/min-gpus", "operator": "Exists", "effect": "NoSchedule"}]


def pod(name: str, gpus: int, minute: int, *, group: str | None = None, label: str | None = None,
        volcano: str | None = None, namespace: str = "ml") -> dict[str, Any]:
    """A pending pod (PodScheduled=False, Unschedulable) of `gpus` GPUs, naming its PodGroup the way its API does:
    `group` by spec.schedulingGroup, `label` by the coscheduling label, `volcano` by Volcano's annotation."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{name}",
                            "creationTimestamp": f"2026-11-20T09:{minute:02d}:00Z",
                            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": "u",
                                                 "controller": True}]}
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "x", "resources": {
        "requests": {"cpu": "1", "memory": "4Gi"}, "limits": {"nvidia.com/gpu": str(gpus)}}}],
        "tolerations": GPU_TOL}
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    if label:
        meta["labels"] = {"scheduling.x-k8s.io/pod-group": label}
    if volcano:
        meta["annotations"] = {"scheduling.k8s.io/group-name": volcano}
        spec["schedulerName"] = "volcano"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {
        "phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}


def workload_group(name: str, min_count: int | None, namespace: str = "ml",
                   api_version: str = WORKLOAD_API) -> dict[str, Any]:
    """A Workload API PodGroup: a gang of `min_count`, or (None) the basic policy."""
    policy: dict[str, Any] = {"basic": {}} if min_count is None else {"gang": {"minCount": min_count}}
    return {"apiVersion": api_version, "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": T},
            "spec": {"schedulingPolicy": policy}}


def member_group(api_version: str, name: str, min_member: int, namespace: str = "ml") -> dict[str, Any]:
    """A coscheduling or Volcano PodGroup (spec.minMember)."""
    return {"apiVersion": api_version, "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": T},
            "spec": {"minMember": min_member}}


def snapshot() -> dict[str, Any]:
    items = [workload_group("big", 3), workload_group("pair", 2),
             *(pod(f"big-{i}", 8, 1, group="big") for i in range(3)),
             *(pod(f"pair-{i}", 8, 2, group="pair") for i in range(2)),
             pod("ghost-0", 8, 3, group="ghost"),
             member_group(COSCHEDULING_API, "cosched", 3),
             *(pod(f"cosched-{i}", 1, 4, label="cosched") for i in range(4)),
             member_group(VOLCANO_API, "vc", 2),
             *(pod(f"vc-{i}", 1, 5, volcano="vc") for i in range(2))]
    return {"apiVersion": "v1", "kind": "List", "metadata": {}, "items": items}


if __name__ == "__main__":
    print(json.dumps(snapshot(), indent=1))
