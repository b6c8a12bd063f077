"""The alerts and the dashboard: built from the metrics the scaler really exports, checked and unit-tested
with promtool (Debian's `prometheus` package) on recorded samples: each alert fires when its condition
holds long enough and stays quiet otherwise; the dashboard's queries give the figures a user reads."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from gpuburst_platform import monitoring
from platform_helpers import AWS_POOLS, ROOT, scaler_config

from scaler.configfile import load_config
from scaler.core.model import keys
from scaler.metrics import Metrics

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (Debian: apt-get install "
                                    "prometheus); the rules are not checked here")
CONFIG = load_config(AWS_POOLS)  # provision_timeout 900 s, scan 10 s
GROUPS = monitoring.rule_groups(CONFIG, monitoring.AlertSettings())


def exported() -> set[str]:
    """Every series name a Metrics() registry can expose (counters with _total, histograms' parts)."""
    names = set()
    for family in Metrics().registry.collect():
        names.add(family.name)
        if family.type == "counter":
            names.add(family.name + "_total")
        if family.type == "histogram":
            names |= {family.name + s for s in ("_bucket", "_count", "_sum")}
    return names


def test_every_metric_the_rules_and_the_dashboard_read_is_exported() -> None:
    exprs = [r["expr"] for g in GROUPS for r in g["rules"]]
    exprs += [t["expr"] for p in monitoring.dashboard()["panels"] for t in p["targets"]]
    used = set().union(*(monitoring.metric_names(e) for e in exprs))
    assert used - exported() == set()
    # Every alert the issue asks for is there.
    assert {r["alert"] for r in GROUPS[1]["rules"]} == {
        "GpuburstScaleUpFailing", "GpuburstPodsFitNoPool", "GpuburstOnDemandFallbackActive", "GpuburstPoolAtMax",
        "GpuburstCostCapReached", "GpuburstInstancesNeverRegistered", "GpuburstDrainBlockedByPDB",
        "GpuburstScalerNotLeading", "GpuburstScalerNotPassing", "GpuburstGpuRepairPaused"}


def test_thresholds_follow_the_config() -> None:
    rules = {r["alert"]: r for r in GROUPS[1]["rules"]}
    assert rules["GpuburstInstancesNeverRegistered"]["for"] == "16m"  # 900 s timeout + two 10 s passes
    tuned = monitoring.rule_groups(CONFIG, monitoring.AlertSettings(unschedulable_for="45m"))
    assert {r["alert"]: r["for"] for r in tuned[1]["rules"]}["GpuburstPodsFitNoPool"] == "45m"


def _render(template: str, labels: dict[str, str], value: str) -> str:
    """Prometheus' annotation templating, for the two forms the rules use."""
    out = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels.get(m.group(1), ""), template)
    return out.replace("{{ $value }}", value)


def _expect(alert: str, value: str = "1", **labels: str) -> dict[str, Any]:
    rule = next(r for r in GROUPS[1]["rules"] if r["alert"] == alert)
    return {"exp_labels": {**rule["labels"], **labels},
            "exp_annotations": {k: _render(v, labels, value) for k, v in rule["annotations"].items()}}


def _series(name: str, values: str, **labels: str) -> dict[str, str]:
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return {"series": f"{name}{{{inner}}}", "values": values}


HEALTHY = [  # a scaler that leads and passes every minute (the timestamp is the evaluation time)
    _series("gpuburst_leader", "1x40", pod="scaler-0"),
    _series("gpuburst_last_pass_timestamp_seconds", "0+60x40", pod="scaler-0"),
]


def _test(series: list[dict[str, str]], alerts: list[tuple[str, str, list[dict[str, Any]]]]) -> dict[str, Any]:
    return {"interval": "1m", "input_series": HEALTHY + series,
            "alert_rule_test": [{"eval_time": at, "alertname": name, "exp_alerts": exp} for name, at, exp in alerts]}


