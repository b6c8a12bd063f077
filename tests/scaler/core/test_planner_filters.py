"""The planner with kube-scheduler's pod-to-pod and volume filters: the phantom and missed scale-ups of
issue 14, each planned as the scheduler needs, with the scheduler's reason for pods that fit no pool;
the drain check keeps nodes whose pods could not move. A hypothesis property: whatever the planner
says fits an existing node passes every filter on that node."""

from __future__ import annotations

from core_builders import config, example_config, node_of, plan, pod, snapshot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scaler.core.model import keys
from scaler.core.model.objects import (
    ClaimRef,
    HostPort,
    LabelSelector,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodAffinityTerm,
    SelectorRequirement,
    SpreadConstraint,
    StorageClass,
)
from scaler.core.model.storage import Storage
from scaler.core.planning.decisions import Plan
from scaler.core.planning.state import State
from scaler.core.scheduling.filters import Cluster, reasons
from scaler.core.scheduling.predicates import REASON_SELECTOR

CFG = example_config()
DRAIN = example_config(scale_down=CFG.scale_down.model_copy(update={"budget_fraction": 1.0, "consolidate": False}))
ZONES3 = ["us-east-1a", "us-east-1b", "us-east-1c"]
# One pool per zone: a pool across zones cannot promise the zone a spread or an affinity needs (its
# cloud picks the zone), so the planner uses only single-zone pools for such pods (issue 13).
CFG3 = config([{"name": f"cpu-{z[-1]}", "role": "general", "instance_types": ["m6i.2xlarge"], "zones": [z],
                "max": 50} for z in ZONES3])
CFG2 = config([{"name": f"cpu-{z[-1]}", "role": "general", "instance_types": ["m6i.2xlarge"], "zones": [z],
                "max": 50} for z in ZONES3[:2]])


def app(name: str) -> LabelSelector:
    return LabelSelector((SelectorRequirement("app", "In", (name,)),))


def zone_spread(name: str) -> tuple[SpreadConstraint, ...]:
    return (SpreadConstraint(1, keys.LABEL_ZONE, app(name)),)


def anti_host(name: str, ns: str = "default") -> tuple[PodAffinityTerm, ...]:
    return (PodAffinityTerm(app(name), keys.LABEL_HOSTNAME, (ns,)),)


def with_(p: Pod, **fields: object) -> Pod:
    for k, v in fields.items():
        setattr(p, k, v)
    return p


def nodes_by_zone(result: Plan) -> dict[str, int]:
    out: dict[str, int] = {}
    for u in result.scale_ups:
        out[u.zone] = out.get(u.zone, 0) + u.count
    return out


def full_cpu_node(cfg, pool: str, name: str, zone: str, pods: list[Pod] = ()):  # type: ignore[no-untyped-def]
    """A node of the pool with no room left for the test's pods (a big filler pod)."""
    return node_of(cfg, pool, name, [pod(f"filler-{name}", cpu="7", memory="28Gi"), *pods], zone=zone)


# --- phantom scale-ups -----------------------------------------------------------------------------
def test_zone_spread_buys_the_node_in_the_zone_that_fixes_the_skew() -> None:
    """Two web replicas run in us-east-1a, none in 1b: a third one may only go to 1b (skew), so the
    new node is bought there, not in 1a (which ranks first on a tie)."""
    running = [with_(pod(f"web-{i}", cpu="3", labels={"app": "web"}), spread=zone_spread("web")) for i in range(2)]
    nodes = [full_cpu_node(CFG2, "cpu-a", "a1", "us-east-1a", running),
             full_cpu_node(CFG2, "cpu-b", "b1", "us-east-1b")]
    pending = [with_(pod("web-2", cpu="3", labels={"app": "web"}), spread=zone_spread("web"))]
    result, _ = plan(snapshot(CFG2, pending, nodes), State(), CFG2)
    assert [(u.pool, u.zone, u.count) for u in result.scale_ups] == [("cpu-b", "us-east-1b", 1)]


