"""The layers import downward only (docs/ARCHITECTURE.md), read from the source with ``ast``.

- Runtime, graph, operator, bench and command modules never import the algorithms
  (``groute.apps``) or the tools (``groute.topology``); only the facade may
  (``groute/__init__.py``, ``__main__.py``, ``cli.py``), and it names them in the registry
  rather than importing them.
- Nothing but ``python -m groute`` imports the CLI entry point (``groute.cli``): the options the
  subcommands share live below them, in ``groute.cli_support``.
- The distributed worklist never builds a ``Link`` itself: its exchange goes through a
  ``Router``, the one place routing is decided.
- No import cycles among groute's modules, counting the imports inside functions too: an import
  moved into a function hides a cycle from the interpreter, not from the design.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: package name -> the folder that holds it (as installed: apps/ and topology/ inside groute)
FOLDERS = {"groute": ROOT / "groute", "groute.apps": ROOT / "apps",
           "groute.topology": ROOT / "topology"}
#: the facade: the only modules under groute/ that may name the algorithms and tools
FACADE = {"groute", "groute.__main__", "groute.cli"}
UPPER = ("groute.apps", "groute.topology", "apps", "topology")


def module_files() -> dict[str, Path]:
    """Every module of the installed package, by name."""
    out = {}
    for package, folder in FOLDERS.items():
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join([package, *parts])] = path
    return out


MODULES = module_files()


def imports_of(name: str, path: Path) -> set[str]:
    """The modules ``name`` imports anywhere in its body, relative imports resolved; ``from P
    import x`` counts as importing ``P.x`` where that is a module, else ``P``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1])
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module
            submodules = {f"{source}.{a.name}" for a in node.names} & MODULES.keys()
            found.update(submodules)
            if len(submodules) < len(node.names):
                found.add(source)
    return found


def is_under(target: str, packages) -> bool:
    return any(target == p or target.startswith(p + ".") for p in packages)


def test_the_module_list_sees_the_layers():
    assert {"groute.runtime.context", "groute.graph.csr", "groute.bench.runner", "groute.apps.bfs",
            "groute.topology.cli", "groute.cli", "groute"} <= MODULES.keys()
    # relative imports resolve: ``from . import rng`` and ``from .arcs import arc_rows``
    assert {"groute.graph.rng", "groute.graph.arcs"} <= imports_of("groute.graph.csr",
                                                                 MODULES["groute.graph.csr"])


def test_library_modules_never_import_algorithms_or_tools():
    library = {name: path for name, path in MODULES.items()
               if not is_under(name, ("groute.apps", "groute.topology")) and name not in FACADE}
    offenders = sorted(f"{path.relative_to(ROOT)} imports {target}"
                       for name, path in library.items()
                       for target in imports_of(name, path) if is_under(target, UPPER))
    assert not offenders, "\n".join(offenders)


def test_only_the_entry_point_imports_the_cli():
    offenders = sorted(str(path.relative_to(ROOT)) for name, path in MODULES.items()
                       if name != "groute.__main__" and "groute.cli" in imports_of(name, path))
    assert not offenders, offenders


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index, low, on_stack, stack, cycles = {}, {}, set(), [], []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        cycles.append(sorted(component))
    return cycles


def test_cycle_finder_finds_a_cycle():
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles_among_groute_modules():
    graph = {name: {t for t in imports_of(name, path) if t in MODULES and t != name}
             for name, path in MODULES.items()}
    assert import_cycles(graph) == []


def test_the_worklist_routes_through_a_router_not_its_own_links():
    """Nothing under groute/worklist calls ``Link(...)`` (or ``link.Link(...)``)."""
    offenders = []
    for name, path in MODULES.items():
        if not is_under(name, ("groute.worklist",)):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call):
                f = node.func
                called = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
                if called == "Link":
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert any(is_under(n, ("groute.worklist",)) for n in MODULES)
    assert not offenders, offenders
