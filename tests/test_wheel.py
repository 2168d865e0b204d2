"""The wheel is installable and works on its own: built from the sources without the network,
installed into an empty folder, and run from another directory with no site-packages at all
(the light commands need nothing but the standard library), so nothing can come from the checkout.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PRESETS = sorted(p.name for p in (ROOT / "kvviz" / "presets").glob("*.json"))
NOT_PACKAGED = "presets not packaged: kvviz/presets/*.json is missing from the sources or the wheel"


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(wheel path, folder the wheel is installed into)."""
    # Offline means no build isolation: the build backend must already be here. setuptools has
    # built wheels by itself since 70.1; older ones need the `wheel` package.
    if importlib.util.find_spec("setuptools") is None:
        pytest.fail("building the wheel offline needs setuptools in the venv")
    import setuptools

    major, minor = (int(x) for x in setuptools.__version__.split(".")[:2])
    if (major, minor) < (70, 1) and importlib.util.find_spec("wheel") is None:
        pytest.fail(f"setuptools {setuptools.__version__} without `wheel` cannot build the wheel offline")
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"  # a copy, so the build leaves no build/ or *.egg-info in the checkout
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE", "MANIFEST.in", "setup.cfg"):
        if (ROOT / name).exists():
            shutil.copy2(ROOT / name, src / name)
    shutil.copytree(ROOT / "kvviz", src / "kvviz", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    built = subprocess.run(
        pip + ["wheel", "--no-deps", "--no-index", "--no-build-isolation", "-w", str(tmp / "dist"), str(src)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp / "dist").glob("kvviz-*.whl")
    site = tmp / "site"
    inst = subprocess.run(
        pip + ["install", "--no-deps", "--no-index", "--target", str(site), str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert inst.returncode == 0, inst.stderr[-3000:]
    return wheel, site


def _run(site: Path, *argv: str, cwd: Path) -> subprocess.CompletedProcess:
    """`python -S` (no site-packages: neither the shared venv nor its editable kvviz) with only the
    installed wheel on the path, from a directory outside the checkout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = str(site)
    return subprocess.run([sys.executable, "-S", *argv], capture_output=True, text=True, cwd=cwd, env=env, timeout=120)


def test_wheel_holds_the_package_and_its_data(installed):
    wheel, _ = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    for path in sorted((ROOT / "kvviz").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            assert path.relative_to(ROOT).as_posix() in names, f"{path.relative_to(ROOT)} is not in the wheel"
    assert not [n for n in names if n.startswith(("tests/", "data/", "notebooks/", "benchmarks/"))]
    assert PRESETS, NOT_PACKAGED
    assert {f"kvviz/presets/{p}" for p in PRESETS} <= names, NOT_PACKAGED


def test_installed_kvviz_is_the_wheel_and_imports_alone(installed, tmp_path):
    _, site = installed
    r = _run(
        site,
        "-c",
        "import sys, kvviz; print(kvviz.__file__); print(sorted(m for m in sys.modules "
        "if m.split('.')[0] in ('torch', 'matplotlib', 'pandas', 'numpy')))",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    path, heavy = r.stdout.splitlines()
    assert Path(path).is_relative_to(site) and heavy == "[]"


def test_installed_models_and_plan_run_from_anywhere(installed, tmp_path):
    _, site = installed
    models = _run(site, "-m", "kvviz", "models", cwd=tmp_path)
    assert models.returncode == 0, models.stderr
    # each line starts with the preset's name, then ':' or ' (architecture):' and its description
    listed = [line.split(":")[0].split(" (")[0] for line in models.stdout.splitlines()]
    assert listed == [p.removesuffix(".json") for p in PRESETS] and listed, NOT_PACKAGED
    archs = _run(site, "-m", "kvviz", "models", "--architectures", cwd=tmp_path)
    assert archs.returncode == 0, archs.stderr  # kvviz/families/vllm_registry.json is package data
    assert archs.stdout == (ROOT / "docs" / "models.md").read_text()
    plan = _run(site, "-m", "kvviz", "plan", "--model", "deepseek-v4-pro", "--json", cwd=tmp_path)
    assert plan.returncode == 0, f"{NOT_PACKAGED}? {plan.stderr}"
    doc = json.loads(plan.stdout)
    # The overlay stride as the checkout computes it (test_cli checks it against vLLM).
    here = subprocess.run(
        [sys.executable, "-m", "kvviz", "plan", "--model", "deepseek-v4-pro", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert doc == json.loads(here.stdout)


def test_installed_console_script(installed, tmp_path):
    _, site = installed
    script = site / "bin" / "kvviz"
    assert script.exists()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = str(site)
    r = subprocess.run(
        [str(script), "plan", "--model", "deepseek-v4-flash", "--planner", "overlay", "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert r.returncode == 0, f"{NOT_PACKAGED}? {r.stderr}"
    assert json.loads(r.stdout)["planner"] == "overlay"  # the planner asked for (the default is now 'vllm')
    bad = subprocess.run(
        [str(script), "plan", "--model", "nope"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120
    )
    assert (bad.returncode, bad.stdout, bad.stderr.count("\n")) == (2, "", 1)
