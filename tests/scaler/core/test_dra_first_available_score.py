"""Where the planner puts a pod whose claim lists alternatives (firstAvailable): kube-scheduler's
DynamicResources plugin scores each node by the subrequest it allocates there (1.37,
pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go, Score / computeScore: 8 less the
subrequest's index, normalised to 100 over the feasible nodes, weight 2), so a node that allocates the first
choice wins over an emptier node that allocates only the second. Found by `make scheduler-diff`: the real
scheduler bound such a pod to the L4 node the planner ranked below an emptier A100 node."""

from __future__ import annotations

from pathlib import Path

from core_builders import plan

from scaler.configfile import load_config
from scaler.core.dra.nvidia import DEVICE_CLASSES, GPU_CLASS
from scaler.core.model import keys
from scaler.core.model.dra import ClaimSpec, DeviceRequest, ExactRequest, ResourceClaimTemplate
from scaler.core.model.objects import Node, Pod, PodResourceClaim, Toleration
from scaler.core.planning.snapshot import PoolObservation, Snapshot
from scaler.core.planning.state import State
from scaler.core.scheduling import scoring
from scaler.core.scheduling.filters import DraObjects

ROOT = Path(__file__).resolve().parents[3]
TOL = (Toleration(keys.TAINT_GPU, "Exists", "", "NoSchedule"),)
L4 = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA L4'"
A100 = "device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA A100')"


def _snapshot(first: str, second: str) -> Snapshot:
    cfg = load_config(ROOT / "examples" / "pools-aws-dra.yaml")
    spec = ClaimSpec((DeviceRequest("gpu", first_available=(
        ExactRequest(first, GPU_CLASS.name, selectors=(L4 if first == "l4" else A100,)),
        ExactRequest(second, GPU_CLASS.name, selectors=(L4 if second == "l4" else A100,)))),))
    objects = DraObjects(classes={c.name: c for c in DEVICE_CLASSES},
                         templates={"ml/gpu": ResourceClaimTemplate("ml", "gpu", spec)})
    nodes = []
    for pool in cfg.pools:
        if pool.name not in ("l4-dra", "a100-dra"):
            continue
        name = f"{pool.name}-0"
        tmpl = pool.template_node(pool.zones[0], cfg.region)
        objects.slices.extend(pool.dra_slices(name))
        nodes.append(Node(name, {**tmpl.labels, keys.LABEL_HOSTNAME: name}, tmpl.taints, tmpl.allocatable,
                          pool=pool.name, provider_id=f"aws:///{name}"))
    pod = Pod("p", "ml", {keys.RES_CPU: 1000, keys.RES_MEMORY: 2**30}, tolerations=TOL,
              resource_claims=(PodResourceClaim("gpu", template_name="gpu"),))
    pools = {p.name: PoolObservation(p, sum(n.pool == p.name for n in nodes), sum(n.pool == p.name for n in nodes))
             for p in cfg.pools}
    return Snapshot(now=1000.0, pending=[pod], nodes=nodes, pools=pools, dra=objects)


def test_the_node_allocating_the_first_choice_wins_over_an_emptier_one() -> None:
    cfg = load_config(ROOT / "examples" / "pools-aws-dra.yaml")
    # By resources alone the A100 node (p4d.24xlarge, 96 cpus) beats the L4 node (g6.xlarge, 4 cpus).
    assert plan(_snapshot("a100", "l4"), State(), cfg)[0].verdicts["ml/p"].node == "a100-dra-0"
    # L4 first: the L4 node scores DynamicResources 100 x 2, the A100 node 7/8 of it; that outweighs the rest.
    assert plan(_snapshot("l4", "a100"), State(), cfg)[0].verdicts["ml/p"].node == "l4-dra-0"


def test_priority_scores_normalise_as_the_scheduler_does() -> None:
    assert scoring.priority_scores([8, 7, 0], scoring.DEFAULT) == [200, 174, 0]
    assert scoring.priority_scores([0, 0], scoring.DEFAULT) == [0, 0]
