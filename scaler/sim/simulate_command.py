"""`python -m scaler simulate`: replay a GPU job trace through the scaler in a simulated cloud.

Progress goes to stderr, the report summary to stdout; `--report` writes the JSON report and
`--plot` the PNG timeline. Bad input (trace row, pools file, outage spec, an output path that cannot
be written) is one line on stderr naming the file and line or field, and exit code 2, before the run
starts. Jobs that never started are named at the end of the summary with a warning; `--strict` makes
them exit code 1.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
from pathlib import Path
from typing import Any

from scaler.core.config.settings import ConfigError
from scaler.core.scheduling.scoring import PROFILES
from scaler.sim.batch import RayError, check_ray
from scaler.sim.buffer import buffer_line
from scaler.sim.plot import plot_timeline
from scaler.sim.report import ca_section, summary
from scaler.sim.simulation import InputError as InputError  # noqa: PLC0414 - re-exported: the command's
from scaler.sim.simulation import check_output
from scaler.sim.simulation import simulate as simulate  # noqa: PLC0414 - inputs and run, named from here too
from scaler.sim.sweep import run_sweep
from scaler.sim.trace import TraceError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trace", required=True, help="trace CSV (the format of ../shared/traces)")
    parser.add_argument("--pools", required=True, help="pools file (YAML), e.g. examples/pools-aws.yaml")
    parser.add_argument("--hours", type=float, default=None,
                        help="replay only the jobs submitted in the first H hours (they all run to completion)")
    parser.add_argument("--start-hour", type=float, default=0.0, metavar="H",
                        help="replay the trace from hour H: jobs submitted before are left out, the others are "
                             "submitted H hours earlier, on an empty cluster (with --hours: a slice of H hours from "
                             "there; default 0)")
    parser.add_argument("--spot-outage", action="append", default=[], metavar="ZONE:START_S:END_S",
                        help="no spot capacity in ZONE between START_S and END_S seconds (repeatable)")
    parser.add_argument("--quota", action="append", default=[], metavar="FAMILY=VCPUS",
                        help="cap an EC2 vCPU quota family (G-spot, G-on-demand, P-spot, P-on-demand, Standard-spot, "
                             "Standard-on-demand) at VCPUS, as Service Quotas would (repeatable)")
    parser.add_argument("--scheduler", choices=sorted(PROFILES), default="default",
                        help="placement: kube-scheduler's default profile or gpuburst's binpack profile")
    parser.add_argument("--interruption-rate", type=float, default=None, metavar="R",
                        help="spot reclaims per spot instance-hour for every spot pool, at most "
                             f"{MAX_INTERRUPTION_RATE:g} (default: each pool's from the EC2 Spot Advisor's "
                             "interruption bucket of its type and region; docs/simulator.md)")
    parser.add_argument("--spot-price-factor", type=float, default=None, metavar="F",
                        help="charge every spot pool without its own price on-demand x F, 0 < F <= 1 (default: "
                             "on-demand less the EC2 Spot Advisor's savings of its type and region)")
    parser.add_argument("--device-plugin-delay", type=float, default=0.0, metavar="S",
                        help="GPU nodes register Ready with 0 GPUs and publish them S seconds later (default 0)")
    parser.add_argument("--gpu-sharing", action="store_true",
                        help="GPU-sharing jobs (gpu_milli < 1000) ask for a share on the pools' time-sliced or MIG "
                             "pools instead of a whole GPU (rule: docs/gpu-sharing.md); refused when the trace has no "
                             "such job or the pools no time-sliced or MIG pool, as it would change nothing")
    parser.add_argument("--provisioning-requests", action="store_true",
                        help="queue gang jobs as Kueue does with a ProvisioningRequest admission check: each asks "
                             "for all its pods (best-effort-atomic-scale-up) and starts when it is Provisioned")
    parser.add_argument("--gpu-failure-rate", type=float, default=0.0, metavar="R",
                        help="GPU failures per GPU-hour (seeded; default 0): a failed GPU is no longer allocatable, "
                             "the pod that held it restarts, the scaler repairs the node (docs/operations.md)")
    parser.add_argument("--checkpoint-interval", type=float, default=1800.0, metavar="S",
                        help="jobs checkpoint every S seconds of run: a job stopped by a failed GPU, an eviction or "
                             "a reclaim loses the work since its last checkpoint (default 1800; 0: loses nothing)")
    parser.add_argument("--no-repair", action="store_true",
                        help="turn the pools' GPU repair off (with --gpu-failure-rate: what repair changes)")
    parser.add_argument("--restart-policy", choices=("Never", "OnFailure"), default="Never",
                        help="the trace's pods' restartPolicy (default Never: a pod whose GPU fails is made again by "
                             "its Job; OnFailure: it restarts in place on the dead GPU until deleted)")
    parser.add_argument("--dra", action="store_true",
                        help="GPU pools as gpu_allocation: dra and each job's GPUs as a ResourceClaim")
    parser.add_argument("--buffer", type=int, default=0, metavar="GPUS",
                        help="keep room ready for GPUS 1-GPU pods of the trace's shape, as a CapacityBuffer of GPUS "
                             "replicas (default 0: none); the report adds the pending time of the jobs "
                             "that fit it")
    parser.add_argument("--warm", type=int, default=0, metavar="SIZE",
                        help="a warm pool of SIZE stopped instances on the cheapest AWS on-demand pools of 1-GPU nodes "
                             "and one instance type (scaler/sim/warm.py; capped at each pool's max; default 0: as the "
                             "pools file says)")
    parser.add_argument("--warm-start", type=float, default=None, metavar="S",
                        help="a stopped warm-pool instance is a Ready node S seconds after a scale-out takes it "
                             "(default: the pools file's timings.warm_start, 90)")
    parser.add_argument("--compare-cluster-autoscaler", action="store_true",
                        help="also replay the trace under cluster-autoscaler's defaults on the same pools "
                             "(scaler/sim/ca_baseline.py) and quote the saving against it: twice the run time")
    parser.add_argument("--policy", choices=("gpuburst", "cluster-autoscaler"), default="gpuburst",
                        help="whose policy scales the pools: gpuburst's, or cluster-autoscaler's defaults (the "
                             "baseline alone, with its whole report)")
    parser.add_argument("--report", help="write the JSON report here")
    parser.add_argument("--plot", help="write the timeline here (.png, .svg or .pdf)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random spot reclaims")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a job never started")
    parser.add_argument("--sweep", action="append", default=[], metavar="KNOB=V1,V2,...",
                        help="one simulation per value (repeatable: every combination) plus today's default; "
                             "knobs: unneeded_time, unneeded_time_min, unneeded_time_max, rebuy_weight, buffer_gpus, "
                             "warm_size (docs/simulator.md); needs --sweep-out")
    parser.add_argument("--sweep-out", metavar="DIR", help="--sweep writes DIR/sweep.csv and DIR/sweep.png")
    parser.add_argument("--workers", type=int, default=None, metavar="N",
                        help="--sweep: simulations at once in local processes (default: the CPU count)")
    parser.add_argument("--ray", metavar="ADDRESS",
                        help="--sweep: run the simulations as Ray tasks on this Ray cluster ('local': start one "
                             "here); pip install 'gpuburst[tune]'")


# A reclaim every 6 minutes of a spot instance's life on average, shorter than a GPU node's boot: beyond it
# no spot node would ever serve a pod, and the draws only cost memory and time.
MAX_INTERRUPTION_RATE = 10.0
MAX_GPU_FAILURE_RATE = 1.0
PLOT_FORMATS = (".png", ".svg", ".pdf")  # what plot_timeline's matplotlib (Agg) writes by the suffix


def check_sweep(args: argparse.Namespace) -> None:
    if not (args.sweep and args.sweep_out):
        raise InputError("--sweep and --sweep-out go together (the sweep writes its table and plot into the folder)")
    if args.report or args.plot:
        raise InputError("--sweep writes DIR/sweep.csv and DIR/sweep.png, not --report or --plot")
    if args.workers is not None and args.workers < 1:
        raise InputError(f"--workers {args.workers}: at least 1")
    if importlib.util.find_spec("matplotlib") is None:
        raise InputError("--sweep: its plot needs matplotlib (pip install 'gpuburst[plot]')")
    if args.ray and importlib.util.find_spec("ray") is None:
        raise InputError("--ray: needs Ray (pip install 'gpuburst[tune]')")
    if args.ray:
        check_ray(args.ray)


def main(args: argparse.Namespace) -> int:
    for option, value, low, strict in (("--hours", args.hours, 0.0, True),
                                       ("--start-hour", args.start_hour, 0.0, False),
                                       ("--device-plugin-delay", args.device_plugin_delay, 0.0, False),
                                       ("--interruption-rate", args.interruption_rate, 0.0, False),
                                       ("--gpu-failure-rate", args.gpu_failure_rate, 0.0, False),
                                       ("--checkpoint-interval", args.checkpoint_interval, 0.0, False),
                                       ("--warm", args.warm, 0.0, False),
                                       ("--warm-start", args.warm_start, 0.0, True)):
        if value is not None and (not math.isfinite(value) or value < low or (strict and value == low)):
            print(f"{option} {value}: must be a finite number {'>' if strict else '>='} {low:g}", file=sys.stderr)
            return 2
    if args.spot_price_factor is not None and not 0 < args.spot_price_factor <= 1:
        print(f"--spot-price-factor {args.spot_price_factor:g}: must be above 0 and at most 1 (a share of the "
              "on-demand price)", file=sys.stderr)
        return 2
    if args.interruption_rate is not None and args.interruption_rate > MAX_INTERRUPTION_RATE:
        print(f"--interruption-rate {args.interruption_rate:g}: at most {MAX_INTERRUPTION_RATE:g} reclaims per spot "
              "instance-hour (one every 6 minutes, less than a GPU node's boot)", file=sys.stderr)
        return 2
    if args.gpu_failure_rate > MAX_GPU_FAILURE_RATE:
        print(f"--gpu-failure-rate {args.gpu_failure_rate:g}: at most {MAX_GPU_FAILURE_RATE:g} failures per GPU-hour "
              "(an 8-GPU node would lose a GPU every 7.5 minutes, faster than a replacement boots)", file=sys.stderr)
        return 2
    try:
        inputs = {"--trace": args.trace, "--pools": args.pools}
        check_output("--report", args.report, inputs)
        check_output("--plot", args.plot, {**inputs, "--report": args.report})
        if args.plot and Path(args.plot).suffix.lower() not in PLOT_FORMATS:
            raise InputError(f"--plot {args.plot}: the timeline is written as {', '.join(PLOT_FORMATS)}; "
                             "give a file name with one of these suffixes")
        if args.plot and importlib.util.find_spec("matplotlib") is None:
            raise InputError("--plot: needs matplotlib (pip install 'gpuburst[plot]')")
        kwargs: dict[str, Any] = {
            "hours": args.hours, "start_hour": args.start_hour, "outages": args.spot_outage,
            "scheduler": args.scheduler,
            "interruption_rate": args.interruption_rate, "seed": args.seed, "device_plugin_delay":
            args.device_plugin_delay, "gpu_sharing": args.gpu_sharing, "provisioning_requests":
            args.provisioning_requests, "quotas": args.quota, "dra": args.dra, "gpu_failure_rate":
            args.gpu_failure_rate, "checkpoint_interval": args.checkpoint_interval, "repair": not args.no_repair,
            "restart_in_place": args.restart_policy == "OnFailure",
            "buffer_gpus": args.buffer, "warm_size": args.warm, "warm_start": args.warm_start,
            "spot_price_factor": args.spot_price_factor, "policy": args.policy,
        }
        if args.compare_cluster_autoscaler and (args.sweep or args.sweep_out):
            raise InputError("--compare-cluster-autoscaler: a --sweep compares its runs with each other; sweep "
                             "with --policy cluster-autoscaler for the baseline's figures")
        if args.compare_cluster_autoscaler and args.policy != "gpuburst":
            raise InputError("--compare-cluster-autoscaler compares gpuburst's policy with it; with --policy "
                             f"{args.policy} it would compare the baseline with itself")
        for option, given in (("--ray", args.ray), ("--workers", args.workers)):
            if given is not None and not args.sweep:
                raise InputError(f"{option} {given}: only --sweep runs simulations in parallel; a single run "
                                 "would ignore it")
        if args.sweep or args.sweep_out:
            check_sweep(args)
            return run_sweep(args, kwargs)
        result, report = simulate(args.trace, args.pools, quiet=args.quiet, **kwargs)
        if args.compare_cluster_autoscaler:
            _, ca = simulate(args.trace, args.pools, quiet=args.quiet, **{**kwargs, "policy": "cluster-autoscaler"})
            report["cluster_autoscaler"] = ca_section(ca)
    except (ConfigError, TraceError, InputError, RayError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.report:
        Path(args.report).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if args.plot:
        plot_timeline(result, args.plot, title=f"{Path(args.trace).name}, {args.scheduler} scheduler", report=report)
    print(summary(report))
    if report["buffer"]:
        print(buffer_line(report["buffer"]))
    if args.report:
        print(f"report: {args.report}")
    if args.plot:
        print(f"timeline: {args.plot}")
    return 1 if args.strict and report["jobs_never_started"] else 0
