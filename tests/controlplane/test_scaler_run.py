"""`python -m scaler run` as processes, on the real control plane: two replicas share the Lease (one acts),
the leader is SIGKILLed in the middle of a scale-up (no SIGTERM, no Lease handed over), and the standby takes
over once the Lease runs out, buying nothing twice."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from scaler.core.config.settings import parse_config
from scaler.permissions import LEASE_NAME
from tests.controlplane.fixtures import SCALER_NAMESPACE, Cluster
from tests.controlplane.plane import ROOT
from tests.controlplane.world import MotoCloud, RealWorld, create_all, gpu_pod
from tests.fakes.aws import MotoAws

pytestmark = pytest.mark.integration

CONFIG = {"cluster": "burst", "cloud": "aws", "region": "us-east-1",
          "timings": {"scan_interval": 10, "unneeded_time": 600, "provision_timeout": 600},
          "pools": [{"name": "gpu-a", "instance_types": ["g6.xlarge"], "zones": ["us-east-1a"], "max": 30}]}


def replica(identity: str, config: Path, kubeconfig: Path, aws: MotoAws, log: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "KUBERNETES_"))}
    env.update(AWS_ENDPOINT_URL=aws.endpoint, AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
               AWS_DEFAULT_REGION="us-east-1")
    return subprocess.Popen(
        [sys.executable, "-m", "scaler", "run", "--config", str(config), "--kubeconfig", str(kubeconfig),
         "--identity", identity, "--interval", "2", "--metrics-port", "0", "--log-format", "text"],
        cwd=ROOT, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)


@pytest.fixture
def world(aws: MotoAws, cluster: Cluster) -> Iterator[RealWorld]:
    config = parse_config(CONFIG, "test")
    w = RealWorld(MotoCloud(aws, config), cluster, config)
    stop = threading.Event()

    def kubelets() -> None:  # every instance's node registers a few seconds after it is asked for
        while not stop.wait(3):
            w.register()

    t = threading.Thread(target=kubelets, daemon=True)
    t.start()
    try:
        yield w
    finally:
        stop.set()
        t.join(10)
        w.close()


def holder(cluster: Cluster) -> str | None:
    try:
        lease = client.CoordinationV1Api(cluster.admin).read_namespaced_lease(LEASE_NAME, SCALER_NAMESPACE)
    except client.ApiException:
        return None
    return str(lease.spec.holder_identity) if lease.spec.holder_identity else None


def _scale_ups(folder: Path) -> str:
    """The replicas' passes that bought something, from their logs (what a failure needs to be read)."""
    return "\n".join(f"{log.stem}: {line}" for log in sorted(folder.glob("replica-*.log"))
                     for line in log.read_text(errors="replace").splitlines() if "scale-ups ['" in line)


def test_two_replicas_one_acts_and_a_sigkill_mid_scale_up_doubles_nothing(
        world: RealWorld, cluster: Cluster, aws: MotoAws, tmp_path: Path) -> None:
    config = tmp_path / "scaler.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    procs = {name: replica(name, config, cluster.scaler_kubeconfig, aws, tmp_path / f"{name}.log")
             for name in ("replica-a", "replica-b")}
    try:
        cluster.wait(lambda: holder(cluster) in procs, "a replica takes the Lease", timeout=60)
        leader = holder(cluster)
        assert leader is not None
        create_all(cluster.admin, [gpu_pod(f"train-{i}", 1) for i in range(14)])
        cluster.wait(lambda: world.desired("gpu-a") == 14, "the leader asks for 14 nodes", timeout=60)
        standby = next(n for n in procs if n != leader)
        passes = (tmp_path / f"{standby}.log").read_text()
        assert "not the leader: observing only" in passes and "scale-ups ['gpu-a" not in passes  # it only watched
        procs[leader].send_signal(signal.SIGKILL)  # mid scale-up: nodes still booting, the Lease not released
        procs[leader].wait(10)
        cluster.wait(lambda: holder(cluster) == standby, "the standby takes the Lease over", timeout=60)
        create_all(cluster.admin, [gpu_pod(f"late-{i}", 1) for i in range(2)])
        cluster.wait(lambda: not world.pending(), "every pod bound", timeout=90)
        time.sleep(5)  # a few more passes of the new leader: nothing more is bought
        line = f"{world.report(16)}\n{_scale_ups(tmp_path)}"
        assert world.desired("gpu-a") == 16 and len(world.bought) == 16 and world.unused_nodes() == [], line
        # A pass every 2 s. (A pod the killed leader asked for may have no Event: the kill can land between its
        # cloud request and its Events.)
        assert max(world.delays.values()) < 15, line
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(15)
                except subprocess.TimeoutExpired:
                    p.kill()
