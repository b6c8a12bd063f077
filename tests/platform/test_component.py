"""The platform component under Pulumi mocks, on both clouds and both metrics paths."""

from __future__ import annotations

import base64
from typing import Any

import pytest
import yaml
from charts_helpers import Rendered, is_our_chart, scaler_objects
from platform_helpers import CLIENT_ID, IRSA_ARN, Recorder, scaler_config

from scaler import permissions
from scaler.core.config.settings import parse_config
from scaler.core.model import keys
from scaler.core.scheduling import scoring as profiles
from scaler.core.scheduling.predicates import fits
from scaler.kube.convert import pod_from_json

CA_PEM = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"
PATHS = ["prometheus-adapter", "keda"]


def pod_spec(dep: Any) -> dict[str, Any]:
    return dep.inputs["spec"]["template"]["spec"]


def as_pod(dep: Any, namespace: str = "default") -> Any:
    tmpl = dep.inputs["spec"]["template"]
    meta = {"name": dep.metadata["name"], "namespace": namespace, "labels": tmpl["metadata"].get("labels", {})}
    return pod_from_json({"metadata": meta, "spec": tmpl["spec"]})


# --- the scaler: our chart, rendered with the values the component gives its release ----------------
def scaler(build: Any, cloud: str, **settings: Any) -> Rendered:
    return scaler_objects(build(cloud, **settings))


@pytest.mark.parametrize("cloud", ["aws", "azure"])
def test_scaler_configmap_is_the_pool_model_round_trip(build: Any, cloud: str) -> None:
    cm = scaler(build, cloud).one("ConfigMap", "gpuburst-scaler-config")
    parsed = parse_config(yaml.safe_load(cm.body["data"]["config.yaml"]), "configmap")
    original = scaler_config(cloud)
    assert parsed == original
    assert [p.name for p in parsed.pools] == [p.name for p in original.pools]
    # The pools the scaler reads produce the same cloud tags as the pools that made the groups.
    assert [p.to_tags(parsed.cluster) for p in parsed.pools] == [p.to_tags(original.cluster) for p in original.pools]


@pytest.mark.parametrize("cloud", ["aws", "azure"])
def test_scaler_identity_is_irsa_or_workload_identity(build: Any, cloud: str) -> None:
    objs = scaler(build, cloud)
    annotations = objs.one("ServiceAccount", "gpuburst-scaler").body["metadata"]["annotations"]
    template = objs.one("Deployment").body["spec"]["template"]
    pod_labels = template["metadata"]["labels"]
    if cloud == "aws":
        assert annotations == {"eks.amazonaws.com/role-arn": IRSA_ARN}
        assert "azure.workload.identity/use" not in pod_labels
    else:
        assert annotations == {"azure.workload.identity/client-id": CLIENT_ID}
        assert pod_labels["azure.workload.identity/use"] == "true"
    env = {e["name"]: e.get("value") for e in template["spec"]["containers"][0]["env"]}
    assert not set(env) & {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AZURE_CLIENT_SECRET"}
    # The stack's outputs the scaler needs reach its environment (the chart's named values).
    if cloud == "aws":
        assert env["AWS_REGION"] == scaler_config("aws").region
    else:
        assert env["AZURE_SUBSCRIPTION_ID"] and env["GPUBURST_AZURE_RESOURCE_GROUP"]


def test_scaler_rbac_is_exactly_the_runtime_rules(build: Any) -> None:
    objs = scaler(build, "aws")
    assert objs.one("ClusterRole").body["rules"] == permissions.KUBERNETES_RBAC_RULES
    role = objs.one("Role", "gpuburst-scaler")
    assert role.body["rules"] == permissions.KUBERNETES_ROLE_RULES
    assert role.namespace == "gpuburst-system"
    subject = {"kind": "ServiceAccount", "name": "gpuburst-scaler", "namespace": "gpuburst-system"}
    crb = objs.one("ClusterRoleBinding")
    assert crb.body["subjects"] == [subject]
    assert crb.body["roleRef"]["name"] == objs.one("ClusterRole").name
    assert objs.one("RoleBinding", "gpuburst-scaler").body["subjects"] == [subject]


def test_scaler_deployment_is_hardened_and_on_the_system_pool(build: Any) -> None:
    dep = scaler(build, "aws").one("Deployment", "gpuburst-scaler").body
    spec = dep["spec"]["template"]["spec"]
    assert dep["spec"]["replicas"] == 2
    assert spec["nodeSelector"] == {keys.LABEL_ROLE: "system"}
    assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["runAsUser"] != 0
    (c,) = spec["containers"]
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["image"] == "ghcr.io/gpuburst/scaler:0.1.0"
    assert set(c["resources"]) == {"requests", "limits"}
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"metrics": 8085}
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert ports[c["livenessProbe"]["httpGet"]["port"]] == 8085
    assert c["args"][:3] == ["run", "--config", "/etc/gpuburst/config.yaml"]
    # The pod really lands on the system pool and nowhere else, by the scaler's own predicates.
    config = scaler_config("aws")
    meta = {"name": "gpuburst-scaler", "namespace": "gpuburst-system",
            "labels": dep["spec"]["template"]["metadata"]["labels"]}
    pod = pod_from_json({"metadata": meta, "spec": spec})
    assert {p.name for p in config.pools if fits(pod, p.template_node())} == {"system"}