TESTS = [
    # A spot pool's launches fail: the scale-up alert after 5 minutes, the fallback alert at once.
    _test([_series("gpuburst_launch_failures_total", "0 1 2 2 2 2 2 2 2 2 2 2", pool="gpu-spot-a", kind="capacity"),
           _series("gpuburst_fallback_active", "1x10", pool="gpu-spot-a", fallback="gpu-od")],
          [("GpuburstScaleUpFailing", "4m", []),
           ("GpuburstScaleUpFailing", "8m", [_expect("GpuburstScaleUpFailing", pool="gpu-spot-a")]),
           ("GpuburstOnDemandFallbackActive", "1m",
            [_expect("GpuburstOnDemandFallbackActive", pool="gpu-spot-a", fallback="gpu-od")])]),
    # Pods that fit no pool: quiet for the first 15 minutes, then the alert with their count.
    _test([_series("gpuburst_pending_pods", "3x30", reason="unschedulable")],
          [("GpuburstPodsFitNoPool", "14m", []),
           ("GpuburstPodsFitNoPool", "16m", [_expect("GpuburstPodsFitNoPool", value="3")])]),
    # Pods waiting for a pool at its max; the cost cap reached.
    _test([_series("gpuburst_pending_pods", "2x30", reason="waiting"),
           _series("gpuburst_pool_desired_nodes", "20x30", pool="gpu-od"),
           _series("gpuburst_pool_max_nodes", "20x30", pool="gpu-od"),
           _series("gpuburst_pool_desired_nodes", "3x30", pool="gpu1-od"),
           _series("gpuburst_pool_max_nodes", "10x30", pool="gpu1-od"),
           _series("gpuburst_cost_per_hour", "52x30"),
           _series("gpuburst_limit", "50x30", limit="max_cost_per_hour")],
          [("GpuburstPoolAtMax", "12m", [_expect("GpuburstPoolAtMax", pool="gpu-od")]),
           ("GpuburstCostCapReached", "7m", [_expect("GpuburstCostCapReached", value="52")])]),
    # No pending pods: a full pool is not news; a cost under its cap neither.
    _test([_series("gpuburst_pending_pods", "0x30", reason="waiting"),
           _series("gpuburst_pool_desired_nodes", "20x30", pool="gpu-od"),
           _series("gpuburst_pool_max_nodes", "20x30", pool="gpu-od"),
           _series("gpuburst_cost_per_hour", "49x30"),
           _series("gpuburst_limit", "50x30", limit="max_cost_per_hour")],
          [("GpuburstPoolAtMax", "20m", []), ("GpuburstCostCapReached", "20m", [])]),
    # Nodes booting for 4 minutes are normal; instances unregistered past the provision timeout are not.
    _test([_series("gpuburst_nodes", "2 2 2 2 0x20", pool="gpu-od", state="requested"),
           _series("gpuburst_nodes", "1x30", pool="gpu-spot-a", state="requested")],
          [("GpuburstInstancesNeverRegistered", "15m", []),
           ("GpuburstInstancesNeverRegistered", "18m", [_expect("GpuburstInstancesNeverRegistered",
                                                                pool="gpu-spot-a")])]),
    # Evictions refused by a PDB every minute.
    _test([_series("gpuburst_evictions_total", "0+1x40", result="blocked")],
          [("GpuburstDrainBlockedByPDB", "10m", []),
           ("GpuburstDrainBlockedByPDB", "20m", [_expect("GpuburstDrainBlockedByPDB")])]),
    # A pool's repairs paused for 3 minutes (a budget freed as a node was replaced) is quiet; paused on is not.
    _test([_series("gpuburst_gpu_repair_paused", "1 1 1 0 0 1x20", pool="gpu8-od"),
           _series("gpuburst_gpu_repair_paused", "0x25", pool="gpu-od")],
          [("GpuburstGpuRepairPaused", "4m", []),
           ("GpuburstGpuRepairPaused", "12m", [_expect("GpuburstGpuRepairPaused", pool="gpu8-od")])]),
    # A healthy scaler raises neither scaler alert.
    _test([], [("GpuburstScalerNotLeading", "30m", []), ("GpuburstScalerNotPassing", "30m", [])]),
    # No replica leads, and the last pass is 10 minutes old.
    {"interval": "1m",
     "input_series": [_series("gpuburst_leader", "0x40", pod="scaler-0"),
                      _series("gpuburst_last_pass_timestamp_seconds", "0x40", pod="scaler-0")],
     "alert_rule_test": [
         {"eval_time": "10m", "alertname": "GpuburstScalerNotLeading", "exp_alerts": [
             _expect("GpuburstScalerNotLeading")]},
         {"eval_time": "10m", "alertname": "GpuburstScalerNotPassing", "exp_alerts": [
             _expect("GpuburstScalerNotPassing")]}]},
    # No scaler series at all (the Deployment is gone): both still fire.
    {"interval": "1m", "input_series": [_series("up", "1x20", job="other")],
     "alert_rule_test": [
         {"eval_time": "10m", "alertname": "GpuburstScalerNotLeading", "exp_alerts": [
             _expect("GpuburstScalerNotLeading")]},
         {"eval_time": "10m", "alertname": "GpuburstScalerNotPassing", "exp_alerts": [
             _expect("GpuburstScalerNotPassing")]}]},
]

