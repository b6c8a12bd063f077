"""`python -m scaler permissions`: print the cloud permissions the scaler needs, as JSON the cloud's CLI reads.

The documents come from scaler/permissions.py, the one source the Pulumi program deploys too:
- `--cloud aws`: the IAM policy of the scaler's IRSA role (mutations only on the groups tagged for
  `--cluster`; the interruption queue only with `--queue-arn`), or with `--trust-oidc-provider` the role's
  trust policy (only the scaler's service account may assume it), or with `--queue-policy` the interruption
  queue's policy (only the cluster's EventBridge rules, `<cluster>-<event>`, may send to it).
- `--cloud azure`: a custom role definition for `az role definition create --role-definition`: `--role pools`
  (assign it on each agent pool, or on the node resource group for plain scale sets) or `--role quotas`
  (assign it on the subscription).
Reads nothing from the cloud.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from scaler.permissions import (
    AWS_INTERRUPTION_EVENTS,
    aws_interruption_queue_policy,
    aws_interruption_rule_name,
    aws_irsa_trust_policy,
    aws_scaler_policy,
    azure_role_definition,
)

OIDC_PROVIDER_PREFIX = ":oidc-provider/"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    parser.add_argument("--cloud", required=True, choices=("aws", "azure"))
    parser.add_argument("--cluster", required=True, help="the cluster's name, as its groups' tags spell it")
    parser.add_argument("--queue-arn", help="AWS: the spot interruption queue's ARN (receive and delete only there)")
    parser.add_argument("--trust-oidc-provider", metavar="ARN",
                        help="AWS: print the role's trust policy for this IAM OIDC provider instead of its policy")
    parser.add_argument("--queue-policy", action="store_true",
                        help="AWS: print the interruption queue's policy (needs --queue-arn) instead of the role's")
    parser.add_argument("--namespace", default="gpuburst-system", help="the scaler's namespace (trust policy)")
    parser.add_argument("--service-account", default="gpuburst-scaler", help="its ServiceAccount (trust policy)")
    parser.add_argument("--role", choices=("pools", "quotas"), default="pools",
                        help="Azure: the role on the agent pools (default) or the subscription's quota reader")
    parser.add_argument("--kinds", nargs="+", choices=("agentpool", "vmss"), default=["agentpool"],
                        help="Azure: the kinds of pools the scaler owns (default: AKS agent pools)")
    parser.add_argument("--azure-subscription-id", default=env("AZURE_SUBSCRIPTION_ID") or None)
    parser.add_argument("--azure-resource-group", default=env("GPUBURST_AZURE_RESOURCE_GROUP") or None,
                        help="Azure: the AKS cluster's resource group (where the pools role is defined)")
    parser.add_argument("--node-resource-group", help="Azure, --kinds vmss: the resource group of the scale sets")


def _aws(args: argparse.Namespace) -> dict[str, Any]:
    if args.queue_policy:
        parts = (args.queue_arn or "").split(":")
        if len(parts) != 6 or parts[:3] != ["arn", "aws", "sqs"]:
            raise ValueError(f"--queue-policy needs --queue-arn arn:aws:sqs:<region>:<account>:<name>, "
                             f"not {args.queue_arn!r}")
        rules = [f"arn:aws:events:{parts[3]}:{parts[4]}:rule/{aws_interruption_rule_name(args.cluster, event)}"
                 for event in AWS_INTERRUPTION_EVENTS]
        return aws_interruption_queue_policy(args.queue_arn, rules)
    if args.trust_oidc_provider is None:
        return aws_scaler_policy(args.cluster, args.queue_arn)
    if OIDC_PROVIDER_PREFIX not in args.trust_oidc_provider:
        raise ValueError(f"--trust-oidc-provider {args.trust_oidc_provider!r}: not an IAM OIDC provider ARN "
                         "(arn:aws:iam::<account>:oidc-provider/oidc.eks.<region>.amazonaws.com/id/<id>)")
    issuer = args.trust_oidc_provider.split(OIDC_PROVIDER_PREFIX, 1)[1]
    subject = f"system:serviceaccount:{args.namespace}:{args.service_account}"
    return aws_irsa_trust_policy(args.trust_oidc_provider, issuer, subject)


def _azure(args: argparse.Namespace) -> dict[str, Any]:
    if not args.azure_subscription_id or not args.azure_resource_group:
        raise ValueError("--cloud azure needs --azure-subscription-id and --azure-resource-group "
                         "(or AZURE_SUBSCRIPTION_ID, GPUBURST_AZURE_RESOURCE_GROUP)")
    subscription = f"/subscriptions/{args.azure_subscription_id}"
    scopes = [subscription] if args.role == "quotas" else [f"{subscription}/resourceGroups/{args.azure_resource_group}"]
    if args.role == "pools" and "vmss" in args.kinds:
        if not args.node_resource_group:
            raise ValueError("--kinds vmss needs --node-resource-group (the scale sets' resource group)")
        scopes.append(f"{subscription}/resourceGroups/{args.node_resource_group}")
    return azure_role_definition(args.role, args.azure_resource_group, args.cluster, set(args.kinds), scopes)


def main(args: argparse.Namespace) -> int:
    try:
        doc = _aws(args) if args.cloud == "aws" else _azure(args)
    except ValueError as err:
        print(f"error: python -m scaler permissions: {err}", file=sys.stderr)
        return 2
    print(json.dumps(doc, indent=2))
    return 0
