"""The planner against the real kube-scheduler, on random clusters (diffgen.py), DRA included.

    python -m tests.controlplane.scheduler_diff [--seeds 3] [--pods 170] [--gangs 8] [-v]   (make scheduler-diff)

For each seed: a control plane of its own (plane.py), the seed's nodes registered by the node agent (with
their ResourceSlices), its storage, DRA classes, templates and claims, its pods already bound. Then each
pending pod in turn, one at a time (so that a tie broken another way cannot cascade): the cluster is read
from the API server as `python -m scaler plan --snapshot` reads a `kubectl get ... -o json` List (with the pod
added as the scheduler would have marked it, Unschedulable, and the nodes dated before the provision timeout:
none is a fresh node), the planner gives its verdict; then the pod is
created and kube-scheduler binds it or marks it Unschedulable. They agree when the planner says
`fits-existing` on node N and the scheduler bound the pod to N, or to a node the planner scores equal to N
(kube-scheduler breaks ties at random); or when the planner says it fits no existing node and the scheduler
leaves it unschedulable. A pod that bound stays (the next pods see it); one that did not is deleted.
Then the seed's gangs (Workload API PodGroups), each alone: they agree when the planner finds room on the nodes
for the gang's minCount members together exactly when kube-scheduler binds at least minCount of them.

Prints a table by feature and last `agree=N disagree=M pods=K dra=D` (D: pods with ResourceClaims).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client, config
from kubernetes.client.rest import ApiException

from scaler.core.config.settings import ScalerConfig
from scaler.core.dra.extended import node_requests
from scaler.core.model.objects import Node
from scaler.core.planning.context import planning_context
from scaler.core.planning.decisions import PodVerdict
from scaler.core.planning.planner import plan
from scaler.core.planning.snapshot import Snapshot
from scaler.core.planning.state import State
from scaler.core.scheduling import scoring
from scaler.core.scheduling.filters import Cluster as FilterCluster
from scaler.core.scheduling.filters import DraState
from scaler.core.scheduling.predicates import free_resources, resource_reason, static_reason
from scaler.sim.plan_command import load_snapshot
from tests.controlplane import diffgen
from tests.controlplane.agent import NodeAgent, NodeSpec
from tests.controlplane.plane import ControlPlane

JSON = dict[str, Any]
NS = diffgen.NS
SELECTED_NODE = "volume.kubernetes.io/selected-node"

# What the planner's snapshot reads (plan_command.STORAGE_KINDS, DRA_KINDS): kind -> its collection's path.
LISTS = {
    "Node": "/api/v1/nodes", "Pod": "/api/v1/pods", "PersistentVolumeClaim": "/api/v1/persistentvolumeclaims",
    "PersistentVolume": "/api/v1/persistentvolumes", "StorageClass": "/apis/storage.k8s.io/v1/storageclasses",
    "CSINode": "/apis/storage.k8s.io/v1/csinodes", "Namespace": "/api/v1/namespaces",
    "DeviceClass": "/apis/resource.k8s.io/v1/deviceclasses",
    "ResourceClaim": "/apis/resource.k8s.io/v1/resourceclaims",
    "ResourceClaimTemplate": "/apis/resource.k8s.io/v1/resourceclaimtemplates",
    "ResourceSlice": "/apis/resource.k8s.io/v1/resourceslices",
    "DeviceTaintRule": "/apis/resource.k8s.io/v1/devicetaintrules",
}
# kind -> (the collection to create in, namespaced)
CREATE = {
    "Pod": ("/api/v1", "pods", True), "PersistentVolumeClaim": ("/api/v1", "persistentvolumeclaims", True),
    "PersistentVolume": ("/api/v1", "persistentvolumes", False),
    "StorageClass": ("/apis/storage.k8s.io/v1", "storageclasses", False),
    "DeviceClass": ("/apis/resource.k8s.io/v1", "deviceclasses", False),
    "ResourceClaim": ("/apis/resource.k8s.io/v1", "resourceclaims", True),
    "ResourceClaimTemplate": ("/apis/resource.k8s.io/v1", "resourceclaimtemplates", True),
    "DeviceTaintRule": ("/apis/resource.k8s.io/v1", "devicetaintrules", False),
}


class Api:
    """The admin's REST calls through the official client, on plain JSON (no model classes)."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api

    def call(self, method: str, path: str, body: Any = None, query: list[tuple[str, Any]] | None = None) -> JSON:
        method, url, headers, body, _ = self.api.param_serialize(
            method, path, query_params=query or [], body=body,
            header_params={"Content-Type": "application/json", "Accept": "application/json"})
        r = self.api.call_api(method, url, header_params=headers, body=body)
        data = r.read()
        if r.status >= 400:
            raise ApiException.from_response(http_resp=r, body=data.decode(errors="replace"), data=None)
        return json.loads(data) if data else {}

    def get(self, path: str) -> JSON:
        return self.call("GET", path)

    def create(self, obj: JSON) -> JSON:
        prefix, plural, namespaced = CREATE[obj["kind"]]
        ns = f"/namespaces/{obj['metadata'].get('namespace', NS)}" if namespaced else ""
        return self.call("POST", f"{prefix}{ns}/{plural}", obj)

    def delete(self, path: str) -> None:
        try:
            self.call("DELETE", path, {"gracePeriodSeconds": 0})
        except ApiException as e:
            if e.status != 404:
                raise

    def listing(self) -> JSON:
        """The cluster as `kubectl get pods,nodes,pvc,pv,...,resourceslices -A -o json` prints it."""
        items = []
        for kind, path in LISTS.items():
            for obj in self.get(path).get("items", []):
                obj["kind"] = kind
                items.append(obj)
        return {"apiVersion": "v1", "kind": "List", "items": items}


