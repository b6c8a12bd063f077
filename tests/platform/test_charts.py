"""Every chart the platform installs, rendered offline with the values we really pass, then checked as
a cluster would: keys the chart does not know, names that must line up across charts, and every object
(rendered, or declared by the platform component itself) against the Kubernetes schemas of each version
the stacks allow (kubernetes-validate --strict) or the charts' CRD schemas.

The official charts come from ../shared/charts at the versions gpuburst_platform/versions.py and the
device-plugin role pin, or from tests/platform/charts/ for a pin ../shared/charts does not hold yet
(charts_helpers.official_chart); ours from charts/gpuburst-scaler. The values: the platform component's Helm
releases as it declares them (both clouds, both metrics paths; the scaler is always our chart), the
device plugin's as `ansible-playbook gpuburst.cluster.cluster` writes them, our chart's ci/*.yaml
examples and the values every chart user expects (STANDARD_VALUES). Our chart's generated files
(RBAC rules, the `config` schema) are checked against what `make chart` would write, and the schema
against the scaler's own config model.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import jsonschema
import pytest
import yaml
from charts_helpers import (
    OUR_CHART,
    REPO_CHARTS,
    SHARED_CHARTS,
    Obj,
    Rendered,
    Validator,
    chart_version,
    check_keys,
    is_our_chart,
    label_match,
    official_chart,
    platform_objects,
    releases,
    render,
)
from gpuburst_infra.stack_models import DEFAULT_KUBERNETES, DRA_MIN_KUBERNETES, SUPPORTED_KUBERNETES
from gpuburst_platform import prometheus as component
from gpuburst_platform import render as prender
from gpuburst_platform.scaler_chart import IRSA_ANNOTATION, WORKLOAD_IDENTITY_ANNOTATION
from gpuburst_platform.settings import ADAPTER_SERVICE, CUSTOM_METRICS_APISERVICE, MONITORING_NAMESPACE
from gpuburst_platform.versions import CHARTS
from platform_helpers import AWS_DRA_POOLS, AZURE_DRA_POOLS, ROOT, STACK_ENV, platform_program

from scaler import permissions
from scaler.core.config.settings import ConfigError, parse_config
from scaler.core.model import keys

VERSIONS = sorted({v for vs in SUPPORTED_KUBERNETES.values() for v in vs}, key=lambda v: tuple(map(int, v.split("."))))
VARIANTS = [("aws", "prometheus-adapter"), ("azure", "prometheus-adapter"), ("aws", "keda"), ("azure", "keda")]
DEVICE_PLUGIN_ROLE = ROOT / "ansible_collections/gpuburst/cluster/roles/device_plugin/defaults/main.yml"
POOL_FILES = ["examples/pools-aws.yaml", "examples/pools-azure.yaml"]
COUNTS: dict[str, int] = {}  # read by conftest's terminal summary
assert DEFAULT_KUBERNETES in VERSIONS


def _before(version: str, minimum: tuple[int, int]) -> bool:
    return tuple(map(int, version.split("."))) < minimum


def _pinned() -> dict[str, str]:
    """Official chart (by its name, an OCI reference by its last path segment) -> the version pinned."""
    role = yaml.safe_load(DEVICE_PLUGIN_ROLE.read_text())
    pins = {pin.chart.rsplit("/", 1)[-1]: pin.version for pin in CHARTS.values()}
    return {**pins, role["device_plugin_chart"]: role["device_plugin_chart_version"]}


def _chart_dir(chart: str) -> Path:
    """Our chart, or an official one at its pinned version (charts_helpers.official_chart)."""
    if chart == OUR_CHART.name or is_our_chart(chart):
        return OUR_CHART
    name = chart.rsplit("/", 1)[-1]
    try:
        return official_chart(name, _pinned()[name])
    except LookupError as err:
        pytest.fail(str(err))


@dataclass
class Platform:
    cloud: str
    metrics: str
    objects: list[Obj]  # the component's own
    releases: dict[str, Rendered]  # release name -> rendered chart
    extras: bool = False  # Kueue and an alert receiver on


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
    return [_platform(c, m) for c, m in VARIANTS] + [
        # Kueue wired to gpuburst, and alerts sent to a receiver (its URL a stack secret).
        _platform("aws", "prometheus-adapter", kueue=True, alerts={"receiver": "slack"},
                  alerts_url="https://hooks.slack.com/services/T0/B0/X"),
        # DRA pools beside device-plugin ones: NVIDIA's DRA driver too (tests/platform/test_dra_driver.py).
        _platform("aws", "prometheus-adapter", pools=AWS_DRA_POOLS),
        _platform("azure", "keda", pools=AZURE_DRA_POOLS)]


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
def test_every_pinned_chart_is_held_at_its_version() -> None:
    for name, version in _pinned().items():
        assert chart_version(_chart_dir(name)) == version, name
    # The repository holds a chart only while ../shared/charts lacks its pinned version (README there).
    for held in sorted(p for p in REPO_CHARTS.iterdir() if p.is_dir()):
        assert held.name in _pinned(), f"{held}: no pin names it: remove it"
        assert _chart_dir(held.name) == held, held
        shared = SHARED_CHARTS / held.name
        assert not (shared.exists() and chart_version(shared) == chart_version(held)), \
            f"{shared} now holds {chart_version(held)}: remove {held}"


def test_a_chart_at_another_version_is_never_rendered_for_the_pin() -> None:
    with pytest.raises(LookupError, match=r"official chart nvidia-dra-driver-gpu 25\.8\.0: .* is 25\.8\.1"):
        official_chart("nvidia-dra-driver-gpu", "25.8.0")


def test_every_official_chart_and_ours_is_rendered(platforms: list[Platform],
                                                   device_plugin: dict[str, Rendered]) -> None:
    charts = {r.chart for p in platforms for r in p.releases.values()} | {r.chart for r in device_plugin.values()}
    assert charts == {"kube-prometheus-stack", "dcgm-exporter", "prometheus-adapter", "keda",
                      "nvidia-device-plugin", "dra-driver-nvidia-gpu", "kueue", OUR_CHART.name}
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
        ours = p.releases[prender.SCALER_NAME]
        policy, dep = ours.one("NetworkPolicy"), ours.one("Deployment", prender.SCALER_NAME)
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
    charts = [p.releases[prender.SCALER_NAME] for p in platforms]
    for r in [*charts, *our_chart_examples.values()]:
        assert r.one("ClusterRole").body["rules"] == permissions.KUBERNETES_RBAC_RULES
        assert r.one("Role").body["rules"] == permissions.KUBERNETES_ROLE_RULES
        sa = r.one("ServiceAccount")
        for binding in (r.one("ClusterRoleBinding"), r.one("RoleBinding")):
            assert binding.body["subjects"] == [{"kind": "ServiceAccount", "name": sa.name, "namespace": r.namespace}]
        assert r.one("ClusterRoleBinding").body["roleRef"]["name"] == r.one("ClusterRole").name
        assert r.one("RoleBinding").body["roleRef"]["name"] == r.one("Role").name


def test_our_chart_examples_are_scaler_configs(our_chart_examples: dict[str, Rendered]) -> None:
    assert our_chart_examples, "charts/gpuburst-scaler/ci/ has no example values"
    for name, r in our_chart_examples.items():
        cfg = parse_config(yaml.safe_load(r.one("ConfigMap").body["data"]["config.yaml"]), name)
        assert cfg.discover or cfg.pools
        dep = r.one("Deployment")
        assert dep.body["spec"]["replicas"] == 2
        assert r.one("PodDisruptionBudget").body["spec"]["maxUnavailable"] == 1
        sa = r.one("ServiceAccount").body["metadata"]["annotations"]
        assert sa.get(IRSA_ANNOTATION) or sa.get(WORKLOAD_IDENTITY_ANNOTATION)


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


# What every chart user expects to set, each with a value that shows whether the templates honour it.
STANDARD_VALUES: dict[str, Any] = {
    "config": {"cluster": "ml-eks", "cloud": "aws", "region": "us-east-1", "discover": True},
    "aws": {"roleArn": ROLE},
    "fullnameOverride": "ml-scaler",
    "serviceAccount": {"create": False, "name": "platform-scaler"},
    "rbac": {"create": False},
    "podAnnotations": {"example.com/team": "ml-platform"},
    "podLabels": {"example.com/cost-center": "ml"},
    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]}]}]}}},
    "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                   "whenUnsatisfiable": "ScheduleAnyway"}],
    "extraArgs": ["--sync-timeout", "60"],
    "logFormat": "text",
    "logLevel": "WARNING",
}


@pytest.fixture(scope="module")
def our_chart_standard() -> Rendered:
    return render(OUR_CHART, STANDARD_VALUES, "platform", "ml-system")


def test_our_chart_honours_the_values_every_chart_user_expects(our_chart_standard: Rendered) -> None:
    import argparse

    from scaler import run_command

    r = our_chart_standard
    # fullnameOverride names every object; serviceAccount.create / rbac.create false: the user brings both.
    assert {o.name for o in r.objects} == {"ml-scaler", "ml-scaler-config"}
    brought = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
    assert not brought & {o.kind for o in r.objects}
    dep = r.one("Deployment", "ml-scaler").body
    meta, spec = dep["spec"]["template"]["metadata"], dep["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == "platform-scaler"
    assert meta["annotations"]["example.com/team"] == "ml-platform"
    assert "gpuburst.io/config-sha256" in meta["annotations"]
    assert meta["labels"]["example.com/cost-center"] == "ml"
    assert label_match(dep["spec"]["selector"], meta["labels"])
    assert spec["affinity"] == STANDARD_VALUES["affinity"]  # replaces the default anti-affinity
    (spread,) = spec["topologySpreadConstraints"]
    assert spread.items() >= STANDARD_VALUES["topologySpreadConstraints"][0].items()
    assert label_match(spread["labelSelector"], meta["labels"])  # a selector is added: it counts the scaler's pods
    assert spec["volumes"][0]["configMap"]["name"] == r.one("ConfigMap").name
    for selecting in (r.one("Service").body["spec"]["selector"], r.one("PodDisruptionBudget").body["spec"]["selector"],
                      r.one("NetworkPolicy").body["spec"]["podSelector"]):
        assert label_match(selecting if "matchLabels" in selecting else {"matchLabels": selecting}, meta["labels"])
    (c,) = spec["containers"]
    parser = argparse.ArgumentParser()
    run_command.add_arguments(parser)
    args = parser.parse_args(c["args"][1:])  # extraArgs, logFormat and logLevel are flags the scaler takes
    assert (args.sync_timeout, args.log_format, args.log_level) == (60.0, "text", "WARNING")


def test_our_chart_runs_shadow_mode_with_a_record_it_can_write() -> None:
    import argparse

    from scaler import run_command

    values = {**yaml.safe_load((OUR_CHART / "ci" / "eksctl-discover.yaml").read_text()),
              "shadow": {"enabled": True, "sizeLimit": "2Gi"}}
    spec = render(OUR_CHART, values, "gpuburst-scaler", "gpuburst-system").one(
        "Deployment", "gpuburst-scaler").body["spec"]["template"]["spec"]
    (c,) = spec["containers"]
    parser = argparse.ArgumentParser()
    run_command.add_arguments(parser)
    record = Path(parser.parse_args(c["args"][1:]).shadow)
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    assert c["securityContext"]["readOnlyRootFilesystem"] is True  # so the record has a volume of its own
    assert mounts["shadow"] == str(record.parent)
    assert {v["name"]: v for v in spec["volumes"]}["shadow"]["emptyDir"] == {"sizeLimit": "2Gi"}


def _notes(values: dict[str, Any]) -> str:
    import helm_python as helm

    with helm.Chart.load(str(OUR_CHART)) as chart:
        out = chart.render(values, name="gpuburst-scaler", namespace="gpuburst-system", is_install=True)
    return next(text for name, text in out.items() if name.endswith("NOTES.txt"))


def test_the_eksctl_example_runs_on_eksctl_nodes_and_notes_say_what_to_check_when_pending() -> None:
    values = yaml.safe_load((OUR_CHART / "ci" / "eksctl-discover.yaml").read_text())
    # eksctl labels its nodes with their group's name; gpuburst's own role label is not there.
    assert keys.LABEL_ROLE not in values["nodeSelector"] and "alpha.eksctl.io/nodegroup-name" in values["nodeSelector"]
    defaults = yaml.safe_load((OUR_CHART / "values.yaml").read_text())
    assert defaults["nodeSelector"] == {}  # a hand install schedules wherever there is room, not Pending
    notes = _notes(values)
    assert "If its pods stay Pending" in notes
    assert "kubectl get nodes -l alpha.eksctl.io/nodegroup-name=system" in notes
    assert "kubectl -n gpuburst-system describe pod -l app.kubernetes.io/instance=gpuburst-scaler" in notes


def test_our_chart_files_are_what_make_chart_writes() -> None:
    """files/rbac-rules.json (scaler.permissions) and values.schema.json's config (scaler.core.config.settings)."""
    from scaler import chart

    for name, text in chart.generated().items():
        assert (OUR_CHART / name).read_text() == text, f"charts/gpuburst-scaler/{name} is stale: run `make chart`"
    # The documented lists of limits, timings and scale_down keys in values.yaml are the model's.
    schema = json.loads((OUR_CHART / "values.schema.json").read_text())
    comments = (OUR_CHART / "values.yaml").read_text()
    for section in ("Limits", "Timings", "ScaleDownSettings"):
        for key in schema["definitions"][section]["properties"]:
            assert key in comments, f"values.yaml does not mention config.{section}.{key}"


