"""The state-family readers of vLLM 0.33's newer hybrids (issue 27): Ling 2.5 / Bailing-V2.5 (linear
attention + MLA), Bailing-V3 and its VL wrapper (KDA + MLA), AliceAI (KDA + gated attention) and the
InternS2 wrappers of Qwen3.5-MoE's gated delta net; config.json -> `StateConfig`, each citing its
vLLM 0.33 model file (paths under vllm/model_executor/). kvviz.families.state_readers merges them.
"""

from __future__ import annotations

import types

from kvviz.base.errors import require
from kvviz.base.inputs import short_repr
from kvviz.families.hf import read_config
from kvviz.families.mla import mla_dims
from kvviz.families.state_config import (
    ATTN,
    MLA,
    STATE,
    Slot,
    StateConfig,
    _attn_fields,
    _head_dim_or_split,
    _int,
    _list,
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


def _bailing_v3(raw, top, text, *, name):
    """bailing_moe_v3.py BailingMoeV3DecoderLayer: _is_kda_layer(i, layer_group_size, n) -> KDA
    (BailingMoeV3KimiDeltaAttention at `.self_attn`: kda_state_shape(num_attention_heads, head_dim,
    short_conv_kernel_size), float32 recurrent state), else MLA (BailingMoeV3MLAAttention ->
    MultiHeadLatentAttentionWrapper `.self_attn.attn`). BailingMoeV3VLForConditionalGeneration
    (bailing_moe_v3_vl.py) builds it under `language_model.` from its text_config."""
    n = _int(text, "num_hidden_layers", name=name)
    group = _int(text, "layer_group_size", name=name)
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
        ("num_heads", _int(text, "num_attention_heads", name=name)),
        ("head_dim", _int(text, "head_dim", name=name)),
        ("conv_kernel", _int(text, "short_conv_kernel_size", name=name)),
    )
    return StateConfig(
        mamba_type="kda",
        slots=slots,
        num_hidden_layers=n,
        state_args=args,
        num_attention_heads=_int(text, "num_attention_heads", name=name),
        kv_lora_rank=rank,
        qk_rope_head_dim=rope,
        ssm_dtype="fp32",
        ssm_dtype_source="KDA recurrent state is float32 (kda_state_dtype)",
    )


