"""Each rule of the policy pack on a passing and a failing resource (the inputs Pulumi's engine passes)."""

from __future__ import annotations

import copy
from typing import Any

import gpuburst_policies as gp
import pytest
import yaml

from scaler.core.config.settings import parse_config
from scaler.core.model import keys

ASG = gp.ASG
POOL = gp.AGENT_POOL
DEPLOYMENT = "kubernetes:apps/v1:Deployment"


def violations(rule: gp.Rule, typ: str, props: dict[str, Any], ignore: tuple[str, ...] = ()) -> list[str]:
    return gp.check(typ, "res", props, rule, ignore)


def aws_gpu_group() -> dict[str, Any]:
    """An ASG as the AWS stack declares it for a pool of the model (tags from Pool.to_tags)."""
    config = parse_config({"cluster": "c1", "cloud": "aws", "pools": [
        {"name": "sys", "role": "system", "instance_types": ["m6i.large"], "zones": ["us-east-1a"], "min": 1,
         "max": 2},
        {"name": "gpu", "instance_types": ["g6.xlarge"], "zones": ["us-east-1a"], "max": 10},
    ]}, "test")
    tags = config.pool("gpu").to_tags("c1")
    return {"minSize": 0, "maxSize": 10, "desiredCapacity": 0, "protectFromScaleIn": True,
            "tags": [{"key": k, "value": v, "propagateAtLaunch": True} for k, v in sorted(tags.items())]}


def azure_gpu_pool() -> dict[str, Any]:
    config = parse_config({"cluster": "c1", "cloud": "azure", "pools": [
        {"name": "gpu", "vm_size": "Standard_NC4as_T4_v3", "zones": ["1"], "max": 10},
    ]}, "test")
    pool = config.pool("gpu")
    return {"count": 0, "enableAutoScaling": False, "vmSize": "Standard_NC4as_T4_v3",
            "nodeLabels": pool.node_labels(),
            "nodeTaints": [f"{t.key}={t.value}:{t.effect}" for t in pool.node_taints()],
            "tags": pool.to_tags("c1")}


def deployment(**container: Any) -> dict[str, Any]:
    c = {"name": "app", "image": "x", "securityContext": {"runAsNonRoot": True, "runAsUser": 1000}}
    c.update(container)
    return {"spec": {"template": {"spec": {"containers": [c]}}}}


def without_tag(props: dict[str, Any], key: str) -> dict[str, Any]:
    out = copy.deepcopy(props)
    out["tags"] = [t for t in out["tags"] if t["key"] != key]
    return out


# --- scale from zero ----------------------------------------------------------------------------
def test_gpu_groups_scale_from_zero() -> None:
    rule = gp.gpu_groups_scale_from_zero
    owned = ("desiredCapacity",)
    assert violations(rule, ASG, aws_gpu_group(), owned) == []
    assert violations(rule, ASG, {**aws_gpu_group(), "minSize": 1}, owned) == \
        ["res: GPU group has minSize 1; it must scale from 0"]
    # A size Pulumi manages would be set back at every `pulumi up`, terminating the scaler's nodes.
    assert "desiredCapacity 0 without ignoreChanges" in violations(rule, ASG, aws_gpu_group())[0]
    # Ignored, the engine passes the state's size, the live one after a refresh: nodes may run.
    assert violations(rule, ASG, {**aws_gpu_group(), "desiredCapacity": 7}, owned) == []
    # A system group (no GPU tags) may keep nodes.
    cpu = {**without_tag(aws_gpu_group(), keys.TAG_CA_TEMPLATE_RESOURCES + keys.RES_GPU), "minSize": 2}
    cpu["tags"] = [t for t in cpu["tags"] if t["key"] != keys.TAG_ROLE]
    assert violations(rule, ASG, cpu) == []

    assert violations(rule, POOL, azure_gpu_pool(), ("count",)) == []
    assert violations(rule, POOL, {**azure_gpu_pool(), "count": 3}, ("count",)) == []
    assert "count 0 is not in ignoreChanges" in violations(rule, POOL, azure_gpu_pool())[0]
    no_count = {k: v for k, v in azure_gpu_pool().items() if k != "count"}
    assert "has no count" in violations(rule, POOL, no_count, ("count",))[0]
    assert "AKS's autoscaler on" in violations(rule, POOL, {**azure_gpu_pool(), "enableAutoScaling": True},
                                               ("count",))[0]
    assert "minCount 1" in violations(rule, POOL, {**azure_gpu_pool(), "minCount": 1}, ("count",))[0]


