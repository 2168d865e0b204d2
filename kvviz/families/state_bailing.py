"""State-family readers of the Bailing hybrids (Ling 2.5 / Bailing-V2.5: linear attention beside MLA;
Bailing-V3 and its VL wrapper: KDA beside MLA): config.json -> `StateConfig`, citing vLLM 0.33's model files
(vllm/model_executor/models/), and the config classes vLLM reads them with (custom code, or its own
BailingMoeV3VLConfig). The records naming them: kvviz.families.state_records."""

from __future__ import annotations

import types

from kvviz.base.errors import require
from kvviz.base.inputs import short_repr
from kvviz.families.hf_bounds import mla_dims
from kvviz.families.state_config import (
    MLA,
    STATE,
    Slot,
    StateConfig,
    custom_code_config,
    head_dim_or_split,
    int_of,
    kda_beside_mla,
)

# model_arch_config_convertor.py is_deepseek_mla: the Bailing hybrids' model types whose MLA layers vLLM
# serves with use_mla. Under another model_type use_mla is off, Platform._align_hybrid_block_size sizes
# the attention page as plain attention and unify_kv_cache_spec_page_size refuses the MLA page
# (NotImplementedError: "Padding is only supported for non-MLA attention layers").
BAILING_MLA_MODEL_TYPES = ("bailing_hybrid",)


def _bailing_mla(raw, text, *, name: str) -> tuple[int, int]:
    model_type = getattr(text, "model_type", None) or raw.get("model_type")
    require(
        model_type in BAILING_MLA_MODEL_TYPES,
        f"{name}: model_type {short_repr(model_type)}: vLLM 0.33 serves the Bailing hybrids' MLA layers only "
        f"under model_type {', '.join(BAILING_MLA_MODEL_TYPES)} (is_deepseek_mla; else it cannot unify the "
        f"MLA page with the state page)",
    )
    require(getattr(text, "kv_lora_rank", None) is not None, f"{name}: config is missing field 'kv_lora_rank'")
    return mla_dims(raw, text, name=name)


def _wrapper_prefix(raw) -> str:
    archs = raw.get("architectures") or []
    return "language_model." if archs and str(archs[0]).endswith("ForConditionalGeneration") else ""


def bailing_v3(raw, top, text, *, name):
    """bailing_moe_v3.py BailingMoeV3DecoderLayer: _is_kda_layer(i, layer_group_size, n) -> KDA
    (BailingMoeV3KimiDeltaAttention at `.self_attn`: kda_state_shape(num_attention_heads, head_dim,
    short_conv_kernel_size), float32 recurrent state), else MLA (BailingMoeV3MLAAttention ->
    MultiHeadLatentAttentionWrapper `.self_attn.attn`). BailingMoeV3VLForConditionalGeneration
    (bailing_moe_v3_vl.py) builds it under `language_model.` from its text_config."""
    n = int_of(text, "num_hidden_layers", name=name)
    group = int_of(text, "layer_group_size", name=name)
    require(
        getattr(text, "no_kda_lora", False) is True,
        f"{name}: no_kda_lora={short_repr(getattr(text, 'no_kda_lora', None))}: vLLM 0.33 refuses it "
        f"('BailingMoeV3 KDA currently expects no_kda_lora=True')",
    )
    rank, rope = _bailing_mla(raw, text, name=name)
    prefix = _wrapper_prefix(raw)
    grouped = n // group * group
    slots = tuple(
        Slot(STATE, f"{prefix}model.layers.{i}.self_attn", i)
        if not ((i + 1) % group == 0 or i >= grouped)
        else Slot(MLA, f"{prefix}model.layers.{i}.self_attn.attn", i)
        for i in range(n)
    )
    args = (
        ("num_heads", int_of(text, "num_attention_heads", name=name)),
        ("head_dim", int_of(text, "head_dim", name=name)),
        ("conv_kernel", int_of(text, "short_conv_kernel_size", name=name)),
    )
    return kda_beside_mla(text, slots, n, args, rank, rope, name=name)


