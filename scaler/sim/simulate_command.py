"""`python -m scaler simulate`: replay a GPU job trace through the scaler in a simulated cloud.

Progress goes to stderr, the report summary to stdout; `--report` writes the JSON report and
`--plot` the PNG timeline. Bad input (trace row, pools file, outage spec, an output path that cannot
be written) is one line on stderr naming the file and line or field, and exit code 2, before the run
starts. Jobs that never started are named at the end of the summary with a warning; `--strict` makes
them exit code 1.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

from scaler.configfile import load_config
from scaler.core.config.ec2_quota_classes import FAMILIES, QUOTAS, family_name, quota_key
from scaler.core.config.settings import ConfigError, ScalerConfig
from scaler.core.planning.planner import plan
from scaler.core.scheduling.scoring import PROFILES
from scaler.providers.sim import Outage, SimProvider
from scaler.reconcile import Planner
from scaler.sim.batch import RayError, check_ray
from scaler.sim.buffer import buffer_line, buffer_report, gpu_buffer
from scaler.sim.dra import dra_config
from scaler.sim.engine import Engine
from scaler.sim.failures import GpuFailures
from scaler.sim.prepaid import check_blocks
from scaler.sim.records import SimResult
from scaler.sim.report import build_report, summary
from scaler.sim.trace import Job, TraceError, job_pods, load_trace
from scaler.sim.warm import with_warm


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trace", required=True, help="trace CSV (the format of ../shared/traces)")
    parser.add_argument("--pools", required=True, help="pools file (YAML), e.g. examples/pools-aws.yaml")
    parser.add_argument("--hours", type=float, default=None,
                        help="replay only the jobs submitted in the first H hours (they all run to completion)")
    parser.add_argument("--spot-outage", action="append", default=[], metavar="ZONE:START_S:END_S",
                        help="no spot capacity in ZONE between START_S and END_S seconds (repeatable)")
    parser.add_argument("--quota", action="append", default=[], metavar="FAMILY=VCPUS",
                        help="cap an EC2 vCPU quota family (G-spot, G-on-demand, P-spot, P-on-demand, Standard-spot, "
                             "Standard-on-demand) at VCPUS, as Service Quotas would (repeatable)")
    parser.add_argument("--scheduler", choices=sorted(PROFILES), default="default",
                        help="placement: kube-scheduler's default profile or gpuburst's binpack profile")
    parser.add_argument("--interruption-rate", type=float, default=0.0,
                        help=f"spot reclaims per spot instance-hour (default 0, at most {MAX_INTERRUPTION_RATE:g})")
    parser.add_argument("--device-plugin-delay", type=float, default=0.0, metavar="S",
                        help="GPU nodes register Ready with 0 GPUs and publish them S seconds later (default 0)")
    parser.add_argument("--gpu-sharing", action="store_true",
                        help="GPU-sharing jobs (gpu_milli < 1000) ask for a share on the pools' time-sliced or MIG "
                             "pools instead of a whole GPU (rule: docs/gpu-sharing.md); refused when the trace has no "
                             "such job or the pools no time-sliced or MIG mixed pool, as it would change nothing")
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
    parser.add_argument("--dra", action="store_true",
                        help="GPU pools as gpu_allocation: dra and each job's GPUs as a ResourceClaim (issue 24)")
    parser.add_argument("--buffer", type=int, default=0, metavar="GPUS",
                        help="keep room ready for GPUS 1-GPU pods of the trace's shape, as a CapacityBuffer of GPUS "
                             "replicas (issue 27; default 0: none); the report adds the pending time of the jobs "
                             "that fit it")
    parser.add_argument("--warm", type=int, default=0, metavar="SIZE",
                        help="a warm pool of SIZE stopped instances on the cheapest AWS on-demand pools of 1-GPU nodes "
                             "and one instance type (scaler/sim/warm.py; capped at each pool's max; default 0: as the "
                             "pools file says)")
    parser.add_argument("--warm-start", type=float, default=None, metavar="S",
                        help="a stopped warm-pool instance is a Ready node S seconds after a scale-out takes it "
                             "(default: the pools file's timings.warm_start, 90)")
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


class InputError(ValueError):
    """Bad command-line input that is not a file's fault."""


def parse_outages(specs: list[str], config: ScalerConfig) -> list[Outage]:
    zones = {z for p in config.pools for z in p.zones}
    out = []
    for spec in specs:
        try:
            outage = Outage.parse(spec)
        except ValueError:
            raise InputError(f"--spot-outage {spec}: expected ZONE:START_S:END_S, seconds with 0 <= START < END") \
                from None
        if outage.zone not in zones:
            raise InputError(f"--spot-outage {spec}: zone {outage.zone!r} is in no pool (zones: {sorted(zones)})")
        out.append(outage)
    return out


