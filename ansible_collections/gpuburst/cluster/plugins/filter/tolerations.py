# Copyright: gpuburst maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""`pool_tolerations`: the tolerations a DaemonSet needs to run on every node of the given pools.

A pool lists its nodes' taints as `key=value:Effect` strings (how kubectl, the kubelet flag and the
gpuburst Pulumi stack write them) or as Kubernetes taint mappings. The result tolerates each
(key, effect) once with `operator: Exists`, so that one DaemonSet covers pools whose taints differ
only in value (a min-GPUs taint of 2 on one pool and 8 on another).
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError

EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


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
        for taint in pool.get("taints") or []:
            key, effect = _taint(name, taint)
            if (key, effect) not in seen:
                seen.add((key, effect))
                out.append({"key": key, "operator": "Exists", "effect": effect})
    for toleration in extra or []:
        if toleration not in out:
            out.append(toleration)
    return out


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"pool_tolerations": pool_tolerations}
