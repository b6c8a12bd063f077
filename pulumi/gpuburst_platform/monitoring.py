"""The alerts, Alertmanager routes and Grafana dashboard the platform ships, as plain data.

Built from the metric names `scaler/metrics.py` exports (tests/platform/test_monitoring.py checks every
`gpuburst_*` name used here against a live `Metrics()` registry, and runs the rules through promtool's
`check rules` and `test rules` on recorded samples). Thresholds that depend on the scaler's timings are
derived from its config, so an alert never fires on a node that is simply still booting.

Pure: no Pulumi here; the component wraps these in a PrometheusRule, an Alertmanager config and a
ConfigMap the Grafana sidecar picks up.
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from scaler.core.config.settings import ScalerConfig
from scaler.core.model import keys

RULE_NAME = "gpuburst-scaler"
DASHBOARD_NAME = "gpuburst-fleet"
DASHBOARD_UID = "gpuburst-fleet"
# The recording rule the dashboard and the spot-share panel read: GPUs on registered nodes, per pool and
# capacity type.
GPUS_BY_POOL = "gpuburst:gpus:by_pool_capacity_type"
DURATION = r"^[1-9][0-9]*(s|m|h)$"
# DCGM's per-GPU utilisation (dcgm-exporter's default counters).
DCGM_GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
# dcgm-exporter's ServiceMonitor relabeling: each GPU series carries the node it runs on, to join with
# kube_node_labels (the exporter's own Hostname label is its pod's name).
DCGM_NODE_RELABELING = {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node",
                        "action": "replace"}
# The Prometheus label kube-state-metrics gives a node label it is allowed to export (kube_node_labels).
NODE_POOL_LABEL = "label_" + re.sub(r"[^a-zA-Z0-9_]", "_", keys.LABEL_POOL)


class AlertSettings(BaseModel):
    """`gpuburst:platform.alerts`: where alerts go and the one threshold a team tunes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    receiver: Literal["none", "slack", "webhook"] = Field(
        default="none", description="slack: a Slack incoming webhook; webhook: any Alertmanager webhook receiver")
    slack_channel: str = Field(default="#gpuburst-alerts", pattern=r"^[#@][A-Za-z0-9._-]{1,80}$")
    unschedulable_for: str = Field(default="15m", pattern=DURATION,
                                   description="how long pods may fit no pool before the alert fires")


def _minutes(seconds: float) -> str:
    return f"{max(1, math.ceil(seconds / 60))}m"


def _alert(name: str, expr: str, duration: str, severity: str, summary: str, description: str) -> dict[str, Any]:
    return {"alert": name, "expr": expr, "for": duration, "labels": {"severity": severity},
            "annotations": {"summary": summary, "description": description}}


