"""kube-scheduler scoring: the profiles as data and the score plugins as pure functions.

One implementation, three users: the scale-up planner places pending pods on existing nodes where
the profile their `schedulerName` names would, the simulator's binder binds with it, and the
platform component renders `BINPACK` into the KubeSchedulerConfiguration it ships
(`kube_scheduler_configuration()`), so what the planner assumes and the simulator measures is what
the cluster runs.

`DEFAULT` is kube-scheduler's built-in profile (kubescheduler.config.k8s.io/v1 defaults): score
plugins and weights TaintToleration 3, NodeAffinity 2, NodeResourcesFit 1 (LeastAllocated over
cpu and memory, weight 1 each; extended resources such as nvidia.com/gpu are not scored),
NodeResourcesBalancedAllocation 1 (cpu, memory), PodTopologySpread 2, InterPodAffinity 2,
ImageLocality 1, DynamicResources 2. The three before it score 0 for every node in a trace replay (no spread
constraints, no pod affinity, no images), so the binder leaves them out; DynamicResources scores only pods
whose ResourceClaims have firstAvailable requests (`priority_scores`, used by the planner's placement of such
pods).

`BINPACK` is the profile gpuburst ships for GPU workloads (pods opt in with `schedulerName:
gpuburst-binpack`): NodeResourcesFit with MostAllocated over nvidia.com/gpu (weight 5), cpu (1) and
memory (1), plugin weight 5, and NodeResourcesBalancedAllocation disabled (it pulls pods towards
emptier nodes when a node's cpu and memory fill unevenly). A pod therefore goes to the node whose
GPUs are the most used, which keeps other nodes whole and lets them drain.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from scaler.core.model import keys
from scaler.core.model.objects import Node, Pod
from scaler.core.model.selectors import term_matches
from scaler.core.scheduling.predicates import toleration_matches

DEFAULT_SCHEDULER_NAME: Final = "default-scheduler"
BINPACK_SCHEDULER_NAME: Final = "gpuburst-binpack"

FitStrategy = Literal["LeastAllocated", "MostAllocated"]


@dataclass(frozen=True, slots=True)
class ScoringProfile:
    name: str  # what --scheduler and the report call it
    scheduler_name: str  # the pod's spec.schedulerName
    fit_strategy: FitStrategy
    fit_resources: tuple[tuple[str, int], ...]  # (resource, weight) for NodeResourcesFit
    plugin_weights: tuple[tuple[str, int], ...]  # enabled score plugins and their weights
    balanced_resources: tuple[str, ...] = (keys.RES_CPU, keys.RES_MEMORY)

    def weight(self, plugin: str) -> int:
        for name, w in self.plugin_weights:
            if name == plugin:
                return w
        return 0


FIT = "NodeResourcesFit"
BALANCED = "NodeResourcesBalancedAllocation"
TAINTS = "TaintToleration"
AFFINITY = "NodeAffinity"
DRA = "DynamicResources"  # scores only pods whose claims have firstAvailable requests (priority_scores)

DEFAULT: Final = ScoringProfile(
    name="default",
    scheduler_name=DEFAULT_SCHEDULER_NAME,
    fit_strategy="LeastAllocated",
    fit_resources=((keys.RES_CPU, 1), (keys.RES_MEMORY, 1)),
    plugin_weights=((TAINTS, 3), (AFFINITY, 2), (FIT, 1), (BALANCED, 1), (DRA, 2)),
)

BINPACK: Final = ScoringProfile(
    name="binpack",
    scheduler_name=BINPACK_SCHEDULER_NAME,
    fit_strategy="MostAllocated",
    fit_resources=((keys.RES_GPU, 5), (keys.RES_CPU, 1), (keys.RES_MEMORY, 1)),
    plugin_weights=((TAINTS, 3), (AFFINITY, 2), (FIT, 5), (DRA, 2)),
)

PROFILES: Final = {p.name: p for p in (DEFAULT, BINPACK)}
BY_SCHEDULER_NAME: Final = {p.scheduler_name: p for p in PROFILES.values()}


def for_scheduler(scheduler_name: str) -> ScoringProfile:
    """The profile a pod's `schedulerName` names. A scheduler gpuburst does not know is assumed to
    score as kube-scheduler's default profile (the pod is pending because that scheduler tried it)."""
    return BY_SCHEDULER_NAME.get(scheduler_name, DEFAULT)


