"""Integration tests: AWS through boto3 against moto's server on 127.0.0.1, Kubernetes through the
official client against tests/fakes/kubeapi.py.

The real control plane (tests/controlplane) is where the Kubernetes side is checked: ProvisioningRequests
against the CRD cluster-autoscaler installs, DRA slices and claims allocated by the real scheduler, policy/v1
Evictions a PodDisruptionBudget refuses, Events, the Lease between two replicas, the chart's RBAC. The fake
stays here for what a test injects that the real server cannot be made to do on cue:
- an API server that answers 503 to everything, or to one list (`down`, `broken`): outages and failing watches;
- a watch's resourceVersion compacted now (410 Gone) rather than on etcd's five-minute compaction timer;
- objects the real server refuses at admission (malformed Pods, Nodes, PDBs, ProvisioningRequests,
  CapacityBuffers, DRA objects a CRD or validation would reject), to show one bad object is skipped and the pass
  goes on;
- list pages of a forced size, a PDB whose cached view lags the server (`quiet=True`), an evicted pod that
  comes back (`recreate_evicted`);
and for the loop scenarios (test_loop*.py), whose World drives a clock of the test's own (tests/fakes/world.py):
they jump minutes and hours (provision deadlines, repair graces, notice deadlines, five minutes of API outage)
in one step, and the fake API server stamps its objects with that clock, where the real one stamps wall time.
What they check that needs only a real server (scale-up bound by the scheduler, idle nodes drained through
policy/v1 Evictions a PDB limits, a restart mid scale-up, the Lease, Events, DRA claims, CapacityBuffers,
ProvisioningRequests) runs against the real control plane in tests/controlplane/test_end_to_end.py,
test_scaler_run.py, test_capacity_buffers.py and test_provisioning_requests.py."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.fakes.aws import MotoAws  # noqa: E402
from tests.fakes.kubeapi import FakeKube  # noqa: E402


@pytest.fixture(scope="session")
def moto_server() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def aws(moto_server: str, monkeypatch: pytest.MonkeyPatch) -> MotoAws:
    """moto's server, emptied, and a fresh boto3 session (fault hooks never leak between tests)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    cloud = MotoAws(moto_server)
    cloud.reset()
    return cloud


@pytest.fixture
def kube() -> Iterator[FakeKube]:
    fake = FakeKube().start()
    yield fake
    fake.stop()
