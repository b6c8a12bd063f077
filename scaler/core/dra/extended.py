"""Extended resources served by DRA (DeviceClass `extendedResourceName`, DRAExtendedResource: GA and on in
1.37): a pod asking `nvidia.com/gpu: 2` on a node whose allocatable lacks `nvidia.com/gpu` is given a claim of
that many devices of the class that names the resource (or of class <name> for
`deviceclass.resource.kubernetes.io/<name>`), allocated with the pod's other claims; NodeResourcesFit leaves
such a resource to DRA there (upstream shouldDelegateResourceToDRA). On a node that advertises the resource
(a device plugin's) it is counted as before.

Two classes naming one resource: upstream picks the newest; the model has no creation time, so it is bad input
here (`clashes`), and the first by name serves it in a live cluster (the other is skipped with a Warning).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from scaler.core.model.dra import ClaimSpec, DeviceClass, DeviceRequest, ExactRequest, ResourceClaim

IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"


def served(classes: Iterable[DeviceClass]) -> dict[str, str]:
    """Extended resource -> the class that serves it (named by the class, or implied by its name)."""
    out: dict[str, str] = {}
    for cls in sorted(classes, key=lambda c: c.name):
        out[IMPLICIT_PREFIX + cls.name] = cls.name
        if cls.extended_resource_name:
            out.setdefault(cls.extended_resource_name, cls.name)
    return out


def clashes(classes: Iterable[DeviceClass]) -> list[tuple[DeviceClass, str]]:
    """(class, the class named first) for each class whose extendedResourceName another class, earlier by
    name, names already."""
    first: dict[str, str] = {}
    out = []
    for cls in sorted(classes, key=lambda c: c.name):
        name = cls.extended_resource_name
        if name:
            if name in first:
                out.append((cls, first[name]))
            else:
                first[name] = cls.name
    return out


def delegated(requests: Mapping[str, int], allocatable: Mapping[str, int],
              by_resource: Mapping[str, str]) -> dict[str, int]:
    """The requested extended resources kube-scheduler leaves to DRA on a node with this allocatable (a class
    serves them and the node does not advertise them: upstream shouldDelegateResourceToDRA), by amount."""
    return {r: v for r, v in requests.items() if v > 0 and r in by_resource and allocatable.get(r, 0) <= 0}


def node_requests(requests: Mapping[str, int], allocatable: Mapping[str, int],
                  by_resource: Mapping[str, str]) -> dict[str, int]:
    """What NodeResourcesFit counts against the node's allocatable: the requests less those left to DRA."""
    left = delegated(requests, allocatable, by_resource)
    return {r: v for r, v in requests.items() if r not in left}


def extended_resource_claim(pod_key: str, requests: Mapping[str, int], allocatable: Mapping[str, int],
                            classes: Iterable[DeviceClass] | Mapping[str, str]) -> ResourceClaim | None:
    """The claim standing for the pod's extended resources that the node does not offer itself, or None
    when there are none (or no class serves them: then the resource filter decides). `classes`: the
    classes, or `served(classes)`."""
    by_resource = classes if isinstance(classes, Mapping) else served(classes)
    left = delegated(requests, allocatable, by_resource)
    reqs = []
    for i, (resource, amount) in enumerate(sorted(requests.items())):
        if resource not in left:
            continue
        name = f"request-{i}"
        reqs.append(DeviceRequest(name, exactly=ExactRequest(name, by_resource[resource], (), "ExactCount", amount)))
    if not reqs:
        return None
    namespace, _, name = pod_key.partition("/")
    return ResourceClaim(namespace, f"{name}-extended-resources", ClaimSpec(tuple(reqs)))
