"""`python -m scaler import-pools`: adopt an existing cluster's node groups as a pools file.

Reads the groups (AWS Auto Scaling groups; AKS agent pools and the resource group's VM scale sets),
maps them with scaler.core.config.adopt and prints the pools file (or writes it to --output), its header
naming every group, tag, label or taint it could not map, and the tags the scaler (or cluster-autoscaler)
needs to own the groups. It changes nothing in the cloud unless `--apply` is given: then it adds those tags.
Its flags are checked before the cloud is read.
The file passes the same checks as `run` and `simulate`.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

import yaml

from scaler.core.config.adopt import Adoption, NodeGroup, adopt
from scaler.core.config.settings import ConfigError
from scaler.providers.aws_groups import AwsGroups
from scaler.providers.azure_groups import AzureGroups
from scaler.providers.base import ProviderError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    parser.add_argument("--cloud", required=True, choices=("aws", "azure"))
    parser.add_argument("--cluster", required=True, help="the cluster's name, as its groups' tags spell it")
    parser.add_argument("--region", default=None, help="AWS region (default: the AWS configuration's); "
                        "Azure: the location, written to the pools file")
    parser.add_argument("--apply", action="store_true", help="add the tags the file's header lists to the groups "
                        "(default: change nothing in the cloud)")
    parser.add_argument("--dry-run", action="store_true", help="the default: print the tags to add, tag nothing "
                        "(kept for scripts written before --apply)")
    parser.add_argument("--output", help="write the pools file here (default: stdout)")
    parser.add_argument("--azure-subscription-id", default=env("AZURE_SUBSCRIPTION_ID") or None)
    parser.add_argument("--azure-resource-group", default=env("GPUBURST_AZURE_RESOURCE_GROUP") or None,
                        help="Azure: resource group of the AKS cluster and of the scale sets")
    parser.add_argument("--aks-cluster", default=None, help="Azure: the AKS resource's name (default: --cluster)")


class _Reader:
    """The cloud's groups behind one small interface (the provider layer's readers)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        if args.cloud == "aws":
            self.aws = AwsGroups(region=args.region)
            self.region = args.region or self.aws.asg.meta.region_name or ""
        else:
            if not args.azure_subscription_id or not args.azure_resource_group:
                raise _Refused("--cloud azure needs --azure-subscription-id and --azure-resource-group "
                               "(or AZURE_SUBSCRIPTION_ID, GPUBURST_AZURE_RESOURCE_GROUP)")
            self.azure = AzureGroups(subscription_id=args.azure_subscription_id,
                                     resource_group=args.azure_resource_group,
                                     cluster_name=args.aks_cluster or args.cluster)
            self.region = args.region or ""

    def groups(self) -> list[NodeGroup]:
        return self.aws.groups() if self.args.cloud == "aws" else self.azure.groups()

    def add_tags(self, group: NodeGroup, tags: dict[str, str]) -> None:
        if self.args.cloud == "aws":
            self.aws.add_tags(group.name, tags)
        else:
            self.azure.add_tags(group, tags)


class _Refused(ValueError):
    pass


CLUSTER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def render(result: Adoption, *, dry_run: bool) -> str:
    """The pools file: a header naming what was not mapped, the YAML, and (dry run) the tags to add."""
    lines = [f"# Pools of cluster {result.config['cluster']}, imported from its {result.config['cloud']} node "
             "groups by `python -m scaler import-pools`."]
    if result.unmapped:
        lines.append("# Not mapped:")
        lines += [f"#   {u}" for u in result.unmapped]
    body = yaml.safe_dump(result.config, sort_keys=False, default_flow_style=None, width=120)
    out = "\n".join(lines) + "\n" + body
    if dry_run and result.tags_to_add:
        tags = yaml.safe_dump(result.tags_to_add, sort_keys=True, width=200).splitlines()
        out += ("# Tags to add so the scaler (or cluster-autoscaler) owns the groups (import-pools --apply "
                "adds them):\n" + "".join(f"#   {t}\n" for t in tags))
    return out


def check_flags(args: argparse.Namespace) -> str | None:
    """What is wrong with the flags, on one line naming the flag, before anything is read or written."""
    if not CLUSTER_NAME.fullmatch(args.cluster):
        return (f"--cluster {args.cluster!r}: expected the cluster's name (letters, digits, '-', '_' and '.', "
                "starting with a letter or digit)")
    if args.apply and args.dry_run:
        return "--apply and --dry-run contradict each other (without --apply nothing is changed)"
    if args.output:
        out = Path(args.output)
        parent = out.parent if str(out.parent) else Path(".")
        if out.is_dir():
            return f"--output {args.output}: is a directory"
        if not parent.is_dir():
            return f"--output {args.output}: no such directory: {parent}"
        if not os.access(parent, os.W_OK) or (out.exists() and not os.access(out, os.W_OK)):
            return f"--output {args.output}: not writable"
    return None


def _reader(args: argparse.Namespace) -> _Reader:
    """The cloud's client; a client that cannot be made (no region, a malformed one, no credentials to build
    it from) is a bad input, said on one line."""
    try:
        return _Reader(args)
    except _Refused:
        raise
    except Exception as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else err.__class__.__name__
        if args.cloud == "aws":
            raise _Refused(f"--region {args.region or '(none)'}: {first} (give --region or set AWS_REGION)") \
                from None
        raise _Refused(f"the Azure client: {first}") from None


def main(args: argparse.Namespace) -> int:
    why = check_flags(args)
    if why is not None:
        print(f"error: import-pools: {why}", file=sys.stderr)
        return 2
    try:
        reader = _reader(args)
        groups = reader.groups()
        result = adopt(groups, cloud=args.cloud, cluster=args.cluster, region=reader.region)
    except (_Refused, ConfigError) as err:
        print(f"error: import-pools: {err}", file=sys.stderr)
        return 2
    except ProviderError as err:
        print(f"error: import-pools: {err}", file=sys.stderr)
        return 1
    if not result.config["pools"]:
        why = f"; {len(result.unmapped)} not mapped: " + "; ".join(map(str, result.unmapped)) if result.unmapped else ""
        print(f"error: import-pools: no node group of cluster {args.cluster!r} could be imported "
              f"({len(groups)} groups read){why}", file=sys.stderr)
        return 1
    text = render(result, dry_run=not args.apply)
    if args.output:
        try:
            Path(args.output).write_text(text, encoding="utf-8")
        except OSError as err:
            print(f"error: import-pools: --output {args.output}: {err.strerror or err}", file=sys.stderr)
            return 2
    else:
        sys.stdout.write(text)
    print(f"import-pools: {len(result.config['pools'])} pools from {len(result.groups)} groups of "
          f"{args.cluster}; {len(result.unmapped)} items not mapped", file=sys.stderr)
    if not args.apply:
        return 0
    failed = 0
    for name, tags in sorted(result.tags_to_add.items()):
        group = next(g for g in result.groups.values() if g.name == name)
        try:
            reader.add_tags(group, tags)
            print(f"import-pools: tagged {name} ({len(tags)} tags)", file=sys.stderr)
        except ProviderError as err:
            failed += 1
            print(f"error: import-pools: tagging {name}: {err}", file=sys.stderr)
    return 1 if failed else 0