AKS_POOLS = OUR_CHART / "ci" / "aks-pools.yaml"


@pytest.mark.parametrize(("config", "key", "message"), [
    ({"expandr": "least-waste"}, "expandr", "at '/config': additional properties 'expandr' not allowed"),
    ({"timings": {"provision_timeout": 60}}, "timings.provision_timeout",
     "at '/config/timings/provision_timeout': minimum: got 60, want 250"),
    ({"timings": {"provisoin_timeout": 600}}, "timings.provisoin_timeout",
     "at '/config/timings': additional properties 'provisoin_timeout' not allowed"),
    ({"scale_down": {"utilization_threshold": 1.5}}, "scale_down.utilization_threshold",
     "at '/config/scale_down/utilization_threshold': maximum: got 1.5, want 1"),
    ({"limits": {"max_gpus": -1}}, "limits.max_gpus", "at '/config/limits/max_gpus'"),
])
def test_our_chart_refuses_a_config_the_scaler_would_refuse_naming_the_key(
        config: dict[str, Any], key: str, message: str) -> None:
    import helm_python as helm

    values = yaml.safe_load(AKS_POOLS.read_text())
    values["config"].update(config)
    with pytest.raises(ConfigError, match=re.escape(key)):  # the scaler refuses it at start ...
        parse_config(values["config"], "values")
    with pytest.raises(helm.HelmError) as err:  # ... and the install refuses it first
        render(OUR_CHART, values, "s", "ns")
    assert message in str(err.value)


