"""Adopting an existing cluster: its node groups, as the cloud describes them, become a pools file.

Pure: the providers read the groups (`NodeGroup`: tags plus what the cloud says of the group itself),
`adopt` maps them. It understands the tags of cluster-autoscaler (auto-discovery and node templates),
eksctl, kops and OpenAI's kubernetes-ec2-autoscaler (`KubernetesCluster`, `Role` / `KubernetesRole` =
worker or kubernetes-minion, `kube/<label>` node selectors). Every group, tag, label or taint it could
not map is reported with the reason, and the pools it writes pass the same `parse_config` as `run` and
`simulate`: a group that would make the file invalid is left out and reported, never half-written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ValidationError

from scaler.core.config import reservation
from scaler.core.config.catalogue import CATALOGUE, Cloud, InstanceType
from scaler.core.config.pool import Pool, capacity_type_of, pool_name
from scaler.core.config.settings import ConfigError, parse_config
from scaler.core.config.specs import LABEL_KEY, TaintSpec
from scaler.core.model import keys
from scaler.core.model.errors import FieldError

# Labels the kubelet and the cloud set on every node themselves: a pool never declares them.
_SELF_SET_LABELS = frozenset({keys.LABEL_ARCH, keys.LABEL_OS, keys.LABEL_HOSTNAME, keys.LABEL_INSTANCE_TYPE,
                              keys.LABEL_ZONE, keys.LABEL_REGION, keys.LABEL_EKS_CAPACITY_TYPE,
                              keys.LABEL_AZURE_SCALESET_PRIORITY})
_ROUNDS = 50  # parse_config passes at most: each drops at least one group


@dataclass(frozen=True)
class NodeGroup:
    """One node group as its cloud describes it (an Auto Scaling group, an AKS agent pool or a VM scale set)."""

    name: str
    tags: Mapping[str, str]
    instance_types: tuple[str, ...]
    zones: tuple[str, ...]
    min_size: int
    max_size: int
    spot: bool = False  # the cloud's own word: SpotPrice, an all-spot mixed policy, Spot priority
    labels: Mapping[str, str] = field(default_factory=dict)  # labels the cloud gives the nodes (AKS nodeLabels)
    taints: tuple[str, ...] = ()  # the cloud's node taints, `key=value:Effect` (AKS nodeTaints)
    system: bool = False  # an AKS System-mode pool
    azure_kind: Literal["agentpool", "vmss"] | None = None
    bounds_note: str = ""  # set when the cloud gives no autoscaling bounds: how min / max were chosen


@dataclass(frozen=True)
class Unmapped:
    group: str
    what: str  # "group", "tag <key>", "label <key>", "taint <text>"
    reason: str

    def __str__(self) -> str:
        return f"{self.group}: {self.what}: {self.reason}"


@dataclass
class Adoption:
    config: dict[str, Any]  # the pools file, valid for parse_config
    groups: dict[str, NodeGroup]  # pool name -> the group it describes
    unmapped: list[Unmapped]
    tags_to_add: dict[str, dict[str, str]]  # group name -> the tags the scaler (or cluster-autoscaler) needs


def aws_tag_key(key: str) -> str:
    """cluster-autoscaler's Azure tag form back to the AWS form ('_' for '/' in its own keys only)."""
    azure_prefixes = (keys.azure_tag_key(keys.TAG_CA_PREFIX), keys.azure_tag_key(keys.DOMAIN + "/"))
    return key.replace("_", "/") if key.startswith(azure_prefixes) else key


def owner(tags: Mapping[str, str], cluster: str) -> str | None:
    """Which tool's tags put the group in `cluster` (None: not this cluster's group)."""
    if keys.tag_ca_cluster(cluster) in tags or tags.get(keys.TAG_CA_AZURE_NAME) == cluster:
        return "cluster-autoscaler"
    if tags.get(keys.TAG_CLUSTER) == cluster:
        return "gpuburst"
    if cluster in (tags.get(keys.TAG_EKSCTL_CLUSTER), tags.get(keys.TAG_EKS_CLUSTER)):
        return "eksctl"
    if tags.get(keys.TAG_KUBERNETES_CLUSTER) == cluster:
        if any(k in tags for k in keys.TAG_SEED_ROLES):
            return "kubernetes-ec2-autoscaler"
        return "kops"
    if tags.get(keys.TAG_K8S_CLUSTER_PREFIX + cluster) in ("owned", "shared"):
        return "kops"
    return None


