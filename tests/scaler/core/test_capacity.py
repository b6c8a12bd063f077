"""The capacity a pass places pods on (`scaler.core.planning.capacity`): nodes that differ only in a taint or
a label a pod looks at are told apart, however the pass builds their bins."""

from __future__ import annotations

import pytest
from core_builders import example_config, node_of, plan, pod, snapshot

from scaler.core.model.objects import Taint
from scaler.core.planning.memo import Memo
from scaler.core.planning.state import State

CFG = example_config()
DEDICATED = Taint("example.com/dedicated", "x", "NoSchedule")


@pytest.mark.parametrize("tainted_first", [True, False])
@pytest.mark.parametrize("kept", [False, True])
def test_a_taint_keeps_a_pod_off_the_one_node_of_its_pool_that_has_it(tainted_first: bool, kept: bool) -> None:
    """Two nodes of a pool, equal but for a taint on one: a pod that does not tolerate it goes on the other,
    whichever comes first; with the other full, it asks for a new node (`kept`: passes with the memo, the
    taint moving from one node to the other between them)."""
    memo = Memo() if kept else None
    full = node_of(CFG, "cpu-spot", "full", [pod(f"r{i}", cpu="2") for i in range(3)])  # 8 vCPU, ~1.9 left
    roomy = node_of(CFG, "cpu-spot", "roomy")
    for name, tainted, outcome in (("roomy", "roomy", "scale-up"), ("full", "full", "fits-existing")):
        nodes = [full, roomy]
        for n in nodes:
            n.taints = tuple(t for t in n.taints if t != DEDICATED) + ((DEDICATED,) if n.name == tainted else ())
            n.version = 0 if memo is None else 1 + (n.name == tainted)
        nodes.sort(key=lambda n: n.name != tainted if tainted_first else n.name == tainted)
        if memo is not None:
            memo.next_pass()
        snap = snapshot(CFG, [pod("p", cpu="3")], nodes, now=1000.0)
        result, _ = plan(snap, State(), CFG, memo)
        verdict = result.verdicts["default/p"]
        assert verdict.outcome == outcome, (name, verdict)
        if outcome == "fits-existing":
            assert verdict.node == "roomy"
