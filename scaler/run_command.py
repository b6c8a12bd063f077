"""`python -m scaler run`: its options, the provider of the config's cloud, and the wiring of the loop
(`scaler.loop.Runtime`) to the cluster cache, the Lease, the metrics server and the shadow record.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys

from scaler.configfile import load_config
from scaler.core.config.settings import ConfigError, ScalerConfig
from scaler.core.planning.capacity import zone_hints
from scaler.kube.actions import KubeActions
from scaler.kube.cache import ClusterCache
from scaler.kube.client import api_client
from scaler.kube.leader import Leader
from scaler.loop import LOG_LEVELS, Runtime
from scaler.metrics import Health, Metrics, serve, setup_logging
from scaler.ports import PoolProvider
from scaler.shadow import ShadowRecorder

log = logging.getLogger("scaler.loop")  # the loop's name: what operators filter the scaler's lines by


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`run`'s options; where the Deployment sets an environment variable instead, the option falls back to it
    (the help says which, and --help shows the value it would take now)."""
    env = os.environ.get

    def from_env(text: str, name: str) -> str:
        now = (env(name) or "").replace("%", "%%")  # argparse %-formats help texts
        return f"{text} [env {name}; now: {now}]" if now else f"{text} [env {name}, unset]"

    parser.add_argument("--config", required=True, metavar="FILE",
                        help="the scaler's config (pools, limits, timings), e.g. the stack's scalerConfig output")
    parser.add_argument("--dry-run", action="store_true",
                        help="log each plan and change nothing (no cloud write, cordon, eviction, Event, Lease or "
                             "status ConfigMap)")
    parser.add_argument("--shadow", metavar="FILE",
                        help="shadow mode, beside the cluster's own autoscaler: a dry run that appends what it would "
                             "have done each pass to FILE (JSON lines; `shadow-report` compares it with what the "
                             "cluster did) and exports the comparison as gpuburst_shadow_* metrics")
    parser.add_argument("--kubeconfig", default=env("KUBECONFIG") or None, metavar="PATH",
                        help=from_env("kubeconfig file, outside the cluster (default: the in-cluster service account)",
                                      "KUBECONFIG"))
    parser.add_argument("--once", action="store_true", help="run one pass and exit (0: ok, 1: the pass failed)")
    parser.add_argument("--interval", type=float, default=None, metavar="SECONDS",
                        help="seconds between passes (default: the config's timings.scan_interval)")
    parser.add_argument("--namespace", default=env("POD_NAMESPACE", "gpuburst-system"), metavar="NAME",
                        help=from_env("namespace of the Lease and the status ConfigMap (default gpuburst-system)",
                                      "POD_NAMESPACE"))
    parser.add_argument("--identity", default=env("POD_NAME") or socket.gethostname(),
                        help=from_env("leader election identity (default: the host name)", "POD_NAME"))
    parser.add_argument("--metrics-port", type=int, default=8085, metavar="PORT",
                        help="port of /metrics, /healthz and /readyz (default 8085; 0: off)")
    parser.add_argument("--log-format", choices=("json", "text"), default="json",
                        help="json: one JSON object per line (default); text: one readable line per record")
    parser.add_argument("--log-level", choices=LOG_LEVELS, default=env("GPUBURST_LOG_LEVEL", "INFO").upper(),
                        type=str.upper, help=from_env("the least severe records logged (default INFO)",
                                                      "GPUBURST_LOG_LEVEL"))
    parser.add_argument("--sync-timeout", type=float, default=30.0, metavar="SECONDS",
                        help="seconds to wait for the first cache sync before the first pass (default 30); passes "
                             "then run but scale nothing down until the cache is synced")
    parser.add_argument("--interruption-queue-url", default=env("GPUBURST_INTERRUPTION_QUEUE_URL") or None,
                        metavar="URL",
                        help=from_env("AWS: the SQS queue EventBridge feeds with spot interruption notices (default: "
                                      "none read)", "GPUBURST_INTERRUPTION_QUEUE_URL"))
    parser.add_argument("--azure-subscription-id", default=env("AZURE_SUBSCRIPTION_ID") or None, metavar="ID",
                        help=from_env("Azure: the subscription of the AKS cluster or scale sets (required for an "
                                      "azure config)", "AZURE_SUBSCRIPTION_ID"))
    parser.add_argument("--azure-resource-group", default=env("GPUBURST_AZURE_RESOURCE_GROUP") or None, metavar="NAME",
                        help=from_env("Azure: resource group of the AKS cluster (agent pools) or of the scale sets "
                                      "(required for an azure config)", "GPUBURST_AZURE_RESOURCE_GROUP"))
    parser.add_argument("--aks-cluster", default=env("GPUBURST_AKS_CLUSTER") or None, metavar="NAME",
                        help=from_env("Azure: the managed cluster's name (default: the config's cluster)",
                                      "GPUBURST_AKS_CLUSTER"))


