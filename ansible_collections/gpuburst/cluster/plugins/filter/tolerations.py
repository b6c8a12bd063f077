# Copyright: gpuburst maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""`pool_tolerations`: the tolerations a DaemonSet needs to run on every node of the given pools.

A pool lists its nodes' taints as `key=value:Effect` strings (how kubectl, the kubelet flag and the
gpuburst Pulumi stack write them) or as Kubernetes taint mappings. The result tolerates each
(key, effect) once with `operator: Exists`, so that one DaemonSet covers pools whose taints differ
only in value (a min-GPUs taint of 2 on one pool and 8 on another).
"""

from __future__ import annotations

import re
from typing import Any

from ansible.errors import AnsibleFilterError

EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
OPERATORS = ("Exists", "Equal")
# A Kubernetes label / taint key: an optional DNS-subdomain prefix and a name of up to 63 characters.
_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


def _taint(pool: str, taint: Any) -> tuple[str, str]:
    if isinstance(taint, str):
        body, sep, effect = taint.rpartition(":")
        key = body.partition("=")[0]
        if not sep or not key:
            raise AnsibleFilterError(f"pool {pool!r}: taint {taint!r} must look like key=value:Effect")
    elif isinstance(taint, dict) and taint.get("key"):
        key, effect = str(taint["key"]), str(taint.get("effect", ""))
    else:
        raise AnsibleFilterError(f"pool {pool!r}: taint {taint!r} is neither key=value:Effect nor a mapping with a key")
    if not _KEY.match(key):
        raise AnsibleFilterError(f"pool {pool!r}: taint {taint!r}: {key!r} is not a valid taint key")
    if effect not in EFFECTS:
        raise AnsibleFilterError(f"pool {pool!r}: taint {taint!r} has effect {effect!r}, not one of {', '.join(EFFECTS)}")
    return key, effect


def pool_tolerations(pools: Any, extra: Any = None) -> list[dict[str, str]]:
    if not isinstance(pools, list):
        raise AnsibleFilterError(f"pools must be a list of {{name, taints}} mappings, not {type(pools).__name__}")
    seen: set[tuple[str, str]] = set()
    out: list[dict[str, str]] = []
    for index, pool in enumerate(pools):
        if not isinstance(pool, dict):
            raise AnsibleFilterError(f"pools[{index}] must be a mapping with name and taints")
        name = str(pool.get("name", f"pools[{index}]"))
        taints = pool.get("taints") or []
        if not isinstance(taints, list):
            raise AnsibleFilterError(f"pool {name!r}: taints must be a list, not {type(taints).__name__}")
        for taint in taints:
            key, effect = _taint(name, taint)
            if (key, effect) not in seen:
                seen.add((key, effect))
                out.append({"key": key, "operator": "Exists", "effect": effect})
    if extra is not None and not isinstance(extra, list):
        raise AnsibleFilterError(f"extra tolerations must be a list of mappings, not {type(extra).__name__}")
    for index, toleration in enumerate(extra or []):
        _check_toleration(index, toleration)
        if toleration not in out:
            out.append(toleration)
    return out


def _check_toleration(index: int, toleration: Any) -> None:
    """An extra toleration as Kubernetes would accept it in the DaemonSet."""
    where = f"extra tolerations[{index}]"
    if not isinstance(toleration, dict):
        raise AnsibleFilterError(f"{where}: {toleration!r} must be a mapping (key, operator, value, effect)")
    unknown = sorted(set(toleration) - {"key", "operator", "value", "effect", "tolerationSeconds"})
    if unknown:
        raise AnsibleFilterError(f"{where}: unknown fields {unknown}")
    operator = toleration.get("operator", "Equal")
    if operator not in OPERATORS:
        raise AnsibleFilterError(f"{where}.operator: {operator!r} is not one of {', '.join(OPERATORS)}")
    effect = toleration.get("effect", "")
    if effect and effect not in EFFECTS:
        raise AnsibleFilterError(f"{where}.effect: {effect!r} is not one of {', '.join(EFFECTS)}")
    key = toleration.get("key", "")
    if key and not (isinstance(key, str) and _KEY.match(key)):
        raise AnsibleFilterError(f"{where}.key: {key!r} is not a valid taint key")
    if not key and operator != "Exists":
        raise AnsibleFilterError(f"{where}: an empty key needs operator Exists")
    if operator == "Exists" and toleration.get("value"):
        raise AnsibleFilterError(f"{where}.value: must be empty with operator Exists")


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"pool_tolerations": pool_tolerations}
