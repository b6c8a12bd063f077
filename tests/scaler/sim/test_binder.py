"""The binder places pods where kube-scheduler would (documented cases of its default profile and of
the binpack profile gpuburst ships)."""

from __future__ import annotations

from scaler.core.config.settings import ScalerConfig
from scaler.core.model import keys
from scaler.core.model.objects import Node, Pod, PreferredTerm, SelectorRequirement, Taint, Toleration
from scaler.core.scheduling.predicates import effective_request
from scaler.core.scheduling.scoring import (
    BINPACK,
    DEFAULT,
    balanced_score,
    fit_score,
    kube_scheduler_configuration,
)
from scaler.sim.binder import Binder

GPU_TOL = Toleration(keys.TAINT_GPU, "Exists", "", "NoSchedule")


def _node(config: ScalerConfig, pool: str, name: str) -> Node:
    t = config.pool(pool).template_node()
    return Node(name=name, labels={**t.labels, keys.LABEL_HOSTNAME: name}, taints=t.taints,
                allocatable=dict(t.allocatable), pool=pool,
                pods=[Pod(f"ds-{name}", requests=dict(p.requests), owner_kind="DaemonSet") for p in t.pods])


def _pod(name: str, gpus: int = 0, cpu: int = 1000, mem: int = 2**30, tolerations: tuple[Toleration, ...] = (),
         scheduler: str = "default-scheduler") -> Pod:
    req = {keys.RES_CPU: cpu, keys.RES_MEMORY: mem}
    if gpus:
        req[keys.RES_GPU] = gpus
        tolerations = (GPU_TOL, *tolerations)
    return Pod(name, requests=effective_request([req]), tolerations=tolerations, scheduler_name=scheduler)


def _min8() -> tuple[Toleration, ...]:
    return (Toleration(keys.TAINT_MIN_GPUS, "Equal", "8", "NoSchedule"),)


def _cluster(config: ScalerConfig, profile_name: str) -> Binder:
    profile = DEFAULT if profile_name == "default" else BINPACK
    binder = Binder({profile.scheduler_name: profile})
    for name in ("node-a", "node-b"):
        binder.add_node(_node(config, "gpu8-od", name))
    return binder


def test_default_profile_spreads_gpu_pods(small_config: ScalerConfig) -> None:
    """LeastAllocated over cpu and memory: the second pod goes to the emptier node."""
    binder = _cluster(small_config, "default")
    first = binder.bind(_pod("p1", gpus=8, cpu=4000, tolerations=_min8()))
    assert first is not None and first.name == "node-a"  # equal scores: the first name
    binder.unbind(binder.nodes["node-a"].pods[-1])
    # A smaller pod on node-a, then another: default scoring sends it to node-b (spread).
    small_gpu = dict(gpus=4, cpu=4000, tolerations=(Toleration(keys.TAINT_MIN_GPUS, "Exists"),))
    assert binder.bind(_pod("p2", **small_gpu)).name == "node-a"  # type: ignore[arg-type,union-attr]
    assert binder.bind(_pod("p3", **small_gpu)).name == "node-b"  # type: ignore[arg-type,union-attr]


def test_binpack_profile_packs_gpu_pods(small_config: ScalerConfig) -> None:
    binder = _cluster(small_config, "binpack")
    small_gpu = dict(gpus=4, cpu=4000, tolerations=(Toleration(keys.TAINT_MIN_GPUS, "Exists"),),
                     scheduler=BINPACK.scheduler_name)
    assert binder.bind(_pod("p2", **small_gpu)).name == "node-a"  # type: ignore[arg-type,union-attr]
    assert binder.bind(_pod("p3", **small_gpu)).name == "node-a"  # type: ignore[arg-type,union-attr]
    assert binder.free["node-a"][keys.RES_GPU] == 0 and binder.free["node-b"][keys.RES_GPU] == 8