def make_provider(config: ScalerConfig, args: argparse.Namespace) -> PoolProvider:
    if config.cloud == "aws":
        from scaler.providers.aws import AwsProvider  # noqa: PLC0415 -- load one cloud's SDK only

        return AwsProvider(config, queue_url=args.interruption_queue_url)
    from scaler.providers.azure import AzureProvider  # noqa: PLC0415 -- load one cloud's SDK only

    if not args.azure_subscription_id or not args.azure_resource_group:
        raise ConfigError(f"{args.config}: an azure config needs --azure-subscription-id and "
                          "--azure-resource-group (or AZURE_SUBSCRIPTION_ID, GPUBURST_AZURE_RESOURCE_GROUP)")
    provider: PoolProvider = AzureProvider(config, subscription_id=args.azure_subscription_id,
                         resource_group=args.azure_resource_group, cluster_name=args.aks_cluster)
    return provider


def check_flags(args: argparse.Namespace) -> str | None:
    """What is wrong with the numeric flags, on one line naming the flag, before anything is contacted."""
    if not 0 <= args.metrics_port <= 65535:
        return f"--metrics-port {args.metrics_port}: expected a port from 1 to 65535, or 0 for none"
    if args.interval is not None and not 0 < args.interval <= 3600:
        return f"--interval {args.interval:g}: expected seconds above 0 and at most 3600"
    if not 0 <= args.sync_timeout <= 3600:
        return f"--sync-timeout {args.sync_timeout:g}: expected seconds from 0 to 3600"
    if args.log_level not in LOG_LEVELS:  # a default from GPUBURST_LOG_LEVEL is not checked by argparse
        return f"--log-level {args.log_level} (or GPUBURST_LOG_LEVEL): expected one of {', '.join(LOG_LEVELS)}"
    return None


def main(args: argparse.Namespace) -> int:
    why = check_flags(args)
    if why is not None:
        print(f"error: run: {why}", file=sys.stderr)
        return 2
    setup_logging(args.log_format, args.log_level)
    try:
        config = load_config(args.config)
        provider = make_provider(config, args)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    metrics = Metrics()
    try:
        shadow = ShadowRecorder(args.shadow, config, metrics) if args.shadow else None
    except (OSError, ValueError) as err:
        print(f"error: run: --shadow {args.shadow}: {err}", file=sys.stderr)
        return 2
    try:
        api = api_client(args.kubeconfig)
    except Exception as err:
        print(f"error: no Kubernetes API: {err}", file=sys.stderr)
        return 2
    timeout = config.runtime.kube_timeout()
    cache = ClusterCache(api, timeout=timeout, **config.runtime.informer_options())
    cache.start()
    if not cache.wait_synced(args.sync_timeout, pdbs=False):  # a failing PDB watch holds back drains only
        log.warning("cluster cache not synced after %.0fs: passes run, but nothing is scaled down until it is",
                    args.sync_timeout)
    interval = args.interval or config.timings.scan_interval
    health = Health(interval)
    if args.metrics_port:
        serve(metrics, health, args.metrics_port)
    leader = Leader(api, args.namespace, args.identity, lease_seconds=config.runtime.lease_for(interval),
                    timeout=timeout)
    actions = KubeActions(api, args.namespace, event_interval=config.runtime.event_interval, nodes=cache.raw_node,
                          before_change=leader.check, timeout=timeout)
    dry_run = args.dry_run or shadow is not None
    runtime = Runtime(config, provider, cache, actions, leader=leader, metrics=metrics, health=health,
                      dry_run=dry_run, interval=interval, namespace=args.namespace, recorder=shadow)
    signal.signal(signal.SIGTERM, lambda *_: runtime.stop.set())  # finish the pass, then exit
    log.info("gpuburst scaler running: cluster %s, %d configured pools, every %.0fs%s", config.cluster,
             len(config.pools), interval, f" (shadow: {args.shadow})" if shadow else " (dry run)" if dry_run else "")
    for hint in zone_hints(config.pools):
        log.warning("%s: %s", args.config, hint)
    try:
        return runtime.run(once=args.once)
    except KeyboardInterrupt:
        return 0
    finally:
        if not dry_run and not args.once:
            leader.release()  # the other replica takes over now, not a lease duration later
        if shadow is not None:
            shadow.close()
        cache.stop()
