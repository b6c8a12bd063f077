"""The pods placed in a pass (bound ones and those the planner put on existing, booting or new nodes),
indexed so that kube-scheduler's PreFilter step costs the pods that match, not the whole cluster.

- `counts(matcher)`: per node, how many placed pods a matcher (a conjunction of (namespaces,
  namespaceSelector, labelSelector) parts) selects. Built on first use from an inverted index of the
  placed pods' labels (the matcher's first `In` requirement picks the candidates), then kept up to
  date by `place` / `unplace`.
- `anti`: the required anti-affinity of placed pods, grouped by (namespace, terms), with the nodes
  they sit on: what the incoming pod must keep away from.
- `eligible(key, test)`: the nodes a test admits and their topology domains, kept up to date as
  nodes are added and removed (topology spread counts domains over eligible nodes).
- host ports and volume attachments per node, and the users of each claim.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from scaler.core.model.keys import LABEL_HOSTNAME
from scaler.core.model.objects import HostPort, LabelSelector, Node, Pod, PodAffinityTerm
from scaler.core.model.storage import Attachment
from scaler.core.model.workload import active
from scaler.core.scheduling.filters.labels import anchor, namespace_labels, selector_matches

# (namespaces, namespaceSelector, labelSelector): a pod matches when its namespace is listed or its
# namespace's labels match the namespaceSelector, and its labels match the labelSelector.
Part = tuple[frozenset[str], LabelSelector | None, LabelSelector | None]
# All parts must match; the flag leaves out terminating pods (topology spread does, affinity does not).
Matcher = tuple[tuple[Part, ...], bool]
AntiSig = tuple[str, tuple[PodAffinityTerm, ...]]


def part_of(term: PodAffinityTerm) -> Part:
    return frozenset(term.namespaces), term.namespace_selector, term.selector


@dataclass(slots=True)
class Eligible:
    """The nodes a test admits, and per topology key the domains (value -> eligible nodes there; for
    the hostname, whose values are unique, only how many). Kept up to date lazily: `synced` is how
    much of the Placed's node log it has seen. Nodes of one signature share a verdict."""

    test: Callable[[Node], bool]
    keys: tuple[str, ...]
    domains: dict[str, dict[str, int]] = field(default_factory=dict)
    hosts: int = 0  # eligible nodes with a hostname label (the hostname key's domains)
    synced: int = 0
    per_node: bool = False  # the test reads the node's name or hostname: no verdict per signature
    verdicts: dict[int, bool] = field(default_factory=dict)  # node signature -> test result
    names: set[str] = field(default_factory=set)  # eligible nodes, when per_node

    def admits(self, node: Node, sig: int) -> bool:
        if self.per_node:
            return node.name in self.names
        ok = self.verdicts.get(sig)
        if ok is None:
            ok = self.verdicts[sig] = self.test(node)
        return ok

    def n_domains(self, key: str) -> int:
        return self.hosts if key == LABEL_HOSTNAME else len(self.domains.get(key, ()))

    def has_domain(self, key: str, value: str, placed: Placed) -> bool:
        if key != LABEL_HOSTNAME:
            return value in self.domains.get(key, ())
        name = placed.by_hostname.get(value)
        return name is not None and self.admits(placed.nodes[name], placed.signature(placed.nodes[name]))

    def update(self, node: Node, delta: int) -> None:
        """`delta` nodes like this one (its labels but the hostname) come (> 0) or go (< 0)."""
        labels = node.labels
        for k in self.keys:
            if k == LABEL_HOSTNAME:
                self.hosts += delta
                continue
            d = self.domains.setdefault(k, {})
            v = labels[k]
            n = d.get(v, 0) + delta
            if n > 0:
                d[v] = n
            else:
                d.pop(v, None)

    def add(self, node: Node, sig: int) -> None:
        if self.per_node:
            if node.name in self.names or not self.test(node):
                return
            self.names.add(node.name)
        else:
            ok = self.verdicts.get(sig)
            if ok is None:
                ok = self.verdicts[sig] = self.test(node)
            if not ok:
                return
        self.update(node, 1)

    def remove(self, node: Node, sig: int) -> None:
        if self.per_node:
            if node.name not in self.names:
                return
            self.names.discard(node.name)
        elif not self.verdicts.get(sig):
            return
        self.update(node, -1)


