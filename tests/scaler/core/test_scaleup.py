"""Scale-up: in-flight and coming capacity, pool choice, caps, gangs, failures, backoff and fallback."""

from __future__ import annotations

from typing import Any

import pytest
from core_builders import POOLS, config, example_config, node_of, plan, pod, snapshot

from scaler.core.model import keys
from scaler.core.model.objects import Taint
from scaler.core.planning.decisions import Plan
from scaler.core.planning.snapshot import CloudInstance, LaunchFailure
from scaler.core.planning.state import Backoff, State

CFG = example_config()
T0 = 1000.0


def ups(result: Plan) -> dict[str, int]:
    out: dict[str, int] = {}
    for u in result.scale_ups:
        out[u.pool] = out.get(u.pool, 0) + u.count
    return out


def gang(name: str, n: int, *, gpu: int = 8, minimum: int | None = None) -> list[Any]:
    ann = {keys.ANNOTATION_POD_GROUP_MIN: str(minimum)} if minimum is not None else {}
    return [pod(f"{name}-{i}", cpu="8", gpu=gpu, labels={keys.LABEL_POD_GROUP: name}, annotations=ann)
            for i in range(n)]


# --- existing, coming and in-flight capacity ---------------------------------------------------
def test_in_flight_nodes_are_derived_from_desired_so_a_restart_loses_nothing() -> None:
    # A fresh State (the scaler restarted) and a pool already asked for 2 nodes that did not register.
    snap = snapshot(CFG, [pod(f"g{i}", gpu=1) for i in range(3)], desired={"gpu1-spot-a": 2})
    result, state = plan(snap, State(), CFG)
    outcomes = sorted(v.outcome for v in result.verdicts.values())
    assert outcomes == ["fits-in-flight", "fits-in-flight", "scale-up"]
    assert [(u.pool, u.count, u.new_desired) for u in result.scale_ups] == [("gpu1-spot-a", 1, 3)]
    assert sum(r.count for r in state.in_flight["gpu1-spot-a"]) == 3


def test_registered_gpu_node_without_gpus_yet_is_coming_capacity_not_an_empty_node() -> None:
    booting = node_of(CFG, "gpu1-spot-a", "gpu-boot", gpus=0, created_at=T0 - 60)
    result, state = plan(snapshot(CFG, [pod("g", gpu=1)], [booting], now=T0), State(), CFG)
    v = result.verdicts["default/g"]
    assert (v.outcome, v.node) == ("fits-in-flight", "gpu-boot")
    assert result.scale_ups == []
    assert "gpu-boot" not in result.unneeded  # never mistaken for an idle node
    later, _ = plan(snapshot(CFG, [], [booting], now=T0 + 700), state, CFG)
    assert later.scale_downs == []


def test_not_ready_young_node_is_coming_capacity_an_old_one_is_none() -> None:
    node = node_of(CFG, "cpu-spot", "n1", ready=False, created_at=T0 - 30)
    node.taints = (*node.taints, Taint("node.kubernetes.io/not-ready", "", "NoSchedule"))
    result, _ = plan(snapshot(CFG, [pod("c", cpu="2")], [node], now=T0), State(), CFG)
    assert result.verdicts["default/c"].outcome == "fits-in-flight"
    assert result.scale_ups == []
    dead, _ = plan(snapshot(CFG, [pod("c", cpu="2")], [node], now=T0 + 3600), State(), CFG)
    assert dead.verdicts["default/c"].outcome == "scale-up"


def test_new_nodes_are_shared_by_later_pods_first_fit_decreasing() -> None:
    # 6 pods of 3 cpu on 8-vCPU nodes: 2 per node -> 3 nodes, and a 1-cpu pod fills a gap, no 4th node.
    pending = [pod(f"c{i}", cpu="3") for i in range(6)] + [pod("small", cpu="1")]
    result, _ = plan(snapshot(CFG, pending), State(), CFG)
    assert ups(result) == {"cpu-spot": 3}


# --- pool choice ----------------------------------------------------------------------------------
def test_spot_before_on_demand_and_cheapest_per_pod() -> None:
    result, _ = plan(snapshot(CFG, [pod("g", gpu=1)]), State(), CFG)
    assert ups(result) == {"gpu1-spot-a": 1}
    # An 8-GPU pod: the spot 8-GPU pool, never the fallback while spot can launch.
    result, _ = plan(snapshot(CFG, gang("solo", 1)), State(), CFG)
    assert ups(result) == {"gpu8-spot-a": 1}


