"""Edges a user runs into: hazards acted out with contiguous block ids, signals, odd paths,
renders that fail or meet links, transformers' chatter. Each case is what a user relies on."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kvviz.cli import main
from kvviz.families import PRESETS_DIR as MODELS_DIR

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
    code, out, err = invoke(
        [
            "verify",
            "--model",
            model,
            "--hazard",
            "zeroer",
            "--assignment",
            "contiguous",
            "--device",
            "cpu",
            "--blocks",
            "16",
        ]
    )
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
    return subprocess.run(
        [sys.executable, "-m", "kvviz", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        **kwargs,
    )


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

    from kvviz.base.quiet import quiet_library

    filters = list(warnings.filters)
    with quiet_library():
        logging.getLogger("transformers.x").warning("dropped")
        warnings.warn("dropped")
    assert logging.root.manager.disable == logging.NOTSET and warnings.filters == filters


# ---- make test checks the notebooks as committed --------------------------------------------
def _notebook(outputs: list) -> str:
    cell = {
        "cell_type": "code",
        "execution_count": 1 if outputs else None,
        "id": "0",
        "metadata": {},
        "outputs": outputs,
        "source": ["1 + 1"],
    }
    return (
        json.dumps(
            {
                "cells": [cell],
                "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
                "nbformat": 4,
                "nbformat_minor": 5,
            },
            indent=1,
        )
        + "\n"
    )


_OUTPUT = [{"data": {"text/plain": ["2"]}, "execution_count": 1, "metadata": {}, "output_type": "execute_result"}]


def _notebook_checks(repo: Path) -> subprocess.CompletedProcess:
    """The notebook check of `make test`, as the Makefile spells it (read with `make -n`), run in `repo`."""
    bin_dir = Path(sys.executable).parent
    recipe = subprocess.run(
        ["make", "-s", "-n", "test", f"BIN={bin_dir}", "STAMP=.stamp"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.splitlines()
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
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", *argv],
            cwd=repo,
            check=True,
            capture_output=True,
            timeout=60,
        )

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


# ---- render: links, failures half way, signals ----------------------------------------------
def _listing(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_render_refuses_a_pool_folder_that_is_a_link(tmp_path):
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (out / "pool-full").symlink_to(elsewhere)
    code, stdout, err = invoke(
        ["render", "--model", "gemma-3-27b", "--planner", "separate", "--out", str(out), "--dpi", "20", "--no-svg"]
    )
    assert (code, stdout) == (2, "") and err.count("\n") == 1
    assert "symbolic link" in err and str(out / "pool-full") in err
    assert list(elsewhere.iterdir()) == []


def test_a_render_that_fails_half_way_leaves_the_previous_report_whole(tmp_path, monkeypatch):
    import tempfile

    out = tmp_path / "out"
    argv = ["render", "--model", "deepseek-v4-flash", "--out", str(out)]
    assert invoke([*argv, "--dpi", "30"])[0] == 0
    before = _listing(out)
    real, calls = tempfile.mkstemp, []

    def full_disk(*args, **kwargs):  # the third file of the report cannot be created
        if Path(kwargs.get("dir", ".")).resolve() == out.resolve() and "write-test" not in kwargs.get("prefix", ""):
            calls.append(1)
            if len(calls) == 3:
                raise OSError(28, "No space left on device")
        return real(*args, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", full_disk)
    code, stdout, err = invoke([*argv, "--dpi", "40"])
    assert (code, stdout) == (2, "") and "No space left on device" in err and err.count("\n") == 1
    assert _listing(out) == before  # every old file as it was, no new one, no temporary file


_KILLABLE = textwrap.dedent("""
    import pathlib, sys, time
    from kvviz import cli
    from kvviz.views import report
    ready = pathlib.Path(sys.argv[1])

    def slow_save(fig, path, dpi=100):  # the SVG half written when the signal comes
        pathlib.Path(path).write_bytes(b"<svg half-written")
        ready.write_text("ready")
        time.sleep(120)

    report.save_figure = slow_save
    if sys.argv[2] == "verify":
        import kvviz.verify
        v = sys.modules["kvviz.verify"]
        real = v.verify

        def noted(*args, **kwargs):  # the first progress report: inside the work
            def progress(n):
                ready.write_text("ready")
                time.sleep(0.05)
            kwargs["progress"] = progress
            return real(*args, **kwargs)

        v.verify = noted
    sys.exit(cli.main(sys.argv[2:]))
