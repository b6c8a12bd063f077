"""NVIDIA's DRA driver for GPUs (chart dra-driver-nvidia-gpu, pinned in versions.py) on the pools whose
GPUs are allocated through DRA (`gpu_allocation: dra`), and on no other node.

A node runs either the device plugin (nvidia.com/gpu; the Ansible device_plugin role keeps it off the
DRA pools) or this driver's GPU kubelet plugin, which publishes the node's ResourceSlices: the values
(render.dra_driver_values) give it a required node affinity on the pool label, `In` the DRA pools, and
the DRA pools' taints as tolerations, all derived from the pool model. The chart also makes the
DeviceClasses the scaler's DRA templates name (`gpu.nvidia.com`, `mig.nvidia.com`).

Its ComputeDomain part (multi-node NVLink / IMEX channels, GB200 NVL72-class systems) stays off: no
instance type of the catalogue has multi-node NVLink, and its controller Deployment is pinned to
control-plane nodes, which EKS and AKS do not show, so it would never get ready (and the atomic
release would roll back). The chart's ComputeDomain CRD is still installed by Helm (crds/): harmless,
nothing serves it.
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi_kubernetes as k8s

import pulumi
from gpuburst_platform import render
from gpuburst_platform.base import Ctx
from gpuburst_platform.settings import DRA_DRIVER_NAME, DRA_DRIVER_NAMESPACE


def declare(ctx: Ctx, namespace: k8s.core.v1.Namespace,
            depends_on: Sequence[pulumi.Resource] = ()) -> k8s.helm.v3.Release | None:
    """The driver's release, or None when no pool uses DRA."""
    if not render.dra_pool_names(ctx.config):
        return None
    return ctx.release("dra-driver-nvidia-gpu", DRA_DRIVER_NAME, DRA_DRIVER_NAMESPACE,
                       render.dra_driver_values(ctx.config), [namespace, *depends_on])