def test_a_pod_with_a_zonal_volume_gets_a_node_in_the_volumes_zone() -> None:
    """The checkpoint PV is bound in us-east-1b: the 1a spot pool (first on a tie) would be a phantom."""
    pv = PersistentVolume("ckpt-pv", {keys.LABEL_ZONE: "us-east-1b"}, driver=keys.CSI_EBS, handle="vol-1")
    claim = PersistentVolumeClaim("ckpt", "default", volume_name="ckpt-pv", storage_class="gp3", phase="Bound")
    train = with_(pod("train-0", gpu=1), claims=(ClaimRef("ckpt"),))
    snap = snapshot(CFG, [train])
    snap.storage = Storage(claims={claim.key: claim}, volumes={pv.name: pv})
    result, _ = plan(snap, State(), CFG)
    assert [(u.pool, u.zone) for u in result.scale_ups] == [("gpu1-spot-b", "us-east-1b")]
    assert result.verdicts["default/train-0"].reasons["gpu1-spot-a"] == reasons.VOLUME_ZONE


def test_statefulset_with_hostname_anti_affinity_gets_a_node_per_replica() -> None:
    replicas = [with_(pod(f"db-{i}", cpu="3", labels={"app": "db"}), pod_anti_affinity=anti_host("db"))
                for i in range(4)]
    result, _ = plan(snapshot(CFG, replicas), State(), CFG)
    assert sum(u.count for u in result.scale_ups) == 4
    assert {v.outcome for v in result.verdicts.values()} == {"scale-up"}


def test_spread_of_six_over_three_zones_needs_a_node_in_each() -> None:
    nodes = [full_cpu_node(CFG3, f"cpu-{z[-1]}", f"n-{z[-1]}", z) for z in ZONES3]
    pending = [with_(pod(f"web-{i}", cpu="500m", labels={"app": "web"}), spread=zone_spread("web"))
               for i in range(6)]
    result, _ = plan(snapshot(CFG3, pending, nodes), State(), CFG3)
    assert nodes_by_zone(result) == {z: 1 for z in ZONES3}


# --- missed or wrong scale-ups ---------------------------------------------------------------------
def test_pod_affinity_to_its_jobs_workers_is_planned_in_their_zone() -> None:
    worker = pod("job-w0", cpu="7", memory="28Gi", labels={"job": "j1"})
    nodes = [node_of(CFG2, "cpu-b", "b1", [worker], zone="us-east-1b")]
    term = PodAffinityTerm(LabelSelector((SelectorRequirement("job", "In", ("j1",)),)), keys.LABEL_ZONE,
                           ("default",))
    pending = [with_(pod("job-w1", cpu="3", labels={"job": "j1"}), pod_affinity=(term,))]
    result, _ = plan(snapshot(CFG2, pending, nodes), State(), CFG2)
    assert [(u.pool, u.zone) for u in result.scale_ups] == [("cpu-b", "us-east-1b")]


def test_a_host_port_taken_on_an_existing_node_is_not_counted_as_fitting() -> None:
    exporter = with_(pod("exporter", cpu="100m"), host_ports=(HostPort(9400),))
    nodes = [node_of(CFG, "cpu-spot", "a1", [exporter], zone="us-east-1a")]  # plenty of room left
    pending = [with_(pod("agent", cpu="100m"), host_ports=(HostPort(9400),)),
               pod("plain", cpu="100m")]
    result, _ = plan(snapshot(CFG, pending, nodes), State(), CFG)
    assert result.verdicts["default/agent"].outcome == "scale-up"
    assert result.verdicts["default/plain"].outcome == "fits-existing"
    assert sum(u.count for u in result.scale_ups) == 1