@dataclass
class Outcome:
    pod: str
    features: tuple[str, ...]
    dra: bool
    verdict: PodVerdict
    scheduled: str | None  # the node kube-scheduler bound the pod to; None: Unschedulable
    message: str  # the scheduler's Unschedulable message, or why the outcome counts as a tie
    agree: bool
    summary: str = ""


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)

    def table(self) -> str:
        rows: dict[str, Counter[str]] = {}
        for o in self.outcomes:
            for f in ("all", *o.features):
                c = rows.setdefault(f, Counter())
                c["pods"] += 1
                c["agree" if o.agree else "disagree"] += 1
                c["bound" if o.scheduled else "unschedulable"] += 1
        lines = [f"{'feature':<22}{'pods':>6}{'agree':>7}{'disagree':>9}{'bound':>7}{'unschedulable':>14}"]
        for f in ["all", *sorted(k for k in rows if k != "all")]:
            c = rows[f]
            lines.append(f"{f:<22}{c['pods']:>6}{c['agree']:>7}{c['disagree']:>9}{c['bound']:>7}"
                         f"{c['unschedulable']:>14}")
        agree = sum(o.agree for o in self.outcomes)
        lines.append(f"agree={agree} disagree={len(self.outcomes) - agree} pods={len(self.outcomes)} "
                     f"dra={sum(o.dra for o in self.outcomes)}")
        return "\n".join(lines)


def summary(pod: JSON) -> str:
    """The parts of a pod spec the filters read, in one line."""
    spec = pod["spec"]
    parts = [f"requests={spec['containers'][0]['resources'].get('requests')}"]
    for key in ("nodeSelector", "tolerations", "affinity", "topologySpreadConstraints", "resourceClaims", "volumes"):
        if spec.get(key):
            parts.append(f"{key}={json.dumps(spec[key], separators=(',', ':'))}")
    ports = spec["containers"][0].get("ports")
    if ports:
        parts.append(f"hostPorts={[p['hostPort'] for p in ports]}")
    return " ".join(parts)