def test_least_waste_breaks_a_price_tie() -> None:
    pools = [
        {"name": "big", "role": "general", "instance_types": ["m6i.4xlarge"], "zones": ["us-east-1a"], "max": 5,
         "price_per_hour": 1.0},
        {"name": "small", "role": "general", "instance_types": ["m6i.xlarge"], "zones": ["us-east-1a"], "max": 5,
         "price_per_hour": 1.0},
    ]
    cfg = config(pools)
    result, _ = plan(snapshot(cfg, [pod("c", cpu="2")]), State(), cfg)
    assert ups(result) == {"small": 1}


# --- caps -----------------------------------------------------------------------------------------
def test_pool_max_sends_the_rest_to_the_next_pool() -> None:
    pools = [dict(p) for p in POOLS]
    for p in pools:
        if p["name"] == "gpu1-spot-a":
            p["max"] = 2
    cfg = config(pools)
    result, _ = plan(snapshot(cfg, [pod(f"g{i}", gpu=1) for i in range(4)], desired={"gpu1-spot-a": 1}), State(),
                     cfg)
    got = ups(result)
    assert got["gpu1-spot-a"] == 1  # 1 in flight + 1 new = its max of 2
    assert sum(got.values()) == 3
    assert [u.new_desired for u in result.scale_ups if u.pool == "gpu1-spot-a"] == [2]
    moved = [v for v in result.verdicts.values() if v.outcome == "scale-up" and v.pool != "gpu1-spot-a"]
    assert moved and all(v.reasons["gpu1-spot-a"] == "pool at max (2)" for v in moved)
    landed = [v for v in result.verdicts.values() if v.pool == "gpu1-spot-a"]
    assert landed and all("gpu1-spot-a" not in v.reasons for v in landed)


@pytest.mark.parametrize(("limits", "reason"), [
    ({"max_nodes_per_pass": 2}, "max_nodes_per_pass (2) reached"),
    ({"max_gpus": 2}, "cluster limit max_gpus reached (2)"),
    ({"max_nodes": 2}, "cluster limit max_nodes reached (2)"),
    ({"max_cost_per_hour": 1.0}, "cluster limit max_cost_per_hour reached (1)"),  # spot g6.xlarge ~ $0.32/h
])
def test_cluster_limits(limits: dict[str, Any], reason: str) -> None:
    # without the 8-GPU pools: a cap below one of their nodes is refused when the config loads
    cfg = config([p for p in POOLS if not p["name"].startswith("gpu8")], limits=limits)
    pending = [pod(f"g{i}", gpu=1) for i in range(5)]
    result, _ = plan(snapshot(cfg, pending), State(), cfg)
    planned = sum(ups(result).values())
    waiting = [v for v in result.verdicts.values() if v.outcome == "waiting"]
    assert planned + len(waiting) == 5
    assert planned == (3 if "cost" in reason else 2)
    assert all(reason in v.reasons.values() for v in waiting)


def test_a_pod_that_fits_no_template_is_never_a_scale_up() -> None:
    pending = [pod("huge-cpu", cpu="500"), pod("mig", extra={"nvidia.com/mig-1g.10gb": 1}, gpu=0)]
    result, _ = plan(snapshot(CFG, pending), State(), CFG)
    assert result.scale_ups == []
    assert {v.outcome for v in result.verdicts.values()} == {"unschedulable"}
    assert result.verdicts["default/mig"].reasons["cpu-od"] == "Insufficient nvidia.com/mig-1g.10gb"


def test_pending_daemonset_pod_is_no_scale_up() -> None:
    result, _ = plan(snapshot(CFG, [pod("ds", owner="DaemonSet")]), State(), CFG)
    assert result.scale_ups == []
    assert result.verdicts["default/ds"].outcome == "unschedulable"


# --- gangs ----------------------------------------------------------------------------------------
def test_gang_gets_capacity_for_all_members() -> None:
    result, _ = plan(snapshot(CFG, gang("job", 3)), State(), CFG)
    assert sum(ups(result).values()) == 3
    assert {v.outcome for v in result.verdicts.values()} == {"scale-up"}


def test_gang_gets_nothing_when_not_all_members_fit() -> None:
    cfg = example_config(limits=CFG.limits.model_copy(update={"max_gpus": 16}))
    # A free existing 8-GPU node would take one member: all or none means it takes none.
    existing = node_of(cfg, "gpu8-od", "big-1")
    result, _ = plan(snapshot(cfg, [*gang("job", 3), pod("solo", cpu="8", gpu=8)], [existing]), State(), cfg)
    job = [v for k, v in result.verdicts.items() if "job-" in k]
    assert {v.outcome for v in job} == {"waiting"}
    assert all("room for" in v.reasons["*"] for v in job)
    # The capacity the gang did not take stays free for others: the solo pod gets the existing node.
    assert result.verdicts["default/solo"].node == "big-1"
    assert result.scale_ups == []