def rule_groups(config: ScalerConfig, alerts: AlertSettings) -> list[dict[str, Any]]:
    """The PrometheusRule's `spec.groups` (also a `promtool` rules file as they are)."""
    t = config.timings
    stale = max(120.0, 6 * t.scan_interval)  # the scaler's own readiness window
    gpus = ("sum by (pool, capacity_type) ("
            "sum by (pool) (gpuburst_nodes{state!=\"requested\"}) "
            "* on (pool) group_left (capacity_type) "
            "(gpuburst_pool_gpus_per_node * on (pool) group_left (capacity_type) gpuburst_pool_info))")
    recording = {"name": "gpuburst.records", "rules": [{"record": GPUS_BY_POOL, "expr": gpus}]}
    rules = [
        _alert("GpuburstScaleUpFailing",
               "sum by (pool) (increase(gpuburst_launch_failures_total[15m])) > 0 "
               "or max by (pool) (gpuburst_pool_backoff) > 0",
               "5m", "warning", "Scale-ups of pool {{ $labels.pool }} are failing",
               "The cloud refused launches in pool {{ $labels.pool }} (or the scaler is backing off it) for 5 "
               "minutes: see gpuburst_launch_failures_total by kind and the scaler's events."),
        _alert("GpuburstPodsFitNoPool", 'sum(gpuburst_pending_pods{reason="unschedulable"}) > 0',
               alerts.unschedulable_for, "warning", "{{ $value }} pods fit no pool",
               f"Pods have fitted no pool for {alerts.unschedulable_for}: the scaler cannot add a node for them "
               "(its NotTriggerScaleUp events say why per pool)."),
        _alert("GpuburstOnDemandFallbackActive", "max by (pool, fallback) (gpuburst_fallback_active) > 0",
               "0m", "info", "Spot pool {{ $labels.pool }} falls back to {{ $labels.fallback }}",
               "Every zone of spot pool {{ $labels.pool }} is unavailable: its pods go to on-demand pool "
               "{{ $labels.fallback }}, at on-demand prices."),
        _alert("GpuburstPoolAtMax",
               "max by (pool) (gpuburst_pool_desired_nodes) >= max by (pool) (gpuburst_pool_max_nodes) "
               'and on () sum(gpuburst_pending_pods{reason=~"unschedulable|waiting"}) > 0',
               "10m", "warning", "Pool {{ $labels.pool }} is at its max while pods wait",
               "Pool {{ $labels.pool }} is at its max size and pods are pending: raise its max or add a pool."),
        _alert("GpuburstCostCapReached",
               'max(gpuburst_cost_per_hour) >= max(gpuburst_limit{limit="max_cost_per_hour"})',
               "5m", "warning", "The fleet costs its cap ({{ $value }}/h)",
               "The pools' sizes cost limits.max_cost_per_hour: no scale-up that adds cost will be made."),
        _alert("GpuburstInstancesNeverRegistered", 'max by (pool) (gpuburst_nodes{state="requested"}) > 0',
               _minutes(t.provision_timeout + 2 * t.scan_interval), "warning",
               "Pool {{ $labels.pool }} has instances that never became nodes",
               f"Instances of pool {{{{ $labels.pool }}}} have not registered for longer than the provision "
               f"timeout ({t.provision_timeout:g} s) and were not given back: check the node bootstrap."),
        _alert("GpuburstDrainBlockedByPDB",
               'sum(increase(gpuburst_evictions_total{result="blocked"}[10m])) > 0',
               "15m", "warning", "Scale-down drains are blocked by PodDisruptionBudgets",
               "Evictions have been refused by PodDisruptionBudgets for 15 minutes: idle nodes stay and cost."),
        _alert("GpuburstGpuRepairPaused", "max by (pool) (gpuburst_gpu_repair_paused) > 0",
               "5m", "warning", "GPU repairs of pool {{ $labels.pool }} are paused at the budget",
               "More nodes of pool {{ $labels.pool }} are unhealthy (lost GPUs, health conditions, NotReady) than "
               "its repair budget (repair.max_unhealthy_percent) lets the scaler replace at once: a broken driver "
               "or image rollout looks like this. See gpuburst_gpu_unhealthy_nodes and the GpuRepairPaused "
               "events."),
        _alert("GpuburstScalerNotLeading", "max(gpuburst_leader) < 1 or absent(gpuburst_leader)",
               "5m", "critical", "No scaler replica holds the lease",
               "No gpuburst scaler replica has led for 5 minutes: nothing scales up or down."),
        _alert("GpuburstScalerNotPassing",
               f"time() - max(gpuburst_last_pass_timestamp_seconds) > {stale:g} "
               "or absent(gpuburst_last_pass_timestamp_seconds)",
               "5m", "critical", "The scaler's passes are failing",
               f"The scaler has not finished a pass for more than {stale:g} s: see its logs "
               "(gpuburst_passes_total{result=\"error\"}, gpuburst_cloud_errors_total)."),
    ]
    return [recording, {"name": "gpuburst.alerts", "rules": rules}]


