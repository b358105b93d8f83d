"""Package dependencies run one way: runtime <- wpbench_k8s <- controller (and the benchmarks), and no cycle inside.

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
    "wpbench_gradebench": ROOT / "bench" / "wpbench_gradebench",
    "wpbench_scale": ROOT / "bench" / "wpbench_scale",
}
# Who may import whom (top-level packages).
ALLOWED = {
    "wpbench_runtime": set(),
    "wpbench_k8s": {"wpbench_runtime"},
    "wpbench_controller": {"wpbench_k8s", "wpbench_runtime"},
    # the benchmarks sit on top and nothing imports them
    "wpbench_gradebench": {"wpbench_k8s", "wpbench_runtime"},
    "wpbench_scale": {"wpbench_k8s", "wpbench_runtime"},
}


def _modules(sources: dict[str, Path]) -> dict[str, Path]:
    found = {}
    for package, folder in sources.items():
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            found[".".join((package, *parts))] = path
    return found


def _imports(path: Path, module: str, packages: set[str]) -> set[str]:
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
    return {n for n in names if n.split(".")[0] in packages}


def _unit(module: str) -> str:
    """The node a module belongs to: `wpbench_k8s.kube`, `wpbench_k8s.executor`, `wpbench_k8s.outcome`, ..."""
    return ".".join(module.split(".")[:2])


def _graph(sources: dict[str, Path] = SOURCES) -> dict[str, set[str]]:
    modules = _modules(sources)
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        for target in _imports(path, module, set(sources)):
            while target and target not in modules:  # `from pkg import name` names a module or an attribute
                target = target.rpartition(".")[0]
            if target and _unit(target) != _unit(module):
                graph.setdefault(_unit(module), set()).add(_unit(target))
    return graph


def _first_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle (its nodes, the first repeated at the end), or None."""
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        for nxt in sorted(graph.get(node, ())):
            cycle = visit(nxt, [*path, node])
            if cycle:
                return cycle
        done.add(node)
        return None

    for node in sorted(graph):
        cycle = visit(node, [])
        if cycle:
            return cycle
    return None


def test_top_level_packages_depend_one_way():
    for unit, targets in _graph().items():
        for target in targets:
            top, other = unit.split(".")[0], target.split(".")[0]
            assert other == top or other in ALLOWED[top], f"{unit} imports {target}"


def test_no_cycle_between_packages_and_modules():
    cycle = _first_cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_checker_finds_a_cycle_through_a_function_level_import(tmp_path):
    # A sample tree: a.scoring imports a.models at module level, a.models.extract imports a.scoring
    # inside a function (the shape of the loop this test once allowed).
    package = tmp_path / "a"
    (package / "models").mkdir(parents=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "models" / "__init__.py").write_text("", encoding="utf-8")
    (package / "scoring.py").write_text("from a.models.extract import strip\n", encoding="utf-8")
    (package / "models" / "extract.py").write_text(
        "def strip(text):\n    from a.scoring import counted\n    return text\n", encoding="utf-8"
    )
    (package / "leaf.py").write_text("from . import scoring\n", encoding="utf-8")  # the package, then its module
    graph = _graph({"a": package})
    assert graph == {"a.scoring": {"a.models"}, "a.models": {"a.scoring"}, "a.leaf": {"a", "a.scoring"}}
    assert _first_cycle(graph) == ["a.scoring", "a.models", "a.scoring"]
    del graph["a.models"]
    assert _first_cycle(graph) is None


def test_the_checker_sees_imports_inside_functions(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from wpbench_controller.reconciler import Reconciler\n", encoding="utf-8")
    assert "wpbench_controller.reconciler" in _imports(source, "wpbench_k8s.m", set(SOURCES))


# The run summary is built and read below both run paths: a run on a cluster writes the same summary as a
# local run without importing the local-run module, and the summary knows neither path nor the report.
SUMMARY_BELOW = {
    "wpbench_k8s.summary": {"wpbench_k8s.local_run", "wpbench_k8s.cluster", "wpbench_k8s.report",
                            "wpbench_k8s.pipeline", "wpbench_k8s.commands", "wpbench_k8s.cli"},
    "wpbench_k8s.cluster": {"wpbench_k8s.local_run"},
    "wpbench_k8s.report": {"wpbench_k8s.local_run", "wpbench_k8s.cluster"},
}  # fmt: skip


def test_the_summary_has_one_home_below_both_run_paths():
    graph = _graph()
    for unit, forbidden in SUMMARY_BELOW.items():
        assert not graph.get(unit, set()) & forbidden, f"{unit} imports {graph[unit] & forbidden}"
    users = {unit for unit, targets in graph.items() if "wpbench_k8s.summary" in targets}
    assert {"wpbench_k8s.local_run", "wpbench_k8s.cluster", "wpbench_k8s.report"} <= users