@pytest.mark.parametrize("dry_run", [False, True])
def test_scaler_command_line_is_what_the_runtime_parses(build: Any, dry_run: bool) -> None:
    import argparse

    from scaler import run_command

    (c,) = scaler(build, "aws", scaler_dry_run=dry_run).one("Deployment").body["spec"]["template"]["spec"]["containers"]
    assert c["args"][0] == "run"  # the image's entrypoint is the scaler CLI
    parser = argparse.ArgumentParser()
    run_command.add_arguments(parser)
    ns = parser.parse_args(c["args"][1:])
    assert ns.config == "/etc/gpuburst/config.yaml" and ns.dry_run is dry_run
    assert ns.metrics_port == c["ports"][0]["containerPort"]
    mounts = {m["mountPath"] for m in c["volumeMounts"]}
    assert "/etc/gpuburst" in mounts
    env = {e["name"] for e in c["env"]}
    assert {"POD_NAME", "POD_NAMESPACE"} <= env  # leader election identity and namespace


def test_scaler_has_pdb_service_and_servicemonitor_selecting_its_pods(build: Any) -> None:
    objs = scaler(build, "azure")
    labels = objs.one("Deployment").body["spec"]["selector"]["matchLabels"]
    assert objs.one("PodDisruptionBudget").body["spec"]["selector"]["matchLabels"] == labels
    svc = objs.one("Service").body
    assert svc["spec"]["selector"] == labels
    assert svc["spec"]["ports"][0]["port"] == 8085
    sm = objs.one("ServiceMonitor").body
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert sm["spec"]["endpoints"][0]["port"] == "metrics"


def test_the_scaler_has_one_definition_our_chart(build: Any) -> None:
    """The component declares no scaler object itself: every one comes from charts/gpuburst-scaler."""
    res = build("aws")
    scaler_kinds = {"Deployment", "ServiceAccount", "ConfigMap", "ClusterRole", "Role", "Service",
                    "PodDisruptionBudget", "NetworkPolicy", "ServiceMonitor"}
    own = [r.name for r in res.resources if r.kind in scaler_kinds
           and str(r.metadata.get("name", "")).startswith("gpuburst-scaler")]
    assert own == []
    (release,) = [r for r in res.of("helm.sh/v3:Release") if is_our_chart(r.inputs["chart"])]
    assert release.inputs["namespace"] == "gpuburst-system" and release.inputs["atomic"] is True


def test_priority_classes_for_training_and_inference(build: Any) -> None:
    res = build("aws")
    pcs = {r.metadata["name"]: r.inputs for r in res.of("PriorityClass")}
    assert set(pcs) == {"gpuburst-gpu-training", "gpuburst-gpu-inference"}
    assert pcs["gpuburst-gpu-inference"]["value"] > pcs["gpuburst-gpu-training"]["value"]
    assert not any(p.get("globalDefault") for p in pcs.values())