def _bailing_v2_5(raw, top, text, *, name):
    """bailing_moe_linear.py BailingMoeV25Model: is_linear_layer(i, layer_group_size) ((i + 1) %
    layer_group_size != 0; layer_group_size defaults to 1: no linear layer) -> BailingMoELinearAttention
    at `.self_attn` (layers/mamba/linear/base.py LinearAttention: linear_attention_state_shape(
    num_attention_heads, head_dim), one tensor of the model dtype), else BailingMoeV25MLAAttention
    `.self_attn.attn`. head_dim: config.head_dim, else hidden_size // num_attention_heads."""
    n = _int(text, "num_hidden_layers", name=name)
    group = _int(text, "layer_group_size", name=name, default=1)
    rank, rope = _bailing_mla(raw, text, name=name)
    slots = tuple(
        Slot(STATE, f"model.layers.{i}.self_attn", i)
        if (i + 1) % group != 0
        else Slot(MLA, f"model.layers.{i}.self_attn.attn", i)
        for i in range(n)
    )
    heads = _int(text, "num_attention_heads", name=name)
    args = (
        ("num_heads", heads),
        ("head_dim", _head_dim_or_split(text, name=name)),
        # BailingMoELinearAttention.__init__: tp_size <= group_norm_size, group_norm_size % tp_size == 0
        ("group_norm_size", _int(text, "group_norm_size", name=name, default=1)),
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


def _alice_ai(raw, top, text, *, name):
    """alice_ai.py AliceAIDecoderBlock: layer_types 'linear_attention' -> KimiGatedDeltaNetAttention at
    `.linear_attn` (_make_kimi_kda_config: num_heads linear_num_key_heads, head_dim linear_key_head_dim,
    short_conv_kernel_size linear_conv_kernel_dim; kda_state_shape, float32 recurrent state),
    'full_attention' -> Qwen3NextAttention `.self_attn.attn` (head_dim, else hidden_size //
    num_attention_heads). models/config.py AliceAIForCausalLMConfig and the model's own checks refuse the rest."""
    n = _int(text, "num_hidden_layers", name=name)
    for key, want in (
        ("kda_allow_negative_eigenvalues", False),
        ("router_score_function", "sigmoid"),
        ("router_bias_correction", True),
    ):
        got = getattr(text, key, None)
        require(
            (got is want) if isinstance(want, bool) else got == want,  # `is not False`, `!= 'sigmoid'`, `is not True`
            f"{name}: {key}={short_repr(got)}: "
            f"vLLM 0.33 serves AliceAI only with {key}={short_repr(want)} (AliceAIForCausalLMConfig)",
        )
    block = getattr(text, "block_attn_res_block_size", None)
    require(
        isinstance(block, int) and not isinstance(block, bool) and block > 0,
        f"{name}: block_attn_res_block_size={short_repr(block)}: AliceAI requires a positive integer",
    )
    require(
        _int(text, "num_experts", name=name, positive=False) > 0,
        f"{name}: num_experts: AliceAI requires sparse experts",
    )
    heads_k, heads_v = _int(text, "linear_num_key_heads", name=name), _int(text, "linear_num_value_heads", name=name)
    dim_k, dim_v = _int(text, "linear_key_head_dim", name=name), _int(text, "linear_value_head_dim", name=name)
    require(
        heads_k == heads_v and dim_k == dim_v,
        f"{name}: linear_num_key_heads/value_heads {heads_k}/{heads_v}, linear_key/value_head_dim {dim_k}/{dim_v}: "
        f"AliceAI KDA requires matching key/value head counts and dimensions",
    )
    slots = []
    for i, k in enumerate(_list(text, "layer_types", n, name=name)):
        require(
            k in ("linear_attention", "full_attention"),
            f"{name}: layer_types[{i}]={short_repr(k)}: AliceAI layers are linear_attention or full_attention",
        )
        slots.append(
            Slot(STATE, f"model.layers.{i}.linear_attn", i)
            if k == "linear_attention"
            else Slot(ATTN, f"model.layers.{i}.self_attn.attn", i)
        )
    args = (
        ("num_heads", heads_k),
        ("head_dim", dim_k),
        ("conv_kernel", _int(text, "linear_conv_kernel_dim", name=name)),
    )
    return StateConfig(
        mamba_type="kda",
        slots=tuple(slots),
        num_hidden_layers=n,
        state_args=args,
        ssm_dtype="fp32",
        ssm_dtype_source="KDA recurrent state is float32 (kda_state_dtype)",
        **_attn_fields(text, name=name, head_dim=_head_dim_or_split(text, name=name)),
    )


def _as_custom_code(raw: dict, *, name: str):
    """(top, text) of a custom-code config (no transformers class in vLLM 0.33's pin, config.json's
    auto_map): the JSON's keys as the repository's own class holds them, read by vLLM with
    trust_remote_code (transformers' later BailingHybridConfig maps other fields and is not what vLLM reads)."""
    top = types.SimpleNamespace(**{k: v for k, v in raw.items() if isinstance(k, str) and k.isidentifier()})
    return top, top


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


def _kimi_k3_config(raw: dict, *, name: str):
    """(top, text) of KimiK3Config (transformers_utils/configs/kimi_k3.py, vLLM's own class): its text_config is
    a KimiLinearConfig, read as config.json has it (as kimi_linear is). KimiDecoderLayer builds the Kimi-K3
    private KDA (KimiK3DeltaAttention) where linear_attn_config.use_full_rank_gate is set: its prefill checkpoint
    alignment and blocks follow the KDA prefill backend vLLM resolves at run time (resolve_kda_prefill_backend:
    FlashKDA / FlashInfer availability), which kvviz does not model: refused."""
    text_raw = raw.get("text_config")
    require(isinstance(text_raw, dict), f"{name}: text_config={short_repr(text_raw)}: must be an object")
    lac = text_raw.get("linear_attn_config")
    require(
        not (isinstance(lac, dict) and lac.get("use_full_rank_gate", False)),
        f"{name}: linear_attn_config.use_full_rank_gate: Kimi-K3's full-rank-gate KDA (KimiK3DeltaAttention) keeps "
        f"prefill checkpoint blocks aligned to the KDA prefill backend vLLM picks at run time "
        f"(kda_prefill_checkpoint_alignment): not modelled",
    )
    top = types.SimpleNamespace(**{k: v for k, v in raw.items() if isinstance(k, str) and k.isidentifier()})
    text = types.SimpleNamespace(**{k: v for k, v in text_raw.items() if isinstance(k, str) and k.isidentifier()})
    for key in ("torch_dtype", "dtype"):
        if getattr(text, key, None) is None and raw.get(key) is not None:
            setattr(text, key, raw[key])
    return top, text


def own_config(key: str, raw: dict, *, name: str):
    """(top, text) as vLLM reads the config of reader `key` when it is not transformers' class, else None."""
    archs = raw.get("architectures") or []
    if key == "bailing_v3" and raw.get("model_type") == "bailing_moe_v3_vl":
        return _bailing_v3_vl_config(raw, name=name)
    if key in ("bailing_v3", "bailing_v2_5", "alice_ai") and not (archs and "VL" in str(archs[0])):
        return _as_custom_code(raw, name=name)
    if key == "kimi_k3":
        return _kimi_k3_config(raw, name=name)
    if key == "interns2" and raw.get("model_type") not in ("qwen3_5_moe", "qwen3_5"):
        # the InternS2 repositories' own config class (custom code) is Qwen3.5-MoE's with its text_config and
        # vision_config: read with transformers' Qwen3_5MoeConfig and its text defaults
        return read_config({**raw, "model_type": "qwen3_5_moe"}, name=name)
    return None


READERS = {
    "bailing_v3": _bailing_v3,
    "bailing_v2_5": _bailing_v2_5,
    "alice_ai": _alice_ai,
}

# InternS2Preview (interns2_preview.py) is Qwen3_5MoeForConditionalGeneration itself and InternS2Mobius
# (interns2_mobius.py InternS2MobiusDecoderLayer) builds the same QwenGatedDeltaNetAttention `.linear_attn`
# / Qwen3NextAttention `.self_attn` under `language_model.`; neither is in models/config.py
# MODELS_CONFIG_MAP, so the text config's mamba_ssm_dtype is not read (the reader "interns2").
ARCH_READER = {
    "BailingMoeV3ForCausalLM": "bailing_v3",
    "BailingMoeV3VLForConditionalGeneration": "bailing_v3",
    "BailingMoeV2_5ForCausalLM": "bailing_v2_5",
    "AliceAIForCausalLM": "alice_ai",
    "InternS2PreviewForConditionalGeneration": "interns2",
    "InternS2MobiusForConditionalGeneration": "interns2",
    "KimiK3ForConditionalGeneration": "kimi_k3",
}
