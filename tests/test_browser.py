"""The explorer in a real browser: JupyterLab from the venv, Debian's chromium through playwright.

Opens notebooks/03-explorer.ipynb (a temporary copy: nothing is written into the repository),
runs all cells, moves the head_dim slider with the keyboard, picks the FP8 indexer, and checks
that the stride shown is exactly the one kvviz.planners.plan_model computes for those knobs.

Needs Debian's chromium at /usr/bin/chromium (`apt-get install -y chromium`); without it the test
is skipped with that reason. KVVIZ_SAVE_SCREENSHOT=1 writes docs/img/explorer.png, otherwise the
screenshot goes to pytest's tmp_path.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from kvviz.config import load_model
from kvviz.planners import plan_model
from kvviz.specs import CacheOptions

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
NOTEBOOK = "03-explorer.ipynb"
SCREENSHOT = ROOT / "docs" / "img" / "explorer.png"

# JupyterLab user settings for the run: no news / update toasts (and no network calls for them)
# over the notebook; start the notebook's own kernel without the "Select Kernel" dialog.
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/notebook-extension/tracker": {"autoStartDefaultKernel": True},
}

TOTAL_S = 170  # everything, from starting JupyterLab to the last check (each wait below is capped by it)
SERVER_START_S = 60  # JupyterLab answering /api/status
PAGE_S = 60  # the notebook open in the page
KERNEL_S = 90  # kernel started, cells run, the explorer on screen
RUN_S = 30  # one "Run All Cells" until the explorer is on screen
CHANGE_S = 30  # one knob change shown
STOP_S = 15  # JupyterLab shutting down


_deadline = [0.0]  # set when JupyterLab starts


def _ms(limit_s: float) -> float:
    """A wait's timeout in ms: its own limit, but never past the whole test's deadline."""
    return max(1.0, min(limit_s, _deadline[0] - time.monotonic())) * 1000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM JupyterLab (it shuts its kernels down), then SIGKILL its process group if it hangs."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(STOP_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the group this fixture started (start_new_session)
        proc.wait(STOP_S)


@pytest.fixture(scope="module")
def chromium():
    if not CHROMIUM.exists():
        why = f"Debian chromium not installed: {CHROMIUM} is missing (apt-get install -y chromium)"
        if os.environ.get("KVVIZ_REQUIRE_BROWSER"):  # set by .ci/run: in CI this test must run
            pytest.fail(why)
        pytest.skip(why)
    pytest.importorskip("playwright.sync_api", reason="python playwright is not installed")
    return str(CHROMIUM)


@pytest.fixture(scope="module")
def lab(chromium, tmp_path_factory):
    """JupyterLab on 127.0.0.1:<free port> with a random token, serving a copy of notebooks/."""
    _deadline[0] = time.monotonic() + TOTAL_S
    base = tmp_path_factory.mktemp("lab")
    root_dir = base / "notebooks"
    shutil.copytree(ROOT / "notebooks", root_dir, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    for plugin, values in LAB_SETTINGS.items():
        path = base / "settings" / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(base / "config"), JUPYTER_RUNTIME_DIR=str(base / "runtime"),
               JUPYTERLAB_SETTINGS_DIR=str(base / "settings"), JUPYTERLAB_WORKSPACES_DIR=str(base / "workspaces"),
               IPYTHONDIR=str(base / "ipython"), MPLBACKEND="Agg")
    log = (base / "jupyterlab.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
         "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root_dir}",
         "--allow-root", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
         "--LabApp.extension_manager=readonly"],
        cwd=root_dir, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + _ms(SERVER_START_S) / 1000
        while True:
            if proc.poll() is not None:
                pytest.fail(f"JupyterLab exited with {proc.returncode}; log: {log.name}")
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"JupyterLab did not answer /api/status within {SERVER_START_S} s; log: {log.name}")
            time.sleep(0.25)
        yield {"url": url, "token": token, "log": Path(log.name)}
    finally:
        _stop(proc)
        log.close()


@pytest.fixture
def page(chromium, lab, tmp_path):
    """Debian's chromium with a fresh profile, closed whatever happens."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=chromium, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1400, "height": 1100})
        try:
            context.set_default_timeout(_ms(CHANGE_S))
            page = context.pages[0] if context.pages else context.new_page()
            page.console_lines = []  # shown when the test fails
            page.on("console", lambda m: page.console_lines.append(f"{m.type}: {m.text}"))
            yield page
        finally:
            context.close()


def _shown_stride(page) -> int:
    text = page.locator(".kvviz-stride").inner_text()
    m = re.fullmatch(r"block stride: ([\d,]+) B", text.strip())
    assert m, f"unexpected stride label {text!r}"
    return int(m.group(1).replace(",", ""))