# --- autoscaler tags and taints -----------------------------------------------------------------
@pytest.mark.parametrize("missing", [
    keys.TAG_CA_ENABLED,
    keys.tag_ca_cluster("c1"),
    keys.TAG_CA_TEMPLATE_RESOURCES + keys.RES_GPU,
    keys.TAG_CA_TEMPLATE_TAINT + keys.TAINT_GPU,
])
def test_aws_gpu_group_without_an_autoscaler_tag_is_refused(missing: str) -> None:
    rule = gp.gpu_groups_carry_autoscaler_tags_and_taints
    assert violations(rule, ASG, aws_gpu_group()) == []
    found = violations(rule, ASG, without_tag(aws_gpu_group(), missing))
    assert len(found) == 1 and "lacks the autoscaler tags" in found[0]


def test_azure_gpu_pool_needs_the_gpu_taint_and_tags() -> None:
    rule = gp.gpu_groups_carry_autoscaler_tags_and_taints
    assert violations(rule, POOL, azure_gpu_pool()) == []
    untainted = {**azure_gpu_pool(), "nodeTaints": []}
    assert violations(rule, POOL, untainted) == \
        ["res: GPU agent pool lacks the node taint nvidia.com/gpu=present:NoSchedule"]
    untagged = {**azure_gpu_pool(), "tags": {}}
    assert "k8s.io_cluster-autoscaler_enabled=true" in violations(rule, POOL, untagged)[0]


def test_aws_groups_are_protected_from_scale_in() -> None:
    rule = gp.aws_groups_protected_from_scale_in
    assert violations(rule, ASG, aws_gpu_group()) == []
    assert violations(rule, ASG, {**aws_gpu_group(), "protectFromScaleIn": False}) == \
        ["res: protectFromScaleIn must be true (only the scaler removes nodes)"]
    assert violations(rule, ASG, {"minSize": 2, "maxSize": 3}) != []  # unset counts as unprotected


# --- credentials ----------------------------------------------------------------------------------
def test_no_static_cloud_credentials_in_env_values_or_secrets() -> None:
    rule = gp.no_static_cloud_credentials
    assert violations(rule, DEPLOYMENT, deployment(env=[{"name": "AWS_REGION", "value": "us-east-1"}])) == []
    bad = deployment(env=[{"name": "AWS_SECRET_ACCESS_KEY", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}])
    assert "AWS_SECRET_ACCESS_KEY" in violations(rule, DEPLOYMENT, bad)[0]
    init = deployment()
    init["spec"]["template"]["spec"]["initContainers"] = [{"name": "i", "env": [{"name": "AZURE_CLIENT_SECRET",
                                                                                "value": "x"}]}]
    assert "AZURE_CLIENT_SECRET" in violations(rule, DEPLOYMENT, init)[0]
    cron = {"spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [
        {"name": "c", "env": [{"name": "AWS_ACCESS_KEY_ID", "value": "AKIA..."}]}]}}}}}}
    assert violations(rule, "kubernetes:batch/v1:CronJob", cron) != []

    release = gp.HELM_RELEASE
    assert violations(rule, release, {"chart": "x", "values": {"env": [{"name": "LOG", "value": "1"}]}}) == []
    assert violations(rule, release, {"chart": "x", "values": {"extraEnv": [{"name": "AWS_ACCESS_KEY_ID",
                                                                               "value": "AKIA"}]}}) != []
    assert violations(rule, release, {"chart": "x", "values": {"env": {"AZURE_CLIENT_SECRET": "s"}}}) != []
    assert violations(rule, gp.SECRET_TYPE, {"stringData": {"AWS_SECRET_ACCESS_KEY": "x"}}) != []
    assert violations(rule, gp.SECRET_TYPE, {"stringData": {"tls.crt": "x"}}) == []


