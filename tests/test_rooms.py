"""The rooms of kvviz and what each may import (docs/architecture.md#what-each-room-may-import).

Every module's imports are read with `ast` (module-level and function-level, lazy ones included;
`importlib.import_module("kvviz....")` with a constant name too), never by importing it, so a
module that imports torch or ipywidgets is checked like any other. Data flows one way
(docs/model-core.md): config -> family -> declared caches -> pages -> groups -> layout -> plan ->
pool / views / widgets, the CLI on top. Every module is in one room of `ROOMS` (a folder of
kvviz/), and imports only its own room, the foundation and the rooms `MAY_IMPORT` names for it;
in particular:

* the core (kvviz/core/) imports only the foundation and itself: no family, no planner, no engine;
* the views (kvviz/views/) import no planner family: not kvviz.families, kvviz.vllm,
  kvviz.engines, nor the app above;
* no library module imports kvviz.cli (only `python -m kvviz`, kvviz/__main__.py, does);
* the import graph has no cycle at any level, inside a room too; a package `__init__` only
  re-exports (it defines nothing but its export table);
* `ls kvviz` shows the folders and at most four modules: the facade, `__main__`, `options`, `api`;
* no module of kvviz/ is over 400 lines.

And the walk of `head_dim` from the explorer to a page size enters no module twice: when the
explorer's head_dim changes, every call chain that ends in a page size (`CacheSpec`) goes
explorer -> knobs -> vllm.plan -> families -> the family -> core.spec (or through an engine),
each module once.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "kvviz"

MAX_LINES = 400
LOOSE_MODULES = {"__init__.py", "__main__.py", "options.py", "api.py"}

# The rooms (docs/architecture.md#the-rooms): module prefixes, the longest prefix wins.
ROOMS = {
    # errors, defaults, bounds on input, row formats and regions, published numbers, words; the knobs record
    "foundation": ("kvviz.base", "kvviz.options"),
    "core": ("kvviz.core",),  # specs, groups, layouts, plans, capacity: nothing of any model or engine
    "families": ("kvviz.families",),  # config.json -> what each layer registers
    "vllm": ("kvviz.vllm",),  # vLLM 0.33's pages, grouping and planners
    "engines": ("kvviz.engines",),  # SGLang's and TensorRT-LLM's pools beside vLLM's
    "quant": ("kvviz.quant",),  # element and row codecs
    "pool": ("kvviz.pool",),  # real memory (torch) and block ownership
    "views": ("kvviz.views",),  # data objects, figures, the browser map, the report
    "verify": ("kvviz.verify",),  # write, read back, hazards
    "replay": ("kvviz.replay",),  # a workload replayed as vLLM 0.33's scheduler runs it
    "app": ("kvviz.api", "kvviz.deploy", "kvviz.explorer"),  # what a notebook calls: plan, budget, fit, explorer
    "tools": ("kvviz.tools",),  # command-line tools beside the CLI (quant parity, remaking parsed presets)
    "cli": ("kvviz.cli", "kvviz.__main__"),
    "package": ("kvviz",),  # the facade: `import kvviz` and its lazy names
}
LIBRARY = ("core", "families", "vllm", "engines", "quant", "pool", "views", "verify", "replay")
# What each room may import besides itself and the foundation (kvviz.base.version included).
MAY_IMPORT = {
    "foundation": (),
    "core": (),
    "families": ("core",),
    "vllm": ("core",),
    "engines": ("core", "vllm", "views"),
    "quant": (),
    "pool": ("core",),
    "views": ("core",),
    "verify": ("core", "pool", "quant"),
    "replay": ("core",),
    "app": LIBRARY,
    "tools": LIBRARY + ("app",),
    "cli": LIBRARY + ("app", "tools"),
    "package": LIBRARY + ("app",),
}
FOUNDATION = ROOMS["foundation"]
CORE = "kvviz.core"
VIEWS = ROOMS["views"]
# What a view may not import: the planner families, the engines, and the app built on them.
NOT_FOR_VIEWS = ("kvviz.families", "kvviz.vllm", "kvviz.engines") + ROOMS["app"] + ("kvviz.cli",)
CLI = "kvviz.cli"
CLI_ENTRY_POINTS = {"kvviz.__main__"}


def room_of(module: str) -> str | None:
    """The room of a kvviz module: the room of its longest matching prefix (None: in no room)."""
    best = None
    for room, prefixes in ROOMS.items():
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > len(best[1])):
                best = (room, prefix)
    return best[0] if best else None


def _module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str, root: Path = ROOT) -> bool:
    """Whether a dotted kvviz name is a module or package of the source tree under `root`."""
    base = root.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "__pycache__" not in p.parts}


def imports_of(path: Path, root: Path = ROOT) -> set[str]:
    """Every kvviz module `path` imports, anywhere in the file (function bodies included):
    `import kvviz.x`, `from kvviz.x import y` / `from .x import y` (y itself when it is a module),
    and `importlib.import_module("kvviz.x")` with a constant name."""
    module = _module_name(path, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            submodules = {f"{source}.{a.name}" for a in node.names if _is_module(f"{source}.{a.name}", root)}
            found.update(submodules)
            if len(submodules) < len(node.names):  # a name defined by `source` itself, not a submodule
                found.add(source)
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.add(node.args[0].value)
    return {name for name in found if name == "kvviz" or name.startswith("kvviz.")}


IMPORTS = {name: imports_of(path) for name, path in MODULES.items()}


def _under(name: str, prefixes) -> bool:
    prefixes = (prefixes,) if isinstance(prefixes, str) else prefixes
    return any(name == p or name.startswith(p + ".") for p in prefixes)


# ---- the reader itself --------------------------------------------------------------------------
def test_imports_are_read_at_every_level(tmp_path):
    """Module-level, relative, function-level and import_module imports are all found; `from pkg import
    submodule` imports the submodule, not the package's own names."""
    pkg = tmp_path / "kvviz" / "core"
    pkg.mkdir(parents=True)
    src = pkg / "probe.py"
    src.write_text(
        "import os\nfrom ..base.errors import require\nfrom . import spec\nfrom . import spec, Plan\n"
        "def f():\n    from kvviz.families import load\n    import kvviz.cli\n"
        "    importlib.import_module('kvviz.vllm.plan')\n"
    )
    (tmp_path / "kvviz" / "core" / "spec.py").write_text("")
    got = imports_of(src, tmp_path)
    assert got == {
        "kvviz.base.errors",
        "kvviz.core",
        "kvviz.core.spec",
        "kvviz.families",
        "kvviz.cli",
        "kvviz.vllm.plan",
    }


