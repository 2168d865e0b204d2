"""Issue 37 item 4: outputs for a review. `kvviz compare A -- B` sets two configurations side by side (bf16 vs fp8,
TP 2 vs TP 4, one model vs another) as text, --markdown, --json and --figure; --json of plan and compare records
every knob that shaped the plan and how the budget was had; `kvviz compare` of a model with one cache kind says why
its planner rows are one; `kvviz render` leaves out a before/after whose two panels would be the same.

The numbers are derived by hand from vLLM 0.33's rules (AttentionSpec.page_size_bytes = 2 x block_size x
num_kv_heads x head_size x dtype bytes, one group of every layer; get_num_blocks = budget // (page x layers);
concurrency = blocks / cdiv(max_model_len, block_size)) or are the same command's single-plan output (a second path
through the CLI)."""

import json
from pathlib import Path

import pytest

import kvviz
from kvviz.api import side_by_side
from kvviz.cli import main
from kvviz.views import figure_texts
from kvviz.views import side_by_side as review_figure

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT / "tests" / "data" / "vllm-0.33" / "real-configs"
GIB40 = 40 * 2**30

# Llama-3.1-8B (kvviz/presets/llama-3.1-8b.json): 32 layers, 8 KV heads of 128, bf16, 131,072 tokens; block 16.
PAGE_BF16 = 2 * 16 * 8 * 128 * 2  # 65,536 B a layer
STRIDE_BF16, STRIDE_FP8 = 32 * PAGE_BF16, 32 * PAGE_BF16 // 2
BLOCKS_PER_REQUEST = 131_072 // 16


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_bf16_vs_fp8_as_text(capsys):
    code, out, err = run(capsys, "compare", "--model", "llama-3.1-8b", "--budget-gib", "40", "--", "--kv-dtype", "fp8")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[:3] == [
        "A: llama-3.1-8b (KV cache bf16, TP 1)",
        "B: llama-3.1-8b (KV cache fp8 (model bf16), TP 1)",
        "differs: kv_cache_dtype bf16 -> fp8",
    ]
    row = {line.split("  ")[0]: line.split() for line in lines if line.startswith(("bytes per block", "blocks  "))}
    assert row["bytes per block"][-3:] == [f"{STRIDE_BF16:,}", f"{STRIDE_FP8:,}", "x0.50"]
    assert row["blocks"][-3:] == [f"{GIB40 // STRIDE_BF16:,}", f"{GIB40 // STRIDE_FP8:,}", "x2.00"]
    tokens_a = int(GIB40 // STRIDE_BF16 / BLOCKS_PER_REQUEST * 131_072)  # vLLM's int(concurrency x max_model_len)
    assert f"A: GPU KV cache size: {tokens_a:,} tokens" in out and f"B: GPU KV cache size: {2 * tokens_a:,}" in out


def test_the_review_as_json_records_every_knob_and_the_budget(capsys):
    code, out, _ = run(
        capsys, "compare", "--model", "llama-3.1-8b", "--budget-gib", "40", "--json", "--", "--kv-dtype", "fp8"
    )
    doc = json.loads(out)
    a, b = doc["sides"]
    assert a["knobs"]["kv_cache_dtype"] == "bf16" and b["knobs"]["kv_cache_dtype"] == "fp8"
    for knob in ("tensor_parallel_size", "pipeline_parallel_size", "max_model_len", "block_size"):
        assert a["knobs"][knob] == b["knobs"][knob]
    assert (a["knobs"]["block_size"], a["knobs"]["max_num_batched_tokens"], a["knobs"]["max_model_len"]) == (
        16,
        8192,
        131_072,
    )
    assert a["budget"]["inputs"] == {"budget_gib": 40.0} and "kv-cache-memory-bytes" in a["budget"]["rule"]
    assert doc["differs"][0] == {"knob": "kv_cache_dtype", "A": "bf16", "B": "fp8"}
    assert b["capacity"]["bytes_per_block"] == STRIDE_FP8


@pytest.mark.parametrize("tp_a, tp_b", [(2, 4)])
def test_tp2_vs_tp4_on_a_gpu_each_side_its_own_budget(capsys, tp_a, tp_b):
    """On a GPU each side's budget is its own (its weights at its TP): B's numbers are `kvviz.plan(...,
    tensor_parallel_size=4).capacity(gpu="H100")` (the library's door) and `kvviz plan -tp 4 --gpu H100`'s."""
    argv = ["compare", "--model", "llama-3.1-8b", "--gpu", "H100", "-tp", str(tp_a), "--json", "--", "-tp", str(tp_b)]
    doc = json.loads(run(capsys, *argv)[1])
    for side, tp in zip(doc["sides"], (tp_a, tp_b)):
        assert side["capacity"] == kvviz.plan("llama-3.1-8b", tensor_parallel_size=tp).capacity(gpu="H100").to_json()
        single = json.loads(
            run(capsys, "plan", "--model", "llama-3.1-8b", "--gpu", "H100", "-tp", str(tp), "--json")[1]
        )
        assert side["capacity"] == single["summary"] and side["budget"] == single["budget"]
    assert [d["knob"] for d in doc["differs"]] == ["tensor_parallel_size"]
    assert doc["sides"][1]["capacity"]["bytes_per_block"] * 2 == doc["sides"][0]["capacity"]["bytes_per_block"]


def test_one_model_vs_another(capsys):
    code, out, _ = run(
        capsys, "compare", "--model", "llama-3.1-8b", "--budget-gib", "40", "--json", "--", "--model", "mistral-7b-v0.1"
    )
    doc = json.loads(out)
    assert doc["differs"][0] == {"knob": "model", "A": "llama-3.1-8b", "B": "mistral-7b-v0.1"}
    single = json.loads(run(capsys, "plan", "--model", "mistral-7b-v0.1", "--budget-gib", "40", "--json")[1])
    assert doc["sides"][1]["capacity"] == single["summary"]


def test_markdown_of_the_review(capsys):
    code, out, _ = run(
        capsys, "compare", "--model", "llama-3.1-8b", "--budget-gib", "40", "--markdown", "--", "--kv-dtype", "fp8"
    )
    assert out.startswith("### llama-3.1-8b: A vs B\n")
    assert "- `kv_cache_dtype`: bf16 → fp8" in out
    assert f"| bytes per block | {STRIDE_BF16:,} | {STRIDE_FP8:,} | x0.50 |" in out


@pytest.mark.parametrize("suffix", [".png", ".svg", ".pdf"])
def test_the_review_figure_is_written_in_each_format(tmp_path, capsys, suffix):
    figure = tmp_path / f"review{suffix}"
    argv = ["compare", "--model", "llama-3.1-8b", "--budget-gib", "40", "--figure", str(figure), "--", "-tp", "2"]
    code, out, err = run(capsys, *argv)
    assert (code, err) == (0, "") and figure.stat().st_size > 1000
    assert out.rstrip().endswith(f"figure: {figure}")


def test_the_review_figure_names_the_model_and_what_differs():
    m = kvviz.load("llama-3.1-8b")
    review = side_by_side(kvviz.plan(m), kvviz.plan(m, kv_dtype="fp8"), budget_gib=40)
    texts = figure_texts(review_figure(review))
    assert any(t.startswith("llama-3.1-8b: kv_cache_dtype bf16 -> fp8: block stride") for t in texts)
    assert any(t.startswith("A: KV cache bf16, TP 1 (2 requests") for t in texts)


def test_a_side_of_separate_pools_has_no_review_figure(tmp_path, capsys):
    argv = ["compare", "--model", "gemma-3-27b", "--budget-gib", "40", "--figure", str(tmp_path / "x.png")]
    code, _, err = run(capsys, *argv, "--planner", "vllm", "--", "--planner", "separate")
    assert code == 2 and "B: 2 separate pools have no one block" in err and not (tmp_path / "x.png").exists()


@pytest.mark.parametrize(
    "tail, needle",
    [
        ([], "--: give what side B changes after it"),
        (["--json"], "--json: an output flag of the review; give it before `--`"),
        (["--engines", "vllm"], "--engines: an output flag"),
        (["--kv-dtype", "int3"], "argument --kv-dtype/--kv-cache-dtype: invalid choice"),
    ],
)
def test_a_bad_side_b_is_one_line(capsys, tail, needle):
    code, out, err = run(capsys, "compare", "--model", "llama-3.1-8b", "--budget-gib", "40", "--", *tail)
    assert (code, out) == (2, "") and err.count("\n") == 1 and needle in err


def test_words_without_the_separator_are_still_refused(capsys):
    code, _, err = run(capsys, "compare", "--model", "llama-3.1-8b", "--budget-gib", "40", "stray")
    assert code == 2 and err == "kvviz: error: unrecognized arguments: stray\n"


# ---- the planner rows of a model with one cache kind -----------------------------------------------
ONE_KIND = [
    ("--model", "kimi-k2"),
    ("--hf-config", str(REAL / "GLM-4.5-Air")),
    ("--hf-config", str(REAL / "MiniMax-M2")),
]


@pytest.mark.parametrize("source", ONE_KIND, ids=["Kimi-K2", "GLM-4.5-Air", "MiniMax-M2"])
def test_one_cache_kind_gives_one_row_and_says_why(capsys, source):
    code, out, _ = run(capsys, "compare", *source, "--budget-gib", "40")
    rows = [line for line in out.splitlines() if line.startswith(("vllm", "packed", "separate"))]
    assert rows[0].startswith("vllm = packed = separate ") and len([r for r in rows if "GPU KV" not in r]) == 2
    assert "one layout: " in out and "has one cache kind" in out and "so every planner gives vLLM's layout" in out
    assert "state pages unpadded" not in out  # the family's words on planners that differ are left out here
    doc = json.loads(run(capsys, "compare", *source, "--budget-gib", "40", "--json")[1])
    assert [x["same_as"] for x in doc["layouts"]] == [None, "vllm", "vllm"]
    assert doc["same_layouts"][0]["planners"] == ["vllm", "packed", "separate"]
    # the one row stands for three equal ones (a separate pool's group also says its own pool's blocks)
    caps = [{k: v for k, v in x.items() if k not in ("label", "same_as", "planner", "groups")} for x in doc["layouts"]]
    assert caps[0] == caps[1] == caps[2]


def test_planners_that_differ_keep_their_rows(capsys):
    code, out, _ = run(capsys, "compare", "--model", "jamba-v0.1", "--budget-gib", "40")
    assert [line.split()[0] for line in out.splitlines()[3:6]] == ["vllm", "packed", "separate"]
    assert "one layout" not in out


def test_compare_markdown(capsys):
    code, out, _ = run(capsys, "compare", "--model", "kimi-k2", "--budget-gib", "40", "--markdown")
    assert code == 0 and out.startswith("### kimi-k2 (KV cache bf16, TP 1): budget")
    assert "| vllm = packed = separate | vllm | 16 |" in out


# ---- render's before/after ---------------------------------------------------------------------------
def test_render_says_why_there_is_no_before_after(tmp_path, capsys):
    out = tmp_path / "kimi"
    code, printed, _ = run(capsys, "render", "--model", "kimi-k2", "--dpi", "20", "--no-svg", "--out", str(out))
    assert code == 0 and not (out / "before-after.png").exists()
    assert printed.startswith("no before/after: packed gives vllm's layout here (kimi-k2 has one cache kind")
    assert "no before/after: packed gives vllm&#x27;s layout here" in (out / "report.html").read_text()


def test_render_keeps_a_before_after_that_differs(tmp_path, capsys):
    out = tmp_path / "jamba"
    code, printed, _ = run(capsys, "render", "--model", "jamba-v0.1", "--dpi", "20", "--no-svg", "--out", str(out))
    assert code == 0 and (out / "before-after.png").exists() and "no before/after" not in printed


# ---- plan --json / --markdown -------------------------------------------------------------------------
def test_plan_json_records_every_knob_and_the_budget_rule(capsys):
    argv = ["plan", "--model", "qwen3-next-80b-a3b", "-tp", "2", "--kv-dtype", "fp8", "--max-model-len", "32768"]
    doc = json.loads(run(capsys, *argv, "--max-num-batched-tokens", "4096", "--gpu", "H200", "--json")[1])
    k = doc["knobs"]
    assert (k["kv_cache_dtype"], k["tensor_parallel_size"], k["pipeline_parallel_size"]) == ("fp8", 2, 1)
    assert (k["max_model_len"], k["max_num_batched_tokens"], k["max_in_flight_tokens"]) == (32768, 4096, 2 * 4096)
    assert (
        k["block_size"] == doc["tokens_per_block"] and k["prefix_caching"] is True and k["mamba_cache_mode"] == "align"
    )
    assert k["given"] == ["kv_dtype", "max_model_len", "max_num_batched_tokens", "tensor_parallel_size"]
    assert doc["budget"]["rule"].startswith("vLLM 0.33 Worker.determine_available_memory")
    assert doc["budget"]["inputs"]["gpu"] == "H200" and doc["budget"]["bytes"] == doc["kv_budget"]["available_bytes"]


def test_plan_markdown_from_the_cli_is_the_libraries(capsys):
    code, out, _ = run(capsys, "plan", "--model", "gemma-3-27b", "--budget-gib", "40", "--markdown")
    assert code == 0 and out == kvviz.plan("gemma-3-27b").to_markdown(GIB40) + "\n"


def test_the_engines_figure_names_the_model_and_what_was_planned(tmp_path, monkeypatch, capsys):
    import kvviz.engines.figure as engines_figure

    drawn = []
    real = engines_figure.compare_figure
    monkeypatch.setattr(engines_figure, "compare_figure", lambda *a, **k: drawn.append(real(*a, **k)) or drawn[-1])
    argv = ["compare", "--model", "llama-3.1-8b", "--engines", "vllm,sglang", "--budget-gib", "40", "-tp", "2"]
    assert run(capsys, *argv, "--kv-dtype", "fp8", "--figure", str(tmp_path / "e.svg"))[0] == 0
    assert "llama-3.1-8b (KV cache fp8 (model bf16), TP 2): one KV budget" in " ".join(figure_texts(drawn[0]))
