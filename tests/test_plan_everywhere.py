"""Issue 29: one object in, everything out; say what was planned.

`p = kvviz.plan(kvviz.load(...))` goes into every post-plan function (a shared-pool and a separate-pools
plan; a separate-pools plan draws all its pools); the Plan carries its model and options, so a GPU budget
takes TP from the plan and a differing TP is an error; one budget vocabulary; every header says the KV
dtype, TP and the knobs given; the requests column never shows a whole request that does not fit; the
CLI cites docs that exist and no research notes. Each test failed on the code before the fix."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

import kvviz
from kvviz.base.defaults import GIB
from kvviz.base.errors import KvvizError
from kvviz.cli import main
from kvviz.deploy import GPUS, kv_budget

ROOT = Path(__file__).resolve().parents[1]
PLANNERS = ("vllm", "separate")  # Gemma 3: one shared pool of two groups / two separate pools


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module", params=PLANNERS)
def planned(request):
    return kvviz.plan(kvviz.load("gemma-3-27b"), planner=request.param)


def test_separate_plan_has_several_pools(planned):
    assert len(planned.pools) == (2 if planned.planner == "separate" else 1)
    if planned.separate:  # no single layout, and the error says to give the plan itself
        with pytest.raises(KvvizError, match="give the plan itself"):
            planned.layout


def test_figures_take_a_plan(planned):
    from kvviz.views import figure_texts

    other = kvviz.plan(kvviz.load("gemma-3-27b"), planner="packed")
    fig = kvviz.block_map(planned)
    lanes = len(planned.pools) if planned.separate else len(planned.layout.groups)
    assert len(kvviz.views.as_block_map_data(planned).lanes) == lanes  # every pool drawn
    assert any("gemma-3-27b" in t and "TP 1" in t for t in figure_texts(fig))  # the title says what was planned
    kvviz.before_after(planned, other)
    kvviz.before_after(other, planned)
    kvviz.live_bytes(planned)
    assert kvviz.page_anatomy(planned) is not None


def test_page_anatomy_of_a_plan_draws_the_named_layer(planned):
    from kvviz.views import page_anatomy_data

    last = planned.pools[-1].placements[-1]
    assert page_anatomy_data(planned, layer=last.name).cache_name == last.cache.name
    with pytest.raises(KvvizError, match="layer="):
        page_anatomy_data(planned, layer="no.such.layer")


def test_render_report_takes_a_plan(planned, tmp_path):
    written = kvviz.render_report(planned, tmp_path / "out")
    html = [p for p in written if p.name == "report.html"]
    assert len(html) == len(planned.pools)  # a separate-pools plan: one report per pool
    assert all("TP 1" in p.read_text() for p in html)


def test_verify_and_pool_take_a_plan(planned):
    report = kvviz.verify(planned, 8, device="cpu")
    reports = report if isinstance(report, tuple) else (report,)
    assert len(reports) == len(planned.pools) and all(r.passed for r in reports)
    pool = kvviz.Pool(planned, 4, "cpu")
    pools = pool if isinstance(pool, tuple) else (pool,)
    assert [p.block_stride for p in pools] == [lay.block_stride for lay in planned.pools]


@pytest.mark.parametrize("planner", PLANNERS)
def test_explorer_takes_a_plan(planner):
    p = kvviz.plan(kvviz.load("gemma-3-27b"), planner=planner, kv_dtype="fp8")
    ex = kvviz.Explorer(p)
    assert ex.error == ""
    assert ex.plan.planner == planner and ex.plan.options.kv_dtype == "fp8"
    assert ex.plan.block_stride == p.block_stride


FRESH = """
import sys, tempfile, pathlib
import kvviz
for planner in ("vllm", "separate"):
    p = kvviz.plan(kvviz.load("gemma-3-27b"), planner=planner)
    q = kvviz.plan(kvviz.load("gemma-3-27b"), planner=planner, kv_dtype="fp8")
    kvviz.block_map(p)
    reports = kvviz.verify(p, 8, device="cpu")
    assert all(r.passed for r in (reports if isinstance(reports, tuple) else (reports,)))
    kvviz.before_after(p, q)
    kvviz.live_bytes(p)
    assert kvviz.render_report(p, pathlib.Path(tempfile.mkdtemp()) / "out")
    assert kvviz.Explorer(p).error == ""
    print(planner, len(p.pools))
