"""`Platform`: everything gpuburst runs on a cluster, the same on AWS and Azure.

Fed by the cluster's Kubernetes provider (built from its kubeconfig), the validated `ScalerConfig`
that also made the cloud pools, the scaler's cloud identity (IRSA role ARN or workload-identity
client id) and `PlatformSettings`. Declares, through pulumi-kubernetes, one module per concern:

- namespaces and PriorityClasses for GPU training and inference (here);
- NVIDIA's DRA driver on the pools with `gpu_allocation: dra` only (dra.py);
- monitoring (prometheus.py): kube-prometheus-stack with Alertmanager and Grafana, gpuburst's alerts
  and dashboard (their data: monitoring.py);
- the GPU metrics chain (metrics.py): dcgm-exporter, then prometheus-adapter (TLS from the Ansible
  metrics_certs role's Secret, APIService verified with its CA) or KEDA;
- the scaler (scaler_chart.py): our chart, charts/gpuburst-scaler, as one Helm release whose values
  come from the pools;
- Kueue wired to gpuburst (kueue.py), when `kueue` is on;
- the bin-packing second scheduler (scheduler.py, `gpuburst-binpack`, the profile the simulator models);
- the example GPU inference Deployment with its HPA or KEDA ScaledObject (example.py).

Every name is fixed and every rendering sorted, so the component is deterministic.
"""

from __future__ import annotations

from collections.abc import Mapping

import pulumi_kubernetes as k8s

import pulumi
from gpuburst_platform import dra, example, kueue, metrics, prometheus, render, scaler_chart, scheduler, versions
from gpuburst_platform.base import Ctx, meta
from gpuburst_platform.settings import (
    DRA_DRIVER_NAMESPACE,
    KEDA_NAMESPACE,
    KUEUE_NAMESPACE,
    MONITORING_NAMESPACE,
    SCALER_NAMESPACE,
    PlatformSettings,
)
from gpuburst_platform.versions import kube_scheduler_image
from scaler.core.config.catalogue import Cloud
from scaler.core.config.settings import ScalerConfig
from scaler.core.model import keys

PRIORITY_CLASSES = {
    # Inference serves users: it may preempt training, which checkpoints and restarts.
    render.PRIORITY_INFERENCE: (100000, "GPU inference: serving traffic, preempts training"),
    render.PRIORITY_TRAINING: (50000, "GPU training and batch jobs: checkpoint, may be preempted"),
}


def _check(name: str, config: ScalerConfig, cloud: Cloud, settings: PlatformSettings,
           alerts_url: pulumi.Input[str] | None) -> None:
    if cloud != config.cloud:
        raise ValueError(f"platform {name}: cloud is {cloud!r} but the scaler config's cloud is {config.cloud!r}")
    if not any(p.role == "system" for p in config.pools):
        raise ValueError(
            f"platform {name}: the pools have no role 'system' pool; the scaler, Prometheus and the "
            f"schedulers are pinned to {keys.LABEL_ROLE}=system nodes"
        )
    dra = versions.CHARTS["dra-driver-nvidia-gpu"]
    shared = [p.name for p in config.pools if p.dra and p.sharing is not None and p.sharing.memory_step_gib]
    if shared and not versions.dra_driver_has(versions.DRA_DRIVER_SHARES_MEMORY_FROM, dra.version):
        raise ValueError(f"platform {name}: pool {shared[0]}: gpu_sharing.memory: the pinned NVIDIA DRA driver "
                         f"({dra.chart.rsplit('/', 1)[-1]} {dra.version}) publishes each GPU for one claim (no "
                         "consumable capacity), so its nodes would not take the shares the scaler plans; use "
                         "gpu_sharing mig, or whole GPUs")
    dynamic = [p.name for p in config.pools if p.sharing is not None and p.sharing.dynamic]
    booted = [p.name for p in config.pools if p.dra and p.sharing is not None and p.sharing.cut]
    if dynamic and booted:
        raise ValueError(f"platform {name}: pool {booted[0]}: gpu_sharing.mig: the NVIDIA DRA driver's DynamicMIG, "
                         f"turned on for pool {dynamic[0]}, deletes the MIG devices a boot layout made on every DRA "
                         "node; declare it dynamic too, or give it gpu_allocation device-plugin")
    if settings.alerts.receiver != "none" and alerts_url is None:
        raise ValueError(f"platform {name}: alerts.receiver is {settings.alerts.receiver} but the stack has no "
                         "receiver URL: pulumi config set --secret gpuburst:alertsUrl <URL>")


def namespace_names(settings: PlatformSettings, scaler_namespace: str, config: ScalerConfig) -> list[str]:
    names = [scaler_namespace, MONITORING_NAMESPACE]
    if render.dra_pool_names(config):
        names.append(DRA_DRIVER_NAMESPACE)
    if settings.metrics == "keda":
        names.append(KEDA_NAMESPACE)
    if settings.kueue:
        names.append(KUEUE_NAMESPACE)
    # The example LocalQueue (Kueue) and the example Deployment live there.
    if (settings.kueue or settings.example_inference) and settings.example_namespace not in names:
        names.append(settings.example_namespace)
    return names


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
        _check(name, config, cloud, settings, alerts_url)
        self.scaler_namespace = namespace
        self.service_account_name = service_account
        self.scheduler_image = kube_scheduler_image(kubernetes_version)  # fails early on an unknown version
        ctx = Ctx(name, pulumi.ResourceOptions(parent=self, provider=provider), config, cloud, settings, namespace)

        self.namespaces = ns = {n: k8s.core.v1.Namespace(ctx.rname(f"ns-{n}"), metadata=meta(n), opts=ctx.child())
                                for n in namespace_names(settings, namespace, config)}
        self.priority_classes = {
            pc: k8s.scheduling.v1.PriorityClass(
                ctx.rname(f"pc-{pc}"), metadata=meta(pc), value=value, global_default=False,
                preemption_policy="PreemptLowerPriority", description=desc, opts=ctx.child(),
            )
            for pc, (value, desc) in PRIORITY_CLASSES.items()
        }
        # The DRA pools' GPU agent (the device plugin is the Ansible collection's, kept off these pools).
        self.dra_driver = dra.declare(ctx, ns[DRA_DRIVER_NAMESPACE]) if DRA_DRIVER_NAMESPACE in ns else None
        self.prometheus = prometheus.declare(ctx, ns[MONITORING_NAMESPACE], alerts_url)
        self.metrics = metrics.declare(ctx, ns[MONITORING_NAMESPACE], self.prometheus, ns.get(KEDA_NAMESPACE))
        self.scaler = scaler_chart.declare(ctx, ns[namespace], self.prometheus, identity, service_account,
                                           dict(scaler_env or {}))
        if settings.kueue:
            self.kueue = kueue.declare(ctx, ns[KUEUE_NAMESPACE], ns.get(settings.example_namespace))
        if settings.binpack_scheduler:
            self.scheduler = scheduler.declare(ctx, ns[namespace], self.scheduler_image)
        if settings.example_inference:
            self.example = example.declare(ctx, ns[settings.example_namespace], list(self.priority_classes.values()),
                                           self.metrics.serving())

        self.register_outputs({
            "scaler_namespace": namespace,
            "metrics": settings.metrics,
            "dra_pools": render.dra_pool_names(config),
            "scheduler_name": render.SCHEDULER_NAME if settings.binpack_scheduler else "default-scheduler",
        })


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
