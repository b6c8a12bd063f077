"""Extended resources served by DRA (DeviceClass `extendedResourceName`, kube-scheduler's
DynamicResources plugin): a pod asking `nvidia.com/gpu: 2` on a node whose allocatable lacks
`nvidia.com/gpu` is given a claim of that many devices of the class that names the resource (or of
class <name> for `deviceclass.resource.kubernetes.io/<name>`). Allocate it with the pod's other claims.

Upstream picks, among several classes naming the same resource, the newest; the model has no
creation time, so the first by name wins.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from scaler.core.model.dra import ClaimSpec, DeviceClass, DeviceRequest, ExactRequest, ResourceClaim

IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"


def extended_resource_claim(pod_key: str, requests: Mapping[str, int], allocatable: Mapping[str, int],
                            classes: Iterable[DeviceClass]) -> ResourceClaim | None:
    """The claim standing for the pod's extended resources that the node does not offer itself, or
    None when there are none (or no class serves them: then the resource filter decides)."""
    by_resource: dict[str, str] = {}
    for cls in sorted(classes, key=lambda c: c.name):
        by_resource[IMPLICIT_PREFIX + cls.name] = cls.name
        if cls.extended_resource_name:
            by_resource.setdefault(cls.extended_resource_name, cls.name)
    reqs = []
    for i, (resource, amount) in enumerate(sorted(requests.items())):
        if amount <= 0 or allocatable.get(resource, 0) > 0 or resource not in by_resource:
            continue
        name = f"request-{i}"
        reqs.append(DeviceRequest(name, exactly=ExactRequest(name, by_resource[resource], (), "ExactCount", amount)))
    if not reqs:
        return None
    namespace, _, name = pod_key.partition("/")
    return ResourceClaim(namespace, f"{name}-extended-resources", ClaimSpec(tuple(reqs)))
