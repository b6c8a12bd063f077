"""Print the GPU pools of a gpuburst scaler configuration as JSON, with their nodes' labels and taints.

Each pool also carries its device plugin config (`device_plugin_config`: time-slicing replicas or
the MIG strategy, null for whole GPUs), which the device_plugin role puts in the chart's config map
under the pool's name, the value of the label its nodes carry (nvidia.com/device-plugin.config).
The labels and taints come from the scaler's pool model (scaler.core.config.pool), the same object the
Pulumi program derives the cloud groups' tags and the nodes' kubelet flags from, so the device
plugin's tolerations can never drift from the pools. `gpu_allocation` (device-plugin or dra) says which
GPU agent serves the pool: the device_plugin role keeps off dra pools, the dra_driver role runs only there.
Reads YAML from a file or from stdin ("-").

    python gpu_pools.py --source Pulumi.aws-dev.yaml -  <  scalerConfig.yaml
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

from scaler.core.config.settings import ConfigError, parse_config


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", help="scaler configuration (YAML), or - for stdin")
    parser.add_argument("--source", help="name used in error messages (stack or file)")
    args = parser.parse_args()
    source = args.source or args.path
    try:
        text = sys.stdin.read() if args.path == "-" else Path(args.path).read_text(encoding="utf-8")
    except OSError as err:
        # A relative gpuburst_env_pools_file is read from gpuburst_env_repo (where ansible-playbook runs).
        print(f"gpuburst_env_pools_file {args.path}: cannot read it from {Path.cwd()}: {err.strerror}",
              file=sys.stderr)
        return 2
    try:
        config = parse_config(yaml.safe_load(text), source)
    except (ConfigError, yaml.YAMLError) as err:
        print(f"{source}: {err}", file=sys.stderr)
        return 1
    pools = [
        {"name": p.name, "labels": p.node_labels(), "taints": [str(t) for t in p.node_taints()],
         "device_plugin_config": p.sharing.device_plugin_config() if p.sharing and not p.dra else None,
         "gpu_allocation": p.gpu_allocation}
        for p in config.pools if p.role == "gpu"
    ]
    print(json.dumps(pools))
    return 0


if __name__ == "__main__":
    sys.exit(main())