def not_a_worker(tags: Mapping[str, str]) -> str | None:
    """Why a group of the cluster holds no workload nodes, if it does not."""
    for key in keys.TAG_SEED_ROLES:
        if key in tags and tags[key] not in keys.SEED_WORKER_ROLES:
            return (f"{key}={tags[key]}: the kubernetes-ec2-autoscaler scales only "
                    f"{' or '.join(keys.SEED_WORKER_ROLES)} groups")
    roles = [k[len(keys.TAG_KOPS_ROLE_PREFIX):] for k in tags if k.startswith(keys.TAG_KOPS_ROLE_PREFIX)]
    if roles and keys.KOPS_WORKER_ROLE not in roles:
        return f"kops role {', '.join(sorted(roles))}: not a worker group"
    return None


def _understood(key: str, cluster: str) -> bool:
    """A tag the mapping reads (or a cloud's or tool's bookkeeping tag that says nothing of the nodes)."""
    exact = {keys.TAG_CA_ENABLED, keys.tag_ca_cluster(cluster), keys.TAG_POOL, keys.TAG_ROLE, keys.TAG_FALLBACK,
             keys.TAG_CLUSTER, keys.TAG_KUBERNETES_CLUSTER, *keys.TAG_SEED_ROLES, keys.TAG_NAME,
             keys.TAG_CA_AZURE_ENABLED, keys.TAG_CA_AZURE_NAME, keys.TAG_CA_AZURE_MIN, keys.TAG_CA_AZURE_MAX,
             keys.TAG_CA_TEMPLATE_RESOURCES + keys.RES_GPU, keys.TAG_CA_TEMPLATE_RESOURCES + keys.RES_EPHEMERAL}
    prefixes = (keys.TAG_CA_TEMPLATE_LABEL, keys.TAG_CA_TEMPLATE_TAINT, keys.TAG_SEED_SELECTOR_PREFIX,
                keys.TAG_KOPS_ROLE_PREFIX, keys.TAG_K8S_CLUSTER_PREFIX, keys.TAG_RESERVATION_PREFIX,
                *keys.TAG_BOOKKEEPING_PREFIXES)
    return key in exact or key.startswith(prefixes)


def _pool_name(group: NodeGroup, labels: Mapping[str, str]) -> str:
    t = group.tags
    raw = (t.get(keys.TAG_POOL) or t.get(keys.TAG_EKSCTL_NODEGROUP) or t.get(keys.TAG_EKS_NODEGROUP)
           or labels.get(keys.LABEL_KOPS_INSTANCEGROUP) or group.name)
    return pool_name(raw)