def test_gang_waits_for_its_minimum_members() -> None:
    result, _ = plan(snapshot(CFG, gang("job", 2, minimum=4)), State(), CFG)
    assert result.scale_ups == []
    assert all(v.outcome == "waiting" and v.reasons["*"] == "gang default/job: 2 of 4 members exist"
               for v in result.verdicts.values())


# --- failures, backoff, fallback -----------------------------------------------------------------
def test_spot_capacity_failure_resets_size_and_sends_pods_to_the_fallback_in_the_same_pass() -> None:
    pending = [pod(f"g{i}", gpu=1) for i in range(2)]
    first, state = plan(snapshot(CFG, pending, now=T0), State(), CFG)
    assert ups(first) == {"gpu1-spot-a": 2}
    fail = LaunchFailure("us-east-1a", "capacity", "InsufficientInstanceCapacity", "no g6.xlarge", T0 + 5)
    snap = snapshot(CFG, pending, now=T0 + 10, desired={"gpu1-spot-a": 2}, instances={"gpu1-spot-a": 0},
                    failures={"gpu1-spot-a": [fail]})
    second, state = plan(snap, state, CFG)
    assert [(r.pool, r.desired) for r in second.resets] == [("gpu1-spot-a", 0)]
    assert ups(second) == {"gpu1-od": 2}  # the declared fallback, not another spot zone
    why = second.verdicts["default/g0"].reasons["gpu1-spot-a"]
    assert why == f"spot unavailable in us-east-1a until {T0 + 10 + CFG.timings.unavailable_ttl:.0f}s"
    assert state.unavailable[("gpu1-spot-a", "us-east-1a")] == T0 + 10 + CFG.timings.unavailable_ttl
    assert "gpu1-spot-a" not in state.in_flight
    # After the TTL the spot pool is tried again.
    later, _ = plan(snapshot(CFG, [pod("g9", gpu=1)], now=T0 + 10 + CFG.timings.unavailable_ttl + 1), state, CFG)
    assert ups(later) == {"gpu1-spot-a": 1}


def test_backoff_doubles_up_to_the_maximum() -> None:
    state = State()
    untils = []
    now = T0
    for _ in range(5):
        fail = LaunchFailure(None, "other", "InternalError", "boom", now)
        _, state = plan(snapshot(CFG, [], now=now, failures={"gpu1-spot-a": [fail]}), state, CFG)
        b = state.backoff["gpu1-spot-a"]
        untils.append(b.until - now)
        now += 10
    assert untils == [300, 600, 1200, 1800, 1800]
    result, _ = plan(snapshot(CFG, [pod("g", gpu=1)], now=now), state, CFG)
    assert result.verdicts["default/g"].reasons["gpu1-spot-a"].startswith("backoff until ")
    assert result.verdicts["default/g"].pool == "gpu1-od"


def test_nodes_that_never_register_are_given_back_and_the_pool_backs_off() -> None:
    first, state = plan(snapshot(CFG, [pod("g", gpu=1)], now=T0), State(), CFG)
    assert ups(first) == {"gpu1-spot-a": 1}
    late = T0 + CFG.timings.provision_timeout + 1
    second, state = plan(snapshot(CFG, [pod("g", gpu=1)], now=late, desired={"gpu1-spot-a": 1}), state, CFG)
    assert [(r.pool, r.desired) for r in second.resets] == [("gpu1-spot-a", 0)]
    assert state.backoff["gpu1-spot-a"] == Backoff(until=late + 300, failures=1)
    assert ups(second) == {"gpu1-od": 1}


def test_registration_clears_in_flight() -> None:
    _, state = plan(snapshot(CFG, [pod("g", gpu=1)], now=T0), State(), CFG)
    node = node_of(CFG, "gpu1-spot-a", "n1", [pod("g", gpu=1)])
    _, state = plan(snapshot(CFG, [], [node], now=T0 + 300, desired={"gpu1-spot-a": 1}), state, CFG)
    assert "gpu1-spot-a" not in state.in_flight


def test_backoff_is_forgotten_once_a_node_registers_after_it() -> None:
    fail = LaunchFailure(None, "other", "InternalError", "boom", T0)
    _, state = plan(snapshot(CFG, [pod("g", gpu=1)], now=T0, failures={"gpu1-spot-a": [fail]}), State(), CFG)
    assert state.backoff["gpu1-spot-a"].failures == 1
    after = T0 + 301
    _, state = plan(snapshot(CFG, [pod("g", gpu=1)], now=after), state, CFG)  # asks gpu1-spot-a again
    assert sum(r.count for r in state.in_flight["gpu1-spot-a"]) == 1
    node = node_of(CFG, "gpu1-spot-a", "n1", [pod("g", gpu=1)])
    _, state = plan(snapshot(CFG, [], [node], now=after + 240, desired={"gpu1-spot-a": 1}), state, CFG)
    assert "gpu1-spot-a" not in state.backoff


