"""PodGroups (the Workload API's, scheduler-plugins' coscheduling CRD's, Volcano's) as JSON to the core's model
(scaler.core.model.podgroup), refused where their API server refuses them. Pure functions on dicts.

What each API refuses (and so do we, naming the object and the field):
- scheduling.k8s.io (v1alpha3, v1beta1): `spec.schedulingPolicy` with neither or both of `basic` and `gang`
  (a union), a gang without `minCount` or with one below 1 (`+k8s:minimum=1`, k8s.io/api scheduling/v1beta1).
- scheduling.x-k8s.io/v1alpha1: `spec.minMember` below 1 (`+kubebuilder:validation:Minimum=1`); left out it is
  0: the plugin's quorum is then always met, no gang.
- scheduling.volcano.sh/v1beta1: `spec.minMember` below 0 (`Minimum=0`); 0 asks for no quorum, no gang.
No API refuses a minimum above the pods that exist (they come later): the planner waits for them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scaler.core.model import keys
from scaler.core.model.podgroup import COSCHEDULING, VOLCANO, WORKLOAD, GroupApi, PodGroup
from scaler.kube.convert import SnapshotError

JSON = Mapping[str, Any]
# (group, version) the kube adapter lists PodGroups from, each where the server serves it: the Workload API in
# both versions 1.37 has (beta, and alpha where a cluster enables only that), scheduler-plugins', Volcano's.
SOURCES = ((keys.API_GROUP_SCHEDULING, "v1beta1"), (keys.API_GROUP_SCHEDULING, "v1alpha3"),
           (keys.API_GROUP_COSCHEDULING, "v1alpha1"), (keys.API_GROUP_VOLCANO, "v1beta1"))
PLURAL = "podgroups"
_APIS: dict[str, GroupApi] = {keys.API_GROUP_SCHEDULING: WORKLOAD, keys.API_GROUP_COSCHEDULING: COSCHEDULING,
                              keys.API_GROUP_VOLCANO: VOLCANO}


def _count(raw: Any, where: str, least: int) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise SnapshotError(f"{where}: expected an integer, got {raw!r}")
    if raw < least:
        raise SnapshotError(f"{where}: {raw} is below {least}, which the API server refuses")
    return raw


def pod_group_from_json(obj: JSON) -> PodGroup:
    """One PodGroup of any of the three APIs (by its apiVersion). Raises SnapshotError naming it and the field."""
    meta = obj.get("metadata") or {}
    namespace, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "?")
    group = str(obj.get("apiVersion") or "").partition("/")[0]
    api = _APIS.get(group)
    what = f"PodGroup {namespace}/{name}"
    if api is None:
        raise SnapshotError(f"{what}: apiVersion {obj.get('apiVersion')!r} is none of {', '.join(_APIS)}")
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        raise SnapshotError(f"{what}: spec: expected an object")
    if api == WORKLOAD:
        policy = spec.get("schedulingPolicy")
        where = f"{what}: spec.schedulingPolicy"
        if not isinstance(policy, Mapping) or (policy.get("basic") is None) == (policy.get("gang") is None):
            raise SnapshotError(f"{where}: exactly one of basic and gang must be given")
        gang = policy.get("gang")
        if gang is None:
            return PodGroup(api, namespace, name, None)
        if not isinstance(gang, Mapping) or "minCount" not in gang:
            raise SnapshotError(f"{where}.gang.minCount: required")
        return PodGroup(api, namespace, name, _count(gang["minCount"], f"{where}.gang.minCount", 1))
    raw = spec.get("minMember", 0)
    least = 1 if api == COSCHEDULING and "minMember" in spec else 0
    n = _count(raw, f"{what}: spec.minMember", least)
    return PodGroup(api, namespace, name, n or None)


def from_list(api_version: str, obj: JSON) -> PodGroup:
    """A PodGroup as a list or watch of `api_version` gives it (built-in kinds' items carry no apiVersion)."""
    return pod_group_from_json({**obj, "apiVersion": api_version})
