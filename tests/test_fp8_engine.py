"""What fp8 buys (kvviz.deploy.fp8, docs/deploy.md#what-fp8-buys) against vLLM 0.33's own plans at bf16 and fp8.

tests/data/vllm-0.33/fp8-gain/plans.json and plans-fp8.json were made by scripts/vllm_reference_plans.py (that
folder's README): vLLM's own model construction and get_kv_cache_configs / get_kv_cache_capacity with
--kv-cache-dtype auto and fp8, on an attention-only model and on Mamba-2 / GDN hybrids at 512 tokens and 32k.
The ratio is fp8's max concurrency over bf16's (the capacity lines before int()), so kvviz's must equal the
quotient of the engine's two numbers, and each side's num_blocks the engine's.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

import kvviz
from kvviz.cli import main
from kvviz.deploy.fp8 import fp8_gain
from kvviz.options import Options

DATA = Path(__file__).parent / "data" / "vllm-0.33" / "fp8-gain"
BF16 = json.loads((DATA / "plans.json").read_text())
FP8 = json.loads((DATA / "plans-fp8.json").read_text())
MNBT = BF16["max_num_batched_tokens"]
KEY = f"max_num_batched_tokens={MNBT}"


def _engine(name: str, budget: str) -> tuple[float, int, int]:
    """(fp8's concurrency over bf16's, bf16 num_blocks, fp8 num_blocks) in vLLM's own plans."""
    b, f = BF16["cases"][name]["budgets"][budget], FP8["cases"][name]["budgets"][budget]
    ratio = f["capacity"][KEY]["max_concurrency"] / b["capacity"][KEY]["max_concurrency"]
    return ratio, b["num_blocks"], f["num_blocks"]


def test_the_references_are_bf16_and_fp8_of_the_same_configs():
    assert (BF16["kv_cache_dtype"], FP8["kv_cache_dtype"]) == ("auto", "fp8")
    assert sorted(BF16["cases"]) == sorted(FP8["cases"]) and not BF16["failures"] and not FP8["failures"]


@pytest.mark.parametrize("name", sorted(BF16["cases"]))
def test_fp8_gain_equals_vllms_two_plans(name):
    """The library and `kvviz plan --fp8-gain --json`: the ratio and each side's blocks, at 8 and 40 GiB."""
    folder = DATA / "configs" / name
    length = BF16["cases"][name]["settings"]["max_model_len"]
    for budget_key, budget in BF16["budgets"].items():
        ratio, bf16_blocks, fp8_blocks = _engine(name, budget_key)
        g = fp8_gain(kvviz.load(folder), length, budget, Options(max_num_batched_tokens=MNBT))
        assert g.ratio == pytest.approx(ratio, rel=1e-12), (name, budget_key)
        assert (g.sides[0]["num_blocks"], g.sides[1]["num_blocks"]) == (bf16_blocks, fp8_blocks), (name, budget_key)
        out = io.StringIO()
        argv = ["plan", "--hf-config", str(folder), "--max-model-len", str(length), "--budget-bytes", str(budget)]
        with contextlib.redirect_stdout(out):
            assert main(argv + ["--max-num-batched-tokens", str(MNBT), "--fp8-gain", "--json"]) == 0
        got = json.loads(out.getvalue())["fp8_gain"]
        assert got["ratio"] == pytest.approx(ratio, abs=5e-5), (name, budget_key)  # the JSON rounds to 4 places
        assert f"buys {ratio:.2f}x" in got["line"]


def test_issue_55196s_two_ends_are_the_engines():
    """Attention-only 2.00x (Llama-3.1-8B); a Mamba-2 hybrid at short context 1.00x (Granite-4.0-H at 512 tokens:
    the state pins the page, the same blocks on both sides) and more at 32k (1.53x), as vLLM's own plans give."""
    for budget in BF16["budgets"]:
        assert _engine("llama-3.1-8b", budget)[0] == 2.0
        ratio, bf16_blocks, fp8_blocks = _engine("granite-4.0-h-512", budget)
        assert ratio == 1.0 and bf16_blocks == fp8_blocks
        assert f"{_engine('granite-4.0-h-32768', budget)[0]:.2f}" == "1.53"
