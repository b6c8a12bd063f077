"""What every part of the platform declares with: the component's name, options and inputs.

`Ctx` is built once by `Platform` (component.py) and handed to each part (monitoring, metrics,
scaler_chart, kueue, scheduler, example); every resource it makes is the component's child, through
the cluster's provider, so URNs do not depend on which module declares a resource.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi_kubernetes as k8s

import pulumi
from gpuburst_platform.settings import PlatformSettings
from gpuburst_platform.versions import CHARTS
from scaler.core.config.catalogue import Cloud
from scaler.core.config.settings import ScalerConfig

APP_LABEL = "app.kubernetes.io/name"
RBAC_GROUP = "rbac.authorization.k8s.io"


def meta(name: str, namespace: str | None = None, **labels: str) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "labels": {"app.kubernetes.io/part-of": "gpuburst", **labels}}
    if namespace is not None:
        out["namespace"] = namespace
    return out


@dataclass(frozen=True)
class Ctx:
    name: str  # the component's name: every child's Pulumi name starts with it
    opts: pulumi.ResourceOptions  # parent (the component) and provider (the cluster)
    config: ScalerConfig
    cloud: Cloud
    settings: PlatformSettings
    scaler_namespace: str

    def child(self, depends_on: Sequence[pulumi.Resource] = ()) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions.merge(self.opts, pulumi.ResourceOptions(depends_on=list(depends_on)))

    def rname(self, suffix: str) -> str:
        return f"{self.name}-{suffix}"

    def release(self, key: str, release: str, namespace: str, values: Mapping[str, Any],
                depends_on: Sequence[pulumi.Resource], wait: bool = True) -> k8s.helm.v3.Release:
        """An official chart at its pinned version. `wait`: roll back unless every pod gets ready in time."""
        chart = CHARTS[key]
        return k8s.helm.v3.Release(
            self.rname(release),
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
            opts=self.child(depends_on),
        )
