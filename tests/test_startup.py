"""What `import kvviz` and the light commands load, and the layering that keeps them light.

Not timed here (speed is shown by benchmarks/bench_startup.py): these tests assert which modules a
process imports, which is what makes it fast.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import kvviz

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "kvviz"
HEAVY = ("torch", "matplotlib", "pandas", "ipywidgets", "transformers")
LIGHT_COMMANDS = [
    ["--help"],
    ["models"],
    ["plan", "--model", "deepseek-v4-pro", "--json"],
    ["plan", "--model", "deepseek-v4-flash", "--budget-gib", "20"],
    ["compare", "--model", "deepseek-v4-pro", "--backend", "flashmla", "--budget-gib", "26.09", "--json"],
    ["compare", "--model", "deepseek-v4-pro", "--backend", "flashinfer", "--budget-gib", "26.46"],
]

# Runs the console script's main() in a fresh interpreter, then reports the heavy packages it loaded.
_PROBE = """
import json, sys
heavy_names = set(json.loads(sys.argv[2]))
sys.argv = ["kvviz", *json.loads(sys.argv[1])]
from kvviz.cli import main
try:
    code = main()
except SystemExit as e:  # --help
    code = e.code
heavy = sorted({m.split(".")[0] for m in sys.modules} & heavy_names)
print("HEAVY", code, json.dumps(heavy), file=sys.stderr)
"""


def _heavy_modules_after(argv: list[str]) -> tuple[list[str], int]:
    r = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(argv), json.dumps(HEAVY)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith("HEAVY "), r.stderr
    _, code, heavy = line.split(" ", 2)
    return json.loads(heavy), int(code)


@pytest.mark.parametrize("argv", LIGHT_COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_light_commands_import_no_heavy_package(argv):
    heavy, code = _heavy_modules_after(argv)
    assert code == 0
    assert heavy == []


def test_render_is_the_command_that_brings_matplotlib(tmp_path):
    # The probe itself would see a heavy import if there were one: here there must be.
    heavy, code = _heavy_modules_after(
        ["render", "--model", "deepseek-v4-flash", "--out", str(tmp_path), "--no-svg", "--dpi", "30"]
    )
    assert code == 0 and "matplotlib" in heavy and "torch" not in heavy


def test_import_kvviz_loads_no_heavy_package():
    code = f"import sys, kvviz; print(sorted({{m.split('.')[0] for m in sys.modules}} & set({list(HEAVY)!r})))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stderr


# ---- one public face --------------------------------------------------------------------------
def test_all_is_short_and_listed_by_dir():
    assert 15 <= len(kvviz.__all__) <= 30  # fits on one screen
    assert len(set(kvviz.__all__)) == len(kvviz.__all__)
    assert set(kvviz.__all__) <= set(dir(kvviz))


@pytest.mark.parametrize("name", kvviz.__all__)
def test_each_public_name_resolves_to_its_module(name):
    module = kvviz._PUBLIC[name]
    rel = module.split(".", 1)[1].replace(".", "/")  # kvviz.core.plan -> core/plan(.py | /__init__.py)
    assert (PACKAGE / f"{rel}.py").exists() or (PACKAGE / rel / "__init__.py").exists(), f"{name}: no module {module}"
    value = getattr(kvviz, name)
    if name in kvviz._PACKAGES:  # kvviz.replay: the package itself, which is callable
        assert value is sys.modules[module] and callable(value)
        return
    assert value is getattr(sys.modules[module], kvviz._ALIASES.get(name, name))  # model_names = preset_names
    assert getattr(value, "__module__", module).startswith("kvviz")


def test_verify_stays_the_function_when_its_module_is_imported():
    pytest.importorskip("torch")
    import kvviz.verify  # noqa: F401  (the import system binds the submodule on the package)

    assert callable(kvviz.verify) and kvviz.verify.__name__ == "verify"


def test_replay_stays_the_callable_package_when_its_modules_are_imported():
    import kvviz.replay.engine  # noqa: F401  (binds kvviz.replay, the package, on kvviz)
    from kvviz.replay import chat

    assert kvviz.replay is sys.modules["kvviz.replay"] and kvviz.replay.chat is chat and callable(kvviz.replay)


def test_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no_such_name"):
        kvviz.no_such_name  # noqa: B018


# ---- layering: the cli package on top -----------------------------------------------------------------
def _imports(path: Path) -> list[str]:
    """Every module (and `from` name) a file imports, anywhere in it, relative imports made absolute."""
    tree = ast.parse(path.read_text())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = "kvviz." * bool(node.level) + (node.module or "")
            names = [base.rstrip(".")] + [f"{base.rstrip('.')}.{a.name}" for a in node.names]
        else:
            continue
        out += names
    return out


@pytest.mark.parametrize(
    "path",
    sorted(p for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).parts[0] not in ("cli", "__main__.py")),
    ids=lambda p: p.relative_to(PACKAGE).as_posix(),
)
def test_no_library_module_imports_the_cli(path):
    imported = _imports(path)
    assert not any(m == "kvviz.cli" or m.startswith("kvviz.cli.") for m in imported), f"{path.name} imports kvviz.cli"


def test_cli_registers_subcommands_without_importlib():
    text = "".join(p.read_text() for p in (PACKAGE / "cli").glob("*.py"))
    assert "importlib" not in text and "_extensions" not in text


# numpy's own OpenBLAS (the wheel's numpy.libs/libscipy_openblas*), asked how many threads it runs, after a
# first sight (which imports numpy through transformers) run by the console script's entry point
_OPENBLAS_THREADS = """
import ctypes, glob, os, sys
from kvviz.__main__ import run
assert run(["plan", "--hf-config", sys.argv[1], "--json"]) == 0
import numpy
libs = glob.glob(os.path.join(os.path.dirname(numpy.__file__), os.pardir, "numpy.libs", "libscipy_openblas*"))
print(ctypes.CDLL(libs[0]).scipy_openblas_get_num_threads64_() if libs else "none", file=sys.stderr)
"""


@pytest.mark.parametrize("user", [None, "2"])
def test_a_command_runs_numpy_on_one_openblas_thread_unless_the_user_says(user, tmp_path):
    # a command does no linear algebra; OpenBLAS would start one thread a core as numpy loads (kvviz/__main__.py)
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    env |= {"KVVIZ_CACHE_DIR": str(tmp_path)} | ({"OPENBLAS_NUM_THREADS": user} if user else {})
    config = ROOT / "tests" / "data" / "own-configs" / "llama-3.3-70b"
    r = subprocess.run([sys.executable, "-c", _OPENBLAS_THREADS, str(config)], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    threads = r.stderr.strip().splitlines()[-1]
    if threads == "none":
        pytest.skip("this numpy does not ship its own OpenBLAS (e.g. conda-forge's links the system's)")
    assert threads == (user or "1")
