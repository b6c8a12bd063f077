"""GPU repair on against off over several draws of the failures: what the README's one-draw rows cannot say.

The README's GPU failure rows are one draw each (`--seed 0`). Which job a failure strikes depends on the draw, and
once the two runs' schedules part it strikes other jobs in each, and pods land on other nodes, so one pair's gap
in cost or lost work is mostly luck (docs/simulator.md, *Broken GPUs*). This bench runs the same pairs
(examples/pools-aws.yaml, default placement, checkpoints every 1800 s, both traces, 0.001 and 0.01 GPU failures per
GPU-hour) for seeds 0 to N-1 and prints, per trace and rate, the mean of the paired differences repair on less
repair off, with its standard error (a pair shares its seed, so both runs face the same fault process:
`scaler/sim/failures.py`), and in how many seeds repair on was no dearer and lost less work. The pairs whose pods
restart in place on the dead GPU (`--restart-policy OnFailure`) are left out: without repair their struck jobs never
end, in every draw.

    .venv/bin/python bench/repair_seeds.py [--seeds N] [--jobs N] [--traces DIR] [--readme FILE]

With --readme, the block between `<!-- bench/repair_seeds.py: begin -->` and its end marker in that file is replaced
by what this run printed (bench/doc_blocks.py).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from doc_blocks import check_block, write_block
from simulate_traces import GPU_FAILURE_RATES, ROOT, run_one, runs

TRACES = ("PHILLY-A.csv", "ALIBABA-OPENB2023-A.csv")
POOLS = "examples/pools-aws.yaml"


def pair_runs(traces: Path, seeds: int) -> list[dict[str, Any]]:
    """The README's GPU failure runs of pods made again (`simulate_traces.runs`, repair on then off for each trace
    and rate), each for
    every seed, the two runs of a pair side by side."""
    rows = [kw for _, kw in runs(traces, POOLS, None) if kw.get("gpu_failure_rate") and not kw.get("restart_in_place")]
    return [{**kw, "seed": seed} for on, off in zip(rows[::2], rows[1::2], strict=True) for seed in range(seeds)
            for kw in (on, off)]


def _figures(report: dict[str, Any]) -> tuple[float, float, float]:
    f = report["failures"]
    return float(report["cost_usd"]), float(f["gpu_hours_lost"]), float(f["gpu_hours_lost_to_failures"])


def mean_se(values: list[float]) -> tuple[float, float]:
    """Mean and its standard error (the sample's standard deviation over the square root of its size; 0 for one)."""
    mean = statistics.fmean(values)
    return mean, (statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0)


def cell_line(label: str, pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> str:
    """One trace and rate over its seeds: the paired differences on - off of cost, work lost and the failures' own
    share of it, and the seeds where on met each half of the goal."""
    on = [_figures(a) for a, _ in pairs]
    off = [_figures(b) for _, b in pairs]
    n = len(pairs)
    cost, lost, own = ([x[i] - y[i] for x, y in zip(on, off, strict=True)] for i in range(3))
    (c, c_se), (w, w_se), (o, o_se) = mean_se(cost), mean_se(lost), mean_se(own)
    cheaper = sum(d <= 0 for d in cost)
    less = sum(d < 0 for d in lost)
    mean_off_cost = statistics.fmean(y[0] for y in off)
    mean_off_lost = statistics.fmean(y[1] for y in off)
    return (f"{label}: {n} seeds; on - off: cost {c:+,.0f} $ (SE {c_se:,.0f}; off {mean_off_cost:,.0f} $), "
            f"GPU-h lost {w:+,.1f} (SE {w_se:,.1f}; off {mean_off_lost:,.1f}), of it by the failures' own jobs "
            f"{o:+,.1f} (SE {o_se:,.1f}); on no dearer in {cheaper}/{n}, loses less in {less}/{n}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=5, metavar="N", help="seeds 0 to N-1 (default 5)")
    parser.add_argument("--jobs", type=int, default=2, metavar="N", help="runs in parallel (default 2)")
    parser.add_argument("--traces", default=str(ROOT.parent / "shared" / "traces"), metavar="DIR",
                        help="folder with PHILLY-A.csv and ALIBABA-OPENB2023-A.csv (default: %(default)s)")
    parser.add_argument("--readme", metavar="FILE",
                        help="rewrite the block between this bench's markers in this file (docs/simulator.md)")
    args = parser.parse_args()
    traces = Path(args.traces)
    if args.seeds < 1:
        print(f"--seeds {args.seeds}: at least 1", file=sys.stderr)
        return 2
    if args.jobs < 1:
        print(f"--jobs {args.jobs}: at least 1", file=sys.stderr)
        return 2
    if missing := [t for t in TRACES if not (traces / t).exists()]:
        print(f"{traces}: no {', '.join(missing)}: pass --traces DIR", file=sys.stderr)
        return 2
    if args.readme:
        check_block(Path(args.readme), "bench/repair_seeds.py")
    todo = pair_runs(traces, args.seeds)
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        reports = list(pool.map(run_one, todo))
    lines = []
    for trace in TRACES:
        for rate in GPU_FAILURE_RATES:
            cell = [r for kw, r in zip(todo, reports, strict=True)
                    if kw["trace"].endswith(trace) and kw["gpu_failure_rate"] == rate]
            lines.append(cell_line(f"{Path(trace).stem} {rate:g}/GPU-h", list(zip(cell[::2], cell[1::2], strict=True))))
    print("\n".join(lines))
    if args.readme:
        write_block(Path(args.readme), "bench/repair_seeds.py",
                    f"Printed by `.venv/bin/python bench/repair_seeds.py --seeds {args.seeds}`:\n\n```\n" +
                    "\n".join(lines) + "\n```")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
