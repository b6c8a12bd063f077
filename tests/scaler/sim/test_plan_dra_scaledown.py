"""Scale-down on DRA nodes (issue 24): a `gpu_allocation: dra` node's GPUs are devices of its
ResourceSlices, not allocatable, so its use is the GPUs its pods' allocated ResourceClaims hold (a
shared claim once). An idle DRA node is unneeded however much cpu its pods ask; a busy one is not,
however little. Planned as `python -m scaler plan --snapshot` does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dra_snapshot import MEM, cel, classes, exactly, node, pod, slice_, template

from scaler.configfile import load_config
from scaler.core.planning.context import planning_context
from scaler.core.planning.decisions import Plan
from scaler.core.planning.planner import plan
from scaler.core.planning.state import State
from scaler.sim.plan_command import load_snapshot

ROOT = Path(__file__).resolve().parents[3]
POOLS = ROOT / "examples" / "pools-aws-dra.yaml"
NODE = "ip-10-0-1-20.ec2.internal"


def _plan(tmp_path: Path, items: list[dict[str, Any]]) -> Plan:
    path = tmp_path / "snap.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}), encoding="utf-8")
    config = load_config(POOLS)
    snap, _ = load_snapshot(path, config)
    return plan(snap, State(), planning_context(config))[0]


def _running(name: str, cpu: str, claim: str | None = None, on: str = NODE) -> dict[str, Any]:
    out = pod(name, {"gpu": f"claim:{claim}"} if claim else None)
    out["spec"]["nodeName"] = on
    out["spec"]["containers"][0]["resources"]["requests"] = {"cpu": cpu, "memory": "1Gi"}
    out["status"] = {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}]}
    return out


def _claim(name: str, devices: list[str], pool: str = NODE, users: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu.nvidia.com", "count": len(devices)}}]}},
            "status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.nvidia.com", "pool": pool, "device": d} for d in devices]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [pool]}]}]}},
                "reservedFor": [{"resource": "pods", "name": u, "uid": f"uid-{u}"} for u in users]}}


def test_a_dra_node_whose_gpu_a_claim_holds_is_not_unneeded(tmp_path: Path) -> None:
    # the pod asks for little cpu and memory (0.5 of 3.92 cpus, 1 of 14 GiB): counted by those, the node
    # would look idle and be removed
    items = [node(), slice_(), *classes(), _claim("train", ["gpu-0"], users=("train-0",)),
             _running("train-0", "500m", "train")]
    assert NODE not in _plan(tmp_path, items).unneeded


def test_a_dra_node_no_claim_holds_is_unneeded_whatever_its_cpu(tmp_path: Path) -> None:
    # 3 of 3.92 cpus requested, no GPU held: a GPU node counts its GPUs, as device-plugin nodes do
    items = [node(), slice_(), *classes(), _running("prep-0", "3")]
    assert NODE in _plan(tmp_path, items).unneeded


def _a100_node(name: str) -> list[dict[str, Any]]:
    n = node()
    n["metadata"]["name"] = name
    n["metadata"]["labels"].update({"kubernetes.io/hostname": name, "gpuburst.io/pool": "a100-dra",
                                    "node.kubernetes.io/instance-type": "p4d.24xlarge"})
    n["spec"]["providerID"] = "aws:///us-east-1a/i-0a100"
    n["status"]["allocatable"].update(cpu="95", memory="1100Gi")
    s = slice_()
    s["metadata"]["name"] = f"{name}-gpu.nvidia.com"
    s["spec"].update(nodeName=name, pool={"name": name, "generation": 1, "resourceSliceCount": 1})
    gpu = s["spec"]["devices"][0]
    s["spec"]["devices"] = [{**gpu, "name": f"gpu-{i}"} for i in range(8)]
    return [n, s]


def test_a_claim_shared_by_two_pods_counts_once(tmp_path: Path) -> None:
    a100 = "ip-10-0-1-30.ec2.internal"
    shared = _claim("shared", ["gpu-0", "gpu-1", "gpu-2"], pool=a100, users=("a-0", "b-0"))
    items = [*_a100_node(a100), *classes(), shared,
             _running("a-0", "1", "shared", on=a100), _running("b-0", "1", "shared", on=a100)]
    # 3 of 8 GPUs: under the 0.5 threshold (counted per pod it would be 6 of 8)
    assert a100 in _plan(tmp_path, items).unneeded
    items.append(_claim("more", ["gpu-3"], pool=a100, users=("c-0",)))
    items.append(_running("c-0", "1", "more", on=a100))
    assert a100 not in _plan(tmp_path, items).unneeded  # 4 of 8


def _drain_plan(tmp_path: Path, items: list[dict[str, Any]], unneeded: str) -> Plan:
    path = tmp_path / "snap.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}), encoding="utf-8")
    config = load_config(POOLS)
    snap, _ = load_snapshot(path, config)
    return plan(snap, State(unneeded_since={unneeded: snap.now - 3600}), planning_context(config))[0]


X, Y = "ip-10-0-1-30.ec2.internal", "ip-10-0-1-31.ec2.internal"


def _two_a100s() -> list[dict[str, Any]]:
    x, y = _a100_node(X), _a100_node(Y)
    y[0]["spec"]["providerID"] = "aws:///us-east-1a/i-0a101"
    return [*x, *y, *classes()]


def _busy_y(held: int) -> list[dict[str, Any]]:
    return [_claim("big", [f"gpu-{i}" for i in range(held)], pool=Y, users=("big-0",)),
            _running("big-0", "1", "big", on=Y)]


def test_a_node_whose_pods_claims_fit_nowhere_else_stays(tmp_path: Path) -> None:
    # X: one pod holding 3 GPUs (3 of 8: unneeded); Y has 2 GPUs free: the claim cannot be allocated there
    items = [*_two_a100s(), *_busy_y(6), _claim("train", ["gpu-0", "gpu-1", "gpu-2"], pool=X, users=("train-0",)),
             _running("train-0", "1", "train", on=X)]
    result = _drain_plan(tmp_path, items, X)
    assert X not in {s.node for s in result.scale_downs}
    # with 3 GPUs free on Y it goes, and its pod is planned there
    items = [*_two_a100s(), *_busy_y(5), _claim("train", ["gpu-0", "gpu-1", "gpu-2"], pool=X, users=("train-0",)),
             _running("train-0", "1", "train", on=X)]
    result = _drain_plan(tmp_path, items, X)
    assert [s.node for s in result.scale_downs] == [X]


def test_a_shared_claim_moves_with_its_pods_as_one(tmp_path: Path) -> None:
    # two pods share one claim of 2 GPUs on X; Y has 2 GPUs free: the claim is allocated once there and
    # both pods follow it (counted per pod they would need 4)
    shared = _claim("shared", ["gpu-0", "gpu-1"], pool=X, users=("a-0", "b-0"))
    items = [*_two_a100s(), *_busy_y(6), shared, _running("a-0", "1", "shared", on=X),
             _running("b-0", "1", "shared", on=X)]
    result = _drain_plan(tmp_path, items, X)
    assert [s.node for s in result.scale_downs] == [X]


def test_two_drains_do_not_count_the_same_free_gpu(tmp_path: Path) -> None:
    # X and Z each run a pod holding 1 GPU; Y has 1 GPU free: only one of them can move there
    z = _a100_node("ip-10-0-1-32.ec2.internal")
    z[0]["spec"]["providerID"] = "aws:///us-east-1a/i-0a102"
    items = [*_two_a100s(), *z, *_busy_y(7), _claim("one", ["gpu-0"], pool=X, users=("one-0",)),
             _running("one-0", "1", "one", on=X), _claim("two", ["gpu-0"], pool=z[0]["metadata"]["name"],
                                                            users=("two-0",)),
             _running("two-0", "1", "two", on=z[0]["metadata"]["name"])]
    path = tmp_path / "snap.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}), encoding="utf-8")
    config = load_config(POOLS)
    snap, _ = load_snapshot(path, config)
    result = plan(snap, State(unneeded_since={X: snap.now - 3600, z[0]["metadata"]["name"]: snap.now - 3600}),
                  planning_context(config))[0]
    assert len(result.scale_downs) == 1


# Consolidation (a node whose pods fit no other node, emptied onto new nodes of a cheaper pool): a pod's
# claims allocated on the node are allocated anew where it lands, and the allocator must prove they fit
# the cheaper pool's node (an L4 of l4-dra, 1 GPU of 22.5 GiB, against a p4d's 8 A100s).
def _from_template(name: str, claim: str, count: int, *selectors: str) -> list[dict[str, Any]]:
    """A running pod whose claim was made from its template (`status.resourceClaimStatuses` names it)."""
    out = _running(name, "1", on=X)
    out["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": f"gpu-{name}"}]
    out["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    out["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": claim}]
    made = _claim(claim, [f"gpu-{i}" for i in range(count)], pool=X, users=(name,))
    if selectors:
        made["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [cel(s) for s in selectors]
    return [template(f"gpu-{name}", [{"name": "gpu", "exactly": exactly("gpu.nvidia.com", count, *selectors)}]),
            made, out]


def test_an_underused_dra_node_is_consolidated_where_its_claim_fits(tmp_path: Path) -> None:
    items = [*_a100_node(X), *classes(), *_from_template("train-0", "train-0-gpu-x7k2p", 1)]
    result = _drain_plan(tmp_path, items, X)
    assert [(s.node, s.evict) for s in result.scale_downs] == [(X, ("ml/train-0",))]
    assert "consolidation: its pods fit l4-dra" in result.scale_downs[0].reason


def test_a_dra_node_stays_when_its_claim_fits_no_cheaper_pool(tmp_path: Path) -> None:
    # 40 GiB of GPU memory: no L4 has it, and no pool cheaper than the p4d has an A100
    items = [*_a100_node(X), *classes(), *_from_template("train-0", "train-0-gpu-x7k2p", 1, MEM.format("40Gi"))]
    assert _drain_plan(tmp_path, items, X).scale_downs == []


def test_a_shared_claim_moves_to_a_cheaper_node_with_all_its_pods_or_not_at_all(tmp_path: Path) -> None:
    def items(gpus: int) -> list[dict[str, Any]]:
        shared = _claim("shared", [f"gpu-{i}" for i in range(gpus)], pool=X, users=("a-0", "b-0"))
        return [*_a100_node(X), *classes(), shared, _running("a-0", "1", "shared", on=X),
                _running("b-0", "1", "shared", on=X)]

    moved = _drain_plan(tmp_path, items(1), X).scale_downs
    assert [(s.node, s.evict) for s in moved] == [(X, ("ml/a-0", "ml/b-0"))]
    # 2 GPUs: one claim, allocated on one node; an L4 has 1 (the two pods are not split over two L4s)
    assert _drain_plan(tmp_path, items(2), X).scale_downs == []