def bailing_v2_5(raw, top, text, *, name):
    """bailing_moe_linear.py BailingMoeV25Model: is_linear_layer(i, layer_group_size) ((i + 1) %
    layer_group_size != 0; layer_group_size defaults to 1: no linear layer) -> BailingMoELinearAttention
    at `.self_attn` (layers/mamba/linear/base.py LinearAttention: linear_attention_state_shape(
    num_attention_heads, head_dim), one tensor of the model dtype), else BailingMoeV25MLAAttention
    `.self_attn.attn`. head_dim: config.head_dim, else hidden_size // num_attention_heads."""
    n = int_of(text, "num_hidden_layers", name=name)
    group = int_of(text, "layer_group_size", name=name, default=1)
    rank, rope = _bailing_mla(raw, text, name=name)
    slots = tuple(
        Slot(STATE, f"model.layers.{i}.self_attn", i)
        if (i + 1) % group != 0
        else Slot(MLA, f"model.layers.{i}.self_attn.attn", i)
        for i in range(n)
    )
    heads = int_of(text, "num_attention_heads", name=name)
    args = (
        ("num_heads", heads),
        ("head_dim", head_dim_or_split(text, name=name)),
        # BailingMoELinearAttention.__init__: tp_size <= group_norm_size, group_norm_size % tp_size == 0
        ("group_norm_size", int_of(text, "group_norm_size", name=name, default=1)),
    )
    return StateConfig(
        mamba_type="linear",
        slots=slots,
        num_hidden_layers=n,
        state_args=args,
        num_attention_heads=heads,
        kv_lora_rank=rank,
        qk_rope_head_dim=rope,
    )


# transformers_utils/configs/bailing_moe_v3_vl.py BailingMoeV3TextConfig.__init__: the defaults of the
# fields the reader reads (vLLM's own class for the VL wrapper's text_config); head_dim = head_dim or
# hidden_size // num_attention_heads
BAILING_V3_TEXT_DEFAULTS = dict(
    model_type="bailing_hybrid",
    hidden_size=2048,
    num_hidden_layers=20,
    num_attention_heads=16,
    max_position_embeddings=32768,
    layer_group_size=5,
    kv_lora_rank=512,
    qk_rope_head_dim=64,
    no_kda_lora=False,
    short_conv_kernel_size=4,
)


def _bailing_v3_vl_config(raw: dict, *, name: str):
    """(top, text) of BailingMoeV3VLConfig (vLLM's own class, model_type bailing_moe_v3_vl): text_config
    read with BailingMoeV3TextConfig's defaults."""
    top = types.SimpleNamespace(**{k: v for k, v in raw.items() if isinstance(k, str) and k.isidentifier()})
    given = raw.get("text_config")
    require(given is None or isinstance(given, dict), f"{name}: text_config must be an object")
    fields = {**BAILING_V3_TEXT_DEFAULTS, **{k: v for k, v in (given or {}).items() if isinstance(k, str)}}
    fields["model_type"] = "bailing_hybrid"  # BailingMoeV3TextConfig pops the given model_type
    if not fields.get("head_dim"):
        fields["head_dim"] = fields["hidden_size"] // fields["num_attention_heads"]
    text = types.SimpleNamespace(**{k: v for k, v in fields.items() if k.isidentifier()})
    for key in ("torch_dtype", "dtype"):
        if getattr(text, key, None) is None and raw.get(key) is not None:
            setattr(text, key, raw[key])
    return top, text


def bailing_v3_config(raw: dict, *, name: str):
    """(top, text) of a Bailing-V3 config as vLLM reads it: BailingMoeV3VLConfig (vLLM's own class) for model_type
    bailing_moe_v3_vl, the checkpoint's custom code otherwise (None: a VL architecture read by transformers)."""
    if raw.get("model_type") == "bailing_moe_v3_vl":
        return _bailing_v3_vl_config(raw, name=name)
    return custom_code_config(raw, name=name)