"""


def test_the_first_hour_in_a_fresh_process():
    """Issue 29's first Done-when line as a new notebook runs it: a fresh interpreter, nothing imported
    before `import kvviz`, a shared-pool and a separate-pools plan through every post-plan function."""
    done = subprocess.run([sys.executable, "-c", FRESH], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["vllm", "1", "separate", "2"]


def test_a_layout_is_still_taken():
    p = kvviz.plan("llama-3.1-8b")
    assert kvviz.block_map(p.layout) is not None
    with pytest.raises(KvvizError, match="expected a kvviz Plan"):
        kvviz.block_map(42)


# ---- the Plan carries its model and options: one budget vocabulary, TP given once ----------------


def test_gpu_capacity_takes_tp_from_the_plan():
    model = kvviz.load("llama-3.1-8b")
    p = kvviz.plan(model, tensor_parallel_size=2)
    cap = p.capacity(gpu="H200", gpu_memory_utilization=0.9)
    # the second method: kvviz.deploy.kv_budget with TP given explicitly
    budget = kv_budget(model, gpu="H200", gpu_memory_utilization=0.9, tensor_parallel_size=2)
    assert cap == p.capacity(budget.available_bytes)
    assert cap == p.capacity(budget)  # a KVBudget of the plan's TP
    # the silent mismatch of before: a TP-1 budget under a TP-2 plan gave ~7% fewer tokens
    tp1 = kv_budget(model, gpu="H200", gpu_memory_utilization=0.9)
    assert p.capacity(tp1.available_bytes).kv_cache_tokens < cap.kv_cache_tokens
    with pytest.raises(KvvizError, match="tensor_parallel_size"):
        p.capacity(tp1)
    with pytest.raises(KvvizError, match="tensor_parallel_size=1: the plan was made with tensor_parallel_size=2"):
        p.capacity(gpu="H200", tensor_parallel_size=1)
    assert kv_budget(p, gpu="H200", gpu_memory_utilization=0.9) == budget
    with pytest.raises(KvvizError, match="tensor_parallel_size"):
        kv_budget(p, gpu="H200", tensor_parallel_size=4)


def test_one_budget_vocabulary():
    p = kvviz.plan("llama-3.1-8b")
    cap = p.capacity(40 * GIB)
    assert p.capacity(budget_gib=40) == cap == p.capacity(kv_cache_memory_bytes=40 * GIB)
    assert p.capacity(gpu="H200", kv_cache_memory_bytes=40 * GIB) == cap  # vLLM's exact path
    with pytest.raises(KvvizError, match="give one budget"):
        p.capacity(40 * GIB, budget_gib=40)
    with pytest.raises(KvvizError, match="give one budget"):
        p.capacity(budget_gib=40, gpu="H200")
    with pytest.raises(KvvizError, match="gpu_memory_utilization: applies only with a GPU"):
        p.capacity(budget_gib=40, gpu_memory_utilization=0.9)
    with pytest.raises(KvvizError, match="budget: give one budget"):
        p.capacity()
    with pytest.raises(KvvizError, match="not a budget argument"):
        p.capacity(budget_gb=40)


def test_plan_for_a_review():
    p = kvviz.plan("gemma-3-27b")
    df = p.to_dataframe()
    lay = p.layout
    assert list(df["group"]) == [g.name for g in lay.groups]
    assert list(df["total_bytes"]) == [lay.group_total(i) for i in range(len(lay.groups))]
    md = p.to_markdown(40 * GIB)
    assert p.describe in md and p.capacity(40 * GIB).line in md
    assert md.count("\n| ") == len(lay.groups) + 1  # header + one row per group
    code = "import sys, kvviz; kvviz.plan('gemma-3-27b').to_markdown(); print('pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"


# ---- say what was planned -------------------------------------------------------------------------


def test_plan_header_says_kv_dtype_and_tp(capsys):
    code, out, _ = run(capsys, "plan", "--model", "llama-3.1-8b", "--kv-cache-dtype", "fp8", "-tp", "2")
    head = out.splitlines()[0]
    assert code == 0 and "KV cache fp8" in head and "TP 2" in head
    code, out, _ = run(capsys, "plan", "--model", "llama-3.1-8b", "--block-size", "32")
    assert "KV cache bf16, TP 1, block_size 32" in out.splitlines()[0]
    code, out, _ = run(capsys, "compare", "--model", "llama-3.1-8b", "--kv-cache-dtype", "fp8", "--budget-gib", "40")
    assert "KV cache fp8" in out.splitlines()[0]


def test_render_title_says_tp(capsys, tmp_path):
    code, out, _ = run(capsys, "render", "--model", "llama-3.1-8b", "-tp", "2", "--out", str(tmp_path), "--no-svg")
    assert code == 0 and "TP 2" in (tmp_path / "report.html").read_text()


def test_requests_never_round_up_to_a_request_that_does_not_fit(capsys):
    # llama-3.1-8b by hand: a block is 32 layers x 16 tokens x 8 KV heads x 128 x (K, V) x 2 B (bf16), a
    # 131,072-token request holds 131,072 / 16 = 8,192 blocks (docs/deploy.md#the-capacity-line); 8 requests
    # and 8,170 blocks more: concurrency 73,706 / 8,192 = 8.9973, which vLLM's line prints as 9.00x.
    p = kvviz.plan("llama-3.1-8b")
    assert p.block_stride == 32 * 16 * 8 * 128 * 2 * 2 and p.capacity(GIB).blocks_per_request == 131072 // 16
    budget = (8 * 8192 + 8170) * p.block_stride
    cap = p.capacity(budget)
    assert cap.requests_fit == 8 and cap.line.endswith("9.00x")
    assert cap.concurrency_text == "8.99x; vLLM's line rounds to 9.00x"
    _, out, _ = run(capsys, "plan", "--model", "llama-3.1-8b", "--budget-bytes", str(budget))
    assert "8 (8.99x; vLLM's line rounds to 9.00x)" in out
    assert "8 (9.00)" not in out
    assert p.capacity(40 * GIB).concurrency_text == "2.50x"  # 40 GiB / 2 MiB = 20,480 blocks / 8,192


def test_cited_docs_exist():
    text = "\n".join(p.read_text() for p in (ROOT / "kvviz").rglob("*.py"))
    assert "deploy-rules.md" not in text
    for doc, anchor in set(re.findall(r"docs/(deploy\.md)#([a-z0-9-]+)", text)):
        headings = re.findall(r"^#+ (.+)$", (ROOT / "docs" / doc).read_text(), flags=re.M)
        anchors = {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-") for h in headings}
        assert anchor in anchors, f"docs/{doc}#{anchor}"


def test_h200_line_has_no_research_notes(capsys):
    source = GPUS["H200"].source
    assert "elsewhere" not in source and "not found" not in source
    _, out, _ = run(capsys, "plan", "--model", "llama-3.1-8b", "--gpu", "H200", "--gpu-memory-utilization", "0.9")
    line = next(line for line in out.splitlines() if "device total memory (H200)" in line)
    assert "docs/deploy.md#the-gpu-catalogue" in line and "elsewhere" not in line


def test_compare_takes_a_plan_and_the_budget_vocabulary():
    p = kvviz.plan("gemma-3-27b", kv_dtype="fp8")
    rows = kvviz.compare("gemma-3-27b", budget_bytes=40 * GIB, kv_dtype="fp8")
    assert kvviz.compare(p, budget_gib=40) == rows
    assert [label for label, _ in rows] == list(p.source.reader.planners)
    on_gpu = kvviz.compare(p, gpu="H200", kv_cache_memory_bytes=40 * GIB)
    assert on_gpu == rows
