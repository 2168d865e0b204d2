"""Edges a user runs into: hazards acted out with contiguous block ids, signals, odd paths,
renders that fail or meet links, transformers' chatter. Each case is what a user relies on."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kvviz.cli import main
from kvviz.config import MODELS_DIR

ROOT = Path(__file__).resolve().parent.parent


def invoke(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


# ---- verify: the zeroer with contiguous block ids -------------------------------------------
@pytest.mark.parametrize("model", ["deepseek-v4-pro", "gpt-oss-120b", "llama-4-scout"])
def test_zeroer_with_contiguous_assignment_shows_the_damage(model):
    """The zeroed page sits past a work item's first block: the first-block sample must not
    index it (it used to end in an IndexError traceback)."""
    code, out, err = invoke(["verify", "--model", model, "--hazard", "zeroer", "--assignment", "contiguous",
                             "--device", "cpu", "--blocks", "16"])
    assert (code, err) == (0, ""), err
    assert out.rstrip().endswith("OK (the hazard's damage showed)")


# ---- transformers' warnings stay off stderr -------------------------------------------------
def _gpt_oss_with(tmp_path, **changes) -> str:
    raw = json.loads((MODELS_DIR / "gpt-oss-120b.json").read_text())
    raw["rope_scaling"] = {"rope_type": "yarn", "factor": 32.0, "bogus_key": 1}  # transformers warns
    raw.update(changes)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    return str(path)


def _kvviz(*argv: str, **kwargs) -> subprocess.CompletedProcess:
    # A process of its own: transformers' log handler writes to the real stderr.
    return subprocess.run([sys.executable, "-m", "kvviz", *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT)), **kwargs)


def test_a_config_transformers_warns_about_plans_without_noise(tmp_path):
    r = _kvviz("plan", "--hf-config", _gpt_oss_with(tmp_path))
    assert (r.returncode, r.stderr) == (0, "")
    assert "block" in r.stdout  # the plan itself


def test_a_refused_config_transformers_warns_about_is_one_line(tmp_path):
    r = _kvviz("plan", "--hf-config", _gpt_oss_with(tmp_path, head_dim=-3))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("kvviz: error: ") and r.stderr.count("\n") == 1, r.stderr
    assert "head_dim=-3" in r.stderr


def test_quiet_library_puts_logging_and_warnings_back():
    import logging
    import warnings

    from kvviz.quiet import quiet_library

    filters = list(warnings.filters)
    with quiet_library():
        logging.getLogger("transformers.x").warning("dropped")
        warnings.warn("dropped")
    assert logging.root.manager.disable == logging.NOTSET and warnings.filters == filters


# ---- make test checks the notebooks as committed --------------------------------------------
def _notebook(outputs: list) -> str:
    cell = {"cell_type": "code", "execution_count": 1 if outputs else None, "id": "0", "metadata": {},
            "outputs": outputs, "source": ["1 + 1"]}
    return json.dumps({"cells": [cell], "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                                                    "name": "python3"}},
                       "nbformat": 4, "nbformat_minor": 5}, indent=1) + "\n"


_OUTPUT = [{"data": {"text/plain": ["2"]}, "execution_count": 1, "metadata": {}, "output_type": "execute_result"}]


def _notebook_checks(repo: Path) -> subprocess.CompletedProcess:
    """The notebook check of `make test`, as the Makefile spells it (read with `make -n`), run in `repo`."""
    bin_dir = Path(sys.executable).parent
    recipe = subprocess.run(["make", "-s", "-n", "test", f"BIN={bin_dir}", "STAMP=.stamp"], cwd=repo,
                            capture_output=True, text=True, timeout=60, check=True).stdout.splitlines()
    steps = [line for line in recipe if "committed_notebooks" in line or "nbstripout --verify" in line]
    assert len(steps) == 2, recipe
    return subprocess.run(" && ".join(steps), shell=True, cwd=repo, capture_output=True, text=True, timeout=120)


@pytest.fixture
def repo(tmp_path):
    if not (shutil.which("git") and shutil.which("make")):
        pytest.skip("needs git and make")
    repo = tmp_path / "repo"
    (repo / "notebooks").mkdir(parents=True)
    (repo / "scripts").mkdir()
    shutil.copy(ROOT / "Makefile", repo)
    shutil.copy(ROOT / "scripts" / "committed_notebooks.py", repo / "scripts")
    (repo / "notebooks" / "a.ipynb").write_text(_notebook([]))
    (repo / "pyproject.toml").touch()
    (repo / ".stamp").touch()  # the set-up is done (STAMP=.stamp)

    def git(*argv):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", *argv],
                       cwd=repo, check=True, capture_output=True, timeout=60)

    subprocess.run(["git", "init", "-q"], cwd=repo, check=True, timeout=60)
    git("add", "-A")
    git("commit", "-qm", "clean notebook")
    return repo, git


def test_make_test_passes_a_working_copy_jupyterlab_saved_outputs_into(repo):
    repo, _ = repo
    (repo / "notebooks" / "a.ipynb").write_text(_notebook(_OUTPUT))  # what an autosave leaves
    r = _notebook_checks(repo)
    assert r.returncode == 0, r.stdout + r.stderr


def test_make_test_fails_a_committed_notebook_with_outputs(repo):
    repo, git = repo
    (repo / "notebooks" / "a.ipynb").write_text(_notebook(_OUTPUT))
    git("commit", "-qam", "outputs committed")
    (repo / "notebooks" / "a.ipynb").write_text(_notebook([]))  # a clean working copy does not hide it
    r = _notebook_checks(repo)
    assert r.returncode != 0, r.stdout + r.stderr
