"""Device taints and claim tolerations (resource.k8s.io/v1, DRADeviceTaints and DRADeviceTaintRules GA in
1.37), through `python -m scaler plan --snapshot`: a GPU tainted NoSchedule or NoExecute (the driver's own
taint or a DeviceTaintRule's) is not free for a claim that does not tolerate it, as kube-scheduler's
allocator decides (upstream taintPreventsAllocation); a claim that tolerates it is placed there, not on a
new node. A toleration the API server refuses is one line, exit 2."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from dra_snapshot import snapshot, template
from snapshot_plan import plan_snapshot, write_snapshot

from scaler.cli import main
from scaler.core.planning.decisions import Plan

ROOT = Path(__file__).resolve().parents[3]
POOLS = ROOT / "examples" / "pools-aws-dra.yaml"
NODE = "ip-10-0-1-20.ec2.internal"
XID = {"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}


def _whole_gpu_only(taint: dict[str, Any] | None = None) -> dict[str, Any]:
    data = copy.deepcopy(snapshot())
    data["items"] = [o for o in data["items"] if o["kind"] != "Pod" or o["metadata"]["name"] == "whole-gpu-0"]
    if taint is not None:
        sl = next(o for o in data["items"] if o["kind"] == "ResourceSlice")
        sl["spec"]["devices"][0]["taints"] = [taint]
    return data



def _plan(tmp_path: Path, data: dict[str, Any]) -> Plan:
    return plan_snapshot(tmp_path, data, POOLS)


def _tolerate(data: dict[str, Any], toleration: dict[str, Any]) -> None:
    tmpl = next(o for o in data["items"] if o["metadata"]["name"] == "one-gpu")
    tmpl["spec"]["spec"]["devices"]["requests"][0]["exactly"]["tolerations"] = [toleration]


@pytest.mark.parametrize("effect", ["NoSchedule", "NoExecute"])
def test_a_tainted_gpu_is_not_free(tmp_path: Path, effect: str) -> None:
    v = _plan(tmp_path, _whole_gpu_only({**XID, "effect": effect})).verdicts["ml/whole-gpu-0"]
    assert (v.outcome, v.pool) == ("scale-up", "l4-dra")


def test_a_taint_of_no_effect_leaves_the_gpu_free(tmp_path: Path) -> None:
    v = _plan(tmp_path, _whole_gpu_only({**XID, "effect": "None"})).verdicts["ml/whole-gpu-0"]
    assert (v.outcome, v.node) == ("fits-existing", NODE)


def test_a_device_taint_rule_taints_the_gpus_it_selects(tmp_path: Path) -> None:
    data = _whole_gpu_only()
    rule = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": "drain-gpu-0"},
            "spec": {"deviceSelector": {"driver": "gpu.nvidia.com", "pool": NODE, "device": "gpu-0"},
                     "taint": {"key": "example.com/maintenance", "effect": "NoSchedule"}}}
    v = _plan(tmp_path, {**data, "items": [*data["items"], rule]}).verdicts["ml/whole-gpu-0"]
    assert v.outcome == "scale-up"
    rule["spec"]["deviceSelector"]["device"] = "gpu-1"  # selects no device of this node
    v = _plan(tmp_path, {**data, "items": [*data["items"], rule]}).verdicts["ml/whole-gpu-0"]
    assert (v.outcome, v.node) == ("fits-existing", NODE)


@pytest.mark.parametrize("toleration", [
    {"key": "gpu.nvidia.com/xid", "operator": "Exists"},
    {"key": "gpu.nvidia.com/xid", "operator": "Equal", "value": "79", "effect": "NoSchedule"},
    {"operator": "Exists"},
])
def test_a_claim_that_tolerates_the_taint_is_placed_there(tmp_path: Path, toleration: dict[str, Any]) -> None:
    data = _whole_gpu_only(XID)
    _tolerate(data, toleration)
    result = _plan(tmp_path, data)
    v = result.verdicts["ml/whole-gpu-0"]
    assert (v.outcome, v.node) == ("fits-existing", NODE)
    assert result.scale_ups == []


def test_a_toleration_of_another_value_or_effect_does_not_help(tmp_path: Path) -> None:
    data = _whole_gpu_only(XID)
    _tolerate(data, {"key": "gpu.nvidia.com/xid", "operator": "Equal", "value": "48"})
    assert _plan(tmp_path, data).verdicts["ml/whole-gpu-0"].outcome == "scale-up"
    _tolerate(data, {"key": "gpu.nvidia.com/xid", "operator": "Exists", "effect": "NoExecute"})
    assert _plan(tmp_path, data).verdicts["ml/whole-gpu-0"].outcome == "scale-up"


@pytest.mark.parametrize(("toleration", "field", "says"), [
    ({"key": "gpu.nvidia.com/xid", "operator": "Exists", "value": "79"}, "tolerations[0].value",
     "must be empty for operator `Exists`"),
    ({"key": "gpu.nvidia.com/xid", "operator": "In"}, "tolerations[0].operator", "Unsupported value 'In'"),
    ({"key": "gpu.nvidia.com/xid", "operator": "Exists", "effect": "PreferNoSchedule"}, "tolerations[0].effect",
     "Unsupported value 'PreferNoSchedule'"),
    ({"key": "bad key", "operator": "Exists"}, "tolerations[0].key", "not a qualified name"),
])
def test_a_toleration_the_api_refuses_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         toleration: dict[str, Any], field: str, says: str) -> None:
    data = _whole_gpu_only(XID)
    _tolerate(data, toleration)
    assert main(["plan", "--snapshot", str(write_snapshot(tmp_path, data)), "--pools", str(POOLS)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert f"ResourceClaimTemplate ml/one-gpu: spec.spec.devices.requests[0].exactly.{field}" in err[0], err
    assert says in err[0], err


def test_a_template_tolerating_with_the_counted_path_agrees(tmp_path: Path) -> None:
    """Many pods of one template: the packer's count path must not count a tainted GPU as free."""
    data = _whole_gpu_only(XID)
    data["items"].append(template("one-more", [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]))
    pods = [o for o in data["items"] if o["kind"] == "Pod"]
    for i in range(1, 4):
        extra = copy.deepcopy(pods[0])
        extra["metadata"]["name"] = f"whole-gpu-{i}"
        data["items"].append(extra)
    result = _plan(tmp_path, data)
    assert all(v.outcome != "fits-existing" for v in result.verdicts.values())
    assert sum(u.count for u in result.scale_ups) == 4
