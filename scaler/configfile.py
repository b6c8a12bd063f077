"""Reading configuration files (the one place the scaler opens a YAML file)."""

from __future__ import annotations

from pathlib import Path

import yaml

from scaler.core.config import ConfigError, ScalerConfig, parse_config


def load_config(path: str | Path) -> ScalerConfig:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"{p}: cannot read: {err.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        raise ConfigError(f"{p}{where}: not valid YAML: {getattr(err, 'problem', err)}") from None
    return parse_config(data, str(p))
