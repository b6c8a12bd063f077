"""CapacityBuffers (autoscaling.x-k8s.io/v1beta1, the buffer API cluster-autoscaler serves): room kept ready
for N pods of a template, as placeholder pods the planner packs like real ones. Pure.

A buffer names its pod shape by `spec.podTemplateRef` (a PodTemplate of its namespace) or `spec.scalableRef`
(a Deployment, ReplicaSet or StatefulSet: its pod template and its replicas). How many placeholders, as
upstream's buffer controller computes it (cluster-autoscaler/capacitybuffer/translators/replicas.go): the
larger of `replicas` and `percentage` of the scalable object's replicas (rounded down), whichever are set,
then at most as many as fit in `limits` (each resource of the limits over the template's request); with
neither `replicas` nor `percentage`, as many as fit in the limits. Only the
`buffer.x-k8s.io/active-capacity` strategy is served; a buffer of another strategy is left alone.

The placeholders are never created in the cluster. `decide` adds them to the pending pods at a priority below
any real pod's (kube-scheduler's queue order: real pending pods are placed first and always win the room),
so they land on free room of the nodes that are up or coming, or ask for new nodes within the pools' max
and the cluster's limits. A node a placeholder sits on is not unneeded (scale-down leaves it), and nothing
is ever evicted for a placeholder: they are never on a node, so no drain moves one. When a real pod takes
the room, the next pass finds the placeholder no longer fits there and asks for more.

Status, as upstream's controller and autoscaler write it (gpuburst is both): `replicas`, `podTemplateRef`,
`podTemplateGeneration`, `provisioningStrategy`, and the conditions ReadyForProvisioning (True,
AttributesSetSuccessfully; False, error, with the message) and Provisioning (True, FakePodsInjected; False,
NotReadyForProvisioning or BufferIsEmpty).
"""

from __future__ import annotations

import dataclasses

from scaler.core.model import keys
from scaler.core.model.buffers import BufferStatus, CapacityBuffer
from scaler.core.model.conditions import set_condition as _set
from scaler.core.model.objects import Pod
from scaler.core.planning.decisions import BufferOutcome, PodVerdict
from scaler.core.planning.injected import Injected

READY, PROVISIONING = "ReadyForProvisioning", "Provisioning"
READY_REASON, ERROR_REASON = "AttributesSetSuccessfully", "error"
INJECTED, NOT_READY, EMPTY = "FakePodsInjected", "NotReadyForProvisioning", "BufferIsEmpty"
# Below every PriorityClass value (int32): the scheduler's queue, and the planner's, place real pods first.
PLACEHOLDER_PRIORITY = -(2**31) - 1
MAX_PLACEHOLDERS = 10_000  # per buffer: each is a pod every pass plans; a typo of a few zeros must not stall it


class BufferError(ValueError):
    """Why a buffer cannot be served, naming the field."""


def _check_spec(buf: CapacityBuffer) -> None:
    if (buf.template_ref is None) == (buf.scalable is None):
        raise BufferError("spec: exactly one of podTemplateRef and scalableRef must be set")
    for name, value in (("replicas", buf.replicas), ("percentage", buf.percentage)):
        if value is not None and value < 0:
            raise BufferError(f"spec.{name}: {value} is negative (at least 0)")
    if buf.percentage is not None and buf.scalable is None:
        raise BufferError("spec.percentage: needs spec.scalableRef (a percentage of its replicas)")
    if buf.replicas is None and buf.percentage is None and buf.limits is None:
        raise BufferError("spec: none of replicas, percentage and limits is set")
    if buf.problem:
        raise BufferError(buf.problem)
    if buf.template is None:
        ref = f"PodTemplate {buf.template_ref}" if buf.template_ref is not None else \
            f"{buf.scalable.kind} {buf.scalable.name}" if buf.scalable else "template"
        raise BufferError(f"{ref} not found in namespace {buf.namespace}")