class Diff:
    def __init__(self, api: client.ApiClient, agent: NodeAgent, cfg: ScalerConfig, workdir: Path,
                 timeout: float = 30.0) -> None:
        self.api, self.rest, self.agent, self.cfg = api, Api(api), agent, cfg
        self.workdir, self.timeout = workdir, timeout

    # --- the cluster ---------------------------------------------------------------------------
    def build(self, sc: diffgen.Scenario) -> None:
        for n in sc.nodes:
            self.agent.register(NodeSpec(n.name, n.labels, n.taints, n.allocatable, slices=n.slices))
        for obj in sc.setup:
            self.rest.create(obj)
        for obj in sc.bound:
            self.rest.create(obj)
        self._until(lambda: all(c["status"].get("phase") == "Bound" for c in self.rest.get(
            f"/api/v1/namespaces/{NS}/persistentvolumeclaims")["items"] if c["spec"].get("volumeName")),
            "the zonal volumes bound")

    def _until(self, check: Any, what: str) -> None:
        deadline = time.monotonic() + self.timeout
        while not check():
            if time.monotonic() > deadline:
                raise TimeoutError(what)
            time.sleep(0.05)

    # --- one pod -------------------------------------------------------------------------------
    def verdict(self, pod: JSON) -> tuple[PodVerdict, Snapshot]:
        snapshot = self._snapshot([pod])
        result, _ = plan(snapshot, State(), planning_context(self.cfg))
        return result.verdicts[f"{NS}/{pod['metadata']['name']}"], snapshot

    def _snapshot(self, pods: list[JSON], extra: Iterable[JSON] = ()) -> Snapshot:
        """The cluster as the API server has it, with `pods` pending (and `extra` objects) as `plan` reads it."""
        listing = self.rest.listing()
        # The seed's nodes are a standing cluster, not capacity that came up for the pending pods: aged past
        # the provision timeout, so that an empty one is not a *fresh* node (`capacity.is_fresh`), which the
        # planner on purpose does not bet a pod onto (docs/planner.md) while kube-scheduler scores it as any.
        # Only the creation time changes, which kube-scheduler does not read.
        aged = time.strftime("%Y-%m-%dT%H:%M:%SZ",
                             time.gmtime(time.time() - self.cfg.timings.provision_timeout - 3600))
        for obj in listing["items"]:
            if obj["kind"] == "Node":
                obj["metadata"]["creationTimestamp"] = aged
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        for pod in pods:
            pending = json.loads(json.dumps(pod))
            pending["metadata"]["creationTimestamp"] = now
            pending["spec"].setdefault("schedulerName", scoring.DEFAULT_SCHEDULER_NAME)
            pending["status"] = {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "lastTransitionTime": now}]}
            listing["items"].append(pending)
        listing["items"] += extra
        path = self.workdir / "snapshot.json"
        path.write_text(json.dumps(listing))
        snapshot, _ = load_snapshot(path, self.cfg)
        return snapshot

    def schedule(self, p: diffgen.PendingPod) -> tuple[str | None, str]:
        """Creates the pod; its node once bound, or None and the scheduler's message once Unschedulable."""
        self.rest.create(p.pod)
        path = f"/api/v1/namespaces/{NS}/pods/{p.name}"
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            obj = self.rest.get(path)
            node = obj["spec"].get("nodeName")
            if node:
                return node, ""
            for c in obj.get("status", {}).get("conditions") or ():
                if c["type"] == "PodScheduled" and c["status"] == "False" and c.get("reason") == "Unschedulable":
                    return None, str(c.get("message", ""))
            self._provision(p)
            time.sleep(0.03)
        raise TimeoutError(f"pod {p.name}: neither bound nor Unschedulable after {self.timeout} s")

    def _provision(self, p: diffgen.PendingPod) -> None:
        """The CSI provisioner's part: a claim of a provisioning class for which the scheduler picked a node
        gets a volume in that node's zone (kube-scheduler then binds the pod)."""
        for obj in p.before:
            if obj["kind"] != "PersistentVolumeClaim":
                continue
            pvc = self.rest.get(f"/api/v1/namespaces/{NS}/persistentvolumeclaims/{obj['metadata']['name']}")
            node = (pvc["metadata"].get("annotations") or {}).get(SELECTED_NODE)
            if not node or pvc["spec"].get("volumeName"):
                continue
            pv_name = f"pvc-{pvc['metadata']['uid']}"
            zone = self.rest.get(f"/api/v1/nodes/{node}")["metadata"]["labels"]["topology.kubernetes.io/zone"]
            pv = diffgen.volume(pv_name, pvc["spec"]["storageClassName"], "topology.kubernetes.io/zone", zone,
                                pvc["metadata"]["name"])
            pv["spec"]["claimRef"]["uid"] = pvc["metadata"]["uid"]
            try:
                self.rest.create(pv)
            except ApiException as e:
                if e.status != 409:
                    raise

    def remove(self, p: diffgen.PendingPod) -> None:
        """An unschedulable pod goes, with the claims made for it alone (shared claims stay)."""
        self.rest.delete(f"/api/v1/namespaces/{NS}/pods/{p.name}")
        for obj in p.before:
            if obj["kind"] == "PersistentVolumeClaim":
                self.rest.delete(f"/api/v1/namespaces/{NS}/persistentvolumeclaims/{obj['metadata']['name']}")
        self._until(lambda: not self._exists(f"/api/v1/namespaces/{NS}/pods/{p.name}"), f"pod {p.name} deleted")

    def _exists(self, path: str) -> bool:
        try:
            self.rest.get(path)
        except ApiException as e:
            if e.status == 404:
                return False
            raise
        return True

    def compare(self, p: diffgen.PendingPod) -> Outcome:
        for obj in p.before:
            if not (obj["kind"] == "ResourceClaim" and self._exists(
                    f"/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaims/{obj['metadata']['name']}")):
                self.rest.create(obj)
        verdict, snapshot = self.verdict(p.pod)
        node, message = self.schedule(p)
        dra = bool(p.pod["spec"].get("resourceClaims"))
        fits = verdict.outcome == "fits-existing"
        if node is None:
            agree = not fits
            self.remove(p)
        elif not fits:
            agree = False
        elif node == verdict.node:
            agree = True
        else:
            agree, message = tie(snapshot, p.name, verdict.node or "", node)
        return Outcome(p.name, p.features, dra, verdict, node, message, agree, summary(p.pod))

    def run(self, sc: diffgen.Scenario, report: Report, verbose: bool = False) -> None:
        self.build(sc)
        for p in sc.pending:
            o = self.compare(p)
            report.outcomes.append(o)
            if verbose and not o.agree:
                print(describe(o), flush=True)


    # --- gangs (Workload API PodGroups) ------------------------------------------------------------
    def compare_gang(self, g: diffgen.PendingGang) -> Outcome:
        """The planner's gang rule against kube-scheduler's GangScheduling plugin: whether the gang's minimum fits
        the nodes there are together. The planner says so when at least minCount members are `fits-existing`;
        the scheduler, when it binds at least minCount of them. The gang is removed after (the next starts from
        the same cluster)."""
        snapshot = self._snapshot(g.pods, [g.group])
        result, _ = plan(snapshot, State(), planning_context(self.cfg))
        verdicts = [result.verdicts[f"{NS}/{p['metadata']['name']}"] for p in g.pods]
        planned = sum(v.outcome == "fits-existing" for v in verdicts)
        groups = f"/apis/scheduling.k8s.io/v1beta1/namespaces/{NS}/podgroups"
        self.rest.call("POST", groups, g.group)
        for pod in g.pods:
            self.rest.create(pod)
        bound = self._gang_tried(g)
        agree = (planned >= g.min_count) == (len(bound) >= g.min_count)
        message = (f"minCount {g.min_count} of {len(g.pods)}: the planner fits {planned} on existing nodes, "
                   f"kube-scheduler bound {len(bound)}")
        for pod in g.pods:
            self.rest.delete(f"/api/v1/namespaces/{NS}/pods/{pod['metadata']['name']}")
        self.rest.delete(f"{groups}/{g.name}")
        self._until(lambda: not any(self._exists(f"/api/v1/namespaces/{NS}/pods/{p['metadata']['name']}")
                                    for p in g.pods), f"gang {g.name} deleted")
        gpus = g.pods[0]["spec"]["containers"][0]["resources"].get("limits")
        return Outcome(g.name, ("gang", "gang-gpu" if gpus else "gang-cpu"), False, verdicts[0],
                       bound[0] if bound else None, message, agree, summary(g.pods[0]))

    def _gang_tried(self, g: diffgen.PendingGang) -> list[str]:
        """The nodes the gang's members are bound to, once each is bound or marked not scheduled (Unschedulable,
        or the SchedulerError 1.37 gives a gang it found no room for: scaler.kube.convert.is_unschedulable)."""
        paths = [f"/api/v1/namespaces/{NS}/pods/{p['metadata']['name']}" for p in g.pods]
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            objs = [self.rest.get(path) for path in paths]
            nodes = [o["spec"].get("nodeName") for o in objs]
            if all(n or any(c["type"] == "PodScheduled" and c["status"] == "False"
                            for c in o.get("status", {}).get("conditions") or ()) for n, o in zip(nodes, objs,
                                                                                                  strict=True)):
                return [n for n in nodes if n]
            time.sleep(0.05)
        raise TimeoutError(f"gang {g.name}: members neither bound nor marked after {self.timeout} s")

    def run_gangs(self, seed: int, count: int, report: Report, verbose: bool = False) -> None:
        for g in diffgen.gangs(seed, count):
            o = self.compare_gang(g)
            report.outcomes.append(o)
            if verbose and not o.agree:
                print(describe(o), flush=True)


