"""The import arrows point down: the core (judgeq's packages) never imports the producer or
the workers; the producer does not import the workers' Celery app at module level; no module
imports another's private names; there are no import circles, counting imports inside
functions (a circle broken only by a deferred import is still a circle)."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EDGES = ("judgeq.producer", "judgeq.workers")
ENTRY_POINTS = {"judgeq", "judgeq.__main__"}
"""The package root re-exports the producer's grade/submit/wait lazily (PEP 562 __getattr__),
and ``python -m judgeq`` runs the CLI: the two places the core's namespace reaches up."""


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the module imported (or whose names are)
    names: tuple[str, ...]
    top_level: bool  # at module level (not inside a function)
    where: str


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[0] in ("producer", "workers"):  # installed as judgeq.producer, judgeq.workers
        parts = ["judgeq", *parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def sources() -> dict[str, Path]:
    found = {}
    for top in ("judgeq", "producer", "workers"):
        for path in (ROOT / top).rglob("*.py"):
            found[module_name(path)] = path
    return found


MODULES = sources()


def resolve(name: str) -> str:
    """The module a dotted name lives in (``judgeq.report.build.fmt`` -> ``judgeq.report.build``)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def imports() -> list[Import]:
    out: list[Import] = []
    for me, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top = {id(n) for n in ast.walk(tree)} - {
            id(n)
            for f in ast.walk(tree)
            if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
            for n in ast.walk(f)
        }
        for node in ast.walk(tree):
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    package = me.split(".") if path.name == "__init__.py" else me.split(".")[:-1]
                    package = package[: len(package) - (node.level - 1)]
                    base = ".".join([*package, *([base] if base else [])])
                for alias in node.names:
                    target = resolve(f"{base}.{alias.name}") if f"{base}.{alias.name}" in MODULES else base
                    names = () if target != base else (alias.name,)
                    out.append(Import(me, target, names, id(node) in top, where))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    out.append(Import(me, alias.name, (), id(node) in top, where))
    return out


IMPORTS = imports()


def test_the_scan_sees_the_packages() -> None:
    assert {
        "judgeq.pipeline.job",
        "judgeq.store.redis",
        "judgeq.producer.cli.submit",
        "judgeq.workers.tasks",
    } <= set(MODULES)
    assert any(i.source == "judgeq.workers.tasks" and i.target == "judgeq.pipeline.stages" for i in IMPORTS)


def test_the_core_never_imports_the_producer_or_the_workers() -> None:
    upward = [
        f"{i.where}: {i.source} imports {i.target}"
        for i in IMPORTS
        if not i.source.startswith(EDGES) and i.source not in ENTRY_POINTS and i.target.startswith(EDGES)
    ]
    assert upward == []


def test_the_producer_does_not_import_the_workers_celery_app_at_module_level() -> None:
    found = [
        f"{i.where}: {i.source}"
        for i in IMPORTS
        if i.source.startswith("judgeq.producer")
        and i.top_level
        and resolve(i.target) == "judgeq.workers.celery_app"
    ]
    assert found == []


def test_no_module_imports_another_modules_private_names() -> None:
    private = [
        f"{i.where}: {i.source} imports {name} from {i.target}"
        for i in IMPORTS
        for name in i.names
        if name.startswith("_") and not name.startswith("__") and resolve(i.target) in MODULES
    ]
    private += [
        f"{i.where}: {i.source} imports the private module {i.target}"
        for i in IMPORTS
        if any(part.startswith("_") and not part.startswith("__") for part in i.target.split("."))
        and i.target.startswith("judgeq")
    ]
    assert private == []


def package_of(module: str) -> str:
    """``judgeq.store.redis`` -> ``judgeq.store``; a module at the top (``judgeq.errors``) is its own."""
    parts = module.split(".")
    if parts[:2] in (["judgeq", "producer"], ["judgeq", "workers"]):
        return ".".join(parts[:2])
    return ".".join(parts[:2]) if len(parts) > 1 else module


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    # Tarjan's strongly connected components
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_there_are_no_import_circles() -> None:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for i in IMPORTS:
        target = resolve(i.target)
        if target and target != i.source and i.source not in ENTRY_POINTS:
            graph[i.source].add(target)
    assert circles(graph) == []


def test_the_packages_form_layers_without_circles() -> None:
    """Between packages too (jobs, rubric, grading, ratelimit, judges, report, store, pipeline,
    the modules at the top, the producer, the workers): a package that imports another is
    above it, never also below."""
    graph: dict[str, set[str]] = {package_of(m): set() for m in MODULES}
    for i in IMPORTS:
        target = resolve(i.target)
        if not target or i.source in ENTRY_POINTS or not target.startswith("judgeq."):
            continue
        source, dest = package_of(i.source), package_of(target)
        if source != dest:
            graph[source].add(dest)
    assert circles(graph) == []


def test_every_module_says_what_it_exports() -> None:
    """``__all__`` in every module (as httpx does): what another module may import from it; the
    package root's is the public API (tests/core/test_purity.py)."""
    import importlib

    missing = []
    wrong = []
    for name, path in MODULES.items():
        if name == "judgeq.__main__":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if not any(
            isinstance(node, (ast.Assign, ast.AnnAssign))
            and any(
                isinstance(t, ast.Name) and t.id == "__all__"
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
            )
            for node in tree.body
        ):
            missing.append(name)
            continue
        module = importlib.import_module(name)
        wrong += [f"{name}.{n}" for n in module.__all__ if not hasattr(module, n)]
    assert missing == [] and wrong == []


def test_the_readme_lists_the_layers_in_their_order() -> None:
    """The README's table of packages goes from the bottom up: every package imports only those
    listed above it."""
    import re

    table = (ROOT / "docs" / "index.md").read_text(encoding="utf-8").split("| package | holds |", 1)[1]
    rows = re.findall(r"^\| `([^`]+)`", table.split("\n\n", 1)[0], re.M)
    names = [
        "judgeq." + row.removeprefix("judgeq/").removesuffix("/").removesuffix(".py").replace("/", ".")
        if row.startswith("judgeq/")
        else "judgeq." + row.removesuffix("/")
        for row in rows
    ]
    assert "judgeq.pipeline" in names and "judgeq.producer" in names
    position = {name: i for i, name in enumerate(names)}
    below = []
    for i in IMPORTS:
        target = resolve(i.target)
        if not target or i.source in ENTRY_POINTS:
            continue
        source, dest = package_of(i.source), package_of(target)
        if source != dest and source in position and dest in position and position[dest] > position[source]:
            below.append(f"{i.where}: {source} imports {dest}, listed below it")
    assert below == []
    assert set(position) >= {package_of(m) for m in MODULES} - {"judgeq", "judgeq.__main__", "judgeq.testing"}
