"""What a pass works out that the next may reuse: values kept under a key that holds everything they are
computed from, so a plan made with a memo is the plan made without one. The Reconciler keeps one and
hands it to `decide` beside the Snapshot and the State (the pass carries it in `Advanced.memo`); a pass
without one (None) is planned from scratch. Entries that a whole pass did not use are dropped. Pure (no I/O,
no globals).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypeVar, cast

T = TypeVar("T")


class Memo:
    def __init__(self) -> None:
        # key -> (key, value): a value found again is kept under the key it was put with, so that a pass that
        # finds it leaves no young key behind (each, on a large cluster about 30,000, would be swept by the
        # collector's first pass after the pass)
        self._now: dict[Hashable, tuple[Hashable, Any]] = {}  # used in this pass
        self._before: dict[Hashable, tuple[Hashable, Any]] = {}  # used in the pass before, not yet in this one
        self.hits = self.misses = 0

    def next_pass(self) -> None:
        """A new pass starts: what the last pass did not use goes."""
        self._before, self._now = self._now, {}

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        """The value under the key, computed when no pass since the last but one has."""
        entry = self._now.get(key)
        if entry is None:
            entry = self._before.pop(key, None)
            if entry is None:
                self.misses += 1
                entry = (key, compute())
            else:
                self.hits += 1
            self._now[entry[0]] = entry
        return cast(T, entry[1])

    def find(self, key: Hashable) -> Any:
        """The value under the key, or None (`get` for values that are never None, without a closure)."""
        entry = self._now.get(key)
        if entry is None:
            entry = self._before.pop(key, None)
            if entry is None:
                return None
            self.hits += 1
            self._now[entry[0]] = entry
        return entry[1]

    def put(self, key: Hashable, value: Any) -> None:
        self.misses += 1
        self._now[key] = (key, value)

    def __len__(self) -> int:
        return len(self._now) + len(self._before)