# --- the metrics chain ----------------------------------------------------------------------------
@pytest.mark.parametrize("cloud", ["aws", "azure"])
@pytest.mark.parametrize("metrics", PATHS)
def test_charts_are_official_and_pinned(build: Any, cloud: str, metrics: str) -> None:
    from gpuburst_platform.versions import CHARTS

    res = build(cloud, metrics)
    releases = {r.inputs["chart"]: r.inputs for r in res.of("helm.sh/v3:Release")
                if not is_our_chart(r.inputs["chart"])}
    expected = {"kube-prometheus-stack", "dcgm-exporter", metrics}
    assert set(releases) == expected
    for chart, inputs in releases.items():
        assert inputs["version"] == CHARTS[chart].version
        assert inputs["repositoryOpts"]["repo"] == CHARTS[chart].repo
        assert inputs["name"]  # a fixed release name, no random suffix


@pytest.mark.parametrize("cloud", ["aws", "azure"])
def test_dcgm_exporter_tolerates_every_gpu_pool_and_keeps_pod_labels(build: Any, cloud: str) -> None:
    res = build(cloud)
    (dcgm,) = [r for r in res.of("helm.sh/v3:Release") if r.inputs["chart"] == "dcgm-exporter"]
    values = dcgm.inputs["values"]
    assert values["serviceMonitor"]["honorLabels"] is True
    ds_pod = pod_from_json({"metadata": {"name": "dcgm", "namespace": "monitoring"},
                            "spec": {"nodeSelector": values["nodeSelector"], "tolerations": values["tolerations"],
                                     "containers": [{"name": "x"}]}})
    config = scaler_config(cloud)
    landing = {p.name for p in config.pools if fits(ds_pod, p.template_node())}
    assert landing == {p.name for p in config.pools if p.role == "gpu"}  # every GPU pool, no other


def test_adapter_path_serves_gpu_utilization_with_verified_tls(build: Any) -> None:
    res = build("aws", "prometheus-adapter", metrics_ca_bundle=CA_PEM)
    (adapter,) = [r for r in res.of("helm.sh/v3:Release") if r.inputs["chart"] == "prometheus-adapter"]
    values = adapter.inputs["values"]
    # The chart renders its own APIService (insecureSkipTLSVerify: true without tls.enable) only when
    # rules.default or rules.custom is set: both are empty, our ConfigMap carries the rules.
    assert values["rules"]["default"] is False and values["rules"]["custom"] == []
    assert values["tls"]["enable"] is False
    assert {"name": "serving-cert", "secret": {"secretName": "custom-metrics-apiserver-tls"}} in values["extraVolumes"]
    assert "--tls-cert-file=/var/run/serving-cert/tls.crt" in values["extraArguments"]
    rules_cm = res.one("core/v1:ConfigMap", values["rules"]["existing"])
    (rule,) = yaml.safe_load(rules_cm.inputs["data"]["config.yaml"])["rules"]
    assert rule["name"]["as"] == "gpu_utilization"
    assert rule["resources"]["overrides"]["pod"] == {"resource": "pod"}
    assert "DCGM_FI_DEV_GPU_UTIL" in rule["metricsQuery"] and "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in rule["metricsQuery"]

    api = res.one("APIService", "v1beta1.custom.metrics.k8s.io")
    spec = api.inputs["spec"]
    assert base64.b64decode(spec["caBundle"]).decode() == CA_PEM
    assert spec.get("insecureSkipTLSVerify") is False
    assert spec["service"] == {"name": "custom-metrics-apiserver", "namespace": "monitoring", "port": 443}
    assert values["fullnameOverride"] == "custom-metrics-apiserver"  # the chart's Service name

    hpa = res.one("HorizontalPodAutoscaler")
    assert hpa.inputs["apiVersion"] == "autoscaling/v2"
    assert hpa.inputs["spec"]["scaleTargetRef"]["name"] == "gpu-inference-example"
    (metric,) = hpa.inputs["spec"]["metrics"]
    assert metric["type"] == "Pods" and metric["pods"]["metric"]["name"] == rule["name"]["as"]
    assert not res.of(":ScaledObject")


