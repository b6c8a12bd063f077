"""gpuburst's command line: `python -m scaler <command>`; `python -m scaler <command> --help` says more.

run | plan | explain | simulate | tune | import-pools | permissions | snapshot | shadow-report | trace export.

Each command lives in its own module with `add_arguments(parser)` and `main(args) -> int`;
only the chosen one is imported, so `simulate` never loads the cloud SDKs.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from scaler import __version__

COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("scaler.run_command", "run the scaler against a cluster and its clouds"),
    "plan": ("scaler.sim.plan_command", "print the plan for a cluster's snapshot (see snapshot) and a pools file"),
    "explain": ("scaler.sim.plan_command", "alias of plan"),
    "shadow-report": ("scaler.shadow_report", "compare a `run --shadow` record with what the cluster did"),
    "snapshot": ("scaler.snapshot_command", "write the List plan / explain read, from the current kubeconfig"),
    "simulate": ("scaler.sim.simulate_command", "replay a GPU job trace through the scaler in a simulated cloud"),
    "tune": ("scaler.sim.tune", "search pool shapes, idle-time bounds and buffers for a trace (Pareto front)"),
    "import-pools": ("scaler.importpools", "write the pools file of an existing cluster's node groups"),
    "permissions": ("scaler.permissions_command", "print the IAM policy / Azure role the scaler needs, as JSON"),
    "trace": ("scaler.sim.export", "trace export: write a job trace from the kube-state-metrics series in Prometheus"),
}


TRACEBACK_ENV = "GPUBURST_TRACEBACK"  # set: an internal error ends with its traceback instead of one line


class Parser(argparse.ArgumentParser):
    """argparse with its refusals on one line (argparse prints the usage above them), like every other bad input."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {self.prog}: {message} (--help lists the options)\n")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    top = Parser(prog="python -m scaler", description=__doc__.splitlines()[0])
    top.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    top.add_argument("command", choices=sorted(COMMANDS), help="; ".join(f"{k}: {v[1]}" for k, v in COMMANDS.items()))
    if not args or args[0] not in COMMANDS:
        top.parse_args(args[:1])  # --help and --version print and exit 0; anything else: usage, exit 2
        return 2
    module_name, description = COMMANDS[args[0]]
    module = importlib.import_module(module_name)
    parser = Parser(prog=f"python -m scaler {args[0]}", description=description)
    module.add_arguments(parser)
    ns = parser.parse_args(args[1:])
    ns.command = args[0]
    try:
        return int(module.main(ns))
    except BrokenPipeError:
        # `... | head`: the reader has what it wanted. Point stdout at /dev/null so the flush at exit
        # does not fail again, and end quietly.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as err:
        # Bad input is each command's to say in one line (exit 2); what reaches here is a fault of ours: one
        # line too, exit 1, and the traceback when asked for (docs/operations.md, Bad input).
        if os.environ.get(TRACEBACK_ENV):
            raise
        said = (str(err).strip().splitlines() or [""])[0]
        print(f"error: {args[0]}: internal error {type(err).__name__}: {said} (a bug: {TRACEBACK_ENV}=1 shows "
              "where; please report it)", file=sys.stderr)
        return 1
