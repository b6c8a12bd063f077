"""Which devices a selector cannot tell apart, so that its result is computed once for them.

The nodes of one pool publish devices that differ only in a few attributes (a GPU's `uuid`); a selector
that never reads those gives every such device the same answer. `reads(expression)` is the set of
names the expression may read the value of, or None when that cannot be told from its text. It is
told conservatively: every index is a string literal (`["x"]`, no computed key, no list literal),
`device` only appears as `device.driver`, `device.attributes[...]` or `device.capacity[...]`, and a
domain's map is only ever followed by `.` or `[` (never compared, passed or returned whole), and no
comprehension macro (whose two-variable forms bind values). Then an attribute's value is read only
through its name written out (`.name`, `["name"]`), and every other use of the maps (`has`, `in`)
depends on their keys alone. `content_key`
is a device's identity for such an expression: the driver, every key, and the values of the names
the expression mentions (with their types: a bool is not an int, a version is not a string).
"""

from __future__ import annotations

import functools
import re
from typing import Final

from scaler.core.model.dra import Device

_LITERAL: Final = re.compile(r"""'([^'\\]*)'|"([^"\\]*)\"""")
_INDEX: Final = re.compile(r"""\[\s*(?:'[^'\\]*'|"[^"\\]*")\s*\]""")
_BINDS_VALUES: Final = frozenset({"all", "exists", "exists_one", "existsOne", "map", "filter", "transformList",
                                   "transformMap", "transformMapEntry", "sortBy"})
_IDENT: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DEVICE: Final = re.compile(r"\bdevice\b")
_DEVICE_OK: Final = re.compile(r"""device\.(?:driver\b|(?:attributes|capacity)\s*\[\s*(?:'[^'\\]*'|"[^"\\]*")\s*\]"""
                               r"""\s*(?=[.\[]))""")


@functools.lru_cache(maxsize=1024)
def reads(expression: str) -> frozenset[str] | None:
    """The names whose values the expression may read, or None: it may read any."""
    if "\\" in expression or '"""' in expression or "'''" in expression:
        return None
    names = {a or b for a, b in _LITERAL.findall(expression)}
    bare = _LITERAL.sub('""', expression)  # identifiers outside string literals
    if bare.count("[") != len(_INDEX.findall(bare)):
        return None
    if len(_DEVICE.findall(bare)) != len(_DEVICE_OK.findall(bare)):
        return None
    idents = set(_IDENT.findall(bare))
    if idents & _BINDS_VALUES:  # a comprehension may bind a map's values (two-variable forms)
        return None
    return frozenset(names | idents)


def content_key(driver: str, device: Device, names: frozenset[str]) -> tuple[object, ...]:
    """As published (a driver writes its devices' maps in one order; another order only shares less): every
    key, every attribute's type, and the values of the names read (a qualified name's identifier is what
    follows its domain)."""
    # (values picked by map in C, no comprehension's frame, and capacity values only when read: a pass asks it of
    # every device of every node)
    attributes, capacity = device.attributes, device.capacity
    akeys, avalues = tuple(attributes), tuple(attributes.values())
    ckeys = tuple(capacity)
    cread = _read(ckeys, names)
    return (driver, device.allow_multiple, akeys, tuple(map(type, avalues)),
            tuple(map(avalues.__getitem__, _read(akeys, names))), ckeys,
            tuple(map(str, map(tuple(capacity.values()).__getitem__, cread))) if cread else ())


@functools.lru_cache(maxsize=4096)
def _read(keys: tuple[str, ...], names: frozenset[str]) -> tuple[int, ...]:
    """The positions of the keys whose values an expression reading `names` may read."""
    return tuple(i for i, n in enumerate(keys) if n in names or ("/" in n and n.partition("/")[2] in names))
