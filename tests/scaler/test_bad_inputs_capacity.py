"""Bad prepaid pools and ladders: exit 2 and one line naming the pool and the field (issue 25)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from scaler.cli import main

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = ROOT / "examples" / "snapshot-aws.json"
AZURE_GROUP = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/capacityReservationGroups/g"

BASE: dict[str, Any] = {
    "cluster": "c", "cloud": "aws", "region": "us-east-1",
    "pools": [
        {"name": "gpu8-block", "capacity_type": "capacity-block", "instance_types": ["p5.48xlarge"],
         "zones": ["us-east-1a"], "max": 4, "min_pod_gpus": 8, "fallback": "gpu8-od",
         "reservation": {"id": "cr-0123", "start": "2025-07-01T11:30:00Z", "end": "2025-07-06T11:30:00Z"}},
        {"name": "gpu8-od", "instance_types": ["p5.48xlarge"], "zones": ["us-east-1a"], "max": 2, "min_pod_gpus": 8},
        {"name": "gpu1-res", "capacity_type": "reserved", "instance_types": ["g6.xlarge"], "zones": ["us-east-1a"],
         "max": 2, "fallback": "gpu1-od", "reservation": {"id": "cr-0456"}},
        {"name": "gpu1-od", "instance_types": ["g6.xlarge"], "zones": ["us-east-1a"], "max": 4},
        {"name": "cpu-od", "role": "general", "instance_types": ["m6i.large"], "zones": ["us-east-1a"], "max": 4},
    ],
}

Edit = Callable[[dict[str, Any]], None]


def pool(which: str, /, **fields: Any) -> Edit:
    def edit(cfg: dict[str, Any]) -> None:
        [p] = [p for p in cfg["pools"] if p["name"] == which]
        p.update(fields)
    return edit


def block(**fields: Any) -> Edit:
    return lambda cfg: cfg["pools"][0]["reservation"].update(fields)


CASES: list[tuple[str, Edit, str]] = [
    ("block ends before it starts", block(end="2025-06-30T00:00:00Z"),
     "pools[gpu8-block].reservation.end: 2025-06-30T00:00:00Z is not after start (2025-07-01T11:30:00Z)"),
    ("block date not a date", block(start="next monday"), "pools[gpu8-block].reservation.start"),
    ("block without an end", lambda c: c["pools"][0]["reservation"].pop("end"),
     "pools[gpu8-block].reservation.end: is required for a Capacity Block"),
    ("block of a type no block holds", pool("gpu8-block", instance_types=["g6.48xlarge"]),
     "pools[gpu8-block].instance_types: g6.48xlarge cannot be bought as a Capacity Block"),
    ("drained after EC2 took the nodes", block(drain_lead=600), "pools[gpu8-block].reservation.drain_lead"),
    ("block without a fallback", pool("gpu8-block", fallback=None), "pools[gpu8-block].fallback: is required"),
    ("reserved without a reservation", pool("gpu1-res", reservation=None),
     "pools[gpu1-res].reservation: is required for capacity_type reserved"),
    ("reservation on an on-demand pool", pool("gpu1-od", reservation={"id": "cr-1"}), "pools[gpu1-od].reservation"),
    ("reservation id and group both", pool("gpu1-res", reservation={"id": "cr-1", "resource_group": "arn:x"}),
     "pools[gpu1-res].reservation.id: give either id"),
    ("reservation id not an EC2 one", pool("gpu1-res", reservation={"id": "res-1"}), "pools[gpu1-res].reservation.id"),
    ("one reservation, two instance types", pool("gpu1-res", instance_types=["g6.xlarge", "g6.2xlarge"]),
     "pools[gpu1-res].instance_types: a capacity reservation holds one instance type"),
    ("dates on a plain reservation", pool("gpu1-res", reservation={"id": "cr-1", "end": 5}),
     "pools[gpu1-res].reservation.end: only a capacity-block pool has dates"),
    ("ladder loops", pool("gpu8-od", fallback="gpu8-block"), "pools[gpu8-block].fallback: the fallback chain loops"),
    ("rung without GPUs", pool("gpu1-res", fallback="cpu-od"),
     "pools[gpu1-res].fallback: cpu-od has no GPU: no pod of this pool could ever fall back there"),
    ("rung too small for the pods above", pool("gpu8-block", fallback="gpu1-od"),
     "pools[gpu8-block].fallback: gpu1-od has 1 GPUs a node and gpu8-block's pods ask for at least 8"),
    ("rung that wants more than the pods above", pool("gpu1-res", fallback="gpu8-od"),
     "pools[gpu1-res].fallback: gpu8-od takes pods of at least 8 GPUs and gpu1-res's ask for at most 1"),
]


@pytest.mark.parametrize(("edit", "line"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_prepaid_pool_or_ladder(tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Edit, line: str) -> None:
    cfg = copy.deepcopy(BASE)
    edit(cfg)
    path = tmp_path / "pools.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    code = main(["plan", "--snapshot", str(SNAPSHOT), "--pools", str(path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert line in err[0] and str(path) in err[0]


def test_the_base_is_good(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "pools.yaml"
    path.write_text(yaml.safe_dump(BASE), encoding="utf-8")
    assert main(["plan", "--snapshot", str(SNAPSHOT), "--pools", str(path)]) == 0
    capsys.readouterr()


def test_an_azure_reservation_is_a_group_id(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = {"cluster": "c", "cloud": "azure", "region": "eastus", "pools": [
        {"name": "gpu-res", "capacity_type": "reserved", "vm_size": "Standard_NC24ads_A100_v4", "zones": ["1"],
         "max": 2, "reservation": {"id": "cr-0123"}}]}
    path = tmp_path / "pools.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    assert main(["plan", "--snapshot", str(SNAPSHOT), "--pools", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pools[gpu-res].reservation.id: must be the capacity reservation group's" in err[0]
    cfg["pools"][0]["reservation"] = {"id": AZURE_GROUP}  # type: ignore[index]
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    empty = tmp_path / "cluster.json"  # an Azure cluster with nothing yet (plan refuses the AWS sample's nodes)
    empty.write_text('{"apiVersion": "v1", "kind": "List", "items": []}', encoding="utf-8")
    assert main(["plan", "--snapshot", str(empty), "--pools", str(path)]) == 0
