"""kvviz against vLLM 0.33's own plans of more registry architectures (issue 27, "plan them").

tests/data/vllm-0.33/registry-more/plans.json holds what vLLM 0.33.0 itself planned (scripts/vllm_reference_plans.py:
its real model construction on the meta device and its planner) for one config per architecture, each shaped like
the public released model's config.json (registry-more/<arch>/config.json, configuration_ref.py where the config
class is custom code; see that folder's README). Every case must plan field for field as vLLM did (the registry
test's _compare: groups, layer names, block size, pages, bytes per block, num_blocks at 8 and 40 GiB, blocks per
request, the capacity line). The rules behind them are also checked on variants of those configs, each against
the cited model file."""

import json
from pathlib import Path

import pytest
from test_registry_plans import _compare  # tests/ is on sys.path under pytest's rootdir conftest

import kvviz
from kvviz.base.errors import KvvizError
from kvviz.options import Options

HERE = Path(__file__).parent / "data" / "vllm-0.33" / "registry-more"
PLANS = json.loads((HERE / "plans.json").read_text())
CASES = PLANS["cases"]
# the architectures of issue 27's "plan them" list this file covers (each must have vLLM's own plan)
ARCHS = (
    "AfmoeForCausalLM BailingMoeForCausalLM BailingMoeV2ForCausalLM HYV3ForCausalLM MiMoForCausalLM "
    "NemotronForCausalLM Param2MoEForCausalLM SolarForCausalLM TeleChat2ForCausalLM TeleFLMForCausalLM "
    "DeepseekForCausalLM InternLM2ForCausalLM MiniCPMForCausalLM OrionForCausalLM Step1ForCausalLM "
    "ChatGLMModel ChatGLMForConditionalGeneration GLM4VForCausalLM DbrxForCausalLM"
).split()


def _raw(arch: str) -> dict:
    return json.loads((HERE / arch / "config.json").read_text())


def _load(raw: dict, tmp_path: Path, name: str = "variant"):
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(raw))
    return kvviz.load(str(d))


# vLLM's own construction cannot run on the meta device for these (README.md): derived by hand below
BY_HAND = ("Step1ForCausalLM",)


def test_every_architecture_has_vllms_plan():
    assert sorted(CASES) == sorted(a for a in ARCHS if a not in BY_HAND), PLANS.get("failures")
    assert sorted(PLANS["failures"]) == sorted(BY_HAND)
    # step1.py StepAttention.__init__: alibi_slopes.tolist() of a tensor made on the meta device
    assert "Cannot copy out of meta tensor" in PLANS["failures"]["Step1ForCausalLM"]["error"]
    for arch, case in CASES.items():
        assert case["architecture"] == arch and case["settings"]["tp_world_size"] == 1, arch


@pytest.mark.parametrize("arch", sorted(CASES))
def test_plan_equals_vllm_033(arch):
    case = CASES[arch]
    model = kvviz.load(str(HERE / case["config_path"]))
    assert model.architecture == arch
    _compare(model, case)


