"""Issue 37 item 6, the command line's share: each reproduction of the campaign, as a test that passes.

* stdout closed (`kvviz plan ... >&-`): a quiet exit with a non-zero status, never a traceback;
* a full file system under any writer (`--figure x.pdf|png|svg`, `render`): one line, nothing left behind
  (simulated with RLIMIT_FSIZE, SIGXFSZ ignored: every write past the limit fails with EFBIG);
* no error line echoes its whole input: a 5,000-stage `--pp-layer-partition`, 10,000 stray arguments;
* a signal at any moment from kvviz's first statement on gives the shell's status and at most one line, and
  leaves no temporary file (a SIGHUP as a render creates one, too);
* four renders into one folder at once: the folder ends holding one whole report, never a mix;
* a lone surrogate in a report's title is written escaped.
"""

import base64
import os
import random
import re
import resource
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import kvviz
from kvviz.base.errors import MAX_MESSAGE, KvvizError, bounded
from kvviz.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
KVVIZ = [sys.executable, "-m", "kvviz"]  # kvviz/__main__.py's run, the console script's entry point too
LINE = MAX_MESSAGE + 40  # bounded(): the cut's own words ("...(12,345 characters)...") come on top
FEW_HUNDRED = 450  # an error that echoes a long input: the field, the input's two ends and why (the campaign's)


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT))


def _defaults() -> None:
    """In the child: the signals at their defaults (a background job starts with some ignored), no core file."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _left_behind(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.name.startswith(".kvviz-"))


# ---- stdout closed ------------------------------------------------------------------------
def test_stdout_closed_exits_quietly_with_a_non_zero_status():
    def close_stdout():
        _defaults()
        os.close(1)

    r = subprocess.run(
        [*KVVIZ, "plan", "--model", "llama-3.1-8b"],
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        preexec_fn=close_stdout,
        timeout=120,
    )
    assert (r.returncode, r.stderr) == (1, "")


def test_stdout_closed_in_process(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdout", None)
    assert main(["plan", "--model", "llama-3.1-8b"]) == 1
    monkeypatch.setattr(sys, "stdout", None)  # bad input still says so, on stderr, with its own status
    assert main(["plan", "--model", "no-such-model"]) == 2
    assert "unknown model" in capsys.readouterr().err


# ---- a full file system -------------------------------------------------------------------
def _full_disk(limit: int):
    def set_limit():
        _defaults()
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return set_limit


def _run_full(argv: list[str], limit: int, tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*KVVIZ, *argv],
        capture_output=True,
        text=True,
        env=dict(_env(), KVVIZ_CACHE_DIR=str(tmp_path / "cache")),
        preexec_fn=_full_disk(limit),
        timeout=300,
    )


@pytest.mark.parametrize(
    "suffix, limit", [(".pdf", 0), (".pdf", 3000), (".pdf", 20000), (".png", 3000), (".svg", 3000)]
)
def test_a_figure_on_a_full_disk_is_one_line(tmp_path, suffix, limit):
    figure = tmp_path / f"x{suffix}"
    argv = ["compare", "--model", "llama-3.1-8b", "--engines", "vllm,sglang", "--budget-gib", "40"]
    r = _run_full([*argv, "--figure", str(figure)], limit, tmp_path)
    err = r.stderr.splitlines()
    assert (r.returncode, len(err)) == (2, 1), r.stderr
    assert err[0] == f"kvviz: error: --figure: cannot write {str(figure)!r} (File too large)"
    assert not figure.exists() and _left_behind(tmp_path) == []


@pytest.mark.parametrize("limit", [0, 5000])
def test_a_render_on_a_full_disk_is_one_line(tmp_path, limit):
    out = tmp_path / "out"
    r = _run_full(["render", "--model", "llama-3.1-8b", "--dpi", "20", "--out", str(out)], limit, tmp_path)
    assert (r.returncode, r.stderr.count("\n")) == (2, 1), r.stderr
    assert "File too large" in r.stderr and "Traceback" not in r.stderr
    assert sorted(os.listdir(out)) == []


def test_a_writer_failing_with_zlib_error_is_one_line(tmp_path):
    """The class, not the case: whatever a writer raises while a write fails names the file in one line."""
    import zlib

    from kvviz.views.staging import write_file

    def pdf_like(path):  # matplotlib's PDF writer: the OSError, then zlib.error from its clean-up
        try:
            raise OSError(28, "No space left on device")
        finally:
            raise zlib.error("Error -2 while flushing: inconsistent stream state")

    with pytest.raises(KvvizError, match=r"^--figure: cannot write .*x\.pdf' \(No space left on device\)$"):
        write_file(tmp_path / "x.pdf", pdf_like, what="--figure")

    def bug(path):  # not a failure to write: a bug shows as one
        raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        write_file(tmp_path / "y.png", bug)
    assert os.listdir(tmp_path) == []


# ---- error lines are bounded ----------------------------------------------------------------
STAGES = ",".join(["1"] * 5000)  # 10 KB


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["plan", "--model", "llama-3.1-8b", "--pp-layer-partition", STAGES], "--pp-layer-partition"),
        (["plan", "--model", "llama-3.1-8b", "-pp", "2", "--pp-layer-partition", STAGES], "--pp-layer-partition"),
        (["plan", "--model", "llama-3.1-8b", *["stray"] * 10_000], "unrecognized arguments: stray"),
        (["plan", "--model", "x" * 20_000], "--model"),
        (["compare", "--model", "llama-3.1-8b", "--budget-gib", "9" * 5000], "--budget-gib"),
        (["plan", "--model", "llama-3.1-8b", "--kv-dtype", "f" * 10_000], "--kv-dtype"),
    ],
)
def test_every_error_line_is_bounded(capsys, argv, needle):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and len(err) <= FEW_HUNDRED, (len(err), err[:200])
    assert needle in err


@given(st.text(max_size=30_000))
def test_bounded_is_one_short_line_that_keeps_the_start(text):
    line = bounded(text)
    assert len(line) <= LINE and line.isprintable()
    assert "\n" not in line
    if text.isprintable() and "'" not in text and '"' not in text and " " not in text[:60]:
        assert line.startswith(text[:60])  # the field the message names comes first


def test_a_library_error_is_bounded_too():
    with pytest.raises(KvvizError) as e:
        kvviz.plan("llama-3.1-8b", pp_layer_partition=tuple([1] * 5000), pipeline_parallel_size=2)
    assert len(str(e.value)) <= LINE and str(e.value).startswith("pp_layer_partition=")


# ---- signals --------------------------------------------------------------------------------
def _caught(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((int(line.split()[1], 16) for line in f if line.startswith("SigCgt:")), 0)
    except OSError:
        return 0


def _until_handled(proc: subprocess.Popen) -> None:
    """Wait until the child catches SIGTERM: kvviz's handlers are in (kvviz/__main__.py's first statements;
    what comes before is the interpreter's own start-up)."""
    for _ in range(20_000):
        if _caught(proc.pid) & (1 << (signal.SIGTERM - 1)) or proc.poll() is not None:
            return
        time.sleep(0.001)


