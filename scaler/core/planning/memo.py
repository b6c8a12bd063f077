"""What a pass works out that the next may reuse: values kept under a key that holds everything they are
computed from, so a plan made with a memo is the plan made without one. The Reconciler keeps one and
hands it to the planner in the Snapshot (`Snapshot.memo`); a Snapshot without one (None) is planned
from scratch. Entries that a whole pass did not use are dropped. Pure (no I/O, no globals).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypeVar, cast

T = TypeVar("T")
_MISSING: Any = object()


class Memo:
    def __init__(self) -> None:
        self._now: dict[Hashable, Any] = {}  # used in this pass
        self._before: dict[Hashable, Any] = {}  # used in the pass before, not yet in this one
        self.hits = self.misses = 0

    def next_pass(self) -> None:
        """A new pass starts: what the last pass did not use goes."""
        self._before, self._now = self._now, {}

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        """The value under the key, computed when no pass since the last but one has."""
        value = self._now.get(key, _MISSING)
        if value is _MISSING:
            value = self._before.pop(key, _MISSING)
            if value is _MISSING:
                self.misses += 1
                value = compute()
            else:
                self.hits += 1
            self._now[key] = value
        return cast(T, value)

    def find(self, key: Hashable) -> Any:
        """The value under the key, or None (`get` for values that are never None, without a closure)."""
        value = self._now.get(key)
        if value is None:
            value = self._before.pop(key, None)
            if value is not None:
                self.hits += 1
                self._now[key] = value
        return value

    def put(self, key: Hashable, value: Any) -> None:
        self.misses += 1
        self._now[key] = value

    def __len__(self) -> int:
        return len(self._now) + len(self._before)
