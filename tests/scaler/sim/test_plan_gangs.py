"""`python -m scaler plan --snapshot` on gangs declared by their own objects (issue 39): the snapshot is
examples/snapshot-aws-gangs.json (built by gang_snapshot.py), the pools examples/pools-aws-gangs.yaml."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from gang_snapshot import snapshot

from scaler.cli import main

ROOT = Path(__file__).resolve().parents[3]
SNAPSHOT = ROOT / "examples" / "snapshot-aws-gangs.json"
POOLS = ROOT / "examples" / "pools-aws-gangs.yaml"


def test_the_example_snapshot_is_the_generated_one() -> None:
    assert json.loads(SNAPSHOT.read_text()) == snapshot()


def test_plan_buys_for_the_gangs_that_fit_and_nothing_for_the_others(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--snapshot", str(SNAPSHOT), "--pools", str(POOLS), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    ups = {(u["pool"], u["count"]): sorted(u["pods"]) for u in out["scale_ups"]}
    # the Workload PodGroup of 2 gets two 8-GPU nodes; the one of minCount 3 (the pool's max is 2) nothing
    assert ups == {("gpu8", 2): ["ml/pair-0", "ml/pair-1"],
                   ("gpu1", 3): ["ml/cosched-0", "ml/cosched-1", "ml/cosched-2"]}
    verdicts = out["pods"]
    assert {verdicts[f"ml/big-{i}"]["outcome"] for i in range(3)} == {"waiting"}
    assert "does not exist" in verdicts["ml/ghost-0"]["reasons"]["*"]
    # minMember 3 of four: the fourth is a single pod, waiting for the pool's max
    assert verdicts["ml/cosched-3"]["outcome"] == "waiting"
    assert verdicts["ml/cosched-3"]["reasons"]["gpu1"] == "pool at max (3)"
    assert {verdicts[f"ml/vc-{i}"]["outcome"] for i in range(2)} == {"waiting"}
    told = [n for n in out["notes"] if "nothing bought" in n]
    assert len(told) == 2 and any("ml/big" in n for n in told) and any("ml/vc" in n for n in told)


# --- PodGroups the API server refuses: one line naming the file, the object and the field, exit 2 ----------
def _groups(data: dict[str, Any], name: str) -> dict[str, Any]:
    [g] = [o for o in data["items"] if o["kind"] == "PodGroup" and o["metadata"]["name"] == name]
    return g  # type: ignore[no-any-return]


@pytest.mark.parametrize(("name", "spec", "field"), [
    ("big", {"schedulingPolicy": {"gang": {"minCount": 0}}}, "PodGroup ml/big: spec.schedulingPolicy.gang.minCount"),
    ("big", {"schedulingPolicy": {"gang": {}}}, "PodGroup ml/big: spec.schedulingPolicy.gang.minCount: required"),
    ("big", {"schedulingPolicy": {"basic": {}, "gang": {"minCount": 2}}},
     "PodGroup ml/big: spec.schedulingPolicy: exactly one of basic and gang"),
    ("big", {"schedulingPolicy": {"gang": {"minCount": "3"}}}, "spec.schedulingPolicy.gang.minCount: expected an int"),
    ("cosched", {"minMember": 0}, "PodGroup ml/cosched: spec.minMember: 0 is below 1"),
    ("vc", {"minMember": -1}, "PodGroup ml/vc: spec.minMember: -1 is below 0"),
])
def test_a_pod_group_the_api_refuses_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           name: str, spec: dict[str, Any], field: str) -> None:
    data = snapshot()
    _groups(data, name)["spec"] = spec
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    assert main(["plan", "--snapshot", str(path), "--pools", str(POOLS)]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and field in err[0] and str(path) in err[0], err
    assert captured.out == ""  # nothing planned, nothing half-applied


def test_a_minimum_above_the_members_is_not_refused_the_gang_waits_for_them(tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """No API refuses it (the pods come later): the gang waits, says how many exist, and buys nothing."""
    data = snapshot()
    _groups(data, "pair")["spec"] = {"schedulingPolicy": {"gang": {"minCount": 5}}}
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    assert main(["plan", "--snapshot", str(path), "--pools", str(POOLS), "--json"]) == 0
    pods = json.loads(capsys.readouterr().out)["pods"]
    assert pods["ml/pair-0"]["outcome"] == "waiting"
    assert "2 of 5 members exist" in pods["ml/pair-0"]["reasons"]["*"]


def test_a_workload_gang_the_scheduler_found_no_room_for_is_pending(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """kube-scheduler 1.37.2 marks such a gang's pods SchedulerError (its DRA PodGroupPostFilter errors), not
    Unschedulable, as the real control plane shows (tests/controlplane/test_gangs.py); another SchedulerError
    is not a pending pod."""
    data = snapshot()
    for o in data["items"]:
        if o["kind"] == "Pod" and o["metadata"]["name"].startswith(("pair-", "cosched-")):
            o["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "SchedulerError",
                                          "message": 'error in "DynamicResources" PodGroupPostFilter plugins: '
                                                     "not found"}]
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    assert main(["plan", "--snapshot", str(path), "--pools", str(POOLS), "--json"]) == 0
    pods = json.loads(capsys.readouterr().out)["pods"]
    assert pods["ml/pair-0"]["outcome"] == "scale-up"
    assert "ml/cosched-0" not in pods  # no schedulingGroup: not the gang cycle's error