def _draft(group: NodeGroup, cloud: Cloud, cluster: str, catalogue: Mapping[str, InstanceType],
           report: list[Unmapped]) -> dict[str, Any] | None:
    """The pools-file entry for one group, or None (reported) when it cannot be one."""
    tags = {aws_tag_key(k): v for k, v in group.tags.items()} if cloud == "azure" else dict(group.tags)
    why = not_a_worker(tags)
    if why:
        report.append(Unmapped(group.name, "group", why))
        return None
    if not group.instance_types:
        why = "the cloud names no instance type for it (no launch template, launch configuration or overrides)"
        report.append(Unmapped(group.name, "group", why))
        return None
    if group.bounds_note:
        report.append(Unmapped(group.name, "min/max", group.bounds_note))
    labels: dict[str, str] = dict(group.labels)
    for key, value in sorted(tags.items()):
        for prefix in (keys.TAG_CA_TEMPLATE_LABEL, keys.TAG_SEED_SELECTOR_PREFIX):
            if key.startswith(prefix):
                labels[key[len(prefix):]] = value
    taint_texts = list(group.taints)
    for key, value in sorted(tags.items()):
        if key.startswith(keys.TAG_CA_TEMPLATE_TAINT):
            taint_texts.append(f"{key[len(keys.TAG_CA_TEMPLATE_TAINT):]}={value}")
    for key in sorted(tags):
        if not _understood(key, cluster):
            report.append(Unmapped(group.name, f"tag {key}", "not a node label, taint or scaler setting: left on "
                                   "the group, not in the pools file"))
    kept_labels: dict[str, str] = {}
    for key, value in labels.items():
        if key in _SELF_SET_LABELS:
            continue
        if not LABEL_KEY.match(key):
            report.append(Unmapped(group.name, f"label {key}", "not a valid label key"))
            continue
        kept_labels[key] = value
    taints: list[TaintSpec] = []
    for text in taint_texts:
        try:
            taints.append(TaintSpec.parse(text))
        except (ValueError, ValidationError):
            report.append(Unmapped(group.name, f"taint {text}", "not key=value:Effect with a valid key and effect"))
    capacity_type = capacity_type_of(labels, group.spot)
    entry = catalogue.get(group.instance_types[0])
    gpus = entry.gpus if entry else 0
    role = tags.get(keys.TAG_ROLE) or ("gpu" if gpus else "system" if group.system else "general")
    min_gpus = next((t.value for t in taints if t.key == keys.TAINT_MIN_GPUS and t.value.isdigit()), "0")
    draft: dict[str, Any] = {
        "name": _pool_name(group, labels), "role": role, "provider_ref": group.name,
        "instance_types": list(group.instance_types), "capacity_type": capacity_type, "zones": list(group.zones),
        "min": group.min_size, "max": group.max_size,
    }
    if cloud == "azure":
        draft["azure_kind"] = group.azure_kind or "agentpool"
    if int(min_gpus):
        draft["min_pod_gpus"] = int(min_gpus)
    if tags.get(keys.TAG_FALLBACK):
        draft["fallback"] = tags[keys.TAG_FALLBACK]
    if reservation.from_tags(tags):
        draft["reservation"] = reservation.from_tags(tags)
    ephemeral = tags.get(keys.TAG_CA_TEMPLATE_RESOURCES + keys.RES_EPHEMERAL, "")
    if ephemeral.endswith("Gi") and ephemeral[:-2].isdigit():
        draft["root_volume_gib"] = int(ephemeral[:-2])
    # Keep only what the pool does not derive itself (its own labels and taints come back on every node).
    try:
        derived = Pool.model_validate({**draft, "cloud": cloud}).resolve(catalogue)
    except (FieldError, ValidationError, ValueError) as err:
        report.append(Unmapped(group.name, "group", _message(err)))
        return None
    own_labels = derived.node_labels()
    own_taints = set(derived.derived_taints())
    draft["labels"] = {k: v for k, v in sorted(kept_labels.items()) if own_labels.get(k) != v}
    draft["taints"] = [f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}"
                       for t in taints if t.to_taint() not in own_taints]
    for key in (k for k in ("labels", "taints") if not draft[k]):
        del draft[key]
    return draft


def _message(err: Exception) -> str:
    if isinstance(err, ValidationError):
        first = err.errors()[0]
        raised = (first.get("ctx") or {}).get("error")
        if isinstance(raised, FieldError):
            return f"{'.'.join(raised.path)}: {raised.message}"
        return f"{'.'.join(str(p) for p in first['loc'])}: {first['msg'].removeprefix('Value error, ')}"
    if isinstance(err, FieldError):
        return f"{'.'.join(err.path)}: {err.message}"
    return str(err)


