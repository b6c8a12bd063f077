"""EKS AL2023 node bootstrap: nodeadm's `NodeConfig` in a MIME multi-part user data document.

The kubelet flags carry the pool model's labels and taints (`--node-labels`, `--register-with-taints`),
so a node registers with exactly what the scaler's template node and the ASG's node-template tags
say. A MIG pool adds a shell part that cuts every GPU into the pool's layout (NVIDIA mig-parted's
config, applied with mig-parted where the AMI has it, else with nvidia-smi); AL2023 runs user-data
scripts before nodeadm starts the kubelet, so the device plugin finds the MIG devices at once. A pool
with a warm pool adds a script that holds the boot while the instance is headed for the warm pool (its
target lifecycle state, read from the instance metadata, is Warmed:*): the node joins the cluster only
when a scale-out takes it into service (the group stops a Stopped pool's instance meanwhile, and the
kubelet starts on the boot that follows).
Pure: no Pulumi, no I/O; `aws.py` feeds it the cluster's endpoint, CA and service CIDR.
"""

from __future__ import annotations

from email.mime.multipart import MIMEMultipart
from email.mime.nonmultipart import MIMENonMultipart

import yaml

from scaler.core.config.pool import Pool

NODECONFIG_CONTENT_TYPE = ("application", "node.eks.aws")
SCRIPT_CONTENT_TYPE = ("text", "x-shellscript")
MIG_PARTED_CONFIG = "/etc/gpuburst/mig-parted.yaml"
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
    for script in (warm_script(pool), mig_script(pool)):
        if script:
            shell = MIMENonMultipart(*SCRIPT_CONTENT_TYPE)
            shell.set_payload(script)
            message.attach(shell)
    return message.as_string()


def warm_script(pool: Pool) -> str | None:
    """Hold the boot while the instance is going into the warm pool; None for a pool without one."""
    if pool.warm is None:
        return None
    imds = "http://169.254.169.254/latest"
    return "\n".join([
        "#!/bin/bash",
        f"# gpuburst: pool {pool.name} has a warm pool: join the cluster only once in service",
        "state() {",
        f"  token=$(curl -sf -X PUT {imds}/api/token -H 'X-aws-ec2-metadata-token-ttl-seconds: 60')",
        f"  curl -sf -H \"X-aws-ec2-metadata-token: $token\" {imds}/meta-data/autoscaling/target-lifecycle-state",
        "}",
        "while [[ \"$(state)\" == Warmed:* ]]; do sleep 5; done",
        "",
    ])


def mig_script(pool: Pool) -> str | None:
    """The boot script that applies a MIG pool's layout to every GPU; None for other pools."""
    parted = pool.sharing.mig_parted_config(pool.name) if pool.sharing else None
    if parted is None or pool.sharing is None:
        return None
    name = next(iter(parted["mig-configs"]))
    # nvidia-smi places GPU instances best largest first.
    profiles = sorted(pool.sharing.per_gpu.items(), key=lambda kv: (-int(kv[0].split("g.")[0]), kv[0]))
    instances = ",".join(p for p, n in profiles for _ in range(n))
    # a mixed layout on some GPUs only (gpu_sharing.mig.gpus): the others keep MIG disabled
    only = "" if pool.sharing.cut >= pool.sharing.gpus else f" -i {','.join(map(str, range(pool.sharing.cut)))}"
    config = yaml.safe_dump(parted, sort_keys=False)
    return "\n".join([
        "#!/bin/bash",
        f"# gpuburst: MIG layout of pool {pool.name} ({pool.sharing.mig_strategy} strategy)",
        "set -euo pipefail",
        f"install -d -m 0755 {MIG_PARTED_CONFIG.rsplit('/', 1)[0]}",
        f"cat > {MIG_PARTED_CONFIG} <<'MIGCONFIG'",
        config.rstrip("\n"),
        "MIGCONFIG",
        "if command -v nvidia-mig-parted >/dev/null; then",
        f"  nvidia-mig-parted apply -f {MIG_PARTED_CONFIG} -c {name}",
        "else",
        f"  nvidia-smi{only} -mig 1",
        f"  nvidia-smi mig{only} -dci || true",
        f"  nvidia-smi mig{only} -dgi || true",
        f"  nvidia-smi mig{only} -cgi {instances} -C",
        "fi",
        "",
    ])
