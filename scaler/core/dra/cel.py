"""CEL device selectors, evaluated as kube-scheduler evaluates them.

The environment follows upstream's (k8s.io/dynamic-resource-allocation/cel/compile.go): one variable
`device` with `driver`, `attributes` and `capacity` (both maps domain -> name -> value; unqualified
names in a slice belong to the driver's domain), Kubernetes' quantity and semver libraries
(`celext`), the strings extension and `cel.bind`. As upstream, looking up a domain the device does
not have gives an empty map (so `device.attributes["other.com"].x` is a "no such key" runtime error,
not a missing-domain one); here that default is had by adding an empty map for each string literal
of the expression that names no domain of the device. An expression is compiled (type-checked, so
`noSuchVar` is an "undeclared reference") once per process and cached.

The compile check is upstream's too (compile.go: "must evaluate to bool or the unknown type"), with the types
upstream declares: `device.driver` a string and `device.capacity[domain][name]` a quantity, so a selector
such as `device.driver` is refused as the API server refuses it; an attribute's value is of the unknown
type there as here (its misuse is a runtime error for both).

Not modelled: the runtime cost limit (CELSelectorExpressionMaxCost) and the libraries DRA selectors
hardly use (regex `find`, lists, url, ip/cidr, format).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_strings

from scaler.core.dra import celext
from scaler.core.model.dra import Device, Version, qualified

_STRING_LITERAL: Final = re.compile(r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*\"""")
# `device.driver` and `device.capacity` outside string literals, for the typed compile check (_typed).
_TYPED_FIELD: Final = re.compile(_STRING_LITERAL.pattern + r"""|\bdevice\s*\.\s*(driver|capacity)\b""")


class CelError(ValueError):
    """A selector that does not compile, or whose evaluation failed (CEL's message)."""


@dataclass(frozen=True, slots=True)
class Selector:
    expression: str
    program: Any  # cel.Expression
    literals: tuple[str, ...]  # string literals: domains the default empty map must cover


class _Env:
    def __init__(self) -> None:
        t = cel.Type
        tagged = t.Map(t.STRING, t.STRING)
        types = {"T": tagged, "string": t.STRING, "bool": t.BOOL, "int": t.INT, "double": t.DOUBLE}
        by_name: dict[str, list[Any]] = {}
        for name, ident, result, params, member, impl in celext.OVERLOADS:
            by_name.setdefault(name, []).append(cel.Overload(
                ident, types[result], [types[p] for p in params], is_member=member, impl=impl))
        decls = [cel.FunctionDecl(name, overloads) for name, overloads in by_name.items()]
        self.env = cel.NewEnv(
            variables={"device": t.Map(t.STRING, t.DYN)}, functions=decls,
            extensions=[ext_bindings.ExtBindings(), ext_strings.ExtStrings()],
        )
        # The fields upstream types (a string, maps of quantities) as variables of their own: `_typed` reads
        # an expression's result type here, where `device.driver` is no longer of the unknown type.
        self.typed = cel.NewEnv(
            variables={"device": t.Map(t.STRING, t.DYN), "device_driver__": t.STRING,
                       "device_capacity__": t.Map(t.STRING, t.Map(t.STRING, tagged))}, functions=decls,
            extensions=[ext_bindings.ExtBindings(), ext_strings.ExtStrings()],
        )
        self.tagged = tagged
        self.bool_type = t.BOOL
        self.dyn_type = t.DYN
        self.error_type = t.ERROR


_ENV: _Env | None = None
_CACHE: dict[str, Selector | CelError] = {}


def _env() -> _Env:
    global _ENV  # noqa: PLW0603 - one environment per process, built on first use
    if _ENV is None:
        _ENV = _Env()
    return _ENV


def compile_selector(expression: str) -> Selector:
    """The compiled expression (cached), or CelError with the compiler's message."""
    cached = _CACHE.get(expression)
    if cached is None:
        cached = _compile(expression)
        _CACHE[expression] = cached
    if isinstance(cached, CelError):
        raise cached
    return cached


def _compile(expression: str) -> Selector | CelError:
    env = _env()
    try:
        program = env.env.compile(expression)
    except RuntimeError as err:
        return CelError(f"compilation failed: {_clean(str(err))}")
    out = _typed(env, expression) or program.return_type()
    if out not in (env.bool_type, env.dyn_type):
        name = "quantity" if out == env.tagged else out.name().lower()
        return CelError(f"must evaluate to bool or the unknown type, not {name}")
    literals = tuple(dict.fromkeys(lit[1:-1] for lit in _STRING_LITERAL.findall(expression)))
    return Selector(expression, program, literals)


def _typed(env: _Env, expression: str) -> Any:
    """The result type with `device.driver` a string and capacities quantities, or None when it does not
    compile so (the plain compile's verdict stands)."""
    def field(m: re.Match[str]) -> str:
        return f"device_{m.group(1)}__" if m.group(1) else m.group(0)

    rewritten = _TYPED_FIELD.sub(field, expression)
    if rewritten == expression:
        return None
    try:
        return env.typed.compile(rewritten).return_type()
    except RuntimeError:
        return None


def _clean(message: str) -> str:
    return message.removeprefix("INVALID_ARGUMENT: ").replace(" [INVALID_ARGUMENT]", "").strip()


def device_variable(driver: str, device: Device) -> dict[str, Any]:
    """The `device` variable without the default domains (see `evaluate`)."""
    attributes: dict[str, dict[str, Any]] = {}
    for name, value in device.attributes.items():
        domain, ident = qualified(name, driver)
        attributes.setdefault(domain, {})[ident] = (
            celext.semver_value(value.text) if isinstance(value, Version) else value)
    capacity: dict[str, dict[str, Any]] = {}
    for name, amount in device.capacity.items():
        domain, ident = qualified(name, driver)
        capacity.setdefault(domain, {})[ident] = celext.canonical_quantity(amount)
    return {"driver": driver, "attributes": attributes, "capacity": capacity,
            "allowMultipleAllocations": device.allow_multiple}


def evaluate(selector: Selector, variable: dict[str, Any]) -> bool:
    """True when the device matches; CelError on a runtime error (a missing key, a bad overload)."""
    attributes, capacity = variable["attributes"], variable["capacity"]
    missing = [lit for lit in selector.literals if lit not in attributes or lit not in capacity]
    if missing:
        attributes, capacity = dict(attributes), dict(capacity)
        for lit in missing:
            attributes.setdefault(lit, {})
            capacity.setdefault(lit, {})
        variable = {**variable, "attributes": attributes, "capacity": capacity}
    env = _env()
    result = selector.program.eval(data={"device": variable})
    kind = result.type()
    value = result.value()
    if kind == env.error_type or (kind != env.bool_type and isinstance(value, str)):
        raise CelError(f"runtime error: {value}")
    if not isinstance(value, bool):
        raise CelError(f"CEL result of type {kind.name()} could not be converted to bool")
    return value
