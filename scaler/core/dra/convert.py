"""resource.k8s.io/v1 objects as `kubectl get ... -o json` prints them -> the DRA model.

Bad input raises DraInputError naming the object ("ResourceClaim ml/train-0") and the field
("spec.devices.requests[0].exactly.count"). What the API server refuses is refused here too (a snapshot cannot
hold it; a live object that carries it was never checked), as kubernetes/kubernetes
pkg/apis/resource/validation/validation.go does: `validateDeviceRequest` (a request's and a subrequest's name
a DNS label, unique in its list), `validateExactDeviceRequest` (deviceClassName required, a DNS subdomain;
allocationMode ExactCount with count > 0 or All without a count; anything else "Unsupported value"),
`validateSelector` (a CEL selector that compiles to bool: scaler.core.dra.cel), `validateDeviceConstraint`
(each of `requests` names a request of the claim, or "request/subrequest"; matchAttribute required unless
distinctAttribute is given, and `validateFullyQualifiedName`: a DNS-subdomain domain, "/", and a C identifier
of at most 32 characters).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from typing import Any, TypeVar

from scaler.core.dra.cel import CelError, compile_selector
from scaler.core.model.dra import (
    ALL,
    EXACT_COUNT,
    NO_EXECUTE,
    NO_SCHEDULE,
    Allocation,
    CapacityPolicy,
    ClaimSpec,
    Constraint,
    CounterConsumption,
    CounterSet,
    Device,
    DeviceClass,
    DeviceRequest,
    DeviceResult,
    DeviceTaint,
    DeviceTaintRule,
    DeviceToleration,
    ExactRequest,
    PoolRef,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
    Version,
)
from scaler.core.model.objects import SelectorRequirement, SelectorTerm
from scaler.core.model.quantity import QuantityError, parse_quantity

T = TypeVar("T")
Obj = dict[str, Any]

# k8s.io/apimachinery/pkg/util/validation: IsDNS1123Label, IsDNS1123Subdomain; the resource API's
# validateQualifiedName: a C identifier of at most 32 characters after the domain (resource.DeviceMaxIDLength).
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,31}$")
# IsQualifiedName (a label name) and IsValidLabelValue
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
TAINT_EFFECTS = (NO_SCHEDULE, NO_EXECUTE, "None")  # validDeviceTaintEffects
TOLERATION_OPERATORS = ("Equal", "Exists")
TOLERATIONS_MAX = 16  # resource.k8s.io/v1 DeviceTolerationsMaxLength
ALLOCATION_MODES = (EXACT_COUNT, ALL)


class DraInputError(ValueError):
    def __init__(self, what: str, path: str, message: str) -> None:
        super().__init__(f"{what}: {path}: {message}")
        self.what, self.path, self.message = what, path, message


class _At:
    """Reads fields of one object, raising DraInputError with the object and the path."""

    def __init__(self, what: str) -> None:
        self.what = what

    def fail(self, path: str, message: str) -> DraInputError:
        return DraInputError(self.what, path, message)

    def get(self, obj: Obj, key: str, path: str, kind: type[T], default: T) -> T:
        value = obj.get(key, default)
        if value is None:
            return default
        if (kind is int and isinstance(value, bool)) or not isinstance(value, kind):
            raise self.fail(f"{path}.{key}".lstrip("."), f"expected {kind.__name__}, got {value!r}")
        return value

    def items(self, obj: Obj, key: str, path: str, each: Callable[[Obj, str], T]) -> tuple[T, ...]:
        values = self.get(obj, key, path, list, [])
        out = []
        for i, v in enumerate(values):
            where = f"{path}.{key}[{i}]".lstrip(".")
            if not isinstance(v, dict):
                raise self.fail(where, f"expected an object, got {v!r}")
            out.append(each(v, where))
        return tuple(out)

    def quantity(self, value: object, path: str) -> Decimal:
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise self.fail(path, f"not a quantity: {value!r}")
        try:
            return parse_quantity(value)
        except QuantityError as err:
            raise self.fail(path, str(err)) from None

    def selectors(self, obj: Obj, path: str) -> tuple[str, ...]:
        def one(sel: Obj, where: str) -> str:
            cel = self.get(sel, "cel", where, dict, {})
            expression = self.get(cel, "expression", f"{where}.cel", str, "")  # empty: an unknown selector type
            if expression:  # as the API server's validation: a selector that does not compile is refused
                try:
                    compile_selector(expression)
                except CelError as err:  # one line: the compiler's, without its caret drawing
                    why = " ".join(line for line in str(err).splitlines() if not line.lstrip().startswith("|"))
                    raise self.fail(f"{where}.cel.expression", f"CEL compile error: {why}") from None
            return expression

        return self.items(obj, "selectors", path, one)

    def node_selector(self, obj: Obj, key: str, path: str) -> tuple[SelectorTerm, ...] | None:
        raw = self.get(obj, key, path, dict, {})
        if key not in obj or obj[key] is None:
            return None

        def term(t: Obj, where: str) -> SelectorTerm:
            def req(field: bool) -> Callable[[Obj, str], SelectorRequirement]:
                def build(r: Obj, w: str) -> SelectorRequirement:
                    op = self.get(r, "operator", w, str, "")
                    if op not in ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"):
                        raise self.fail(f"{w}.operator", f"unknown operator {op!r}")
                    values = tuple(str(v) for v in self.get(r, "values", w, list, []))
                    return SelectorRequirement(self.get(r, "key", w, str, ""), op, values, field=field)  # type: ignore[arg-type]
                return build
            return self.items(t, "matchExpressions", where, req(False)) + self.items(t, "matchFields", where, req(True))

        return self.items(raw, "nodeSelectorTerms", f"{path}.{key}".lstrip("."), term)


def _what(kind: str, obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    name = meta.get("name", "?")
    ns = meta.get("namespace")
    return f"{kind} {ns}/{name}" if ns else f"{kind} {name}"


def device_class(obj: Obj) -> DeviceClass:
    at = _At(_what("DeviceClass", obj))
    spec = at.get(obj, "spec", "", dict, {})
    ext = at.get(spec, "extendedResourceName", "spec", str, "") or None
    return DeviceClass(name=obj.get("metadata", {}).get("name", ""), selectors=at.selectors(spec, "spec"),
                       extended_resource_name=ext)


def _exact(at: _At, obj: Obj, path: str, name: str) -> ExactRequest:
    mode = at.get(obj, "allocationMode", path, str, EXACT_COUNT) or EXACT_COUNT
    if mode not in ALLOCATION_MODES:
        raise at.fail(f"{path}.allocationMode", f"Unsupported value {mode!r}: supported values: "
                      f"{', '.join(ALLOCATION_MODES)}")
    if mode == ALL and obj.get("count") not in (None, 0):
        raise at.fail(f"{path}.count", "must not be specified when allocationMode is All")
    count = at.get(obj, "count", path, int, 1 if mode == EXACT_COUNT else 0)
    if mode == EXACT_COUNT and count < 1:
        raise at.fail(f"{path}.count", f"must be at least 1, got {count}")
    device_class = at.get(obj, "deviceClassName", path, str, "")
    if not device_class:
        raise at.fail(f"{path}.deviceClassName", "required")
    if len(device_class) > 253 or not _DNS_SUBDOMAIN.match(device_class):
        raise at.fail(f"{path}.deviceClassName", f"{device_class!r} is not a DNS subdomain (lower-case letters, "
                      "digits, '-' and '.')")
    tolerations = at.items(obj, "tolerations", path, lambda t, w: _toleration(at, t, w))
    if len(tolerations) > TOLERATIONS_MAX:
        raise at.fail(f"{path}.tolerations", f"must have at most {TOLERATIONS_MAX} items, got {len(tolerations)}")
    capacity = at.get(obj, "capacity", path, dict, {})
    requests = at.get(capacity, "requests", f"{path}.capacity", dict, {})
    asked = tuple((str(k), at.quantity(v, f"{path}.capacity.requests[{k}]")) for k, v in sorted(requests.items()))
    return ExactRequest(name=name, device_class_name=device_class, selectors=at.selectors(obj, path),
                        allocation_mode=mode, count=count, tolerations=tolerations, capacity=asked)


def _label_name(at: _At, name: str, path: str) -> None:
    """metav1validation.ValidateLabelName: [DNS-subdomain prefix /] name of at most 63."""
    prefix, sep, ident = name.rpartition("/")
    if (sep and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix))) or not _LABEL_NAME.match(ident):
        raise at.fail(path, f"{name!r} is not a qualified name ([DNS subdomain/]name of at most 63 alphanumerics, "
                      "'-', '_' or '.')")


def _label_value(at: _At, value: str, path: str) -> None:
    if not _LABEL_VALUE.match(value):
        raise at.fail(path, f"{value!r} is not a label value (at most 63 alphanumerics, '-', '_' or '.')")


def _toleration(at: _At, t: Obj, where: str) -> DeviceToleration:
    """validateDeviceToleration (after defaulting: an omitted operator is Equal)."""
    key = at.get(t, "key", where, str, "")
    if key:
        _label_name(at, key, f"{where}.key")
    op = at.get(t, "operator", where, str, "") or "Equal"
    value = at.get(t, "value", where, str, "")
    if op not in TOLERATION_OPERATORS:
        raise at.fail(f"{where}.operator",
                      f"Unsupported value {op!r}: supported values: {', '.join(TOLERATION_OPERATORS)}")
    if op == "Exists" and value:
        raise at.fail(f"{where}.value", f"{value!r}: must be empty for operator `Exists`")
    if op == "Equal":
        _label_value(at, value, f"{where}.value")
    effect = at.get(t, "effect", where, str, "")
    if effect and effect not in TAINT_EFFECTS:
        raise at.fail(f"{where}.effect", f"Unsupported value {effect!r}: supported values: {', '.join(TAINT_EFFECTS)}")
    return DeviceToleration(key, op, value, effect)


def _taint(at: _At, t: Obj, where: str) -> DeviceTaint:
    """validateDeviceTaint: a key (label name), a label value, an effect of None, NoSchedule or NoExecute."""
    key = at.get(t, "key", where, str, "")
    _label_name(at, key, f"{where}.key")
    value = at.get(t, "value", where, str, "")
    _label_value(at, value, f"{where}.value")
    effect = at.get(t, "effect", where, str, "")
    if effect not in TAINT_EFFECTS:
        raise at.fail(f"{where}.effect", f"Unsupported value {effect!r}: supported values: {', '.join(TAINT_EFFECTS)}"
                      if effect else "required")
    added = at.get(t, "timeAdded", where, str, "")
    return DeviceTaint(key, value, effect, _timestamp(added) if added else 0.0)


def _timestamp(text: str) -> float:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def device_taint_rule(obj: Obj) -> DeviceTaintRule:
    at = _At(_what("DeviceTaintRule", obj))
    spec = at.get(obj, "spec", "", dict, {})
    raw = spec.get("deviceSelector")
    selector = at.get(spec, "deviceSelector", "spec", dict, {})
    taint = _taint(at, at.get(spec, "taint", "spec", dict, {}), "spec.taint")
    pick = {k: at.get(selector, k, "spec.deviceSelector", str, "") or None for k in ("driver", "pool", "device")}
    return DeviceTaintRule(obj.get("metadata", {}).get("name", ""), taint, selects_none=raw is None, **pick)


def _names(at: _At, names: list[str], path: str, what: str) -> None:
    """Each of a list's names a DNS label, none twice (the API server's validateSet of request names)."""
    seen: set[str] = set()
    for i, name in enumerate(names):
        if not _DNS_LABEL.match(name):
            raise at.fail(f"{path}[{i}].name", f"{name!r} is not a {what} name: a DNS label (at most 63 lower-case "
                          "letters, digits or '-')")
        if name in seen:
            raise at.fail(f"{path}[{i}].name", f"Duplicate value {name!r}")
        seen.add(name)


def _qualified_name(at: _At, name: str, path: str) -> None:
    """validateFullyQualifiedName: DOMAIN/ID with a DNS-subdomain domain and a C identifier of at most 32."""
    domain, sep, ident = name.partition("/")
    if not sep or not domain:
        raise at.fail(path, f"{name!r} must include a domain (DOMAIN/NAME, e.g. resource.kubernetes.io/pcieRoot)")
    if len(domain) > 63 or not _DNS_SUBDOMAIN.match(domain):
        raise at.fail(path, f"{name!r}: the domain {domain!r} is not a DNS subdomain of at most 63 characters")
    if not _C_IDENTIFIER.match(ident):
        raise at.fail(path, f"{name!r}: {ident!r} is not a C identifier of at most 32 characters")


def _claim_spec(at: _At, spec: Obj, path: str) -> ClaimSpec:
    devices = at.get(spec, "devices", path, dict, {})
    dpath = f"{path}.devices".lstrip(".")

    def request(r: Obj, where: str) -> DeviceRequest:
        name = at.get(r, "name", where, str, "")
        has_exact, has_first = "exactly" in r, "firstAvailable" in r
        if not has_exact and not has_first and "deviceClassName" in r:
            return DeviceRequest(name, exactly=_exact(at, r, where, name))  # v1beta1: the fields inline
        if has_exact == has_first:
            raise at.fail(where, "exactly one of exactly and firstAvailable must be set")
        if has_exact:
            exact = at.get(r, "exactly", where, dict, {})
            return DeviceRequest(name, exactly=_exact(at, exact, f"{where}.exactly", name))
        subs = at.items(r, "firstAvailable", where,
                        lambda s, w: _exact(at, s, w, at.get(s, "name", w, str, "")))
        if not subs:
            raise at.fail(f"{where}.firstAvailable", "must list at least one subrequest")
        _names(at, [s.name for s in subs], f"{where}.firstAvailable", "subrequest")
        return DeviceRequest(name, first_available=subs)

    requests = at.items(devices, "requests", dpath, request)
    _names(at, [r.name for r in requests], f"{dpath}.requests", "request")
    known = {r.name for r in requests} | {f"{r.name}/{s.name}" for r in requests for s in r.first_available}

    def constraint(c: Obj, where: str) -> Constraint:
        names = tuple(str(x) for x in at.get(c, "requests", where, list, []))
        for i, ref in enumerate(names):
            if ref not in known:
                raise at.fail(f"{where}.requests[{i}]", f"{ref!r} must be the name of a request in the claim "
                              f"or REQUEST/SUBREQUEST (requests: {', '.join(sorted(known)) or 'none'})")
        attr = at.get(c, "matchAttribute", where, str, "")
        if "matchAttribute" in c and c["matchAttribute"] is not None:
            _qualified_name(at, attr, f"{where}.matchAttribute")
        elif c.get("distinctAttribute") is None:
            raise at.fail(f"{where}.matchAttribute", "required (a constraint sets matchAttribute or "
                          "distinctAttribute)")
        return Constraint(attr or None, names)

    return ClaimSpec(requests=requests, constraints=at.items(devices, "constraints", dpath, constraint))


def resource_claim(obj: Obj) -> ResourceClaim:
    at = _At(_what("ResourceClaim", obj))
    meta = obj.get("metadata") or {}
    spec = _claim_spec(at, at.get(obj, "spec", "", dict, {}), "spec")
    status = at.get(obj, "status", "", dict, {})
    allocation = None
    if status.get("allocation"):
        alloc = at.get(status, "allocation", "status", dict, {})
        devices = at.get(alloc, "devices", "status.allocation", dict, {})

        def result(r: Obj, where: str) -> DeviceResult:
            consumed = at.get(r, "consumedCapacity", where, dict, {})
            request, driver, pool, device = (at.get(r, k, where, str, "")
                                             for k in ("request", "driver", "pool", "device"))
            return DeviceResult(request, driver, pool, device, share_id=at.get(r, "shareID", where, str, "") or None,
                                consumed=tuple((str(k), at.quantity(v, f"{where}.consumedCapacity[{k}]"))
                                               for k, v in sorted(consumed.items())))

        allocation = Allocation(results=at.items(devices, "results", "status.allocation.devices", result),
                                node_selector=at.node_selector(alloc, "nodeSelector", "status.allocation"))
    reserved = at.items(status, "reservedFor", "status", lambda r, w: at.get(r, "name", w, str, ""))
    return ResourceClaim(namespace=meta.get("namespace", "default"), name=meta.get("name", ""), spec=spec,
                         allocation=allocation, reserved_for=reserved)


def resource_claim_template(obj: Obj) -> ResourceClaimTemplate:
    at = _At(_what("ResourceClaimTemplate", obj))
    meta = obj.get("metadata") or {}
    outer = at.get(obj, "spec", "", dict, {})
    spec = _claim_spec(at, at.get(outer, "spec", "spec", dict, {}), "spec.spec")
    return ResourceClaimTemplate(namespace=meta.get("namespace", "default"), name=meta.get("name", ""), spec=spec)


def _attribute(at: _At, value: Obj, where: str) -> str | int | bool | Version:
    kinds = [k for k in ("string", "int", "bool", "version") if k in value]
    if len(kinds) != 1:
        raise at.fail(where, "exactly one of string, int, bool and version must be set")
    raw = value[kinds[0]]
    expected: type = {"string": str, "int": int, "bool": bool, "version": str}[kinds[0]]
    if not isinstance(raw, expected) or (expected is int and isinstance(raw, bool)):
        raise at.fail(f"{where}.{kinds[0]}", f"expected {kinds[0]}, got {raw!r}")
    if isinstance(raw, str) and kinds[0] == "version":
        return Version(raw)
    assert isinstance(raw, str | int | bool)
    return raw


def _device(at: _At, d: Obj, where: str) -> Device:
    attrs = {k: _attribute(at, v if isinstance(v, dict) else {}, f"{where}.attributes[{k}]")
             for k, v in at.get(d, "attributes", where, dict, {}).items()}
    raw = at.get(d, "capacity", where, dict, {})
    capacity = {k: at.quantity((v or {}).get("value") if isinstance(v, dict) else None, f"{where}.capacity[{k}].value")
                for k, v in raw.items()}
    multiple = at.get(d, "allowMultipleAllocations", where, bool, False)
    policies = {k: _policy(at, v["requestPolicy"], capacity[k], f"{where}.capacity[{k}].requestPolicy", multiple)
                for k, v in raw.items() if isinstance(v, dict) and v.get("requestPolicy") is not None}

    def consumption(c: Obj, w: str) -> CounterConsumption:
        counters = {k: at.quantity((v or {}).get("value") if isinstance(v, dict) else None, f"{w}.counters[{k}].value")
                    for k, v in at.get(c, "counters", w, dict, {}).items()}
        return CounterConsumption(at.get(c, "counterSet", w, str, ""), counters)

    return Device(name=at.get(d, "name", where, str, ""), attributes=attrs, capacity=capacity,
                  allow_multiple=multiple, policies=policies,
                  consumes_counters=at.items(d, "consumesCounters", where, consumption),
                  taints=at.items(d, "taints", where, lambda t, w: _taint(at, t, w)),
                  node_name=at.get(d, "nodeName", where, str, "") or None,
                  node_selector=at.node_selector(d, "nodeSelector", where),
                  all_nodes=at.get(d, "allNodes", where, bool, False))


def _policy(at: _At, raw: object, value: Decimal, where: str, multiple: bool) -> CapacityPolicy:
    """validateMultiAllocatableDeviceCapacity / validateSingleAllocatableDeviceCapacity: a requestPolicy only
    on a device that allows multiple allocations; validValues (ascending, within the capacity, the default
    among them) or validRange (min within the capacity and not above the default, max within it, step > 0
    with min + step within it, the default and max on a step), each with a default."""
    if not multiple:
        raise at.fail(where, "Forbidden: allowMultipleAllocations must be true")
    if not isinstance(raw, dict):
        raise at.fail(where, f"expected an object, got {raw!r}")

    def q(key: str, obj: Obj = raw, path: str = where) -> Decimal | None:
        return at.quantity(obj[key], f"{path}.{key}") if obj.get(key) is not None else None

    default = q("default")
    values = tuple(at.quantity(v, f"{where}.validValues[{i}]")
                   for i, v in enumerate(at.get(raw, "validValues", where, list, [])))
    span = at.get(raw, "validRange", where, dict, {})
    if values and span:
        raise at.fail(where, 'Forbidden: exactly one policy can be specified, cannot specify "validValues" and '
                      '"validRange" at the same time')
    if (values or span) and default is None:
        raise at.fail(f"{where}.default", f"Required value: required when {'validValues' if values else 'validRange'} "
                      "is defined")
    if values:
        for i in range(1, len(values)):
            if values[i - 1] > values[i]:
                raise at.fail(f"{where}.validValues[{i}]", f"Invalid value: {values[i]}: values must be sorted in "
                              "ascending order")
        for i, v in enumerate(values):
            if v > value:
                raise at.fail(f"{where}.validValues[{i}]", f"Invalid value: {v}: option is larger than capacity "
                              f"value: {value}")
        if default not in values:
            raise at.fail(f"{where}.validValues", f"Invalid value: {default}: default value is not valid according "
                          "to the requestPolicy")
        return CapacityPolicy(default, values)
    if not span:
        return CapacityPolicy(default)
    rpath = f"{where}.validRange"
    lowest, highest, step = q("min", span, rpath), q("max", span, rpath), q("step", span, rpath)
    assert default is not None
    if lowest is None:
        raise at.fail(f"{rpath}.min", "Required value: required when validRange is defined")
    problems = [(f"{rpath}.min", lowest > value, f"{lowest}: min is larger than capacity value: {value}"),
                (f"{rpath}.default", default < lowest, f"{default}: default is less than min: {lowest}")]
    if highest is not None:
        problems += [(f"{rpath}.max", lowest > highest, f"{lowest}: min is larger than max: {highest}"),
                     (f"{rpath}.max", highest > value, f"{highest}: max is larger than capacity value: {value}"),
                     (f"{rpath}.default", default > highest, f"{default}: default is more than max: {highest}")]
    if step is not None:
        problems.append((f"{rpath}.step", step <= 0, f"{step}: must be greater than zero"))
        if step > 0:
            problems += [(f"{rpath}.step", lowest + step > value,
                          f"{step}: one step {lowest + step} is larger than capacity value: {value}")]
            problems += [(f"{rpath}.step", (v - lowest) % step != 0, f"{v}: value is not a multiple of step {step} "
                          f"from min {lowest}") for v in (default, highest) if v is not None]
    for path, bad, message in problems:
        if bad:
            raise at.fail(path, f"Invalid value: {message}")
    return CapacityPolicy(default, (), lowest, highest, step)


def resource_slice(obj: Obj) -> ResourceSlice:
    at = _At(_what("ResourceSlice", obj))
    spec = at.get(obj, "spec", "", dict, {})
    pool = at.get(spec, "pool", "spec", dict, {})
    if not pool.get("name"):
        raise at.fail("spec.pool.name", "required")

    def counter_set(c: Obj, w: str) -> CounterSet:
        counters = {k: at.quantity((v or {}).get("value") if isinstance(v, dict) else None, f"{w}.counters[{k}].value")
                    for k, v in at.get(c, "counters", w, dict, {}).items()}
        return CounterSet(at.get(c, "name", w, str, ""), counters)

    return ResourceSlice(
        name=obj.get("metadata", {}).get("name", ""), driver=at.get(spec, "driver", "spec", str, ""),
        pool=PoolRef(at.get(pool, "name", "spec.pool", str, ""), at.get(pool, "generation", "spec.pool", int, 0),
                     at.get(pool, "resourceSliceCount", "spec.pool", int, 1)),
        node_name=at.get(spec, "nodeName", "spec", str, "") or None,
        node_selector=at.node_selector(spec, "nodeSelector", "spec"),
        all_nodes=at.get(spec, "allNodes", "spec", bool, False),
        per_device_node_selection=at.get(spec, "perDeviceNodeSelection", "spec", bool, False),
        devices=at.items(spec, "devices", "spec", lambda d, w: _device(at, d, w)),
        shared_counters=at.items(spec, "sharedCounters", "spec", counter_set),
    )
