"""The control plane itself, as `make kube-up` gives it and as every test here uses it: a 1.37 server
serving resource.k8s.io/v1, the scaler confined to its chart's RBAC, a DRA node whose slices the real
API server accepts and whose GPU the real scheduler allocates."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from scaler.core.config.settings import parse_config
from scaler.kube.cache import ClusterCache
from scaler.kube.client import api_client
from tests.controlplane.agent import NodeSpec
from tests.controlplane.fixtures import Cluster
from tests.controlplane.plane import ROOT, VERSION, _alive
from tests.controlplane.world import create_all

pytestmark = pytest.mark.integration


def test_kube_up_prints_the_export_line_last_and_kube_down_leaves_nothing(tmp_path: Path) -> None:
    run = tmp_path / "plane"
    up = subprocess.run([sys.executable, "-m", "tests.controlplane.plane", "up", "--dir", str(run)], cwd=ROOT,
                        capture_output=True, text=True, timeout=300, check=False)
    try:
        assert up.returncode == 0, up.stderr + up.stdout
        lines = up.stdout.strip().splitlines()
        assert lines[-1] == f"export KUBECONFIG={run / 'admin.kubeconfig'}"
        assert f"kube-apiserver {VERSION}" in lines[0] and "resource.k8s.io: v1" in lines[0]
        pids = [int(p.read_text()) for p in run.glob("*.pid")]
        assert len(pids) == 4 and all(_alive(pid) for pid in pids)
        api = client.CoreV1Api(api_client(str(run / "admin.kubeconfig")))
        assert api.read_namespace("default").metadata.name == "default"
        key = (run / "pki" / "admin.key").stat().st_mode & 0o777
        assert key == 0o600
    finally:
        down = subprocess.run([sys.executable, "-m", "tests.controlplane.plane", "down", "--dir", str(run)],
                              cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert down.returncode == 0, down.stderr
    assert not list(run.glob("*.pid"))
    assert not any(_alive(pid) for pid in pids)
    assert "etcd" in down.stdout and "kube-apiserver" in down.stdout


def test_the_scaler_reads_what_it_needs_and_nothing_more(cluster: Cluster) -> None:
    api = api_client(str(cluster.scaler_kubeconfig))
    cache = ClusterCache(api, watch_timeout=5, backoff_initial=0.05, backoff_max=0.2)
    cache.start()
    try:
        assert cache.wait_synced(15) and cache.stale() == []  # every watch it opens is allowed
        assert all(inf.errors == 0 for inf in cache.informers)
    finally:
        cache.stop()
    with pytest.raises(ApiException) as refused:  # the chart grants no pod deletion: evictions only
        client.CoreV1Api(api).delete_collection_namespaced_pod("default")
    assert refused.value.status == 403
    with pytest.raises(ApiException) as secrets:
        client.CoreV1Api(api).list_secret_for_all_namespaces()
    assert secrets.value.status == 403


DRA_POOLS = parse_config({"cluster": "c", "cloud": "aws", "region": "us-east-1", "pools": [
    {"name": "a100-mig", "instance_types": ["p4d.24xlarge"], "zones": ["us-east-1a"], "max": 2,
     "gpu_allocation": "dra", "gpu_sharing": {"mig": {"strategy": "mixed", "layout": {"3g.20gb": 1, "1g.5gb": 4}}}},
]}, "test")


def test_a_dra_node_publishes_slices_the_server_accepts_and_the_scheduler_allocates(cluster: Cluster) -> None:
    pool = DRA_POOLS.pool("a100-mig")
    tmpl = pool.template_node("us-east-1a", "us-east-1")
    taints = [(t.key, t.value, t.effect) for t in pool.node_taints()]
    cluster.agent.register(NodeSpec("mig-0", tmpl.labels, taints, tmpl.allocatable, pool.capacity(),
                                    "aws:///us-east-1a/i-0", pool.dra_slices("mig-0")))
    slices = cluster.custom.list_cluster_custom_object("resource.k8s.io", "v1", "resourceslices")["items"]
    assert {s["spec"]["pool"]["resourceSliceCount"] for s in slices} == {2}
    create_all(cluster.admin, [
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "mig.nvidia.com"},
         "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com' && "
                                         "device.attributes['gpu.nvidia.com'].type == 'mig'"}}]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
         "metadata": {"name": "one-mig", "namespace": "default"},
         "spec": {"spec": {"devices": {"requests": [{"name": "mig", "exactly": {
             "deviceClassName": "mig.nvidia.com",
             "selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].profile == '1g.5gb'"}}]}}]}}}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "infer-0", "namespace": "default"},
         "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                  "resources": {"claims": [{"name": "mig"}]}}],
                  "resourceClaims": [{"name": "mig", "resourceClaimTemplateName": "one-mig"}],
                  "tolerations": [{"operator": "Exists"}]}},
    ])
    cluster.wait(lambda: cluster.core.read_namespaced_pod("infer-0", "default").spec.node_name == "mig-0",
                 "the scheduler binds the pod to the MIG node")
    claims = cluster.custom.list_namespaced_custom_object("resource.k8s.io", "v1", "default", "resourceclaims")
    [claim] = claims["items"]  # made from the template by the controller-manager
    [result] = claim["status"]["allocation"]["devices"]["results"]
    assert result["driver"] == "gpu.nvidia.com" and "-mig-" in result["device"]
    assert json.dumps(claim["status"]["reservedFor"]).count("infer-0") == 1


def test_the_api_server_refuses_a_slice_with_counters_and_devices(cluster: Cluster) -> None:
    """What the model published before 1.35's rule: the real server says no, which no fake did."""
    body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "both"},
            "spec": {"driver": "gpu.nvidia.com", "nodeName": "n", "pool": {"name": "n", "resourceSliceCount": 1},
                     "sharedCounters": [{"name": "cs", "counters": {"memorySlice0": {"value": "1"}}}],
                     "devices": [{"name": "gpu-0"}]}}
    with pytest.raises(ApiException) as refused:
        cluster.custom.create_cluster_custom_object("resource.k8s.io", "v1", "resourceslices", body)
    assert refused.value.status == 422 and "only one of `sharedCounters` or `devices`" in refused.value.body