def test_taints_respected(small_config: ScalerConfig) -> None:
    binder = Binder({DEFAULT.scheduler_name: DEFAULT})
    binder.add_node(_node(small_config, "gpu8-od", "big"))
    # A 1-GPU pod does not tolerate the 8-GPU pool's min-gpus taint: it stays pending.
    assert binder.bind(_pod("one", gpus=1)) is None
    # A CPU pod does not tolerate the GPU taint.
    assert binder.bind(_pod("cpu")) is None
    binder.add_node(_node(small_config, "gpu1-od", "small"))
    assert binder.bind(_pod("one", gpus=1)).name == "small"  # type: ignore[union-attr]
    # A cordoned node takes nothing.
    binder.cordon("big")
    assert binder.bind(_pod("eight", gpus=8, tolerations=_min8())) is None


def test_gpu_is_not_scored_by_default_and_is_by_binpack() -> None:
    node = Node("n", allocatable={keys.RES_CPU: 10000, keys.RES_MEMORY: 100, keys.RES_GPU: 8})
    free = {keys.RES_CPU: 10000, keys.RES_MEMORY: 100, keys.RES_GPU: 8}
    pod = _pod("p", gpus=8, cpu=5000, mem=50)
    # LeastAllocated over cpu and memory only: (50 + 50) / 2.
    assert fit_score(pod.requests, node.allocatable, free, DEFAULT) == 50
    # MostAllocated: gpu 100 x 5, cpu 50, memory 50 -> 600 // 7.
    assert fit_score(pod.requests, node.allocatable, free, BINPACK) == 600 // 7
    # An extended resource the pod does not ask for is skipped, not scored as 0.
    cpu_pod = _pod("c", cpu=5000, mem=50)
    assert fit_score(cpu_pod.requests, node.allocatable, free, BINPACK) == 50


def test_balanced_allocation_scores_the_change_in_balance() -> None:
    """kube-scheduler 1.37 (pkg/scheduler/framework/plugins/noderesources/balanced_allocation.go,
    balancedResourceScorer) scores how much the pod improves the node's balance, 50 + (50 + with - without) / 2,
    no longer the balance with the pod alone: found by `make scheduler-diff`, where the scheduler bound pods to
    nodes the old formula scored 1-2 points lower."""
    node = Node("n", allocatable={keys.RES_CPU: 1000, keys.RES_MEMORY: 1000})
    free = dict(node.allocatable)
    # An empty node: balanced before (100); an even pod keeps it so (75), a lopsided one makes it 50 (50).
    assert balanced_score({keys.RES_CPU: 500, keys.RES_MEMORY: 500}, node.allocatable, free, DEFAULT) == 75
    assert balanced_score({keys.RES_CPU: 1000, keys.RES_MEMORY: 0}, node.allocatable, free, DEFAULT) == 50
    # A node already lopsided (cpu 60 %, memory 0 %: 70): a memory-only pod that evens it out scores 90.
    used = {keys.RES_CPU: 400, keys.RES_MEMORY: 1000}
    assert balanced_score({keys.RES_MEMORY: 600}, node.allocatable, used, DEFAULT) == 90
    # A balanced node kept balanced: 75 (the formula before 1.37 gave it 100, as it gave the empty node).
    even = {keys.RES_CPU: 500, keys.RES_MEMORY: 500}
    assert balanced_score({keys.RES_CPU: 100, keys.RES_MEMORY: 100}, node.allocatable, even, DEFAULT) == 75


def test_prefer_no_schedule_and_preferred_affinity_steer_placement() -> None:
    binder = Binder({DEFAULT.scheduler_name: DEFAULT})
    alloc = {keys.RES_CPU: 4000, keys.RES_MEMORY: 8 * 2**30, keys.RES_PODS: 110}
    binder.add_node(Node("a-soft", labels={"disk": "hdd"}, allocatable=dict(alloc),
                         taints=(Taint("maintenance", "soon", "PreferNoSchedule"),)))
    binder.add_node(Node("b-plain", labels={"disk": "hdd"}, allocatable=dict(alloc)))
    binder.add_node(Node("c-ssd", labels={"disk": "ssd"}, allocatable=dict(alloc)))
    assert binder.bind(_pod("p1")).name == "b-plain"  # type: ignore[union-attr]
    pod = _pod("p2")
    pod.preferred_affinity = (PreferredTerm(50, (SelectorRequirement("disk", "In", ("ssd",)),)),)
    assert binder.bind(pod).name == "c-ssd"  # type: ignore[union-attr]


