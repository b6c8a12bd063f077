"""`Platform`: everything gpuburst runs on a cluster, the same on AWS and Azure.

Fed by the cluster's Kubernetes provider (built from its kubeconfig), the validated `ScalerConfig`
that also made the cloud pools, the scaler's cloud identity (IRSA role ARN or workload-identity
client id) and `PlatformSettings`. Declares, through pulumi-kubernetes:

- the scaler: Namespace, ServiceAccount (identity annotation), ClusterRole/Role with exactly
  `scaler.permissions`' rules, ConfigMap rendered from the pools, Deployment (leader election,
  non-root, read-only root, probes, pinned to the system pool, the image by digest when given),
  PodDisruptionBudget, Service, ServiceMonitor, NetworkPolicy (only Prometheus reaches the metrics
  port); or, with `scaler_chart`, the same through charts/gpuburst-scaler as one Helm release;
  PriorityClasses for GPU training and inference;
- the GPU metrics chain: kube-prometheus-stack, dcgm-exporter (tolerating the GPU pools' taints,
  honorLabels for pod attribution), then either prometheus-adapter (TLS from the Ansible
  metrics_certs role's Secret, APIService verified with its CA) or KEDA;
- the example GPU inference Deployment with its HPA (or KEDA ScaledObject);
- the bin-packing second scheduler (`gpuburst-binpack`, the profile the simulator models).

Every name is fixed and every rendering sorted, so the component is deterministic.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pulumi_kubernetes as k8s
import yaml

import pulumi
from gpuburst_platform import kueue, render
from gpuburst_platform import monitoring as mon
from gpuburst_platform.settings import (
    ADAPTER_SERVICE,
    CUSTOM_METRICS_APISERVICE,
    KEDA_NAMESPACE,
    KUEUE_NAMESPACE,
    MONITORING_NAMESPACE,
    SCALER_NAMESPACE,
    PlatformSettings,
)
from gpuburst_platform.versions import CHARTS, kube_scheduler_image
from scaler import permissions
from scaler.core.config.catalogue import Cloud
from scaler.core.config.settings import ScalerConfig
from scaler.core.model import keys

# Annotations / labels the clouds' identity webhooks read (spelled by AWS and Azure, not by us).
IRSA_ANNOTATION = "eks.amazonaws.com/role-arn"
WORKLOAD_IDENTITY_ANNOTATION = "azure.workload.identity/client-id"
WORKLOAD_IDENTITY_POD_LABEL = "azure.workload.identity/use"

PROMETHEUS_RELEASE = "gpuburst-prom"  # fullnameOverride: the Prometheus Service is "<this>-prometheus"
PROMETHEUS_URL = f"http://{PROMETHEUS_RELEASE}-prometheus.{MONITORING_NAMESPACE}.svc"
PROMETHEUS_PORT = 9090
# The Secret holding the alert receiver's URL (the stack secret gpuburst:alertsUrl), mounted into Alertmanager.
ALERTS_SECRET = "gpuburst-alerts"  # noqa: S105 -- a Secret's name, not its value
ALERTS_URL_FILE = f"/etc/alertmanager/secrets/{ALERTS_SECRET}/url"
# kube-prometheus-stack's Grafana sidecar loads ConfigMaps with this label (its chart default).
GRAFANA_DASHBOARD_LABEL = ("grafana_dashboard", "1")
# The labels the Prometheus operator gives the pods of the Prometheus "<release>-prometheus" (the chart's
# own Service selects them so): the only pods the scaler's NetworkPolicy admits.
PROMETHEUS_POD_LABELS = {"app.kubernetes.io/name": "prometheus",
                         "operator.prometheus.io/name": f"{PROMETHEUS_RELEASE}-prometheus"}
# Our own chart, for `scaler_chart: true` (relative to the project directory, where `pulumi up` runs).
SCALER_CHART = "charts/gpuburst-scaler"
EXAMPLE_NAME = "gpu-inference-example"
APP_LABEL = "app.kubernetes.io/name"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set by Kubernetes on every namespace


def _meta(name: str, namespace: str | None = None, **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"app.kubernetes.io/part-of": "gpuburst", **labels}}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


# The scaler's environment variables the chart takes as named values (the rest go to extraEnv).
CHART_ENV: dict[str, dict[str, str]] = {
    "aws": {"GPUBURST_INTERRUPTION_QUEUE_URL": "interruptionQueueUrl"},
    "azure": {"AZURE_SUBSCRIPTION_ID": "subscriptionId", "GPUBURST_AZURE_RESOURCE_GROUP": "resourceGroup",
              "GPUBURST_AKS_CLUSTER": "aksCluster"},
}


def chart_image(ref: str) -> dict[str, str]:
    """`repo:tag`, `repo@sha256:...` or `repo:tag@sha256:...` as the chart's image values."""
    name, _, digest = ref.partition("@")
    slash = name.rfind("/")
    repo, colon, tag = name.rpartition(":") if ":" in name[slash + 1:] else (name, "", "")
    return {"repository": repo if colon else name, "tag": tag, "digest": digest}