def _expected_stride(*, head_dim: int, indexer_format: str) -> int:
    """The library's stride for the knobs the test sets (the rest are the explorer's defaults)."""
    config = load_model("deepseek-v4-pro").with_overrides(head_dim=head_dim)
    options = CacheOptions(backend="flashmla", main_format="fp8_ds_mla", indexer_format=indexer_format,
                           block_size=256, mtp=True)
    return plan_model(config, options, "overlay").block_stride


def _wait_stride_change(page, old: int) -> int:
    page.wait_for_function(
        "old => { const e = document.querySelector('.kvviz-stride');"
        " return e && e.innerText.trim() !== '' && e.innerText.replace(/[^0-9]/g, '') !== String(old); }",
        arg=old, timeout=_ms(CHANGE_S))
    return _shown_stride(page)


def _run_all_cells(page) -> None:
    """Run > Run All Cells until the explorer is on screen.

    JupyterLab shows "idle" once before the kernel connects, and a run made while the session
    (re)connects may never get its widget shown ("Loading widget..."): wait for the kernel to
    connect, run all cells, and run them again if the explorer does not appear."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    indicator = page.locator(".jp-Notebook-ExecutionIndicator")
    deadline = time.monotonic() + _ms(KERNEL_S) / 1000
    try:  # the kernel connecting (may be over before we look)
        page.locator('.jp-Notebook-ExecutionIndicator:not([data-status="idle"])').wait_for(timeout=_ms(10))
    except PlaywrightTimeout:
        pass
    while True:
        page.locator('.jp-Notebook-ExecutionIndicator[data-status="idle"]').wait_for(timeout=_ms(KERNEL_S))
        page.locator(".lm-MenuBar-item", has_text=re.compile(r"^Run$")).click()
        page.locator("#jp-mainmenu-run .lm-Menu-item").filter(
            has=page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$"))).click()
        try:
            page.locator(".kvviz-stride").wait_for(state="visible", timeout=_ms(RUN_S))
            return
        except PlaywrightTimeout:
            if time.monotonic() > deadline:
                raise
            print(f"explorer not shown yet (kernel {indicator.get_attribute('data-status')}); running all cells again")


def test_explorer_in_jupyterlab(lab, page, tmp_path):
    try:
        _drive_explorer(lab, page, tmp_path)
    except BaseException:
        shot = tmp_path / "failure.png"
        with contextlib.suppress(Exception):
            page.screenshot(path=str(shot), timeout=10_000)
        print(f"browser screenshot: {shot}\nJupyterLab log: {lab['log']}\nbrowser console:")
        print("\n".join(page.console_lines[-60:]))
        raise


def _drive_explorer(lab, page, tmp_path) -> None:
    page.goto(f"{lab['url']}/lab/tree/{NOTEBOOK}?token={lab['token']}", timeout=_ms(PAGE_S))
    page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for(state="visible", timeout=_ms(PAGE_S))

    _run_all_cells(page)
    page.wait_for_function("() => /[0-9]/.test(document.querySelector('.kvviz-stride').innerText)",
                           timeout=_ms(CHANGE_S))
    start = _shown_stride(page)
    assert start == _expected_stride(head_dim=512, indexer_format="mxfp4") == 1_315_008

    # head_dim: two steps right on the slider handle (512 -> 576; 544 is not a valid fp8_ds_mla dim).
    slider = page.locator(".kvviz-head-dim")
    handle = slider.locator(".noUi-handle")
    handle.focus()
    handle.press("ArrowRight")
    handle.press("ArrowRight")
    page.wait_for_function(
        "() => document.querySelector('.kvviz-head-dim .widget-readout').innerText.trim() === '576'",
        timeout=_ms(CHANGE_S))
    after_head_dim = _wait_stride_change(page, start)
    assert after_head_dim == _expected_stride(head_dim=576, indexer_format="mxfp4")

    # indexer format: the dropdown's <select>.
    page.locator(".kvviz-indexer select").select_option("fp8")
    shown = _wait_stride_change(page, after_head_dim)
    assert shown == _expected_stride(head_dim=576, indexer_format="fp8")
    assert page.locator(".kvviz-error").is_hidden()

    # The block map follows (drawn right after the numbers); its caption names the stride it shows.
    page.locator(".kvviz-figure-caption", has_text=f"block stride {shown:,} B").wait_for(timeout=_ms(CHANGE_S))
    page.wait_for_function("() => { const i = document.querySelector('.kvviz-figure');"
                           " return i.complete && i.naturalWidth > 0; }", timeout=_ms(CHANGE_S))
    target = SCREENSHOT if os.environ.get("KVVIZ_SAVE_SCREENSHOT") == "1" else tmp_path / "explorer.png"
    target.parent.mkdir(parents=True, exist_ok=True)
    page.locator(".kvviz-explorer").screenshot(path=str(target), timeout=_ms(CHANGE_S))
    assert target.stat().st_size > 10_000
