"""Kubernetes resource quantities as integers, without importing the Kubernetes client.

The core stays free of I/O libraries, so it cannot import `kubernetes.utils.parse_quantity`;
`tests/scaler/core/test_quantity.py` checks this function against that one on every suffix.
CPU is kept in millicores, everything else in base units (bytes, counts). What the API server would
refuse is refused here too: negative amounts, fractional extended resources (`nvidia.com/gpu: 0.5`),
and amounts past what Kubernetes' int64 quantities hold (`1e400`).
"""

from __future__ import annotations

from decimal import ROUND_CEILING, Decimal, InvalidOperation
from typing import Final

from scaler.core.model.keys import RES_CPU

_BINARY: Final = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL: Final = {
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
    "k": Decimal(10**3), "M": Decimal(10**6), "G": Decimal(10**9), "T": Decimal(10**12),
    "P": Decimal(10**15), "E": Decimal(10**18),
}


MAX_UNITS: Final = 2**63 - 1  # Kubernetes keeps quantities' values as int64


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity, or an amount no resource can have."""


def parse_quantity(value: str | int | float) -> Decimal:
    """Parse "500m", "16Gi", "1e3", 4 into an exact Decimal in base units."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise QuantityError(f"not a quantity: {value!r}")
    if isinstance(value, int | float):
        amount = Decimal(str(value))
        if not amount.is_finite():
            raise QuantityError(f"not a quantity: {value!r}")
        return _bounded(amount, value)
    text = value.strip()
    number, suffix = text, ""
    if text[-2:] in _BINARY:
        number, suffix = text[:-2], text[-2:]
    elif text and text[-1] in _DECIMAL and not text[-1].isdigit():
        # "1E3" is an exponent, "1E" is exa: only a trailing letter after a digit is a suffix.
        number, suffix = text[:-1], text[-1]
    try:
        amount = Decimal(number)
    except InvalidOperation:
        raise QuantityError(f"not a quantity: {value!r}") from None
    if not amount.is_finite():
        raise QuantityError(f"not a quantity: {value!r}")
    return _bounded(amount, value) * (_BINARY[suffix] if suffix in _BINARY else _DECIMAL[suffix])


def _bounded(amount: Decimal, value: object) -> Decimal:
    """Keep exponents where Decimal arithmetic stays exact and cheap (1e400 is no resource's amount)."""
    if amount and amount.adjusted() > 30:
        raise QuantityError(f"{value!r} is larger than any node could have")
    return amount


def is_extended(resource: str) -> bool:
    """A resource outside kubernetes.io's names (nvidia.com/gpu): whole units only."""
    return "/" in resource and not resource.startswith(("kubernetes.io/", "requests.", "hugepages-"))


def to_units(resource: str, value: str | int | float) -> int:
    """The integer the core works in: millicores for cpu, rounded up base units otherwise."""
    amount = parse_quantity(value)
    if amount < 0:
        raise QuantityError(f"{value!r} is negative")
    if is_extended(resource) and amount != amount.to_integral_value():
        raise QuantityError(f"{value!r} is not a whole number ({resource} is an extended resource: "
                            "whole units only)")
    if resource == RES_CPU:
        amount *= 1000
    units = int(amount.to_integral_value(rounding=ROUND_CEILING))
    if units > MAX_UNITS:
        raise QuantityError(f"{value!r} is larger than any node could have")
    return units


def format_units(resource: str, units: int) -> str:
    """The inverse of `to_units` in the short form Kubernetes prints ("500m", "16Gi", "8")."""
    if resource == RES_CPU:
        return f"{units // 1000}" if units % 1000 == 0 else f"{units}m"
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        if units and units % _BINARY[suffix] == 0:
            return f"{units // _BINARY[suffix]}{suffix}"
    return str(units)
