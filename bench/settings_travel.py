"""How far the settings object (ScalerConfig) travels from the core's entry (issue 38's measure).

From the entry function, follow every call that hands the whole settings object on (the settings parameter,
or an attribute of `self` it was stored in), depth first, each function once, as a reader would: into each
callee and back out to its caller. Prints the calls followed (functions reached), the files they are in,
and how many steps of that walk (into a callee or back out of it) land in a file the walk had already
left; then the core functions that take the whole ScalerConfig. Static and approximate (calls are resolved
by name within scaler/core), the same way before and after.

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


STORED: dict[str, set[str]] = {}  # class -> attributes of self that hold the settings


def _functions() -> dict[Func, ast.FunctionDef]:
    out: dict[Func, ast.FunctionDef] = {}
    for path in sorted(CORE.rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        tree = ast.parse(path.read_text(), rel)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                out[(rel, node.name)] = node
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


def _settings_params(fn: ast.FunctionDef) -> set[str]:
    args = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
    return {a.arg for a in args if a.annotation is not None and "ScalerConfig" in ast.unparse(a.annotation)}


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
            if not any((isinstance(a, ast.Name) and a.id in names) or (isinstance(a, ast.Attribute) and a.attr in stored
                       and isinstance(a.value, ast.Name) and a.value.id == "self") for a in passed):
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


def main(argv: list[str]) -> int:
    funcs = _functions()
    spec = argv[0] if argv else ("scaler/core/planning/decide.py:decide" if (CORE / "planning" / "decide.py").exists()
                                 else "scaler/core/planning/provreq.py:serve")
    file, _, name = spec.partition(":")
    order = walk((file, name), funcs)
    left: set[str] = set()
    back = 0
    for prev, cur in itertools.pairwise(TOUR):
        if cur != prev:
            left.add(prev)
            back += cur in left
    takers = sum(1 for f in funcs.values() if _settings_params(f))
    print(f"settings travel from {spec}: {len(order) - 1} calls followed, {len({f for f, _ in order})} files, "
          f"{back} into a file already left; {takers} core functions take the whole ScalerConfig")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
