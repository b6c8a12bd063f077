"""The drains in progress, kept in the State: what the actuator reported folded in (`fold`), and the nodes left
cordoned by a drain the State does not hold, to give back (`orphans`). Pure.

The actuator begins, carries on and ends drains and reports what it did in the next Snapshot (`Acted`); only the
decision writes them into the State. The durable record across a restart is the node's disrupting taint: a new
process starts with no drains, plans a tainted node first among the removable ones (`scaledown`), and gives back
the ones it does not drain again.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from scaler.core.model import keys
from scaler.core.model.drain import DrainState
from scaler.core.planning.snapshot import Acted, Snapshot
from scaler.core.planning.state import State


def carried(drains: Mapping[str, DrainState], acted: Acted) -> dict[str, DrainState]:
    """The drains in progress once the actuator has acted: those it began or changed in, those that ended out;
    none once it lost the lease (the new leader gives their nodes back)."""
    if acted.forgot:
        return {}
    out = {**drains, **acted.drains}
    for name in acted.ended:
        out.pop(name, None)
    return out


def fold(snapshot: Snapshot, state: State) -> None:
    """What the actuator reported into `state` (a copy the pass owns): its drains, and the nodes it removed, kept
    until they leave the cluster (as a fresh Node list says)."""
    acted = snapshot.acted
    state.drains = carried(state.drains, acted)
    removed = {} if acted.forgot else {**state.removed, **acted.removed}
    if snapshot.fresh:
        names = {n.name for n in snapshot.nodes}
        removed = {n: at for n, at in removed.items() if n in names}
    state.removed = removed


def orphans(snapshot: Snapshot, state: State, draining: Collection[str]) -> list[str]:
    """Nodes carrying the disrupting taint that neither a drain of the State nor this pass's (`draining`) holds and
    whose instance was not removed: an earlier process's (it stopped, or lost the lease); on a fresh Node list
    only. The actuator uncordons each whose instance a pool still holds."""
    if not snapshot.fresh:
        return []
    return [n.name for n in snapshot.nodes
            if n.name not in state.drains and n.name not in state.removed and n.name not in draining
            and any(t.key == keys.TAINT_DISRUPTING for t in n.taints)]