def test_match_fields_pod_fits_the_named_node_and_no_new_one() -> None:
    pinned = pod("pinned", cpu="1", affinity=((SelectorRequirement("metadata.name", "In", ("a1",), field=True),),))
    nodes = [node_of(CFG, "cpu-spot", "a1", zone="us-east-1a"), node_of(CFG, "cpu-spot", "a2", zone="us-east-1a")]
    result, _ = plan(snapshot(CFG, [pinned], nodes), State(), CFG)
    v = result.verdicts["default/pinned"]
    assert (v.outcome, v.node) == ("fits-existing", "a1")
    full = [full_cpu_node(CFG, "cpu-spot", "a1", "us-east-1a")]
    result, _ = plan(snapshot(CFG, [pinned], full), State(), CFG)
    v = result.verdicts["default/pinned"]
    assert v.outcome != "scale-up" and not result.scale_ups
    assert v.reasons["cpu-spot"] == REASON_SELECTOR


# --- explain: the scheduler's reason per pool ----------------------------------------------------------
def test_a_pod_that_fits_no_pool_gets_the_schedulers_reason() -> None:
    pv = PersistentVolume("pv-c", {keys.LABEL_ZONE: "us-east-1c"}, driver=keys.CSI_EBS, handle="vol-c")
    claims = {"default/data-c": PersistentVolumeClaim("data-c", "default", volume_name="pv-c", phase="Bound"),
              "default/slow": PersistentVolumeClaim("slow", "default", storage_class="immediate")}
    snap = snapshot(CFG, [with_(pod("in-c", gpu=1), claims=(ClaimRef("data-c"),)),
                          with_(pod("waits", gpu=1), claims=(ClaimRef("slow"),))])
    snap.storage = Storage(claims=claims, volumes={pv.name: pv},
                           classes={"immediate": StorageClass("immediate", keys.CSI_EBS)})
    result, _ = plan(snap, State(), CFG)
    assert not result.scale_ups
    in_c = result.verdicts["default/in-c"]
    assert in_c.outcome in ("unschedulable", "waiting")
    assert in_c.reasons["gpu1-spot-a"] == reasons.VOLUME_ZONE and in_c.reasons["gpu1-od"] == reasons.VOLUME_ZONE
    assert result.verdicts["default/waits"].reasons["*"] == reasons.UNBOUND_IMMEDIATE


# --- scale-down: the drain check runs the same filters ---------------------------------------------
def test_a_node_whose_replica_cannot_move_for_anti_affinity_is_kept() -> None:
    cfg = DRAIN
    db = [with_(pod(f"db-{i}", cpu="100m", labels={"app": "db"}), pod_anti_affinity=anti_host("db"))
          for i in range(2)]
    nodes = [node_of(cfg, "cpu-spot", "a1", [db[0]], zone="us-east-1a"),
             node_of(cfg, "cpu-spot", "a2", [db[1]], zone="us-east-1a"),
             node_of(cfg, "cpu-spot", "a3", zone="us-east-1a")]
    state = State(unneeded_since={n.name: 0.0 for n in nodes})
    result, _ = plan(snapshot(cfg, [], nodes, now=cfg.timings.unneeded_time + 1), state, cfg)
    # a3 is empty and goes first; then a1's replica could only move to a2, which holds the other one.
    assert {d.node for d in result.scale_downs} == {"a3"}


