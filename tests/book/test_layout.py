"""The package's shape: theory modules never import experiments, the import graph between
companion modules has no cycle, no private name crosses a module boundary, and imports of
companion modules sit at the top of a module (not hidden in functions)."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
MODULES = {
    ".".join(path.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__"): path
    for path in sorted((SRC / "companion").rglob("*.py"))
}


def _companion_imports(module: str, path: Path):
    """(imported module, imported names, at top level?) for every companion import."""
    tree = ast.parse(path.read_text())
    top = {id(node) for node in tree.body}
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative import
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            if base.split(".")[0] == "companion":
                names = [alias.name for alias in node.names]
                # `from companion import witness` imports a module, not a name
                target = [f"{base}.{n}" for n in names if f"{base}.{n}" in MODULES]
                for t in target or [base]:
                    yield t, [] if target else names, id(node) in top
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "companion":
                    yield alias.name, [], id(node) in top


EDGES = {m: list(_companion_imports(m, p)) for m, p in MODULES.items()}


def test_no_import_cycle():
    graph = {m: {t for t, _, _ in edges if t != m} for m, edges in EDGES.items()}
    graphlib.TopologicalSorter(graph).prepare()  # raises CycleError on a cycle


def test_theory_never_imports_experiments():
    bad = [(m, t) for m, edges in EDGES.items() if ".experiments" not in m
           and m != "companion.cli" for t, _, _ in edges if ".experiments" in t]
    assert not bad, bad


def test_no_private_name_crosses_a_module():
    bad = [(m, t, n) for m, edges in EDGES.items() for t, names, _ in edges
           for n in names if n.startswith("_") and t != m]
    assert not bad, bad


def test_companion_imports_at_top_level():
    # the CLI imports each experiment when asked for it, so that `verify-head` needs no torch
    allowed = {"companion.cli"}
    bad = [(m, t) for m, edges in EDGES.items() if m not in allowed
           for t, _, top in edges if not top]
    assert not bad, bad



def test_the_graph_is_not_empty():
    # guards the parser: the package is known to import its checks everywhere
    assert sum(len(edges) for edges in EDGES.values()) > 40
    assert any(t == "companion.checks" for t, _, _ in EDGES["companion.bounds.witness"])


def mirrored_test_file(module: str) -> Path:
    """tests/<folders>/test_<module>.py for companion.<folders>.<module>."""
    *folders, name = module.split(".")[1:]
    return SRC.parent / "tests" / Path(*folders) / f"test_{name}.py"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m != "companion"
                                          and not m.endswith(("__init__", "__main__"))
                                          and MODULES[m].name != "__init__.py"))
def test_every_module_has_a_mirrored_test_file(module):
    assert mirrored_test_file(module).is_file(), f"{module}: no {mirrored_test_file(module)}"


def _all_names(path: Path) -> set[str] | None:
    for node in ast.parse(path.read_text()).body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target",
                                                                               None)]
        if any(getattr(t, "id", "") == "__all__" for t in targets) and node.value:
            return set(ast.literal_eval(node.value))
    return None


ROOT = SRC.parent
CALLERS = sorted([*ROOT.glob("notebooks/*.py"), *ROOT.glob("scripts/*.py"),
                  *ROOT.glob("benchmarks/*.py"), SRC / "companion" / "cli.py"])


def test_every_module_states_its_boundary():
    """`__all__` is the boundary (checked, fuzzed); a module without one has no boundary."""
    missing = [m for m, p in MODULES.items() if p.name not in ("__init__.py", "__main__.py")
               and m != "companion.cli" and _all_names(p) is None]
    assert not missing, missing


@pytest.mark.parametrize("caller", CALLERS, ids=lambda p: p.name)
def test_what_chapters_and_the_cli_import_is_in_the_boundary(caller):
    """Every name a chapter, script, benchmark or the CLI imports from a companion module is
    in that module's `__all__`: what readers call is checked and fuzzed."""
    bad = []
    for node in ast.walk(ast.parse(caller.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("companion"):
            if node.module not in MODULES or node.module in ("companion", "companion.cli"):
                continue
            boundary = _all_names(MODULES[node.module]) or set()
            bad += [f"{node.module}:{a.name}" for a in node.names
                    if f"{node.module}.{a.name}" not in MODULES and a.name not in boundary]
    assert not bad, bad