# The dashboard's queries on a fleet of 3 ready + 1 draining 4-GPU spot nodes, 1 ready on-demand one (and 2
# requested that do not count), GPUs 80% / 40% busy on a spot node and 10% on the on-demand one.
FLEET = [
    _series("gpuburst_pool_info", "1x10", pool="gpu-spot-a", capacity_type="spot", role="gpu", fallback="gpu-od"),
    _series("gpuburst_pool_info", "1x10", pool="gpu-od", capacity_type="on-demand", role="gpu", fallback=""),
    _series("gpuburst_pool_gpus_per_node", "4x10", pool="gpu-spot-a"),
    _series("gpuburst_pool_gpus_per_node", "4x10", pool="gpu-od"),
    _series("gpuburst_nodes", "3x10", pool="gpu-spot-a", state="ready"),
    _series("gpuburst_nodes", "1x10", pool="gpu-spot-a", state="draining"),
    _series("gpuburst_nodes", "1x10", pool="gpu-od", state="ready"),
    _series("gpuburst_nodes", "2x10", pool="gpu-od", state="requested"),
    _series(monitoring.DCGM_GPU_UTIL, "80x10", node="n1", gpu="0", Hostname="dcgm-exporter-abc"),
    _series(monitoring.DCGM_GPU_UTIL, "40x10", node="n1", gpu="1", Hostname="dcgm-exporter-abc"),
    _series(monitoring.DCGM_GPU_UTIL, "10x10", node="n2", gpu="0", Hostname="dcgm-exporter-def"),
    _series("kube_node_labels", "1x10", node="n1", **{monitoring.NODE_POOL_LABEL: "gpu-spot-a"}),
    _series("kube_node_labels", "1x10", node="n2", **{monitoring.NODE_POOL_LABEL: "gpu-od"}),
    _series("gpuburst_gpu_unhealthy_nodes", "0 1 1 1 2x10", pool="gpu-spot-a", pod="scaler-0"),
]


def _panel_expr(title: str) -> str:
    return str(next(p for p in monitoring.dashboard()["panels"] if p["title"] == title)["targets"][0]["expr"])


DASHBOARD_TEST = {"interval": "1m", "input_series": FLEET, "promql_expr_test": [
    {"expr": _panel_expr("GPUs by pool and capacity type"), "eval_time": "5m", "exp_samples": [
        {"labels": '{pool="gpu-spot-a",capacity_type="spot"}', "value": 16},
        {"labels": '{pool="gpu-od",capacity_type="on-demand"}', "value": 4}]},
    {"expr": _panel_expr("Spot share of GPUs"), "eval_time": "5m", "exp_samples": [{"labels": "{}", "value": 0.8}]},
    {"expr": _panel_expr("GPU utilisation per pool (DCGM)"), "eval_time": "5m", "exp_samples": [
        {"labels": '{pool="gpu-spot-a"}', "value": 60}, {"labels": '{pool="gpu-od"}', "value": 10}]},
    {"expr": _panel_expr("Unhealthy GPU nodes and repairs"), "eval_time": "5m", "exp_samples": [
        {"labels": '{pool="gpu-spot-a"}', "value": 2}]},
]}


def _promtool(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                          check=False)


@needs_promtool
def test_promtool_checks_the_rules(tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": GROUPS}), encoding="utf-8")
    done = _promtool(tmp_path, "check", "rules", "rules.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 11 rules found" in done.stdout


@needs_promtool
def test_promtool_unit_tests_on_recorded_samples(tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": GROUPS}), encoding="utf-8")
    tests = {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": [*TESTS, DASHBOARD_TEST]}
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests, sort_keys=False), encoding="utf-8")
    done = _promtool(tmp_path, "test", "rules", "tests.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


@needs_promtool
def test_a_wrong_expectation_fails(tmp_path: Path) -> None:
    """The unit tests can fail: an alert expected where it cannot fire is reported."""
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": GROUPS}), encoding="utf-8")
    wrong = _test([_series("gpuburst_pending_pods", "3x30", reason="unschedulable")],
                  [("GpuburstPodsFitNoPool", "5m", [_expect("GpuburstPodsFitNoPool", value="3")])])
    tests = {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": [wrong]}
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests), encoding="utf-8")
    done = _promtool(tmp_path, "test", "rules", "tests.yaml")
    assert done.returncode == 1 and "GpuburstPodsFitNoPool" in done.stdout + done.stderr


def test_alertmanager_routes_gpuburst_alerts_to_the_receiver() -> None:
    slack = monitoring.alertmanager_config(monitoring.AlertSettings(receiver="slack", slack_channel="#ml-oncall"),
                                           "/etc/alertmanager/secrets/gpuburst-alerts/url")
    [receiver] = [r for r in slack["receivers"] if r["name"] == "gpuburst"]
    assert receiver["slack_configs"][0]["api_url_file"] == "/etc/alertmanager/secrets/gpuburst-alerts/url"
    assert receiver["slack_configs"][0]["channel"] == "#ml-oncall"
    assert slack["route"]["routes"][0]["receiver"] == "gpuburst"
    hook = monitoring.alertmanager_config(monitoring.AlertSettings(receiver="webhook"), "/u")
    assert next(r for r in hook["receivers"] if r["name"] == "gpuburst")["webhook_configs"][0]["url_file"] == "/u"
    none = monitoring.alertmanager_config(monitoring.AlertSettings(), "/u")
    assert none["route"]["routes"] == [] and none["receivers"] == [{"name": "null"}]


def test_dashboard_json_is_grafana_shaped() -> None:
    board = json.loads(json.dumps(monitoring.dashboard()))
    assert board["uid"] == monitoring.DASHBOARD_UID
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids)) == 7
    assert all(t["datasource"]["uid"] == "${datasource}" for t in board["panels"])


