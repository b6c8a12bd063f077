"""Label selectors as node affinity and ResourceSlices state them: requirements, terms, and whether a
node's labels (and name, for matchFields) meet them. Plain data and pure functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

SelectorOperator = Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]

# Passed as a node's name by callers that judge a group of nodes by their labels and check matchFields
# per node later: a matchFields requirement is then taken as met (never a real name: not a DNS name).
ANY_NODE_NAME = "*"


@dataclass(frozen=True, slots=True)
class SelectorRequirement:
    key: str
    operator: SelectorOperator
    values: tuple[str, ...] = ()
    field: bool = False  # a node affinity matchFields requirement: `key` is a field (metadata.name)


# A term is a conjunction of requirements; a node selector is a disjunction of terms.
SelectorTerm = tuple[SelectorRequirement, ...]


def _requirement_matches(req: SelectorRequirement, labels: Mapping[str, str], name: str | None = None) -> bool:
    op = req.operator
    if req.field:  # matchFields: only metadata.name exists (In / NotIn); unknown name: no match
        if name is None:
            return False
        if name == ANY_NODE_NAME:
            return True
        return (name in req.values) == (op == "In") if op in ("In", "NotIn") else False
    if op == "Exists":
        return req.key in labels
    if op == "DoesNotExist":
        return req.key not in labels
    value = labels.get(req.key)
    if op == "In":
        return value is not None and value in req.values
    if op == "NotIn":
        return value is None or value not in req.values
    # Gt / Lt: the label and the single value both parse as integers, else no match.
    if value is None or len(req.values) != 1:
        return False
    try:
        have, want = int(value), int(req.values[0])
    except ValueError:
        return False
    return have > want if op == "Gt" else have < want


def term_matches(term: SelectorTerm, labels: Mapping[str, str], name: str | None = None) -> bool:
    """Requirements of a term are ANDed; an empty term matches nothing (as in the API). A matchFields
    requirement on metadata.name needs the node's `name`."""
    return bool(term) and all(_requirement_matches(r, labels, name) for r in term)