def _schema_accepts(config: dict[str, Any]) -> bool:
    validator = jsonschema.Draft7Validator(json.loads((OUR_CHART / "values.schema.json").read_text()))
    return validator.is_valid({"config": config})


def _model_accepts(config: dict[str, Any]) -> bool:
    try:
        parse_config(config, "values")
    except ConfigError:
        return False
    return True


def _configs() -> dict[str, dict[str, Any]]:
    """(The stacks' configs reach our chart through the platform: test_stacks.py renders it for each.)"""
    files = [*sorted((ROOT / "examples").glob("pools-*.yaml")), *sorted((ROOT / "examples").glob("scaler-*.yaml")),
             ROOT / "tests" / "platform" / "pools-azure.yaml"]
    out = {str(f.relative_to(ROOT)): yaml.safe_load(f.read_text()) for f in files}
    examples = sorted((OUR_CHART / "ci").glob("*.yaml"))
    out.update({f"{p.name}: config": yaml.safe_load(p.read_text())["config"] for p in examples})
    return out


def test_the_config_schema_accepts_every_config_the_repository_ships() -> None:
    configs = _configs()
    assert len(configs) >= 7
    for name, config in configs.items():
        assert _model_accepts(config), name
        assert _schema_accepts(config), name


AKS = {"cluster": "c", "cloud": "azure", "region": "eastus", "pools": [
    {"name": "system", "role": "system", "vm_size": "Standard_D4s_v5", "zones": ["1"], "max": 3},
    {"name": "t4", "vm_size": "Standard_NC8as_T4_v3", "zone": "1", "max_size": 4, "taints": ["team=ml:NoSchedule"]}]}
