"""What the API server refuses in the fields the planner reads, refused here too rather than reinterpreted.

A hand-made snapshot (`plan`, `explain`) or an object the API server never checked (an old one, a CRD's
embedded pod template) can carry values the API server would not store; converting them anyway would
silently change the verdict (`maxSkew: 0` read as no constraint, an unknown `whenUnsatisfiable` as
ScheduleAnyway, an `Equals` operator as matching nothing). Each check raises `FieldError` naming the field;
`scaler.kube.convert` turns it into a `SnapshotError` naming the object (exit 2 for `plan`, a skipped
object with a FailedToRead Warning Event in the loop).

The rules, from kubernetes/kubernetes:
- pkg/apis/core/validation/validation.go: `validateTopologySpreadConstraints` (`ValidateMaxSkew`: greater
  than zero; `ValidateTopologyKey`: not empty; `ValidateWhenUnsatisfiable`: DoNotSchedule or
  ScheduleAnyway; `validateMinDomains`: greater than zero, DoNotSchedule only), `validatePodAffinityTerm`
  (topologyKey a label name, so not empty), `ValidateNodeSelectorRequirement` (In / NotIn with values,
  Exists / DoesNotExist without, Gt / Lt with exactly one, any other operator "not a valid selector
  operator").
- staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/validation: `ValidateLabelSelectorRequirement`
  (a metav1.LabelSelector knows In, NotIn, Exists, DoesNotExist only; values as for nodes).
- staging/src/k8s.io/apimachinery/pkg/labels/selector.go: `NewRequirement` refuses a Gt / Lt value that
  is not an integer; the API server stores it, but kube-scheduler's node affinity then fails the term on
  every node, so no node bought for the pod could ever take it.
- pkg/apis/core/validation/validation.go: `validateNodeTaints` (a taint's key required, a qualified name:
  `ValidateLabelName`).
- pkg/apis/storage/validation/validation.go: `validateVolumeBindingMode` (Immediate or
  WaitForFirstConsumer; the API server defaults an absent one to Immediate).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from scaler.core.config.specs import LABEL_KEY
from scaler.core.model.errors import FieldError

SPREAD_ACTIONS = ("DoNotSchedule", "ScheduleAnyway")
LABEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
BINDING_MODES = ("Immediate", "WaitForFirstConsumer")
_INT64 = re.compile(r"^[+-]?[0-9]+$")


def _positive(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _values(operator: str, values: Any, at: str) -> None:
    """The values an operator takes (node selector and label selector requirements alike)."""
    count = len(values) if isinstance(values, list) else 0
    if operator in ("In", "NotIn") and count == 0:
        raise FieldError(f"{at}.values", f"must be given when the operator is {operator}")
    if operator in ("Exists", "DoesNotExist") and count:
        raise FieldError(f"{at}.values", f"must be empty when the operator is {operator}")
    if operator in ("Gt", "Lt"):
        if count != 1:
            raise FieldError(f"{at}.values", f"must be exactly one value when the operator is {operator}")
        value = values[0]
        if not (isinstance(value, str) and _INT64.match(value) and -2**63 <= int(value) < 2**63):
            raise FieldError(f"{at}.values", f"{value!r} is not an integer, which {operator} compares")


def node_requirement(operator: str, values: Any, at: str) -> None:
    """One matchExpressions entry of a node selector term (the operator already one of the six)."""
    _values(operator, values, at)


def label_selector(raw: Any, at: str) -> None:
    """A metav1.LabelSelector (pod affinity, topology spread, namespaceSelector)."""
    if raw is None:
        return
    if not isinstance(raw, Mapping):
        raise FieldError(at, "expected an object")
    labels = raw.get("matchLabels") or {}
    if not isinstance(labels, Mapping) or not all(isinstance(v, str) for v in labels.values()):
        raise FieldError(f"{at}.matchLabels", "expected a mapping of strings to strings")
    exprs = raw.get("matchExpressions") or []
    if not isinstance(exprs, list) or not all(isinstance(e, Mapping) for e in exprs):
        raise FieldError(f"{at}.matchExpressions", "expected a list of objects")
    for i, expr in enumerate(exprs):
        where = f"{at}.matchExpressions[{i}]"
        if not isinstance(expr.get("key"), str) or not expr["key"]:
            raise FieldError(f"{where}.key", "must be a label key")
        operator = expr.get("operator")
        if operator not in LABEL_OPERATORS:
            raise FieldError(f"{where}.operator", f"{operator!r} is not a valid selector operator "
                             f"({', '.join(LABEL_OPERATORS)})")
        _values(operator, expr.get("values"), where)


def _topology_key(raw: Mapping[str, Any], at: str) -> None:
    if not isinstance(raw.get("topologyKey"), str) or not raw["topologyKey"]:
        raise FieldError(f"{at}.topologyKey", "must be a node label key, not empty")


def spread_constraint(raw: Mapping[str, Any], at: str) -> None:
    """One entry of spec.topologySpreadConstraints."""
    if not _positive(raw.get("maxSkew")):
        raise FieldError(f"{at}.maxSkew", f"{raw.get('maxSkew')!r} must be an integer greater than zero")
    _topology_key(raw, at)
    action = raw.get("whenUnsatisfiable")
    if action not in SPREAD_ACTIONS:
        raise FieldError(f"{at}.whenUnsatisfiable", f"{action!r} is not one of {', '.join(SPREAD_ACTIONS)}")
    if raw.get("minDomains") is not None:
        if not _positive(raw["minDomains"]):
            raise FieldError(f"{at}.minDomains", f"{raw['minDomains']!r} must be an integer greater than zero")
        if action != "DoNotSchedule":
            raise FieldError(f"{at}.minDomains", f"only with whenUnsatisfiable DoNotSchedule, not {action}")
    label_selector(raw.get("labelSelector"), f"{at}.labelSelector")


def affinity_term(raw: Mapping[str, Any], at: str) -> None:
    """One required pod affinity or anti-affinity term."""
    _topology_key(raw, at)
    label_selector(raw.get("labelSelector"), f"{at}.labelSelector")
    label_selector(raw.get("namespaceSelector"), f"{at}.namespaceSelector")


def binding_mode(raw: Mapping[str, Any]) -> None:
    """A StorageClass's volumeBindingMode."""
    mode = raw.get("volumeBindingMode")
    if mode is not None and mode not in BINDING_MODES:
        raise FieldError("volumeBindingMode", f"{mode!r} is not one of {', '.join(BINDING_MODES)}")


def taint_key(key: str, at: str) -> None:
    """A node taint's key: required, a qualified name (an optional DNS-subdomain prefix and '/', then a name)."""
    if not key:
        raise FieldError(f"{at}.key", "required")
    if not LABEL_KEY.match(key):
        raise FieldError(f"{at}.key", f"{key!r} is not a qualified name (an optional prefix and '/', then at most 63 "
                         "letters, digits, '-', '_' or '.')")