def desired(buf: CapacityBuffer) -> int:
    """How many placeholders the buffer asks for (upstream's rule, module docstring); BufferError why not."""
    _check_spec(buf)
    assert buf.template is not None  # _check_spec
    wanted: int | None = None
    if buf.replicas is not None:
        wanted = buf.replicas
    if buf.percentage is not None:
        if buf.scalable_replicas is None:
            raise BufferError(f"spec.percentage: the replicas of {buf.scalable} are not known")
        wanted = max(wanted or 0, buf.percentage * buf.scalable_replicas // 100)
    if buf.limits is not None:
        asked = {r: v for r, v in buf.template.requests.items() if v > 0 and r in buf.limits}
        if not asked:
            raise BufferError(f"spec.limits: none of {sorted(buf.limits)} is requested by the pod template")
        room = min(max(0, buf.limits[r]) // v for r, v in asked.items())
        wanted = room if wanted is None else min(wanted, room)
    assert wanted is not None  # _check_spec: one of the three is set
    if wanted > MAX_PLACEHOLDERS:
        raise BufferError(f"spec: {wanted} replicas, more than the {MAX_PLACEHOLDERS} gpuburst keeps for one buffer")
    return wanted


def placeholders(buf: CapacityBuffer, count: int) -> list[Pod]:
    """The buffer's placeholder pods, named as upstream names its fake pods."""
    t = buf.template
    assert t is not None
    return [dataclasses.replace(
        t, name=f"capacity-buffer-{buf.name}-{i}", namespace=buf.namespace, uid=f"{buf.uid or buf.key}-{i}",
        node_name=None, phase="Pending", owner_kind=None, priority=PLACEHOLDER_PRIORITY, created_at=0.0,
        annotations={**t.annotations, keys.ANNOTATION_BUFFER_POD_TYPE: keys.BUFFER_POD_TYPE,
                     keys.ANNOTATION_BUFFER: buf.name}) for i in range(1, count + 1)]


def inject(buffers: list[CapacityBuffer], out: Injected) -> None:
    """Every served buffer's placeholders (`out.placeholders`, planned after the real pods), their keys and
    count, or the error that stopped it."""
    for buf in buffers:
        if not buf.served:
            continue
        try:
            count = desired(buf)
        except BufferError as err:
            out.errors[buf.key] = str(err)
            continue
        pods = placeholders(buf, count)
        out.counts[buf.key] = count
        out.held[buf.key] = [p.key for p in pods]
        out.placeholders.extend(pods)


def outcomes(buffers: list[CapacityBuffer], injected: Injected, verdicts: dict[str, PodVerdict],
             now: float) -> dict[str, BufferOutcome]:
    """Each served buffer's status and placements; its placeholders' verdicts are taken out of `verdicts`
    (they are no pods of the cluster: no Event, no metric, no log line is about them)."""
    out: dict[str, BufferOutcome] = {}
    for buf in buffers:
        if not buf.served:
            continue
        conds = dict(buf.status.conditions) if buf.status is not None else {}
        error = injected.errors.get(buf.key, "")
        placed = {}
        if error:
            _set(conds, READY, "False", ERROR_REASON, error, now)
            _set(conds, PROVISIONING, "False", NOT_READY, "CapacityBuffer is not ready for provisioning", now)
            count: int | None = None
        else:
            count = injected.counts[buf.key]
            for key in injected.held[buf.key]:
                v = verdicts.pop(key, None)
                if v is not None:
                    placed[key.split("/", 1)[1]] = v
            _set(conds, READY, "True", READY_REASON, "ready", now)
            if count == 0:
                _set(conds, PROVISIONING, "False", EMPTY, "CapacityBuffer has zero replicas", now)
            else:
                _set(conds, PROVISIONING, "True", INJECTED, f"{count} placeholder pods planned by gpuburst", now)
        status = BufferStatus(count, None if error else buf.template_ref,
                              None if error else buf.template_generation, buf.strategy, conds)
        out[buf.key] = BufferOutcome(status, error, placed)
    return out
