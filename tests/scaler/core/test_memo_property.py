"""A plan made with the memo the Reconciler keeps from pass to pass (`scaler.core.planning.memo`) is the
plan made from scratch: on random sequences of changes (pods added, removed and bound, nodes added,
removed and cordoned, a node's allocatable growing as a pod of the same size lands on it, a running pod
joining a gang, pools' maxima changing, pools in backoff, offerings unavailable; pods of both scoring
profiles, some with a node selector; some nodes copies of version 0, never kept), each pass is planned
twice, with the kept memo and with an empty one, and both plans and next states must be equal.
Derandomized: the same seeds every run.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from functools import cache

import pytest
from core_builders import POOLS, config, node_of, plan, pod, snapshot

from scaler.core.config.settings import ScalerConfig
from scaler.core.model.keys import LABEL_POOL, RES_CPU, RES_GPU, RES_MEMORY, RES_PODS
from scaler.core.model.objects import Node, Pod, Taint
from scaler.core.planning.memo import Memo
from scaler.core.planning.packing import PodClass
from scaler.core.planning.room import Room
from scaler.core.planning.state import Backoff, State
from scaler.core.scheduling.scoring import BINPACK_SCHEDULER_NAME

SHAPES = [("1", "2Gi", 0), ("2", "4Gi", 0), ("500m", "1Gi", 0), ("4", "8Gi", 1), ("2", "8Gi", 1), ("8", "32Gi", 8)]
NODE_POOLS = ["cpu-spot", "cpu-od", "gpu1-spot-a", "gpu1-od", "gpu8-od"]
SEEDS = range(50)
STEPS = 12


@cache
def cfg_with(max_cpu: int, max_gpu1: int, budget: float = 0.1, consolidate: bool = True,
             threshold: float = 0.5) -> ScalerConfig:
    pools = [{**p, "max": max_cpu} if p["name"].startswith("cpu") else
             {**p, "max": max_gpu1} if p["name"].startswith("gpu1") else p for p in POOLS]
    return config(pools, scale_down={"budget_fraction": budget, "consolidate": consolidate,
                                     "utilization_threshold": threshold})


class Cluster:
    """The cluster a random sequence of changes walks through."""

    def __init__(self, rng: random.Random, crowded: bool = False) -> None:
        """`crowded`: more nodes with more pods, busier ones unneeded too, all tried in one pass (some pods find
        no room)."""
        self.rng = rng
        # the scale-down's budget, consolidation, utilization threshold
        self.settings = (1.0, rng.random() < 0.5, rng.choice([0.5, 1.0])) if crowded else (0.1, True, 0.5)
        self.cfg = cfg_with(50, 40, *self.settings)
        self.running = (2, 6) if crowded else (0, 3)
        self.n = 0
        self.nodes: dict[str, Node] = {}
        self.versions: dict[str, int] = {}  # a node as it is -> its version
        self.pending: list[Pod] = []
        for _ in range(rng.randint(20, 40) if crowded else rng.randint(6, 16)):
            self.add_node()
        for _ in range(rng.randint(10, 30)):
            self.add_pod()

    def _name(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def _pod(self, node: str | None = None) -> Pod:
        cpu, mem, gpu = self.rng.choice(SHAPES)
        p = pod(self._name("p"), cpu, mem, gpu, node=node)
        if self.rng.random() < 0.3:  # scored as the binpack profile scores (MostAllocated)
            p.scheduler_name = BINPACK_SCHEDULER_NAME
        if self.rng.random() < 0.2:  # a node selector: its label key groups the nodes
            p.node_selector = {LABEL_POOL: self.rng.choice(NODE_POOLS)}
        if self.rng.random() < 0.1:  # a gang's member
            p.labels = {**p.labels, self.cfg.gang_label: self.rng.choice("ab")}
        return p

    def add_node(self) -> None:
        name = self._name("n")
        pods = (self._pod() for _ in range(self.rng.randint(*self.running)))
        running = [p for p in pods if not p.requests.get(RES_GPU)]
        self.nodes[name] = node_of(self.cfg, self.rng.choice(NODE_POOLS), name, running)

    def add_pod(self) -> None:
        self.pending.append(self._pod())

    def change(self) -> str:
        rng = self.rng
        what = rng.choice(["add-pods", "remove-pod", "bind", "end-pod", "add-node", "remove-node", "cordon",
                           "uncordon", "grow", "gang", "max", "nothing"])
        names = sorted(self.nodes)
        if what == "add-pods":
            for _ in range(rng.randint(1, 6)):
                self.add_pod()
        elif what == "remove-pod" and self.pending:
            self.pending.pop(rng.randrange(len(self.pending)))
        elif what == "bind" and self.pending and names:
            p = self.pending.pop(rng.randrange(len(self.pending)))
            node = self.nodes[rng.choice(names)]
            node.pods = [*node.pods, dataclasses.replace(p, node_name=node.name, phase="Running")]
        elif what == "end-pod" and names:
            node = self.nodes[rng.choice(names)]
            if len(node.pods) > 1:  # the DaemonSet pod stays
                node.pods = [q for i, q in enumerate(node.pods) if i != rng.randrange(1, len(node.pods))]
        elif what == "add-node":
            self.add_node()
        elif what == "remove-node" and names:
            del self.nodes[rng.choice(names)]
        elif what in ("cordon", "uncordon") and names:
            name = rng.choice(names)
            self.nodes[name] = dataclasses.replace(self.nodes[name], unschedulable=what == "cordon")
        elif what == "grow" and names:  # the same free resources, another allocatable
            name = rng.choice(names)
            node = self.nodes[name]
            more = pod(self._name("p"), "1", "4Gi", node=name)
            alloc = dict(node.allocatable)
            for r in (RES_CPU, RES_MEMORY, RES_PODS):
                alloc[r] = alloc.get(r, 0) + more.requests.get(r, 0)
            more.phase = "Running"
            self.nodes[name] = dataclasses.replace(node, allocatable=alloc, pods=[*node.pods, more])
        elif what == "gang" and names:  # a running pod joins a gang (the pass counts its bound members)
            node = self.nodes[rng.choice(names)]
            if len(node.pods) > 1:
                i = rng.randrange(1, len(node.pods))
                joined = dataclasses.replace(node.pods[i], labels={self.cfg.gang_label: rng.choice("ab")})
                node.pods = [joined if j == i else q for j, q in enumerate(node.pods)]
        elif what == "max":
            self.cfg = cfg_with(rng.choice([2, 5, 50]), rng.choice([1, 3, 40]), *self.settings)
        return what

    def nodes_now(self) -> list[Node]:
        """Each pass its own node objects (as the watch cache hands out), the pods shared, and a version that
        changes with the node or its pods (as the cache's); now and then 0, a copy never kept."""
        return [dataclasses.replace(n, pods=list(n.pods), version=0 if self.rng.random() < 0.1 else self.version(n))
                for n in self.nodes.values()]

    def version(self, node: Node) -> int:
        return self.versions.setdefault(repr(node), len(self.versions) + 1)


def twice(cluster: Cluster, state: State, memo: Memo, now: float) -> tuple[str, str, bool, State]:
    """The pass planned with the kept memo and from scratch: both plans and next states as text, and the
    next state from scratch."""
    snap = snapshot(cluster.cfg, list(cluster.pending), cluster.nodes_now(), now=now)
    memo.next_pass()
    kept, kept_state = plan(snap, state, cluster.cfg, memo)
    snap = snapshot(cluster.cfg, list(cluster.pending), cluster.nodes_now(), now=now)
    fresh, fresh_state = plan(snap, state, cluster.cfg)  # no memo: from scratch
    return repr(kept), repr(fresh), repr(kept_state) == repr(fresh_state), fresh_state


@pytest.mark.parametrize("seed", SEEDS)
def test_plans_with_the_kept_memo_equal_plans_from_scratch(seed: int) -> None:
    rng = random.Random(seed)
    cluster = Cluster(rng)
    memo = replay(seed, rng, cluster, 0.3, lambda: rng.choice(cluster.cfg.pools).name, 300)
    assert memo.hits > 0  # the later passes did reuse what the earlier ones worked out


def replay(seed: int, rng: random.Random, cluster: Cluster, backoff_chance: float, backoff_pool: Callable[[], str],
           backoff_for: float) -> Memo:
    """STEPS passes of random changes, every node unneeded for long (so drains are tried), now and then a pool
    in backoff or an offering unavailable for a while: each pass planned with the kept memo and from scratch,
    the plans and next states equal. Returns the memo."""
    memo = Memo()
    now = 1000.0
    state = State(unneeded_since={n: 0.0 for n in cluster.nodes})
    for step in range(STEPS):
        what = ", ".join(cluster.change() for _ in range(rng.randint(1, 4))) if step else "start"
        if rng.random() < backoff_chance:
            state = dataclasses.replace(state, backoff={**state.backoff, backoff_pool(): Backoff(now + backoff_for, 1)})
        if rng.random() < 0.2:
            state = dataclasses.replace(state, unavailable={**state.unavailable, ("cpu-spot", "us-east-1a"): now + 200})
        kept, fresh, same_state, state = twice(cluster, state, memo, now)
        assert kept == fresh, f"seed {seed}, step {step} ({what}): the plans differ"
        assert same_state, f"seed {seed}, step {step} ({what}): the next states differ"
        state.unneeded_since = {n: 0.0 for n in cluster.nodes}  # still unneeded for long
        now += 100.0
    return memo



# --- within a pass: candidates whose pods surely find no room are not tried again -------------------------
SKIPPED: list[int] = []


@pytest.mark.parametrize("seed", SEEDS)
def test_candidates_not_tried_for_want_of_room_give_the_plans_of_trying_them(seed: int,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Scale-down remembers, within a pass, the evicted pods that found no room on the other nodes
    (`Room.full`) and gives up on later candidates with such pods without a trial: the plans and next
    states are those of trying every candidate."""
    rng = random.Random(seed)
    cluster = Cluster(rng, crowded=True)
    now = 1000.0
    state = State(unneeded_since={n: 0.0 for n in cluster.nodes})
    surely_full = Room._surely_full
    skipped = 0

    def counting(self: Room, classes: list[PodClass]) -> bool:
        nonlocal skipped
        full = surely_full(self, classes)
        skipped += full
        return full

    for step in range(STEPS):
        what = ", ".join(cluster.change() for _ in range(rng.randint(1, 4))) if step else "start"
        with monkeypatch.context() as m:
            m.setattr(Room, "_surely_full", lambda self, classes: False)
            tried, tried_state = plan(snapshot(cluster.cfg, list(cluster.pending), cluster.nodes_now(), now=now),
                                      state, cluster.cfg)
        with monkeypatch.context() as m:
            m.setattr(Room, "_surely_full", counting)
            skipping, state = plan(snapshot(cluster.cfg, list(cluster.pending), cluster.nodes_now(), now=now),
                                   state, cluster.cfg)
        assert repr(skipping) == repr(tried), f"seed {seed}, step {step} ({what}): the plans differ"
        assert repr(state) == repr(tried_state), f"seed {seed}, step {step} ({what}): the next states differ"
        state.unneeded_since = {n: 0.0 for n in cluster.nodes}
        now += 100.0
    SKIPPED.append(skipped)


def test_the_seeds_above_did_skip_candidates() -> None:
    """(After the test above: some of its passes did give up on candidates without a trial.)"""
    assert sum(SKIPPED) > 0


# --- from pass to pass: what a node's pods say about draining it (sdn) ----------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
def test_drains_with_the_kept_memo_equal_drains_from_scratch(seed: int) -> None:
    """Every node unneeded and tried, on a crowded cluster (some evicted pods find no room, consolidation on
    or off): the kept `Drainable`s (blocker, pods to evict, their classes' keys, the last `cheaper_home`
    answer) give the plans and next states of working them out anew."""
    rng = random.Random(seed)
    cluster = Cluster(rng, crowded=True)
    # more backoff, on the pools crowded nodes drain to: another Homes each time
    memo = replay(seed, rng, cluster, 0.4,
                  lambda: rng.choice(["cpu-spot", "gpu1-spot-a", rng.choice(cluster.cfg.pools).name]), 200)
    assert memo.hits > 0


@pytest.mark.parametrize("seed", range(0, 50, 5))
def test_a_pass_leaves_its_nodes_as_they_were(seed: int) -> None:
    """The watch cache hands an unchanged node out again to the next pass (`ClusterCache.observe`): a pass,
    with the memo or without, changes no node of its snapshot, nor their lists of pods."""
    rng = random.Random(seed)
    cluster = Cluster(rng, crowded=seed % 2 == 0)
    memo = Memo()
    now = 1000.0
    state = State(unneeded_since={n: 0.0 for n in cluster.nodes})
    for step in range(STEPS):
        cluster.change()
        nodes = cluster.nodes_now()
        before = [(repr(n), n.pods, list(n.pods)) for n in nodes]
        memo.next_pass()
        snap = snapshot(cluster.cfg, list(cluster.pending), nodes, now=now)
        _, state = plan(snap, state, cluster.cfg, memo if step % 2 else None)
        after = [(repr(n), n.pods, list(n.pods)) for n in nodes]
        assert all(b[0] == a[0] and b[1] is a[1] and b[2] == a[2] for b, a in zip(before, after, strict=True)), \
            f"seed {seed}, step {step}: the pass changed a node"
        state.unneeded_since = {n: 0.0 for n in cluster.nodes}
        now += 100.0


# --- the packer's bins kept per node version (capacity._node_bins) ------------------------------------------
TEAM = "example.com/team"
DEDICATED = Taint("example.com/dedicated", "x", "NoSchedule")


class BootingCluster(Cluster):
    """Also: gangs with a minimum, nodes booting (NotReady, or a GPU node whose GPUs are not published yet)
    that become ready or grow old, nodes labelled with a team (a key pods come to select and stop
    selecting, so the label keys that tell groups apart change while the nodes do not), tainted and
    untainted, and pending pods asking for a resource no node has (the pass's resource list changes)."""

    now = 1000.0

    def add_node(self) -> None:
        super().add_node()
        name = next(reversed(self.nodes))  # (the one just added)
        if self.rng.random() < 0.5:
            self.nodes[name].labels = {**self.nodes[name].labels, TEAM: self.rng.choice("ab")}

    def _pod(self, node: str | None = None) -> Pod:
        p = super()._pod(node)
        if node is None and self.rng.random() < 0.05:
            p.requests = {**p.requests, "example.com/fpga": 1}
        if self.rng.random() < 0.2:  # a gang's member, with a minimum: its members on the nodes count
            p.labels = {**p.labels, self.cfg.gang_label: self.rng.choice("ab")}
            p.annotations = {**p.annotations, self.cfg.gang_min_annotation: str(self.rng.randint(2, 6))}
        return p

    def change(self) -> str:
        rng = self.rng
        what = rng.choice(["boot", "boot-gpu", "ready", "relabel", "taint", "untaint", "select", "unselect", "other"])
        names = sorted(self.nodes)
        if what in ("boot", "boot-gpu"):
            name = self._name("n")
            pool = rng.choice(["gpu1-od", "gpu8-od"] if what == "boot-gpu" else NODE_POOLS)
            self.nodes[name] = node_of(self.cfg, pool, name, created_at=self.now, ready=what == "boot",
                                       gpus=0 if what == "boot-gpu" else None)
        elif what == "ready" and names:
            node = self.nodes[rng.choice(names)]
            alloc = {**node.allocatable, **({RES_GPU: 1} if RES_GPU in node.allocatable else {})}
            self.nodes[node.name] = dataclasses.replace(node, ready=True, allocatable=alloc)
        elif what == "relabel" and names:
            node = self.nodes[rng.choice(names)]
            self.nodes[node.name] = dataclasses.replace(node, labels={**node.labels, TEAM: rng.choice("ab")})
        elif what in ("taint", "untaint") and names:
            node = self.nodes[rng.choice(names)]
            taints = tuple(t for t in node.taints if t != DEDICATED) + ((DEDICATED,) if what == "taint" else ())
            self.nodes[node.name] = dataclasses.replace(node, taints=taints)
        elif what == "select":  # pending pods that select a team
            for _ in range(rng.randint(1, 3)):
                p = self._pod()
                p.node_selector = {**p.node_selector, TEAM: rng.choice("ab")}
                self.pending.append(p)
        elif what == "unselect":  # they go (pending or bound): no pod looks at the key any more
            self.pending = [p for p in self.pending if TEAM not in p.node_selector]
            for name in names:
                node = self.nodes[name]
                if any(TEAM in p.node_selector for p in node.pods):
                    node.pods = [p for p in node.pods if TEAM not in p.node_selector]
        else:
            return super().change()
        return what


@pytest.mark.parametrize("seed", SEEDS)
def test_bins_kept_per_node_version_give_the_plans_from_scratch(seed: int) -> None:
    rng = random.Random(seed)
    cluster = BootingCluster(rng)
    memo = Memo()
    now = 1000.0
    state = State(unneeded_since={n: 0.0 for n in cluster.nodes})
    for step in range(STEPS):
        cluster.now = now
        what = ", ".join(cluster.change() for _ in range(rng.randint(1, 4))) if step else "start"
        kept, fresh, same_state, state = twice(cluster, state, memo, now)
        assert kept == fresh, f"seed {seed}, step {step} ({what}): the plans differ"
        assert same_state, f"seed {seed}, step {step} ({what}): the next states differ"
        state.unneeded_since = {n: 0.0 for n in cluster.nodes}
        now += 100.0
    assert memo.hits > 0
