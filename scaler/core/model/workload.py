"""What a pod or a node is to the planners, each spelt once: a pod that still holds its resources, a
pod its node or controller places (DaemonSet, mirror), what a drain evicts and what forbids it, the
GPU devices of a resource vector (whole, time-sliced or MIG), and a node's pool. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from scaler.core.model import keys
from scaler.core.model.objects import Node, Pod

# Pods in these phases hold no resources: the scheduler drops them from its node accounting.
TERMINATED_PHASES = frozenset({"Succeeded", "Failed"})
# Owners whose pods go with their node: DaemonSet pods, and a mirror pod's (its owner is the Node).
_PLACED_BY_NODE = frozenset({"DaemonSet", "Node"})


def active(pod: Pod) -> bool:
    """The pod still holds its node's resources (it has not succeeded or failed)."""
    return pod.phase not in TERMINATED_PHASES


def is_daemonset(pod: Pod) -> bool:
    """Placed by its DaemonSet controller on its own node: never planned, never evicted by a drain."""
    return pod.owner_kind == "DaemonSet"


def is_mirror(pod: Pod) -> bool:
    """A static pod's mirror: the kubelet runs it; it goes with its node."""
    return keys.ANNOTATION_MIRROR_POD in pod.annotations or pod.owner_kind == "Node"


def to_evict(pods: Iterable[Pod]) -> list[Pod]:
    """The pods a drain evicts: everything running except DaemonSet and mirror pods."""
    # active(p) and not is_daemonset(p) and not is_mirror(p), inlined: read for every node each pass
    return [p for p in pods if p.phase not in TERMINATED_PHASES and p.owner_kind not in _PLACED_BY_NODE
            and keys.ANNOTATION_MIRROR_POD not in p.annotations]


def blocker(pod: Pod) -> str | None:
    """Why this pod forbids removing its node, or None. DaemonSet and mirror pods never block."""
    if not active(pod) or is_mirror(pod):
        return None
    ann = pod.annotations
    if ann.get(keys.ANNOTATION_SAFE_TO_EVICT, "").lower() == "false":
        return f"pod {pod.key} has {keys.ANNOTATION_SAFE_TO_EVICT}=false"
    if ann.get(keys.ANNOTATION_KARPENTER_DO_NOT_DISRUPT, "").lower() == "true":
        return f"pod {pod.key} has {keys.ANNOTATION_KARPENTER_DO_NOT_DISRUPT}=true"
    if ann.get(keys.ANNOTATION_OPENAI_DO_NOT_DRAIN, "").lower() == "true":
        return f"pod {pod.key} has {keys.ANNOTATION_OPENAI_DO_NOT_DRAIN}=true"
    if pod.owner_kind is None and ann.get(keys.ANNOTATION_SAFE_TO_EVICT, "").lower() != "true":
        return f"pod {pod.key} has no controller"
    return None


def is_gpu_device(resource: str) -> bool:
    """A resource the GPU device plugin publishes: whole or time-sliced GPUs, or a MIG profile."""
    return resource == keys.RES_GPU or resource.startswith(keys.MIG_RESOURCE_PREFIX)


def gpu_devices(resources: Mapping[str, int]) -> int:
    """GPU devices in a resource vector: whole GPUs, time-sliced replicas or MIG slices alike."""
    n = 0
    for k, v in resources.items():  # is_gpu_device, inlined: read for every pod of the cluster each pass
        if k == keys.RES_GPU or k.startswith(keys.MIG_RESOURCE_PREFIX):
            n += v
    return n


def node_pool(node: Node) -> str | None:
    """The pool a node belongs to: the provider's answer when known, else its pool label."""
    return node.pool or node.labels.get(keys.LABEL_POOL)
