"""Monitoring: kube-prometheus-stack (Prometheus, Alertmanager, Grafana) with gpuburst's alerts and dashboard.

The rules, routes and dashboard are plain data in monitoring.py; this module declares them: the
chart's release, a PrometheusRule, the Secret holding the alert receiver's URL (the stack secret
gpuburst:alertsUrl) and the ConfigMap Grafana's sidecar loads.
"""

from __future__ import annotations

import json
from typing import Any

import pulumi_kubernetes as k8s

import pulumi
from gpuburst_platform import monitoring as mon
from gpuburst_platform import render
from gpuburst_platform.base import APP_LABEL, Ctx, meta
from gpuburst_platform.settings import MONITORING_NAMESPACE
from scaler.core.model import keys

PROMETHEUS_RELEASE = "gpuburst-prom"  # fullnameOverride: the Prometheus Service is "<this>-prometheus"
PROMETHEUS_URL = f"http://{PROMETHEUS_RELEASE}-prometheus.{MONITORING_NAMESPACE}.svc"
PROMETHEUS_PORT = 9090
# The labels the Prometheus operator gives the pods of the Prometheus "<release>-prometheus" (the chart's
# own Service selects them so): the only pods the scaler's NetworkPolicy admits.
PROMETHEUS_POD_LABELS = {"app.kubernetes.io/name": "prometheus",
                         "operator.prometheus.io/name": f"{PROMETHEUS_RELEASE}-prometheus"}
# The Secret holding the alert receiver's URL (the stack secret gpuburst:alertsUrl), mounted into Alertmanager.
ALERTS_SECRET = "gpuburst-alerts"  # noqa: S105 -- a Secret's name, not its value
ALERTS_URL_FILE = f"/etc/alertmanager/secrets/{ALERTS_SECRET}/url"
# kube-prometheus-stack's Grafana sidecar loads ConfigMaps with this label (its chart default).
GRAFANA_DASHBOARD_LABEL = ("grafana_dashboard", "1")


def prometheus_values(ctx: Ctx) -> dict[str, Any]:
    system = render.system_node_selector()
    alerts = ctx.settings.alerts
    return {
        "fullnameOverride": PROMETHEUS_RELEASE,
        # gpuburst's alerts to the stack's receiver (none: Alertmanager shows them, sends nothing).
        "alertmanager": {
            "config": mon.alertmanager_config(alerts, ALERTS_URL_FILE),
            "alertmanagerSpec": {
                "nodeSelector": system,
                "secrets": [ALERTS_SECRET] if alerts.receiver != "none" else [],
            },
        },
        # Grafana with its dashboard sidecar (gpuburst's fleet dashboard is a ConfigMap it loads). No
        # admin password in the values: the Grafana chart generates one into its Secret.
        "grafana": {"enabled": ctx.settings.grafana, "adminPassword": "", "nodeSelector": system,
                    "sidecar": {"dashboards": {"enabled": True, "label": GRAFANA_DASHBOARD_LABEL[0],
                                               "labelValue": GRAFANA_DASHBOARD_LABEL[1]}}},
        # Managed control planes (EKS, AKS) expose none of these to scrape.
        "kubeControllerManager": {"enabled": False},
        "kubeScheduler": {"enabled": False},
        "kubeEtcd": {"enabled": False},
        "kubeProxy": {"enabled": False},
        "prometheusOperator": {"nodeSelector": system},
        # kube_node_labels carries the pool label, so GPU utilisation joins to pools on the dashboard.
        "kube-state-metrics": {"nodeSelector": system,
                               "metricLabelsAllowlist": [f"nodes=[{keys.LABEL_POOL}]"]},
        "prometheus": {"prometheusSpec": {
            # Select every ServiceMonitor (the scaler's and dcgm-exporter's), not only this release's.
            "serviceMonitorSelectorNilUsesHelmValues": False,
            "podMonitorSelectorNilUsesHelmValues": False,
            "ruleSelectorNilUsesHelmValues": False,  # and gpuburst's PrometheusRule
            "nodeSelector": system,
            "retention": "7d",
            "resources": {"requests": {"cpu": "500m", "memory": "2Gi"}, "limits": {"memory": "4Gi"}},
        }},
    }


def declare(ctx: Ctx, namespace: k8s.core.v1.Namespace, alerts_url: pulumi.Input[str] | None) -> k8s.helm.v3.Release:
    """kube-prometheus-stack, then gpuburst's PrometheusRule, the receiver URL's Secret and the dashboard."""
    prometheus = ctx.release("kube-prometheus-stack", PROMETHEUS_RELEASE, MONITORING_NAMESPACE,
                             prometheus_values(ctx), [namespace])
    labels = {APP_LABEL: "gpuburst-monitoring"}
    k8s.apiextensions.CustomResource(
        ctx.rname("prometheusrule"), api_version="monitoring.coreos.com/v1", kind="PrometheusRule",
        metadata=meta(mon.RULE_NAME, MONITORING_NAMESPACE, **labels),
        spec={"groups": mon.rule_groups(ctx.config, ctx.settings.alerts)},
        opts=ctx.child([namespace, prometheus]),  # the CRD comes with kube-prometheus-stack
    )
    if ctx.settings.alerts.receiver != "none" and alerts_url is not None:
        k8s.core.v1.Secret(
            ctx.rname("alerts-secret"), metadata=meta(ALERTS_SECRET, MONITORING_NAMESPACE, **labels),
            type="Opaque", string_data={"url": pulumi.Output.secret(alerts_url)},
            opts=ctx.child([namespace]),
        )
    if ctx.settings.grafana:
        key, value = GRAFANA_DASHBOARD_LABEL
        k8s.core.v1.ConfigMap(
            ctx.rname("dashboard"),
            metadata=meta(mon.DASHBOARD_NAME, MONITORING_NAMESPACE, **labels, **{key: value}),
            data={f"{mon.DASHBOARD_NAME}.json": json.dumps(mon.dashboard(), sort_keys=True)},
            opts=ctx.child([namespace]),
        )
    return prometheus
