"""CapacityBuffers through the planner: placeholders packed after the real pods, new nodes bought for them
within the pools' max, nodes they sit on kept from scale-down, bad buffers answered in their status."""

from __future__ import annotations

import dataclasses

import pytest
from core_builders import config, node_of, pod, snapshot

from scaler.core.model.buffers import CapacityBuffer, ScalableRef
from scaler.core.model.resources import parse_resources
from scaler.core.planning.buffers import desired
from scaler.core.planning.decide import decide
from scaler.core.planning.state import State

POOLS = [
    {"name": "system", "role": "system", "instance_types": ["m6i.large"], "zones": ["us-east-1a"], "min": 1,
     "max": 2},
    {"name": "gpu1", "instance_types": ["g6.xlarge"], "zones": ["us-east-1a"], "max": 4},
]
CPU_TEMPLATE = pod("t", cpu="1")


def buffer(replicas: int | None = 2, **kw: object) -> CapacityBuffer:
    fields: dict[str, object] = {"template_ref": "gpu1", "template": pod("t", cpu="2", memory="8Gi", gpu=1),
                                 "template_generation": 3, **kw}
    return CapacityBuffer(namespace="ml", name="ready", replicas=replicas, **fields)  # type: ignore[arg-type]


# Upstream's table (kubernetes/autoscaler cluster-autoscaler/capacitybuffer/translators/replicas_test.go,
# TestGetBufferNumberOfPods and TestReplicasFromPercentage): a template of 1 cpu.
@pytest.mark.parametrize(("replicas", "percentage", "limits", "scalable", "expected"), [
    (5, None, None, None, 5),  # only replicas
    (None, 200, None, 10, 20),  # only percentage
    (25, 200, None, 10, 25),  # replicas larger
    (15, 200, None, 10, 20),  # percentage larger
    (25, None, "20", None, 20),  # limits smaller
    (15, None, "20", None, 15),  # replicas smaller
    (None, 250, "20", 10, 20),  # percentage, limits smaller
    (None, None, "20", None, 20),  # only limits
    (None, 50, None, 10, 5),
    (None, 0, None, 10, 0),
    (None, 50, None, 0, 0),
    (None, 33, None, 10, 3),  # rounded down
])
def test_desired_replicas_as_upstream(replicas: int | None, percentage: int | None, limits: str | None,
                                      scalable: int | None, expected: int) -> None:
    buf = CapacityBuffer(namespace="ml", name="b", replicas=replicas, percentage=percentage,
                         limits=parse_resources({"cpu": limits}) if limits else None, template=CPU_TEMPLATE,
                         **({"scalable": ScalableRef("Deployment", "web"), "scalable_replicas": scalable}
                            if percentage is not None else {"template_ref": "t"}))  # type: ignore[arg-type]
    assert desired(buf) == expected


def test_placeholders_buy_nodes_and_stay_out_of_the_pods_verdicts() -> None:
    cfg = config(POOLS)
    snap = snapshot(cfg, [])
    snap.buffers = [buffer(2)]
    result, _ = decide(snap, State(), cfg)
    assert [(u.pool, u.count) for u in result.scale_ups] == [("gpu1", 2)]
    assert result.verdicts == {}  # no Event, metric or log line about pods that do not exist
    out = result.buffers["ml/ready"]
    assert out.where() == {f"capacity-buffer-ready-{i}": "a new gpu1 node (scale-up)" for i in (1, 2)}
    conds = {k: (c.status, c.reason) for k, c in out.status.conditions.items()}
    assert conds == {"ReadyForProvisioning": ("True", "AttributesSetSuccessfully"),
                     "Provisioning": ("True", "FakePodsInjected")}
    assert (out.status.replicas, out.status.template_ref, out.status.template_generation) == (2, "gpu1", 3)


