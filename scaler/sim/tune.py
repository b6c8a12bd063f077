"""`python -m scaler tune`: which pools to declare, searched by simulating the user's own trace.

The candidates (`scaler.sim.tune_space`) are raced by successive halving on trace prefixes: every candidate
replays the jobs of the first ninth of the trace's submission span, the best third of them the first third of
it, the best third of those the whole trace (a prefix's jobs all run to completion; `--hours H`: the first H
hours of it, for a short first run). Best = every job completed, p95 pending within `--p95-max`, then the lowest
cost, then the lowest paid / demand GPU-hours, then the candidate's place in the seeded order: among the designs
that meet the bound, the cheapest. The simulations are seeded, so the same seed picks the same pools on
local processes and on Ray. Prints the cost / latency Pareto front of the whole-trace runs (table and PNG) and
writes the best pools file meeting `--p95-max`, validated by the loader `scaler run` and `pulumi up` use.

Exit 0: written; 1: no candidate meets the bound (the best p95 found is named); 2: bad input; 130: Ctrl-C (the
best so far written, its file saying the prefix it was chosen on).
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import random
import sys
from pathlib import Path
from typing import Any

import yaml

from scaler.configfile import load_config, read_text
from scaler.core.config.settings import ConfigError
from scaler.core.planning.buffers import MAX_PLACEHOLDERS
from scaler.core.scheduling.scoring import PROFILES
from scaler.sim import batch, tradeoff
from scaler.sim.simulation import InputError, check_output
from scaler.sim.trace import TraceError, load_trace
from scaler.sim.tune_space import Candidate, Space, candidates, pools_data, space_of

ETA = 3  # each rung keeps the best third
RUNGS = 3  # prefixes of 1/9, 1/3 and the whole submission span
DEFAULT_OUT = "out/pools-tuned.yaml"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trace", required=True, help="trace CSV (the format of ../shared/traces)")
    parser.add_argument("--pools", required=True, help="candidate pools file: cloud, zones, non-GPU pools, GPU models")
    parser.add_argument("--p95-max", type=float, required=True, metavar="S", help="p95 pending the pools must meet")
    parser.add_argument("--workers", type=int, default=None, metavar="N",
                        help="simulations at once in local processes (default: the CPU count)")
    parser.add_argument("--ray", metavar="ADDRESS", help="run the simulations as Ray tasks on this Ray cluster "
                        "('local': start one here); pip install 'gpuburst[tune]'")
    parser.add_argument("--seed", type=int, default=0, help="seed of the candidates' order and the simulations")
    parser.add_argument("--scheduler", choices=sorted(PROFILES), default="default", help="placement, as simulate's")
    parser.add_argument("--interruption-rate", type=float, default=0.0,
                        help="spot reclaims per spot instance-hour (default 0); above 0 on-demand-only ladders "
                             "are searched too")
    parser.add_argument("--buffers", default="0", metavar="GPUS,...",
                        help="CapacityBuffer sizes (GPUs of 1-GPU pods) to race with each design (default 0: none; "
                             "a buffer only adds to the bill and moves the 1-GPU jobs' wait, not the p95 of every "
                             "job, so it is searched only when asked, e.g. --buffers 0,8,16)")
    parser.add_argument("--hours", type=float, default=None, metavar="H",
                        help="tune on the jobs submitted in the first H hours of the trace (default: all of it)")
    parser.add_argument("--candidates", type=int, default=None, metavar="N",
                        help="race at most N candidates (a seeded sample; default: all)")
    parser.add_argument("--out", default=None, help=f"the pools file written (default {DEFAULT_OUT}, its folder made "
                        "if missing; out/ is ignored by git)")
    parser.add_argument("--plot", default=None, help="the Pareto PNG (default: --out with .png)")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")


def rank(f: dict[str, Any] | None, bound: float) -> tuple[Any, ...]:
    if not f or "error" in f:
        return (3,)
    return (int(f["jobs_completed"] < f["jobs_total"]) * 2 + int(f["pending_p95_s"] > bound),
            f["cost_usd"], f["paid_over_demand"])


def race(args: argparse.Namespace, space: Space, cands: list[Candidate], trace: str,
         span_h: float) -> tuple[list[tuple[Candidate, dict[str, Any]]], bool, int, float, float | None]:
    """Successive halving; (the last rung's candidates with their figures, interrupted, simulations, CPU s, the
    hours of the trace those figures come from: None for the whole trace)."""
    alive = list(range(len(cands)))
    results: list[tuple[Candidate, dict[str, Any]]] = []
    runs = 0
    cpu = 0.0
    scored_hours: float | None = None
    for rung in range(RUNGS):
        hours = args.hours if rung == RUNGS - 1 else span_h / ETA ** (RUNGS - 1 - rung)
        jobs = [batch.Run(cands[i].label, trace, pools_data(space, cands[i]),
                          {"hours": hours, "seed": args.seed, "scheduler": args.scheduler,
                           "interruption_rate": args.interruption_rate,
                           **({"buffer_gpus": cands[i].buffer_gpus} if cands[i].buffer_gpus else {})},
                          (args.trace, f"{args.pools} as candidate {cands[i].label}"))
                for i in alive]
        where = "the whole trace" if hours is None else f"the first {hours:.1f} h"

        def best(figures: list[dict[str, Any] | None], jobs: list[batch.Run] = jobs) -> str:
            done = [(rank(f, args.p95_max), n) for n, f in enumerate(figures) if f]
            if not done:
                return "none yet"
            top = min(done)
            f = figures[top[1]]
            assert f is not None
            return f"{jobs[top[1]].label}: {tradeoff.said(f)}"

        done = batch.run_batch(jobs, workers=args.workers, ray_address=args.ray, best=best, quiet=args.quiet,
                               what=f"rung {rung + 1}/{RUNGS} ({len(jobs)} candidates on {where})")
        runs += sum(f is not None for f in done.figures)
        cpu += done.cpu_s
        scored = sorted((rank(f, args.p95_max), n) for n, f in enumerate(done.figures) if f is not None)
        if scored:
            results = [(cands[alive[n]], done.figures[n] or {}) for _, n in scored]
            scored_hours = hours
        if done.interrupted:
            return results, True, runs, cpu, scored_hours
        alive = [alive[n] for _, n in scored[:max(1, math.ceil(len(alive) / ETA))]]
    return results, False, runs, cpu, scored_hours


def main(args: argparse.Namespace) -> int:
    if args.out is None:  # the default lands in out/, which git ignores, never in the folder tune was run from
        Path(DEFAULT_OUT).parent.mkdir(exist_ok=True)
        args.out = DEFAULT_OUT
    try:
        plot = args.plot or str(Path(args.out).with_suffix(".png"))
        check_inputs(args, plot)
        config = load_config(args.pools)
        data = yaml.safe_load(read_text(Path(args.pools)))
        space = space_of(config, data, args.pools)
        jobs = load_trace(args.trace)
        trace = read_text(Path(args.trace))
        if args.ray:  # the endpoint last among the checks, first before any simulation
            batch.check_ray(args.ray)
    except (ConfigError, TraceError, InputError, batch.RayError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    cands = candidates(space, jobs, reclaims=args.interruption_rate > 0, buffers=args.buffer_sizes)
    random.Random(args.seed).shuffle(cands)  # noqa: S311 - a reproducible order, not a secret
    cands = cands[:args.candidates]
    span_h = max(max(j.submit_s for j in jobs) / 3600, 1e-3)
    if args.hours is not None:
        span_h = min(span_h, args.hours)
    if not args.quiet:
        print(f"tune: {len(cands)} candidates, {RUNGS} rungs keeping 1/{ETA} each", file=sys.stderr)
    try:
        results, interrupted, runs, cpu, hours = race(args, space, cands, trace, span_h)
    except batch.RayError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return report(args, space, results, (interrupted, hours), plot, runs, cpu)


def check_inputs(args: argparse.Namespace, plot: str) -> None:
    if not math.isfinite(args.p95_max) or args.p95_max <= 0:
        raise InputError(f"--p95-max {args.p95_max}: must be a number of seconds > 0")
    if args.hours is not None and (not math.isfinite(args.hours) or args.hours <= 0):
        raise InputError(f"--hours {args.hours}: must be a number of hours > 0")
    if args.workers is not None and args.workers < 1:
        raise InputError(f"--workers {args.workers}: at least 1")
    try:
        args.buffer_sizes = tuple(dict.fromkeys(int(v) for v in str(args.buffers).split(",")))
    except ValueError:
        raise InputError(f"--buffers {args.buffers}: GPU counts separated by commas, e.g. 0,8,16") from None
    if any(b < 0 for b in args.buffer_sizes):
        raise InputError(f"--buffers {args.buffers}: GPU counts must be 0 or more")
    if max(args.buffer_sizes) > MAX_PLACEHOLDERS:
        raise InputError(f"--buffers {args.buffers}: at most {MAX_PLACEHOLDERS} placeholders a CapacityBuffer (the "
                         "planner keeps no more)")
    if args.candidates is not None and args.candidates < 1:
        raise InputError(f"--candidates {args.candidates}: at least 1")
    if not math.isfinite(args.interruption_rate) or not 0 <= args.interruption_rate <= 10:
        raise InputError(f"--interruption-rate {args.interruption_rate}: between 0 and 10")
    if args.ray and importlib.util.find_spec("ray") is None:
        raise InputError("--ray: needs Ray (pip install 'gpuburst[tune]')")
    if importlib.util.find_spec("matplotlib") is None:
        raise InputError("tune: its Pareto plot needs matplotlib (pip install 'gpuburst[plot]')")
    inputs = {"--trace": args.trace, "--pools": args.pools}
    check_output("--out", args.out, inputs)
    check_output("--plot", plot, {**inputs, "--out": args.out})
    if Path(plot).suffix.lower() != ".png":
        raise InputError(f"--plot {plot}: the Pareto front is written as .png")


def on(hours: float | None) -> str:
    """The part of the trace figures come from, in words."""
    return "the whole trace" if hours is None else f"the jobs submitted in its first {hours:g} h"


def report(args: argparse.Namespace, space: Space, results: list[tuple[Candidate, dict[str, Any]]],
           stopped: tuple[bool, float | None], plot: str, runs: int, cpu: float) -> int:
    """`stopped`: whether the race was interrupted, and the hours of the trace `results` come from."""
    interrupted, hours = stopped
    rows = [{"candidate": c.label, **f} for c, f in results if "error" not in f]
    failed = [f["error"] for _, f in results if "error" in f]
    if failed:  # never dropped without a word: the first one's reason, and how many
        print(f"warning: {len(failed)} candidates could not be simulated, e.g. {failed[0]}", file=sys.stderr)
    ok = [i for i, r in enumerate(rows) if rank(r, args.p95_max)[0] == 0]
    front = tradeoff.pareto(rows)
    marks = {i: "Pareto" for i in front}
    if ok:
        marks[ok[0]] = "chosen" + (" (Pareto)" if ok[0] in front else "")
    print(tradeoff.table(rows, ["candidate"], marks))
    tradeoff.plot(Path(plot), rows, [r["candidate"] for r in rows],
                  f"{Path(args.trace).name} ({on(hours)}): pool designs, cost against p95 pending",
                  {ok[0]: "chosen"} if ok else {})
    print(f"{runs} simulations, {cpu:.0f} CPU s; plot: {plot}")
    if not ok:
        whole = [r for r in rows if r["jobs_completed"] == r["jobs_total"]]
        best = min(whole, key=lambda r: r["pending_p95_s"], default=None)
        said = f"the best p95 found is {best['pending_p95_s']} s ({best['candidate']})" if best else \
            "no candidate completed every job"
        print(f"error: no candidate meets --p95-max {args.p95_max:g}: {said}", file=sys.stderr)
        return 130 if interrupted else 1
    chosen = results[[r["candidate"] for r in rows].index(rows[ok[0]]["candidate"])][0]
    write_pools(args, space, chosen, interrupted, hours)
    print(f"pools: {args.out} ({chosen.label}: {tradeoff.said(rows[ok[0]])} on {on(hours)}"
          f"{', best so far: interrupted' if interrupted else ''})")
    if chosen.buffer_gpus:  # a buffer is a cluster object, not a pool: say what to create beside the pools
        print(f"buffer: create a CapacityBuffer of {chosen.buffer_gpus} replicas of a 1-GPU PodTemplate "
              "(docs/operations.md, Capacity buffers)")
    return 130 if interrupted else 0


def write_pools(args: argparse.Namespace, space: Space, chosen: Candidate, interrupted: bool = False,
                hours: float | None = None) -> None:
    hours_flag = f" --hours {args.hours:g}" if args.hours is not None else ""
    head = (f"# Written by python -m scaler tune --trace {args.trace} --pools {args.pools} --p95-max {args.p95_max:g} "
            f"--seed {args.seed}{hours_flag}\n# candidate: {chosen.label}, chosen on {on(hours)}\n")
    if interrupted:
        head += ("# interrupted: the best so far, chosen on " + on(hours) + ", not on every rung of the race; "
                 "run tune again to finish it\n")
    text = head + yaml.safe_dump(pools_data(space, chosen), sort_keys=False)
    out = Path(args.out)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    load_config(tmp)  # the loader `scaler run` reads with, and `pulumi up` validates the pools through
    tmp.replace(out)