def tie(snapshot: Snapshot, name: str, planned: str, bound: str) -> tuple[bool, str]:
    """Whether the planner scores the scheduler's node as high as its own among the nodes its filters
    accept (kube-scheduler breaks ties at random). Its resource fit leaves to DRA the extended resources a
    DeviceClass serves on a node that does not advertise them, as the planner's does."""
    pod = next(p for p in snapshot.pending if p.name == name)
    nodes = {n.name: n for n in snapshot.nodes}
    dra = DraState(snapshot.dra)
    cluster = FilterCluster(snapshot.nodes, snapshot.storage, snapshot.namespaces, dra)
    check = cluster.check(pod)

    def refusal(n: Node) -> str | None:
        return (static_reason(pod, n) or resource_reason(node_requests(pod.requests, n.allocatable, dra.extended),
                                                         free_resources(n)) or check.reason(n))

    feasible = [n for n in snapshot.nodes if refusal(n) is None]
    if nodes.get(bound) not in feasible:
        why = refusal(nodes[bound]) if bound in nodes else "not in the snapshot"
        return False, f"the planner's filters refuse {bound}: {why}"
    profile = scoring.for_scheduler(pod.scheduler_name)
    totals = scoring.score_nodes(pod, [(n, free_resources(n)) for n in feasible], profile)
    if check.dra is not None and check.dra.prioritized:
        for n in feasible:  # the allocation on each node, for DynamicResources' score
            check.reason(n)
        dra = scoring.priority_scores([check.dra.priority_score(n) for n in feasible], profile)
        totals = [t + d for t, d in zip(totals, dra, strict=True)]
    scores = dict(zip((n.name for n in feasible), totals, strict=True))
    same = scores.get(planned) == scores[bound]
    return same, f"planner scores {planned}={scores.get(planned)} {bound}={scores[bound]}"