class Platform(pulumi.ComponentResource):
    """The platform on one cluster. See the module docstring for what it declares."""

    def __init__(
        self,
        name: str,
        *,
        provider: k8s.Provider,
        config: ScalerConfig,
        cloud: Cloud,
        identity: pulumi.Input[str],
        kubernetes_version: str,
        settings: PlatformSettings | None = None,
        namespace: str = SCALER_NAMESPACE,
        service_account: str = render.SCALER_NAME,
        scaler_env: Mapping[str, pulumi.Input[str]] | None = None,
        alerts_url: pulumi.Input[str] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpuburst:platform:Platform", name, None, opts)
        self.settings = settings = settings or PlatformSettings()
        if cloud != config.cloud:
            raise ValueError(f"platform {name}: cloud is {cloud!r} but the scaler config's cloud is {config.cloud!r}")
        if not any(p.role == "system" for p in config.pools):
            raise ValueError(
                f"platform {name}: the pools have no role 'system' pool; the scaler, Prometheus and the "
                f"schedulers are pinned to {keys.LABEL_ROLE}=system nodes"
            )
        if settings.alerts.receiver != "none" and alerts_url is None:
            raise ValueError(f"platform {name}: alerts.receiver is {settings.alerts.receiver} but the stack has no "
                             "receiver URL: pulumi config set --secret gpuburst:alertsUrl <URL>")
        self._alerts_url = alerts_url
        self._name = name
        self.scaler_namespace = namespace
        self.service_account_name = service_account
        self._scaler_env = dict(scaler_env or {})
        self._cloud = cloud
        self._config = config
        self._opts = pulumi.ResourceOptions(parent=self, provider=provider)
        self.scheduler_image = kube_scheduler_image(kubernetes_version)  # fails early on an unknown version

        namespaces = {ns: self._namespace(ns) for ns in self._namespace_names()}
        self.namespaces = namespaces
        self.priority_classes = self._priority_classes()

        monitoring = namespaces[MONITORING_NAMESPACE]
        self.prometheus = self._release("kube-prometheus-stack", PROMETHEUS_RELEASE, MONITORING_NAMESPACE,
                                        self._prometheus_values(), [monitoring])
        self.dcgm_exporter = self._release("dcgm-exporter", "dcgm-exporter", MONITORING_NAMESPACE,
                                           self._dcgm_values(), [monitoring, self.prometheus])
        self._alerts_and_dashboard(monitoring)
        self.adapter: k8s.helm.v3.Release | None = None
        self.apiservice: k8s.apiregistration.v1.APIService | None = None
        self.keda: k8s.helm.v3.Release | None = None
        if settings.metrics == "prometheus-adapter":
            self._adapter(monitoring)
        else:
            self.keda = self._release("keda", "keda", KEDA_NAMESPACE, self._keda_values(), [namespaces[KEDA_NAMESPACE]])

        self._scaler(namespaces[namespace], identity)
        self.kueue: k8s.helm.v3.Release | None = None
        if settings.kueue:
            self._kueue(namespaces[KUEUE_NAMESPACE], namespaces.get(settings.example_namespace))
        if settings.binpack_scheduler:
            self._binpack_scheduler(namespaces[namespace])
        if settings.example_inference:
            self._example(namespaces[settings.example_namespace])

        self.register_outputs({
            "scaler_namespace": namespace,
            "metrics": settings.metrics,
            "scheduler_name": render.SCHEDULER_NAME if settings.binpack_scheduler else "default-scheduler",
        })

    # --- helpers -----------------------------------------------------------------------------
    def _child(self, depends_on: Sequence[pulumi.Resource] = ()) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions.merge(self._opts, pulumi.ResourceOptions(depends_on=list(depends_on)))

    def _rname(self, suffix: str) -> str:
        return f"{self._name}-{suffix}"

    def _namespace_names(self) -> list[str]:
        names = [self.scaler_namespace, MONITORING_NAMESPACE]
        if self.settings.metrics == "keda":
            names.append(KEDA_NAMESPACE)
        if self.settings.kueue:
            names.append(KUEUE_NAMESPACE)
        if self.settings.kueue and self.settings.example_namespace not in names:
            names.append(self.settings.example_namespace)  # the example LocalQueue lives there
        if self.settings.example_inference and self.settings.example_namespace not in names:
            names.append(self.settings.example_namespace)
        return names

    def _namespace(self, ns: str) -> k8s.core.v1.Namespace:
        return k8s.core.v1.Namespace(self._rname(f"ns-{ns}"), metadata=_meta(ns), opts=self._child())

    def _release(self, key: str, release: str, namespace: str, values: Mapping[str, Any],
                 depends_on: Sequence[pulumi.Resource], wait: bool = True) -> k8s.helm.v3.Release:
        """An official chart at its pinned version. `wait`: roll back unless every pod gets ready in time."""
        chart = CHARTS[key]
        return k8s.helm.v3.Release(
            self._rname(release),
            name=release,
            chart=chart.chart,
            version=chart.version,
            repository_opts={"repo": chart.repo} if chart.repo else None,
            namespace=namespace,
            values=dict(values),
            atomic=wait,
            skip_await=not wait,
            cleanup_on_fail=True,
            timeout=600,
            opts=self._child(depends_on),
        )

    def _priority_classes(self) -> dict[str, k8s.scheduling.v1.PriorityClass]:
        specs = {
            # Inference serves users: it may preempt training, which checkpoints and restarts.
            render.PRIORITY_INFERENCE: (100000, "GPU inference: serving traffic, preempts training"),
            render.PRIORITY_TRAINING: (50000, "GPU training and batch jobs: checkpoint, may be preempted"),
        }
        return {
            name: k8s.scheduling.v1.PriorityClass(
                self._rname(f"pc-{name}"), metadata=_meta(name), value=value, global_default=False,
                preemption_policy="PreemptLowerPriority", description=desc, opts=self._child(),
            )
            for name, (value, desc) in specs.items()
        }

    # --- metrics chain ---------------------------------------------------------------------------
    def _prometheus_values(self) -> dict[str, Any]:
        system = render.system_node_selector()
        return {
            "fullnameOverride": PROMETHEUS_RELEASE,
            # gpuburst's alerts to the stack's receiver (none: Alertmanager shows them, sends nothing).
            "alertmanager": {
                "config": mon.alertmanager_config(self.settings.alerts, ALERTS_URL_FILE),
                "alertmanagerSpec": {
                    "nodeSelector": system,
                    "secrets": [ALERTS_SECRET] if self.settings.alerts.receiver != "none" else [],
                },
            },
            # Grafana with its dashboard sidecar (gpuburst's fleet dashboard is a ConfigMap it loads). No
            # admin password in the values: the Grafana chart generates one into its Secret.
            "grafana": {"enabled": self.settings.grafana, "adminPassword": "", "nodeSelector": system,
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

    def _dcgm_values(self) -> dict[str, Any]:
        return {
            "nodeSelector": {keys.LABEL_GPU_PRESENT: "true"},
            "tolerations": render.gpu_daemonset_tolerations(self._config),
            "serviceMonitor": {
                "enabled": True,
                "interval": "15s",
                # The exporter labels each GPU's series with the pod holding it (namespace, pod,
                # container); honorLabels keeps those instead of the exporter pod's own.
                "honorLabels": True,
                # Each GPU's series names its node, to join with kube_node_labels (pools on the dashboard).
                "relabelings": [dict(mon.DCGM_NODE_RELABELING)],
            },
            "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}},
        }

    def _alerts_and_dashboard(self, namespace: k8s.core.v1.Namespace) -> None:
        """gpuburst's PrometheusRule, the receiver URL's Secret and the Grafana dashboard's ConfigMap."""
        labels = {APP_LABEL: "gpuburst-monitoring"}
        self.rules = k8s.apiextensions.CustomResource(
            self._rname("prometheusrule"), api_version="monitoring.coreos.com/v1", kind="PrometheusRule",
            metadata=_meta(mon.RULE_NAME, MONITORING_NAMESPACE, **labels),
            spec={"groups": mon.rule_groups(self._config, self.settings.alerts)},
            opts=self._child([namespace, self.prometheus]),  # the CRD comes with kube-prometheus-stack
        )
        if self.settings.alerts.receiver != "none" and self._alerts_url is not None:
            k8s.core.v1.Secret(
                self._rname("alerts-secret"), metadata=_meta(ALERTS_SECRET, MONITORING_NAMESPACE, **labels),
                type="Opaque", string_data={"url": pulumi.Output.secret(self._alerts_url)},
                opts=self._child([namespace]),
            )
        if self.settings.grafana:
            key, value = GRAFANA_DASHBOARD_LABEL
            k8s.core.v1.ConfigMap(
                self._rname("dashboard"),
                metadata=_meta(mon.DASHBOARD_NAME, MONITORING_NAMESPACE, **labels, **{key: value}),
                data={f"{mon.DASHBOARD_NAME}.json": json.dumps(mon.dashboard(), sort_keys=True)},
                opts=self._child([namespace]),
            )

    def _kueue(self, namespace: k8s.core.v1.Namespace, example_ns: k8s.core.v1.Namespace | None) -> None:
        """Kueue, the ProvisioningRequest CRD gpuburst serves, and the queue objects wired to it."""
        self.provreq_crd = k8s.apiextensions.v1.CustomResourceDefinition(
            self._rname("provreq-crd"), **{k: v for k, v in kueue.provisioning_request_crd().items()
                                           if k in ("metadata", "spec")}, opts=self._child())
        self.kueue = self._release("kueue", "kueue", KUEUE_NAMESPACE,
                                   kueue.kueue_values(render.system_node_selector(), CHARTS["kueue"].version),
                                   [namespace, self.provreq_crd])
        deps: list[pulumi.Resource] = [self.kueue, *([example_ns] if example_ns else [])]
        for obj in kueue.queue_objects(self._config, self.settings.example_namespace):
            kind = obj["kind"]
            k8s.apiextensions.CustomResource(
                self._rname(f"kueue-{kind.lower()}"), api_version=obj["apiVersion"], kind=kind,
                metadata=obj["metadata"], spec=obj["spec"], opts=self._child(deps),
            )

    def _adapter(self, monitoring: k8s.core.v1.Namespace) -> None:
        """prometheus-adapter serving `gpu_utilization`, TLS from the Ansible role's Secret.

        The chart's own APIService is not rendered (rules come from our ConfigMap via
        `rules.existing`, so `rules.default`/`rules.custom` are empty); this component declares the
        APIService itself, verified with the CA (`metrics_ca_bundle`), never insecureSkipTLSVerify.
        """
        settings = self.settings
        rules_cm = k8s.core.v1.ConfigMap(
            self._rname("adapter-rules"),
            metadata=_meta(f"{ADAPTER_SERVICE}-rules", MONITORING_NAMESPACE),
            data={"config.yaml": yaml.safe_dump(render.adapter_rules(), sort_keys=True)},
            opts=self._child([monitoring]),
        )
        cert_dir = "/var/run/serving-cert"
        values = {
            "fullnameOverride": ADAPTER_SERVICE,
            "replicas": 2,
            "prometheus": {"url": PROMETHEUS_URL, "port": PROMETHEUS_PORT},
            "rules": {"default": False, "custom": [], "external": [], "existing": f"{ADAPTER_SERVICE}-rules"},
            "tls": {"enable": False},  # the chart would put the private key in its values; we mount the Secret
            "extraArguments": [f"--tls-cert-file={cert_dir}/tls.crt", f"--tls-private-key-file={cert_dir}/tls.key"],
            "extraVolumes": [{"name": "serving-cert", "secret": {"secretName": settings.metrics_tls_secret}}],
            "extraVolumeMounts": [{"name": "serving-cert", "mountPath": cert_dir, "readOnly": True}],
            "nodeSelector": render.system_node_selector(),
            "podDisruptionBudget": {"enabled": True, "maxUnavailable": 1},
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
        }
        # Not awaited: its pods start once the Ansible role has written their Secret, which comes after
        # this `pulumi up` (the kubelet mounts it as soon as it exists).
        self.adapter = self._release("prometheus-adapter", "prometheus-adapter", MONITORING_NAMESPACE, values,
                                     [monitoring, rules_cm, self.prometheus], wait=False)
        spec: dict[str, Any] = {
            "group": "custom.metrics.k8s.io",
            "version": "v1beta1",
            "service": {"name": ADAPTER_SERVICE, "namespace": MONITORING_NAMESPACE, "port": 443},
            "groupPriorityMinimum": 100,
            "versionPriority": 100,
            "insecureSkipTLSVerify": False,
        }
        if settings.metrics_ca_bundle is not None:
            # The PEM file's exact bytes (one final newline), as the Ansible role encodes it: same value, no churn.
            pem = settings.metrics_ca_bundle.strip() + "\n"
            spec["caBundle"] = base64.b64encode(pem.encode()).decode()
        # Without the CA in the stack the APIService fails closed (unavailable) until
        # `ansible-playbook playbooks/cluster.yml` sets caBundle; Pulumi never claims the field then,
        # so a later `pulumi up` leaves the role's value alone.
        self.apiservice = k8s.apiregistration.v1.APIService(
            self._rname("custom-metrics-apiservice"),
            metadata=_meta(CUSTOM_METRICS_APISERVICE),
            spec=spec,
            opts=self._child([self.adapter]),
        )

    def _keda_values(self) -> dict[str, Any]:
        system = render.system_node_selector()
        return {
            "nodeSelector": system,
            "resources": {
                "operator": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
                "metricServer": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
            },
        }

    # --- the scaler ------------------------------------------------------------------------------
    def _scaler(self, namespace: k8s.core.v1.Namespace, identity: pulumi.Input[str]) -> None:
        if self.settings.scaler_chart:
            self._scaler_release(namespace, identity)
            return
        name, ns, sa_name = render.SCALER_NAME, self.scaler_namespace, self.service_account_name
        labels = {APP_LABEL: name}
        sa_annotations: dict[str, pulumi.Input[str]] = (
            {IRSA_ANNOTATION: identity} if self._cloud == "aws" else {WORKLOAD_IDENTITY_ANNOTATION: identity}
        )
        self.service_account = k8s.core.v1.ServiceAccount(
            self._rname("scaler-sa"), metadata={**_meta(sa_name, ns, **labels), "annotations": sa_annotations},
            opts=self._child([namespace]),
        )
        self.cluster_role = k8s.rbac.v1.ClusterRole(
            self._rname("scaler-clusterrole"), metadata=_meta(name, **labels),
            rules=[dict(r) for r in permissions.KUBERNETES_RBAC_RULES], opts=self._child(),
        )
        subject = [{"kind": "ServiceAccount", "name": sa_name, "namespace": ns}]
        k8s.rbac.v1.ClusterRoleBinding(
            self._rname("scaler-clusterrolebinding"), metadata=_meta(name, **labels), subjects=subject,
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            opts=self._child([self.cluster_role, self.service_account]),
        )
        self.role = k8s.rbac.v1.Role(
            self._rname("scaler-role"), metadata=_meta(name, ns, **labels),
            rules=[dict(r) for r in permissions.KUBERNETES_ROLE_RULES], opts=self._child([namespace]),
        )
        k8s.rbac.v1.RoleBinding(
            self._rname("scaler-rolebinding"), metadata=_meta(name, ns, **labels), subjects=subject,
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            opts=self._child([self.role, self.service_account]),
        )
        config_yaml = render.scaler_config_yaml(self._config)
        self.scaler_config = k8s.core.v1.ConfigMap(
            self._rname("scaler-config"), metadata=_meta(f"{name}-config", ns, **labels),
            data={render.SCALER_CONFIG_FILE: config_yaml}, opts=self._child([namespace]),
        )
        self.scaler = k8s.apps.v1.Deployment(
            self._rname("scaler"), metadata=_meta(name, ns, **labels),
            spec=self._scaler_deployment_spec(labels, config_yaml),
            opts=self._child([self.scaler_config, self.service_account]),
        )
        k8s.policy.v1.PodDisruptionBudget(
            self._rname("scaler-pdb"), metadata=_meta(name, ns, **labels),
            spec={"maxUnavailable": 1, "selector": {"matchLabels": labels}}, opts=self._child([namespace]),
        )
        k8s.core.v1.Service(
            self._rname("scaler-svc"), metadata=_meta(name, ns, **labels),
            spec={"selector": labels, "ports": [{"name": "metrics", "port": render.SCALER_PORT,
                                                 "targetPort": "metrics", "protocol": "TCP"}]},
            opts=self._child([namespace]),
        )
        # Nothing reaches the scaler but Prometheus, on the metrics port (the kubelet's probes come from the
        # node, which NetworkPolicy always admits); egress stays open for the API server and cloud APIs.
        k8s.networking.v1.NetworkPolicy(
            self._rname("scaler-netpol"), metadata=_meta(name, ns, **labels),
            spec={
                "podSelector": {"matchLabels": labels},
                "policyTypes": ["Ingress"],
                "ingress": [{
                    "from": [{"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: MONITORING_NAMESPACE}},
                              "podSelector": {"matchLabels": dict(PROMETHEUS_POD_LABELS)}}],
                    "ports": [{"port": "metrics", "protocol": "TCP"}],
                }],
            },
            opts=self._child([namespace]),
        )
        k8s.apiextensions.CustomResource(
            self._rname("scaler-servicemonitor"), api_version="monitoring.coreos.com/v1", kind="ServiceMonitor",
            metadata=_meta(name, ns, **labels),
            spec={"selector": {"matchLabels": labels}, "namespaceSelector": {"matchNames": [ns]},
                  "endpoints": [{"port": "metrics", "path": "/metrics", "interval": "30s"}]},
            opts=self._child([namespace, self.prometheus]),  # the CRD comes with kube-prometheus-stack
        )

    def _scaler_deployment_spec(self, labels: dict[str, str], config_yaml: str) -> dict[str, Any]:
        settings = self.settings
        pod_labels = dict(labels)
        if self._cloud == "azure":
            pod_labels[WORKLOAD_IDENTITY_POD_LABEL] = "true"
        env: list[dict[str, Any]] = [
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        ]
        if self._cloud == "aws" and self._config.region:
            env.append({"name": "AWS_REGION", "value": self._config.region})
        # Plain settings from the stack, then the stack's outputs (e.g. the interruption queue URL).
        env += [{"name": k, "value": v} for k, v in sorted({**settings.scaler_env, **self._scaler_env}.items())]
        args = ["run", "--config", f"{render.SCALER_CONFIG_DIR}/{render.SCALER_CONFIG_FILE}"]
        if settings.scaler_dry_run:
            args.append("--dry-run")
        probe = {"port": "metrics", "scheme": "HTTP"}
        # A changed pools file rolls the Deployment (the scaler reads its config at start).
        checksum = hashlib.sha256(config_yaml.encode()).hexdigest()
        return {
            "replicas": settings.scaler_replicas,
            "selector": {"matchLabels": labels},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
            "template": {
                "metadata": {"labels": pod_labels, "annotations": {keys.ANNOTATION_CONFIG_HASH: checksum}},
                "spec": {
                    "serviceAccountName": self.service_account_name,
                    "priorityClassName": "system-cluster-critical",
                    "nodeSelector": render.system_node_selector(),
                    "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                        "weight": 100,
                        "podAffinityTerm": {"labelSelector": {"matchLabels": labels},
                                            "topologyKey": keys.LABEL_HOSTNAME},
                    }]}},
                    "securityContext": render.pod_security(),
                    "imagePullSecrets": [{"name": n} for n in settings.scaler_image_pull_secrets],
                    "containers": [{
                        "name": "scaler",
                        "image": settings.scaler_image_ref(),
                        "args": args,
                        "env": env,
                        "ports": [{"name": "metrics", "containerPort": render.SCALER_PORT, "protocol": "TCP"}],
                        "livenessProbe": {"httpGet": {"path": "/healthz", **probe}, "periodSeconds": 10,
                                          "failureThreshold": 6},
                        "readinessProbe": {"httpGet": {"path": "/readyz", **probe}, "periodSeconds": 10},
                        "resources": {"requests": {"cpu": "200m", "memory": "256Mi"},
                                      "limits": {"cpu": "1", "memory": "1Gi"}},
                        "securityContext": render.container_security(),
                        "volumeMounts": [
                            {"name": "config", "mountPath": render.SCALER_CONFIG_DIR, "readOnly": True},
                            {"name": "tmp", "mountPath": "/tmp"},  # noqa: S108 - a pod-private emptyDir
                        ],
                    }],
                    "volumes": [
                        {"name": "config", "configMap": {"name": f"{render.SCALER_NAME}-config"}},
                        {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
                    ],
                },
            },
        }

    def _scaler_release(self, namespace: k8s.core.v1.Namespace, identity: pulumi.Input[str]) -> None:
        """The scaler through charts/gpuburst-scaler, with the values that give the same objects."""
        settings = self.settings
        env: dict[str, pulumi.Input[str]] = {**settings.scaler_env, **self._scaler_env}
        values: dict[str, Any] = {
            "image": chart_image(settings.scaler_image_ref()),
            "imagePullSecrets": [{"name": n} for n in settings.scaler_image_pull_secrets],
            "replicas": settings.scaler_replicas,
            "config": yaml.safe_load(render.scaler_config_yaml(self._config)),
            "serviceAccount": {"name": self.service_account_name},
            "dryRun": settings.scaler_dry_run,
            "nodeSelector": render.system_node_selector(),
            "networkPolicy": {"enabled": True, "prometheus": {"namespace": MONITORING_NAMESPACE,
                                                              "podLabels": dict(PROMETHEUS_POD_LABELS)}},
        }
        named = CHART_ENV[self._cloud]
        section: dict[str, pulumi.Input[str]] = {("roleArn" if self._cloud == "aws" else "clientId"): identity}
        section.update({named[k]: env.pop(k) for k in sorted(env) if k in named})
        values[self._cloud] = section
        values["extraEnv"] = [{"name": k, "value": v} for k, v in sorted(env.items())]
        self.scaler = k8s.helm.v3.Release(
            self._rname("scaler"), name=render.SCALER_NAME, chart=SCALER_CHART, namespace=self.scaler_namespace,
            values=values, atomic=True, cleanup_on_fail=True, timeout=600,
            opts=self._child([namespace, self.prometheus]),  # its ServiceMonitor needs the operator's CRDs
        )

    # --- the bin-packing scheduler ---------------------------------------------------------------
    def _binpack_scheduler(self, namespace: k8s.core.v1.Namespace) -> None:
        name, ns = render.SCHEDULER_NAME, self.scaler_namespace
        labels = {APP_LABEL: name}
        conf = render.scheduler_configuration()
        election = conf["leaderElection"]
        sa = k8s.core.v1.ServiceAccount(self._rname("scheduler-sa"), metadata=_meta(name, ns, **labels),
                                        opts=self._child([namespace]))
        subject = [{"kind": "ServiceAccount", "name": name, "namespace": ns}]
        # What a kube-scheduler needs: the two built-in ClusterRoles, plus reading the authentication
        # ConfigMap in kube-system; and its own leader-election Lease (the built-in role only grants
        # get/update on the Lease named "kube-scheduler").
        for role in ("system:kube-scheduler", "system:volume-scheduler"):
            k8s.rbac.v1.ClusterRoleBinding(
                self._rname(f"scheduler-{role.split(':')[1]}"), metadata=_meta(f"{name}-{role.split(':')[1]}",
                                                                               **labels),
                subjects=subject, role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                            "name": role},
                opts=self._child([sa]),
            )
        k8s.rbac.v1.RoleBinding(
            self._rname("scheduler-auth-reader"), metadata=_meta(f"{name}-auth-reader", "kube-system", **labels),
            subjects=subject, role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                        "name": "extension-apiserver-authentication-reader"},
            opts=self._child([sa]),
        )
        lease_ns = election["resourceNamespace"]
        lease_role = k8s.rbac.v1.Role(
            self._rname("scheduler-lease"), metadata=_meta(f"{name}-lease", lease_ns, **labels),
            rules=[
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                 "resourceNames": [election["resourceName"]], "verbs": ["get", "update"]},
            ],
            opts=self._child(),
        )
        k8s.rbac.v1.RoleBinding(
            self._rname("scheduler-lease"), metadata=_meta(f"{name}-lease", lease_ns, **labels), subjects=subject,
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": f"{name}-lease"},
            opts=self._child([lease_role, sa]),
        )
        config_yaml = render.scheduler_config_yaml()
        cm = k8s.core.v1.ConfigMap(
            self._rname("scheduler-config"), metadata=_meta(f"{name}-config", ns, **labels),
            data={render.SCHEDULER_CONFIG_FILE: config_yaml}, opts=self._child([namespace]),
        )
        probe = {"httpGet": {"path": "/healthz", "port": 10259, "scheme": "HTTPS"}, "periodSeconds": 10}
        self.scheduler = k8s.apps.v1.Deployment(
            self._rname("scheduler"), metadata=_meta(name, ns, **labels),
            spec={
                "replicas": 2,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "serviceAccountName": name,
                        "priorityClassName": "system-cluster-critical",
                        "nodeSelector": render.system_node_selector(),
                        "securityContext": render.pod_security(),
                        "containers": [{
                            "name": "kube-scheduler",
                            "image": self.scheduler_image,
                            "command": ["kube-scheduler",
                                        f"--config=/etc/kubernetes/{render.SCHEDULER_CONFIG_FILE}", "--v=2"],
                            "livenessProbe": {**probe, "initialDelaySeconds": 15},
                            "readinessProbe": probe,
                            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                                          "limits": {"memory": "512Mi"}},
                            "securityContext": render.container_security(),
                            "volumeMounts": [{"name": "config", "mountPath": "/etc/kubernetes", "readOnly": True}],
                        }],
                        "volumes": [{"name": "config", "configMap": {"name": f"{name}-config"}}],
                    },
                },
            },
            opts=self._child([cm, sa]),
        )
        k8s.policy.v1.PodDisruptionBudget(
            self._rname("scheduler-pdb"), metadata=_meta(name, ns, **labels),
            spec={"maxUnavailable": 1, "selector": {"matchLabels": labels}}, opts=self._child([namespace]),
        )

    # --- the example users copy ------------------------------------------------------------------
    def _example(self, namespace: k8s.core.v1.Namespace) -> None:
        """A 1-GPU inference Deployment scaled on GPU utilisation; its new pods make the scaler add nodes."""
        settings = self.settings
        ns, name = settings.example_namespace, EXAMPLE_NAME
        labels = {APP_LABEL: name}
        pod_spec: dict[str, Any] = {
            "priorityClassName": render.PRIORITY_INFERENCE,
            "nodeSelector": {keys.LABEL_GPU_PRESENT: "true"},
            "tolerations": render.single_gpu_pod_tolerations(self._config),
            "securityContext": render.pod_security(),
            "containers": [{
                "name": "server",
                # A placeholder that holds one GPU: put your model server here (Triton, vLLM, ...).
                "image": settings.example_image,
                "command": ["sh", "-c", "nvidia-smi && exec sleep infinity"],
                "resources": {"requests": {"cpu": "2", "memory": "8Gi", keys.RES_GPU: "1"},
                              "limits": {"memory": "8Gi", keys.RES_GPU: "1"}},
                "securityContext": render.container_security(),
            }],
        }
        if settings.binpack_scheduler:
            pod_spec["schedulerName"] = render.SCHEDULER_NAME
        # Parked at 0 replicas, so an idle cluster keeps no GPU node for it: `kubectl scale --replicas=1`
        # starts it and the autoscaler takes over. The autoscaler owns replicas from then on.
        self.example = k8s.apps.v1.Deployment(
            self._rname("example-inference"), metadata=_meta(name, ns, **labels),
            spec={"replicas": 0, "selector": {"matchLabels": labels},
                  "template": {"metadata": {"labels": labels}, "spec": pod_spec}},
            opts=pulumi.ResourceOptions.merge(self._child([namespace, *self.priority_classes.values()]),
                                              pulumi.ResourceOptions(ignore_changes=["spec.replicas"])),
        )
        target = settings.gpu_utilization_target
        scale_target = {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}
        if settings.metrics == "prometheus-adapter":
            deps: list[pulumi.Resource] = [self.example] + ([self.apiservice] if self.apiservice else [])
            self.example_autoscaler: pulumi.Resource = k8s.autoscaling.v2.HorizontalPodAutoscaler(
                self._rname("example-hpa"), metadata=_meta(name, ns, **labels),
                spec={
                    "scaleTargetRef": scale_target,
                    "minReplicas": 1,
                    "maxReplicas": 20,
                    "metrics": [{"type": "Pods", "pods": {
                        "metric": {"name": render.GPU_UTIL_METRIC},
                        "target": {"type": "AverageValue", "averageValue": str(target)},
                    }}],
                    # GPU nodes take minutes to boot: scale up at once, scale down slowly.
                    "behavior": {"scaleDown": {"stabilizationWindowSeconds": 600}},
                },
                opts=self._child(deps),
            )
        else:
            deps = [self.example] + ([self.keda] if self.keda else [])
            self.example_autoscaler = k8s.apiextensions.CustomResource(
                self._rname("example-scaledobject"), api_version="keda.sh/v1alpha1", kind="ScaledObject",
                metadata=_meta(name, ns, **labels),
                spec={
                    "scaleTargetRef": {"name": name},
                    # Back to 0 when its GPUs sit idle for the cooldown; from 0 only by hand (no pod, no metric).
                    "minReplicaCount": 0,
                    "cooldownPeriod": 600,
                    "maxReplicaCount": 20,
                    "advanced": {"horizontalPodAutoscalerConfig": {
                        "behavior": {"scaleDown": {"stabilizationWindowSeconds": 600}}}},
                    "triggers": [{
                        "type": "prometheus",
                        "metricType": "Value",
                        "metadata": {
                            "serverAddress": f"{PROMETHEUS_URL}:{PROMETHEUS_PORT}",
                            "query": render.keda_query(ns, name),
                            "threshold": str(target),
                        },
                    }],
                },
                opts=self._child(deps),
            )


def deploy_platform(
    name: str,
    *,
    kubeconfig: pulumi.Input[str],
    config: ScalerConfig,
    identity: pulumi.Input[str],
    kubernetes_version: str,
    settings: PlatformSettings | None = None,
    namespace: str = SCALER_NAMESPACE,
    service_account: str = render.SCALER_NAME,
    scaler_env: Mapping[str, pulumi.Input[str]] | None = None,
    alerts_url: pulumi.Input[str] | None = None,
    opts: pulumi.ResourceOptions | None = None,
) -> Platform:
    """What pulumi/__main__.py calls once the cluster exists: a provider from its kubeconfig, then `Platform`."""
    provider = k8s.Provider(f"{name}-k8s", kubeconfig=kubeconfig, opts=opts)
    return Platform(
        name, provider=provider, config=config, cloud=config.cloud, identity=identity,
        kubernetes_version=kubernetes_version, settings=settings, namespace=namespace,
        service_account=service_account, scaler_env=scaler_env, alerts_url=alerts_url,
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[provider])),
    )