""")


def _default_signals() -> None:
    """In the child: the signals at their defaults (a background job or nohup starts with some
    ignored, and an ignored signal stays ignored), no core file."""
    import resource
    import signal

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _start_and_signal(tmp_path, argv: list[str], sig: int) -> tuple[subprocess.Popen, str, str]:
    ready = tmp_path / "ready"
    ready.unlink(missing_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLABLE, str(ready), *argv],
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_signals,
    )
    try:
        for _ in range(1200):  # until it is inside its long step (at most 60 s)
            if ready.exists() or proc.poll() is not None:
                break
            time.sleep(0.05)
        assert ready.exists(), proc.communicate()
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc, stdout, stderr


@pytest.mark.parametrize("name", ["SIGTERM", "SIGHUP"])
def test_render_ended_by_a_signal_says_so_and_leaves_no_temporary_file(tmp_path, name):
    sig = getattr(signal, name)
    out = tmp_path / "out"
    proc, stdout, stderr = _start_and_signal(tmp_path, ["render", "--model", "deepseek-v4-pro", "--out", str(out)], sig)
    assert (proc.returncode, stderr, stdout) == (128 + sig, "kvviz: terminated\n", "")
    assert sorted(os.listdir(out)) == []  # no report file took its name, no hidden temporary file


@pytest.mark.parametrize("name", ["SIGTERM", "SIGHUP"])
def test_verify_ended_by_a_signal_says_so(tmp_path, name):
    sig = getattr(signal, name)
    proc, stdout, stderr = _start_and_signal(
        tmp_path, ["verify", "--model", "deepseek-v4-pro", "--blocks", "4000", "--device", "cpu"], sig
    )
    assert (proc.returncode, stderr, stdout) == (128 + sig, "kvviz: terminated\n", "")


def test_the_next_render_removes_what_a_render_killed_by_sigquit_left(tmp_path):
    out = tmp_path / "out"
    proc, _, _ = _start_and_signal(
        tmp_path, ["render", "--model", "deepseek-v4-flash", "--out", str(out)], signal.SIGQUIT
    )
    assert proc.returncode == -signal.SIGQUIT
    left = [n for n in os.listdir(out) if n.startswith(".")]
    assert left, "SIGQUIT ran no cleanup: its temporary files are there"
    code, _, err = invoke(["render", "--model", "deepseek-v4-flash", "--dpi", "20", "--no-svg", "--out", str(out)])
    assert (code, err) == (0, "")
    assert [n for n in os.listdir(out) if n.startswith(".")] == []


# ---- paths that are not UTF-8 ---------------------------------------------------------------
@pytest.fixture
def not_utf8(tmp_path):
    """A folder named with the byte 0xff holding a hybrid config.json, a DeepSeek V4 config and a
    groups file whose names hold 0xff too."""
    folder = os.fsencode(tmp_path) + b"/\xff"
    os.mkdir(folder)
    shutil.copy(MODELS_DIR / "gemma-3-27b.json", os.fsdecode(folder + b"/config.json"))
    shutil.copy(MODELS_DIR / "deepseek-v4-flash.json", os.fsdecode(folder + b"/v4\xff.json"))
    with open(folder + b"/groups\xff.json", "w") as f:
        f.write('{"groups": [{"name": "a", "layers": [{"name": "a0", "page_bytes": 300}]}]}')
    return folder


def _run_bytes(argv: list) -> subprocess.CompletedProcess:
    # PYTHONIOENCODING: stdout as strict as a UTF-8 terminal's (the C locale would escape for us)
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONIOENCODING="utf-8")
    return subprocess.run([sys.executable, "-m", "kvviz", *argv], cwd=ROOT, capture_output=True, timeout=120, env=env)


@pytest.mark.parametrize(
    "source", [["--hf-config", b""], ["--config", b"/v4\xff.json"], ["--groups", b"/groups\xff.json"]]
)
def test_a_source_whose_name_is_not_utf8_renders_a_whole_report(not_utf8, source):
    out = not_utf8 + b"/out"
    r = _run_bytes(["render", source[0], not_utf8 + source[1], "--out", out, "--dpi", "20", "--no-svg"])
    assert (r.returncode, r.stderr) == (0, b""), r.stderr.decode(errors="replace")[-300:]
    assert b"\\xff" in r.stdout and b"\xff" not in r.stdout  # every path printed, printable
    html = open(out + b"/report.html", "rb").read().decode("utf-8")
    assert "\\xff" in html


@pytest.mark.parametrize("command", [["plan"], ["compare", "--budget-gib", "10"]])
def test_a_hf_config_folder_whose_name_is_not_utf8_prints_its_plan(not_utf8, command):
    r = _run_bytes([*command, "--hf-config", not_utf8])
    assert (r.returncode, r.stderr) == (0, b""), r.stderr.decode(errors="replace")[-300:]
    assert b"\xff" not in r.stdout and (command[0] == "plan" or b"\\xff" in r.stdout)  # compare names it


# ---- make lab: a token and same origin, whatever the user's Jupyter config says --------------
def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, headers: dict | None = None) -> tuple[int, dict]:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=5) as r:
            return r.status, dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers)
    except (urllib.error.URLError, OSError):  # not listening yet
        return 0, {}


def test_make_lab_asks_for_a_token_and_refuses_other_origins_despite_a_hostile_config(tmp_path):
    import re

    if not shutil.which("make"):
        pytest.skip("needs make")
    pytest.importorskip("jupyterlab")
    work = tmp_path / "work"
    (work / "notebooks").mkdir(parents=True)
    shutil.copy(ROOT / "Makefile", work)
    (work / "pyproject.toml").touch()
    (work / ".stamp").touch()
    config = tmp_path / "config"
    config.mkdir()
    (config / "jupyter_server_config.json").write_text(
        json.dumps(
            {
                "ServerApp": {
                    "token": "",
                    "allow_origin": "*",
                    "allow_credentials": True,
                    "disable_check_xsrf": True,
                    "allow_remote_access": True,
                    "ip": "0.0.0.0",
                },
                "IdentityProvider": {"token": ""},
            }
        )
    )
    port = _free_port()
    recipe = subprocess.run(
        ["make", "-s", "-n", "lab", f"BIN={Path(sys.executable).parent}", "STAMP=.stamp", f"PORT={port}"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "jupyter lab" in recipe
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(config),
        JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
        JUPYTER_DATA_DIR=str(tmp_path / "data"),
        JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "ws"),
        BROWSER="true",
    )
    env.pop("JUPYTER_TOKEN", None)
    log = (tmp_path / "lab.log").open("w")
    proc = subprocess.Popen(
        ["bash", "-c", recipe + " --no-browser --ServerApp.port_retries=0"],
        cwd=work,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        token = None
        for _ in range(240):  # until it prints its URL (at most 60 s)
            assert proc.poll() is None, (tmp_path / "lab.log").read_text()
            found = re.search(rf"http://127\.0\.0\.1:{port}/lab\?token=(\w+)", (tmp_path / "lab.log").read_text())
            if found:
                token = found.group(1)
                if _get(f"{url}/api/status?token={token}")[0] == 200:
                    break
            time.sleep(0.25)
        assert token, (tmp_path / "lab.log").read_text()
        assert _get(f"{url}/api/status?token={token}")[0] == 200
        assert _get(f"{url}/api/contents")[0] in (401, 403)  # no token: refused
        assert _get(f"{url}/api/contents?token={token}")[0] == 200
        # Another origin without the token: refused, and no CORS grant ('*' in the config) to read the refusal with.
        status, headers = _get(f"{url}/api/contents", {"Origin": "http://evil.example"})
        assert status in (401, 403, 404) and headers.get("Access-Control-Allow-Origin") is None, (status, headers)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(15)
        log.close()
