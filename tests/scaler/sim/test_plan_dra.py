"""`python -m scaler plan` on a snapshot with DRA pods (issue 24's acceptance): each pod goes to the pool
whose nodes' devices the allocator can give it, and "fits existing" exactly where it can allocate.
The snapshot is examples/snapshot-aws-dra.json (built by dra_snapshot.py), the pools
examples/pools-aws-dra.yaml."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from dra_snapshot import pod, snapshot

from scaler.cli import main
from scaler.configfile import load_config
from scaler.core.planning.context import planning_context
from scaler.core.planning.decisions import Plan
from scaler.core.planning.planner import plan
from scaler.core.planning.state import State
from scaler.sim.plan_command import load_snapshot

ROOT = Path(__file__).resolve().parents[3]
POOLS = ROOT / "examples" / "pools-aws-dra.yaml"
NODE = "ip-10-0-1-20.ec2.internal"


def _plan(tmp_path: Path, data: dict[str, Any], pools: Path = POOLS) -> Plan:
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    config = load_config(pools)
    snap, _ = load_snapshot(path, config)
    return plan(snap, State(), planning_context(config))[0]


def _only(data: dict[str, Any], *pods: str) -> dict[str, Any]:
    out = copy.deepcopy(data)
    out["items"] = [o for o in out["items"] if o["kind"] != "Pod" or o["metadata"]["name"] in pods]
    return out


def test_the_example_snapshot_is_the_generated_one() -> None:
    assert json.loads((ROOT / "examples" / "snapshot-aws-dra.json").read_text()) == snapshot()


def test_each_dra_pod_gets_the_pool_whose_devices_fit_it(tmp_path: Path) -> None:
    v = _plan(tmp_path, snapshot()).verdicts
    # The L4 node's one GPU: the claim pod or the nvidia.com/gpu pod, which the snapshot's GPU class serves
    # there (extendedResourceName; its allocatable has no nvidia.com/gpu): the planner matches a node that
    # just came up to the larger pod first (queue_order.tie_break), the other gets an l4-dra node.
    assert {(v[k].outcome, v[k].node or v[k].pool) for k in ("ml/whole-gpu-0", "ml/plugin-gpu-0")} == {
        ("fits-existing", NODE), ("scale-up", "l4-dra")}
    assert (v["ml/memory-40gi-0"].outcome, v["ml/memory-40gi-0"].pool) == ("scale-up", "a100-dra")
    assert "cannot allocate" in v["ml/memory-40gi-0"].reasons["l4-dra"]  # an L4 has 22.5 GiB
    assert (v["ml/mig-1g5gb-0"].outcome, v["ml/mig-1g5gb-0"].pool) == ("scale-up", "a100-mig-dra")
    assert (v["ml/two-gpus-0"].outcome, v["ml/two-gpus-0"].pool) == ("scale-up", "a100-dra")
    # the node the 40 GiB pod opened has 7 GPUs left: the firstAvailable pod's second choice fits there
    assert v["ml/first-available-0"].pool == "a100-dra"
    assert (v["ml/cpu-0"].outcome, v["ml/cpu-0"].pool) == ("scale-up", "cpu")
    for key, verdict in v.items():
        if key != "ml/cpu-0":
            assert verdict.pool != "cpu", key  # a GPU claim never buys a CPU node


def test_fits_existing_only_where_the_allocator_allocates(tmp_path: Path) -> None:
    data = _only(snapshot(), "whole-gpu-0", "memory-40gi-0")
    v = _plan(tmp_path, data).verdicts
    assert v["ml/whole-gpu-0"].outcome == "fits-existing"
    assert v["ml/memory-40gi-0"].outcome == "scale-up"  # the free L4 is too small for it
    # the L4 already held by an allocated claim: the next pod does not fit there
    data["items"].append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {
        "name": "held", "namespace": "ml"}, "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
        "status": {"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": "gpu.nvidia.com", "pool": NODE, "device": "gpu-0"}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [NODE]}]}]}}}})
    v = _plan(tmp_path, data).verdicts
    assert (v["ml/whole-gpu-0"].outcome, v["ml/whole-gpu-0"].pool) == ("scale-up", "l4-dra")


def test_first_available_takes_the_cheapest_pool_its_alternatives_fit(tmp_path: Path) -> None:
    v = _plan(tmp_path, _only(snapshot(), "whole-gpu-0", "first-available-0")).verdicts
    assert (v["ml/first-available-0"].outcome, v["ml/first-available-0"].pool) == ("scale-up", "l4-dra")


def test_a_shared_claim_brings_its_pods_together(tmp_path: Path) -> None:
    data = _only(snapshot(), "whole-gpu-0")
    data["items"].append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {
        "name": "shared", "namespace": "ml"}, "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com",
                                         "selectors": [{"cel": {"expression": "device.capacity['gpu.nvidia.com']"
                                                                ".memory.compareTo(quantity('30Gi')) >= 0"}}]}}]}}})
    data["items"] += [pod(f"share-{i}", {"gpu": "claim:shared"}, minute=10 + i) for i in range(3)]
    result = _plan(tmp_path, data)
    assert [(u.pool, u.count) for u in result.scale_ups] == [("a100-dra", 1)]  # one device, one node
    assert {result.verdicts[f"ml/share-{i}"].pool for i in range(3)} == {"a100-dra"}


def test_a_registered_dra_node_is_coming_until_its_slices_are_published(tmp_path: Path) -> None:
    data = _only(snapshot(), "whole-gpu-0")
    data["items"] = [o for o in data["items"] if o["kind"] != "ResourceSlice"]
    v = _plan(tmp_path, data).verdicts
    assert (v["ml/whole-gpu-0"].outcome, v["ml/whole-gpu-0"].node) == ("fits-in-flight", NODE)


def test_broken_claims_are_explained_not_crashed(tmp_path: Path) -> None:
    v = _plan(tmp_path, snapshot()).verdicts
    assert v["ml/missing-class-0"].outcome == "unschedulable"
    assert v["ml/missing-class-0"].reasons["*"] == "DeviceClass tpu.example.com not found"
    assert v["ml/missing-claim-0"].reasons["*"] == "ResourceClaim ml/nowhere not found"


def test_a_selector_that_does_not_compile_is_one_line_exit_2(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    data = _only(snapshot(), "whole-gpu-0")
    tmpl = next(o for o in data["items"] if o["metadata"]["name"] == "one-gpu")
    request = tmpl["spec"]["spec"]["devices"]["requests"][0]
    request["exactly"]["selectors"] = [{"cel": {"expression": "device.driver =="}}]  # does not compile
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    assert main(["plan", "--snapshot", str(path), "--pools", str(POOLS)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and ("ResourceClaimTemplate ml/one-gpu: spec.spec.devices.requests[0].exactly.selectors[0]"
                              ".cel.expression: CEL compile error") in err[0], err


def test_without_a_dra_pool_a_claim_never_buys_a_cpu_node(tmp_path: Path) -> None:
    """The issue's user story: planned against pools-aws.yaml, the DRA pod got 'scale up cpu-spot'."""
    data = _only(snapshot(), "whole-gpu-0")
    data["items"] = [o for o in data["items"] if o["kind"] not in ("Node", "ResourceSlice")]
    result = _plan(tmp_path, data, ROOT / "examples" / "pools-aws.yaml")
    assert result.scale_ups == [] or all(u.pool != "cpu-spot" for u in result.scale_ups)
    assert result.verdicts["ml/whole-gpu-0"].outcome == "unschedulable"