# --- what the platform declares --------------------------------------------------------------------
CHART_VALUES = yaml.safe_load((ROOT.parent / "shared" / "charts" / "kube-prometheus-stack" / "values.yaml")
                              .read_text(encoding="utf-8"))


def _prometheus_values(res: Any) -> dict[str, Any]:
    [prom] = [r for r in res.of("helm.sh/v3:Release") if r.inputs["chart"] == "kube-prometheus-stack"]
    return dict(prom.inputs["values"])


@pytest.mark.parametrize("cloud", ["aws", "azure"])
def test_the_platform_ships_the_rules_prometheus_selects_and_the_dashboard_grafana_loads(build: Any,
                                                                                        cloud: str) -> None:
    res = build(cloud)
    rule = res.one("monitoring.coreos.com/v1:PrometheusRule")
    assert rule.inputs["spec"]["groups"] == monitoring.rule_groups(scaler_config(cloud), monitoring.AlertSettings())
    values = _prometheus_values(res)
    assert values["prometheus"]["prometheusSpec"]["ruleSelectorNilUsesHelmValues"] is False  # any rule, ours too
    board = res.one("core/v1:ConfigMap", monitoring.DASHBOARD_NAME)
    sidecar = CHART_VALUES["grafana"]["sidecar"]["dashboards"]
    assert board.metadata["labels"][sidecar["label"]] == sidecar["labelValue"]
    assert json.loads(board.inputs["data"][f"{monitoring.DASHBOARD_NAME}.json"])["uid"] == monitoring.DASHBOARD_UID
    assert values["grafana"]["enabled"] is True and values["grafana"]["adminPassword"] == ""  # no default password
    # The dashboard's pool join needs the pool label on kube_node_labels and the node on DCGM's series.
    assert values["kube-state-metrics"]["metricLabelsAllowlist"] == [f"nodes=[{keys.LABEL_POOL}]"]
    [dcgm] = [r for r in res.of("helm.sh/v3:Release") if r.inputs["chart"] == "dcgm-exporter"]
    assert dcgm.inputs["values"]["serviceMonitor"]["relabelings"] == [monitoring.DCGM_NODE_RELABELING]


def test_alerts_go_to_the_receiver_whose_url_is_a_secret(build: Any) -> None:
    url = "https://hooks.slack.com/services/T000/B000/XXXX"
    res = build("aws", alerts_url=url, alerts={"receiver": "slack", "slack_channel": "#ml-oncall"})
    values = _prometheus_values(res)
    from gpuburst_platform import prometheus as component

    assert values["alertmanager"]["alertmanagerSpec"]["secrets"] == [component.ALERTS_SECRET]
    receiver = next(r for r in values["alertmanager"]["config"]["receivers"] if r["name"] == "gpuburst")
    assert receiver["slack_configs"][0]["api_url_file"] == component.ALERTS_URL_FILE
    assert url not in json.dumps(values)  # the URL never sits in the chart's values
    secret = res.one("core/v1:Secret", component.ALERTS_SECRET)
    data = secret.inputs["stringData"]
    # Pulumi's wire form of a secret value: the secret signature key, and the value inside.
    assert data["4dabf18193072939515e22adb298388d"] == "1b47061264138c4ac30d75fd1eb44270"
    assert data["value"] == {"url": url}
    assert component.ALERTS_URL_FILE.endswith(f"/{component.ALERTS_SECRET}/url")


def test_a_receiver_without_its_url_is_refused_before_anything_is_declared() -> None:
    from platform_helpers import platform_program

    with pytest.raises(Exception, match="gpuburst:alertsUrl"):
        platform_program("aws", alerts={"receiver": "webhook"})
