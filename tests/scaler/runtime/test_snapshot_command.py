"""`python -m scaler snapshot` then `plan`: what a user runs against the cluster they have (an API server
stand-in, tests/fakes/kubeapi.py, until the real control plane fixture takes over)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from scaler.cli import main
from scaler.core.model.buffers import SCALABLE_KINDS
from scaler.kube import snapshot
from scaler.sim import plan_command
from tests.fakes.kubeapi import DRA, FakeKube, node, pod

ROOT = Path(__file__).resolve().parents[3]
POOLS = ROOT / "examples" / "pools-aws.yaml"


@pytest.fixture
def kube() -> Iterator[FakeKube]:
    fake = FakeKube().start()
    yield fake
    fake.stop()


def test_snapshot_lists_every_kind_plan_reads() -> None:
    listed = set(snapshot.listers(client.ApiClient())) | set(SCALABLE_KINDS)  # workloads: read where buffers name them
    assert listed == set(plan_command.KINDS)


def test_snapshot_holds_a_buffer_and_the_deployment_it_names(kube: FakeKube, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    kube.put("deployments", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "serve", "namespace": "ml"},
        "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "serve"}}, "template": {
            "metadata": {"labels": {"app": "serve"}},
            "spec": {"containers": [{"name": "s", "image": "s:1", "resources": {"requests": {"cpu": "1"}}}]}}}})
    kube.put("deployments", {"apiVersion": "apps/v1", "kind": "Deployment",
                             "metadata": {"name": "unrelated", "namespace": "ml"}, "spec": {"replicas": 1}})
    kube.put("capacitybuffers", {"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
                                 "metadata": {"name": "headroom", "namespace": "ml"},
                                 "spec": {"scalableRef": {"apiGroup": "apps", "kind": "Deployment", "name": "serve"},
                                          "percentage": 50}})
    out = tmp_path / "cluster.json"
    assert main(["snapshot", "--kubeconfig", str(kube.kubeconfig(tmp_path / "kubeconfig")), "--output", str(out)]) == 0
    items = json.loads(out.read_text())["items"]
    assert [(i["kind"], i["metadata"]["name"]) for i in items if i["kind"] in ("CapacityBuffer", "Deployment")] == \
        [("CapacityBuffer", "headroom"), ("Deployment", "serve")]  # the workload the buffer names, no other
    assert main(["explain", "--snapshot", str(out), "--pools", str(POOLS)]) == 0
    assert "ml/headroom: 2 placeholder pod(s)" in capsys.readouterr().out


def test_snapshot_then_explain_plans_the_clusters_pending_pods(kube: FakeKube, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(snapshot, "PAGE", 2)  # the API server's pages: every one read
    kube.absent = set(DRA)  # a cluster before Kubernetes 1.34
    kube.put("nodes", node("gpu-a-1", pool="gpu1-spot-a", provider_id="aws:///us-east-1a/i-0a", gpus=1,
                           labels={"topology.kubernetes.io/zone": "us-east-1a"}))
    kube.put("nodes", node("hand-made-1", provider_id="aws:///us-east-1a/i-0b"))
    for i in range(3):
        kube.put("pods", pod(f"train-{i}", namespace="ml", gpus=1, pending=True))
    kube.put("persistentvolumes", {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-1"},
                                   "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}})
    out = tmp_path / "out" / "cluster.json"  # its folder made
    kubeconfig = str(kube.kubeconfig(tmp_path / "kubeconfig"))
    assert main(["snapshot", "--kubeconfig", kubeconfig, "--output", str(out)]) == 0
    err = capsys.readouterr().err
    assert "note: DeviceClass: not served by this API server" in err
    assert "snapshot: 2 Node, 3 Pod, 1 PersistentVolume" in err
    items = json.loads(out.read_text())["items"]
    assert all(i["kind"] and i["apiVersion"] for i in items)
    assert sorted(i["metadata"]["name"] for i in items if i["kind"] == "Pod") == ["train-0", "train-1", "train-2"]

    assert main(["explain", "--snapshot", str(out), "--pools", str(POOLS)]) == 0
    text = capsys.readouterr().out
    # One pod on the pool's free node; the pool (its one labelled node) grows by two for the others.
    assert "scale up gpu1-spot-a in us-east-1a by 2 (desired -> 3)" in text
    assert "1 node(s) without a gpuburst.io/pool label belong to no pool: hand-made-1" in text

    assert main(["explain", "--snapshot", str(out), "--pools", str(ROOT / "examples" / "pools-azure.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "providerID 'aws:///us-east-1a/i-0a' is an aws node" in err
    assert "the pools file's cloud is azure" in err
