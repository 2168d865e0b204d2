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


def test_kimi_k2_plans_without_transformers_and_knobs():
    m = load("kimi-k2")  # the preset's parsed form ships
    assert m.model_type == "kimi_k2" and m.architecture == "DeepseekV3ForCausalLM"
    assert "mamba_ssm_dtype" not in m.reader.knobs_for(m)
    with pytest.raises(KvvizError, match="prefix_caching"):
        plan_model(m, options=Options(prefix_caching=False))


def test_kimi_k2_is_read_with_transformers_deepseek_v3_config():
    # vLLM 0.33 transformers_utils/config.py _CONFIG_REGISTRY: kimi_k2="DeepseekV3Config", which
    # configs/__init__.py takes from transformers: a field the config.json lacks takes that class's default
    from transformers import DeepseekV3Config

    raw = json.loads((PRESETS / "kimi-k2.json").read_text())
    del raw["kv_lora_rank"]
    m = model_from_dict(raw, name="x")
    assert m.model_type == "kimi_k2"
    (c, *_) = m.reader.caches(m, Options())
    assert c.token_bytes == (DeepseekV3Config().kv_lora_rank + raw["qk_rope_head_dim"]) * 2


def test_describe():
    assert "\n" not in load("deepseek-v3").describe()
    assert load_path(DATA / "configs" / "deepseek-v3").reader.key == "mla"


@pytest.mark.parametrize("case", MLA_CASES, ids=[c["case"] for c in MLA_CASES])
def test_cli_matches_vllm(case):
    check_cli_against_vllm(case)


# -- issue 27: more MLA architectures, DSA's indexer cache (vLLM's own plans: tests/test_registry_plans.py) -----

REGISTRY = DATA / "registry" / "configs"
PLANS = json.loads((DATA / "registry" / "plans.json").read_text())["cases"]


def _registry_raw(arch: str) -> dict:
    return json.loads((REGISTRY / arch / "config.json").read_text())


def _dsa_config(**extra) -> dict:
    """A DeepSeek-V3.2-shaped config (the cache-relevant fields of DeepSeek-V3.2-Exp's config.json: 61 layers,
    128 heads, kv_lora_rank 512, qk_rope_head_dim 64, index_head_dim 128, index_topk 2048)."""
    return {
        "architectures": ["DeepseekV32ForCausalLM"],
        "model_type": "deepseek_v32",
        "hidden_size": 7168,
        "num_hidden_layers": 61,
        "num_attention_heads": 128,
        "num_key_value_heads": 128,
        "q_lora_rank": 1536,
        "kv_lora_rank": 512,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "index_head_dim": 128,
        "index_n_heads": 64,
        "index_topk": 2048,
        "max_position_embeddings": 163840,
        "num_nextn_predict_layers": 1,
        "torch_dtype": "bfloat16",
        **extra,
    }


@pytest.mark.parametrize("tp", [1, 2, 8])
def test_dsa_indexer_cache_hand_derived(tp):
    """models/deepseek_v32/attention.py DeepseekV32Attention: per layer the indexer (built first) registers
    DeepseekV32IndexerCache `...self_attn.indexer.k_cache`, MLAAttentionSpec(num_kv_heads=1, head_size=
    index_head_dim + index_head_dim // quant_block_size(128) x 4, uint8), then MLAAttention `...self_attn.attn`
    (kv_lora_rank + qk_rope_head_dim, bf16); neither is TP-sharded. Both MLAAttentionSpecs of one block size:
    one group (UniformTypeKVCacheSpecs), block 64 (FLASH_ATTN_MLA_SPARSE: MultipleOf(64))."""
    raw = _dsa_config()
    m = model_from_dict(raw, name="dsv32")
    p = plan_model(m, options=Options(max_model_len=32768, tensor_parallel_size=tp))
    n = raw["num_hidden_layers"]
    index = raw["index_head_dim"] + raw["index_head_dim"] // 128 * 4  # 132 B a token (uint8)
    latent = (raw["kv_lora_rank"] + raw["qk_rope_head_dim"]) * 2  # 1,152 B a token (bf16)
    assert index == 132 and p.tokens_per_block == 64
    (g,) = p.layout.groups
    assert [c.name for c in g.layers] == [
        f"model.layers.{i}.self_attn.{s}" for i in range(n) for s in ("indexer.k_cache", "attn")
    ]
    assert sorted({c.page_bytes for c in g.layers}) == [64 * index, 64 * latent]
    assert p.layout.block_stride == n * 64 * (index + latent)


def test_dsa_glm_moe_dsa_equals_the_same_rule():
    """GlmMoeDsaForCausalLM is DeepseekV32ForCausalLM (models/deepseek_v32/__init__.py); vLLM's own plan of it
    (plans.json) gives the same two page sizes the rule above derives from its config."""
    raw = _registry_raw("GlmMoeDsaForCausalLM")
    case = PLANS["GlmMoeDsaForCausalLM"]
    index = raw["index_head_dim"] + raw["index_head_dim"] // 128 * 4
    latent = (raw["kv_lora_rank"] + raw["qk_rope_head_dim"]) * 2
    (group,) = case["groups"]
    assert sorted(set(group["page_size_bytes"])) == [64 * index, 64 * latent]