def test_step1_plan_by_hand():
    """Step1 (registry-more/Step1ForCausalLM/config.json: 32 layers, 32 heads, num_attention_groups 4, hidden 4096,
    max_seq_len 16384, bf16), derived from vLLM 0.33's code, in _compare's case shape:

    * step1.py StepAttention.__init__: KV heads num_attention_groups = 4, head size 4096 // 32 = 128; one
      Attention per layer at model.layers.{i}.self_attn.attn (Step1ForCausalLM .model, StepDecoderModel .layers,
      StepDecoderLayer .self_attn, StepAttention .attn), full attention (no window: ALiBi, no sliding_window);
    * max_model_len min(32768, 16384): config/model.py _get_and_verify_max_len reads max_seq_len;
    * v1/kv_cache_interface.py FullAttentionSpec.page_size_bytes: 2 (K, V) x 16 tokens x 4 x 128 x 2 bytes;
      one group of the 32 layers (kv_cache_utils.py get_kv_cache_groups: every layer the same spec), so a block
      of the pool is 32 pages;
    * v1/core/kv_cache_planning.py: num_blocks = available_memory // bytes_per_block;
    * v1/core/kv_cache_utils.py get_max_concurrency_for_kv_cache_config: a request takes
      cdiv(16384, 16) blocks; concurrency num_blocks / that; get_kv_cache_capacity: tokens
      int(concurrency x max_model_len)."""
    layers, page, max_len = 32, 2 * 16 * 4 * (4096 // 32) * 2, 16384
    per_request = -(-max_len // 16)
    budgets = {}
    for label, gib in (("8GiB", 8), ("40GiB", 40)):
        available = gib << 30
        blocks = available // (layers * page)
        budgets[label] = {
            "available_bytes_per_gpu": available,
            "num_blocks": blocks,
            "capacity": {
                "max_num_batched_tokens=8192": {
                    "blocks_per_request_per_group": [per_request],
                    "gpu_kv_cache_size_tokens": int(blocks / per_request * max_len),
                    "max_concurrency": blocks / per_request,
                }
            },
        }
    case = {
        "settings": {"tp_world_size": 1, "max_num_batched_tokens": 8192, "max_model_len": max_len},
        "num_groups": 1,
        "bytes_per_block": layers * page,
        "groups": [
            {
                "block_size": 16,
                "page_size_bytes": [page],
                "layer_names": [f"model.layers.{i}.self_attn.attn" for i in range(layers)],
            }
        ],
        "budgets": budgets,
    }
    _compare(kvviz.load(str(HERE / "Step1ForCausalLM")), case)


def _caches(model, tp: int = 1):
    return model.reader.caches(model, Options(tensor_parallel_size=tp))


def _heads(model) -> tuple[int, int]:
    (pair,) = {(c.num_kv_heads, c.head_size) for c in _caches(model)}
    return pair


def test_head_size_is_hidden_over_heads_whatever_head_dim_says(tmp_path):
    """internlm2.py InternLM2Attention, minicpm.py MiniCPMAttention, orion.py OrionAttention, step1.py StepAttention,
    deepseek_v2.py DeepseekAttention, chatglm.py GLMAttention (kv_channels unread), dbrx.py DbrxAttention: head_dim =
    hidden_size // num_attention_heads; a head_dim key changes nothing."""
    for arch in ("InternLM2ForCausalLM", "MiniCPMForCausalLM", "OrionForCausalLM", "Step1ForCausalLM"):
        raw = dict(_raw(arch), head_dim=32)
        assert _heads(_load(raw, tmp_path, arch))[1] == raw["hidden_size"] // raw["num_attention_heads"], arch
    raw = dict(_raw("DeepseekForCausalLM"), head_dim=32)
    assert _heads(_load(raw, tmp_path, "deepseek"))[1] == 2048 // 16
    raw = dict(_raw("ChatGLMModel"), kv_channels=64)
    assert _heads(_load(raw, tmp_path, "chatglm")) == (2, 4096 // 32)
    # Nemotron (nemotron.py NemotronAttention): head_dim when the config has one, 4096 // 48 is not it
    assert _heads(kvviz.load(str(HERE / "NemotronForCausalLM"))) == (8, 128)


def test_kv_heads_readers(tmp_path):
    # chatglm.py GLMAttention.__init__: multi_query_group_num only when multi_query_attention, else the heads
    raw = dict(_raw("ChatGLMModel"), multi_query_attention=False)
    assert _heads(_load(raw, tmp_path, "mha")) == (32, 128)
    # step1.py StepAttention.__init__: num_attention_groups, else num_key_value_heads, else 1; <= 0 gives 1
    raw = _raw("Step1ForCausalLM")
    del raw["num_attention_groups"]
    assert _heads(_load(dict(raw, num_key_value_heads=8), tmp_path, "kv8"))[0] == 8
    assert _heads(_load(raw, tmp_path, "none"))[0] == 1
    assert _heads(_load(dict(raw, num_attention_groups=0), tmp_path, "zero"))[0] == 1
    # dbrx.py DbrxAttention.__init__: attn_config.kv_n_heads, replicated past it under TP (max(1, kv // tp))
    model = kvviz.load(str(HERE / "DbrxForCausalLM"))
    assert {(c.num_kv_heads, c.head_size) for c in _caches(model, tp=16)} == {(1, 6144 // 48)}


def test_layer_names(tmp_path):
    """The names vLLM gives each model's attention, as its prefixes build them."""
    first = {
        arch: _caches(kvviz.load(str(HERE / arch)))[0].name
        for arch in (
            "InternLM2ForCausalLM",
            "BailingMoeV2ForCausalLM",
            "ChatGLMForConditionalGeneration",
            "DbrxForCausalLM",
        )
    }
    assert first == {
        "InternLM2ForCausalLM": "model.layers.0.attention.attn",  # internlm2.py InternLM2DecoderLayer
        "BailingMoeV2ForCausalLM": "model.layers.0.attention.attn",  # bailing_moe.py BailingMoeBlock
        # registry.py: ChatGLMForConditionalGeneration is chatglm.py ChatGLMForCausalLM, no language_model. prefix
        "ChatGLMForConditionalGeneration": "transformer.encoder.layers.0.self_attention.attn",
        "DbrxForCausalLM": "transformer.blocks.0.norm_attn_norm.attn.attn",  # dbrx.py DbrxBlock
    }


def test_refusals_name_the_field(tmp_path):
    # param2moe.py Param2MoEAttention.__init__: assert num_key_value_heads % tp_size == 0 (no replication)
    model = kvviz.load(str(HERE / "Param2MoEForCausalLM"))
    assert {c.num_kv_heads for c in _caches(model, tp=4)} == {1}
    with pytest.raises(KvvizError, match="4 KV heads are not divisible"):
        _caches(model, tp=8)
    # deepseek_v2.py DeepseekAttention: rswa_window builds RSWAAttention, whose cache kvviz does not model
    with pytest.raises(KvvizError, match="rswa_window"):
        _load(dict(_raw("DeepseekForCausalLM"), rswa_window=1024), tmp_path, "rswa")
    # chatglm.py GLMAttention.__init__ reads config.original_rope (vLLM: AttributeError without it)
    raw = _raw("ChatGLMModel")
    del raw["original_rope"]
    with pytest.raises(KvvizError, match="original_rope"):
        _load(raw, tmp_path, "no_rope")


def test_mimo_reads_qwen2s_config(tmp_path):
    """mimo.py MiMoForCausalLM(Qwen2ForCausalLM): Qwen2's config rules; use_sliding_window false leaves no window
    (Qwen2Config), its MTP layers (num_nextn_predict_layers) are the drafter's and register no target cache."""
    model = kvviz.load(str(HERE / "MiMoForCausalLM"))
    assert model.model_type == "mimo" and model.config.sliding_window is None
    assert len(_caches(model)) == 36 and {c.sliding_window for c in _caches(model)} == {None}
    # Qwen2Config: a layer is sliding from max_window_layers on; engine/arg_utils.py create_engine_config gives
    # CacheConfig.sliding_window (which Qwen2Attention's Attention takes) only when every layer is sliding
    raw = dict(_raw("MiMoForCausalLM"), use_sliding_window=True, sliding_window=4096)
    assert {c.sliding_window for c in _caches(_load(raw, tmp_path, "some"))} == {None}  # max_window_layers 36
    every = _load(dict(raw, max_window_layers=0), tmp_path, "every")
    assert {c.sliding_window for c in _caches(every)} == {4096}
