"""Kubernetes JSON to the core's model: what `plan` and the watch cache both rely on."""

from __future__ import annotations

import pytest

from scaler.core.model import keys
from scaler.kube.convert import SnapshotError, node_from_json, pod_from_json


def test_node_age_comes_from_creation_timestamp() -> None:
    node = node_from_json({
        "metadata": {"name": "ip-10-0-1-5", "creationTimestamp": "2026-11-22T03:00:00Z",
                     "labels": {keys.LABEL_POOL: "gpu1-spot-a"}},
        "spec": {"providerID": "aws:///us-east-1a/i-0abc"},
        "status": {"allocatable": {"cpu": "3920m", "memory": "15Gi", "nvidia.com/gpu": "1"},
                   "conditions": [{"type": "Ready", "status": "False"}]},
    }, keys.LABEL_POOL)
    assert node.created_at == 1795316400.0  # 2026-11-22T03:00:00Z
    assert node.pool == "gpu1-spot-a"
    assert not node.ready
    assert node.allocatable["cpu"] == 3920


def test_missing_or_bad_timestamp_is_unknown_age() -> None:
    assert node_from_json({"metadata": {"name": "n"}}).created_at == 0.0
    assert node_from_json({"metadata": {"name": "n", "creationTimestamp": "yesterday"}}).created_at == 0.0


def _pod(status: dict[str, object]) -> dict[str, object]:
    return {"metadata": {"name": "train-0", "namespace": "ml"},
            "spec": {"nodeName": "b1", "containers": [{"name": "main", "resources": {"limits": {keys.RES_GPU: "2"}}},
                                                      {"name": "side"}]},
            "status": {"phase": "Running", **status}}


def _health(name: str, *pairs: tuple[str, str]) -> dict[str, object]:
    return {"name": name, "resources": [{"resourceID": rid, "health": health} for rid, health in pairs]}


def test_a_pod_counts_the_devices_its_status_reports_unhealthy_once_each() -> None:
    # KEP-4680: the kubelet reports each container's allocated devices with their health; a device plugin GPU by
    # its resource name, a DRA device as claim:<claim>/<request>, which two containers sharing the claim both report.
    statuses = [
        {"name": "main", "allocatedResourcesStatus": [
            _health(keys.RES_GPU, ("GPU-aaa", "Healthy"), ("GPU-bbb", "Unhealthy")),
            _health("claim:nic/net", ("eth1", "Unhealthy"))]},
        {"name": "side", "allocatedResourcesStatus": [_health("claim:nic/net", ("eth1", "Unhealthy"))]},
    ]
    assert pod_from_json(_pod({"containerStatuses": statuses})).unhealthy_devices == 2
    healthy = [{"name": "main", "allocatedResourcesStatus": [_health(keys.RES_GPU, ("GPU-aaa", "Healthy"),
                                                                     ("GPU-bbb", "Unknown"))]}]
    assert pod_from_json(_pod({"containerStatuses": healthy})).unhealthy_devices == 0
    assert pod_from_json(_pod({})).unhealthy_devices == 0  # a kubelet without the feature reports nothing


def test_a_malformed_device_health_names_the_pod_and_the_field() -> None:
    bad = [{"name": "main", "allocatedResourcesStatus": [{"name": keys.RES_GPU, "resources": [{"health": 1}]}]}]
    with pytest.raises(SnapshotError) as err:
        pod_from_json(_pod({"containerStatuses": bad}))
    assert str(err.value) == ("pod ml/train-0: status.containerStatuses[0].allocatedResourcesStatus[0].resources[0]"
                              ".health: expected a string, got int")