def test_a_real_pending_pod_wins_the_free_room_and_the_buffer_asks_for_more() -> None:
    cfg = config(POOLS)
    node = node_of(cfg, "gpu1", "n1")
    real = dataclasses.replace(pod("job", cpu="2", memory="8Gi", gpu=1), created_at=999.0)
    snap = snapshot(cfg, [real], [node])
    snap.buffers = [buffer(1)]
    result, _ = decide(snap, State(), cfg)
    assert result.verdicts["default/job"].node == "n1"
    assert result.buffers["ml/ready"].where() == {"capacity-buffer-ready-1": "a new gpu1 node (scale-up)"}
    assert [(u.pool, u.count) for u in result.scale_ups] == [("gpu1", 1)]


def test_a_node_holding_only_a_placeholder_is_not_idle() -> None:
    cfg = config(POOLS)
    removed = {}
    for buffers in ([], [buffer(1)]):
        state = State()
        for now in (1000.0, 2000.0):  # empty for longer than the unneeded time
            snap = snapshot(cfg, [], [node_of(cfg, "gpu1", "n1")], now=now)
            snap.buffers = buffers
            result, state = decide(snap, state, cfg)
        removed[len(buffers)] = [d.node for d in result.scale_downs]
    assert removed == {0: ["n1"], 1: []}
    assert result.buffers["ml/ready"].where() == {"capacity-buffer-ready-1": "node n1"}
    assert result.scale_ups == [] and result.unneeded == {}


def test_placeholders_never_evict_and_stop_at_the_pools_max() -> None:
    cfg = config(POOLS)
    busy = [node_of(cfg, "gpu1", f"n{i}", [pod(f"run{i}", cpu="2", gpu=1, node=f"n{i}")]) for i in range(3)]
    snap = snapshot(cfg, [], busy)
    snap.buffers = [buffer(3)]
    result, _ = decide(snap, State(), cfg)
    assert result.scale_downs == []
    assert [(u.pool, u.count, u.new_desired) for u in result.scale_ups] == [("gpu1", 1, 4)]  # max 4
    where = result.buffers["ml/ready"].where()
    assert sorted(where.values())[0] == "a new gpu1 node (scale-up)"
    assert sum(w.startswith("no room") for w in where.values()) == 2


@pytest.mark.parametrize(("buf", "message"), [
    (buffer(2, template=None), "PodTemplate gpu1 not found in namespace ml"),
    (buffer(-1), "spec.replicas: -1 is negative (at least 0)"),
    (buffer(None, percentage=-5, template_ref=None, scalable=ScalableRef("Deployment", "web"), scalable_replicas=4),
     "spec.percentage: -5 is negative (at least 0)"),
    (buffer(None), "spec: none of replicas, percentage and limits is set"),
    (buffer(100_000), "spec: 100000 replicas, more than the 10000 gpuburst keeps for one buffer"),
    (buffer(2, scalable=ScalableRef("Deployment", "web")), "spec: exactly one of podTemplateRef and scalableRef"),
])
def test_a_bad_buffer_is_answered_in_its_status_and_the_pass_goes_on(buf: CapacityBuffer, message: str) -> None:
    cfg = config(POOLS)
    snap = snapshot(cfg, [pod("job", cpu="2", memory="8Gi", gpu=1)])
    snap.buffers = [buf, buffer(1, template_ref="ok")]
    snap.buffers[1].name = "ok"
    result, _ = decide(snap, State(), cfg)
    out = result.buffers[buf.key]
    assert out.error.startswith(message)
    ready, prov = out.status.conditions["ReadyForProvisioning"], out.status.conditions["Provisioning"]
    assert (ready.status, ready.reason, ready.message) == ("False", "error", out.error)
    assert (prov.status, prov.reason) == ("False", "NotReadyForProvisioning")
    assert out.placed == {} and out.status.replicas is None
    assert [(u.pool, u.count) for u in result.scale_ups] == [("gpu1", 2)]  # the real pod and the good buffer


def test_zero_replicas_is_an_empty_buffer() -> None:
    cfg = config(POOLS)
    snap = snapshot(cfg, [])
    snap.buffers = [buffer(0)]
    result, _ = decide(snap, State(), cfg)
    prov = result.buffers["ml/ready"].status.conditions["Provisioning"]
    assert (prov.status, prov.reason) == ("False", "BufferIsEmpty") and result.scale_ups == []
