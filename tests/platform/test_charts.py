"""Every chart the platform installs, rendered offline with the values we really pass, then checked as
a cluster would: keys the chart does not know, names that must line up across charts, and every object
(rendered, or declared by the platform component itself) against the Kubernetes schemas of each version
the stacks allow (kubernetes-validate --strict) or the charts' CRD schemas.

The official charts come from ../shared/charts at the versions gpuburst_platform/versions.py and the
device-plugin role pin; ours from charts/gpuburst-scaler. The values: the platform component's Helm
releases as it declares them (both clouds, both metrics paths, and with `scaler_chart: true` our chart),
and the device plugin's as `ansible-playbook gpuburst.cluster.cluster` writes them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml
from charts_helpers import (
    OUR_CHART,
    SHARED_CHARTS,
    Obj,
    Rendered,
    Validator,
    chart_version,
    check_keys,
    label_match,
    platform_objects,
    releases,
    render,
)
from gpuburst_infra.stack_models import SUPPORTED_KUBERNETES
from gpuburst_platform import component
from gpuburst_platform import render as prender
from gpuburst_platform.settings import ADAPTER_SERVICE, CUSTOM_METRICS_APISERVICE, MONITORING_NAMESPACE
from gpuburst_platform.versions import CHARTS
from platform_helpers import ROOT, platform_program

from scaler import permissions
from scaler.core.config.settings import parse_config
from scaler.core.model import keys

VERSIONS = sorted({v for vs in SUPPORTED_KUBERNETES.values() for v in vs}, key=lambda v: tuple(map(int, v.split("."))))
VARIANTS = [("aws", "prometheus-adapter"), ("azure", "prometheus-adapter"), ("aws", "keda"), ("azure", "keda")]
DEVICE_PLUGIN_ROLE = ROOT / "ansible_collections/gpuburst/cluster/roles/device_plugin/defaults/main.yml"
POOL_FILES = ["examples/pools-aws.yaml", "examples/pools-azure.yaml"]
COUNTS: dict[str, int] = {}  # read by conftest's terminal summary


def _chart_dir(chart: str) -> Path:
    # An OCI reference (Kueue's) names the chart by its last path segment.
    path = OUR_CHART if chart in (OUR_CHART.name, component.SCALER_CHART) else SHARED_CHARTS / chart.rsplit("/", 1)[-1]
    if not (path / "Chart.yaml").exists():
        pytest.fail(f"{path}: no chart there ({SHARED_CHARTS} holds the official charts, beside the repository)")
    return path


@dataclass
class Platform:
    cloud: str
    metrics: str
    objects: list[Obj]  # the component's own
    releases: dict[str, Rendered]  # release name -> rendered chart
    extras: bool = False  # Kueue and an alert receiver on


# What the Pulumi program hands the platform from the stack's outputs (gpuburst_infra/program.py).
STACK_ENV = {
    "aws": {"GPUBURST_INTERRUPTION_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/gpuburst-dev"},
    "azure": {"AZURE_SUBSCRIPTION_ID": "00000000-0000-0000-0000-000000000000",
              "GPUBURST_AZURE_RESOURCE_GROUP": "gpuburst-azdev-rg", "GPUBURST_AKS_CLUSTER": "gpuburst-azdev"},
}


def _platform(cloud: str, metrics: str, **settings: Any) -> Platform:
    recorder = platform_program(cloud, metrics, scaler_env=STACK_ENV[cloud], **settings)
    rendered = {}
    for rel in releases(recorder):
        inputs = json.loads(json.dumps(rel.inputs))
        rendered[inputs["name"]] = render(_chart_dir(inputs["chart"]), inputs.get("values") or {}, inputs["name"],
                                          inputs["namespace"])
    return Platform(cloud, metrics, platform_objects(recorder), rendered, extras=bool(settings.get("kueue")))


@pytest.fixture(scope="module")
def platforms() -> list[Platform]:
    return [_platform(c, m) for c, m in VARIANTS] + [_platform(c, "prometheus-adapter", scaler_chart=True)
                                                    for c in ("aws", "azure")] + [
        # Kueue wired to gpuburst, and alerts sent to a receiver (its URL a stack secret).
        _platform("aws", "prometheus-adapter", kueue=True, alerts={"receiver": "slack"},
                  alerts_url="https://hooks.slack.com/services/T0/B0/X")]


def _device_plugin_values(tmp_path: Path, pools_file: str) -> dict[str, Any]:
    """The values `ansible-playbook gpuburst.cluster.cluster` passes to the device plugin chart."""
    variables = {"gpuburst_env_pools_file": str(ROOT / pools_file), "device_plugin_install": False,
                 "device_plugin_render_dir": str(tmp_path), "metrics_certs_kubernetes": False,
                 "metrics_certs_dir": str(tmp_path / "pki")}
    env = {**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_LOCALHOST_WARNING": "0"}
    env.pop("ANSIBLE_COLLECTIONS_PATH", None)
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "gpuburst.cluster.cluster",
                           "-e", json.dumps(variables)], capture_output=True, text=True, env=env, cwd=ROOT,
                          check=False, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    values: dict[str, Any] = yaml.safe_load((tmp_path / "device-plugin-values.yml").read_text())
    return values


@pytest.fixture(scope="module")
def device_plugin(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Rendered]:
    role = yaml.safe_load(DEVICE_PLUGIN_ROLE.read_text())
    out = {}
    for pools_file in POOL_FILES:
        values = _device_plugin_values(tmp_path_factory.mktemp("device-plugin"), pools_file)
        out[pools_file] = render(_chart_dir(role["device_plugin_chart"]), values, role["device_plugin_release"],
                                 role["device_plugin_namespace"])
    return out


@pytest.fixture(scope="module")
def our_chart_examples() -> dict[str, Rendered]:
    """charts/gpuburst-scaler/ci/*.yaml: the values the docs give for clusters made by hand."""
    return {p.name: render(OUR_CHART, yaml.safe_load(p.read_text()), "gpuburst-scaler", "gpuburst-system")
            for p in sorted((OUR_CHART / "ci").glob("*.yaml"))}


def _all_rendered(platforms: list[Platform], device_plugin: dict[str, Rendered],
                  our_chart_examples: dict[str, Rendered]) -> list[Rendered]:
    seen: dict[str, Rendered] = {}
    for r in [*(r for p in platforms for r in p.releases.values()), *device_plugin.values(),
              *our_chart_examples.values()]:
        seen.setdefault(json.dumps([r.chart, r.release, r.namespace, r.values], sort_keys=True), r)
    return list(seen.values())


# --- pins -----------------------------------------------------------------------------------------
def test_shared_charts_are_the_pinned_versions() -> None:
    for key, pin in CHARTS.items():
        assert chart_version(_chart_dir(pin.chart)) == pin.version, key
    role = yaml.safe_load(DEVICE_PLUGIN_ROLE.read_text())
    assert chart_version(_chart_dir(role["device_plugin_chart"])) == role["device_plugin_chart_version"]


def test_every_official_chart_and_ours_is_rendered(platforms: list[Platform],
                                                   device_plugin: dict[str, Rendered]) -> None:
    charts = {r.chart for p in platforms for r in p.releases.values()} | {r.chart for r in device_plugin.values()}
    assert charts == {"kube-prometheus-stack", "dcgm-exporter", "prometheus-adapter", "keda",
                      "nvidia-device-plugin", "kueue", OUR_CHART.name}
    for p in platforms:
        for r in p.releases.values():
            assert r.objects, f"{r.chart} rendered nothing"


# --- value keys -----------------------------------------------------------------------------------
def test_every_value_key_we_set_exists_in_the_chart(platforms: list[Platform], device_plugin: dict[str, Rendered],
                                                    our_chart_examples: dict[str, Rendered]) -> None:
    problems, unchecked = [], set()
    for r in _all_rendered(platforms, device_plugin, our_chart_examples):
        missing, absent = check_keys(r, _chart_dir(r.chart))
        problems += [f"{r.chart}: {k}" for k in missing]
        unchecked |= {f"{r.chart}: {k}" for k in absent}
    assert not problems, f"value keys the charts' values.yaml do not have: {problems}"
    # Only keys under the subcharts ../shared/charts lacks go unchecked, and the test names them.
    # (grafana 8.8's nodeSelector and kube-state-metrics 5.28's metricLabelsAllowlist are in their charts'
    # values.yaml upstream; ../shared/charts holds neither subchart.)
    assert unchecked == {"kube-prometheus-stack: kube-state-metrics.nodeSelector",
                         "kube-prometheus-stack: kube-state-metrics.metricLabelsAllowlist",
                         "kube-prometheus-stack: grafana.nodeSelector"}, unchecked


def test_a_misspelt_key_would_be_caught(platforms: list[Platform]) -> None:
    adapter = next(r for p in platforms for r in p.releases.values() if r.chart == "prometheus-adapter")
    bad = render(_chart_dir("prometheus-adapter"), {**adapter.values, "nodeSelectors": {"a": "b"},  # misspelt
                                                   "prometheus": {"url": "http://x", "prot": 1}},
                 adapter.release, adapter.namespace)
    missing, _ = check_keys(bad, _chart_dir("prometheus-adapter"))
    assert set(missing) == {"nodeSelectors", "prometheus.prot"}


# --- names that must line up ---------------------------------------------------------------------
def _service_port(r: Rendered, url: str, port: int | None = None) -> Obj:
    host = urlparse(url if "://" in url else f"http://{url}")
    name, namespace = host.hostname.split(".")[:2]  # type: ignore[union-attr]
    svc = r.one("Service", name)
    assert svc.namespace == namespace, f"{url}: the Service {name} is in {svc.namespace}"
    want = port if port is not None else host.port
    assert want in [p["port"] for p in svc.body["spec"]["ports"]], f"{url}: {name} has no port {want}"
    return svc


def _pods_of(r: Rendered, service: Obj) -> list[Obj]:
    workloads = [o for o in r.objects if o.kind in ("Deployment", "DaemonSet", "StatefulSet")]
    return [w for w in workloads
            if label_match({"matchLabels": service.body["spec"]["selector"]},
                           w.body["spec"]["template"]["metadata"].get("labels") or {})]


@pytest.mark.parametrize("path", ["prometheus-adapter", "keda"])
def test_metrics_consumers_name_the_service_that_serves_prometheus(platforms: list[Platform], path: str) -> None:
    for p in (p for p in platforms if p.metrics == path):
        prom = p.releases[component.PROMETHEUS_RELEASE]
        if path == "prometheus-adapter":
            values = p.releases["prometheus-adapter"].values["prometheus"]
            _service_port(prom, values["url"], values["port"])
        else:
            (so,) = [o for o in p.objects if o.kind == "ScaledObject"]
            _service_port(prom, so.body["spec"]["triggers"][0]["metadata"]["serverAddress"])
        # The operator runs Prometheus itself: the Service selects what its Prometheus resource names.
        (cr,) = prom.of("Prometheus")
        svc = prom.one("Service", urlparse(component.PROMETHEUS_URL).hostname.split(".")[0])  # type: ignore[union-attr]
        assert svc.body["spec"]["selector"]["operator.prometheus.io/name"] == cr.name


def test_the_apiservice_points_at_the_adapters_service(platforms: list[Platform]) -> None:
    for p in (p for p in platforms if p.metrics == "prometheus-adapter"):
        (api,) = [o for o in p.objects if o.kind == "APIService"]
        assert api.name == CUSTOM_METRICS_APISERVICE
        ref = api.body["spec"]["service"]
        adapter = p.releases["prometheus-adapter"]
        svc = adapter.one("Service", ref["name"])
        assert (svc.namespace, ref["name"]) == (MONITORING_NAMESPACE, ADAPTER_SERVICE) == (ref["namespace"], svc.name)
        (port,) = [x for x in svc.body["spec"]["ports"] if x["port"] == ref["port"]]
        (dep,) = _pods_of(adapter, svc)
        container = dep.body["spec"]["template"]["spec"]["containers"][0]
        assert port["targetPort"] in [c.get("name") for c in container["ports"]] + \
            [c["containerPort"] for c in container["ports"]]
        # It serves with the metrics_certs role's Secret (never the chart's own self-signed one).
        secrets = [v["secret"]["secretName"] for v in dep.body["spec"]["template"]["spec"]["volumes"] if "secret" in v]
        assert f"{ADAPTER_SERVICE}-tls" in secrets
        assert not adapter.of("APIService"), "the chart must not declare its own (unverified) APIService"


def _monitors(p: Platform) -> list[tuple[Obj, Rendered | None]]:
    out: list[tuple[Obj, Rendered | None]] = [(o, None) for o in p.objects if o.kind == "ServiceMonitor"]
    for r in p.releases.values():
        out += [(o, r) for o in r.of("ServiceMonitor") if r.chart in ("dcgm-exporter", OUR_CHART.name)]
    return out


def test_prometheus_selects_the_dcgm_and_scaler_service_monitors(platforms: list[Platform]) -> None:
    for p in platforms:
        prom = p.releases[component.PROMETHEUS_RELEASE]
        (cr,) = prom.of("Prometheus")
        spec = cr.body["spec"]
        monitors = _monitors(p)
        assert {m.name for m, _ in monitors} == {"dcgm-exporter", prender.SCALER_NAME}
        services = [o for o in p.objects if o.kind == "Service"] + \
            [o for r in p.releases.values() for o in r.of("Service")]
        for sm, _ in monitors:
            assert label_match(spec.get("serviceMonitorSelector"), sm.body["metadata"].get("labels") or {}), sm.ident()
            ns_selector = spec.get("serviceMonitorNamespaceSelector")
            assert ns_selector == {} or label_match(ns_selector, {"kubernetes.io/metadata.name": sm.namespace or ""})
            # ... and the ServiceMonitor finds its Service, on a named port the Service has.
            wanted = sm.body["spec"]["namespaceSelector"].get("matchNames") or [sm.namespace]
            found = [s for s in services if s.namespace in wanted
                     and label_match(sm.body["spec"]["selector"], s.body["metadata"].get("labels") or {})]
            assert found, f"{sm.ident()} selects no Service"
            for endpoint in sm.body["spec"]["endpoints"]:
                assert any(endpoint["port"] in [x.get("name") for x in s.body["spec"]["ports"]] for s in found)


def test_only_prometheus_may_reach_the_scaler(platforms: list[Platform]) -> None:
    for p in platforms:
        prom = p.releases[component.PROMETHEUS_RELEASE]
        prom_svc = prom.one("Service", f"{component.PROMETHEUS_RELEASE}-prometheus")
        ours = p.releases.get(prender.SCALER_NAME)
        objects = ours.objects if ours else p.objects
        (policy,) = [o for o in objects if o.kind == "NetworkPolicy"]
        (dep,) = [o for o in objects if o.kind == "Deployment" and o.name == prender.SCALER_NAME]
        spec = policy.body["spec"]
        assert spec["policyTypes"] == ["Ingress"]
        assert label_match(spec["podSelector"], dep.body["spec"]["template"]["metadata"]["labels"])
        (rule,) = spec["ingress"]
        (peer,) = rule["from"]
        # The peers are exactly the pods the Prometheus Service selects, in Prometheus' namespace.
        assert label_match(peer["podSelector"], prom_svc.body["spec"]["selector"])
        assert peer["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": prom.namespace}}
        ports = dep.body["spec"]["template"]["spec"]["containers"][0]["ports"]
        assert [x["port"] for x in rule["ports"]] == ["metrics"] and [x["name"] for x in ports] == ["metrics"]


def test_dcgm_exporter_and_the_device_plugin_land_on_gpu_nodes(platforms: list[Platform],
                                                                device_plugin: dict[str, Rendered]) -> None:
    for p in platforms:
        (ds,) = p.releases["dcgm-exporter"].of("DaemonSet")
        assert ds.body["spec"]["template"]["spec"]["nodeSelector"] == {keys.LABEL_GPU_PRESENT: "true"}
    for r in device_plugin.values():
        # The plugin, and its MPS control daemon (idle unless MPS sharing is configured).
        assert {o.name for o in r.of("DaemonSet")} == {r.release, f"{r.release}-mps-control-daemon"}
        for ds in r.of("DaemonSet"):
            pod = ds.body["spec"]["template"]["spec"]
            assert pod["nodeSelector"].items() >= {keys.LABEL_GPU_PRESENT: "true"}.items(), ds.ident()
            assert pod["tolerations"] == r.values["tolerations"], ds.ident()


# --- our chart ------------------------------------------------------------------------------------
def test_our_chart_rbac_is_exactly_the_scalers_permissions(platforms: list[Platform],
                                                           our_chart_examples: dict[str, Rendered]) -> None:
    charts = [p.releases[prender.SCALER_NAME] for p in platforms if prender.SCALER_NAME in p.releases]
    for r in [*charts, *our_chart_examples.values()]:
        assert r.one("ClusterRole").body["rules"] == permissions.KUBERNETES_RBAC_RULES
        assert r.one("Role").body["rules"] == permissions.KUBERNETES_ROLE_RULES
        sa = r.one("ServiceAccount")
        for binding in (r.one("ClusterRoleBinding"), r.one("RoleBinding")):
            assert binding.body["subjects"] == [{"kind": "ServiceAccount", "name": sa.name, "namespace": r.namespace}]
        assert r.one("ClusterRoleBinding").body["roleRef"]["name"] == r.one("ClusterRole").name
        assert r.one("RoleBinding").body["roleRef"]["name"] == r.one("Role").name


def _pod(o: Obj) -> dict[str, Any]:
    return dict(o.body["spec"]["template"]["spec"])


@pytest.mark.parametrize("cloud", ["aws", "azure"])
def test_the_chart_gives_the_scaler_the_platform_gives(platforms: list[Platform], cloud: str) -> None:
    """`scaler_chart: true` installs the same scaler as the component's own objects: one definition."""
    (objs,) = [p for p in platforms if p.cloud == cloud and p.metrics == "prometheus-adapter" and not p.extras
               and prender.SCALER_NAME not in p.releases]
    (chart,) = [p for p in platforms if p.cloud == cloud and prender.SCALER_NAME in p.releases]
    a = next(o for o in objs.objects if o.kind == "Deployment" and o.name == prender.SCALER_NAME)
    b = chart.releases[prender.SCALER_NAME].one("Deployment")
    assert a.body["spec"]["replicas"] == b.body["spec"]["replicas"] == 2
    pa, pb = _pod(a), _pod(b)
    for key in ("serviceAccountName", "priorityClassName", "nodeSelector", "securityContext"):
        assert pa[key] == pb[key], key
    ca, cb = pa["containers"][0], pb["containers"][0]
    for key in ("image", "securityContext", "ports", "resources", "livenessProbe", "readinessProbe", "volumeMounts"):
        assert ca[key] == cb[key], key
    assert {e["name"]: e.get("value") for e in ca["env"]} == {e["name"]: e.get("value") for e in cb["env"]}
    assert ca["args"][:3] == cb["args"][:3] == ["run", "--config", f"{prender.SCALER_CONFIG_DIR}/config.yaml"]
    assert a.body["spec"]["template"]["metadata"]["labels"].items() >= \
        {k: v for k, v in b.body["spec"]["template"]["metadata"]["labels"].items() if "azure" in k}.items()
    # The same config file: the pools that made the cloud groups.
    cfg_a = next(o for o in objs.objects if o.kind == "ConfigMap" and o.name == f"{prender.SCALER_NAME}-config")
    cfg_b = chart.releases[prender.SCALER_NAME].one("ConfigMap")
    parse = lambda o: parse_config(yaml.safe_load(o.body["data"]["config.yaml"]), o.ident())  # noqa: E731
    assert parse(cfg_a) == parse(cfg_b)
    sa_a = next(o for o in objs.objects if o.kind == "ServiceAccount" and o.name == prender.SCALER_NAME)
    sa_b = chart.releases[prender.SCALER_NAME].one("ServiceAccount")
    assert sa_a.body["metadata"]["annotations"] == sa_b.body["metadata"]["annotations"]


def test_our_chart_examples_are_scaler_configs(our_chart_examples: dict[str, Rendered]) -> None:
    assert our_chart_examples, "charts/gpuburst-scaler/ci/ has no example values"
    for name, r in our_chart_examples.items():
        cfg = parse_config(yaml.safe_load(r.one("ConfigMap").body["data"]["config.yaml"]), name)
        assert cfg.discover or cfg.pools
        dep = r.one("Deployment")
        assert dep.body["spec"]["replicas"] == 2
        assert r.one("PodDisruptionBudget").body["spec"]["maxUnavailable"] == 1
        sa = r.one("ServiceAccount").body["metadata"]["annotations"]
        assert sa.get(component.IRSA_ANNOTATION) or sa.get(component.WORKLOAD_IDENTITY_ANNOTATION)


def test_our_chart_pins_the_image_by_digest() -> None:
    digest = "sha256:" + "ab" * 32
    base = {"config": {"cluster": "c", "region": "us-east-1"}, "aws": {"roleArn": ROLE}}
    image = lambda extra: render(OUR_CHART, {**base, "image": extra}, "s", "ns").one("Deployment").body[  # noqa: E731
        "spec"]["template"]["spec"]["containers"][0]["image"]
    assert image({"repository": "registry.example/scaler", "digest": digest}) == f"registry.example/scaler@{digest}"
    assert image({"repository": "r/s", "tag": "1.2.3"}) == "r/s:1.2.3"
    app_version = yaml.safe_load((OUR_CHART / "Chart.yaml").read_text())["appVersion"]
    assert image({}) == f"ghcr.io/gpuburst/scaler:{app_version}"


ROLE = "arn:aws:iam::123456789012:role/gpuburst-scaler"


@pytest.mark.parametrize(("values", "message"), [
    ({"aws": {"roleArn": ROLE}}, "config.cluster: set the cluster's name"),
    ({"config": {"cluster": "c"}}, "aws.roleArn: the IAM role (IRSA)"),
    ({"config": {"cluster": "c", "cloud": "azure"}}, "azure.clientId"),
    ({"config": {"cluster": "c", "discover": False}, "aws": {"roleArn": ROLE}}, "config: give pools, or discover"),
    ({"config": {"cluster": "c"}, "aws": {"roleArn": ROLE}, "image": {"digest": "sha256:12"}},
     "at '/image/digest': 'sha256:12' does not match pattern"),
    # values.schema.json: a misspelt value is refused, not ignored.
    ({"config": {"cluster": "c"}, "aws": {"roleArn": ROLE}, "replica": 3},
     "additional properties 'replica' not allowed"),
    ({"config": {"cluster": "c"}, "aws": {"rolearn": ROLE}}, "at '/aws': additional properties 'rolearn' not allowed"),
    ({"config": {"cluster": "c", "cloud": "gcp"}, "aws": {"roleArn": ROLE}}, "at '/config/cloud'"),
])
def test_our_chart_refuses_bad_values_with_one_clear_line(values: dict[str, Any], message: str) -> None:
    import helm_python as helm

    with pytest.raises(helm.HelmError) as err:
        render(OUR_CHART, values, "s", "ns")
    assert message in str(err.value)


# --- every object, every Kubernetes version -------------------------------------------------------
def test_every_object_is_valid_for_every_kubernetes_version_the_stacks_allow(
        platforms: list[Platform], device_plugin: dict[str, Rendered],
        our_chart_examples: dict[str, Rendered]) -> None:
    rendered = _all_rendered(platforms, device_plugin, our_chart_examples)
    crds = [c for r in rendered for c in r.crds] + [o.body for r in rendered for o in r.objects]
    validator = Validator(crds)
    objects = [Obj(f"{r.chart}: crds/", c) for r in rendered for c in r.crds]
    objects += [o for r in rendered for o in r.objects]
    seen = set()
    for p in platforms:
        for o in p.objects:
            key = json.dumps(o.body, sort_keys=True)
            if key not in seen:
                seen.add(key)
                objects.append(o)
    problems = [msg for v in VERSIONS for o in objects if (msg := validator.validate(o, v))]
    assert not problems, "\n".join([f"{len(problems)} invalid:", *problems[:30]])
    custom = sum(1 for o in objects if (o.body["apiVersion"], o.kind) in validator.custom)
    COUNTS.update(objects=len(objects), versions=len(VERSIONS), custom=custom,
                  validations=len(objects) * len(VERSIONS))
    kinds = {o.kind for o in objects}
    assert {"ServiceMonitor", "ScaledObject", "PrometheusRule", "Prometheus", "NetworkPolicy", "APIService",
            "CustomResourceDefinition", "ClusterQueue", "AdmissionCheck", "ProvisioningRequestConfig",
            "LocalQueue", "ResourceFlavor"} <= kinds
    # The ProvisioningRequest CRD the platform ships takes what Kueue creates and what the scaler writes back.
    request = Obj("example", {
        "apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
        "metadata": {"name": "train-4x8-gpuburst-1", "namespace": "gpu-examples"},
        "spec": {"provisioningClassName": "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
                 "podSets": [{"podTemplateRef": {"name": "ppt-train-4x8-gpuburst-1-main"}, "count": 4}],
                 "parameters": {"ValidUntilSeconds": "3600"}},
        "status": {"conditions": [{"type": "Provisioned", "status": "True", "reason": "Provisioned",
                                   "message": "all 4 pods fit on nodes that are up",
                                   "lastTransitionTime": "2026-11-24T01:00:00Z"}]}})
    ours = Validator([o.body for p in platforms for o in p.objects])  # the CRDs the component declares
    assert ("autoscaling.x-k8s.io/v1", "ProvisioningRequest") in ours.custom
    assert ours.validate(request, VERSIONS[0]) is None
    request.body["spec"]["podSets"][0]["count"] = 0
    assert "count" in (ours.validate(request, VERSIONS[0]) or "")


def test_validation_would_catch_a_bad_object(platforms: list[Platform]) -> None:
    p = platforms[0]
    dep = next(o for o in p.objects if o.kind == "Deployment")
    bad = json.loads(json.dumps(dep.body))
    bad["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy_"] = "Always"
    validator = Validator(p.releases[component.PROMETHEUS_RELEASE].crds)
    assert "imagePullPolicy_" in (validator.validate(Obj("test", bad), VERSIONS[0]) or "")
    sm = next(o for o in p.objects if o.kind == "ServiceMonitor")
    bad_sm = json.loads(json.dumps(sm.body))
    bad_sm["spec"]["endpoints"][0]["intervall"] = "30s"
    assert "intervall" in (validator.validate(Obj("test", bad_sm), VERSIONS[0]) or "")


@pytest.mark.parametrize("version", VERSIONS)
def test_our_chart_passes_helm_lint_strict(version: str) -> None:
    import helm_python as helm

    for example in sorted((OUR_CHART / "ci").glob("*.yaml")):
        report = helm.lint(str(OUR_CHART), yaml.safe_load(example.read_text()), strict=True,
                           namespace="gpuburst-system", kube_version=f"v{version}.0")
        assert not report["errors"], (example.name, report["errors"])
        # 1 = info ("icon is recommended"); warnings (2) and errors (3) fail.
        assert not [m for m in report["messages"] if m["severity"] >= 2], (example.name, report["messages"])