class Placed:
    """Nodes and the pods placed on them, with the indexes the filters read."""

    def __init__(self, namespaces: Mapping[str, Mapping[str, str]] | None = None,
                 attachments: Callable[[Pod], list[Attachment]] | None = None) -> None:
        self.namespaces = namespaces
        self.nodes: dict[str, Node] = {}
        self.pods: dict[str, dict[int, Pod]] = {}
        self._attachments = attachments
        # label pair -> placed pods carrying it; None until `counts` first needs it (a pass whose pods have no
        # spread nor affinity never does): then made from the pods placed, and kept up to date
        self._by_label: dict[tuple[str, str], dict[int, Pod]] | None = None
        self._where: dict[int, str] = {}  # placed pod (by id) -> its node
        self._counts: dict[Matcher, dict[str, int]] = {}
        self._anchored: dict[tuple[str, str], list[Matcher]] = {}
        self._unanchored: list[Matcher] = []
        self._ns_labels: dict[str, Mapping[str, str]] = {}
        self.anti: dict[AntiSig, dict[str, int]] = {}
        # The anti-affinity terms of placed pods (and of pods `expect`ed to be placed), by the label
        # pair a pod must carry for the term to match it (its selector's first In requirement).
        self._anti_terms: dict[tuple[str, str], list[tuple[AntiSig, PodAffinityTerm]]] = {}
        self._anti_loose: list[tuple[AntiSig, PodAffinityTerm]] = []
        self._anti_known: set[AntiSig] = set()
        self._expected: set[AntiSig] = set()
        self.ports: dict[str, list[HostPort]] = {}
        self.attached: dict[str, dict[Attachment, int]] = {}  # node -> (driver, volume) -> pods using it
        self.attached_per_driver: dict[str, dict[str, int]] = {}  # node -> driver -> distinct volumes
        self.claim_users: dict[str, int] = {}  # namespace/claim -> placed pods using it
        self._eligible: dict[object, Eligible] = {}
        self._node_log: list[Node] = []  # nodes added and removed, in order (with _log_deltas)
        self.sigs: dict[str, int] = {}  # node name -> id of its signature
        self._log_sigs: list[int] = []  # the signature of each node of the log
        self._log_deltas: list[int] = []  # and whether it came (1) or went (-1)
        self._sig_rep: dict[int, Node] = {}  # a node of each signature
        self._sig_count: Counter[int] = Counter()  # nodes of each signature now
        self.by_hostname: dict[str, str] = {}  # hostname label -> node name
        self._sig_ids: dict[object, int] = {}

    # --- namespaces ---------------------------------------------------------------------------
    def ns_labels(self, namespace: str) -> Mapping[str, str]:
        labels = self._ns_labels.get(namespace)
        if labels is None:
            labels = self._ns_labels[namespace] = namespace_labels(namespace, self.namespaces)
        return labels

    def matches(self, parts: tuple[Part, ...], pod: Pod) -> bool:
        for namespaces, ns_selector, selector in parts:
            if pod.namespace not in namespaces and not (
                    ns_selector is not None and selector_matches(ns_selector, self.ns_labels(pod.namespace))):
                return False
            if not selector_matches(selector, pod.labels):
                return False
        return True

    # --- nodes --------------------------------------------------------------------------------
    def add_node(self, node: Node, pods: Iterable[Pod] | None = None, like: Node | None = None) -> None:
        """A node with its pods (`node.pods` unless given; terminated ones are left out). `like`: a node
        with the same labels but the hostname and the same taints (the template it was opened from)."""
        self.nodes[node.name] = node
        self.pods.setdefault(node.name, {})
        self.sigs.pop(node.name, None)  # a node may come back (a rollback) with other labels
        self._node_log.append(node)
        sig = self.signature(node) if like is None else self.signature(like)
        self.sigs[node.name] = sig
        self._log_sigs.append(sig)
        self._log_deltas.append(1)
        self._sig_count[sig] += 1
        hostname = node.labels.get(LABEL_HOSTNAME)
        if hostname is not None:
            self.by_hostname[hostname] = node.name
        for pod in node.pods if pods is None else pods:
            if active(pod):
                self.place(pod, node.name)

    def remove_node(self, name: str) -> list[Pod]:
        """Forget a node; returns the pods that were placed on it."""
        node = self.nodes[name]
        pods = list(self.pods[name].values())
        for pod in pods:
            self.unplace(pod, name)
        self._node_log.append(node)
        sig = self.signature(node)
        self._log_sigs.append(sig)
        self._log_deltas.append(-1)
        self._sig_count[sig] -= 1
        hostname = node.labels.get(LABEL_HOSTNAME)
        if hostname is not None and self.by_hostname.get(hostname) == name:
            del self.by_hostname[hostname]
        del self.nodes[name]
        del self.pods[name]
        return pods

    def signature(self, node: Node) -> int:
        """What the eligibility tests can read of a node but its name and hostname: nodes alike in it
        (the nodes of one pool and zone, every node a template opens) are judged once."""
        sig = self.sigs.get(node.name)
        if sig is None:
            labels = node.labels
            full = (frozenset(item for item in labels.items() if item[0] != LABEL_HOSTNAME),
                    LABEL_HOSTNAME in labels, node.taints)
            sig = self._sig_ids.get(full)
            if sig is None:
                sig = self._sig_ids[full] = len(self._sig_ids)
                self._sig_rep[sig] = node
            self.sigs[node.name] = sig
        return sig

    def eligible(self, key: object, keys: tuple[str, ...], test: Callable[[Node], bool],
                 per_node: bool = False) -> Eligible:
        e = self._eligible.get(key)
        log = self._node_log
        if e is None:
            e = self._eligible[key] = Eligible(test, keys, synced=len(log), per_node=per_node)
            if per_node:
                for node in self.nodes.values():
                    e.add(node, self.signature(node))
            else:  # one verdict per signature, the nodes of each taken in bulk
                for sig_id, n in self._sig_count.items():
                    if n > 0:
                        rep = self._sig_rep[sig_id]
                        ok = e.verdicts[sig_id] = e.test(rep)
                        if ok:
                            e.update(rep, n)
        elif e.synced < len(log):
            if e.per_node:
                sig = self._log_sigs
                deltas = self._log_deltas
                for i in range(e.synced, len(log)):
                    node = log[i]
                    if deltas[i] > 0:
                        e.add(node, sig[i])
                    else:
                        e.remove(node, sig[i])
            else:
                # Nodes of one signature differ only in name and hostname: take the changes in bulk, one
                # verdict and one domain update per signature, by the net count (a node removed, put back
                # and removed again is one fewer: summed per direction, the removals could take a domain
                # below zero, where it is dropped, before the addition brings it back).
                net: Counter[int] = Counter()
                for delta, sig_id in zip(self._log_deltas[e.synced:], self._log_sigs[e.synced:], strict=True):
                    net[sig_id] += delta
                for sig_id, n in net.items():
                    if n == 0:
                        continue
                    rep = self._sig_rep[sig_id]
                    known = e.verdicts.get(sig_id)
                    if known is None:
                        known = e.verdicts[sig_id] = e.test(rep)
                    if known:
                        e.update(rep, n)
            e.synced = len(log)
        return e

    # --- pods ---------------------------------------------------------------------------------
    def place(self, pod: Pod, node_name: str) -> None:
        self._update(pod, node_name, 1)

    def unplace(self, pod: Pod, node_name: str) -> None:
        if id(pod) in self.pods.get(node_name, {}):
            self._update(pod, node_name, -1)

    def _update(self, pod: Pod, node_name: str, delta: int) -> None:
        pid = id(pod)
        if delta > 0:
            self.pods[node_name][pid] = pod
            self._where[pid] = node_name
        else:
            del self.pods[node_name][pid]
            self._where.pop(pid, None)
        by_label = self._by_label
        if by_label is not None:  # (else no matcher is counted yet either)
            for item in pod.labels.items():
                bucket = by_label.get(item)
                if delta > 0:
                    if bucket is None:
                        bucket = by_label[item] = {}
                    bucket[pid] = pod
                elif bucket is not None:
                    bucket.pop(pid, None)
                for m in self._anchored.get(item, ()):
                    self._count(m, pod, node_name, delta)
        for m in self._unanchored:
            self._count(m, pod, node_name, delta)
        if pod.pod_anti_affinity:
            sig: AntiSig = (pod.namespace, pod.pod_anti_affinity)
            self._index_anti(sig)
            self._bump(self.anti.setdefault(sig, {}), node_name, delta)
            if not self.anti[sig]:
                del self.anti[sig]
                if sig not in self._expected:
                    self._unindex_anti(sig)
        if pod.host_ports:
            if delta > 0:
                self.ports.setdefault(node_name, []).extend(pod.host_ports)
            else:
                used = self.ports[node_name]
                for hp in pod.host_ports:
                    used.remove(hp)
        if pod.claims:
            for ref in pod.claims:
                self._bump(self.claim_users, f"{pod.namespace}/{ref.name}", delta)
            if self._attachments is not None:
                on = self.attached.setdefault(node_name, {})
                per_driver = self.attached_per_driver.setdefault(node_name, {})
                for att in self._attachments(pod):
                    before = att in on
                    self._bump(on, att, delta)
                    if before != (att in on):  # a volume attaches / detaches
                        self._bump(per_driver, att[0], 1 if delta > 0 else -1)

    def _index_anti(self, sig: AntiSig) -> None:
        if sig in self._anti_known:
            return
        self._anti_known.add(sig)
        for t in sig[1]:
            hook = anchor(t.selector)
            if hook is None:
                self._anti_loose.append((sig, t))
            else:
                for v in hook[1]:
                    self._anti_terms.setdefault((hook[0], v), []).append((sig, t))

    def _unindex_anti(self, sig: AntiSig) -> None:
        self._anti_known.discard(sig)
        self._anti_loose = [e for e in self._anti_loose if e[0] != sig]
        for item in list(self._anti_terms):
            kept = [e for e in self._anti_terms[item] if e[0] != sig]
            if kept:
                self._anti_terms[item] = kept
            else:
                del self._anti_terms[item]

    def expect(self, pods: Iterable[Pod]) -> None:
        """Pods the pass may place later: their anti-affinity makes the pods it matches `anti_candidates`
        already (so that a planner deciding per class up front checks them)."""
        for pod in pods:
            if pod.pod_anti_affinity:
                sig = (pod.namespace, pod.pod_anti_affinity)
                self._expected.add(sig)
                self._index_anti(sig)

    def anti_candidates(self, pod: Pod) -> list[tuple[AntiSig, PodAffinityTerm]]:
        """Anti-affinity terms (of placed or expected pods) that may match the pod: a superset."""
        out = list(self._anti_loose)
        terms = self._anti_terms
        if terms:
            for item in pod.labels.items():
                hit = terms.get(item)
                if hit is not None:
                    out.extend(hit)
        return out

    @staticmethod
    def _bump(counts: dict[str, int] | dict[Attachment, int], key: object, delta: int) -> None:
        n = counts.get(key, 0) + delta  # type: ignore[call-overload]
        if n > 0:
            counts[key] = n  # type: ignore[index]
        else:
            counts.pop(key, None)  # type: ignore[call-overload]

    def _count(self, m: Matcher, pod: Pod, node_name: str, delta: int) -> None:
        parts, live_only = m
        if live_only and pod.terminating:
            return
        if self.matches(parts, pod):
            self._bump(self._counts[m], node_name, delta)

    def _labels(self) -> dict[tuple[str, str], dict[int, Pod]]:
        """The label index (`_by_label`), made from the pods placed when first asked."""
        if self._by_label is None:
            self._by_label = {}
            for pods in self.pods.values():
                for pid, pod in pods.items():
                    for item in pod.labels.items():
                        self._by_label.setdefault(item, {})[pid] = pod
        return self._by_label

    def counts(self, m: Matcher) -> dict[str, int]:
        """Node -> placed pods the matcher selects (nodes without any are absent). Do not change it."""
        out = self._counts.get(m)
        if out is not None:
            return out
        out = self._counts[m] = {}
        parts, _ = m
        hook = next((a for a in (anchor(p[2]) for p in parts) if a is not None), None)
        if hook is None:
            candidates: list[Pod] = [p for pods in self.pods.values() for p in pods.values()]
            self._unanchored.append(m)
        else:
            key, values = hook
            seen: dict[int, Pod] = {}
            for v in values:
                seen.update(self._labels().get((key, v), {}))
                self._anchored.setdefault((key, v), []).append(m)
            candidates = list(seen.values())
        where = self._where
        for pod in candidates:
            self._count(m, pod, where[id(pod)], 1)
        return out
