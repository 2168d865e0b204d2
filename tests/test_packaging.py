"""environment.yml (conda-forge) must list the same dependencies as pyproject.toml."""

import re
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
CONDA_NAMES = {"torch": "pytorch"}  # PyPI name -> conda-forge name


def _split(req: str) -> tuple[str, str]:
    m = re.match(r"([A-Za-z0-9_.-]+)\s*(.*)", req.strip())
    return m.group(1).lower(), m.group(2).replace(" ", "")


def test_environment_yml_matches_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"]) + [r for extra in project["optional-dependencies"].values() for r in extra]
    pip_side = {CONDA_NAMES.get(n, n): v.replace("==", "=") for n, v in map(_split, reqs)}
    conda_side = {}
    text = (ROOT / "environment.yml").read_text()
    deps = text.split("dependencies:", 1)[1]
    for line in deps.splitlines():
        m = re.match(r"\s+- ([A-Za-z][A-Za-z0-9_.-]*)(.*)$", line)
        if m and m.group(1) not in ("python", "pip", "-e"):
            conda_side[m.group(1).lower()] = m.group(2).replace(" ", "")
    assert conda_side == pip_side


def test_torch_is_pinned_exactly():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert "torch==2.13.0" in deps


def test_transformers_is_pinned_to_the_references_release():
    # kvviz reads configs through transformers' config classes (kvviz/families/hf.py), whose defaults are part of
    # every plan: the pin is the release vLLM 0.33's own plans in tests/data were made with
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    readme = (ROOT / "tests" / "data" / "vllm-0.33" / "real-configs" / "README.md").read_text()
    assert "transformers==5.24.0" in deps and "transformers 5.24.0" in readme
