"""The planner end to end on the example AWS pools: what a user reads in `scaler plan`."""

from __future__ import annotations

from core_builders import example_config, node_of, plan, pod, snapshot

from scaler.core.model import keys
from scaler.core.planning.state import State

CFG = example_config()


def test_pending_gpu_pods_scale_up_the_spot_pool_and_every_pod_gets_a_verdict() -> None:
    pending = [pod(f"g{i}", gpu=1) for i in range(3)] + [pod("c0", cpu="2")]
    result, state = plan(snapshot(CFG, pending), State(), CFG)
    ups = {u.pool: u for u in result.scale_ups}
    assert ups["gpu1-spot-a"].count == 3  # g6.xlarge has one GPU: one node per pod
    assert ups["gpu1-spot-a"].new_desired == 3
    assert ups["cpu-spot"].count == 1
    assert set(result.verdicts) == {p.key for p in pending}
    assert all(v.outcome == "scale-up" for v in result.verdicts.values())
    assert result.verdicts["default/g0"].pool == "gpu1-spot-a"
    # The new requests are remembered with their deadline.
    assert sum(r.count for r in state.in_flight["gpu1-spot-a"]) == 3


def test_pod_that_fits_a_free_node_is_no_scale_up() -> None:
    cfg = CFG
    node = node_of(cfg, "cpu-spot", "n1", [pod("busy", cpu="2")])
    result, _ = plan(snapshot(cfg, [pod("p", cpu="2")], [node]), State(), cfg)
    assert result.scale_ups == []
    v = result.verdicts["default/p"]
    assert (v.outcome, v.node) == ("fits-existing", "n1")


def test_pod_bigger_than_every_pool_is_unschedulable_with_reasons() -> None:
    result, _ = plan(snapshot(CFG, [pod("huge", gpu=16)]), State(), CFG)
    assert result.scale_ups == []
    v = result.verdicts["default/huge"]
    assert v.outcome == "unschedulable"
    assert v.reasons["gpu8-od"] == "Insufficient nvidia.com/gpu"
    assert v.reasons["cpu-od"] == "Insufficient nvidia.com/gpu"


def test_reasons_name_untolerated_taints_and_selector_mismatch() -> None:
    cpu_pod = pod("c", cpu="1", selector={keys.LABEL_ZONE: "us-east-1b"})
    result, _ = plan(snapshot(CFG, [cpu_pod]), State(), CFG)
    v = result.verdicts["default/c"]
    assert v.reasons["gpu1-od"] == "node(s) had untolerated taint {nvidia.com/gpu: present}"
    assert v.reasons["gpu1-spot-a"] == "node(s) didn't match Pod's node affinity/selector"
    # The CPU pools span both zones: the Auto Scaling group picks the zone of a new node, so they
    # cannot promise us-east-1b, and asking them would buy nodes the pod cannot use.
    assert v.outcome == "unschedulable" and result.scale_ups == []
    assert "cannot promise" in v.reasons["cpu-spot"] and "us-east-1a, us-east-1b" in v.reasons["cpu-spot"]


def test_a_zone_pinned_pod_scales_the_pool_of_its_zone() -> None:
    cpu_pod = pod("g", gpu=1, selector={keys.LABEL_ZONE: "us-east-1b"})
    result, _ = plan(snapshot(CFG, [cpu_pod]), State(), CFG)
    [up] = result.scale_ups
    assert (up.pool, up.zone) == ("gpu1-spot-b", "us-east-1b")


def test_one_gpu_pod_never_goes_to_an_eight_gpu_pool() -> None:
    # gpu8 pools carry the min-gpus taint; a 1-GPU pod tolerating only nvidia.com/gpu cannot land.
    from core_builders import GPU_TOL
    p = pod("g", gpu=1, tolerations=(GPU_TOL,))
    result, _ = plan(snapshot(CFG, [p]), State(), CFG)
    assert result.verdicts["default/g"].pool == "gpu1-spot-a"
    why = result.verdicts["default/g"].reasons["gpu8-od"]
    assert why.startswith("node(s) had untolerated taint {gpuburst.io/min-gpus")


def test_idle_node_is_removed_after_unneeded_time() -> None:
    node = node_of(CFG, "cpu-spot", "idle")
    busy = node_of(CFG, "cpu-spot", "busy", [pod("w", cpu="6")])
    first, state = plan(snapshot(CFG, [], [node, busy], now=1000), State(), CFG)
    assert first.scale_downs == []
    assert first.unneeded == {"idle": 1000}
    later, state = plan(snapshot(CFG, [], [node, busy], now=1000 + 601), state, CFG)
    assert [(d.node, d.provider_id, d.evict) for d in later.scale_downs] == [("idle", "aws:///idle", ())]
