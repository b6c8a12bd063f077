"""EKS AL2023 node bootstrap: nodeadm's `NodeConfig` in a MIME multi-part user data document.

The kubelet flags carry the pool model's labels and taints (`--node-labels`, `--register-with-taints`),
so a node registers with exactly what the scaler's template node and the ASG's node-template tags
say. Pure: no Pulumi, no I/O; `aws.py` feeds it the cluster's endpoint, CA and service CIDR.
"""

from __future__ import annotations

from email.mime.multipart import MIMEMultipart
from email.mime.nonmultipart import MIMENonMultipart

import yaml

from scaler.core.pool import Pool

NODECONFIG_CONTENT_TYPE = ("application", "node.eks.aws")
_BOUNDARY = "GPUBURST-NODECONFIG"  # fixed, so the same pool renders the same bytes


def kubelet_flags(pool: Pool) -> list[str]:
    labels = ",".join(f"{k}={v}" for k, v in sorted(pool.node_labels().items()))
    flags = [f"--node-labels={labels}"]
    taints = pool.node_taints()
    if taints:
        flags.append("--register-with-taints=" + ",".join(str(t) for t in taints))
    return flags


def node_config(pool: Pool, *, cluster: str, endpoint: str, certificate_authority: str, service_cidr: str) -> str:
    """nodeadm's NodeConfig (YAML) for one pool."""
    doc = {
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "spec": {
            "cluster": {
                "name": cluster,
                "apiServerEndpoint": endpoint,
                "certificateAuthority": certificate_authority,
                "cidr": service_cidr,
            },
            "kubelet": {
                "config": {"maxPods": pool.max_pods},
                "flags": kubelet_flags(pool),
            },
        },
    }
    return "---\n" + yaml.safe_dump(doc, sort_keys=False, width=10_000)


def user_data(pool: Pool, *, cluster: str, endpoint: str, certificate_authority: str, service_cidr: str) -> str:
    """The MIME multi-part document nodeadm reads from the instance's user data (not yet base64)."""
    message = MIMEMultipart("mixed", boundary=_BOUNDARY)
    part = MIMENonMultipart(*NODECONFIG_CONTENT_TYPE)
    part.set_payload(node_config(pool, cluster=cluster, endpoint=endpoint,
                                 certificate_authority=certificate_authority, service_cidr=service_cidr))
    message.attach(part)
    return message.as_string()