def test_adapter_names_agree_with_the_ansible_metrics_certs_role(build: Any) -> None:
    """The role issues the certificate for its Service, writes its Secret and patches our APIService."""
    from platform_helpers import ROOT

    defaults = yaml.safe_load((ROOT / "ansible_collections/gpuburst/cluster/roles/metrics_certs/defaults/main.yml")
                              .read_text(encoding="utf-8"))
    service, namespace = defaults["metrics_certs_service"], defaults["metrics_certs_namespace"]
    secret = defaults["metrics_certs_secret_name"].replace("{{ metrics_certs_service }}", service)
    res = build("aws", "prometheus-adapter")
    api = res.one("APIService")
    assert api.metadata["name"] in defaults["metrics_certs_apiservices"]
    assert api.inputs["spec"]["service"]["name"] == service
    assert api.inputs["spec"]["service"]["namespace"] == namespace
    (adapter,) = [r for r in res.of("helm.sh/v3:Release") if r.inputs["chart"] == "prometheus-adapter"]
    assert adapter.inputs["namespace"] == namespace
    assert adapter.inputs["values"]["extraVolumes"][0]["secret"]["secretName"] == secret


def test_ca_bundle_is_encoded_like_the_pem_file(build: Any) -> None:
    res = build("aws", "prometheus-adapter", metrics_ca_bundle=CA_PEM.strip())  # e.g. "$(cat ca.crt)"
    assert base64.b64decode(res.one("APIService").inputs["spec"]["caBundle"]).decode() == CA_PEM


def test_adapter_without_ca_in_stack_leaves_cabundle_to_ansible_and_fails_closed(build: Any) -> None:
    res = build("azure", "prometheus-adapter")
    spec = res.one("APIService").inputs["spec"]
    assert "caBundle" not in spec  # the metrics_certs role sets it; Pulumi never claims the field
    assert spec.get("insecureSkipTLSVerify") is False


def test_keda_path_scales_on_the_same_gpu_reading(build: Any) -> None:
    res = build("azure", "keda")
    assert not res.of("APIService")
    assert not res.of("HorizontalPodAutoscaler")
    (so,) = res.of(":ScaledObject")
    assert so.inputs["apiVersion"] == "keda.sh/v1alpha1"
    assert so.inputs["spec"]["scaleTargetRef"]["name"] == "gpu-inference-example"
    (trigger,) = so.inputs["spec"]["triggers"]
    assert trigger["type"] == "prometheus"
    meta = trigger["metadata"]
    assert meta["serverAddress"] == "http://gpuburst-prom-prometheus.monitoring.svc:9090"
    assert "DCGM_FI_DEV_GPU_UTIL" in meta["query"] and "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in meta["query"]
    assert 'namespace="gpu-examples"' in meta["query"]
    assert float(meta["threshold"]) == 60


@pytest.mark.parametrize("cloud", ["aws", "azure"])
def test_example_inference_pods_make_the_scaler_add_single_gpu_nodes(build: Any, cloud: str) -> None:
    res = build(cloud)
    dep = res.one("apps/v1:Deployment", "gpu-inference-example")
    spec = pod_spec(dep)
    assert spec["schedulerName"] == profiles.BINPACK.scheduler_name
    assert spec["priorityClassName"] == "gpuburst-gpu-inference"
    pod = as_pod(dep, "gpu-examples")
    config = scaler_config(cloud)
    landing = {p.name for p in config.pools if fits(pod, p.template_node())}
    single = {p.name for p in config.pools if p.role == "gpu" and p.min_pod_gpus <= 1}
    assert landing == single  # GPU pools that take 1-GPU pods; never a multi-GPU (min-gpus) pool
    assert single


@pytest.mark.parametrize("cloud", ["aws", "azure"])
@pytest.mark.parametrize("metrics", PATHS)
def test_the_platform_itself_keeps_no_gpu_node_alive(build: Any, cloud: str, metrics: str) -> None:
    """An idle cluster costs the control plane and the system pool: nothing declared asks for a GPU."""
    res = build(cloud, metrics)
    for dep in res.of("apps/v1:Deployment"):
        wants_gpu = any(keys.RES_GPU in (c.get("resources") or {}).get("requests", {})
                        for c in pod_spec(dep)["containers"])
        if wants_gpu:
            assert dep.inputs["spec"]["replicas"] == 0, dep.metadata["name"]
    if metrics == "keda":
        (so,) = res.of(":ScaledObject")
        assert so.inputs["spec"]["minReplicaCount"] == 0


