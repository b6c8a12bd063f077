"""Kubernetes' quantity and semver CEL libraries, as functions for cel-expr-python.

Kubernetes gives CEL two opaque types DRA selectors use: `Quantity` (`quantity("1Gi")`,
`device.capacity[...]`) and `Semver` (`semver("1.2.3")`, version attributes). cel-expr-python's Python
API cannot declare opaque types, so a value of either is a one-entry map tagged by its kind
(`{"__quantity__": "1073741824"}`, `{"__semver__": "1.2.3"}`) holding the value's canonical text:
equality of two values is then equality of what they stand for, and the member functions below
(declared on `map(string, string)`) read the tag. An expression that mixes them with plain maps is
ill-typed in Kubernetes anyway; here it gets "no such overload" or a runtime error too.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any, Final

from scaler.core.model.quantity import QuantityError, parse_quantity

Q_TAG: Final = "__quantity__"
V_TAG: Final = "__semver__"
TaggedMap = dict[str, str]

_SEMVER: Final = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)
_LOOSE: Final = re.compile(r"^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(.*)$")


def canonical_quantity(amount: Decimal) -> TaggedMap:
    text = format(amount.normalize(), "f") if amount else "0"
    return {Q_TAG: text}


def semver_value(text: str) -> TaggedMap:
    if not _SEMVER.match(text):
        raise ValueError(f"invalid semver: {text!r}")
    return {V_TAG: text}


def _quantity(text: str) -> TaggedMap:
    try:
        return canonical_quantity(parse_quantity(text))
    except QuantityError as err:
        raise ValueError(f"quantities must match the regular expression of Kubernetes quantities: {err}") from None


def _is_quantity(text: str) -> bool:
    try:
        parse_quantity(text)
    except QuantityError:
        return False
    return True


def _normalize_semver(text: str) -> str:
    m = _LOOSE.match(text)
    if not m:
        return text
    parts = [str(int(p)) if p else "0" for p in m.groups()[:3]]
    return ".".join(parts) + m.group(4)


def _semver(text: str, normalize: bool = False) -> TaggedMap:
    return semver_value(_normalize_semver(text) if normalize else text)


def _is_semver(text: str, normalize: bool = False) -> bool:
    return bool(_SEMVER.match(_normalize_semver(text) if normalize else text))


def _q(value: TaggedMap) -> Decimal:
    if Q_TAG not in value:
        raise ValueError("no such overload: not a quantity")
    return Decimal(value[Q_TAG])


def _v(value: TaggedMap) -> tuple[int, int, int, tuple[tuple[int, int | str], ...] | None]:
    if V_TAG not in value:
        raise ValueError("no such overload: not a semver")
    m = _SEMVER.match(value[V_TAG])
    if not m:
        raise ValueError(f"invalid semver: {value[V_TAG]!r}")
    pre = m.group(4)
    ids = None if pre is None else tuple((0, int(p)) if p.isdigit() else (1, p) for p in pre.split("."))
    return int(m.group(1)), int(m.group(2)), int(m.group(3)), ids


def _sort_key(value: TaggedMap) -> tuple[Any, ...]:
    """Semver precedence: a release ranks above its pre-releases; build metadata does not count."""
    major, minor, patch, pre = _v(value)
    return (major, minor, patch, 1 if pre is None else 0, pre or ())


def compare(a: TaggedMap, b: TaggedMap) -> int:
    if Q_TAG in a or Q_TAG in b:
        x, y = _q(a), _q(b)
        return (x > y) - (x < y)
    ka, kb = _sort_key(a), _sort_key(b)
    return (ka > kb) - (ka < kb)


def _as_integer(value: TaggedMap) -> int:
    amount = _q(value)
    if amount != amount.to_integral_value() or abs(amount) > 2**63 - 1:
        raise ValueError("cannot convert value to integer")
    return int(amount)


def _major(v: TaggedMap) -> int:
    return _v(v)[0]


def _minor(v: TaggedMap) -> int:
    return _v(v)[1]


def _patch(v: TaggedMap) -> int:
    return _v(v)[2]


def _add(a: TaggedMap, b: TaggedMap | int) -> TaggedMap:
    return canonical_quantity(_q(a) + (Decimal(b) if isinstance(b, int) else _q(b)))


def _sub(a: TaggedMap, b: TaggedMap | int) -> TaggedMap:
    return canonical_quantity(_q(a) - (Decimal(b) if isinstance(b, int) else _q(b)))


def _sign(a: TaggedMap) -> int:
    x = _q(a)
    return (x > 0) - (x < 0)


# (function, overload id, result, parameters, member?, implementation); types by name, see cel.py.
OVERLOADS: Final[tuple[tuple[str, str, str, tuple[str, ...], bool, Callable[..., Any]], ...]] = (
    ("quantity", "string_to_quantity", "T", ("string",), False, _quantity),
    ("isQuantity", "is_quantity_string", "bool", ("string",), False, _is_quantity),
    ("isInteger", "quantity_is_integer", "bool", ("T",), True,
     lambda a: _q(a) == _q(a).to_integral_value()),
    ("asInteger", "quantity_as_integer", "int", ("T",), True, _as_integer),
    ("asApproximateFloat", "quantity_as_float", "double", ("T",), True, lambda a: float(_q(a))),
    ("sign", "quantity_sign", "int", ("T",), True, _sign),
    ("add", "quantity_add", "T", ("T", "T"), True, _add),
    ("add", "quantity_add_int", "T", ("T", "int"), True, _add),
    ("sub", "quantity_sub", "T", ("T", "T"), True, _sub),
    ("sub", "quantity_sub_int", "T", ("T", "int"), True, _sub),
    ("semver", "string_to_semver", "T", ("string",), False, _semver),
    ("semver", "string_bool_to_semver", "T", ("string", "bool"), False, _semver),
    ("isSemver", "is_semver_string", "bool", ("string",), False, _is_semver),
    ("isSemver", "is_semver_string_bool", "bool", ("string", "bool"), False, _is_semver),
    ("major", "semver_major", "int", ("T",), True, _major),
    ("minor", "semver_minor", "int", ("T",), True, _minor),
    ("patch", "semver_patch", "int", ("T",), True, _patch),
    # Shared by both types (one overload per signature), dispatched on the tag.
    ("isGreaterThan", "tagged_is_greater_than", "bool", ("T", "T"), True, lambda a, b: compare(a, b) > 0),
    ("isLessThan", "tagged_is_less_than", "bool", ("T", "T"), True, lambda a, b: compare(a, b) < 0),
    ("compareTo", "tagged_compare_to", "int", ("T", "T"), True, compare),
)