def test_a_node_whose_pod_has_a_zonal_volume_is_kept_when_only_other_zones_have_room() -> None:
    cfg = DRAIN
    pv = PersistentVolume("pv-a", {keys.LABEL_ZONE: "us-east-1a"}, driver=keys.CSI_EBS, handle="vol-a")
    claim = PersistentVolumeClaim("data", "default", volume_name="pv-a", phase="Bound")
    user = with_(pod("user", cpu="100m"), claims=(ClaimRef("data"),))
    nodes = [node_of(cfg, "cpu-spot", "a1", [user], zone="us-east-1a"),
             node_of(cfg, "cpu-spot", "b1", [pod("keep-b", cpu="7", memory="16Gi")], zone="us-east-1b"),
             node_of(cfg, "cpu-spot", "b2", [pod("keep-b2", cpu="7", memory="16Gi")], zone="us-east-1b")]
    nodes[1].pods[-1].annotations = {keys.ANNOTATION_SAFE_TO_EVICT: "false"}
    nodes[2].pods[-1].annotations = {keys.ANNOTATION_SAFE_TO_EVICT: "false"}
    # b1 / b2 are busy (and not evictable); a1 is nearly idle, but its pod may only run in 1a.
    snap = snapshot(cfg, [], nodes, now=cfg.timings.unneeded_time + 1)
    snap.storage = Storage(claims={claim.key: claim}, volumes={pv.name: pv})
    state = State(unneeded_since={n.name: 0.0 for n in nodes})
    result, _ = plan(snap, state, cfg)
    assert "a1" not in {d.node for d in result.scale_downs}


# --- property: what fits an existing node passes every filter there --------------------------------
@st.composite
def clusters(draw: st.DrawFn) -> tuple[list, list[Pod]]:  # type: ignore[type-arg]
    apps = ["a", "b", "c"]
    nodes = []
    for i in range(draw(st.integers(1, 5))):
        zone = draw(st.sampled_from(ZONES3[:2]))
        running = []
        for j in range(draw(st.integers(0, 3))):
            name = draw(st.sampled_from(apps))
            p = pod(f"r{i}-{j}", cpu="250m", labels={"app": name})
            if draw(st.booleans()):
                p.pod_anti_affinity = anti_host(name)
            if draw(st.integers(0, 3)) == 0:
                p.host_ports = (HostPort(9000 + draw(st.integers(0, 1))),)
            running.append(p)
        nodes.append(node_of(CFG, "cpu-spot", f"n{i}", running, zone=zone))
    pending = []
    for k in range(draw(st.integers(1, 8))):
        name = draw(st.sampled_from(apps))
        p = pod(f"p{k}", cpu=draw(st.sampled_from(["250m", "1", "3"])), labels={"app": name})
        p.created_at = float(k)
        kind = draw(st.integers(0, 3))
        if kind == 0:
            p.spread = zone_spread(name)
        elif kind == 1:
            p.pod_anti_affinity = anti_host(name)
        elif kind == 2:
            p.host_ports = (HostPort(9000 + draw(st.integers(0, 1))),)
        pending.append(p)
    return nodes, pending


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_what_fits_an_existing_node_passes_every_filter_there(drawn: tuple[list, list[Pod]]) -> None:
    nodes, pending = drawn
    result, _ = plan(snapshot(CFG, pending, nodes), State(), CFG)
    # Replay the scheduler's queue: each pod said to fit an existing node must pass there, with the
    # pods before it in the queue bound as planned.
    cluster = Cluster(nodes)
    by_key = {p.key: p for p in pending}
    for key in sorted(by_key, key=lambda k: (-by_key[k].priority, by_key[k].created_at)):
        v = result.verdicts[key]
        if v.outcome != "fits-existing":
            continue
        assert v.node is not None
        target = cluster.nodes[v.node]
        assert cluster.reason(by_key[key], target) is None, (key, v.node)
        cluster.place(by_key[key], v.node)