def test_pod_of_unknown_scheduler_stays_pending(small_config: ScalerConfig) -> None:
    binder = _cluster(small_config, "default")
    assert binder.bind(_pod("p", gpus=8, tolerations=_min8(), scheduler="volcano")) is None


def test_shipped_profile_is_a_kube_scheduler_configuration() -> None:
    cfg = kube_scheduler_configuration(BINPACK)
    assert cfg["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    prof = cfg["profiles"][0]
    assert prof["schedulerName"] == "gpuburst-binpack"
    strategy = prof["pluginConfig"][0]["args"]["scoringStrategy"]
    assert strategy["type"] == "MostAllocated"
    assert {"name": "nvidia.com/gpu", "weight": 5} in strategy["resources"]
    assert prof["plugins"]["score"]["disabled"] == [{"name": "NodeResourcesBalancedAllocation"}]


def test_a_cordoned_first_node_does_not_hide_the_pools_taints(small_config: ScalerConfig) -> None:
    binder = Binder({DEFAULT.scheduler_name: DEFAULT})
    binder.add_node(_node(small_config, "gpu1-od", "gpu-0"))
    binder.cordon("gpu-0")
    binder.add_node(_node(small_config, "gpu1-od", "gpu-1"))
    assert binder.bind(_pod("cpu-only")) is None  # the GPU taint still applies on gpu-1
    assert binder.bind(_pod("one", gpus=1)).name == "gpu-1"  # type: ignore[union-attr]


# --- the filters that look at the pods around (scaler.core.scheduling.filters) ------------------------------------
def _zoned(config: ScalerConfig, names_zones: list[tuple[str, str]]) -> Binder:
    from scaler.core.model.objects import PersistentVolume, PersistentVolumeClaim
    from scaler.core.model.storage import Storage

    pv = PersistentVolume("ckpt-pv", {keys.LABEL_ZONE: "us-east-1b"}, driver=keys.CSI_EBS, handle="vol-1")
    claim = PersistentVolumeClaim("ckpt", "default", volume_name="ckpt-pv", storage_class="gp3", phase="Bound")
    binder = Binder({DEFAULT.scheduler_name: DEFAULT}, Storage(claims={claim.key: claim}, volumes={pv.name: pv}))
    for name, zone in names_zones:
        t = config.pool("gpu1-od").template_node(zone)
        binder.add_node(Node(name=name, labels={**t.labels, keys.LABEL_HOSTNAME: name}, taints=t.taints,
                             allocatable=dict(t.allocatable), pool="gpu1-od"))
    return binder


def test_hostname_anti_affinity_binds_one_replica_per_node(small_config: ScalerConfig) -> None:
    from scaler.core.model.objects import LabelSelector, PodAffinityTerm
    from scaler.core.scheduling.filters import reasons

    binder = _zoned(small_config, [("n1", "us-east-1a"), ("n2", "us-east-1a")])
    term = PodAffinityTerm(LabelSelector((SelectorRequirement("app", "In", ("db",)),)), keys.LABEL_HOSTNAME,
                           ("default",))
    placed = []
    for i in range(3):
        replica = _pod(f"db-{i}", cpu=100, tolerations=(GPU_TOL,))
        replica.labels = {"app": "db"}
        replica.pod_anti_affinity = (term,)
        node = binder.bind(replica)
        placed.append(node.name if node else None)
    assert placed == ["n1", "n2", None]
    assert binder.last_reason == reasons.ANTI_AFFINITY


def test_a_pod_with_a_zonal_volume_binds_in_the_volumes_zone(small_config: ScalerConfig) -> None:
    from scaler.core.model.objects import ClaimRef

    binder = _zoned(small_config, [("a1", "us-east-1a"), ("b1", "us-east-1b")])
    p = _pod("train", gpus=1)
    p.claims = (ClaimRef("ckpt"),)
    node = binder.bind(p)
    assert node is not None and node.name == "b1"  # a1 sorts first and is just as empty
    missing = _pod("other", gpus=1)
    missing.claims = (ClaimRef("nope"),)
    assert binder.bind(missing) is None
    assert binder.last_reason == 'persistentvolumeclaim "nope" not found'
