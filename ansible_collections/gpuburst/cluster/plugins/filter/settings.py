# Copyright: gpuburst maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""`settings_as_declared`: a role's variables are of the kind its meta/argument_specs.yml declares, as set.

Ansible checks a role's variables against its argument spec on a converted copy and hands the role the
values as they were set: a list given for a `str` option passes as its printed form (a node label key
"['a', 'b']"), a string for a `list` option as its comma-split (the role then loops over the string), a
"k=v" string for a `dict` option as its parsed mapping. Each role's first task calls this filter on its
spec's options and their values; it refuses the first of those in one line naming the role and the variable.
Numbers and booleans are left to the spec: `-e name=value` sets every variable as text, and the roles read
those through Ansible's `bool` and `int` filters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible.errors import AnsibleFilterError

_TEXT = ("str", "path")


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, str):
        return "text"
    if isinstance(value, Sequence):
        return "a list"
    return f"a {type(value).__name__}"


def settings_as_declared(options: Any, values: Any, role: str) -> bool:
    """True when each value (in the order of `options`, the spec's option mapping) is of its declared kind."""
    if not isinstance(options, Mapping) or not isinstance(values, Sequence) or len(options) != len(values):
        raise AnsibleFilterError(f"{role}: settings_as_declared needs the spec's options and one value for each")
    for (name, option), value in zip(options.items(), values, strict=True):
        declared = option.get("type", "str") if isinstance(option, Mapping) else "str"
        kind = _kind(value)
        if declared in _TEXT and kind in ("a list", "a mapping"):
            wanted = "text"
        elif declared == "list" and kind != "a list":
            wanted = "a list"
        elif declared == "dict" and kind != "a mapping":
            wanted = "a mapping"
        else:
            continue
        how = "one value" if wanted == "text" else f"YAML or JSON, -e '{{\"{name}\": ...}}'"
        got = kind if value is None else f"{kind}: {value!r}"
        raise AnsibleFilterError(f"{role}: {name} must be {wanted} (its argument spec says type {declared}), not "
                                 f"{got} (set it as {how})")
    return True


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"settings_as_declared": settings_as_declared}