def test_pods_of_one_class_keep_their_own_filter_reasons() -> None:
    """Two pods alike in requests and statics, so one class: one's ReadWriteOncePod claim is in use
    (a PreFilter failure, under "*"), the other's volume is in 1b. Neither shows the other's reason."""
    rwop = PersistentVolumeClaim("solo", "default", volume_name="pv-solo", phase="Bound",
                                 access_modes=("ReadWriteOncePod",))
    ckpt = PersistentVolumeClaim("ckpt", "default", volume_name="pv-b", phase="Bound")
    pvs = {"pv-solo": PersistentVolume("pv-solo"), "pv-b": PersistentVolume("pv-b", {keys.LABEL_ZONE: "us-east-1b"})}
    user = with_(pod("user", cpu="100m"), claims=(ClaimRef("solo"),))
    nodes = [full_cpu_node(CFG, "cpu-spot", "a1", "us-east-1a", [user])]
    blocked = with_(pod("blocked", gpu=1), claims=(ClaimRef("solo"),))
    zonal = with_(pod("zonal", gpu=1), claims=(ClaimRef("ckpt"),))
    snap = snapshot(CFG, [blocked, zonal], nodes)
    snap.storage = Storage(claims={rwop.key: rwop, ckpt.key: ckpt}, volumes=pvs)
    result, _ = plan(snap, State(), CFG)
    b, z = result.verdicts["default/blocked"], result.verdicts["default/zonal"]
    assert (b.outcome, b.reasons["*"]) == ("unschedulable", reasons.RWOP_CONFLICT)
    assert (z.outcome, z.pool) == ("scale-up", "gpu1-spot-b")
    assert "*" not in z.reasons and z.reasons["gpu1-spot-a"] == reasons.VOLUME_ZONE


def test_a_pod_on_a_local_volume_keeps_its_node_even_for_consolidation() -> None:
    """A 1-GPU pod idles an 8-GPU node, but its PV is local to that node: neither another node nor a
    cheaper pool's new node can take it, so the node stays (consolidation runs the filters too)."""
    cfg = example_config(scale_down=CFG.scale_down.model_copy(update={"budget_fraction": 1.0}))
    local = PersistentVolume("local-pv", node_affinity=((SelectorRequirement(keys.LABEL_HOSTNAME, "In", ("big",)),),))
    claim = PersistentVolumeClaim("scratch", "default", volume_name="local-pv", phase="Bound")
    user = with_(pod("user", gpu=1), claims=(ClaimRef("scratch"),))
    state = State(unneeded_since={"big": 0.0})
    plain = [node_of(cfg, "gpu8-spot-a", "big", [pod("user", gpu=1)], zone="us-east-1a")]
    result, _ = plan(snapshot(cfg, [], plain, now=cfg.timings.unneeded_time + 1), state, cfg)
    assert [d.node for d in result.scale_downs] == ["big"]  # without the volume: consolidated away
    nodes = [node_of(cfg, "gpu8-spot-a", "big", [user], zone="us-east-1a")]
    snap = snapshot(cfg, [], nodes, now=cfg.timings.unneeded_time + 1)
    snap.storage = Storage(claims={claim.key: claim}, volumes={local.name: local})
    result, _ = plan(snap, state, cfg)
    assert result.scale_downs == []


def test_a_gang_that_does_not_fit_leaves_no_placements_behind() -> None:
    """Two gang members with zone anti-affinity need 8-GPU nodes in two zones; the cluster may hold one
    (max_gpus 8): the gang is rolled back, placements included, so the single pod that follows gets
    the first-ranked zone (1a), which a leftover member there would refuse it."""
    cfg = example_config(limits=CFG.limits.model_copy(update={"max_gpus": 8}))
    anti = (PodAffinityTerm(app("g"), keys.LABEL_ZONE, ("default",)),)
    gang = [with_(pod(f"g-{i}", cpu="8", gpu=8, labels={"app": "g", keys.LABEL_POD_GROUP: "g"}),
                  pod_anti_affinity=anti) for i in range(2)]
    single = with_(pod("solo", cpu="8", gpu=8, labels={"app": "g"}), pod_anti_affinity=anti)
    single.created_at = 1.0
    result, _ = plan(snapshot(cfg, [*gang, single]), State(), cfg)
    assert {result.verdicts[f"default/g-{i}"].outcome for i in range(2)} == {"waiting"}
    assert [(u.pool, u.zone, u.count) for u in result.scale_ups] == [("gpu8-spot-a", "us-east-1a", 1)]
    assert result.verdicts["default/solo"].outcome == "scale-up"