def test_a_gang_larger_than_the_per_pass_cap_is_not_starved() -> None:
    cfg = example_config(limits=CFG.limits.model_copy(update={"max_nodes_per_pass": 2}))
    result, _ = plan(snapshot(cfg, [*gang("big", 4), pod("later", gpu=1)]), State(), cfg)
    assert sum(u.count for u in result.scale_ups) == 4  # the whole gang; the cap then holds the rest
    assert result.verdicts["default/later"].outcome == "waiting"


def test_a_zone_bound_pod_counts_on_a_booting_instance_in_its_zone_also_after_a_restart() -> None:
    # gpu1-od spans two zones: the Auto Scaling group picks the zone, so a pod that needs us-east-1b
    # never makes it grow (it would get nodes in us-east-1a, again and again).
    only_b = pod("g", gpu=1, selector={keys.LABEL_POOL: "gpu1-od", keys.LABEL_ZONE: "us-east-1b"})
    first, _ = plan(snapshot(CFG, [only_b], now=T0), State(), CFG)
    assert first.scale_ups == [] and first.verdicts["default/g"].outcome == "unschedulable"
    # An instance the group launched in us-east-1b (the cloud says where) counts for it, in a fresh
    # process too: its zone is read from the cloud, not remembered.
    snap = snapshot(CFG, [only_b], now=T0 + 10, desired={"gpu1-od": 1})
    snap.pools["gpu1-od"].members = [CloudInstance("aws:///us-east-1b/i-0b", "us-east-1b", T0)]
    restarted, _ = plan(snap, State(), CFG)
    assert restarted.scale_ups == [] and restarted.verdicts["default/g"].outcome == "fits-in-flight"
    snap.pools["gpu1-od"].members = [CloudInstance("aws:///us-east-1a/i-0a", "us-east-1a", T0)]
    elsewhere, _ = plan(snap, State(), CFG)
    assert elsewhere.verdicts["default/g"].outcome == "unschedulable"  # in the other zone: no use to it
    free_pod = pod("h", gpu=1, selector={keys.LABEL_POOL: "gpu1-od"})
    restarted, _ = plan(snapshot(CFG, [free_pod], now=T0 + 10, desired={"gpu1-od": 1}), State(), CFG)
    assert restarted.verdicts["default/h"].outcome == "fits-in-flight"


def test_several_failures_in_one_pass_are_one_backoff_step() -> None:
    fails = [LaunchFailure(None, "other", "InternalError", "boom", T0 + i) for i in range(3)]
    result, state = plan(snapshot(CFG, [], now=T0, failures={"gpu1-spot-a": fails}), State(), CFG)
    assert state.backoff["gpu1-spot-a"] == Backoff(until=T0 + 300, failures=1)
    assert any("backoff until" in n for n in result.notes)


def test_new_capacity_for_small_pods_is_small_nodes_even_without_the_min_gpus_taint() -> None:
    # Eight 1-GPU pods and pools that would all take them (no min-gpus taint): the price per placed
    # pod picks eight 1-GPU nodes, not one 8-GPU node that the longest of them would keep alive
    # after the others finish (the hole the taint exists to prevent).
    pools = [{"name": "gpu1", "instance_types": ["g6.xlarge"], "zones": ["us-east-1a"], "max": 20},
             {"name": "gpu8", "instance_types": ["g6.48xlarge"], "zones": ["us-east-1a"], "max": 20}]
    cfg = config(pools)
    result, _ = plan(snapshot(cfg, [pod(f"g{i}", gpu=1) for i in range(8)]), State(), cfg)
    assert ups(result) == {"gpu1": 8}
    # An 8-GPU pod still gets its 8-GPU node.
    result, _ = plan(snapshot(cfg, [pod("big", cpu="8", gpu=8)]), State(), cfg)
    assert ups(result) == {"gpu8": 1}


def test_a_gang_does_not_take_the_node_coming_for_a_pod_queued_before_it() -> None:
    """kube-scheduler's queue takes the older single pod first: it keeps the node already asked for it,
    the gang gets nodes of its own."""
    single = pod("single", gpu=1)
    single.created_at = T0
    members = [pod(f"late-{i}", gpu=1, labels={keys.LABEL_POD_GROUP: "late"}) for i in range(2)]
    for m in members:
        m.created_at = T0 + 60
    snap = snapshot(CFG, [single, *members], now=T0 + 60, desired={"gpu1-spot-a": 1})  # one node booting
    result, _ = plan(snap, State(), CFG)
    assert result.verdicts["default/single"].outcome == "fits-in-flight"
    assert {result.verdicts[m.key].outcome for m in members} == {"scale-up"}
