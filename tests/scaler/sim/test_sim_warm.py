"""The simulator's warm pools: a scale-out starts warm instances first, the group refills its warm pool (each
refill paid while it boots, then its root volume while stopped), and `simulate --warm` shortens 1-GPU waits."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from sim_helpers import ROOT, SMALL_POOLS, write_trace

from scaler.core.config.settings import parse_config
from scaler.core.config.warm import EBS_GIB_MONTH, HOURS_A_MONTH
from scaler.providers.sim import SimProvider
from scaler.sim.report import summary
from scaler.sim.simulate_command import InputError, simulate


def _config(size: int) -> object:
    raw = copy.deepcopy(SMALL_POOLS)
    for p in raw["pools"]:
        if p["name"] == "gpu1-od":
            p["warm"] = {"size": size}
    return parse_config(raw, "pools.yaml")


def test_a_scale_out_starts_warm_instances_first_and_the_group_refills() -> None:
    cfg = _config(2)
    provider = SimProvider(cfg)  # type: ignore[arg-type]
    assert provider.observe(0)["gpu1-od"].warm == 2
    provider.advance(1000)
    provider.set_desired("gpu1-od", 3)
    assert provider.observe(1000)["gpu1-od"].warm == 0  # the two refills boot
    ready = provider.advance(1000 + 90).ready
    assert len(ready) == 2  # the warm ones, after warm_start
    assert len(provider.advance(1000 + 240).ready) == 1  # the cold one, after gpu_boot
    assert provider.observe(1240)["gpu1-od"].warm == 2  # refilled: booted, stopped
    # Bill: the first two waited stopped 1000 s; the refills' boots (240 s each) at full price, then 1000 s stopped.
    price = cfg.pool("gpu1-od").list_price(0.4)  # type: ignore[attr-defined]
    volume = 100 * EBS_GIB_MONTH / HOURS_A_MONTH
    expected = (2 * 1000 * volume + 2 * 240 * price + 2 * (2240 - 1240) * volume) / 3600
    assert sum(w.cost(2240) for w in provider.warm_history) == pytest.approx(expected)


def _run(tmp_path: Path, warm: int) -> dict[str, object]:
    trace = write_trace(tmp_path / "t.csv", [f"{i},{600 * i},1,300,1" for i in range(6)])
    pools = tmp_path / "pools.yaml"
    pools.write_text(yaml.safe_dump(SMALL_POOLS), encoding="utf-8")
    return simulate(str(trace), str(pools), warm_size=warm)[1]


def test_simulate_warm_shortens_the_wait_and_bills_the_warm_pool(tmp_path: Path) -> None:
    cold, warm = _run(tmp_path, 0), _run(tmp_path, 1)
    assert cold["warm_pools"] is None and cold["pending_1gpu_p95_s"] >= 240
    assert warm["pending_1gpu_p95_s"] < 120  # every job on a warm instance: warm_start (90 s) and a pass
    section = warm["warm_pools"]
    assert isinstance(section, dict) and section["pools"] == {"gpu1-od": 1}  # not gpu8-od: 8-GPU nodes
    assert section["started"] >= 1 and section["cost_usd"] > 0
    assert warm["cost_usd"] > section["cost_usd"]
    # The summary a user reads says it in words, not as a Python dict.
    line = next(ln for ln in summary(warm).splitlines() if ln.strip().startswith("warm_pools"))
    assert f"gpu1-od 1: {section['instances']} instances launched, {section['started']} started by scale-outs" in line
    assert "{" not in line
    assert next(ln for ln in summary(cold).splitlines() if ln.strip().startswith("warm_pools")).split() == \
        ["warm_pools", "none"]
    assert "None" not in summary(cold)  # no fallback in this run: fallback_delay_max_s says none, not Python's None


def test_simulate_warm_refuses_pools_that_cannot_have_one(tmp_path: Path) -> None:
    raw = {**SMALL_POOLS, "pools": [{"name": "gpu1-od", "instance_types": ["g6.xlarge", "g6.2xlarge"],
                                     "zones": ["us-east-1a"], "max": 4}]}  # a mixed instances policy
    pools = tmp_path / "spot.yaml"
    pools.write_text(yaml.safe_dump(raw), encoding="utf-8")
    trace = write_trace(tmp_path / "t.csv", ["1,0,1,60,1"])
    with pytest.raises(InputError, match=r"--warm 2: .*spot.yaml: no pool takes a warm pool"):
        simulate(str(trace), str(pools), warm_size=2)


def test_explain_says_what_a_warm_pool_gives_and_costs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from scaler.cli import main

    raw = yaml.safe_load((ROOT / "examples" / "pools-aws.yaml").read_text(encoding="utf-8"))
    for p in raw["pools"]:
        if p["name"] == "gpu1-od-a":
            p["warm"] = {"size": 3}
    pools = tmp_path / "pools.yaml"
    pools.write_text(yaml.safe_dump(raw), encoding="utf-8")
    assert main(["explain", "--snapshot", str(ROOT / "examples" / "snapshot-aws.json"), "--pools", str(pools)]) == 0
    out = capsys.readouterr().out
    # A snapshot file lists no warm instance: none ready; three 100 GiB stopped root volumes stand at $0.033/h.
    assert ("note: warm pool of gpu1-od-a: 0 of 3 stopped instances ready to start, each a node in 90 s rather "
            "than a boot; it stands at $0.033/h") in out
