"""Kubernetes JSON to the core's model: what `plan` and the watch cache both rely on."""

from __future__ import annotations

from scaler.core.model import keys
from scaler.kube.convert import node_from_json


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