def parse_quotas(specs: list[str], config: ScalerConfig) -> dict[tuple[str, bool], int]:
    """`--quota FAMILY=VCPUS` -> {(class, spot): vCPUs}; a family no pool counts against would change nothing."""
    used = {k for k in map(quota_key, config.pools) if k is not None}
    out = {}
    for spec in specs:
        family, eq, vcpus = spec.partition("=")
        key = FAMILIES.get(family.strip().lower())
        if not eq or key is None:
            raise InputError(f"--quota {spec}: expected FAMILY=VCPUS with FAMILY one of "
                             f"{', '.join(family_name(k) for k in QUOTAS)}")
        if not vcpus.strip().isdigit():
            raise InputError(f"--quota {spec}: VCPUS must be a whole number of vCPUs >= 0")
        if key not in used:
            raise InputError(f"--quota {spec}: no pool of the pools file counts against {family_name(key)} "
                             "(prepaid pools count against none), so it would change nothing")
        out[key] = int(vcpus)
    return out


def check_output(option: str, path: str | None, inputs: dict[str, str] | None = None) -> None:
    """Refuse an output path that could not be written, or that is one of the `inputs` (option -> path) and
    would overwrite it, before the run rather than after it."""
    if path is None:
        return
    try:
        _check_output(option, path, inputs or {})
    except OSError as err:  # a name too long, a loop of links: what the file system says, in one line
        raise InputError(f"{option} {path}: cannot be created: {err.strerror or err}") from None


