"""One pass, the same for `scaler run` (`scaler.loop.Runtime`) and the simulator (`scaler.sim.engine`):

observe: the cluster (`ports.Observer`), the pools and their instances (`PoolProvider.observe`), the
         cloud's interruption notices, what the actuator did since the last decision (`Acted`) -> Snapshot
decide:  `scaler.core.planning.decide.decide` (pure): the pods, the ProvisioningRequests in play and the
         CapacityBuffers planned together -> Plan (with the requests' conditions), next State
act:     the actuator (`scaler.actuator.Actuator`, or the dry run's `Recorder`) carries the Plan out
         and writes the conditions

The Reconciler keeps what outlives a pass: the State the decision returned (the drains in progress and the
notices it has not decided on among it) and the memo of what the passes worked out (never changes a plan). Leadership,
retries after failed passes, Events and metrics are the Runtime's; the clock is the caller's.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from scaler.core.config.settings import ScalerConfig
from scaler.core.model.interruption import Interruption
from scaler.core.model.provreq import ProvisioningRequest
from scaler.core.planning.decide import decide
from scaler.core.planning.decisions import Plan
from scaler.core.planning.memo import Memo
from scaler.core.planning.snapshot import Snapshot
from scaler.core.planning.state import State
from scaler.metrics import Metrics
from scaler.ports import Acting, ClusterView, KubeError, Observer, Planner, PoolProvider
from scaler.providers.base import ProviderError

log = logging.getLogger("scaler.reconcile")


@dataclass(slots=True)
class Pass:
    """What one pass saw and decided."""

    plan: Plan
    snapshot: Snapshot
    view: ClusterView
    requests: list[ProvisioningRequest] = field(default_factory=list)


class Reconciler:
    def __init__(self, config: ScalerConfig, observer: Observer, provider: PoolProvider, actuator: Acting, *,
                 planner: Planner = decide, metrics: Metrics | None = None) -> None:
        self.config = config
        self.observer = observer
        self.provider = provider
        self.actuator = actuator
        self.planner = planner
        self.metrics = metrics or Metrics()
        self.state = State()
        self.memo = Memo()  # what a pass works out that the next may reuse (plans are the same without it)

    def run(self, now: float) -> Pass:
        """Observe, decide, act. A ProviderError from observing the pools ends the pass before anything
        is decided (the caller retries); LostLease from the actuator stops it where it is."""
        with no_cycle_collection():
            return self._run(now)

    def _run(self, now: float) -> Pass:
        pools = self.provider.observe(now)
        view = self.observer.observe(self.provider.pool_of)
        notices = self._read_notices() if self.actuator.live else []
        snapshot = Snapshot(now=now, pending=view.pending, nodes=view.nodes, pools=pools, pdbs=view.pdbs,
                            fresh=view.fresh, pdbs_fresh=view.pdbs_fresh, interruptions=notices,
                            acted=self.actuator.report(), storage=view.storage, namespaces=view.namespaces,
                            dra=view.dra, buffers=view.buffers,
                            pod_groups=view.pod_groups,
                            requests=self._read_requests() if view.fresh else [])
        self.memo.next_pass()
        requests = snapshot.requests
        plan, self.state = self.planner(snapshot, self.state, self.config, self.memo)
        self.actuator.act(plan, snapshot)
        self.actuator.answer(requests, plan.requests)
        self.actuator.write_buffers(view.buffers, plan.buffers)
        return Pass(plan, snapshot, view, requests)

    def _read_notices(self) -> list[Interruption]:
        try:
            return self.provider.interruptions()
        except ProviderError as err:  # counted by the provider (scaler.providers.counted)
            log.warning("reading interruption notices failed: %s", err)
            return []

    def _read_requests(self) -> list[ProvisioningRequest]:
        """The ProvisioningRequests still in play (on stale pod data none: bookings would be computed
        against pods that may have moved)."""
        try:
            return [r for r in self.observer.provisioning_requests() if not r.done]
        except KubeError as err:
            self.metrics.kube_errors.labels("provisioningrequests").inc()
            log.warning("reading ProvisioningRequests failed: %s", err)
            return []


@contextmanager
def no_cycle_collection() -> Iterator[None]:
    """The cyclic garbage collector waits while a pass runs: the objects a pass makes are freed by their
    reference counts as it goes, and on a large cluster the collector's full sweeps over the cache's
    objects (100,000 pods) cost a quarter of the pass. Cycles made meanwhile are collected after it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
