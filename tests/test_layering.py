"""Imports only go down: the core never imports the simulator, the CLI or the plugin, and no module
imports itself back through another (imports, lazy ones included, form no cycle)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import asc_aprof

PACKAGE = Path(asc_aprof.__file__).parent
# asc_aprof._pytest_recording is the plugin's own (what its fixtures load when a test profiles)
APPS = {
    "asc_aprof.sim",
    "asc_aprof.cli",
    "asc_aprof.pytest_plugin",
    "asc_aprof._pytest_recording",
    "asc_aprof.ray_sweep",
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _nodes(tree: ast.Module, type_checking: bool = False) -> list[ast.AST]:
    """Every node but (unless *type_checking*) those under ``if TYPE_CHECKING:`` (never run)."""
    if type_checking:
        return list(ast.walk(tree))
    skipped = {
        id(n)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for n in ast.walk(block)
    }
    return [n for n in ast.walk(tree) if id(n) not in skipped]


def top_level_imports(path: Path, type_checking: bool = False) -> set[str]:
    """asc_aprof modules a module imports, at module level or lazily in a function (and, with
    *type_checking*, for type checkers only)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    found: set[str] = set()
    for node in _nodes(tree, type_checking):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            if target.startswith("asc_aprof"):
                found.add(target)
                for alias in node.names:
                    candidate = f"{target}.{alias.name}"
                    where = PACKAGE.parent / Path(*candidate.split("."))
                    if where.with_suffix(".py").exists() or (where / "__init__.py").exists():
                        found.add(candidate)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("asc_aprof"))
    return found


def graph(type_checking: bool = False) -> dict[str, set[str]]:
    return {module_name(p): top_level_imports(p, type_checking) for p in PACKAGE.rglob("*.py")}


def test_the_core_never_imports_the_apps() -> None:
    for module, imports in graph().items():
        if any(module == app or module.startswith(app + ".") for app in APPS):
            continue
        allowed = {"asc_aprof.sim"} if module == "asc_aprof._cann._discovery" else set()  # opt-in, lazily
        assert not (imports & APPS) - allowed, f"{module} imports {imports & APPS}"


def test_apps_share_service_modules_never_each_other() -> None:
    edges = graph()
    assert not edges["asc_aprof.pytest_plugin"] & {"asc_aprof.cli"}
    assert not edges["asc_aprof.cli"] & {"asc_aprof.pytest_plugin"}


@pytest.mark.parametrize("type_checking", [False, True], ids=["run time", "type checking too"])
def test_imports_have_no_cycle(type_checking: bool) -> None:
    edges = {
        m: {i for i in imps if i != "asc_aprof" and i != m}
        for m, imps in graph(type_checking).items()
        if m != "asc_aprof"  # the top level names everything for type checkers; nothing imports it back
    }
    state: dict[str, int] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for nxt in sorted(edges.get(module, ())):
            if state.get(nxt) == 1:
                raise AssertionError("import cycle: " + " -> ".join([*path, module, nxt]))
            if nxt not in state:
                visit(nxt, [*path, module])
        state[module] = 2

    for module in sorted(edges):
        if module not in state:
            visit(module, [])


def test_import_asc_aprof_loads_no_app_and_no_optional_dependency() -> None:
    code = (
        "import sys, asc_aprof; "
        "bad = [m for m in sys.modules if m in ('asc_aprof.sim', 'asc_aprof.cli', 'asc_aprof.pytest_plugin',"
        " 'rich', 'numpy', 'torch', 'pandas', 'polars', 'trio', 'ray', 'asc_aprof.ray_sweep')]; print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


#: The folders are the layers, bottom up (docs/architecture.md); the apps, the public facades
#: (``report``, ``stats``), the lazy top level and ``sim`` sit above them all.
LAYERS = ("_version", "_model", "_plans", "_cann", "_runs", "_profilers", "_outputs")


def layer_of(module: str) -> int:
    """The layer index of an asc_aprof module (len(LAYERS) for everything above the layers)."""
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in LAYERS:
        return LAYERS.index(parts[1])
    return len(LAYERS)


@pytest.mark.parametrize("type_checking", [False, True], ids=["run time", "type checking too"])
def test_a_lower_layer_never_imports_a_higher_one(type_checking: bool) -> None:
    wrong = []
    for module, imports in graph(type_checking).items():
        for target in imports:
            if target == "asc_aprof" or module == "asc_aprof":
                continue
            if module == "asc_aprof._cann._discovery" and target == "asc_aprof.sim":
                continue  # the simulated toolkit, opt-in (ASC_APROF_SIMULATE), imported when asked for
            if layer_of(target) > layer_of(module):
                wrong.append(f"{module} ({LAYERS[layer_of(module)]}) imports {target}")
    assert not wrong, "\n".join(sorted(wrong))


def test_every_module_is_in_a_layer_folder() -> None:
    above = {
        "asc_aprof",
        "asc_aprof.cli",
        "asc_aprof.pytest_plugin",
        "asc_aprof._pytest_recording",
        "asc_aprof.ray_sweep",
        "asc_aprof.report",
        "asc_aprof.stats",
        "asc_aprof.history",
    }
    stray = [
        m
        for m in graph()
        if layer_of(m) == len(LAYERS) and m not in above and not m.startswith("asc_aprof.sim")
    ]
    assert not stray, stray
