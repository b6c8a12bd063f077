"""Why the claims of a pod cannot be allocated on a node, in one line for `explain`.

Upstream says only "cannot allocate all claims"; this names the first request that cannot be met
even alone (too few matching devices free on the node), or says that the requests only fail together
(constraints, shared counters, devices wanted by two requests).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scaler.core.model.dra import ALL, DeviceID

if TYPE_CHECKING:
    from scaler.core.dra.search import Search, _ReqData


def explain(search: Search) -> str:
    if not search.claims:
        return "no claims"
    updating = [str(p) for p in search.pools if p.incomplete]
    suffix = f" (pools being updated: {', '.join(updating)})" if updating else ""
    for (ci, ri, si), data in sorted(search.req.items()):
        request = search.claims[ci].spec.requests[ri]
        if request.first_available and si > 0:
            continue  # judged with its first alternative below
        alternatives = ([search.req[(ci, ri, i)] for i in range(len(request.first_available))]
                        if request.first_available else [data])
        shortfalls = [_shortfall(search, (ci, ri, i), d) for i, d in enumerate(alternatives)]
        if all(shortfalls):
            claim = search.claims[ci]
            return f"claim {claim.key}: request {request.name}: {'; '.join(s for s in shortfalls if s)}{suffix}"
    claims = ", ".join(c.key for c in search.claims)
    return (f"claims {claims}: each request has devices, but not all together (matchAttribute constraints, "
            f"shared counters, or the same devices wanted twice){suffix}")


def _shortfall(search: Search, key: tuple[int, int, int], data: _ReqData) -> str:
    """Empty when enough matching devices are free for this request alone, else what is missing."""
    matching = free = 0
    for pool in search.pools:
        if pool.incomplete or pool.invalid:
            continue
        for s in pool.slices:
            for d in s.devices:
                if not search.is_selectable(key, data, s, d):
                    continue
                matching += 1
                free += DeviceID(pool.driver, pool.name, d.name) not in search.src.allocated
    label = data.result_name
    cls = data.device_class.name
    if data.request.allocation_mode == ALL:
        return "" if matching else f"{label}: no device of class {cls} matches on the node"
    if free >= data.num_devices:
        return ""
    return (f"{label}: needs {data.num_devices} device(s) of class {cls}, {matching} match on the node, "
            f"{free} of them free")
