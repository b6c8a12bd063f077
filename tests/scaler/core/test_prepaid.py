"""Prepaid capacity: reserved pools and Capacity Blocks in the pool model (tags, the ladder) and the
scale-up planner (filled first, a block only while it lasts)."""

from __future__ import annotations

from typing import Any

from core_builders import POOLS, config, node_of, plan, pod, snapshot

from scaler.core.config.pool import Pool
from scaler.core.config.settings import parse_config
from scaler.core.model import keys
from scaler.core.planning.decisions import Plan
from scaler.core.planning.state import State

HOUR = 3600.0
START = 1_751_362_200.0  # 2025-07-01T09:30:00Z
END = START + 5 * 24 * HOUR
RESERVED = {"name": "gpu1-reserved", "capacity_type": "reserved", "instance_types": ["g6.xlarge"],
            "zones": ["us-east-1a"], "max": 2, "fallback": "gpu1-spot-a",
            "reservation": {"id": "cr-0123456789abcdef0"}}
BLOCK = {"name": "gpu8-block", "capacity_type": "capacity-block", "instance_types": ["p5.48xlarge"],
         "zones": ["us-east-1a"], "max": 4, "min_pod_gpus": 2, "fallback": "gpu8-od",
         "reservation": {"id": "cr-0fedcba9876543210", "start": "2025-07-01T09:30:00Z", "end": END}}


def cfg(*extra: dict[str, Any]) -> Any:
    return config([*POOLS, *extra])


def ups(result: Plan) -> dict[str, int]:
    out: dict[str, int] = {}
    for u in result.scale_ups:
        out[u.pool] = out.get(u.pool, 0) + u.count
    return out


# --- the pool model ---------------------------------------------------------------------------------
def test_a_block_reads_iso_and_epoch_times_and_round_trips_through_its_tags() -> None:
    c = cfg(RESERVED, BLOCK)
    block = c.pool("gpu8-block")
    assert block.reservation is not None and (block.reservation.start, block.reservation.end) == (START, END)
    for p in (block, c.pool("gpu1-reserved")):
        tags = p.to_tags("c1")
        assert tags[keys.TAG_CA_TEMPLATE_LABEL + keys.LABEL_CAPACITY_TYPE] == p.capacity_type
        back = Pool.from_tags(tags, cloud="aws", cluster="c1", provider_ref=p.name, instance_types=p.instance_types,
                              zones=p.zones, min_size=p.min_size, max_size=p.max_size)
        assert (back.capacity_type, back.reservation, back.fallback) == (p.capacity_type, p.reservation, p.fallback)


def test_an_azure_reservation_group_round_trips_through_the_azure_tag_form() -> None:
    group = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/capacityReservationGroups/a100"
    c = parse_config({"cluster": "c1", "cloud": "azure", "region": "eastus", "pools": [
        {"name": "gpu-res", "capacity_type": "reserved", "instance_types": ["Standard_NC24ads_A100_v4"],
         "zones": ["1"], "max": 2, "reservation": {"id": group}}]}, "test")
    p = c.pool("gpu-res")
    back = Pool.from_tags(p.to_tags("c1"), cloud="azure", cluster="c1", provider_ref="gpures",
                          instance_types=p.instance_types, zones=p.zones, min_size=0, max_size=2)
    assert back.reservation is not None and back.reservation.id == group


def test_prepaid_capacity_costs_nothing_more_per_node() -> None:
    c = cfg(RESERVED, BLOCK)
    assert c.price(c.pool("gpu1-reserved")) == 0.0 == c.price(c.pool("gpu8-block"))
    assert c.pool("gpu8-block").list_price(c.spot_price_factor) == 55.04


# --- the expander: prepaid first, then spot, then on-demand -----------------------------------------
def test_a_reservation_is_filled_before_cheaper_spot_then_the_ladder_goes_on() -> None:
    c = cfg(RESERVED)
    result, _ = plan(snapshot(c, [pod(f"g{i}", gpu=1) for i in range(5)]), State(), c)
    assert ups(result) == {"gpu1-reserved": 2, "gpu1-spot-a": 3}


def test_nothing_is_placed_on_a_block_before_it_starts_or_within_min_remaining_of_its_end() -> None:
    c = cfg(BLOCK)
    job = [pod(f"j{i}", cpu="8", gpu=8) for i in range(2)]
    before, _ = plan(snapshot(c, job, now=START - 60), State(), c)
    assert "gpu8-block" not in ups(before)
    assert "starts at 2025-07-01T09:30:00Z" in before.verdicts["default/j0"].reasons["gpu8-block"]
    during, _ = plan(snapshot(c, job, now=START + HOUR), State(), c)
    assert ups(during) == {"gpu8-block": 2}
    late, _ = plan(snapshot(c, job, now=END - 50 * 60), State(), c)
    assert "gpu8-block" not in ups(late)
    assert "ends at" in late.verdicts["default/j0"].reasons["gpu8-block"]


def test_a_blocks_nodes_are_drained_at_the_lead_with_replacements_bought_ahead_on_the_next_rung() -> None:
    c = cfg(BLOCK)
    nodes = [node_of(c, "gpu8-block", f"p5-{i}", [pod(f"train-{i}", cpu="8", gpu=8)]) for i in range(2)]
    quiet, _ = plan(snapshot(c, [], nodes, now=END - 41 * 60), State(), c)
    assert quiet.scale_downs == [] and ups(quiet) == {}
    result, _ = plan(snapshot(c, [], nodes, now=END - 40 * 60), State(), c)
    drains = sorted((d.node, d.forced, d.deadline, d.evict) for d in result.scale_downs)
    assert drains == [(f"p5-{i}", True, END - 30 * 60, (f"default/train-{i}",)) for i in range(2)]
    assert ups(result) == {"gpu8-od": 2}  # asked for in the same pass, ahead of the evictions
    assert {(e.node, e.reason) for e in result.events} == {("p5-0", "CapacityBlockEnding"),
                                                            ("p5-1", "CapacityBlockEnding")}


def test_a_gang_on_an_ending_block_is_deleted_together_and_the_drain_says_block_end() -> None:
    # A gang's budget (minAvailable = all its pods) refuses every eviction: its pods on the block are deleted
    # (the whole gang at once); a pod of no gang is evicted as before. Every drain counts as the block's end.
    c = cfg(BLOCK)
    gang = {c.gang_label: "g1"}
    nodes = [node_of(c, "gpu8-block", "p5-0", [pod("g1-0", cpu="8", gpu=8, labels=gang, owner="Job")]),
             node_of(c, "gpu8-block", "p5-1", [pod("g1-1", cpu="8", gpu=8, labels=gang, owner="Job"),
                                                pod("solo", cpu="8", gpu=2)])]
    result, _ = plan(snapshot(c, [], nodes, now=END - 40 * 60), State(), c)
    drains = sorted((d.node, d.kind, d.evict, d.delete) for d in result.scale_downs)
    assert drains == [("p5-0", "capacity-block-end", ("default/g1-0",), ("default/g1-0",)),
                      ("p5-1", "capacity-block-end", ("default/g1-1", "default/solo"), ("default/g1-1",))]