def alertmanager_config(alerts: AlertSettings, url_file: str) -> dict[str, Any]:
    """kube-prometheus-stack's `alertmanager.config`: gpuburst's alerts to the receiver, the URL read from a
    mounted Secret (`url_file`) so it never sits in the chart's values."""
    receivers: list[dict[str, Any]] = [{"name": "null"}]
    routes: list[dict[str, Any]] = []
    if alerts.receiver != "none":
        if alerts.receiver == "slack":
            receiver = {"name": "gpuburst", "slack_configs": [{
                "api_url_file": url_file, "channel": alerts.slack_channel, "send_resolved": True,
                "title": "{{ .CommonAnnotations.summary }}", "text": "{{ .CommonAnnotations.description }}"}]}
        else:
            receiver = {"name": "gpuburst", "webhook_configs": [{"url_file": url_file, "send_resolved": True}]}
        receivers.append(receiver)
        routes.append({"receiver": "gpuburst", "matchers": ['alertname=~"Gpuburst.*"'], "continue": False})
    return {
        "route": {"receiver": "null", "group_by": ["alertname", "pool"], "group_wait": "30s",
                  "group_interval": "5m", "repeat_interval": "4h", "routes": routes},
        "receivers": receivers,
    }


def _panel(pid: int, title: str, kind: str, targets: list[tuple[str, str]], x: int, y: int,
           unit: str = "short", stack: bool = False) -> dict[str, Any]:
    panel: dict[str, Any] = {
        "id": pid, "title": title, "type": kind, "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
        "targets": [{"refId": chr(ord("A") + i), "expr": expr, "legendFormat": legend}
                    for i, (expr, legend) in enumerate(targets)],
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
    }
    if stack:
        panel["fieldConfig"]["defaults"]["custom"] = {"stacking": {"mode": "normal"}, "fillOpacity": 30}
    return panel


def dashboard_panels() -> list[dict[str, Any]]:
    util = (f"avg by (pool) ({DCGM_GPU_UTIL} * on (node) group_left (pool) "
            f"label_replace(max by (node, {NODE_POOL_LABEL}) (kube_node_labels), \"pool\", \"$1\", "
            f"\"{NODE_POOL_LABEL}\", \"(.+)\"))")
    return [
        _panel(1, "GPUs by pool and capacity type", "timeseries",
               [(f"sum by (pool, capacity_type) ({GPUS_BY_POOL})", "{{pool}} ({{capacity_type}})")], 0, 0,
               stack=True),
        _panel(2, "Spot share of GPUs", "stat",
               [(f'sum({GPUS_BY_POOL}{{capacity_type="spot"}}) / sum({GPUS_BY_POOL})', "spot")], 12, 0,
               unit="percentunit"),
        _panel(3, "Pending pods by verdict", "timeseries",
               [("sum by (reason) (gpuburst_pending_pods)", "{{reason}}")], 0, 8),
        _panel(4, "Oldest pending pod", "timeseries",
               [("max by (reason) (gpuburst_oldest_pending_pod_seconds)", "{{reason}}")], 12, 8, unit="s"),
        _panel(5, "Cost per hour against the cap", "timeseries",
               [("max(gpuburst_cost_per_hour)", "cost / h"),
                ('max(gpuburst_limit{limit="max_cost_per_hour"})', "cap / h")], 0, 16, unit="currencyUSD"),
        _panel(6, "GPU utilisation per pool (DCGM)", "timeseries", [(util, "{{pool}}")], 12, 16, unit="percent"),
        _panel(7, "Unhealthy GPU nodes and repairs", "timeseries",
               [("max by (pool) (gpuburst_gpu_unhealthy_nodes)", "{{pool}} unhealthy"),
                ('sum by (pool) (increase(gpuburst_gpu_repairs_total{result="replaced"}[1h]))',
                 "{{pool}} replaced / h"),
                ("max by (pool) (gpuburst_gpu_repair_paused)", "{{pool}} paused")], 0, 24),
    ]


def dashboard() -> dict[str, Any]:
    """The Grafana dashboard JSON (schema of Grafana 10/11), datasource chosen by a variable."""
    return {
        "uid": DASHBOARD_UID, "title": "gpuburst fleet", "tags": ["gpuburst"], "timezone": "utc",
        "schemaVersion": 39, "version": 1, "editable": False, "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": [{"name": "datasource", "type": "datasource", "query": "prometheus",
                                 "label": "Prometheus"}]},
        "panels": dashboard_panels(),
    }


def metric_names(expr: str) -> set[str]:
    """The gpuburst_* metric names an expression reads (recording rule names have a ':')."""
    return set(re.findall(r"\bgpuburst_[a-z_]+\b", expr))
