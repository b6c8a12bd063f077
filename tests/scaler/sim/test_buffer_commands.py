"""CapacityBuffers in `explain` (a kubectl List with buffers and their PodTemplates) and `simulate --buffer`."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from sim_helpers import ROOT, write_trace

from scaler.cli import main
from scaler.configfile import load_config
from scaler.core.model import keys
from scaler.core.planning.decide import decide
from scaler.core.planning.state import State
from scaler.sim.plan_command import load_snapshot

SNAPSHOT = ROOT / "examples" / "snapshot-aws.json"
POOLS = ROOT / "examples" / "pools-aws.yaml"


def with_buffers(tmp_path: Path, *buffers: dict[str, Any]) -> Path:
    data = json.loads(SNAPSHOT.read_text())
    data["items"].append({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "l4", "namespace": "ml"},
                          "template": {"spec": {"tolerations": [{"key": keys.TAINT_GPU, "operator": "Exists"}],
                                                "containers": [{"name": "c", "resources": {"requests": {
                                                    "cpu": "3", "memory": "12Gi", keys.RES_GPU: "1"}}}]}}})
    data["items"] += [{"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
                       "metadata": {"name": name, "namespace": "ml"}, "spec": spec} for name, spec in
                      (next(iter(b.items())) for b in buffers)]
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps(data))
    return path


def test_explain_shows_each_buffers_placeholders_and_where_they_sit(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    snap = with_buffers(tmp_path, {"ready": {"podTemplateRef": {"name": "l4"}, "replicas": 2}},
                        {"typo": {"podTemplateRef": {"name": "l4x"}, "replicas": 1}})
    assert main(["explain", "--snapshot", str(snap), "--pools", str(POOLS)]) == 0
    out = capsys.readouterr().out
    section = out[out.index("capacity buffers:"):]
    assert "  ml/ready: 2 placeholder pod(s)" in section
    assert re.search(r"capacity-buffer-ready-1: (node ip-10-0-1-40\.ec2\.internal|a new gpu1-\S+ node)", section)
    assert "  ml/typo: not served: PodTemplate l4x not found in namespace ml" in section
    assert "capacity-buffer" not in out[out.index("pending pods:"):]  # no pods of the cluster
    assert "for ml/eval-resnet-0, ml/capacity-buffer-ready-1, ml/capacity-buffer-ready-2" in out  # after the real pod


def test_a_malformed_buffer_in_a_snapshot_is_one_line_and_exit_2(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    snap = with_buffers(tmp_path, {"bad": {"podTemplateRef": {"name": "l4"}, "replicas": "two"}})
    assert main(["explain", "--snapshot", str(snap), "--pools", str(POOLS)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: {snap}: capacitybuffer ml/bad: spec.replicas: expected an integer, got 'two'"


def test_simulate_buffer_gives_a_fitting_job_room_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = write_trace(tmp_path / "t.csv", ["j1,0,1,60,1", "j2,3600,1,600,1", "j3,3700,8,600,1"])
    report = tmp_path / "r.json"
    assert main(["simulate", "--trace", str(trace), "--pools", str(POOLS), "--buffer", "1", "--quiet",
                 "--report", str(report)]) == 0
    section = json.loads(report.read_text())["buffer"]
    # j1 came with the buffer's first node and waited its boot; j2 found the room ready; j3 (8 GPUs) fits not.
    assert (section["jobs_that_fit"], section["pending_p50_s"], section["pending_max_s"]) == (2, 0.0, 240.0)
    assert "buffer" in capsys.readouterr().out
    without = tmp_path / "w.json"
    assert main(["simulate", "--trace", str(trace), "--pools", str(POOLS), "--quiet", "--report", str(without)]) == 0
    assert json.loads(without.read_text())["buffer"] is None


def test_simulate_buffer_refuses_a_negative_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = write_trace(tmp_path / "t.csv", ["j1,0,1,60,1"])
    assert main(["simulate", "--trace", str(trace), "--pools", str(POOLS), "--buffer", "-2"]) == 2
    assert capsys.readouterr().err.strip() == "error: --buffer -2: a number of GPUs, at least 0"


def test_plan_json_names_the_placeholders_and_the_status_configmap_only_counts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snap = with_buffers(tmp_path, {"ready": {"podTemplateRef": {"name": "l4"}, "replicas": 2}})
    assert main(["plan", "--snapshot", str(snap), "--pools", str(POOLS), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert sorted(data["buffers"]["ml/ready"]["placeholders"]) == ["capacity-buffer-ready-1", "capacity-buffer-ready-2"]
    assert not any("capacity-buffer" in k for k in data["pods"])

    config = load_config(POOLS)
    result, _ = decide(load_snapshot(snap, config)[0], State(), config)
    assert result.to_dict(pods=False)["buffers"] == {"ml/ready": {"replicas": 2, "error": ""}}