# --- score plugins, with kube-scheduler's integer arithmetic ---------------------------------------
MAX_NODE_SCORE = 100
_NATIVE = frozenset({keys.RES_CPU, keys.RES_MEMORY, keys.RES_EPHEMERAL, keys.RES_PODS})


def fit_score(request: Mapping[str, int], alloc: Mapping[str, int], free: Mapping[str, int],
              profile: ScoringProfile) -> int:
    """NodeResourcesFit: per resource, LeastAllocated ``(allocatable - requested) * 100 // allocatable``
    or MostAllocated ``requested * 100 // allocatable`` with the pod included, averaged with the
    resource weights. A resource the node lacks is skipped, and so is an extended resource the pod
    does not request, as the scheduler does."""
    total = weights = 0
    least = profile.fit_strategy == "LeastAllocated"
    for resource, weight in profile.fit_resources:
        a = alloc.get(resource, 0)
        if a <= 0:
            continue
        want = request.get(resource, 0)
        if not want and resource not in _NATIVE:
            continue
        requested = a - free.get(resource, 0) + want
        if least:
            score = (a - requested) * MAX_NODE_SCORE // a if requested <= a else 0
        else:
            score = min(requested, a) * MAX_NODE_SCORE // a
        total += score * weight
        weights += weight
    return total // weights if weights else 0


def _balance(fractions: list[float]) -> int:
    """``(1 - std) * 100`` of the resource fractions (balanced_allocation.go, balancedResourceScore)."""
    std = 0.0
    if len(fractions) == 2:
        std = abs(fractions[0] - fractions[1]) / 2
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
    return int((1 - std) * MAX_NODE_SCORE)


def balanced_score(request: Mapping[str, int], alloc: Mapping[str, int], free: Mapping[str, int],
                   profile: ScoringProfile) -> int:
    """NodeResourcesBalancedAllocation as kube-scheduler 1.37 scores it (balanced_allocation.go,
    balancedResourceScorer): by how much the pod improves the node's balance, ``50 + (50 + with - without) // 2``
    where `with` and `without` are ``(1 - std) * 100`` of the resource fractions with the pod and without it
    (75: no change; towards 100: better balanced; towards 50: worse)."""
    with_pod, without = [], []
    for resource in profile.balanced_resources:
        a = alloc.get(resource, 0)
        if a <= 0:
            continue
        requested = a - free.get(resource, 0)
        f = requested / a  # (min(f, 1.0) without a call: a pass scores thousands of nodes)
        without.append(f if f < 1.0 else 1.0)
        f = (requested + request.get(resource, 0)) / a
        with_pod.append(f if f < 1.0 else 1.0)
    half = MAX_NODE_SCORE // 2
    return half + (half + _balance(with_pod) - _balance(without)) // 2


def resource_score(request: Mapping[str, int], alloc: Mapping[str, int], free: Mapping[str, int],
                   profile: ScoringProfile) -> int:
    """The weighted score of the plugins that look at a node's resources (the per-node part)."""
    w_fit, w_bal = _resource_weights(profile)
    total = w_fit * fit_score(request, alloc, free, profile) if w_fit else 0
    if w_bal:
        total += w_bal * balanced_score(request, alloc, free, profile)
    return total


@functools.cache
def _resource_weights(profile: ScoringProfile) -> tuple[int, int]:
    """The weights of NodeResourcesFit and NodeResourcesBalancedAllocation (asked of every node scored)."""
    return profile.weight(FIT), profile.weight(BALANCED)


