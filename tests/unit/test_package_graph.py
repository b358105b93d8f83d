"""Package dependencies run one way: runtime <- wpbench_k8s <- controller, and no cycle inside.

Every import counts, including the ones inside functions that linters do not follow.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = {
    "wpbench_runtime": ROOT / "runtime" / "wpbench_runtime",
    "wpbench_k8s": ROOT / "cli" / "wpbench_k8s",
    "wpbench_controller": ROOT / "controller" / "wpbench_controller",
}
# Who may import whom (top-level packages).
ALLOWED = {
    "wpbench_runtime": set(),
    "wpbench_k8s": {"wpbench_runtime"},
    "wpbench_controller": {"wpbench_k8s", "wpbench_runtime"},
}


def _modules() -> dict[str, Path]:
    found = {}
    for package, folder in SOURCES.items():
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            found[".".join((package, *parts))] = path
    return found


def _imports(path: Path, module: str) -> set[str]:
    names: set[str] = set()
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            names.add(target)
            names.update(f"{target}.{alias.name}" for alias in node.names)
    return {n for n in names if n.split(".")[0] in SOURCES}


# Edges that close a loop today, each with its owner's way out; a new loop fails the test.
KNOWN_LOOP_EDGES = {
    # scoring's upstream-profile answer lazily uses models.extract.strip_outer_fence, while
    # models.compare uses scoring.counted: the fence helper belongs in a module of its own.
    ("wpbench_k8s.scoring", "wpbench_k8s.models"),
}


def _unit(module: str) -> str:
    """The node a module belongs to: `wpbench_k8s.kube`, `wpbench_k8s.executor`, `wpbench_k8s.outcome`, ..."""
    return ".".join(module.split(".")[:2])


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        for target in _imports(path, module):
            while target and target not in modules:  # `from pkg import name` names a module or an attribute
                target = target.rpartition(".")[0]
            if target and _unit(target) != _unit(module):
                graph.setdefault(_unit(module), set()).add(_unit(target))
    return graph


def test_top_level_packages_depend_one_way():
    for unit, targets in _graph().items():
        for target in targets:
            top, other = unit.split(".")[0], target.split(".")[0]
            assert other == top or other in ALLOWED[top], f"{unit} imports {target}"


def test_no_cycle_between_packages_and_modules():
    graph = {unit: {t for t in targets if (unit, t) not in KNOWN_LOOP_EDGES} for unit, targets in _graph().items()}
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> None:
        if node in path:
            cycle = [*path[path.index(node) :], node]
            raise AssertionError("import cycle: " + " -> ".join(cycle))
        if node in done:
            return
        for nxt in sorted(graph.get(node, ())):
            visit(nxt, [*path, node])
        done.add(node)

    for node in sorted(graph):
        visit(node, [])


def test_known_loop_edges_still_exist():
    graph = _graph()
    for unit, target in KNOWN_LOOP_EDGES:
        assert target in graph.get(unit, set()), f"{unit} -> {target} is gone: drop it from KNOWN_LOOP_EDGES"


def test_the_checker_sees_imports_inside_functions(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from wpbench_controller.reconciler import Reconciler\n", encoding="utf-8")
    assert "wpbench_controller.reconciler" in _imports(source, "wpbench_k8s.m")