def test_the_walk_finds_the_package():
    assert {"kvviz.core.spec", "kvviz.vllm.plan", "kvviz.families.deepseek_v4", "kvviz.explorer.app"} <= set(MODULES)
    assert "kvviz.core.spec" in IMPORTS["kvviz.families.deepseek_v4"]


# ---- the rules ----------------------------------------------------------------------------------
def test_the_core_imports_no_family():
    """kvviz/core/ imports only the foundation and itself (no family, planner, engine, view, app)."""
    bad = {
        m: sorted(i for i in imps if not _under(i, (CORE,) + FOUNDATION))
        for m, imps in IMPORTS.items()
        if _under(m, CORE)
    }
    bad = {m: i for m, i in bad.items() if i}
    assert not bad, f"the core imports outside the foundation: {bad}"


def test_views_import_no_planner_family():
    bad = {m: sorted(i for i in imps if _under(i, NOT_FOR_VIEWS)) for m, imps in IMPORTS.items() if _under(m, VIEWS)}
    bad = {m: i for m, i in bad.items() if i}
    assert not bad, f"views import a planner family or the app above them: {bad}"


def test_no_library_module_imports_the_cli():
    bad = sorted(
        m
        for m, imps in IMPORTS.items()
        if m not in CLI_ENTRY_POINTS and not _under(m, CLI) and any(_under(i, CLI) for i in imps)
    )
    assert not bad, f"library modules importing kvviz.cli: {bad}"


def test_every_module_is_in_a_room():
    """A new module is placed in a room (ROOMS here, docs/architecture.md#the-rooms there)."""
    homeless = sorted(m for m in MODULES if room_of(m) in (None, "package") and m != "kvviz")
    assert not homeless, f"modules in no room (add them to ROOMS and docs/architecture.md): {homeless}"


