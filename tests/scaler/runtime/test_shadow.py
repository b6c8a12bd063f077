"""Shadow mode beside another autoscaler: `run --shadow` records, `shadow-report` compares.

The loop runs as `run --shadow` runs it (the real cache on an API server stand-in, the sim cloud), and the test
plays the cluster's own autoscaler: slow to add a node (5 minutes after the pod is pending) and slower to give it
back (30 minutes idle), the kubelet (a Node per ready instance) and the scheduler (binding the pod).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scaler.cli import main
from scaler.core.config.settings import parse_config
from scaler.core.model import keys
from scaler.kube.actions import KubeActions
from scaler.kube.cache import ClusterCache
from scaler.kube.client import api_client
from scaler.loop import Runtime
from scaler.metrics import Metrics
from scaler.providers.sim import SimProvider
from scaler.shadow import ShadowRecorder, read
from tests.fakes.kubeapi import FakeKube, pod, pool_node

CONFIG = parse_config({
    "cluster": "burst", "cloud": "aws", "region": "us-east-1",
    "timings": {"scan_interval": 10, "unneeded_time": 60, "gpu_boot": 120, "provision_timeout": 600},
    "pools": [{"name": "gpu8-od", "instance_types": ["g6.48xlarge"], "zones": ["us-east-1a"], "max": 6}],
}, "test")
POOL = "gpu8-od"


@pytest.fixture
def kube() -> Iterator[FakeKube]:
    fake = FakeKube().start()
    yield fake
    fake.stop()


class Cluster:
    """The cloud, the kubelet, the scheduler and the cluster's own autoscaler, with gpuburst in shadow mode."""

    def __init__(self, kube: FakeKube, tmp: Path) -> None:
        self.kube, self.t = kube, float(int(time.time()))
        self.provider = SimProvider(CONFIG)
        api = api_client(str(kube.kubeconfig(tmp / "kubeconfig")))
        self.cache = ClusterCache(api, watch_timeout=5, backoff_initial=0.05, backoff_max=0.2)
        self.cache.start()
        assert self.cache.wait_synced(5)
        self.metrics = Metrics()
        self.record = tmp / "shadow.jsonl"
        self.shadow = ShadowRecorder(self.record, CONFIG, self.metrics)
        actions = KubeActions(api, "gpuburst-system", nodes=self.cache.raw_node)
        self.runtime = Runtime(CONFIG, self.provider, self.cache, actions, metrics=self.metrics, dry_run=True,
                               recorder=self.shadow, clock=lambda: self.t)

    def kubelet(self) -> None:
        self.provider.advance(self.t)
        ready = {i.provider_id: i for i in self.provider.alive() if i.ready_at <= self.t}
        nodes = {n["spec"]["providerID"]: n for n in self.kube.objects("nodes")}
        pool = CONFIG.pool(POOL)
        for pid in ready.keys() - nodes.keys():
            self.kube.put("nodes", pool_node(pool, "us-east-1a", f"node-{pid.rsplit('/', 1)[-1]}", pid))
        for pid in nodes.keys() - {i.provider_id for i in self.provider.alive()}:
            self.kube.delete("nodes", f"/{nodes[pid]['metadata']['name']}")

    def step(self, seconds: float) -> None:
        self.t += seconds
        self.kubelet()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if self.cache.fresh and {o["metadata"]["name"] for o in self.cache.nodes.items()} == \
                    {o["metadata"]["name"] for o in self.kube.objects("nodes")}:
                break
            time.sleep(0.02)
        self.runtime.run_once()


@pytest.fixture
def cluster(kube: FakeKube, tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(kube, tmp_path)
    yield c
    c.shadow.close()
    c.cache.stop()


def test_shadow_record_and_report_show_both_sides(kube: FakeKube, cluster: Cluster,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    c = cluster
    start = c.t
    tolerate = [{"key": keys.TAINT_GPU, "operator": "Exists", "effect": "NoSchedule"}]
    kube.put("pods", pod("train-0", namespace="ml", gpus=8, cpu="4", pending=True, tolerations=tolerate))
    while c.t < start + 3300:
        c.step(30)
        since = c.t - start
        if since >= 300 and not c.provider.alive():
            c.provider.set_desired(POOL, 1)  # the other autoscaler, five minutes late
        nodes = kube.objects("nodes")
        running = kube.get("pods", "ml/train-0")
        if nodes and running is not None and not running["spec"].get("nodeName"):  # the scheduler binds it
            kube.put("pods", pod("train-0", namespace="ml", gpus=8, cpu="4", tolerations=tolerate,
                                 node_name=nodes[0]["metadata"]["name"]))
        if since >= 1200 and running is not None:
            kube.delete("pods", "ml/train-0")  # the job ends
        if since >= 3000:
            for inst in c.provider.alive():  # the other autoscaler gives the idle node back, 30 minutes on
                c.provider.delete_node(POOL, inst.provider_id)

    s = read(c.record).summary()
    lines = c.record.read_text().splitlines()
    assert sum('"nodes"' in line for line in lines) < s["passes"] / 5  # written when they change, not each pass
    # gpuburst asked for the node at once: the pod would have run one boot after it went pending, not ~7 minutes.
    assert s["pods_started_sooner"] == 1 and 200 <= s["sooner_max_s"] <= 420
    # ... and given the node back a minute after the job, not 30.
    assert s["nodes_removed_sooner"] == 1 and 0.4 <= s["node_hours_saved_by_removals"] <= 0.5
    assert 0.6 <= s["cluster"]["node_hours"] <= 0.8
    assert s["gpuburst"]["node_hours"] < s["cluster"]["node_hours"] - 0.2
    assert 0 < s["gpuburst"]["cost"] < s["cluster"]["cost"]
    # The metrics say the same as the report.
    assert c.metrics.shadow_cost.labels("cluster")._value.get() == s["cluster"]["cost"]
    assert c.metrics.shadow_node_hours.labels("gpuburst")._value.get() == s["gpuburst"]["node_hours"]
    assert c.metrics.shadow_sooner._value.get() == 1 and c.metrics.shadow_removed._value.get() == 1

    assert main(["shadow-report", "--record", str(c.record)]) == 0
    out = capsys.readouterr().out
    assert f"cost: cluster ${s['cluster']['cost']:,.2f}, gpuburst ${s['gpuburst']['cost']:,.2f}" in out
    assert "pods gpuburst would have started sooner: 1" in out
    assert "nodes gpuburst would have removed sooner: 1" in out


def test_shadow_report_names_a_line_that_is_not_a_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "shadow.jsonl"
    bad.write_text('{"kind": "start", "pools": {}}\n{"kind": "pass"}\n')
    assert main(["shadow-report", "--record", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{bad}:2: not a shadow record line" in err


def test_run_refuses_a_shadow_record_it_cannot_write_before_contacting_anything(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    (tmp_path / "taken").write_text("a file, not a folder")
    record = tmp_path / "taken" / "shadow.jsonl"
    config = Path(__file__).resolve().parents[3] / "examples" / "scaler-aws.yaml"
    assert main(["run", "--shadow", str(record), "--once", "--config", str(config), "--metrics-port", "0",
                 "--kubeconfig", str(tmp_path / "no-kubeconfig")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: run: --shadow {record}: ")