def test_plan_prints_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--snapshot", str(ROOT / "examples" / "snapshot-aws-dra.json"), "--pools", str(POOLS)]) == 0
    out = capsys.readouterr().out
    assert f"ml/plugin-gpu-0: fits-existing on node {NODE}" in out  # served by the class, larger first
    assert "scale up a100-mig-dra in us-east-1a by 1 (desired -> 1) for ml/mig-1g5gb-0" in out


def test_a_malformed_dra_object_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = snapshot()
    next(o for o in data["items"] if o["kind"] == "ResourceSlice")["spec"]["pool"] = {}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    assert main(["plan", "--snapshot", str(path), "--pools", str(POOLS)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ResourceSlice ip-10-0-1-20.ec2.internal-gpu.nvidia.com: spec.pool.name" in err[0]


def test_a_node_with_too_few_free_devices_says_how_many(tmp_path: Path) -> None:
    # two GPUs asked, an L4 node has one: refused without a search, the reason counts the devices
    v = _plan(tmp_path, _only(snapshot(), "two-gpus-0")).verdicts["ml/two-gpus-0"]
    assert v.reasons["l4-dra"] == ("cannot allocate the pod's ResourceClaims: ml/two-gpus-0-gpus: 2 device(s) "
                                   "needed, 1 free on the node")