CPU_ONLY = {**AKS, "pools": AKS["pools"][:1]}
DISCOVER = {"cluster": "c", "cloud": "aws", "discover": True}


@pytest.mark.parametrize(("config", "accepted"), [
    (AKS, True),
    ({**AKS, "timings": {"provision_timeout": 249}}, False),  # GPU boot 240 + one pass 10
    ({**AKS, "timings": {"provision_timeout": 250}}, True),
    ({**CPU_ONLY, "timings": {"provision_timeout": 129}}, False),  # CPU boot 120 + one pass 10
    ({**CPU_ONLY, "timings": {"provision_timeout": 130}}, True),
    ({**DISCOVER, "timings": {"provision_timeout": 60}}, True),  # no pool declared: no boot to wait for
    ({**AKS, "timings": {"gpu_boot": 100, "provision_timeout": 140}}, True),  # both boots plus a pass fit
    ({**AKS, "timings": {"scan_interval": 0}}, False),
    ({**AKS, "spot_price_factor": 0}, False),
    ({**AKS, "pools": [{**AKS["pools"][0], "max": -1}]}, False),
    ({**AKS, "pools": [{**AKS["pools"][0], "colour": "red"}]}, False),
    ({**AKS, "pools": [{**AKS["pools"][0], "role": "cpu"}]}, False),
    ({"cloud": "aws", "discover": True}, False),
])
def test_the_config_schema_and_the_scaler_agree(config: dict[str, Any], accepted: bool) -> None:
    assert _model_accepts(config) is accepted
    assert _schema_accepts(config) is accepted


