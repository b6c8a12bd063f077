"""The platform's stack settings (`gpuburst:platform` in `Pulumi.<env>.yaml`), validated like the pools."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

import scaler
from gpuburst_platform.monitoring import AlertSettings

MetricsPath = Literal["prometheus-adapter", "keda"]

# Where things live in the cluster. The Ansible metrics_certs role issues the adapter's serving
# certificate for ADAPTER_SERVICE in MONITORING_NAMESPACE, stores it in `metrics_tls_secret` and
# patches the APIService's caBundle: these are the role's defaults (tests/platform checks they agree).
SCALER_NAMESPACE = "gpuburst-system"
MONITORING_NAMESPACE = "monitoring"
KEDA_NAMESPACE = "keda"
KUEUE_NAMESPACE = "kueue-system"
# NVIDIA's DRA driver (only when some pool says gpu_allocation: dra): its release, its namespace and its objects'
# names (the chart's nameOverride) keep the name of its chart before the rename (nvidia-dra-driver-gpu, up to
# 25.12.0), so a cluster that has it upgrades in place (the renamed chart's docs/upgrade.md).
DRA_DRIVER_NAME = "nvidia-dra-driver-gpu"
DRA_DRIVER_NAMESPACE = DRA_DRIVER_NAME
ADAPTER_SERVICE = "custom-metrics-apiserver"
CUSTOM_METRICS_APISERVICE = "v1beta1.custom.metrics.k8s.io"


class PlatformSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    metrics: MetricsPath = Field(
        default="prometheus-adapter",
        description="how HPAs get GPU utilisation: the custom metrics API, or KEDA with a Prometheus trigger",
    )
    scaler_image: str = Field(
        default=f"ghcr.io/gpuburst/scaler:{scaler.__version__}",
        description="the scaler's image (repository:tag, or repository@sha256:...); a private mirror works "
                    "the same way (the nodes' pull credentials, or scaler_image_pull_secrets)",
    )
    scaler_image_digest: str | None = Field(
        default=None, pattern=r"^sha256:[0-9a-f]{64}$",
        description="the digest the release workflow printed and signed: the Deployment pulls exactly it",
    )
    scaler_image_pull_secrets: list[str] = Field(
        default_factory=list, description="Secrets in the scaler's namespace to pull a private image with")
    scaler_replicas: int = Field(default=2, ge=1, le=5)
    scaler_dry_run: bool = False
    scaler_env: dict[str, str] = Field(
        default_factory=dict, description="extra plain settings for the scaler (the policy pack refuses credentials)"
    )
    metrics_tls_secret: str = Field(
        default=f"{ADAPTER_SERVICE}-tls", pattern=r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$",
        description="kubernetes.io/tls Secret the Ansible metrics_certs role writes in the monitoring namespace",
    )
    metrics_ca_bundle: str | None = Field(
        default=None,
        description="PEM of the CA that signed the adapter's serving certificate (public; the Ansible role's CA)",
    )
    binpack_scheduler: bool = True
    example_inference: bool = True
    example_namespace: str = Field(default="gpu-examples", pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
    example_image: str = "nvcr.io/nvidia/cuda:12.6.3-base-ubuntu24.04"
    gpu_utilization_target: int = Field(default=60, gt=0, le=100)
    alerts: AlertSettings = Field(
        default_factory=AlertSettings,
        description="where gpuburst's alerts go; the Slack / webhook URL is the stack secret gpuburst:alertsUrl",
    )
    grafana: bool = Field(default=True, description="Grafana with gpuburst's fleet dashboard (kube-prometheus-stack's)")
    kueue: bool = Field(
        default=False,
        description="install Kueue with an AdmissionCheck that asks gpuburst for capacity (ProvisioningRequests) "
                    "and a GPU ClusterQueue (examples/kueue-gpu-job.yaml queues a job there)",
    )

    @field_validator("scaler_image", "example_image")
    @classmethod
    def _pinned(cls, v: str) -> str:
        name = v.rsplit("/", 1)[-1]
        if "@sha256:" not in v and (":" not in name or name.endswith(":latest")):
            raise ValueError(f"{v!r}: pin the image with a version tag or a digest (not latest)")
        return v

    @model_validator(mode="after")
    def _one_digest(self) -> PlatformSettings:
        _, _, pinned = self.scaler_image.partition("@")
        if self.scaler_image_digest and pinned and pinned != self.scaler_image_digest:
            raise ValueError(f"scaler_image_digest {self.scaler_image_digest} differs from the digest in "
                             f"scaler_image ({pinned}): give one")
        return self

    def scaler_image_ref(self) -> str:
        """What the scaler's pods pull: the image, by digest when one is given."""
        if self.scaler_image_digest and "@" not in self.scaler_image:
            return f"{self.scaler_image}@{self.scaler_image_digest}"
        return self.scaler_image

    @field_validator("metrics_ca_bundle")
    @classmethod
    def _pem(cls, v: str | None) -> str | None:
        if v is not None and "-----BEGIN CERTIFICATE-----" not in v:
            raise ValueError("must be a PEM certificate (-----BEGIN CERTIFICATE-----)")
        return v


def parse_settings(data: Any, source: str) -> PlatformSettings:
    """Validate the `platform` mapping; errors name the stack (source) and the key."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ValueError(f"{source}: platform: expected a mapping, got {type(data).__name__}")
    try:
        return PlatformSettings.model_validate(data)
    except ValidationError as err:
        lines = [
            f"{source}: platform{''.join('.' + str(p) for p in e['loc'])}: {e['msg'].removeprefix('Value error, ')}"
            for e in err.errors()
        ]
        raise ValueError("\n".join(lines)) from None
