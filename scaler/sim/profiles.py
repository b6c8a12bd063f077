"""kube-scheduler scoring profiles, as data: the simulator's binder scores with them, and the
platform component renders `BINPACK` into the KubeSchedulerConfiguration it ships
(`kube_scheduler_configuration()`), so what the simulator measures is what the cluster runs.

`DEFAULT` is kube-scheduler's built-in profile (kubescheduler.config.k8s.io/v1 defaults): score
plugins and weights TaintToleration 3, NodeAffinity 2, NodeResourcesFit 1 (LeastAllocated over
cpu and memory, weight 1 each; extended resources such as nvidia.com/gpu are not scored),
NodeResourcesBalancedAllocation 1 (cpu, memory), PodTopologySpread 2, InterPodAffinity 2,
ImageLocality 1. The last three score 0 for every node in a trace replay (no spread constraints, no
pod affinity, no images), so the binder leaves them out.

`BINPACK` is the profile gpuburst ships for GPU workloads (pods opt in with `schedulerName:
gpuburst-binpack`): NodeResourcesFit with MostAllocated over nvidia.com/gpu (weight 5), cpu (1) and
memory (1), plugin weight 5, and NodeResourcesBalancedAllocation disabled (it pulls pods towards
emptier nodes when a node's cpu and memory fill unevenly). A pod therefore goes to the node whose
GPUs are the most used, which keeps other nodes whole and lets them drain.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

from scaler.core import keys

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
        return dict(self.plugin_weights).get(plugin, 0)


FIT = "NodeResourcesFit"
BALANCED = "NodeResourcesBalancedAllocation"
TAINTS = "TaintToleration"
AFFINITY = "NodeAffinity"

DEFAULT: Final = ScoringProfile(
    name="default",
    scheduler_name=DEFAULT_SCHEDULER_NAME,
    fit_strategy="LeastAllocated",
    fit_resources=((keys.RES_CPU, 1), (keys.RES_MEMORY, 1)),
    plugin_weights=((TAINTS, 3), (AFFINITY, 2), (FIT, 1), (BALANCED, 1)),
)

BINPACK: Final = ScoringProfile(
    name="binpack",
    scheduler_name=BINPACK_SCHEDULER_NAME,
    fit_strategy="MostAllocated",
    fit_resources=((keys.RES_GPU, 5), (keys.RES_CPU, 1), (keys.RES_MEMORY, 1)),
    plugin_weights=((TAINTS, 3), (AFFINITY, 2), (FIT, 5)),
)

PROFILES: Final = {p.name: p for p in (DEFAULT, BINPACK)}


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
