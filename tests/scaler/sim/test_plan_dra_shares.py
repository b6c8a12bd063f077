"""GPUs shared by memory through DRA's consumable capacity (DRAConsumableCapacity, beta and on since 1.36),
through `python -m scaler plan --snapshot`: a pool declaring `gpu_sharing: {memory: {step_gib: 4}}` scales
from zero with GPUs that allow multiple allocations, so pods each claiming 4 GiB of a GPU's memory land five
to an L4 (22.5 GiB), and a running node whose GPU still has room takes more beside the share it holds
(status.allocation.devices.results[].consumedCapacity), as kube-scheduler's allocator does. What the API
server refuses in such objects is one line, exit 2."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from dra_shared_snapshot import snapshot
from snapshot_plan import plan_snapshot, write_snapshot

from scaler.cli import main
from scaler.core.config.settings import parse_config
from scaler.core.model.errors import FieldError
from scaler.core.planning.decisions import Plan

ROOT = Path(__file__).resolve().parents[3]
POOLS = ROOT / "examples" / "pools-aws-dra-shared.yaml"
NODE = "ip-10-0-1-20.ec2.internal"



def _plan(tmp_path: Path, data: dict[str, Any]) -> Plan:
    return plan_snapshot(tmp_path, data, POOLS)


def _outcomes(result: Plan) -> list[tuple[str, str | None]]:
    return [(v.outcome, v.node or v.pool) for _, v in sorted(result.verdicts.items())]


def _template_asks(data: dict[str, Any], memory: str | None) -> None:
    tmpl = next(o for o in data["items"] if o["kind"] == "ResourceClaimTemplate")
    exact = tmpl["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    if memory is None:
        exact.pop("capacity")
    else:
        exact["capacity"]["requests"]["memory"] = memory


def test_from_zero_five_shares_land_on_each_new_gpu(tmp_path: Path) -> None:
    result = _plan(tmp_path, snapshot(pending=10, held=None))
    assert [(u.pool, u.count) for u in result.scale_ups] == [("l4-shared", 2)]
    assert set(_outcomes(result)) == {("scale-up", "l4-shared")}


def test_a_running_gpu_with_room_takes_shares_beside_the_one_it_holds(tmp_path: Path) -> None:
    result = _plan(tmp_path, snapshot(pending=7, held="12Gi"))  # 12 GiB held: room for two 4 GiB shares
    assert _outcomes(result) == [("fits-existing", NODE)] * 2 + [("scale-up", "l4-shared")] * 5
    assert [(u.pool, u.count) for u in result.scale_ups] == [("l4-shared", 1)]


def test_a_full_gpu_takes_no_share(tmp_path: Path) -> None:
    result = _plan(tmp_path, snapshot(pending=1, held="20Gi"))  # 2.5 GiB left: less than a 4 GiB step
    assert _outcomes(result) == [("scale-up", "l4-shared")]


def test_a_share_is_rounded_up_to_whole_steps(tmp_path: Path) -> None:
    data = snapshot(pending=7, held=None)
    _template_asks(data, "5Gi")  # 8 GiB each (two steps): two per L4
    result = _plan(tmp_path, data)
    assert [(u.pool, u.count) for u in result.scale_ups] == [("l4-shared", 4)]


def test_a_claim_that_asks_no_memory_takes_the_whole_gpu(tmp_path: Path) -> None:
    data = snapshot(pending=3, held=None)
    _template_asks(data, None)
    result = _plan(tmp_path, data)
    assert [(u.pool, u.count) for u in result.scale_ups] == [("l4-shared", 3)]


def test_more_memory_than_a_gpu_has_is_no_pool(tmp_path: Path) -> None:
    data = snapshot(pending=1, held=None)
    _template_asks(data, "24Gi")
    v = _plan(tmp_path, data).verdicts["ml/share-0"]
    assert v.outcome != "scale-up"
    assert "without the capacity asked left" in v.reasons["l4-shared"], v.reasons


def _slice_policy(data: dict[str, Any]) -> dict[str, Any]:
    sl = next(o for o in data["items"] if o["kind"] == "ResourceSlice")
    return sl["spec"]["devices"][0]


@pytest.mark.parametrize(("edit", "field", "says"), [
    (lambda d: d.pop("allowMultipleAllocations"), "capacity[memory].requestPolicy",
     "Forbidden: allowMultipleAllocations must be true"),
    (lambda d: d["capacity"]["memory"]["requestPolicy"].pop("default"), "capacity[memory].requestPolicy.default",
     "Required value: required when validRange is defined"),
    (lambda d: d["capacity"]["memory"]["requestPolicy"]["validRange"].update(step="0"),
     "capacity[memory].requestPolicy.validRange.step", "must be greater than zero"),
    (lambda d: d["capacity"]["memory"]["requestPolicy"].update(validValues=["4Gi"]),
     "capacity[memory].requestPolicy", 'cannot specify "validValues" and "validRange"'),
    (lambda d: d["capacity"]["memory"]["requestPolicy"].update(default="5Gi"),
     "capacity[memory].requestPolicy.validRange.step", "5Gi"),
])
def test_a_request_policy_the_api_refuses_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             edit: Any, field: str, says: str) -> None:
    data = copy.deepcopy(snapshot(pending=1))
    edit(_slice_policy(data))
    assert main(["plan", "--snapshot", str(write_snapshot(tmp_path, data)), "--pools", str(POOLS)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert f"ResourceSlice {NODE}-gpu.nvidia.com: spec.devices[0].{field}" in err[0], err
    assert says in err[0] or str(5 * 2**30) in err[0], err


@pytest.mark.parametrize(("pool", "where", "says"), [
    ({"gpu_sharing": {"memory": {"step_gib": 4}}}, ("gpu_sharing", "memory"), "declare gpu_allocation: dra"),
    ({"gpu_allocation": "dra", "gpu_sharing": {"memory": {"step_gib": 12}}}, ("gpu_sharing", "memory", "step_gib"),
     "fewer than two shares"),
])
def test_a_pool_sharing_memory_without_dra_or_with_too_big_a_step_is_refused(
        pool: dict[str, Any], where: tuple[str, ...], says: str) -> None:
    raw = {"name": "l4", "instance_types": ["g6.xlarge"], "zones": ["us-east-1a"], "max": 3, **pool}
    with pytest.raises((FieldError, ValueError)) as err:
        parse_config({"cluster": "c1", "cloud": "aws", "pools": [raw]}, "pools.yaml")
    assert says in str(err.value) and ".".join(where) in str(err.value), str(err.value)
