"""`python -m scaler simulate --sweep KNOB=V1,V2,... --sweep-out DIR`: one simulation per setting (every
combination of the knobs' values, plus today's default), a table on stdout and in DIR/sweep.csv, and
DIR/sweep.png of cost (paid / demand GPU-hours) against p95 pending with today's default marked.

A knob is either a setting of the pools file (`timings.*`, `scale_down.*`, set on a copy of it) or a keyword
argument of `simulate()`. `buffer_gpus` (CapacityBuffer) and `warm_size` (warm pools) are registered by name:
they work on a build whose `simulate()` takes them, and are refused in one line where it does not.
"""

from __future__ import annotations

import argparse
import inspect
import itertools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from scaler.configfile import read_text
from scaler.core.config.settings import parse_config
from scaler.sim import batch, tradeoff
from scaler.sim.simulation import InputError, simulate


@dataclass(frozen=True)
class Knob:
    section: str | None  # the pools file's section it sets, None: a keyword argument of simulate()
    kind: type  # int or float
    help: str
    flag: str | None = None  # simulate's own flag that sets the same keyword argument


KNOBS: dict[str, Knob] = {
    "unneeded_time": Knob("timings", float, "fixed idle-node lifetime (s), instead of the adaptive one"),
    "unneeded_time_min": Knob("scale_down", float, "the adaptive unneeded time's lower bound (s)"),
    "unneeded_time_max": Knob("scale_down", float, "the adaptive unneeded time's upper bound (s)"),
    "rebuy_weight": Knob("scale_down", float, "the adaptive rule's re-buy cost, in boots per GPU beyond the first"),
    "buffer_gpus": Knob(None, int, "GPUs a CapacityBuffer keeps ready", "--buffer"),
    "warm_size": Knob(None, int, "instances each GPU pool keeps in a warm pool", "--warm"),
}


def parse_sweeps(specs: list[str]) -> list[tuple[str, list[float | int]]]:
    """`KNOB=V1,V2,...` -> [(knob, values)]; one line naming the spec on anything wrong."""
    out: list[tuple[str, list[float | int]]] = []
    takes = inspect.signature(simulate).parameters
    for spec in specs:
        name, eq, values = spec.partition("=")
        knob = KNOBS.get(name.strip())
        if not eq or knob is None:
            raise InputError(f"--sweep {spec}: expected KNOB=V1,V2,... with KNOB one of {', '.join(KNOBS)}")
        if knob.section is None and name not in takes:
            raise InputError(f"--sweep {spec}: this build's simulator has no {name} ({knob.help}) yet")
        if name in (n for n, _ in out):
            raise InputError(f"--sweep {spec}: {name} is swept twice; give its values in one --sweep")
        try:
            parsed = [knob.kind(v) for v in values.split(",")]
        except ValueError:
            raise InputError(f"--sweep {spec}: values must be {knob.kind.__name__}s separated by commas") from None
        if any(not math.isfinite(v) or v < 0 for v in parsed) or len(set(parsed)) != len(parsed):
            raise InputError(f"--sweep {spec}: values must be distinct finite numbers >= 0")
        out.append((name, parsed))
    return out


def settings(sweeps: list[tuple[str, list[float | int]]]) -> list[dict[str, float | int]]:
    """Today's default (no knob set) first, then every other combination of the knobs' values."""
    names = [n for n, _ in sweeps]
    combos = (dict(zip(names, combo, strict=True)) for combo in itertools.product(*(v for _, v in sweeps)))
    return [{}, *(s for s in combos if not is_default(s))]


def is_default(setting: dict[str, float | int]) -> bool:
    """A setting that only gives simulate() its own defaults (`buffer_gpus=0 warm_size=0`) is today's default
    run again: not run twice."""
    takes = inspect.signature(simulate).parameters
    return all(KNOBS[k].section is None and k in takes and takes[k].default == v for k, v in setting.items())


def with_knobs(data: dict[str, Any], setting: dict[str, float | int]) -> dict[str, Any]:
    """A copy of the pools file's data with the setting's pools-file knobs set."""
    out = {**data}
    for name, value in setting.items():
        section = KNOBS[name].section
        if section is not None:
            out[section] = {**(out.get(section) or {}), name: value}
    return out


def runs_of(args: argparse.Namespace, base: dict[str, Any]) -> tuple[list[batch.Run], list[dict[str, Any]]]:
    data = yaml.safe_load(read_text(Path(args.pools)))
    if not isinstance(data, dict):
        raise InputError(f"{args.pools}: not a pools file (a YAML mapping)")
    trace = read_text(Path(args.trace))
    sweeps = parse_sweeps(args.sweep)
    for name, values in sweeps:
        flag = KNOBS[name].flag
        if flag is not None and base.get(name):  # the default row would run with the flag's value, unlabelled
            raise InputError(f"--sweep {name}={','.join(f'{v:g}' for v in values)}: {flag} {base[name]} sets the "
                             f"same {name}; give its values in the sweep alone")
    chosen = settings(sweeps)
    out = []
    for setting in chosen:
        pools = with_knobs(data, setting)
        parse_config(pools, f"{args.pools} with {label(setting)}")  # ConfigError names the knob's field
        kwargs = {**base, **{k: v for k, v in setting.items() if KNOBS[k].section is None}}
        out.append(batch.Run(label(setting), trace, pools, kwargs, (args.trace, f"{args.pools} with {label(setting)}")))
    return out, chosen


def label(setting: dict[str, float | int]) -> str:
    return " ".join(f"{k}={v:g}" for k, v in setting.items()) or "default"


def run_sweep(args: argparse.Namespace, base: dict[str, Any]) -> int:
    """The sweep (simulate_command.main hands over once its own checks passed); exit code."""
    out = Path(args.sweep_out)
    if not out.is_dir():
        raise InputError(f"--sweep-out {args.sweep_out}: not a folder (create it first)")
    runs, chosen = runs_of(args, base)
    names = list(dict.fromkeys(k for s in chosen for k in s))

    def best(figures: list[dict[str, Any] | None]) -> str:
        ok = [(f["cost_usd"], f["pending_p95_s"], i) for i, f in enumerate(figures)
              if f and "error" not in f and f["jobs_completed"] == f["jobs_total"]]
        if not ok:
            return "none yet"
        cheapest = min(ok)[2]  # the bill first, as the table and the plot weigh a setting
        return f"{runs[cheapest].label}: {tradeoff.said(figures[cheapest] or {})}"

    done = batch.run_batch(runs, workers=args.workers, ray_address=args.ray, best=best, quiet=args.quiet)
    rows = []
    for setting, figures in zip(chosen, done.figures, strict=True):
        if figures and "error" in figures:
            raise InputError(f"--sweep {label(setting)}: {figures['error']}")
        if figures:
            rows.append({**{k: setting.get(k) for k in names}, **figures})
    marks = {0: "today's default"} if done.figures[0] else {}
    print(tradeoff.table(rows, names, marks))
    tradeoff.write_csv(out / "sweep.csv", rows, names, marks)
    labels = [label({k: r[k] for k in names if r[k] is not None}) for r in rows]
    part = f"first {args.hours:g} h" if args.hours is not None else "whole trace"
    tradeoff.plot(out / "sweep.png", rows, labels, f"{Path(args.trace).name} ({part}): cost against p95 pending",
                  marks)
    print(f"table: {out / 'sweep.csv'}\nplot: {out / 'sweep.png'}")
    return 130 if done.interrupted else 0