def _check_output(option: str, path: str, inputs: dict[str, str]) -> None:
    target = Path(path)
    for other, given in inputs.items():
        if given and target.resolve() == Path(given).resolve():
            raise InputError(f"{option} {path}: is the {other} file; writing it would overwrite that input")
    folder = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        raise InputError(f"{option} {path}: is a folder, give a file name")
    if not folder.is_dir():
        raise InputError(f"{option} {path}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise InputError(f"{option} {path}: not writable")
    existed = target.exists()
    target.open("a").close()  # what os.access cannot tell (a read-only mount, root's access): create it now
    if not existed:
        target.unlink()


def check_sharing(config: ScalerConfig, jobs: list[Job], pools: str, trace: str) -> str | None:
    """`--gpu-sharing` maps jobs of a GPU share to time-sliced or MIG mixed pools: without either it would
    change nothing, and a run the user believes shared would not be (refused rather than warned: exit 2).
    A job of several GPUs with gpu_milli below 1000 keeps whole GPUs (a share is of one GPU): the warning
    returned says how many, the others are still shared."""
    if not any(p.sharing is not None and p.sharing.mig_strategy != "single" for p in config.pools):
        raise InputError(f"--gpu-sharing: {pools} has no time-sliced or MIG mixed pool (gpu_sharing), so it "
                         "would change nothing")
    if not any(0 < j.gpu_milli < 1000 and j.gpus for j in jobs):
        raise InputError(f"--gpu-sharing: {trace} has no job of a GPU share (gpu_milli below 1000), so it "
                         "would change nothing")
    whole = [j for j in jobs if j.gpus > 1 and 0 < j.gpu_milli < 1000]
    if not whole:
        return None
    return (f"warning: --gpu-sharing: {len(whole)} jobs of several GPUs have gpu_milli below 1000 (the first at "
            f"{trace}:{whole[0].line}); they keep whole GPUs, as a share is of one GPU")


def simulate(
    trace: str, pools: str, *, hours: float | None = None, outages: list[str] | None = None,
    scheduler: str = "default", interruption_rate: float = 0.0, seed: int = 0, quiet: bool = True,
    planner: Planner = plan, device_plugin_delay: float = 0.0, gpu_sharing: bool = False,
    provisioning_requests: bool = False, quotas: list[str] | None = None, dra: bool = False,
    gpu_failure_rate: float = 0.0, checkpoint_interval: float = 1800.0, repair: bool = True,
    buffer_gpus: int = 0,
    warm_size: int = 0, warm_start: float | None = None,
) -> tuple[SimResult, dict[str, Any]]:
    """Run one simulation; returns the raw result and the report (raises on bad input). `warm_size`: a warm pool
    of that size on each pool that may have one (scaler.sim.warm); `warm_start`: its instances' time to Ready."""
    config = dra_config(pools) if dra else load_config(pools)
    if warm_size:
        try:
            config = with_warm(config, warm_size)
        except ValueError as err:
            raise InputError(f"--warm {warm_size}: {pools}: {err}") from None
    if warm_start is not None:
        if not any(p.warm for p in config.pools):
            raise InputError(f"--warm-start {warm_start:g}: {pools} has no warm pool (a pool's warm, or --warm), so "
                             "it would change nothing")
        config = config.model_copy(update={"timings": config.timings.model_copy(update={"warm_start": warm_start})})
    if not repair:
        if not gpu_failure_rate:
            raise InputError("--no-repair: without --gpu-failure-rate no GPU breaks, so it would change nothing")
        config = config.model_copy(update={"pools": [
            p.model_copy(update={"repair": p.repair.model_copy(update={"enabled": False})}) for p in config.pools]})
    specs = list(outages or [])
    parsed = parse_outages(specs, config)
    caps = parse_quotas(list(quotas or []), config)
    jobs = load_trace(trace, hours)
    try:
        check_blocks(config.pools, min((j.submit_s for j in jobs), default=0.0),
                     max((j.submit_s + j.duration_s for j in jobs), default=0.0))
    except ValueError as err:
        raise InputError(f"{pools}: {err}") from None
    if gpu_sharing:
        warning = check_sharing(config, jobs, pools, trace)
        if warning and not quiet:
            print(warning, file=sys.stderr, flush=True)
    if buffer_gpus < 0:
        raise InputError(f"--buffer {buffer_gpus}: a number of GPUs, at least 0")
    try:
        buffers = gpu_buffer(buffer_gpus, config, PROFILES[scheduler].scheduler_name)
    except ValueError as err:
        raise InputError(f"--buffer {buffer_gpus}: {pools}: {err}") from None
    provider = SimProvider(config, outages=parsed, interruption_rate=interruption_rate, seed=seed, quotas=caps)

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    started = time.monotonic()
    engine = Engine(config, jobs, provider, planner, profile=PROFILES[scheduler],
                    progress=None if quiet else progress, device_plugin_delay=device_plugin_delay,
                    gpu_sharing=gpu_sharing, provisioning_requests=provisioning_requests, dra=dra,
                    failures=GpuFailures(gpu_failure_rate, seed, checkpoint_interval), buffers=buffers)
    result = engine.run()
    if dra:  # the baselines price each job's GPUs on the same pools with the device plugin
        plain = load_config(pools)
        result = dataclasses.replace(result, config=plain, jobs=[
            dataclasses.replace(r, pods=job_pods(r.job, plain, PROFILES[scheduler].scheduler_name, gpu_sharing))
            for r in result.jobs])
    report = build_report(result, trace=trace, pools_file=pools, seed=seed, outages=specs,
                          wall_s=time.monotonic() - started)
    report["quotas"] = {family_name(k): v for k, v in caps.items()}
    report["buffer"] = buffer_report(result.jobs, buffers)
    return result, report


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
                                       ("--device-plugin-delay", args.device_plugin_delay, 0.0, False),
                                       ("--interruption-rate", args.interruption_rate, 0.0, False),
                                       ("--gpu-failure-rate", args.gpu_failure_rate, 0.0, False),
                                       ("--checkpoint-interval", args.checkpoint_interval, 0.0, False),
                                       ("--warm", args.warm, 0.0, False),
                                       ("--warm-start", args.warm_start, 0.0, True)):
        if value is not None and (not math.isfinite(value) or value < low or (strict and value == low)):
            print(f"{option} {value}: must be a finite number {'>' if strict else '>='} {low:g}", file=sys.stderr)
            return 2
    if args.interruption_rate > MAX_INTERRUPTION_RATE:
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
            "hours": args.hours, "outages": args.spot_outage, "scheduler": args.scheduler,
            "interruption_rate": args.interruption_rate, "seed": args.seed, "device_plugin_delay":
            args.device_plugin_delay, "gpu_sharing": args.gpu_sharing, "provisioning_requests":
            args.provisioning_requests, "quotas": args.quota, "dra": args.dra, "gpu_failure_rate":
            args.gpu_failure_rate, "checkpoint_interval": args.checkpoint_interval, "repair": not args.no_repair,
            "buffer_gpus": args.buffer, "warm_size": args.warm, "warm_start": args.warm_start,
        }
        for option, given in (("--ray", args.ray), ("--workers", args.workers)):
            if given is not None and not args.sweep:
                raise InputError(f"{option} {given}: only --sweep runs simulations in parallel; a single run "
                                 "would ignore it")
        if args.sweep or args.sweep_out:
            check_sweep(args)
            from scaler.sim.sweep import run_sweep  # noqa: PLC0415 - the sweep's modules only when asked

            return run_sweep(args, kwargs)
        result, report = simulate(args.trace, args.pools, quiet=args.quiet, **kwargs)
    except (ConfigError, TraceError, InputError, RayError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.report:
        Path(args.report).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if args.plot:
        from scaler.sim.plot import plot_timeline  # noqa: PLC0415 - matplotlib only when asked

        plot_timeline(result, args.plot, title=f"{Path(args.trace).name}, {args.scheduler} scheduler", report=report)
    print(summary(report))
    if report["buffer"]:
        print(buffer_line(report["buffer"]))
    if args.report:
        print(f"report: {args.report}")
    if args.plot:
        print(f"timeline: {args.plot}")
    return 1 if args.strict and report["jobs_never_started"] else 0
