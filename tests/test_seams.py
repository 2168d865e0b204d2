"""The seams between modules (issue 39's last seams), read with `ast` as tests/test_rooms.py reads
the rooms:

* no module imports an underscore name from another module: what a second module needs is public
  and documented (tests/test_docstrings.py);
* no two rooms are tied only by an import inside a function: a function-level import of another
  room exists only to keep a heavy library (torch, transformers, matplotlib, pandas, ipywidgets)
  off the light paths, and each such tie is listed in `LAZY_TIES` with the library it keeps off,
  which a fresh interpreter shows it pulls in;
* one byte-range type (`kvviz.base.regions.Region`).
"""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest
from test_rooms import MODULES, ROOT, room_of

HEAVY = ("torch", "transformers", "matplotlib", "pandas", "ipywidgets")

# (importing room, imported module, names) -> the heavy library importing it pulls in. Only ties
# that no module-level import between the two rooms shows; each keeps its library off a light path
# (the CLI's start, `import kvviz`, reading a config).
LAZY_TIES = {
    ("cli", "kvviz.verify", ("blocks_for_budget", "verify")): "torch",  # kvviz verify writes real tensors
}


def _trees():
    for module, path in MODULES.items():
        yield module, path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _kvviz_source(node: ast.ImportFrom) -> str | None:
    return node.module if not node.level and node.module and node.module.startswith("kvviz") else None


def test_no_underscore_name_is_imported_from_another_module():
    """`from kvviz.x import _name` is a seam: a name a second module needs is public."""
    bad = [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.module}.{a.name}"
        for _, path, tree in _trees()
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and _kvviz_source(node)
        for a in node.names
        if a.name.startswith("_") and not a.name.startswith("__")
    ]
    assert not bad, "underscore names imported from another module:\n" + "\n".join(bad)


def _ties():
    """(room, imported module, names, at module level?) for every import of another room."""
    for module, _, tree in _trees():
        room = room_of(module)
        inner = {
            id(n)
            for f in ast.walk(tree)
            if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
            for n in ast.walk(f)
            if isinstance(n, (ast.Import, ast.ImportFrom))
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found = [(a.name, ()) for a in node.names if a.name.startswith("kvviz")]
            elif isinstance(node, ast.ImportFrom) and _kvviz_source(node):
                found = [(node.module, tuple(a.name for a in node.names))]
            else:
                continue
            for name, names in found:
                other = room_of(name)
                if other not in (room, None, "foundation"):
                    yield room, other, name, names, id(node) not in inner


def _only_lazy():
    ties = list(_ties())
    at_module_level = {(room, other) for room, other, _, _, top in ties if top}
    return {
        (room, name, names)
        for room, other, name, names, top in ties
        if not top and (room, other) not in at_module_level
    }


def test_no_room_tie_exists_only_inside_a_function():
    """Every tie between two rooms shows at module level, except the listed ones that keep a heavy
    library off a light path."""
    unlisted = sorted(_only_lazy() - set(LAZY_TIES))
    assert not unlisted, (
        "rooms tied only by an import inside a function (import at module level, or list why):\n"
        + "\n".join(map(str, unlisted))
    )
    stale = sorted(set(LAZY_TIES) - _only_lazy())
    assert not stale, f"LAZY_TIES lists ties the code no longer has: {stale}"


@pytest.mark.parametrize(("tie", "library"), sorted(LAZY_TIES.items()), ids=lambda v: str(v))
def test_each_lazy_tie_keeps_its_heavy_library_off(tie, library):
    """A listed lazy import does pull in the library it is listed for (so at module level it would
    load that library on every path through its module)."""
    _, module, names = tie
    assert library in HEAVY, f"{library}: not one of the heavy libraries a lazy tie may keep off ({HEAVY})"
    code = f"import sys\nfrom {module} import {', '.join(names)}\nprint({library!r} in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "True", f"{module} ({', '.join(names)}) does not load {library}"


def test_one_region_type():
    """One byte-range type: kvviz.base.regions.Region (pages and engines' buffers alike)."""
    defined = [
        f"{module}.{node.name}"
        for module, _, tree in _trees()
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and node.name == "Region"
    ]
    assert defined == ["kvviz.base.regions.Region"]


def test_the_cli_passes_values_not_the_namespace():
    """No CLI module sets an attribute of the parsed arguments (`args.budget = ...`): what one CLI module
    hands another (the budget, its GPU terms, the auto-fit) is a return value."""
    bad = []
    for module, path, tree in _trees():
        if room_of(module) != "cli":
            continue
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            for target in filter(None, targets):
                for t in ast.walk(target):
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "args":
                        bad.append(f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(target)}")
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "setattr" and node.args:
                if isinstance(node.args[0], ast.Name) and node.args[0].id == "args":
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(node)}")
    assert not bad, "the CLI writes to its argparse namespace:\n" + "\n".join(bad)