def test_each_room_imports_only_what_it_may():
    """The one-way flow of docs/architecture.md#what-each-room-may-import, module by module."""
    bad = []
    for module, imports in IMPORTS.items():
        room = room_of(module)
        allowed = {room, "foundation", *MAY_IMPORT.get(room, ())}
        for name in sorted(imports):
            if room_of(name) not in allowed:
                bad.append(f"{module} ({room}) imports {name} ({room_of(name)})")
    assert not bad, "imports against the rooms' flow:\n" + "\n".join(bad)


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_no_module_is_over_400_lines():
    over = {p.relative_to(ROOT).as_posix(): _lines(p) for p in MODULES.values() if _lines(p) > MAX_LINES}
    assert not over, f"modules over {MAX_LINES} lines: {over}"


def test_the_top_folder_shows_the_rooms():
    """`ls kvviz` shows the rooms' folders and at most the facade, __main__, options and api."""
    loose = {p.name for p in PACKAGE.glob("*.py")}
    assert loose <= LOOSE_MODULES, f"loose modules beside the rooms: {sorted(loose - LOOSE_MODULES)}"
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    rooms = {prefix.split(".")[1] for prefixes in ROOMS.values() for prefix in prefixes if prefix.count(".") == 1}
    assert folders <= rooms, f"folders in no room: {sorted(folders - rooms)}"


def cycles(imports: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    graph = {m: {i for i in imps if i in imports and i != m} for m, imps in imports.items()}
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


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_at_any_level():
    """No module reaches itself through kvviz imports, lazy ones included, inside a room or across rooms."""
    found = cycles(IMPORTS)
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_package_inits_only_re_export():
    """A package `__init__` defines no function or class: it re-exports (eagerly or through its name table)."""
    bad = []
    for name, path in MODULES.items():
        if path.name != "__init__.py" or name == "kvviz":
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bad.append(f"{name}: defines {node.name}")
    assert not bad, "package __init__ files that define code:\n" + "\n".join(bad)


# ---- the walk of head_dim -----------------------------------------------------------------------
def _kvviz_chain(frame) -> list[str]:
    """The kvviz modules on the stack of `frame`, outermost first, runs of one module collapsed. The argument check
    a public function is wrapped in (kvviz.base.inputs.checked) is that function's own door, not a room the walk
    enters: its frames are left out."""
    from kvviz.base.inputs import checked

    wrapper = checked()(lambda: None).__code__
    names = []
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if _under(name, "kvviz") and frame.f_code is not wrapper:
            names.append(name)
        frame = frame.f_back
    chain: list[str] = []
    for name in reversed(names):
        if not chain or chain[-1] != name:
            chain.append(name)
    return chain


def test_the_walk_of_head_dim_enters_no_module_twice():
    """Change the explorer's head_dim and record, at every page size computed from it (each
    `CacheSpec`'s __post_init__, where `page_bytes` is derived), the kvviz modules the call chain
    passed through: each chain starts in the explorer, ends in kvviz.core.spec, and enters no
    module again after leaving it. The chains carry the new head_dim: the main caches' rows are
    built of it."""
    pytest.importorskip("ipywidgets")
    from kvviz.explorer.app import Explorer

    explorer = Explorer("deepseek-v4-flash")
    head_dim = explorer.head_dim.value - 64  # still a multiple of fp8_ds_mla's 64-dim scale block
    chains: dict[tuple[str, ...], set[int]] = {}

    def profile(frame, event, arg):
        if (
            event == "call"
            and frame.f_code.co_name == "__post_init__"
            and frame.f_globals.get("__name__") == "kvviz.core.spec"
        ):
            spec = frame.f_locals.get("self")
            chains.setdefault(tuple(_kvviz_chain(frame)), set()).add(spec.row_format.dims)

    sys.setprofile(profile)
    try:
        explorer.head_dim.value = head_dim
    finally:
        sys.setprofile(None)

    assert explorer.error == "", explorer.error
    assert chains, "no page size was computed when head_dim changed"
    assert any(head_dim in dims for dims in chains.values()), "no page was built of the new head_dim"
    for chain in chains:
        assert chain[0] == "kvviz.explorer.app" and chain[-1] == "kvviz.core.spec", chain
        again = sorted({m for m in chain if chain.count(m) > 1})
        assert not again, f"the walk enters {again} twice: {' -> '.join(chain)}"
