"""One pass of decisions: Snapshot + State + config -> Plan + next State. Pure.

Implemented in state.py (what outlives a pass), scaleup.py and scaledown.py; this module is the
entry point the loop and the simulator call, so its signature is the contract between them.
See docs/planner.md.
"""

from __future__ import annotations

from scaler.core.config import ScalerConfig
from scaler.core.scaledown import plan_scale_down
from scaler.core.scaleup import plan_scale_up
from scaler.core.snapshot import Plan, Snapshot, State
from scaler.core.state import advance, record_scale_ups


def plan(snapshot: Snapshot, state: State, config: ScalerConfig) -> tuple[Plan, State]:
    """Decide scale-ups, size resets and scale-downs for one pass. The input state is not changed."""
    adv = advance(snapshot, state, config)
    up = plan_scale_up(snapshot, config, adv)
    record_scale_ups(adv.state, up.scale_ups, snapshot.now, config)
    down = plan_scale_down(snapshot, config, adv, up)
    result = Plan(
        now=snapshot.now,
        scale_ups=up.scale_ups,
        resets=adv.resets,
        scale_downs=down.scale_downs,
        verdicts=up.verdicts,
        unneeded=down.unneeded,
        notes=[*adv.notes, *up.notes, *down.notes],
    )
    return result, adv.state