def _fallbacks(drafts: list[dict[str, Any]], catalogue: Mapping[str, InstanceType]) -> None:
    """Point each spot GPU pool without a (kept) fallback at an on-demand pool of the same GPUs per node,
    sharing an instance type when one does; the scaler refuses a spot GPU pool without one."""
    names = {d["name"] for d in drafts}

    def gpus(d: dict[str, Any]) -> int:
        entry = catalogue.get(d["instance_types"][0])
        return entry.gpus if entry else 0

    for d in drafts:
        if d.get("fallback") in names:
            continue
        d.pop("fallback", None)
        if d["capacity_type"] != "spot" or d["role"] != "gpu":
            continue
        candidates = [o for o in drafts if o["capacity_type"] == "on-demand" and gpus(o) == gpus(d)]
        candidates.sort(key=lambda o: (not set(o["instance_types"]) & set(d["instance_types"]), o["name"]))
        if candidates:
            d["fallback"] = candidates[0]["name"]


def _unique(drafts: list[dict[str, Any]]) -> None:
    seen: set[str] = set()
    for d in drafts:
        base, n = d["name"], 2
        while d["name"] in seen:
            suffix = f"-{n}"
            d["name"] = base[:40 - len(suffix)].rstrip("-") + suffix
            n += 1
        seen.add(d["name"])


def adopt(groups: Iterable[NodeGroup], *, cloud: Cloud, cluster: str, region: str = "",
          catalogue: Mapping[str, InstanceType] = CATALOGUE) -> Adoption:
    """The pools file describing the cluster's groups, what could not be mapped, and the tags to add."""
    report: list[Unmapped] = []
    drafts: list[dict[str, Any]] = []
    by_ref: dict[str, NodeGroup] = {}
    for group in sorted(groups, key=lambda g: g.name):
        tags = {aws_tag_key(k): v for k, v in group.tags.items()} if cloud == "azure" else dict(group.tags)
        if group.azure_kind != "agentpool" and owner(tags, cluster) is None:
            continue  # another cluster's group, or no cluster's
        draft = _draft(group, cloud, cluster, catalogue, report)
        if draft is not None:
            drafts.append(draft)
            by_ref[group.name] = group
    _unique(drafts)
    data: dict[str, Any] = {}
    for _ in range(_ROUNDS):
        _fallbacks(drafts, catalogue)
        data = {"cluster": cluster, "cloud": cloud, **({"region": region} if region else {}), "pools": drafts}
        try:
            config = parse_config(data, "import")
            break
        except ConfigError as err:
            dropped = _drop(err, drafts, by_ref, report)
            if not dropped:
                raise
    else:  # pragma: no cover - each round drops a group, and there are fewer groups than rounds
        raise ConfigError("import: the groups could not be mapped to a valid pools file")
    pools = {p.name: p for p in config.pools}
    tags_to_add: dict[str, dict[str, str]] = {}
    for d in drafts:
        group = by_ref[d["provider_ref"]]
        wanted = pools[d["name"]].to_tags(cluster)
        missing = {k: v for k, v in wanted.items() if group.tags.get(k) != v}
        if missing:
            tags_to_add[group.name] = missing
    return Adoption(config=data, groups={d["name"]: by_ref[d["provider_ref"]] for d in drafts},
                    unmapped=report, tags_to_add=tags_to_add)


def _drop(err: ConfigError, drafts: list[dict[str, Any]], by_ref: Mapping[str, NodeGroup],
          report: list[Unmapped]) -> bool:
    """Leave out the groups a pools-file issue names; False when an issue names no pool."""
    by_name = {f"[{d['name']}]": d for d in drafts}
    bad: dict[str, str] = {}
    for issue in err.issues:
        if len(issue.path) >= 2 and issue.path[0] == "pools" and issue.path[1] in by_name:
            draft = by_name[issue.path[1]]
            where = ".".join(issue.path[2:])
            message = f"{where}: {issue.message}" if where else issue.message
            if where == "fallback" and draft["capacity_type"] == "spot":
                message += " (no on-demand group of the same GPUs per node to fall back to)"
            bad.setdefault(draft["provider_ref"], message)
        else:
            return False
    for ref, message in bad.items():
        report.append(Unmapped(by_ref[ref].name, "group", message))
    drafts[:] = [d for d in drafts if d["provider_ref"] not in bad]
    return bool(bad)
