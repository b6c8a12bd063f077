"""Pools read back from their groups' tags: cluster-autoscaler's node-template tags and gpuburst's own,
on groups made by gpuburst, eksctl, the console or by hand (`Pool.from_tags`, `adopt`). Pure."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from scaler.core.config import reservation as rsv
from scaler.core.config.catalogue import CATALOGUE, Cloud, InstanceType
from scaler.core.config.pool import Pool
from scaler.core.config.sharing import sharing_from_tags
from scaler.core.config.specs import TaintSpec
from scaler.core.model import keys


def pool_from_tags(
    tags: Mapping[str, str],
    *,
    cloud: Cloud,
    cluster: str,
    provider_ref: str,
    instance_types: list[str],
    zones: list[str],
    min_size: int,
    max_size: int,
    catalogue: Mapping[str, InstanceType] = CATALOGUE,
) -> Pool:
    """A pool from a group's tags plus what the cloud says of the group itself.

    Works on groups made by gpuburst, eksctl, the console or by hand: whatever the tags do not
    say falls back to cluster-autoscaler's reading (on-demand, role from the GPU count).
    """
    if cloud == "azure":
        tags = {_aws_form(k): v for k, v in tags.items()}
    if tags.get(keys.TAG_CA_ENABLED, "").lower() != "true" or keys.tag_ca_cluster(cluster) not in tags:
        raise ValueError(f"{provider_ref}: not tagged for cluster-autoscaler in cluster {cluster!r}")
    labels = {k[len(keys.TAG_CA_TEMPLATE_LABEL):]: v for k, v in tags.items()
              if k.startswith(keys.TAG_CA_TEMPLATE_LABEL)}
    taints = []
    for k, v in tags.items():
        if k.startswith(keys.TAG_CA_TEMPLATE_TAINT):
            value, _, effect = v.rpartition(":")
            taints.append(TaintSpec(key=k[len(keys.TAG_CA_TEMPLATE_TAINT):], value=value,
                                    effect=effect))  # type: ignore[arg-type]
    capacity_type = capacity_type_of(labels)
    entry = catalogue.get(instance_types[0]) if instance_types else None
    role = tags.get(keys.TAG_ROLE) or ("gpu" if entry and entry.gpus else "general")
    name = tags.get(keys.TAG_POOL) or pool_name(provider_ref)
    # The min-gpus taint is how min_pod_gpus is spelled on a node: read it back as the field.
    min_gpus = next((t.value for t in taints if t.key == keys.TAINT_MIN_GPUS and t.value.isdigit()), "0")
    draft = Pool.model_validate({
        "name": name, "cloud": cloud, "role": role, "provider_ref": provider_ref,
        "instance_types": instance_types, "capacity_type": capacity_type, "zones": zones,
        "min": min_size, "max": max_size, "fallback": tags.get(keys.TAG_FALLBACK),
        "min_pod_gpus": int(min_gpus), "reservation": rsv.from_tags(tags),
        "gpu_sharing": sharing_from_tags(labels, tags, entry.gpus if entry else 0),
        "gpu_allocation": "dra" if labels.get(keys.LABEL_GPU_ALLOCATION) == keys.GPU_ALLOCATION_DRA
        else "device-plugin",
    })
    ephemeral = tags.get(keys.TAG_CA_TEMPLATE_RESOURCES + keys.RES_EPHEMERAL)
    update: dict[str, Any] = {}
    if ephemeral and ephemeral.endswith("Gi"):
        update["root_volume_gib"] = int(ephemeral[:-2])
    resolved = draft.model_copy(update=update).resolve(catalogue)
    derived_labels = resolved.model_copy(update={"labels": {}}).node_labels()
    derived_taints = set(resolved.derived_taints())
    update = {
        "labels": {k: v for k, v in labels.items() if derived_labels.get(k) != v},
        "taints": [t for t in taints if t.to_taint() not in derived_taints],
    }
    # Re-validate so that the extracted labels and taints get the same checks as a pools file.
    return Pool.model_validate({**resolved.model_dump(by_alias=True), **update}).resolve(catalogue)


def _aws_form(azure_key: str) -> str:
    return azure_key.replace("_", "/") if azure_key.startswith(keys.azure_tag_key(keys.TAG_CA_PREFIX)) or \
        azure_key.startswith(keys.azure_tag_key(keys.DOMAIN + "/")) else azure_key


def pool_name(raw: str) -> str:
    """A valid pool name from a group's name or tag."""
    cleaned = re.sub(r"[^a-z0-9-]+", "-", raw.lower()).strip("-")
    return cleaned[:40].strip("-") or "pool"


def capacity_type_of(labels: Mapping[str, str], spot: bool = False) -> str:
    """A group's capacity type: our own label when it names one, else what the other tools' labels (EKS,
    Karpenter, the Azure scale set's priority) or the group (`spot`) say; on-demand by default."""
    ours = labels.get(keys.LABEL_CAPACITY_TYPE, "")
    if ours in ("spot", "on-demand", *rsv.PREPAID):
        return ours
    spotty = {labels.get(keys.LABEL_EKS_CAPACITY_TYPE, "").lower(), labels.get(keys.LABEL_KARPENTER_CAPACITY_TYPE, ""),
              labels.get(keys.LABEL_AZURE_SCALESET_PRIORITY, "")}
    return "spot" if spot or "spot" in spotty else "on-demand"

