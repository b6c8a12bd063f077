"""`simulate --buffer GPUS`: a CapacityBuffer replayed with the trace (issue 27), and what it bought.

The buffer is what a user would declare for the trace's commonest job: GPUS replicas of a 1-GPU pod of
the trace's shape (scaler.sim.trace.job_pods), as one `podTemplateRef` buffer. The planner keeps that room
ready with placeholder pods (scaler.core.planning.buffers); the report adds the pending time of the jobs
that fit the buffer (each of their pods fits one placeholder, and they have no more pods than it has
placeholders): what the buffer is for. The buffer is deleted when the last job has ended, so the run ends
as one without it does (the pools back at their minimum) and the two bills compare.
"""

from __future__ import annotations

from typing import Any

from scaler.core.config.settings import ScalerConfig
from scaler.core.model.buffers import CapacityBuffer
from scaler.core.model.resources import fits
from scaler.core.planning.buffers import MAX_PLACEHOLDERS
from scaler.sim.records import JobRun
from scaler.sim.report import percentile
from scaler.sim.trace import SIM_NAMESPACE, Job, job_pods

BUFFER_NAME = "gpus"


def gpu_buffer(gpus: int, config: ScalerConfig, scheduler_name: str) -> list[CapacityBuffer]:
    """`--buffer GPUS` as a CapacityBuffer (none for 0); ValueError for a buffer the planner would cap
    (MAX_PLACEHOLDERS) or that no pool could hold a placeholder of: a run that would not do what it says."""
    if gpus <= 0:
        return []
    if gpus > MAX_PLACEHOLDERS:
        raise ValueError(f"at most {MAX_PLACEHOLDERS} placeholders a CapacityBuffer (the planner keeps no more)")
    template = job_pods(Job(job_id="buffer", submit_s=0.0, gpus=1, duration_s=0.0), config, scheduler_name)[0]
    if not any(p.gpus and p.min_pod_gpus <= 1 and fits(template.requests, p.capacity()) for p in config.pools):
        raise ValueError("no pool's node can hold a 1-GPU placeholder (min_pod_gpus above 1, or too small), so "
                         "the buffer would change nothing")
    return [CapacityBuffer(namespace=SIM_NAMESPACE, name=BUFFER_NAME, uid="buffer", template_ref="buffer-1gpu",
                           template=template, template_generation=1, replicas=gpus)]


def fits_buffer(run: JobRun, buf: CapacityBuffer) -> bool:
    t = buf.template
    return t is not None and buf.replicas is not None and 0 < len(run.pods) <= buf.replicas and all(
        fits(p.requests, t.requests) for p in run.pods)


def buffer_report(jobs: list[JobRun], buffers: list[CapacityBuffer]) -> dict[str, Any] | None:
    if not buffers:
        return None
    buf = buffers[0]
    fit = [r for r in jobs if fits_buffer(r, buf)]
    waits = [max(r.first_start - r.job.submit_s, 0.0) for r in fit if r.first_start is not None]
    return {"name": buf.key, "placeholders": buf.replicas,
            "template": {k: v for k, v in (buf.template.requests.items() if buf.template else ())},
            "jobs_that_fit": len(fit), "pending_p50_s": percentile(waits, 0.5),
            "pending_p95_s": percentile(waits, 0.95), "pending_max_s": max(waits, default=0.0)}


def buffer_line(section: dict[str, Any]) -> str:
    """The summary's line: the pending time of the jobs that fit a placeholder."""
    return (f"  buffer: {section['placeholders']} placeholders of 1 GPU; {section['jobs_that_fit']} jobs fit one, "
            f"pending p50 {section['pending_p50_s']:g} s, p95 {section['pending_p95_s']:g} s, "
            f"max {section['pending_max_s']:g} s")
