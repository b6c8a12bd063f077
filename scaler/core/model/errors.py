"""Input errors that carry where they are as data: a source (file, stack) and a key path.

A check that knows its field raises `FieldError(path, message)`; pydantic keeps the exception in the
error's context, so `config.parse_config` prepends the model's location without reading the message.
Whoever shows the error (the CLI, the Pulumi program) renders `Issue.path` in its own key syntax.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# ("pools", "[gpu1-spot-a]", "max"): names are keys, "[...]" items are list entries (by name or index).
KeyPath = tuple[str, ...]


def render_path(path: KeyPath) -> str:
    """("pools", "[gpu1]", "max") -> "pools[gpu1].max"."""
    return "".join(p if p.startswith("[") else f".{p}" for p in path).lstrip(".")


class FieldError(ValueError):
    """A validation failure about one field; `path` is relative to the object that raised it."""

    def __init__(self, path: str | KeyPath, message: str) -> None:
        super().__init__(message)
        self.path: KeyPath = (path,) if isinstance(path, str) else tuple(path)
        self.message = message


@dataclass(frozen=True)
class Issue:
    source: str  # a file (with :line:col when known) or a stack
    path: KeyPath
    message: str

    def __str__(self) -> str:
        where = render_path(self.path)
        return f"{self.source}: {where}: {self.message}" if where else f"{self.source}: {self.message}"


class ConfigError(ValueError):
    """Bad configuration: one issue per line, each naming the file (or stack), the key path and the fault."""

    def __init__(self, issues: str | Issue | Sequence[Issue]) -> None:
        """A plain string is an issue already rendered (its source and key inside the text)."""
        if isinstance(issues, str):
            self.issues: tuple[Issue, ...] = ()
            super().__init__(issues)
            return
        self.issues = (issues,) if isinstance(issues, Issue) else tuple(issues)
        super().__init__("\n".join(str(i) for i in self.issues))
