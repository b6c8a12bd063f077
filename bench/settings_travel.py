"""How far the settings travel from the core's entry (issue 38's measure).

From the entry function, follow every call that hands the settings on, depth first, each function once, as a
reader would: into each callee and back out to its caller. Prints the calls followed (functions reached), the
files they are in, and how many steps of that walk (into a callee or back out of it) land in a file the walk
had already left; then how many core functions take the whole ScalerConfig, and the PlanningContext.

"The settings" is the whole settings object, the ScalerConfig or the PlanningContext the entry makes from it
(scaler/core/planning/context.py): a parameter annotated with either, a local assigned from a call that returns
one (`ctx = planning_context(config, memo)`), or an attribute of `self` one was stored in. The second line
follows their parts too (Timings, ScaleDownSettings, Limits: a parameter of that type, or `ctx.timings`
passed on), which is where the settings still go once the whole object stops. Static and approximate (calls
are resolved by name within scaler/core), the same way before and after; before the PlanningContext the
first line is what the first version of this script printed (it followed the ScalerConfig alone).

Usage: python bench/settings_travel.py [ENTRY]     (ENTRY: module:function, default the core's entry)
"""

from __future__ import annotations

import ast
import itertools
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "scaler" / "core"
Func = tuple[str, str]  # (file relative to the repo, qualified name)


WHOLE = ("ScalerConfig", "PlanningContext")
PARTS = ("Timings", "ScaleDownSettings", "Limits")
PART_ATTRS = frozenset({"timings", "scale_down", "limits"})  # the parts, as attributes of the whole
KINDS: list[str] = list(WHOLE)  # what the walk follows (main sets it)
STORED: dict[str, set[str]] = {}  # class -> attributes of self that hold the settings
RETURNS: dict[str, str] = {}  # function name -> its return annotation


def _functions() -> dict[Func, ast.FunctionDef]:
    out: dict[Func, ast.FunctionDef] = {}
    STORED.clear()
    for path in sorted(CORE.rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        tree = ast.parse(path.read_text(), rel)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                out[(rel, node.name)] = node
                if node.returns is not None:
                    RETURNS[node.name] = ast.unparse(node.returns)
            elif isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef):
                        out[(rel, f"{node.name}.{item.name}")] = item
                        params = _settings_params(item)
                        for a in ast.walk(item):
                            if isinstance(a, ast.Assign) and isinstance(a.value, ast.Name) and a.value.id in params:
                                STORED.setdefault(node.name, set()).update(
                                    t.attr for t in a.targets if isinstance(t, ast.Attribute))
                        if item.name == "__init__":
                            out[(rel, node.name)] = item  # calling the class runs __init__
    return out


def _takes(fn: ast.FunctionDef, kinds: tuple[str, ...]) -> set[str]:
    """The parameters annotated with one of `kinds`."""
    args = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
    return {a.arg for a in args if a.annotation is not None
            and any(k in ast.unparse(a.annotation) for k in kinds)}


def _settings_params(fn: ast.FunctionDef) -> set[str]:
    """The names in `fn` that hold the settings: its parameters of the kinds followed, and the locals assigned
    from a call to a function that returns one."""
    names = _takes(fn, tuple(KINDS))
    for a in ast.walk(fn):
        if isinstance(a, ast.Assign) and isinstance(a.value, ast.Call):
            callee = _callee_name(a.value)
            if callee is not None and any(k in RETURNS.get(callee, "") for k in KINDS):
                names.update(t.id for t in a.targets if isinstance(t, ast.Name))
    return names


def _hands_on(a: ast.expr, names: set[str], stored: set[str]) -> bool:
    """Whether the argument is the settings (or, when parts are followed, a part of them: `ctx.timings`)."""
    if isinstance(a, ast.Name):
        return a.id in names
    if isinstance(a, ast.Attribute) and isinstance(a.value, ast.Name):
        if a.value.id == "self" and a.attr in stored:
            return True
        return tuple(KINDS) != WHOLE and a.attr in PART_ATTRS and a.value.id in names
    return False


def _callee_name(call: ast.Call) -> str | None:
    f = call.func
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Attribute):
        return f.attr
    return None


def walk(entry: Func, funcs: dict[Func, ast.FunctionDef]) -> list[Func]:
    by_name: dict[str, list[Func]] = {}
    for key in funcs:
        by_name.setdefault(key[1].rsplit(".", 1)[-1], []).append(key)
        by_name.setdefault(key[1], []).append(key)
    seen: list[Func] = []
    tour: list[str] = []  # the files the reader is in, step by step (into each callee, back to its caller)

    def visit(key: Func) -> None:
        if key in seen:
            return
        seen.append(key)
        tour.append(key[0])
        fn = funcs[key]
        names = _settings_params(fn)
        stored = STORED.get(key[1].split(".")[0], set()) if "." in key[1] else set()
        for call in ast.walk(fn):
            if not isinstance(call, ast.Call):
                continue
            passed = [*call.args, *(k.value for k in call.keywords)]
            if not any(_hands_on(a, names, stored) for a in passed):
                continue
            name = _callee_name(call)
            targets = [t for t in by_name.get(name or "", []) if t[0] == key[0]] or by_name.get(name or "", [])
            if (len(targets) == 1 or (targets and all(t[0] == targets[0][0] for t in targets))) \
                    and targets[0] not in seen:
                visit(targets[0])
                tour.append(key[0])

    visit(entry)
    TOUR[:] = tour
    return seen


TOUR: list[str] = []


def _travel(entry: Func) -> tuple[int, int, int]:
    """(calls followed, files, steps into a file already left) from the entry, for the kinds in KINDS."""
    funcs = _functions()
    order = walk(entry, funcs)
    left: set[str] = set()
    back = 0
    for prev, cur in itertools.pairwise(TOUR):
        if cur != prev:
            left.add(prev)
            back += cur in left
    return len(order) - 1, len({f for f, _ in order}), back


def main(argv: list[str]) -> int:
    spec = argv[0] if argv else ("scaler/core/planning/decide.py:decide" if (CORE / "planning" / "decide.py").exists()
                                 else "scaler/core/planning/provreq.py:serve")
    file, _, name = spec.partition(":")
    KINDS[:] = WHOLE
    calls, files, back = _travel((file, name))
    funcs = _functions()
    whole = sum(1 for f in funcs.values() if _takes(f, ("ScalerConfig",)))
    ctx = sum(1 for f in funcs.values() if _takes(f, ("PlanningContext",)))
    print(f"settings travel from {spec}: {calls} calls followed, {files} files, {back} into a file already left; "
          f"{whole} core functions take the whole ScalerConfig, {ctx} the PlanningContext")
    KINDS[:] = WHOLE + PARTS
    calls, files, back = _travel((file, name))
    parts = sum(1 for f in funcs.values() if _takes(f, PARTS) and not _takes(f, WHOLE))
    print(f"  with their parts ({', '.join(PARTS)}): {calls} calls followed, {files} files, {back} into a file "
          f"already left; {parts} core functions take only a part")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
