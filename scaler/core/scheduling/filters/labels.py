"""Label selectors and pod (anti-)affinity terms, as the API defines their matching.

A `LabelSelector` with no requirement matches every label set; a null one (None) matches nothing.
A term matches a pod when the pod's namespace is one of the term's namespaces or its labels match
the term's namespaceSelector, and the pod's labels match the term's selector.
"""

from __future__ import annotations

from collections.abc import Mapping

from scaler.core.model import keys
from scaler.core.model.objects import LabelSelector, Pod, PodAffinityTerm, SelectorRequirement


def requirement_matches(req: SelectorRequirement, labels: Mapping[str, str]) -> bool:
    op = req.operator
    if op == "In":
        value = labels.get(req.key)
        return value is not None and value in req.values
    if op == "NotIn":
        value = labels.get(req.key)
        return value is None or value not in req.values
    if op == "Exists":
        return req.key in labels
    if op == "DoesNotExist":
        return req.key not in labels
    return False  # Gt / Lt are node selector operators only


def selector_matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    if selector is None:
        return False
    for req in selector.requirements:
        if not requirement_matches(req, labels):
            return False
    return True


def merge_label_keys(selector: LabelSelector | None, labels: Mapping[str, str], match: tuple[str, ...],
                     mismatch: tuple[str, ...] = ()) -> LabelSelector | None:
    """`matchLabelKeys` (key In [the pod's value]) and `mismatchLabelKeys` (NotIn) merged into a selector,
    keys the pod does not carry skipped. As kube-scheduler merges them, a null selector with merged keys
    becomes a selector of just those keys."""
    extra = [SelectorRequirement(k, "In", (labels[k],)) for k in match if k in labels]
    extra += [SelectorRequirement(k, "NotIn", (labels[k],)) for k in mismatch if k in labels]
    if not extra:
        return selector
    return LabelSelector((*extra, *(selector.requirements if selector is not None else ())))


def namespace_labels(namespace: str, known: Mapping[str, Mapping[str, str]] | None) -> Mapping[str, str]:
    """A namespace's labels; without the Namespace object, the label the API server always sets."""
    if known is not None:
        labels = known.get(namespace)
        if labels is not None:
            return labels
    return {keys.LABEL_NAMESPACE_NAME: namespace}


def affinity_term_matches(term: PodAffinityTerm, pod: Pod, ns_labels: Mapping[str, str]) -> bool:
    """`ns_labels`: the labels of the pod's namespace (for the term's namespaceSelector)."""
    in_ns = pod.namespace in term.namespaces or (
        term.namespace_selector is not None and selector_matches(term.namespace_selector, ns_labels))
    return in_ns and selector_matches(term.selector, pod.labels)


def anchor(selector: LabelSelector | None) -> tuple[str, tuple[str, ...]] | None:
    """An `In` requirement every pod the selector matches must satisfy (for an inverted index)."""
    if selector is None:
        return None
    for req in selector.requirements:
        if req.operator == "In":
            return req.key, req.values
    return None