def intolerable_prefer_no_schedule(pod: Pod, node: Node) -> int:
    tols = [t for t in pod.tolerations if t.effect in ("", "PreferNoSchedule")]
    return sum(1 for taint in node.taints
               if taint.effect == "PreferNoSchedule" and not any(toleration_matches(t, taint) for t in tols))


def preferred_affinity_sum(pod: Pod, node: Node) -> int:
    return sum(p.weight for p in pod.preferred_affinity if term_matches(p.term, node.labels))


def static_scores(pod: Pod, nodes: Sequence[Node], profile: ScoringProfile) -> list[int]:
    """The weighted TaintToleration and NodeAffinity scores of feasible nodes, normalised over them as
    the scheduler does (TaintToleration in reverse: fewest intolerable PreferNoSchedule taints = 100)."""
    w_taint, w_aff = profile.weight(TAINTS), profile.weight(AFFINITY)
    out = [0] * len(nodes)
    if w_taint:
        counts = [intolerable_prefer_no_schedule(pod, n) for n in nodes]
        top = max(counts, default=0)
        for i, c in enumerate(counts):
            out[i] += w_taint * (MAX_NODE_SCORE - (c * MAX_NODE_SCORE // top if top else 0))
    if w_aff and pod.preferred_affinity:
        sums = [preferred_affinity_sum(pod, n) for n in nodes]
        top = max(sums, default=0)
        if top:
            for i, s in enumerate(sums):
                out[i] += w_aff * (s * MAX_NODE_SCORE // top)
    return out


def priority_scores(raw: Sequence[int], profile: ScoringProfile) -> list[int]:
    """DynamicResources' weighted scores of feasible nodes from their raw scores (`DraCheck.priority_score`),
    normalised as kube-scheduler's DefaultNormalizeScore does: the best node 100, the others in proportion."""
    top = max(raw, default=0)
    w = profile.weight(DRA)
    return [w * (r * MAX_NODE_SCORE // top) if top else 0 for r in raw]


def score_nodes(pod: Pod, candidates: Sequence[tuple[Node, Mapping[str, int]]], profile: ScoringProfile) -> list[int]:
    """Total scores of feasible nodes (each with its free resources), in the order given."""
    statics = static_scores(pod, [n for n, _ in candidates], profile)
    return [s + resource_score(pod.requests, node.allocatable, free, profile)
            for s, (node, free) in zip(statics, candidates, strict=True)]


def select_node(pod: Pod, candidates: Sequence[tuple[Node, Mapping[str, int]]], profile: ScoringProfile) -> Node | None:
    """The node kube-scheduler would bind to among feasible candidates. The real scheduler picks at
    random among the best; this picks the first by node name, so that every result is reproducible."""
    if not candidates:
        return None
    scores = score_nodes(pod, candidates, profile)
    top = max(scores)
    return min((c[0] for c, s in zip(candidates, scores, strict=True) if s == top), key=lambda n: n.name)


def kube_scheduler_profile(profile: ScoringProfile = BINPACK) -> dict[str, Any]:
    """One entry of KubeSchedulerConfiguration.profiles that makes kube-scheduler score as `profile`."""
    score: dict[str, Any] = {
        "enabled": [{"name": FIT, "weight": profile.weight(FIT)}],
    }
    if not profile.weight(BALANCED):
        score["disabled"] = [{"name": BALANCED}]
    return {
        "schedulerName": profile.scheduler_name,
        "plugins": {"score": score},
        "pluginConfig": [{
            "name": FIT,
            "args": {"scoringStrategy": {
                "type": profile.fit_strategy,
                "resources": [{"name": r, "weight": w} for r, w in profile.fit_resources],
            }},
        }],
    }


def kube_scheduler_configuration(profile: ScoringProfile = BINPACK) -> dict[str, Any]:
    """The whole KubeSchedulerConfiguration for a second scheduler running `profile`."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": True, "resourceName": profile.scheduler_name,
                           "resourceNamespace": "kube-system"},
        "profiles": [kube_scheduler_profile(profile)],
    }
