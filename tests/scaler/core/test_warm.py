"""Warm pools in the core: the pool model refuses what the cloud would, the expander takes a ready warm
instance first (Ready in timings.warm_start rather than a boot) and the plan shows the warm pool's standing cost."""

from __future__ import annotations

from typing import Any

import pytest
from core_builders import POOLS, config, plan, pod, snapshot

from scaler.core.config.settings import ConfigError, parse_config
from scaler.core.planning.state import State

T0 = 1000.0


def _with_warm(warm: dict[str, Any], pool: str = "gpu1-od", **fields: Any) -> list[dict[str, Any]]:
    return [{**p, "warm": warm, **fields} if p["name"] == pool else p for p in POOLS]


@pytest.mark.parametrize(("pool", "warm", "fields", "line"), [
    ("gpu1-od", {"size": 41}, {}, "pools[gpu1-od].warm.size: 41 is above the pool's max (40)"),
    ("gpu1-spot-a", {"size": 2}, {}, "pools[gpu1-spot-a].warm: AWS refuses a warm pool on a group that launches Spot"),
    ("gpu1-od", {"size": 2}, {"instance_types": ["g6.xlarge", "g6.2xlarge"]},
     "pools[gpu1-od].warm: AWS refuses a warm pool on a group with a mixed instances policy"),
    ("gpu1-od", {"size": 2, "state": "hibernated"}, {}, "pools[gpu1-od].warm.state: Input should be 'stopped' or"),
    ("gpu1-od", {"size": -1}, {}, "pools[gpu1-od].warm.size: Input should be greater than or equal to 0"),
])
def test_bad_warm_pool_names_pool_and_field(pool: str, warm: dict[str, Any], fields: dict[str, Any],
                                           line: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({"cluster": "c1", "cloud": "aws", "pools": _with_warm(warm, pool, **fields)}, "pools.yaml")
    assert line in str(err.value), str(err.value)


def test_azure_refuses_a_warm_pool_in_one_line() -> None:
    pools = [{"name": "gpu", "vm_size": "Standard_NC24ads_A100_v4", "zones": ["1"], "max": 4, "warm": {"size": 1}}]
    with pytest.raises(ConfigError) as err:
        parse_config({"cluster": "c1", "cloud": "azure", "pools": pools}, "pools.yaml")
    assert "pools[gpu].warm: AKS node pools have no fixed-size warm pool" in str(err.value)


def _plan(cfg: Any, pending: list[Any], warm: int) -> Any:
    snap = snapshot(cfg, pending, now=T0)
    snap.pools["gpu1-od"].warm = warm
    return plan(snap, State(), cfg)[0]


def test_pods_take_the_ready_warm_instances_first_then_spot() -> None:
    cfg = config(_with_warm({"size": 2}))
    result = _plan(cfg, [pod(f"g{i}", gpu=1) for i in range(5)], warm=2)
    ups = {u.pool: u.count for u in result.scale_ups}
    # Two nodes from the warm pool (on-demand, Ready in warm_start), the other three cold on spot.
    assert ups == {"gpu1-od": 2, "gpu1-spot-a": 3}
    # Without a ready warm instance the warm pool's on-demand group is only the spot pools' fallback.
    assert {u.pool for u in _plan(cfg, [pod("g0", gpu=1)], warm=0).scale_ups} == {"gpu1-spot-a"}


def test_the_plan_shows_the_warm_pools_time_to_ready_and_standing_cost() -> None:
    stopped = _plan(config(_with_warm({"size": 4})), [], warm=3).to_dict(pods=False)["warm"]["gpu1-od"]
    # Stopped: four 100 GiB gp3 root volumes at $0.08 per GiB-month (730 h).
    assert stopped == {"size": 4, "ready": 3, "state": "stopped", "ready_in_s": 90.0,
                       "standing_usd_per_hour": round(4 * 100 * 0.08 / 730, 4)}
    running = _plan(config(_with_warm({"size": 4, "state": "running"})), [], warm=4).warm["gpu1-od"]
    assert running.usd_per_hour == pytest.approx(4 * config(POOLS).pool("gpu1-od").list_price(0.4))
    assert running.ready_in < stopped["ready_in_s"]
