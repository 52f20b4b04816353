"""The import direction of sb3ext (docs/architecture.md): every import, at module level or inside a function,
points down the layers; no cycles; library layers never import rl_zoo3 or the plug-in."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "sb3ext"

#: module prefix -> layer (longest prefix wins)
LAYERS = {
    "sb3ext.common": 0,
    "sb3ext.experts": 1,
    "sb3ext.envs": 1,
    "sb3ext.algos": 2,
    "sb3ext.callbacks": 3,
    "sb3ext.tuning": 4,
    "sb3ext.zoo": 5,
    "sb3ext.zoo_safety": 5,
    "sb3ext._hook": 5,
    "sb3ext.tune": 6,
    "sb3ext.demo": 6,
    "sb3ext": 6,  # the package's __init__: lazy attribute access to the public API
}
#: the layers that must work without rl_zoo3 installed
LIBRARY_LAYERS = {0, 1, 2, 3}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer(module: str) -> int:
    best = max((prefix for prefix in LAYERS if module == prefix or module.startswith(prefix + ".")), key=len)
    return LAYERS[best]


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imports(path: Path, known: set[str], this: str | None = None) -> set[str]:
    """Every module an import statement of ``path`` names (``from a import b`` counts ``a.b`` if it is a module)."""
    found: set[str] = set()
    this = this or module_name(path)
    package = this if path.name == "__init__.py" else this.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in known)
    return found


def graph() -> dict[str, set[str]]:
    known = set(modules())
    return {name: {m for m in imports(path, known) if m in known and m != name} for name, path in modules().items()}


def unmapped(names: list[str]) -> list[str]:
    """Modules whose only layer is the package's catch-all: a new top-level module that LAYERS does not name yet."""
    return [n for n in names if n != "sb3ext" and not any(n == p or n.startswith(p + ".") for p in LAYERS if p != "sb3ext")]


def test_every_module_is_named_in_the_layer_table() -> None:
    assert not unmapped(sorted(modules())), "add these modules' prefixes to LAYERS (docs/architecture.md)"


def test_control_a_new_top_level_module_is_unmapped() -> None:
    """Guards the test above: a module the table does not name is reported, not given the catch-all's layer."""
    assert unmapped(["sb3ext.common.validation", "sb3ext", "sb3ext.reports", "sb3ext.tuning_extra.x"]) == [
        "sb3ext.reports",
        "sb3ext.tuning_extra.x",
    ]


def violations(name: str, targets: set[str], known: set[str]) -> list[str]:
    """The imports of module ``name`` that break the layering."""
    mine, found = layer(name), []
    for target in sorted(targets):
        root = target.split(".")[0]
        if root == "rl_zoo3" and (mine < 4 or mine in LIBRARY_LAYERS):
            found.append(f"{name} (layer {mine}) imports {target}: only the tuning layer and above may import rl_zoo3")
        elif target in ("sb3ext.zoo", "sb3ext._hook") and mine < 5:
            found.append(f"{name} (layer {mine}) imports the plug-in {target}")
        elif target in known and layer(target) > mine:
            found.append(f"{name} (layer {mine}) imports {target} (layer {layer(target)}): imports point down")
    return found


@pytest.mark.parametrize("name", sorted(modules()))
def test_imports_point_down(name: str) -> None:
    known = set(modules())
    assert not violations(name, imports(modules()[name], known), known)


def test_no_import_cycles() -> None:
    edges = graph()
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for target in sorted(edges[node]):
            if state.get(target) == 1:
                cycle = path[path.index(target) :] + [target]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if target not in state:
                visit(target)
        path.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)


def test_the_checker_sees_imports_inside_functions(tmp_path: Path) -> None:
    """Guards the tests above: imports hidden in a function body of a layer-0 module are found and refused."""
    source = tmp_path / "probe.py"
    source.write_text("def f():\n    from sb3ext.zoo import register\n    import rl_zoo3.utils\n    from ..algos import rpo\n")
    known = set(modules())
    found = imports(source, known, this="sb3ext.common.probe")
    assert {"sb3ext.zoo", "rl_zoo3.utils", "sb3ext.algos.rpo"} <= found
    assert len(violations("sb3ext.common.probe", found, known)) == 4  # zoo, rl_zoo3, sb3ext.algos and .rpo


def outside_imports(folder: str) -> dict[str, set[str]]:
    """The top-level packages each module under ``ROOT/folder`` imports."""
    return {
        str(path.relative_to(ROOT)): {m.split(".")[0] for m in imports(path, set(), this=f"{folder}.{path.stem}")}
        for path in sorted((ROOT / folder).rglob("*.py"))
    }


def test_the_harness_and_scripts_stay_outside_the_library() -> None:
    """sb3ext never imports the benchmark harness, and neither the harness nor the scripts import the tests."""
    assert not [name for name, found in outside_imports("sb3ext").items() if "benchmarks" in found]
    for folder in ("benchmarks", "scripts"):
        assert not [name for name, found in outside_imports(folder).items() if "tests" in found], folder
    assert "sb3ext" not in outside_imports("benchmarks")["benchmarks/imitation_worker.py"]  # runs in imitation's venv
