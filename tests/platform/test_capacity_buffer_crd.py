"""The CapacityBuffer CRD our chart installs (crds/, with the scaler's Release): it takes the buffers users
write as cluster-autoscaler documents them and the status the scaler writes back, and refuses a negative
size before the scaler sees it."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from charts_helpers import Obj, Validator, is_our_chart, releases, scaler_objects
from platform_helpers import STACK_ENV, platform_program

from scaler.core.model.buffers import CapacityBuffer
from scaler.core.model.objects import Pod
from scaler.core.model.resources import parse_resources
from scaler.core.planning.buffers import inject, outcomes
from scaler.core.planning.decisions import PodVerdict
from scaler.core.planning.injected import Injected
from scaler.kube.convert_buffers import status_json

CRD = Path(__file__).resolve().parents[2] / "charts/gpuburst-scaler/crds/capacitybuffers.autoscaling.x-k8s.io.yaml"
BUFFER: dict[str, Any] = {
    "apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
    "metadata": {"name": "l4-ready", "namespace": "ml"},
    "spec": {"provisioningStrategy": "buffer.x-k8s.io/active-capacity", "podTemplateRef": {"name": "l4"},
             "replicas": 8, "limits": {"nvidia.com/gpu": "8", "cpu": "32"}}}


def validator() -> Validator:
    return Validator([yaml.safe_load(CRD.read_text())])


def test_the_crd_takes_a_buffer_and_the_status_the_scaler_writes() -> None:
    buf = CapacityBuffer(namespace="ml", name="l4-ready", template_ref="l4", replicas=8, template_generation=2,
                         template=Pod("t", requests=parse_resources({"cpu": "3", "nvidia.com/gpu": 1})))

    injected = Injected()
    inject([buf], injected)
    verdicts = {k: PodVerdict(k, "scale-up", pool="gpu1-spot-a") for k in injected.held[buf.key]}
    status = outcomes([buf], injected, verdicts, now=1_800_000_000.0)[buf.key].status
    body = {**copy.deepcopy(BUFFER), "status": status_json(status)}
    assert body["status"]["replicas"] == 8 and body["status"]["podTemplateGeneration"] == 2
    assert validator().validate(Obj("example", body), "1.35.0") is None


def test_the_crd_refuses_a_negative_size_and_an_unknown_field() -> None:
    for field, value in (("replicas", -1), ("percentage", -5), ("replica", 2)):
        body = copy.deepcopy(BUFFER)
        body["spec"][field] = value
        assert field in (validator().validate(Obj("example", body), "1.35.0") or ""), field


def test_the_platform_installs_the_crd_with_the_scalers_release() -> None:
    """Helm installs a chart's crds/ before its templates unless the release skips them; the platform's does not."""
    recorder = platform_program("aws", scaler_env=STACK_ENV["aws"])
    (release,) = [r for r in releases(recorder) if is_our_chart(r.inputs["chart"])]
    assert not release.inputs.get("skipCrds")
    rendered = scaler_objects(recorder)
    assert [c["metadata"]["name"] for c in rendered.crds] == ["capacitybuffers.autoscaling.x-k8s.io"]
