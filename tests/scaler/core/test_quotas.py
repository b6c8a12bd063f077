"""Cloud quotas as caps: the planner never asks a pool for more vCPUs than its quota has left, and an
exhausted quota sends the pods down the pool's ladder in the same pass, naming the quota."""

from __future__ import annotations

from core_builders import example_config, plan, pod, snapshot

from scaler.core.planning.snapshot import Quota, Snapshot
from scaler.core.planning.state import State

CFG = example_config()
SPOT_G = "All G and VT Spot Instance Requests"


def with_quota(snap: Snapshot, headroom: int, *pools: str) -> Snapshot:
    for name in pools:
        snap.pools[name].quota = Quota(SPOT_G, headroom)
    return snap


def ups(result: object) -> dict[str, int]:
    out: dict[str, int] = {}
    for u in result.scale_ups:  # type: ignore[attr-defined]
        out[u.pool] = out.get(u.pool, 0) + u.count
    return out


def test_an_exhausted_spot_quota_sends_every_pod_to_on_demand_in_the_first_pass() -> None:
    pending = [pod(f"g{i}", gpu=1) for i in range(3)]
    result, _ = plan(with_quota(snapshot(CFG, pending), 0, "gpu1-spot-a", "gpu1-spot-b"), State(), CFG)
    assert ups(result) == {"gpu1-od": 3}
    why = result.verdicts["default/g0"].reasons["gpu1-spot-a"]
    assert why == f"quota {SPOT_G!r} exhausted: 0 vCPUs left, a node of gpu1-spot-a needs 4"
    assert set(result.quotas) == {SPOT_G}


def test_a_quota_shared_by_two_pools_caps_them_together_and_counts_what_is_owed() -> None:
    pending = [pod(f"g{i}", gpu=1) for i in range(4)]
    # 12 vCPUs left; one g6.xlarge (4 vCPUs) of spot-b is asked for and not launched yet: room for 2 more.
    snap = with_quota(snapshot(CFG, pending, desired={"gpu1-spot-b": 1}, instances={"gpu1-spot-b": 0}), 12,
                      "gpu1-spot-a", "gpu1-spot-b")
    result, _ = plan(snap, State(), CFG)
    spot = ups(result).get("gpu1-spot-a", 0) + ups(result).get("gpu1-spot-b", 0)
    assert (spot, ups(result).get("gpu1-od")) == (2, 1)  # one pod fits the booting node, 2 more on spot


def test_without_a_quota_reading_nothing_is_capped() -> None:
    result, _ = plan(snapshot(CFG, [pod(f"g{i}", gpu=1) for i in range(3)]), State(), CFG)
    assert "gpu1-od" not in ups(result) and result.quotas == {}
