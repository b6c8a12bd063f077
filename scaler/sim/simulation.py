"""One simulation: a trace replayed through the scaler on the pools of a pools file, in a simulated cloud
(`simulate`), and the checks of its inputs that are not a file's own fault (`InputError`). The `simulate`
command (scaler/sim/simulate_command.py), `--sweep` (scaler/sim/sweep.py) and `tune`'s workers
(scaler/sim/batch.py) all run it.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from pathlib import Path
from typing import Any

from scaler.configfile import load_config
from scaler.core.config.ec2_quota_classes import FAMILIES, QUOTAS, family_name, quota_key
from scaler.core.config.settings import ScalerConfig
from scaler.core.planning.decide import decide
from scaler.core.scheduling.scoring import PROFILES
from scaler.ports import Planner
from scaler.providers.sim import Outage, SimProvider
from scaler.sim.buffer import buffer_report, gpu_buffer
from scaler.sim.ca_baseline import ca_config, repair_off
from scaler.sim.dra import dra_config
from scaler.sim.engine import Engine
from scaler.sim.failures import GpuFailures
from scaler.sim.prepaid import check_blocks
from scaler.sim.records import SimResult
from scaler.sim.report import build_report
from scaler.sim.spot import priced, spot_model
from scaler.sim.trace import Job, job_pods, load_trace
from scaler.sim.warm import with_warm


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


def check_sharing(config: ScalerConfig, jobs: list[Job], pools: str, trace: str, dra: bool) -> str | None:
    """`--gpu-sharing` maps jobs of a GPU share to time-sliced or MIG pools: without any it would
    change nothing, and a run the user believes shared would not be (refused rather than warned: exit 2).
    A job of several GPUs with gpu_milli below 1000 keeps whole GPUs (a share is of one GPU): the warning
    returned says how many, the others are still shared."""
    if not any(p.sharing is not None for p in config.pools):
        raise InputError(f"--gpu-sharing: {pools} has no time-sliced or MIG pool (gpu_sharing), so it "
                         "would change nothing")
    if not dra and any(p.sharing is not None and p.sharing.dynamic for p in config.pools):
        raise InputError(f"--gpu-sharing: {pools} has dynamic MIG pools, whose slices are DRA devices: add --dra")
    if not any(0 < j.gpu_milli < 1000 and j.gpus for j in jobs):
        raise InputError(f"--gpu-sharing: {trace} has no job of a GPU share (gpu_milli below 1000), so it "
                         "would change nothing")
    whole = [j for j in jobs if j.gpus > 1 and 0 < j.gpu_milli < 1000]
    if not whole:
        return None
    return (f"warning: --gpu-sharing: {len(whole)} jobs of several GPUs have gpu_milli below 1000 (the first at "
            f"{trace}:{whole[0].line}); they keep whole GPUs, as a share is of one GPU")


def simulate(
    trace: str, pools: str, *, hours: float | None = None, start_hour: float = 0.0, outages: list[str] | None = None,
    scheduler: str = "default", interruption_rate: float | None = None, seed: int = 0, quiet: bool = True,
    planner: Planner = decide, device_plugin_delay: float = 0.0, gpu_sharing: bool = False,
    provisioning_requests: bool = False, quotas: list[str] | None = None, dra: bool = False,
    gpu_failure_rate: float = 0.0, checkpoint_interval: float = 1800.0, repair: bool = True,
    restart_in_place: bool = False, buffer_gpus: int = 0,
    warm_size: int = 0, warm_start: float | None = None, spot_price_factor: float | None = None,
    policy: str = "gpuburst",
) -> tuple[SimResult, dict[str, Any]]:
    """Run one simulation; returns the raw result and the report (raises on bad input). `warm_size`: a warm pool
    of that size on each pool that may have one (scaler.sim.warm); `warm_start`: its instances' time to Ready.
    `spot_price_factor` / `interruption_rate`: None prices and reclaims Spot as the advisor says (scaler.sim.spot),
    a number overrides that for every spot pool. `restart_in_place`: a pod on a GPU that fails restarts in place
    on it (restartPolicy OnFailure; scaler.sim.failures). `policy` "cluster-autoscaler": the same run under its defaults
    (scaler.sim.ca_baseline), the baseline."""
    plain = load_config(pools)
    spot = spot_model(plain, spot_price_factor, interruption_rate)
    config = priced(dra_config(pools) if dra else plain, spot)
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
        config = repair_off(config)
    if restart_in_place and not gpu_failure_rate:
        raise InputError("--restart-policy OnFailure: without --gpu-failure-rate no GPU breaks, so it would change "
                         "nothing")
    if policy == "cluster-autoscaler":
        config = ca_config(config)
    specs = list(outages or [])
    parsed = parse_outages(specs, config)
    caps = parse_quotas(list(quotas or []), config)
    jobs = load_trace(trace, hours, start_hour)
    if start_hour and not jobs:
        raise InputError(f"--start-hour {start_hour:g}: {trace} has no job submitted from hour {start_hour:g} on")
    try:
        check_blocks(config.pools, min((j.submit_s for j in jobs), default=0.0),
                     max((j.submit_s + j.duration_s for j in jobs), default=0.0))
    except ValueError as err:
        raise InputError(f"{pools}: {err}") from None
    if gpu_sharing:
        warning = check_sharing(config, jobs, pools, trace, dra)
        if warning and not quiet:
            print(warning, file=sys.stderr, flush=True)
    if buffer_gpus < 0:
        raise InputError(f"--buffer {buffer_gpus}: a number of GPUs, at least 0")
    try:
        buffers = gpu_buffer(buffer_gpus, config, PROFILES[scheduler].scheduler_name)
    except ValueError as err:
        raise InputError(f"--buffer {buffer_gpus}: {pools}: {err}") from None
    provider = SimProvider(config, outages=parsed, interruption_rate=spot.rates(), seed=seed, quotas=caps)

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    started = time.monotonic()
    engine = Engine(config, jobs, provider, planner, profile=PROFILES[scheduler],
                    progress=None if quiet else progress, device_plugin_delay=device_plugin_delay,
                    gpu_sharing=gpu_sharing, provisioning_requests=provisioning_requests, dra=dra,
                    failures=GpuFailures(gpu_failure_rate, seed, checkpoint_interval, restart_in_place),
                    buffers=buffers)
    result = engine.run()
    if dra:  # the baselines price each job's GPUs on the same pools with the device plugin
        plain = priced(plain, spot)
        result = dataclasses.replace(result, config=plain, jobs=[
            dataclasses.replace(r, pods=job_pods(r.job, plain, PROFILES[scheduler].scheduler_name, gpu_sharing))
            for r in result.jobs])
    report = build_report(result, trace=trace, pools_file=pools, seed=seed, outages=specs,
                          wall_s=time.monotonic() - started)
    report["quotas"] = {family_name(k): v for k, v in caps.items()}
    report["buffer"] = buffer_report(result.jobs, buffers)
    report["spot"] = spot.section()
    report["policy"] = policy
    report["start_hour"] = start_hour
    return result, report
