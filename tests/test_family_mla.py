"""The MLA family against vLLM 0.33's own planner output (tests/data/vllm-0.33/new-kinds.json,
DeepSeek-V3) and vLLM's MLA rules (layers/attention/mla_attention.py MLAAttention.get_kv_cache_spec:
one latent head of kv_lora_rank + qk_rope_head_dim, num_kv_heads 1 on every rank)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_family_state import CASES, DATA, check_against_vllm, check_cli_against_vllm

from kvviz.base.errors import KvvizError
from kvviz.families import load, load_path, model_from_dict
from kvviz.options import Options
from kvviz.vllm.plan import plan_model

MLA_CASES = [c for c in CASES["cases"] if c["model_key"] == "deepseek-v3"]
PRESETS = Path(__file__).parents[1] / "kvviz" / "presets"


@pytest.mark.parametrize("case", MLA_CASES, ids=[c["case"] for c in MLA_CASES])
def test_matches_vllm(case):
    check_against_vllm(case)


@pytest.mark.parametrize("name", ["deepseek-v3", "kimi-k2"])
def test_pages_from_config(name):
    raw = json.loads((PRESETS / f"{name}.json").read_text())
    m = load(name)
    assert m.family == "mla"
    caches = m.reader.caches(m, Options())
    assert [c.name for c in caches] == [f"model.layers.{i}.self_attn.attn" for i in range(raw["num_hidden_layers"])]
    token = (raw["kv_lora_rank"] + raw["qk_rope_head_dim"]) * 2  # bf16, one head
    p = plan_model(m, options=Options(max_model_len=32768))
    assert p.tokens_per_block == 16  # not hybrid: CacheConfig block size
    assert p.layout.block_stride == raw["num_hidden_layers"] * 16 * token


@pytest.mark.parametrize("name", ["deepseek-v3", "kimi-k2"])
def test_mla_not_tp_sharded(name):
    m = load(name)
    one = m.reader.caches(m, Options())
    for tp in (2, 8):
        assert m.reader.caches(m, Options(tensor_parallel_size=tp)) == one
        assert (
            plan_model(m, options=Options(max_model_len=32768, tensor_parallel_size=tp)).layout.block_stride
            == plan_model(m, options=Options(max_model_len=32768)).layout.block_stride
        )


def test_tp_must_divide_heads():
    m = load("kimi-k2")  # 64 attention heads
    with pytest.raises(KvvizError, match="tensor_parallel_size=3"):
        plan_model(m, options=Options(tensor_parallel_size=3))


def test_fp8_kv():
    m = load("deepseek-v3")
    (c, *_) = m.reader.caches(m, Options(kv_dtype="fp8"))
    assert c.token_bytes == 576


def test_kimi_k2_reads_without_transformers_and_knobs():
    m = load("kimi-k2")
    assert m.model_type == "kimi_k2" and m.architecture == "DeepseekV3ForCausalLM"
    assert "mamba_ssm_dtype" not in m.reader.knobs_for(m)
    with pytest.raises(KvvizError, match="prefix_caching"):
        plan_model(m, options=Options(prefix_caching=False))


def test_missing_kv_lora_rank_is_one_line():
    raw = json.loads((PRESETS / "kimi-k2.json").read_text())
    del raw["kv_lora_rank"]
    with pytest.raises(KvvizError, match="kv_lora_rank"):
        model_from_dict(raw, name="x")


def test_describe():
    assert "\n" not in load("deepseek-v3").describe()
    assert load_path(DATA / "configs" / "deepseek-v3").reader.key == "mla"


@pytest.mark.parametrize("case", MLA_CASES, ids=[c["case"] for c in MLA_CASES])
def test_cli_matches_vllm(case):
    check_cli_against_vllm(case)
