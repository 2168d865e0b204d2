"""kvviz.deploy.fit: the "what fits" table read back against plan capacities computed independently, and
its figure read back against the table."""

from __future__ import annotations

import pytest

from kvviz.base.errors import KvvizError
from kvviz.deploy.budget import kv_budget
from kvviz.deploy.fit import DEFAULT_CONTEXTS, FitTable, fit_figure, fit_table
from kvviz.deploy.gpus import GPUS
from kvviz.families import load
from kvviz.options import Options
from kvviz.vllm.plan import plan_model


@pytest.fixture(scope="module")
def llama():
    return load("llama-3.1-8b")


@pytest.fixture(scope="module")
def table(llama) -> FitTable:
    return fit_table(llama)


def test_rows_equal_independent_capacities(llama, table):
    assert DEFAULT_CONTEXTS[0] == 4096 and DEFAULT_CONTEXTS[-1] == 1_048_576
    kept = [c for c in DEFAULT_CONTEXTS if c <= 131_072]
    assert len(table.rows) == 3 * 4 * len(kept)
    assert {(r.gpu, r.tp) for r in table.rows} == {(g, t) for g in ("H100", "H200", "B200") for t in (1, 2, 4, 8)}
    for r in table.rows:
        budget = kv_budget(llama, gpu=r.gpu, tensor_parallel_size=r.tp)
        opts = Options(max_model_len=r.context, tensor_parallel_size=r.tp if r.tp > 1 else None)
        cap = plan_model(llama, None, opts).capacity(budget.available_bytes)
        assert r.kv_budget_bytes == budget.available_bytes
        assert r.max_concurrency == cap.max_concurrency and r.requests_fit == cap.requests_fit
        assert r.num_blocks == cap.num_blocks and r.kv_cache_tokens == cap.kv_cache_tokens
        assert r.line == cap.line and r.fits and r.note == ""
        assert r.gpu_estimate == GPUS[r.gpu].estimate
        assert r.budget_estimate  # the weights and the allowance are estimated
        assert r.max_num_batched_tokens == GPUS[r.gpu].serve_max_num_batched_tokens


def test_long_contexts_left_out_and_said(table):
    assert table.skipped_contexts == (262_144, 524_288, 1_048_576)
    assert all(r.context <= 131_072 for r in table.rows)
    assert any("262,144" in n and "max_model_len" in n for n in table.notes)
    assert any("left out" in line for line in table.lines())


def test_dataframe(table):
    df = table.to_dataframe()
    assert len(df) == len(table.rows)
    assert {"gpu", "tp", "context", "kv_budget_bytes", "max_concurrency", "requests_fit", "line"} <= set(df.columns)
    assert list(df["max_concurrency"]) == [r.max_concurrency for r in table.rows]


def test_figure_reads_back(table):
    fig = fit_figure(table)
    from matplotlib.figure import Figure

    assert isinstance(fig, Figure) and "matplotlib.pyplot" not in type(fig).__module__  # a Figure, no pyplot
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    lines = ax.get_lines()
    series = table.series()
    assert len(lines) == len(series) == 12  # one per (gpu, tp)
    for line in lines:
        gpu, tp = line.get_gid().split("/tp")
        rows = series[(gpu, int(tp))]
        assert list(line.get_xdata()) == [r.context for r in rows]
        assert list(line.get_ydata()) == [r.max_concurrency for r in rows]
        assert line.get_label().startswith(f"{gpu} TP{tp}") and "(est.)" in line.get_label()
    fig.savefig(__import__("io").BytesIO(), format="png")  # renders


def test_refused_tp_is_a_row_with_a_note():
    t = fit_table("gpt-oss-120b", gpus=("H100",), tp_sizes=(1, 3), contexts=(4096, 8192), weights_bytes=65 * 10**9)
    refused = [r for r in t.rows if r.tp == 3]
    assert len(refused) == 2
    for r in refused:
        assert r.max_concurrency is None and r.note.startswith("refused: tensor_parallel_size=3")
    assert all(r.max_concurrency is not None for r in t.rows if r.tp == 1)
    fig = fit_figure(t)
    assert len(fig.axes[0].get_lines()) == 1  # the refused TP draws no line


def test_no_memory_left_is_a_row_with_a_note():
    t = fit_table("deepseek-v3", gpus=("H200",), tp_sizes=(1,), contexts=(4096,))
    (r,) = t.rows
    assert r.kv_budget_bytes is None and r.note.startswith("no memory left for the KV cache")
    assert len(fit_figure(t).axes[0].get_lines()) == 0


def test_request_that_does_not_fit_is_noted(llama):
    t = fit_table(llama, gpus=("H100",), tp_sizes=(1,), contexts=(131_072,), kv_cache_memory_bytes=10 * 2**20)
    (r,) = t.rows
    assert not r.fits and r.note.startswith("vLLM refuses to start") and r.max_concurrency < 1


def test_bad_input(llama):
    with pytest.raises(KvvizError, match="^gpu="):
        fit_table(llama, gpus=("H300",))
    with pytest.raises(KvvizError, match="^tensor_parallel_size"):
        fit_table(llama, tensor_parallel_size=2)
    with pytest.raises(KvvizError, match="^bogus: not a knob"):
        fit_table(llama, bogus=1)
