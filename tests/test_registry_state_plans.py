"""The state family's newer vLLM 0.33 hybrids against vLLM's own plans (issue 27).

tests/data/vllm-0.33/registry-state/plans.json holds what vLLM 0.33.0 itself planned, with
scripts/vllm_reference_plans.py (its real model construction on the meta device and its planner), for the
config folders beside it (README.md there says how each was made): Bailing-V3 (KDA + MLA) and its VL wrapper,
Bailing-V2.5 / Ling 2.5 (linear attention + MLA), AliceAI (KDA + gated attention), the InternS2-Preview /
Mobius wrappers of Qwen3.5-MoE's gated delta net and Kimi-K3's wrapper of Kimi-Linear. Each is compared
field for field by tests/test_registry_plans.py's `_compare`; the MLA hybrids at TP > 1 by hand.

A wrapper builds its causal LM from its text_config under the prefix `language_model.`, so its plan is that
causal LM's plan with every layer name prefixed; the tests check it against the causal LM's vLLM plan too:

* BailingMoeV3VLForConditionalGeneration (models/bailing_moe_v3_vl.py __init__: self.language_model =
  BailingMoeV3ForCausalLM(vllm_config.with_hf_config(text_config), prefix="language_model")): its
  text_config is the BailingMoeV3ForCausalLM reference config;
* InternS2PreviewForConditionalGeneration (models/interns2_preview.py: a Qwen3_5MoeForConditionalGeneration
  subclass) and InternS2MobiusForConditionalGeneration (models/interns2_mobius.py InternS2MobiusDecoderLayer:
  QwenGatedDeltaNetAttention `.linear_attn`, Qwen3NextAttention `.self_attn` under `language_model.`): their
  text_config is the registry's Qwen3_5MoeForCausalLM default config (tests/data/vllm-0.33/registry) plus
  mamba_ssm_dtype float32, which vLLM does not read for them (models/config.py MODELS_CONFIG_MAP has
  neither architecture, so no Qwen3_5ForConditionalGenerationConfig copies it): the plan is vLLM's
  Qwen3_5MoeForCausalLM plan (bf16 SSM state) under `language_model.`;
* KimiK3ForConditionalGeneration (models/kimi_k3/nvidia/model.py __init__: init_vllm_registered_model(
  hf_config=config.text_config, prefix="language_model", architectures=["KimiLinearForCausalLM"])) with
  Kimi-Linear-48B-A3B's text config, also derived by hand (see its test): KDA of 32 heads x 128, conv kernel 4 and
  MLA 512 + 64, the geometry of the Bailing-V3 reference, so its state and MLA pages and block size are that
  vLLM plan's.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

import kvviz
from kvviz.base.errors import KvvizError
from kvviz.core.kinds import CacheKind
from kvviz.families import FAMILIES, model_from_dict
from tests.test_registry_plans import _compare

HERE = Path(__file__).parent / "data" / "vllm-0.33" / "registry-state"
PLANS = json.loads((HERE / "plans.json").read_text())
CASES = PLANS["cases"]
REGISTRY = json.loads((HERE.parent / "registry" / "plans.json").read_text())["cases"]


def _load(arch: str):
    return kvviz.load(str(HERE / arch))


@pytest.mark.parametrize("arch", sorted(CASES))
def test_plan_equals_vllm_033(arch):
    case = CASES[arch]
    assert case["architecture"] == arch
    _compare(kvviz.load(str(HERE / case["config_path"])), case)


def _prefixed(case: dict, prefix: str) -> dict:
    """vLLM's plan `case` with every layer name under `prefix` (a wrapper's language model)."""
    groups = [dict(g, layer_names=[prefix + n for n in g["layer_names"]]) for g in case["groups"]]
    return dict(case, groups=groups)


@pytest.mark.parametrize(
    "wrapper,causal,plans",
    [
        ("BailingMoeV3VLForConditionalGeneration", "BailingMoeV3ForCausalLM", CASES),
        ("InternS2PreviewForConditionalGeneration", "Qwen3_5MoeForCausalLM", REGISTRY),
        ("InternS2MobiusForConditionalGeneration", "Qwen3_5MoeForCausalLM", REGISTRY),
    ],
)
def test_wrapper_is_its_language_model_under_its_prefix(wrapper, causal, plans):
    _compare(_load(wrapper), _prefixed(plans[causal], "language_model."))


def test_interns2_ignores_the_text_configs_mamba_ssm_dtype():
    """Qwen3.5's own wrapper reads mamba_ssm_dtype (float32 here: a float32 SSM state); InternS2's does not."""
    text = json.loads((HERE / "InternS2PreviewForConditionalGeneration" / "config.json").read_text())["text_config"]
    assert text["mamba_ssm_dtype"] == "float32"
    parts = FAMILIES["state"].state_parts(_load("InternS2PreviewForConditionalGeneration"), kvviz.Options())
    assert [p.dtype for p in parts] == ["bf16", "bf16"]


def test_kimi_k3_is_kimi_linear_under_language_model():
    model = _load("KimiK3ForConditionalGeneration")
    ref = CASES["BailingMoeV3ForCausalLM"]["groups"]
    # KimiLinearConfig's default max_position_embeddings (4096): the text config names none
    assert model.max_model_len == 4096
    plan = kvviz.plan(model, max_model_len=4096)
    # kda_layers 1-based (transformers_utils/configs/kimi_linear.py is_kda_layer), the rest MLA, each at
    # language_model.model.layers.{i}.self_attn; 20 KDA + 7 MLA layers: groups of 7 (the smallest kind's count)
    cfg = json.loads((HERE / "KimiK3ForConditionalGeneration" / "config.json").read_text())["text_config"]
    kda = [i - 1 for i in cfg["linear_attn_config"]["kda_layers"]]
    mla = [i for i in range(cfg["num_hidden_layers"]) if i not in kda]
    want = [kda[j::3] for j in range(3)] + [mla]
    assert [[c.layer for c in g.layers] for g in plan.groups] == want
    assert all(c.name == f"language_model.model.layers.{c.layer}.self_attn" for g in plan.groups for c in g.layers)
    # the Bailing-V3 vLLM plan has the same KDA (32 x 128, kernel 4) and MLA (512 + 64) geometry
    assert {c.tokens_per_block for g in plan.groups for c in g.layers} == {ref[0]["block_size"]}
    assert {c.page_bytes for g in plan.groups for c in g.layers} == set(ref[0]["page_size_bytes"])


def test_kimi_k3_full_rank_gate_is_refused():
    raw = json.loads((HERE / "KimiK3ForConditionalGeneration" / "config.json").read_text())
    raw["text_config"]["linear_attn_config"]["use_full_rank_gate"] = True
    with pytest.raises(KvvizError, match="use_full_rank_gate"):
        model_from_dict(raw, name="k3")


def _raw(arch: str) -> dict:
    return json.loads((HERE / arch / "config.json").read_text())


@pytest.mark.parametrize(
    "arch,key,value,match",
    [
        ("BailingMoeV3ForCausalLM", "model_type", "bailing_moe_v3", "is_deepseek_mla"),
        ("BailingMoeV3ForCausalLM", "no_kda_lora", False, "no_kda_lora"),
        ("BailingMoeV2_5ForCausalLM", "kv_lora_rank", None, "kv_lora_rank"),
        ("AliceAIForCausalLM", "router_bias_correction", False, "router_bias_correction"),
        ("AliceAIForCausalLM", "linear_num_value_heads", 32, "matching key/value"),
    ],
)
def test_what_vllm_refuses_is_one_line(arch, key, value, match):
    raw = dict(_raw(arch), **{key: value})
    with pytest.raises(KvvizError, match=match) as e:
        model_from_dict(raw, name=arch)
    assert "\n" not in str(e.value)


def test_linear_attention_state_at_tp():
    """linear_attention_state_shape (layers/mamba/linear/base.py): (num_heads // tp, head_dim, head_dim) of the
    model dtype; BailingMoELinearAttention asserts group_norm_size % tp == 0 (4 here: TP 8 is refused)."""
    model = _load("BailingMoeV2_5ForCausalLM")
    raw = _raw("BailingMoeV2_5ForCausalLM")
    state = FAMILIES["state"]
    for tp in (1, 2, 4):
        (part,) = state.state_parts(model, dataclasses.replace(kvviz.Options(), tensor_parallel_size=tp))
        assert part.shape == (raw["num_attention_heads"] // tp, raw["head_dim"], raw["head_dim"])
        assert part.dtype == "bf16"
    with pytest.raises(KvvizError, match="group_norm_size"):
        state.state_parts(model, dataclasses.replace(kvviz.Options(), tensor_parallel_size=8))


def test_the_linear_attention_state_kind_through_every_view():
    """The new kind as tests/test_every_kind.py checks each kind: plan, text map, JSON, block map, page anatomy."""
    from tests.test_every_kind import test_every_kind_plans_and_draws

    test_every_kind_plans_and_draws(CacheKind.LINEAR_STATE, str(HERE / "BailingMoeV2_5ForCausalLM"))


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@pytest.mark.parametrize("tp", [2, 4])
@pytest.mark.parametrize("arch", ["BailingMoeV3ForCausalLM", "BailingMoeV2_5ForCausalLM"])
def test_mla_hybrid_block_at_tp(arch, tp):
    """By hand at TP > 1: the state shrinks with TP (kda_state_shape / linear_attention_state_shape divide the
    heads), the MLA latent does not (one KV head on every rank: ModelConfig.get_num_kv_heads is 1 for MLA), and
    platforms/interface.py _align_hybrid_block_size picks the smallest multiple of 128 (MLA) tokens whose MLA page
    holds the state, the state page padded to it."""
    raw = _raw(arch)
    heads, d = raw["num_attention_heads"] // tp, raw["head_dim"]
    if arch == "BailingMoeV3ForCausalLM":  # conv (K - 1, 3 H d / tp) bf16 + recurrent (H / tp, d, d) fp32
        state = (raw["short_conv_kernel_size"] - 1) * 3 * heads * d * 2 + heads * d * d * 4
    else:  # one (H / tp, d, d) tensor of the model dtype (bf16)
        state = heads * d * d * 2
    token = (raw["kv_lora_rank"] + raw["qk_rope_head_dim"]) * 2
    block = 128 * _cdiv(state, 128 * token)
    plan = kvviz.plan(_load(arch), tensor_parallel_size=tp, max_model_len=32768)
    assert {c.tokens_per_block for g in plan.groups for c in g.layers} == {block}
    assert {c.page_bytes for g in plan.groups for c in g.layers} == {block * token}
