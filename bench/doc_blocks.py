"""The parts of README.md and docs/*.md that a bench writes, so that no figure there is typed by hand.

A block sits between `<!-- NAME: begin -->` and `<!-- NAME: end -->`, NAME the command that writes it (e.g.
`bench/plan_scale.py --scale xl`); `write_block` replaces what is between the markers and nothing else.
tests/test_docs_commands.py fails when a measured figure stands outside such a block.
"""

from __future__ import annotations

import contextlib
import datetime
import io
import os
import sys
from collections.abc import Iterator
from pathlib import Path


def begin(name: str) -> str:
    return f"<!-- {name}: begin -->"


def end(name: str) -> str:
    return f"<!-- {name}: end -->"


def _bounds(path: Path, name: str) -> tuple[str, int, int]:
    try:
        doc = path.read_text(encoding="utf-8")
    except OSError as err:
        print(f"{path}: cannot read it ({err.strerror})", file=sys.stderr)
        raise SystemExit(2) from None
    start, stop = doc.find(begin(name)), doc.find(end(name))
    if start < 0 or stop < start:
        print(f"{path}: markers {begin(name)!r} ... {end(name)!r} not found", file=sys.stderr)
        raise SystemExit(2)
    return doc, start, stop


def check_block(path: Path, name: str) -> None:
    """Exit 2 naming the file and the markers when `write_block` could not write NAME's block: asked before a long
    run, so that it stops at once instead of after it."""
    _bounds(path, name)


def write_block(path: Path, name: str, text: str) -> None:
    """Put `text` between NAME's markers in `path`; exit 2 naming the file and the markers when they are missing."""
    doc, start, stop = _bounds(path, name)
    path.write_text(doc[: start + len(begin(name))] + "\n" + text.strip("\n") + "\n" + doc[stop:], encoding="utf-8")
    print(f"{path}: {name} block rewritten")


def printed(command: str, lines: list[str], load: tuple[float, float]) -> str:
    """A bench's output lines as the docs quote them: the command, the day and how busy the machine was (the wall
    time grows with the load average, the CPU time does not), then the lines as printed."""
    day = datetime.datetime.now(datetime.UTC).date().isoformat()
    body = "\n".join(lines)
    return (f"Printed by `{command}` on {day}, {os.cpu_count()} cores, load average {load[0]:.1f} at the start "
            f"and {load[1]:.1f} at the end:\n\n```\n{body}\n```")


class _Tee(io.TextIOBase):
    """What is printed goes on to the terminal and is kept."""

    def __init__(self, out: io.TextIOBase) -> None:
        self.out, self.kept = out, io.StringIO()

    def write(self, text: str) -> int:
        self.kept.write(text)
        return self.out.write(text)

    def flush(self) -> None:
        self.out.flush()


@contextlib.contextmanager
def quoting(path: str | None, name: str) -> Iterator[None]:
    """While the block runs, keep what it prints (stdout and stderr, in order: a bench's CPU time and load average
    go to stderr); when it ends without an error, write those lines into `path` between NAME's markers (`printed`,
    the command `.venv/bin/python NAME`). The markers are looked for first, so a missing one stops the bench before
    it runs. `path` None: print only."""
    if path is None:
        yield
        return
    check_block(Path(path), name)
    load = os.getloadavg()[0]
    out, err = _Tee(sys.stdout), _Tee(sys.stderr)  # type: ignore[arg-type]
    err.kept = out.kept
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        yield
    lines = [line for line in out.kept.getvalue().splitlines() if line.strip()]
    write_block(Path(path), name, printed(f".venv/bin/python {name}", lines, (load, os.getloadavg()[0])))
