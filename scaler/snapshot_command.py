"""`python -m scaler snapshot`: write the List `plan` / `explain` read, from the current kubeconfig's cluster.

Every kind they read (scaler.kube.snapshot), listed with the scaler's read permissions; nothing is changed.
`--output FILE` (default: stdout); what the API server does not serve is said on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kubernetes.config.config_exception import ConfigException

from scaler.kube.client import api_client
from scaler.kube.snapshot import read_cluster
from scaler.ports import KubeError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", help="the kubeconfig (default: $KUBECONFIG or ~/.kube/config)")
    parser.add_argument("--context", help="its context (default: the current one)")
    parser.add_argument("--output", "-o", help="write the List here (default: stdout)")


def main(args: argparse.Namespace) -> int:
    try:
        api = api_client(args.kubeconfig, args.context)
    except (ConfigException, OSError) as err:
        print(f"error: python -m scaler snapshot: kubeconfig: {err}", file=sys.stderr)
        return 2
    try:
        with api:
            data, notes = read_cluster(api)
    except KubeError as err:
        print(f"error: python -m scaler snapshot: {err}", file=sys.stderr)
        return 1
    text = json.dumps(data, indent=1) + "\n"
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    kinds: dict[str, int] = {}
    for obj in data["items"]:
        kinds[obj["kind"]] = kinds.get(obj["kind"], 0) + 1
    print("snapshot: " + (", ".join(f"{n} {k}" for k, n in kinds.items()) or "no objects"), file=sys.stderr)
    return 0
