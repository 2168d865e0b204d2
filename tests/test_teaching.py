"""Teaching with kvviz (issue 37 item 5): a Plan shown in a notebook cell is one short line (its byte map stays on
print); every figure's text is at least 10 pt at its default size, with one documented knob to scale it
(kvviz.views.text_scale); every figure drawn from a Plan names the model and each knob given away from vLLM's
defaults (Plan.options.given()).
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from matplotlib.text import Text

import kvviz
from kvviz import views
from kvviz.base.errors import KvvizError
from kvviz.replay import chat, replay

PRESETS = kvviz.model_names()


@pytest.mark.parametrize("name", PRESETS)
def test_a_plan_in_a_notebook_cell_is_one_short_line(name):
    """IPython shows the repr of a cell's last value: it was the dataclass's every field (43-64 KB, 347 KB for
    DeepSeek-V4-Pro); now one line naming the model, planner, setting and stride. print() keeps the text map."""
    from IPython.core.formatters import PlainTextFormatter

    plan = kvviz.plan(name)
    shown = PlainTextFormatter()(plan)
    assert shown == repr(plan) and "\n" not in shown and len(shown) <= 300, shown
    assert shown.startswith(f"<kvviz Plan {name}, {plan.planner} planner") and f"{plan.block_stride:,} B" in shown
    assert str(plan) == plan.text_map() and len(str(plan)) > len(shown)


@pytest.fixture(scope="module")
def figures():
    """Every figure kvviz draws, at its default size, from Plans given knobs away from vLLM's defaults."""
    from kvviz.deploy import fit_figure, fit_table
    from kvviz.engines import compare_rows
    from kvviz.engines.figure import compare_figure, plan_figure
    from kvviz.options import Options

    pro = kvviz.plan("deepseek-v4-pro", indexer_format="fp8", block_size=256)
    before = kvviz.plan("deepseek-v4-pro", "bucketed", indexer_format="fp8")
    llama = kvviz.plan("llama-3.1-8b", kv_dtype="fp8", max_model_len=8192)
    fp16 = kvviz.plan("llama-3.1-8b", max_model_len=8192)
    qwen = kvviz.plan("qwen3-next-80b-a3b", mamba_ssm_dtype="float32")
    run = replay(llama, chat(40, seed=1), budget_bytes=300 * llama.block_stride, record_blocks=True)
    # DeepSeek-V4-Pro at 60 GiB: the widest labels (millions of tokens, tens of MB of waste)
    engines = ("vllm", "sglang", "trtllm")
    rows = compare_rows(kvviz.load("deepseek-v4-pro"), engines, Options(), kv_budget_bytes=60 << 30)
    return {
        "block_map": (views.block_map(pro), pro),
        "block_map_separate": (views.block_map(kvviz.plan("gemma-3-27b", "separate", kv_dtype="fp8")), None),
        "before_after": (views.before_after(before, pro), pro),
        "page_anatomy": (views.page_anatomy(pro), pro),
        "live_bytes": (views.live_bytes(llama), llama),
        "pool_planes": (views.pool_planes(qwen, 4), qwen),
        "occupancy": (views.occupancy(views.occupancy_data(run)), None),
        "queues": (views.queues(views.queue_data(run)), None),
        "pool_map": (views.pool_map(views.TimeLapse(run).at(run.num_steps // 2)), None),
        "engines": (compare_figure(rows, model="deepseek-v4-pro", budget_bytes=60 << 30), None),
        "engine_map": (plan_figure(rows[1].plan), None),
        "fit": (
            fit_figure(fit_table("llama-3.1-8b", gpus=("H100", "L40S"), tp_sizes=(1, 2), contexts=(4096, 131072))),
            None,
        ),
        "side_by_side": (views.side_by_side(kvviz.api.side_by_side(llama, fp16, budget_bytes=8 << 30)), None),
    }


def _sizes(fig) -> list[float]:
    """The font size of every non-empty text the figure draws (tick labels and legend entries included)."""
    fig.canvas.draw()  # ticks are made at draw time
    return [t.get_fontsize() for t in fig.findobj(Text) if t.get_text().strip() and t.get_visible()]


def test_every_figure_text_is_at_least_10_pt_at_its_default_size(figures):
    small = {name: min(_sizes(fig)) for name, (fig, _) in figures.items()}
    assert all(size >= 10 for size in small.values()), small


def test_text_scale_is_the_one_knob_for_every_figure_text():
    """kvviz.views.text_scale(s): every text s times its default size, inside the `with` only; a scale of 0 or a
    string is refused naming the argument."""
    plan = kvviz.plan("llama-3.1-8b", kv_dtype="fp8")
    default = sorted(_sizes(views.block_map(plan)))
    with views.text_scale(1.5):
        large = sorted(_sizes(views.block_map(plan)))
    assert min(large) == pytest.approx(1.5 * min(default)) and max(large) == pytest.approx(1.5 * max(default))
    assert sorted(_sizes(views.block_map(plan))) == default
    for bad in (0, -1, "big", None):
        with pytest.raises(KvvizError, match=r"^text_scale: scale="):
            with views.text_scale(bad):
                pass


def _title_text(fig) -> str:
    """Every title-like text of a figure (axes titles, the suptitle, figure texts) as one line."""
    texts = [ax.get_title(loc) for ax in fig.axes for loc in ("left", "center")]
    texts += [t.get_text() for t in fig.texts] + ([fig._suptitle.get_text()] if fig._suptitle else [])
    return " ".join(t.replace("\n", " ") for t in texts)


@pytest.mark.parametrize("name", ["block_map", "before_after", "page_anatomy", "live_bytes", "pool_planes"])
def test_a_figure_of_a_plan_names_its_model_and_every_knob_given(figures, name):
    fig, plan = figures[name]
    title = _title_text(fig)
    assert plan.model in title
    for knob in plan.options.given():
        value = getattr(plan.options, knob)
        shown = f"{value:,}" if type(value) is int else value
        assert f"{knob} {shown}" in title or f"KV cache {shown}" in title, (knob, value, title)


def test_traffic_figures_name_the_model_and_the_scheduler_knobs_given():
    llama = kvviz.plan("llama-3.1-8b", max_model_len=4096)
    run = replay(llama, chat(20, seed=2), budget_bytes=200 * llama.block_stride, max_num_batched_tokens=2048)
    title = _title_text(views.queues(views.queue_data(run)))
    assert "llama-3.1-8b" in title and "max_model_len 4,096" in title and "max_num_batched_tokens 2,048" in title


# ---- notebooks: saving an executed one leaves the tree clean -------------------------------------------------------
ROOT = Path(__file__).resolve().parents[1]


def _git(repo: Path, *argv: str) -> str:
    out = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", *argv],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.fixture(scope="module")
def notebook_02(tmp_path_factory):
    """notebooks/02-pr-48993-table.ipynb executed in a kernel (nbclient), from a copy of notebooks/."""
    import nbformat
    from nbclient import NotebookClient

    folder = tmp_path_factory.mktemp("nb") / "notebooks"
    shutil.copytree(ROOT / "notebooks", folder, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    nb = nbformat.read(folder / "02-pr-48993-table.ipynb", as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(folder)}}).execute()
    return nb


RAW_INTEGER = re.compile(r"(?<![\w,.])\d{5,}(?![\d,.])")  # five digits or more with no thousands separator


def test_notebook_02_prints_its_tables_with_separators_and_units(notebook_02):
    """Every output of notebook 02 writes a number of five digits or more with thousands separators (1,315,008,
    not 1315008), and its tables name each column's unit (kvviz.views.readable_table)."""
    shown = []
    for cell in notebook_02.cells:
        for out in cell.get("outputs", []):
            text = out.get("text") or out.get("data", {}).get("text/plain") or ""
            shown.append("".join(text))
    raw = sorted({m.group(0) for text in shown for m in RAW_INTEGER.finditer(text)})
    assert not raw, raw
    tables = [t for t in shown if "(B)" in t]
    assert len(tables) >= 5 and any("stride_change_pct (%)" in t for t in tables), shown


def test_saving_an_executed_notebook_as_jupyterlab_does_leaves_git_status_clean(tmp_path, notebook_02):
    """A checkout of the notebooks (with the committed .gitattributes and .gitignore) and `make strip-filter` as `make
    lab` runs it; notebook 02 executed in a kernel (nbclient), then it, 07 and 08 saved through jupyter_server's
    contents manager configured as `make lab` configures it (its flags read with `make -n lab`): the save
    JupyterLab's PUT /api/contents makes, with what JupyterLab writes into a notebook (outputs, execution counts, the
    kernel's language_info and kernelspec, widget state, cell timing). git status must stay clean. It did not: the
    kernel's language_info (with its Python version) and 07/08's kernelspec name survived the filter, and git takes
    a file whose size changed for modified without running the filter at all (kvviz/tools/notebook_save.py)."""
    import nbformat
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_server.services.contents.filemanager import FileContentsManager

    if not (shutil.which("git") and shutil.which("make")):
        pytest.skip("needs git and make")
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "notebooks", repo / "notebooks", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    for name in (".gitattributes", ".gitignore", "Makefile"):
        shutil.copy(ROOT / name, repo)
    (repo / "pyproject.toml").touch()
    (repo / ".stamp").touch()  # the venv is set up (STAMP=.stamp)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "as committed")
    make = ["make", "-s", f"BIN={Path(sys.executable).parent}", "STAMP=.stamp"]
    subprocess.run([*make, "strip-filter"], cwd=repo, check=True, timeout=60)
    lab = subprocess.run([*make, "-n", "lab"], cwd=repo, capture_output=True, text=True, check=True, timeout=60).stdout
    hook = re.search(r"--ContentsManager\.pre_save_hook=(\S+)", lab)
    assert hook, lab

    folder = repo / "notebooks"
    executed = copy.deepcopy(notebook_02)
    assert any(c.get("outputs") for c in executed.cells)
    spec = KernelSpecManager().get_kernel_spec("python3")
    contents = FileContentsManager(root_dir=str(folder), pre_save_hook=hook[1])
    # 02 run for real; 07 and 08 carried another kernelspec name (each file git status re-filters costs a python
    # start and nbformat's import, seconds each: three, not all eight)
    for path in (
        folder / name for name in ("02-pr-48993-table.ipynb", "07-engines.ipynb", "08-pool-under-traffic.ipynb")
    ):
        nb = executed if path.name == "02-pr-48993-table.ipynb" else nbformat.read(path, as_version=4)
        nb.metadata.kernelspec = {"display_name": spec.display_name, "language": spec.language, "name": "python3"}
        nb.metadata.language_info = executed.metadata.language_info  # the kernel's kernel_info reply
        nb.metadata.widgets = {"application/vnd.jupyter.widget-state+json": {"state": {}, "version_major": 2}}
        for i, cell in enumerate(nb.cells):
            if cell.cell_type == "code":
                cell.execution_count = cell.execution_count or i + 1
                cell.metadata.execution = {"iopub.status.busy": "2026-01-01T00:00:00.000000Z"}
        contents.save({"type": "notebook", "format": "json", "content": nb}, path.name)
    assert _git(repo, "status", "--porcelain") == ""


def test_notebook_08_shows_its_traffic_explorer():
    """Notebook 08 named `TrafficExplorer` without showing it; a code cell now ends in its widget (make test runs the
    notebook, so the widget is built on a real replay there)."""
    nb = json.loads((ROOT / "notebooks" / "08-pool-under-traffic.ipynb").read_text())
    last_lines = ["".join(c["source"]).strip().splitlines()[-1] for c in nb["cells"] if c["cell_type"] == "code"]
    assert any(re.fullmatch(r"TrafficExplorer\(r\b.*\)\.widget", line) for line in last_lines), last_lines


@pytest.mark.parametrize(
    "name",
    [
        "block_map",
        "block_map_separate",
        "before_after",
        "page_anatomy",
        "live_bytes",
        "pool_planes",
        "occupancy",
        "queues",
        "pool_map",
        "engines",
        "engine_map",
        "fit",
        "side_by_side",
    ],
)
def test_every_figure_at_10_pt_keeps_its_text_inside_and_apart(figures, name):
    """The larger text still fits: nothing cut at an edge, no two texts overlapping (tests/test_plot.py's check)."""
    from tests.test_plot import check_readable

    check_readable(figures[name][0])
