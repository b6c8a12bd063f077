"""Import cycles in `scaler/`, counting every import: module level, inside functions, under TYPE_CHECKING.

import-linter follows module-level imports only, and an import cycle hidden inside a function (or behind
TYPE_CHECKING) is still a cycle in the design. This reads every `import` of the package's own modules
with `ast`, prints each cycle (a strongly connected set of modules, with one loop through it) and
each import of the package's own modules inside a function, and fails (exit 1) when there is a cycle or
more than MAX_FUNCTION_IMPORTS function-level imports. Imports of optional dependencies (ray, matplotlib)
are not the package's own modules and are not counted.

Usage: python tests/lint_cycles.py [--quiet]      (run by tests/lint-extra.sh, so by `make lint`)
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "scaler"
MAX_FUNCTION_IMPORTS = 6


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _absolute(mod: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _targets(mod: str, path: Path, node: ast.Import | ast.ImportFrom, known: dict[str, Path]) -> list[str]:
    """The package's own modules an import statement names: `from a.b import c` is a.b.c when c is a
    module, a.b otherwise."""
    found = []
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = _absolute(mod, path, node)
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
    for named in names:
        name = named
        while name and name not in known:  # `import a.b.c` of a name that is not a module: its package
            name = name.rpartition(".")[0]
        if name and name.split(".")[0] == PACKAGE:
            found.append(name)
    return found


def _in_function(tree: ast.Module) -> set[int]:
    """The ids of the import statements that sit inside a function body."""
    inside: set[int] = set()
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            inside.update(id(n) for n in ast.walk(fn) if isinstance(n, ast.Import | ast.ImportFrom))
    return inside


def scan() -> tuple[dict[str, set[str]], list[tuple[str, int, str]]]:
    """The import graph (module -> the package's modules it imports) and the function-level imports
    (module, line, imported module)."""
    known = modules()
    graph: dict[str, set[str]] = {m: set() for m in known}
    local: list[tuple[str, int, str]] = []
    for mod, path in known.items():
        tree = ast.parse(path.read_text(), str(path))
        inside = _in_function(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for target in _targets(mod, path, node, known):
                    if target != mod:
                        graph[mod].add(target)
                    if id(node) in inside and (mod, node.lineno, target) not in local:
                        local.append((mod, node.lineno, target))
    return graph, sorted(local)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module, each as its modules, sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def loop_through(comp: list[str], graph: dict[str, set[str]]) -> list[str]:
    """One shortest loop from the component's first module back to itself, to show where it closes."""
    start, members = comp[0], set(comp)
    prev: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & members):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    return [start, *reversed(path[:-1]), start] if v != start else [start, start]
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return comp


def main(argv: list[str]) -> int:
    graph, local = scan()
    found = cycles(graph)
    quiet = "--quiet" in argv
    for comp in found:
        print(f"cycle ({len(comp)} modules): {' -> '.join(loop_through(comp, graph))}")
    if not quiet or len(local) > MAX_FUNCTION_IMPORTS:
        for mod, line, target in local:
            print(f"function-level import: {mod}:{line} imports {target}")
    core = sum(1 for mod, _, _ in local if mod.startswith(f"{PACKAGE}.core"))
    print(f"lint_cycles: {len(found)} import cycle(s), {len(local)} function-level import(s) of {PACKAGE}'s "
          f"own modules ({core} in the core; at most {MAX_FUNCTION_IMPORTS})")
    return 1 if found or len(local) > MAX_FUNCTION_IMPORTS else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