def describe(o: Outcome) -> str:
    where = f"bound to {o.scheduled}" if o.scheduled else f"Unschedulable: {o.message}"
    reasons = "; ".join(f"{k}: {v}" for k, v in sorted(o.verdict.reasons.items()))
    lines = [f"DISAGREE {o.pod} [{', '.join(o.features)}]", f"  pod: {o.summary}",
             f"  planner: {o.verdict.outcome}{' on ' + o.verdict.node if o.verdict.node else ''}"
             f"{' (' + reasons + ')' if reasons and o.verdict.outcome != 'fits-existing' else ''}",
             f"  kube-scheduler: {where}"]
    if o.scheduled and o.message:
        lines.append(f"  {o.message}")
    return "\n".join(lines)


def run_seed(plane: ControlPlane, seed: int, pods: int, report: Report, verbose: bool = False,
             agent: NodeAgent | None = None, gangs: int = 0) -> None:
    """The seed's cluster, its `pods` pending pods one at a time, then `gangs` Workload PodGroups one at a time."""
    api = config.new_client_from_config(str(plane.admin_kubeconfig))
    own = agent is None
    agent = agent or NodeAgent(api).start()
    try:
        with tempfile.TemporaryDirectory() as d:
            diff = Diff(api, agent, diffgen.config(), Path(d))
            diff.run(diffgen.scenario(seed, pods), report, verbose)
            diff.run_gangs(seed, gangs, report, verbose)
    finally:
        if own:
            agent.stop()
    if agent.errors:
        raise RuntimeError(f"node agent: {agent.errors[:3]}")


def main(argv: Iterable[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.controlplane.scheduler_diff", description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=3, help="clusters to generate (seeds 1..N), each on a fresh plane")
    ap.add_argument("--pods", type=int, default=170, help="pending pods per seed")
    ap.add_argument("--gangs", type=int, default=8, help="Workload API gangs per seed, after its pods")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each disagreement")
    args = ap.parse_args(list(argv) if argv is not None else None)
    report = Report()
    start = time.monotonic()
    for seed in range(1, args.seeds + 1):
        with tempfile.TemporaryDirectory(prefix="scheduler-diff-") as d:
            plane = ControlPlane(Path(d) / "plane").start()
            try:
                run_seed(plane, seed, args.pods, report, args.verbose, gangs=args.gangs)
            finally:
                plane.stop()
        print(f"seed {seed}: {sum(1 for o in report.outcomes if o.pod.startswith(f's{seed}-'))} pods, "
              f"{time.monotonic() - start:.0f} s", file=sys.stderr, flush=True)
    print(report.table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
