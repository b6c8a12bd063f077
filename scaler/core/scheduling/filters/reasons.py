"""Reasons as kube-scheduler's plugins word them in a FailedScheduling event (Kubernetes 1.31 - 1.34)."""

from __future__ import annotations

from typing import Final

NODE_NAME: Final = "node(s) didn't match the requested node name"  # NodeName
PORTS: Final = "node(s) didn't have free ports for the requested pod ports"  # NodePorts
SPREAD: Final = "node(s) didn't match pod topology spread constraints"  # PodTopologySpread
SPREAD_LABEL: Final = SPREAD + " (missing required label)"
AFFINITY: Final = "node(s) didn't match pod affinity rules"  # InterPodAffinity
ANTI_AFFINITY: Final = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY: Final = "node(s) didn't satisfy existing pods anti-affinity rules"
VOLUME_ZONE: Final = "node(s) had no available volume zone"  # VolumeZone
VOLUME_NODE_CONFLICT: Final = "node(s) had volume node affinity conflict"  # VolumeBinding
VOLUME_BIND_CONFLICT: Final = "node(s) didn't find available persistent volumes to bind"
VOLUME_PV_MISSING: Final = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
UNBOUND_IMMEDIATE: Final = "pod has unbound immediate PersistentVolumeClaims"
MAX_VOLUMES: Final = "node(s) exceed max volume count"  # NodeVolumeLimits
RWOP_CONFLICT: Final = (  # VolumeRestrictions
    "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode")


def claim_not_found(name: str) -> str:
    return f'persistentvolumeclaim "{name}" not found'


def ephemeral_claim_missing(name: str) -> str:
    return f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{name}"'


def claim_deleting(name: str) -> str:
    return f'persistentvolumeclaim "{name}" is being deleted'


def claim_lost(name: str, volume: str) -> str:
    return f'persistentvolumeclaim "{name}" bound to non-existent persistentvolume "{volume}"'


def claim_not_for_pod(name: str) -> str:
    return f'persistentvolumeclaim "{name}" was not created for the pod'