def test_dsa_fp8_is_fp8_ds_mla():
    """--kv-cache-dtype fp8 on sparse MLA: FLASHMLA_SPARSE serves it as fp8_ds_mla, 656 B a token at 512 + 64
    (v1/attention/backends/mla/flashmla_sparse.py: 512 E4M3 + 4 fp32 scales + 64 bf16); the indexer row is
    unchanged (vLLM's own plan: tests/test_real_config_parallel.py, plans-fp8.json)."""
    raw = _dsa_config()
    p = plan_model(model_from_dict(raw, name="d"), options=Options(kv_dtype="fp8", max_model_len=32768))
    index = raw["index_head_dim"] + raw["index_head_dim"] // 128 * 4
    latent = raw["kv_lora_rank"] + raw["kv_lora_rank"] // 128 * 4 + raw["qk_rope_head_dim"] * 2
    assert latent == 656 and p.tokens_per_block == 64
    (g,) = p.layout.groups
    assert sorted({c.page_bytes for c in g.layers}) == [64 * index, 64 * latent]


def test_dsa_refusals():
    with pytest.raises(KvvizError, match="block_size=32"):
        plan_model(model_from_dict(_dsa_config(), name="d"), options=Options(block_size=32))
    assert plan_model(model_from_dict(_dsa_config(), name="d"), options=Options(block_size=128)).tokens_per_block == 128
    with pytest.raises(KvvizError, match="index_topk_freq=2"):
        model_from_dict(_dsa_config(index_topk_freq=2), name="d")
    raw = _dsa_config()
    del raw["index_topk"]
    with pytest.raises(KvvizError, match="index_topk"):
        model_from_dict(raw, name="d")


def test_glm4_moe_lite_dense_mla_hand_derived():
    """Glm4MoeLiteForCausalLM (glm4_moe_lite.py): model_type glm4_moe_lite is in is_deepseek_mla, so every
    layer is Glm4MoeLiteMLAAttention (DeepseekV2MLAAttention) `model.layers.{i}.self_attn.attn`, one latent
    head of kv_lora_rank + qk_rope_head_dim; no index_topk, no indexer. (vLLM refused transformers' default
    config: first_k_dense_replace missing; the cache fields are the same, so the rule is applied to it.)"""
    raw = _registry_raw("GlmMoeDsaForCausalLM")  # a GLM MLA config; made glm4_moe_lite, no DSA fields
    raw = {k: v for k, v in raw.items() if not k.startswith("index_")}
    raw.update(architectures=["Glm4MoeLiteForCausalLM"], model_type="glm4_moe_lite")
    m = model_from_dict(raw, name="glm-lite")
    caches = m.reader.caches(m, Options())
    n = raw["num_hidden_layers"]
    assert [c.name for c in caches] == [f"model.layers.{i}.self_attn.attn" for i in range(n)]
    assert {c.token_bytes for c in caches} == {(raw["kv_lora_rank"] + raw["qk_rope_head_dim"]) * 2}
    assert plan_model(m, options=Options(max_model_len=32768)).tokens_per_block == 16


def test_mistral_large_3_and_pangu_read_as_deepseek_mla():
    """mistral_large_3.py MistralLarge3ForCausalLM(DeepseekV3ForCausalLM): the config vLLM adapts from
    params.json has model_type deepseek_v3 (transformers_utils/configs/mistral.py adapt_config_dict);
    openpangu.py: MLA when qk_nope_head_dim, qk_rope_head_dim, v_head_dim and kv_lora_rank are set, its
    custom-code config read as the JSON has it. Both: DeepSeek V3's pages."""
    raw = json.loads((PRESETS / "deepseek-v3.json").read_text())
    base = load("deepseek-v3")
    want = base.reader.caches(base, Options())
    for arch, model_type in (
        ("MistralLarge3ForCausalLM", "deepseek_v3"),
        ("PanguUltraMoEForCausalLM", "pangu_ultra_moe"),
    ):
        m = model_from_dict(dict(raw, architectures=[arch], model_type=model_type), name=arch)
        assert m.family == "mla" and m.reader.caches(m, Options()) == want
    pangu = {k: v for k, v in raw.items() if k != "v_head_dim"}
    with pytest.raises(KvvizError, match="v_head_dim"):
        model_from_dict(dict(pangu, architectures=["PanguUltraMoEForCausalLM"], model_type="pangu_ultra_moe"), name="p")


def test_mla_model_type_outside_is_deepseek_mla_is_refused():
    raw = json.loads((PRESETS / "deepseek-v3.json").read_text())
    with pytest.raises(KvvizError, match="is_deepseek_mla"):
        model_from_dict(dict(raw, architectures=["AXK1ForCausalLM"], model_type="llama"), name="x")


def test_hyv4_with_and_without_sink_equals_vllm_recorded_plan():
    """HYV4MLAAttention with learnable_sink tries a sink-capable backend (_resolve_sink_backend: its FLASHMLA_SPARSE
    subclass), which refuses a dense layer (validate_configuration: "non-sparse not supported"), so the dense
    layers keep FLASH_ATTN_MLA: vLLM's recorded plan (plans.json, made from this very config, learnable_sink
    true), and the same config with learnable_sink false plans the same."""
    raw = _registry_raw("HYV4ForCausalLM")
    assert raw["learnable_sink"] is True
    for m in (model_from_dict(raw, name="hyv4"), model_from_dict(dict(raw, learnable_sink=False), name="hyv4")):
        _assert_recorded_hyv4(m)


def _assert_recorded_hyv4(m) -> None:
    case = PLANS["HYV4ForCausalLM"]
    p = plan_model(m, options=Options(max_model_len=case["settings"]["max_model_len"]))
    assert p.layout.block_stride == case["bytes_per_block"]
    assert [[c.name for c in g.layers] for g in p.layout.groups] == [g["layer_names"] for g in case["groups"]]
    for want in case["budgets"].values():
        if "num_blocks" in want:
            assert p.capacity(want["available_bytes_per_gpu"]).num_blocks == want["num_blocks"]