def test_only_the_adapter_release_is_not_awaited(build: Any) -> None:
    """Its Secret comes from the Ansible playbook after `pulumi up`: waiting would roll it back."""
    res = build("aws", "prometheus-adapter")
    waits = {r.inputs["chart"]: (r.inputs.get("skipAwait"), r.inputs.get("atomic"))
             for r in res.of("helm.sh/v3:Release")}
    assert waits.pop("prometheus-adapter") == (True, False)
    assert set(waits.values()) == {(False, True)}


# --- the bin-packing scheduler --------------------------------------------------------------------
def test_binpack_scheduler_runs_the_profile_the_simulator_models(build: Any) -> None:
    res = build("aws")
    cm = res.one("core/v1:ConfigMap", "gpuburst-binpack-config")
    conf = yaml.safe_load(cm.inputs["data"]["scheduler-config.yaml"])
    assert conf == profiles.kube_scheduler_configuration(profiles.BINPACK)
    (profile,) = conf["profiles"]
    assert profile["schedulerName"] == "gpuburst-binpack"
    strategy = profile["pluginConfig"][0]["args"]["scoringStrategy"]
    assert strategy["type"] == "MostAllocated"
    assert {"name": keys.RES_GPU, "weight": 5} in strategy["resources"]

    dep = res.one("apps/v1:Deployment", "gpuburst-binpack")
    (c,) = pod_spec(dep)["containers"]
    assert c["image"] == "registry.k8s.io/kube-scheduler:v1.36.1"  # the cluster's minor version (the default)
    assert "--config=/etc/kubernetes/scheduler-config.yaml" in c["command"]
    assert pod_spec(dep)["nodeSelector"] == {keys.LABEL_ROLE: "system"}
    bound = {r.inputs["roleRef"]["name"] for r in res.of("ClusterRoleBinding")
             if r.inputs["subjects"][0]["name"] == "gpuburst-binpack"}
    assert bound == {"system:kube-scheduler", "system:volume-scheduler"}
    election = conf["leaderElection"]
    lease = res.one("rbac.authorization.k8s.io/v1:Role", "gpuburst-binpack-lease")
    assert lease.metadata["namespace"] == election["resourceNamespace"]
    named = [r for r in lease.inputs["rules"] if r.get("resourceNames")]
    assert named == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                      "resourceNames": [election["resourceName"]], "verbs": ["get", "update"]}]


def test_without_binpack_the_example_uses_the_default_scheduler(build: Any) -> None:
    res = build("aws", binpack_scheduler=False)
    assert not [r for r in res.of("apps/v1:Deployment") if r.metadata["name"] == "gpuburst-binpack"]
    assert "schedulerName" not in pod_spec(res.one("apps/v1:Deployment", "gpu-inference-example"))


# --- whole-component properties --------------------------------------------------------------------
@pytest.mark.parametrize("cloud", ["aws", "azure"])
@pytest.mark.parametrize("metrics", PATHS)
def test_every_declared_resource_passes_the_policy_pack(build: Any, cloud: str, metrics: str) -> None:
    import gpuburst_policies as gp

    res = build(cloud, metrics, metrics_ca_bundle=CA_PEM)
    violations = gp.check_all([(r.typ, r.name, r.inputs, ()) for r in res.resources])
    assert violations == []