# --- non-root -------------------------------------------------------------------------------------
def test_containers_run_as_non_root() -> None:
    rule = gp.containers_run_as_non_root
    assert violations(rule, DEPLOYMENT, deployment()) == []
    pod_level = {"spec": {"template": {"spec": {"securityContext": {"runAsNonRoot": True},
                                                "containers": [{"name": "a"}]}}}}
    assert violations(rule, DEPLOYMENT, pod_level) == []
    assert violations(rule, DEPLOYMENT, deployment(securityContext={})) == \
        ["res: container 'app' may run as root (runAsNonRoot=None, runAsUser=None)"]
    assert violations(rule, DEPLOYMENT, deployment(securityContext={"runAsNonRoot": True, "runAsUser": 0})) != []
    # A container may not undo the pod's setting.
    undo = copy.deepcopy(pod_level)
    undo["spec"]["template"]["spec"]["containers"][0]["securityContext"] = {"runAsNonRoot": False}
    assert violations(rule, DEPLOYMENT, undo) != []
    assert violations(rule, "kubernetes:core/v1:Pod", {"spec": {"containers": [{"name": "p"}]}}) != []
    assert violations(rule, "kubernetes:core/v1:ConfigMap", {"data": {}}) == []


# --- APIService TLS ---------------------------------------------------------------------------------
def test_no_apiservice_skips_tls_verification() -> None:
    rule = gp.apiservice_verifies_tls
    api = gp.APISERVICE_TYPES[0]
    good = {"spec": {"group": "custom.metrics.k8s.io", "caBundle": "LS0t", "insecureSkipTLSVerify": False}}
    assert violations(rule, api, good) == []
    assert violations(rule, api, {"spec": {**good["spec"], "insecureSkipTLSVerify": True}}) != []
    release = gp.HELM_RELEASE
    # The chart's defaults (rules.default true, no TLS) render insecureSkipTLSVerify: true.
    assert "renders an APIService" in violations(rule, release, {"chart": "prometheus-adapter", "values": {}})[0]
    ours = {"chart": "prometheus-adapter", "values": {"rules": {"default": False, "custom": [], "existing": "cm"}}}
    assert violations(rule, release, ours) == []
    with_tls = {"chart": "prometheus-adapter", "values": {"tls": {"enable": True}}}
    assert violations(rule, release, with_tls) == []
    metrics_server = {"chart": "metrics-server", "values": {"apiService": {"insecureSkipTLSVerify": True}}}
    assert violations(rule, release, metrics_server) == ["res: chart values set insecureSkipTLSVerify"]


def test_the_pack_declares_every_rule_mandatory() -> None:
    from pulumi_policy import EnforcementLevel

    pols = gp.policies()
    assert [p.name for p in pols] == list(gp.RULES)
    assert {p.enforcement_level for p in pols} == {EnforcementLevel.MANDATORY}
    assert len(gp.RULES) == 6


def test_the_pack_entry_point_builds_the_pack(monkeypatch: pytest.MonkeyPatch) -> None:
    """pulumi/policy/__main__.py, as `pulumi preview --policy-pack` runs it (the engine connection stubbed)."""
    import runpy

    import pulumi_policy
    from platform_helpers import ROOT

    built: dict[str, Any] = {}

    def pack(**kwargs: Any) -> None:
        built.update(kwargs)

    monkeypatch.setattr(pulumi_policy, "PolicyPack", pack)
    runpy.run_path(str(ROOT / "pulumi" / "policy" / "__main__.py"), run_name="__main__")
    assert built["name"] == "gpuburst"
    assert built["enforcement_level"] == pulumi_policy.EnforcementLevel.MANDATORY
    assert [p.name for p in built["policies"]] == list(gp.RULES)
    config = yaml.safe_load((ROOT / "pulumi" / "policy" / "PulumiPolicy.yaml").read_text(encoding="utf-8"))
    assert config["runtime"]["name"] == "python"
    assert (ROOT / "pulumi" / "policy" / config["runtime"]["options"]["virtualenv"]).resolve() == ROOT / ".venv"
