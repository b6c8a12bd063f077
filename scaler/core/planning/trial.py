"""Tentative placements, kept or undone as one: a gang all or none, a scale-down's what-if.

Everything that a placement changes and that can be undone (the Packer's bins, the filters' view of
the cluster, the caps' counters, the new nodes opened) is a `Tentative`; a `Trial` begins them all and,
when its block ends, commits them if `keep()` was called and rolls them back otherwise (in the order
given: the Packer first, whose rollback gives the bins their room back). Pure.
"""

from __future__ import annotations

from types import TracebackType
from typing import Protocol


class Tentative(Protocol):
    def begin(self) -> None: ...

    def commit(self) -> None: ...

    def rollback(self) -> None: ...


class Trial:
    def __init__(self, *parts: Tentative) -> None:
        self.parts = parts
        self.kept = False

    def __enter__(self) -> Trial:
        for part in self.parts:
            part.begin()
        return self

    def keep(self) -> None:
        self.kept = True

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None) -> None:
        for part in self.parts:
            if self.kept and kind is None:
                part.commit()
            else:
                part.rollback()