def _whole_numbers(obj: Any) -> Any:
    """Pulumi's wire form carries numbers as floats; Kubernetes' integer fields want ints."""
    if isinstance(obj, dict):
        return {k: _whole_numbers(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_whole_numbers(v) for v in obj]
    return int(obj) if isinstance(obj, float) and obj.is_integer() else obj


def _without_none(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _without_none(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [_without_none(v) for v in obj]
    return obj


@pytest.mark.parametrize("cloud", ["aws", "azure"])
@pytest.mark.parametrize("metrics", PATHS)
def test_every_typed_object_is_valid_for_the_official_kubernetes_models(build: Any, cloud: str, metrics: str) -> None:
    """Round-trip through the kubernetes client's models: a misspelled field is dropped, a wrong type refused."""
    from kubernetes import client

    api = client.ApiClient()
    res = build(cloud, metrics, metrics_ca_bundle=CA_PEM)
    checked = 0
    for r in res.resources:
        group_version, kind = r.typ.split(":")[1:]
        if not r.typ.startswith("kubernetes:") or kind in {"Release", "CustomResource"} or \
                group_version.split("/")[0] in {"monitoring.coreos.com", "keda.sh"}:
            continue
        version = group_version.split("/")[-1]
        model = version[0].upper() + version[1:] + kind
        assert hasattr(client, model), f"{r.name}: no official model {model}"
        data = _whole_numbers(r.inputs)
        obj = api._ApiClient__deserialize(data, model)  # type: ignore[attr-defined]
        assert _without_none(api.sanitize_for_serialization(obj)) == _without_none(data), r.name
        checked += 1
    assert checked >= 15  # the scaler's objects come from our chart: test_charts validates them


def test_component_is_deterministic(build: Any) -> None:
    first = build("azure", "keda")
    second = build("azure", "keda")
    def by_urn(rec: Recorder) -> dict[tuple[str, str], dict[str, Any]]:
        return {(r.typ, r.name): r.inputs for r in rec.resources}

    assert by_urn(first) == by_urn(second)
    assert len(by_urn(first)) == len(first.resources)  # no two resources share a type and name


def test_bad_inputs_fail_with_a_message_naming_them() -> None:
    import pulumi_kubernetes as k8s
    from gpuburst_platform import Platform, PlatformSettings, parse_settings
    from platform_helpers import run_program

    aws = scaler_config("aws")

    def mismatch() -> Any:
        return Platform("p", provider=k8s.Provider("k"), config=aws, cloud="azure", identity="x",
                        kubernetes_version="1.32")

    with pytest.raises(ValueError, match="cloud is 'azure' but the scaler config's cloud is 'aws'"):
        run_program(mismatch)

    def old_version() -> Any:
        return Platform("p", provider=k8s.Provider("k"), config=aws, cloud="aws", identity="x",
                        kubernetes_version="1.20", settings=PlatformSettings())

    with pytest.raises(ValueError, match=r"kubernetes_version '1.20'"):
        run_program(old_version)

    no_system = aws.model_copy(update={"pools": [p for p in aws.pools if p.role != "system"]})

    def headless() -> Any:
        return Platform("p", provider=k8s.Provider("k"), config=no_system, cloud="aws", identity="x",
                        kubernetes_version="1.32")

    with pytest.raises(ValueError, match="no role 'system' pool"):
        run_program(headless)

    with pytest.raises(ValueError, match=r"Pulumi.aws-dev.yaml: platform.metrics: "):
        parse_settings({"metrics": "datadog"}, "Pulumi.aws-dev.yaml")
    with pytest.raises(ValueError, match=r"Pulumi.aws-dev.yaml: platform.metrics_ca_bundle: must be a PEM"):
        parse_settings({"metrics_ca_bundle": "not a cert"}, "Pulumi.aws-dev.yaml")
    with pytest.raises(ValueError, match=r"platform.scaler_image: 'ghcr.io/x/scaler:latest': pin the image"):
        parse_settings({"scaler_image": "ghcr.io/x/scaler:latest"}, "Pulumi.aws-dev.yaml")
    with pytest.raises(ValueError, match=r"platform.example_image: 'registry:5000/cuda': pin the image"):
        parse_settings({"example_image": "registry:5000/cuda"}, "Pulumi.aws-dev.yaml")
    assert parse_settings({"scaler_image": "registry:5000/s@sha256:" + "0" * 64}, "x").scaler_image.endswith("0")
    with pytest.raises(ValueError, match=r"platform.example_namespace: String should match"):
        parse_settings({"example_namespace": "GPU_examples"}, "Pulumi.aws-dev.yaml")
    with pytest.raises(ValueError, match=r"platform.replicas: Extra inputs"):
        parse_settings({"replicas": 3}, "Pulumi.aws-dev.yaml")
