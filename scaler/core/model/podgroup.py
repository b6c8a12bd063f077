"""Gangs as their platforms declare them: a PodGroup object and the pods that name it. Plain data.

Three APIs, each a PodGroup with a minimum that a pod names in its own way:
- the Workload API (scheduling.k8s.io v1alpha3 / v1beta1, KEP-4671): `spec.schedulingPolicy.gang.minCount`
  (a `basic` policy is no gang); the pod's `spec.schedulingGroup.podGroupName`. kube-scheduler's
  GangScheduling plugin holds a pod back (PreEnqueue) until its PodGroup exists.
- scheduler-plugins' coscheduling (scheduling.x-k8s.io/v1alpha1): `spec.minMember`; the pod's label
  `scheduling.x-k8s.io/pod-group`. Without the PodGroup object the plugin lets the pod through alone; the
  scaler then keeps its older reading (all the label's pending pods, or the min-member annotation's count).
- Volcano (scheduling.volcano.sh/v1beta1): `spec.minMember`; the pod's annotation
  `scheduling.k8s.io/group-name`. Volcano's scheduler schedules no pod whose PodGroup is missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from scaler.core.model import keys
from scaler.core.model.objects import Pod

GroupApi = Literal["scheduling.k8s.io", "scheduling.x-k8s.io", "scheduling.volcano.sh"]
WORKLOAD: GroupApi = keys.API_GROUP_SCHEDULING
COSCHEDULING: GroupApi = keys.API_GROUP_COSCHEDULING
VOLCANO: GroupApi = keys.API_GROUP_VOLCANO
# The APIs whose scheduler holds a pod back while its PodGroup does not exist.
HELD_WITHOUT_GROUP: frozenset[GroupApi] = frozenset({WORKLOAD, VOLCANO})


def gang_key(api: GroupApi, namespace: str, name: str) -> str:
    """How the planner names a gang: `ns/name` for coscheduling (the label's gangs, as always), the API group
    after it for the others (a Workload PodGroup and a coscheduling one may share a name)."""
    return f"{namespace}/{name}" if api == COSCHEDULING else f"{namespace}/{name} ({api})"


@dataclass(frozen=True, slots=True)
class PodGroup:
    api: GroupApi
    namespace: str
    name: str
    min_count: int | None  # None: no gang policy (the Workload API's `basic`): its pods are single pods

    @property
    def key(self) -> str:
        return gang_key(self.api, self.namespace, self.name)


def group_of(pod: Pod, label: str) -> tuple[GroupApi, str] | None:
    """The PodGroup a pod names, and through which API: `schedulingGroup` first, then Volcano's annotation,
    then the coscheduling label (`label`: the config's gang label)."""
    if pod.scheduling_group:
        return WORKLOAD, pod.scheduling_group
    name = pod.annotations.get(keys.ANNOTATION_VOLCANO_GROUP)
    if name:
        return VOLCANO, name
    name = pod.labels.get(label)
    if name:
        return COSCHEDULING, name
    return None


def gang_of(pod: Pod, label: str) -> str | None:
    """The key of the gang a pod names (whether or not its PodGroup exists), or None."""
    ref = group_of(pod, label)
    return None if ref is None else gang_key(ref[0], pod.namespace, ref[1])
