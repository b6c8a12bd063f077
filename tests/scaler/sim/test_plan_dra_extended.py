"""DeviceClass `extendedResourceName` (DRAExtendedResource, GA and on in 1.37), through `python -m scaler plan
--snapshot`: a pod asking for `nvidia.com/gpu` is served on a DRA node whose class names the resource (its
allocatable has no nvidia.com/gpu: kube-scheduler leaves the resource to DRA there), including a DRA pool
scaled from zero, and on device-plugin pools as before; two classes naming one resource are bad input."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from dra_snapshot import pod, snapshot

from scaler.cli import main
from scaler.configfile import load_config
from scaler.core.planning.context import planning_context
from scaler.core.planning.decisions import Plan
from scaler.core.planning.planner import plan
from scaler.core.planning.state import State
from scaler.sim.plan_command import load_snapshot
from tests.controlplane.scheduler_diff import tie

ROOT = Path(__file__).resolve().parents[3]
POOLS = ROOT / "examples" / "pools-aws-dra.yaml"
NODE = "ip-10-0-1-20.ec2.internal"


def _dra_only(tmp_path: Path) -> Path:
    """The example pools without the device-plugin GPU pool: every GPU pool is DRA."""
    data = yaml.safe_load(POOLS.read_text())
    data["pools"] = [p for p in data["pools"] if p["name"] != "l4-plugin"]
    out = tmp_path / "pools.yaml"
    out.write_text(yaml.safe_dump(data))
    return out


def _cluster(*pods: dict[str, Any], nodes: bool = True, extended: bool = True) -> dict[str, Any]:
    data = copy.deepcopy(snapshot())
    keep = ("DeviceClass", "ResourceClaimTemplate") + (("Node", "ResourceSlice") if nodes else ())
    data["items"] = [o for o in data["items"] if o["kind"] in keep] + list(pods)
    if not extended:  # the NVIDIA chart's classes: none names an extended resource
        for o in data["items"]:
            if o["kind"] == "DeviceClass":
                o["spec"].pop("extendedResourceName", None)
    return data


def _plan(tmp_path: Path, data: dict[str, Any], pools: Path = POOLS) -> Plan:
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    config = load_config(pools)
    snap, _ = load_snapshot(path, config)
    return plan(snap, State(), planning_context(config))[0]


def _gpu_pod(name: str, n: int, resource: str = "nvidia.com/gpu") -> dict[str, Any]:
    return pod(name, limits={resource: str(n)}, minute=1)


def test_a_gpu_pod_fits_the_free_gpu_of_a_dra_node_whose_class_serves_it(tmp_path: Path) -> None:
    v = _plan(tmp_path, _cluster(_gpu_pod("one", 1))).verdicts["ml/one"]
    assert (v.outcome, v.node) == ("fits-existing", NODE)


def test_on_dra_only_pools_a_gpu_pod_scales_a_dra_pool_from_zero(tmp_path: Path) -> None:
    result = _plan(tmp_path, _cluster(_gpu_pod("four", 4), nodes=False), _dra_only(tmp_path))
    v = result.verdicts["ml/four"]
    assert (v.outcome, v.pool) == ("scale-up", "a100-dra")  # an L4 node has one GPU
    assert "cannot allocate" in v.reasons["l4-dra"]
    assert [(u.pool, u.count) for u in result.scale_ups] == [("a100-dra", 1)]
    # without a class naming the resource (the NVIDIA chart's), no DRA pool serves it; a plugin pool does
    v = _plan(tmp_path, _cluster(_gpu_pod("four", 4), nodes=False, extended=False), _dra_only(tmp_path)).verdicts
    assert v["ml/four"].outcome == "unschedulable"
    v = _plan(tmp_path, _cluster(_gpu_pod("one", 1), extended=False)).verdicts
    assert (v["ml/one"].outcome, v["ml/one"].pool) == ("scale-up", "l4-plugin")


def test_the_implicit_class_resource_is_served_too(tmp_path: Path) -> None:
    data = _cluster(_gpu_pod("implicit", 2, "deviceclass.resource.kubernetes.io/gpu.nvidia.com"), nodes=False)
    v = _plan(tmp_path, data, _dra_only(tmp_path)).verdicts["ml/implicit"]
    assert (v.outcome, v.pool) == ("scale-up", "a100-dra")


def test_a_dra_node_and_a_plugin_node_each_serve_their_own(tmp_path: Path) -> None:
    """Two pods of one GPU and one free DRA L4: one fits there, the other gets a node (either kind can
    serve it: the cheaper, as the expander picks)."""
    result = _plan(tmp_path, _cluster(_gpu_pod("a", 1), _gpu_pod("b", 1)))
    outcomes = sorted((v.outcome, v.node or v.pool) for v in result.verdicts.values())
    assert outcomes[0] == ("fits-existing", NODE)
    assert outcomes[1][0] == "scale-up"


def test_two_classes_naming_one_resource_is_one_line_exit_2(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    data = _cluster(_gpu_pod("one", 1))
    gpu = next(o for o in data["items"] if o["kind"] == "DeviceClass" and o["metadata"]["name"] == "gpu.nvidia.com")
    other = copy.deepcopy(gpu)
    other["metadata"]["name"] = "l4.example.com"
    data["items"].append(other)
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    assert main(["plan", "--snapshot", str(path), "--pools", str(POOLS)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert ("DeviceClass l4.example.com: spec.extendedResourceName: nvidia.com/gpu is also served by DeviceClass "
            "gpu.nvidia.com") in err[0], err


def test_scheduler_diff_counts_a_dra_served_resource_as_the_planner_does(tmp_path: Path) -> None:
    # `make scheduler-diff` once called kube-scheduler's choice of a second, equal DRA node for an nvidia.com/gpu
    # pod a disagreement ("Insufficient nvidia.com/gpu"): its tie check counted the resource against the node's
    # allocatable, which has none on a DRA node (kube-scheduler leaves it to the class that serves it).
    data = _cluster(_gpu_pod("one", 1))
    twin = NODE.replace("20", "21")
    for o in [o for o in data["items"] if o["kind"] in ("Node", "ResourceSlice")]:
        data["items"].append(json.loads(json.dumps(o).replace(NODE, twin).replace("i-0dra", "i-1dra")))
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    config = load_config(POOLS)
    snap, _ = load_snapshot(path, config)
    v = plan(snap, State(), planning_context(config))[0].verdicts["ml/one"]
    assert v.outcome == "fits-existing" and v.node in (NODE, twin)
    other = twin if v.node == NODE else NODE
    same, message = tie(snap, "one", v.node, other)
    assert same, message
