"""Resource vectors: a mapping from resource name to integer units (see quantity.py)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from scaler.core.model.errors import FieldError
from scaler.core.model.quantity import QuantityError, format_units, to_units

Resources = dict[str, int]


def parse_resources(raw: Mapping[str, str | int | float] | None) -> Resources:
    """{"cpu": "500m", "memory": "1Gi"} -> {"cpu": 500, "memory": 1073741824}; a bad amount raises a
    FieldError whose path is the resource's name."""
    if raw is not None and not isinstance(raw, Mapping):
        raise FieldError((), f"expected a mapping of resource names to quantities, got {type(raw).__name__}")
    out: Resources = {}
    for name, value in (raw or {}).items():
        try:
            out[name] = to_units(name, value)
        except QuantityError as err:
            raise FieldError(str(name), str(err).removeprefix(f"{name}: ")) from None
    return out


def format_resources(res: Mapping[str, int]) -> dict[str, str]:
    return {name: format_units(name, value) for name, value in sorted(res.items()) if value}


def total(items: Iterable[Mapping[str, int]]) -> Resources:
    out: Resources = {}
    for res in items:
        for name, value in res.items():
            out[name] = out.get(name, 0) + value
    return out


def insufficient(request: Mapping[str, int], free: Mapping[str, int]) -> list[str]:
    """Names of the requested resources `free` cannot cover, as kube-scheduler's NodeResourcesFit."""
    return [name for name, value in request.items() if value > 0 and value > free.get(name, 0)]


def fits(request: Mapping[str, int], free: Mapping[str, int]) -> bool:
    for name, value in request.items():
        if value > 0 and value > free.get(name, 0):
            return False
    return True