def test_the_config_schema_leaves_boot_times_other_than_the_defaults_to_the_scaler() -> None:
    """JSON schema cannot add gpu_boot and scan_interval: with other boot or scan times the scaler alone
    refuses a provision_timeout shorter than one boot plus one pass."""
    config = {**AKS, "timings": {"gpu_boot": 300, "provision_timeout": 280}}
    assert not _model_accepts(config)
    assert _schema_accepts(config)


@pytest.mark.parametrize(("values", "message"), [
    ({"aws": {"roleArn": ROLE}}, "at '/config': missing property 'cluster'"),
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
        our_chart_examples: dict[str, Rendered], our_chart_standard: Rendered) -> None:
    rendered = _all_rendered(platforms, device_plugin, {**our_chart_examples, "standard": our_chart_standard})
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
    # resource.k8s.io/v1 (the DRA driver's DeviceClasses) is served from 1.34; a stack with a DRA pool on
    # an older version is refused (gpuburst_infra.stack_models), so those objects are checked from 1.34 on.
    problems = [msg for v in VERSIONS for o in objects
                if not (_before(v, DRA_MIN_KUBERNETES) and str(o.body.get("apiVersion")).startswith("resource.k8s.io/"))
                and (msg := validator.validate(o, v))]
    assert not problems, "\n".join([f"{len(problems)} invalid:", *problems[:30]])
    assert {o.kind for o in objects if str(o.body.get("apiVersion")) == "resource.k8s.io/v1"} == {"DeviceClass"}
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
    sm = p.releases[prender.SCALER_NAME].one("ServiceMonitor")
    bad_sm = json.loads(json.dumps(sm.body))
    bad_sm["spec"]["endpoints"][0]["intervall"] = "30s"
    assert "intervall" in (validator.validate(Obj("test", bad_sm), VERSIONS[0]) or "")


@pytest.mark.parametrize("version", VERSIONS)
def test_our_chart_passes_helm_lint_strict(version: str) -> None:
    import helm_python as helm

    examples = {p.name: yaml.safe_load(p.read_text()) for p in sorted((OUR_CHART / "ci").glob("*.yaml"))}
    shadow = {**examples["eksctl-discover.yaml"], "shadow": {"enabled": True}}
    for example, values in {**examples, "standard": STANDARD_VALUES, "shadow": shadow}.items():
        report = helm.lint(str(OUR_CHART), values, strict=True,
                           namespace="gpuburst-system", kube_version=f"v{version}.0")
        assert not report["errors"], (example, report["errors"])
        # 1 = info ("icon is recommended"); warnings (2) and errors (3) fail.
        assert not [m for m in report["messages"] if m["severity"] >= 2], (example, report["messages"])