NEEDS_PROC = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc/<pid>/status")
SIGNALS = {"SIGINT": "kvviz: interrupted", "SIGTERM": "kvviz: terminated", "SIGHUP": "kvviz: terminated"}


def _status_and_line(proc, name, stderr) -> None:
    sig = getattr(signal, name)
    lines = stderr.splitlines()
    assert proc.returncode in (128 + sig, -sig, 0), (proc.returncode, stderr)  # 0: it finished first
    assert len(lines) <= 1 and "Traceback" not in stderr, stderr
    if lines:
        assert lines == [SIGNALS[name]]


def _signal_after(argv: list[str], name: str, delay: float) -> tuple[subprocess.Popen, str]:
    """Start `kvviz argv`, wait until its handlers are in, then `delay` seconds, send signal `name`; (the process,
    its stderr) once it has ended, its status and lines checked."""
    proc = subprocess.Popen(
        [*KVVIZ, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=_env(), preexec_fn=_defaults
    )
    _until_handled(proc)
    time.sleep(delay)
    proc.send_signal(getattr(signal, name))
    _, stderr = proc.communicate(timeout=300)
    _status_and_line(proc, name, stderr)
    return proc, stderr


@NEEDS_PROC
@pytest.mark.parametrize("name", sorted(SIGNALS))
@pytest.mark.parametrize("delay", [0.0, 0.002, 0.02, 0.1])
def test_a_signal_at_start_up_is_one_line_and_the_shells_status(name, delay):
    """From kvviz's first statement (the handlers, before ~0.2 s of imports) to its exit."""
    _signal_after(["plan", "--model", "llama-3.1-8b"], name, delay)


@NEEDS_PROC
@pytest.mark.parametrize("name", sorted(SIGNALS))
def test_a_signal_at_a_random_moment_of_a_render_leaves_nothing_behind(tmp_path, name):
    rng = random.Random(f"render {name}")
    for i in range(2):
        out = tmp_path / f"out{i}"
        argv = ["render", "--model", "llama-3.1-8b", "--dpi", "20", "--out", str(out)]
        proc, _ = _signal_after(argv, name, rng.uniform(0, 1.5))
        assert not out.exists() or _left_behind(out) == []
        if proc.returncode != 0 and out.exists():  # cut short: no report took its name
            assert [n for n in os.listdir(out) if not n.startswith(".")] == []


_SIGNAL_AT_CREATION = textwrap.dedent("""
    import os, signal, sys, tempfile
    real, where = tempfile.mkstemp, sys.argv[1]

    def mkstemp(*args, **kwargs):  # the signal comes the moment a temporary file exists
        made = real(*args, **kwargs)
        if where in kwargs.get("prefix", ""):
            os.kill(os.getpid(), signal.SIGHUP)
        return made

    tempfile.mkstemp = mkstemp
    from kvviz.__main__ import run
    sys.exit(run(sys.argv[2:]))
""")


@pytest.mark.parametrize("where", ["write-test", "block-map.png", "report.html"])
def test_a_sighup_as_a_render_creates_its_temporary_file_leaves_nothing(tmp_path, where):
    out = tmp_path / "out"
    r = subprocess.run(
        [sys.executable, "-c", _SIGNAL_AT_CREATION, where, "render", "--model", "llama-3.1-8b", "--dpi", "20"]
        + ["--no-svg", "--out", str(out)],
        capture_output=True,
        text=True,
        env=_env(),
        preexec_fn=_defaults,
        timeout=300,
    )
    assert (r.returncode, r.stderr) == (128 + signal.SIGHUP, "kvviz: terminated\n")
    assert sorted(os.listdir(out)) == []


_SIGNAL_TURNED_INTO_IMPORT_ERROR = textwrap.dedent("""
    import importlib.abc, os, signal, sys, time

    class Interrupted(importlib.abc.MetaPathFinder):  # numpy's import, interrupted, raises its own ImportError
        def find_spec(self, name, path, target=None):
            if name == "matplotlib":
                try:
                    os.kill(os.getpid(), signal.SIGINT)
                    time.sleep(1)
                except KeyboardInterrupt:
                    raise ImportError('PyCapsule_Import could not import module "datetime"') from None
            return None

    sys.meta_path.insert(0, Interrupted())
    from kvviz.__main__ import run
    sys.exit(run(sys.argv[1:]))
""")


def test_a_signal_a_library_turns_into_its_own_error_is_still_the_signal(tmp_path):
    r = subprocess.run(
        [sys.executable, "-c", _SIGNAL_TURNED_INTO_IMPORT_ERROR, "render", "--model", "llama-3.1-8b"]
        + ["--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env=_env(),
        preexec_fn=_defaults,
        timeout=300,
    )
    assert (r.returncode, r.stderr) == (130, "kvviz: interrupted\n")


def test_the_console_script_is_the_entry_that_handles_signals_first():
    text = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^kvviz = "kvviz\.__main__:run"$', text, re.M)


# ---- four renders into one folder at once ------------------------------------------------------
RENDERED = ("llama-3.1-8b", "deepseek-v4-flash", "gemma-3-27b", "mistral-7b-v0.1")  # four sets of figures


def _whole_report(out: Path) -> str:
    """The folder holds one report: each PNG is the one its report.html embeds, and the figures are its own."""
    page = (out / "report.html").read_text()
    embedded = dict(re.findall(r'<figure id="([^"]+)"><img alt="[^"]*" src="data:image/png;base64,([^"]+)"', page))
    pngs = {p.stem for p in out.glob("*.png")}
    assert pngs == set(embedded) and list(out.glob("*.svg")) == []
    for name, data in embedded.items():
        assert (out / f"{name}.png").read_bytes() == base64.b64decode(data), name
    return re.search(r"<h1>([^<:]+):", page).group(1)


def test_four_renders_into_one_folder_at_once_land_whole(tmp_path):
    out = tmp_path / "out"
    procs = [
        subprocess.Popen(
            [*KVVIZ, "render", "--model", m, "--dpi", "20", "--no-svg", "--out", str(out)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
        )
        for m in RENDERED
    ]
    for p in procs:
        assert p.wait(timeout=600) == 0, p.stderr.read()
    assert _whole_report(out) in RENDERED
    assert _left_behind(out) == []


# ---- a lone surrogate in a title -----------------------------------------------------------------
def test_a_lone_surrogate_in_a_report_title_is_written_escaped(tmp_path):
    from kvviz.views.report import render_report

    plan = kvviz.plan("llama-3.1-8b")
    render_report(plan, tmp_path, title="caf\udce9", dpi=20, svg=False)  # argv's byte 0xe9 as os.fsdecode gives it
    assert "<h1>caf\\xe9</h1>" in (tmp_path / "report.html").read_text(encoding="utf-8")
    render_report(plan, tmp_path, title="caf\udce9 \ud800", dpi=20, svg=False)  # and one no decoder makes
    assert "<h1>caf\\udce9 \\ud800</h1>" in (tmp_path / "report.html").read_text(encoding="utf-8")


def test_a_signal_raised_inside_a_callback_python_ignores_still_ends_the_command():
    """A signal whose handler runs inside a weakref callback (the import system's module locks have them) would be
    printed as 'Exception ignored in: ...' and lost; it is sent again and ends the block as any other does."""
    import weakref

    from kvviz.base import signals

    class Thing:
        pass

    def callback(ref):
        os.kill(os.getpid(), signal.SIGHUP)  # its handler runs here, inside the callback
        sum(range(1000))

    with pytest.raises(signals.Terminated) as ended:
        with signals.handled():
            thing = Thing()
            ref = weakref.ref(thing, callback)
            del thing
            for _ in range(500):
                time.sleep(0.01)
    assert (ended.value.signum, signals.received(), ref()) == (signal.SIGHUP, signal.SIGHUP, None)
