"""Reading configuration files (the one place the scaler opens a YAML file)."""

from __future__ import annotations

from pathlib import Path

import yaml

from scaler.core.config.settings import ConfigError, ScalerConfig, parse_config
from scaler.core.model.errors import Issue


def read_text(path: Path) -> str:
    """A UTF-8 text file; ConfigError naming the file (and line) when unreadable or not UTF-8.
    The trace and snapshot loaders read through this too and re-raise as their own error."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(Issue(str(path), (), f"cannot read: {err.strerror or err}")) from None
    except UnicodeDecodeError as err:
        line = err.object[: err.start].count(b"\n") + 1
        raise ConfigError(Issue(f"{path}:{line}", (), f"not UTF-8 text (byte {err.object[err.start]:#04x})")) \
            from None


def load_config(path: str | Path) -> ScalerConfig:
    p = Path(path)
    text = read_text(p)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        raise ConfigError(Issue(f"{p}{where}", (), f"not valid YAML: {getattr(err, 'problem', err)}")) from None
    return parse_config(data, str(p))
