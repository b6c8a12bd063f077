"""Many simulations at once: `simulate --sweep` and `scaler tune` run their settings through here.

A `Run` carries everything one simulation needs as text (the trace, the pools file as data, the keyword
arguments of `simulate()`), so a worker needs no shared folder: local processes (`workers`, default the CPU
count) or Ray tasks on an existing Ray cluster (`ray_address`, `pip install 'gpuburst[tune]'`). A simulation is
deterministic for its seed, so both give the same figures. Progress on stderr (done / total, the best so far);
Ctrl-C stops the batch and returns what finished (`Batch.interrupted`), so the caller can write its best.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from scaler.core.config.settings import ConfigError
from scaler.sim.simulation import InputError, simulate
from scaler.sim.trace import TraceError

# The report's figures a batch keeps per run (the whole report is large: samples, never-started lists).
FIGURES = ("jobs_total", "jobs_completed", "paid_gpu_hours", "demand_gpu_hours", "paid_over_demand", "cost_usd",
           "pending_p50_s", "pending_p95_s", "pending_max_s", "pending_1gpu_p95_s", "spot_share", "wall_s")


@dataclass(frozen=True)
class Run:
    """One simulation: `label` names it in tables; `pools` is the pools file's data (YAML-able)."""

    label: str
    trace: str  # the trace file's text
    pools: dict[str, Any]
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass
class Batch:
    figures: list[dict[str, Any] | None]  # per run, in the order given; None when it did not finish
    interrupted: bool = False
    cpu_s: float = 0.0  # CPU seconds the finished runs took in their workers


def simulate_run(run: Run) -> dict[str, Any]:
    """Run one simulation in this process (a worker): its figures plus `cpu_s` and, on bad input, `error`."""
    started = time.process_time()
    with tempfile.TemporaryDirectory(prefix="gpuburst-batch-") as folder:
        trace, pools = Path(folder, "trace.csv"), Path(folder, "pools.yaml")
        trace.write_text(run.trace, encoding="utf-8")
        pools.write_text(yaml.safe_dump(run.pools, sort_keys=False), encoding="utf-8")
        try:
            _, report = simulate(str(trace), str(pools), **run.kwargs)
        except (ConfigError, TraceError, InputError) as err:
            return {"error": str(err), "cpu_s": time.process_time() - started}
    return {**{k: report[k] for k in FIGURES}, "cpu_s": round(time.process_time() - started, 2)}


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle


def _local(runs: Sequence[Run], workers: int) -> Iterator[tuple[int, dict[str, Any]]]:
    if workers == 1:
        for i, run in enumerate(runs):
            yield i, simulate_run(run)
        return
    # spawn: a clean interpreter per worker (no copy of the parent's threads or state)
    pool = multiprocessing.get_context("spawn").Pool(min(workers, len(runs)), initializer=_ignore_sigint)
    try:
        yield from pool.imap_unordered(_indexed, list(enumerate(runs)))
        pool.close()
    finally:
        pool.terminate()
        pool.join()


def _indexed(item: tuple[int, Run]) -> tuple[int, dict[str, Any]]:
    return item[0], simulate_run(item[1])


def _ray(runs: Sequence[Run], address: str) -> Iterator[tuple[int, dict[str, Any]]]:
    import ray  # noqa: PLC0415 - an optional extra: pip install 'gpuburst[tune]'

    if not ray.is_initialized():
        ray.init(address=None if address == "local" else address, include_dashboard=False,
                 log_to_driver=False, configure_logging=False)
    task = ray.remote(num_cpus=1)(simulate_run)
    index = {task.remote(run): i for i, run in enumerate(runs)}
    left = list(index)
    try:
        while left:
            done, left = ray.wait(left, num_returns=1)
            yield index[done[0]], ray.get(done[0])
    finally:
        for ref in left:
            ray.cancel(ref, force=True)


def run_batch(runs: Sequence[Run], *, workers: int | None = None, ray_address: str | None = None,
              best: Callable[[list[dict[str, Any] | None]], str] | None = None, quiet: bool = False,
              what: str = "simulations") -> Batch:
    """Run every simulation; figures in the order of `runs`. `best(figures so far)` words the progress line's
    best. Ctrl-C: the finished ones, `interrupted` set."""
    batch = Batch([None] * len(runs))
    source = _ray(runs, ray_address) if ray_address else _local(runs, workers or os.cpu_count() or 1)
    done = 0
    try:
        for i, figures in source:
            batch.figures[i] = figures
            batch.cpu_s += figures["cpu_s"]
            done += 1
            line = f"{what}: {done}/{len(runs)} done"
            if best is not None:
                line += f"; best so far: {best(batch.figures)}"
            if not quiet:
                print(line, file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        batch.interrupted = True
        if not quiet:
            print(f"{what}: interrupted after {done}/{len(runs)}", file=sys.stderr, flush=True)
    finally:
        close = getattr(source, "close", None)
        if close is not None:
            close()
    return batch
