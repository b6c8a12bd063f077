"""Kueue wired to gpuburst: the queue objects, the quota derived from the pools, and the worked example
(a Job of 4 x 8-GPU pods) answered by the scaler's own planner as the ProvisioningRequest Kueue makes of it."""

from __future__ import annotations

from typing import Any

import yaml
from gpuburst_platform import kueue
from platform_helpers import AWS_POOLS, ROOT

from scaler.configfile import load_config
from scaler.core.model import keys
from scaler.core.planning import provreq
from scaler.core.planning.decide import decide
from scaler.core.planning.snapshot import PoolObservation, Snapshot
from scaler.core.planning.state import State
from scaler.kube.provreq import request_from_json

CONFIG = load_config(AWS_POOLS)
EXAMPLE = ROOT / "examples" / "kueue-gpu-job.yaml"


def test_queue_objects_wire_the_admission_check_to_gpuburst() -> None:
    objs = {o["kind"]: o for o in kueue.queue_objects(CONFIG, "gpu-examples")}
    check = objs["AdmissionCheck"]["spec"]
    assert check["controllerName"] == kueue.PROVREQ_CONTROLLER
    assert check["parameters"]["name"] == objs["ProvisioningRequestConfig"]["metadata"]["name"]
    assert objs["ProvisioningRequestConfig"]["spec"]["provisioningClassName"] == provreq.ATOMIC_SCALE_UP
    queue = objs["ClusterQueue"]["spec"]
    assert queue["admissionChecksStrategy"]["admissionChecks"] == [{"name": kueue.ADMISSION_CHECK}]
    assert objs["LocalQueue"]["spec"]["clusterQueue"] == objs["ClusterQueue"]["metadata"]["name"]


def test_quota_is_what_the_gpu_pools_hold_at_their_max() -> None:
    expected = sum(p.max_size * p.gpus for p in CONFIG.pools if p.role == "gpu")
    assert kueue.gpu_quota(CONFIG)[keys.RES_GPU] == expected > 0
    capped = CONFIG.model_copy(update={"limits": CONFIG.limits.model_copy(update={"max_gpus": 64})})
    assert kueue.gpu_quota(capped)[keys.RES_GPU] == 64


def _example_request() -> Any:
    """The ProvisioningRequest Kueue makes of the example Job: one pod set of its pod template, count 4."""
    job = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == kueue.GPU_QUEUE
    template = {"metadata": {"name": "train-4x8-ps0", "namespace": "gpu-examples"},
                "template": job["spec"]["template"]}
    obj = {"metadata": {"name": "train-4x8-gpuburst-1", "namespace": "gpu-examples",
                        "creationTimestamp": "2026-11-24T00:00:00Z"},
           "spec": {"provisioningClassName": provreq.ATOMIC_SCALE_UP,
                    "podSets": [{"podTemplateRef": {"name": "train-4x8-ps0"}, "count": job["spec"]["parallelism"]}]}}
    return request_from_json(obj, {"gpu-examples/train-4x8-ps0": template})


def test_the_worked_example_gets_its_four_nodes_all_at_once() -> None:
    req = _example_request()
    assert req.problem == "" and req.total == 4
    pools = {p.name: PoolObservation(p, 0, 0) for p in CONFIG.pools}
    snap = Snapshot(now=1_763_942_400.0, pending=[], nodes=[], pools=pools, requests=[req])
    result, _ = decide(snap, State(), CONFIG)
    conds = result.requests
    assert sum(u.count for u in result.scale_ups) == 4
    assert {CONFIG.pool(u.pool).gpus for u in result.scale_ups} == {8}
    assert conds[req.key]["Provisioned"].reason == "Provisioning"


def test_the_platform_installs_kueue_wired_to_gpuburst(build: Any) -> None:
    from gpuburst_platform.versions import CHARTS

    res = build("aws", kueue=True)
    [release] = [r for r in res.of("helm.sh/v3:Release") if r.inputs["name"] == "kueue"]
    assert (release.inputs["chart"], release.inputs["version"]) == (CHARTS["kueue"].chart, "0.19.2")
    shared = yaml.safe_load((ROOT.parent / "shared" / "charts" / "kueue" / "Chart.yaml").read_text(encoding="utf-8"))
    assert shared["version"] == release.inputs["version"]  # the chart the offline tests render
    values = release.inputs["values"]
    assert values["controllerManager"]["manager"]["image"]["tag"] == "v0.19.2"
    crd = res.one("apiextensions.k8s.io/v1:CustomResourceDefinition")
    assert crd.metadata["name"] == "provisioningrequests.autoscaling.x-k8s.io"
    assert crd.inputs["spec"]["versions"][0]["subresources"] == {"status": {}}  # the scaler writes status only
    kinds = {r.kind: r.inputs for r in res.resources if r.typ.startswith("kubernetes:kueue.x-k8s.io/")}
    assert set(kinds) == {"ProvisioningRequestConfig", "AdmissionCheck", "ResourceFlavor", "ClusterQueue",
                          "LocalQueue"}
    assert kinds["LocalQueue"]["metadata"]["namespace"] == "gpu-examples"
    off = build("aws")
    assert not [r for r in off.of("helm.sh/v3:Release") if r.inputs["name"] == "kueue"]
