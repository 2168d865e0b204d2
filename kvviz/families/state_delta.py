"""State-family readers of the gated delta net and Kimi delta attention hybrids (Qwen3-Next, Qwen3.5,
InternS2, OLMo-hybrid, Kimi-Linear, Kimi-K3, AliceAI): config.json -> `StateConfig`, each citing its vLLM 0.33
model file (vllm/model_executor/models/ unless another path is given), and the config classes vLLM reads
them with where they are not transformers'. The records naming them: kvviz.families.state_records."""

from __future__ import annotations

import dataclasses
import types

from kvviz.base.errors import require
from kvviz.base.inputs import short_repr
from kvviz.families.hf import read_config
from kvviz.families.hf_bounds import mla_dims
from kvviz.families.state_config import (
    MLA,
    STATE,
    Slot,
    StateConfig,
    attn_fields,
    head_dim_or_split,
    int_of,
    kda_beside_mla,
    one_cache_a_layer,
    ssm_element,
    with_prefix,
)


def _gated_delta_net(raw, top, text, *, name, prefix: str, ssm_field: str | None, head_from_hidden: bool = False):
    n = int_of(text, "num_hidden_layers", name=name)
    slots = one_cache_a_layer(
        text,
        "layer_types",
        n,
        name=name,
        model="a gated delta net hybrid's",
        state=("linear_attention", "linear_attn"),
        attention=("full_attention", "self_attn.attn"),
        prefix=prefix,
    )
    args = (
        ("num_k_heads", int_of(text, "linear_num_key_heads", name=name)),
        ("num_v_heads", int_of(text, "linear_num_value_heads", name=name)),
        ("head_k_dim", int_of(text, "linear_key_head_dim", name=name)),
        ("head_v_dim", int_of(text, "linear_value_head_dim", name=name)),
        ("conv_kernel", int_of(text, "linear_conv_kernel_dim", name=name)),
    )
    ssm, source = None, ""
    if ssm_field and getattr(text, ssm_field, None) is not None:
        ssm = ssm_element(getattr(text, ssm_field), ssm_field, name=name)
        source = f"{ssm_field} (Qwen3_5ForConditionalGenerationConfig)"
    return StateConfig(
        mamba_type="gdn",
        slots=tuple(slots),
        num_hidden_layers=n,
        state_args=args,
        ssm_dtype=ssm,
        ssm_dtype_source=source,
        **attn_fields(text, name=name, head_dim=None if head_from_hidden else head_dim_or_split(text, name=name)),
    )


def qwen3_next(raw, top, text, *, name):
    """qwen3_next.py: 'linear_attention' is a gated delta net `.linear_attn`, else attention `.self_attn.attn`."""
    return _gated_delta_net(raw, top, text, name=name, prefix="", ssm_field=None)


def qwen3_5(raw, top, text, *, name):
    """qwen3_5.py: Qwen3-Next's layers (under `language_model.` in the ConditionalGeneration classes), the SSM
    dtype mamba_ssm_dtype."""
    archs = raw.get("architectures") or []
    wrapper = bool(archs) and str(archs[0]).endswith("ForConditionalGeneration")
    return _gated_delta_net(
        raw, top, text, name=name, prefix="language_model." if wrapper else "", ssm_field="mamba_ssm_dtype"
    )


def interns2(raw, top, text, *, name):
    """interns2_preview.py / interns2_mobius.py: Qwen3.5-MoE's layers under `language_model.`, the SSM dtype
    the model's."""
    # interns2_preview.py / interns2_mobius.py: Qwen3.5-MoE's layers under `language_model.`, the SSM
    # dtype the model dtype (not in MODELS_CONFIG_MAP: no Qwen3_5ForConditionalGenerationConfig)
    return _gated_delta_net(raw, top, text, name=name, prefix="language_model.", ssm_field=None)


def olmo_hybrid(raw, top, text, *, name):
    """olmo_hybrid.py: a gated delta net hybrid, attention head size hidden_size // num_attention_heads."""
    # olmo_hybrid.py: 'linear_attention' -> OlmoHybridGatedDeltaNetAttention `.linear_attn` (the linear_*
    # fields, gated_delta_net_state_shape), else OlmoHybridAttention `.self_attn.attn` with head_dim
    # hidden_size // num_attention_heads whatever config.head_dim says, no window.
    config = _gated_delta_net(raw, top, text, name=name, prefix="", ssm_field=None, head_from_hidden=True)
    return dataclasses.replace(config, state_backend="gdn/base")  # no FlashInfer prefill checkpoint


def kimi_linear(raw, top, text, *, name):
    """kimi_k3/nvidia/model.py KimiDecoderLayer: KDA where i + 1 is in linear_attn_config.kda_layers, else MLA."""
    n = int_of(text, "num_hidden_layers", name=name)
    lac = getattr(text, "linear_attn_config", None)
    require(isinstance(lac, dict), f"{name}: linear_attn_config={short_repr(lac)}: must be an object")
    kda = lac.get("kda_layers")
    require(
        isinstance(kda, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in kda),
        f"{name}: linear_attn_config.kda_layers={short_repr(kda)}: must be a list of 1-based layer numbers",
    )
    require(
        isinstance(lac.get("full_attn_layers"), list),
        f"{name}: linear_attn_config.full_attn_layers={short_repr(lac.get('full_attn_layers'))}: must be a list",
    )
    kda_set = set(kda)
    slots = tuple(Slot(STATE if (i + 1) in kda_set else MLA, f"model.layers.{i}.self_attn", i) for i in range(n))
    args = []
    for key, as_ in (("num_heads", "num_heads"), ("head_dim", "head_dim"), ("short_conv_kernel_size", "conv_kernel")):
        v = lac.get(key)
        require(
            isinstance(v, int) and not isinstance(v, bool) and v > 0,
            f"{name}: linear_attn_config.{key}={short_repr(v)}: must be a positive integer",
        )
        args.append((as_, v))
    rank, rope = mla_dims(raw, text, name=name)
    return kda_beside_mla(text, slots, n, args, rank, rope, name=name)


def kimi_k3(raw, top, text, *, name):
    """kimi_k3/nvidia/model.py KimiK3ForConditionalGeneration: KimiLinearForCausalLM under `language_model.`."""
    return with_prefix(kimi_linear(raw, top, text, name=name), "language_model.")


def alice_ai(raw, top, text, *, name):
    """alice_ai.py AliceAIDecoderBlock: layer_types 'linear_attention' -> KimiGatedDeltaNetAttention at
    `.linear_attn` (_make_kimi_kda_config: num_heads linear_num_key_heads, head_dim linear_key_head_dim,
    short_conv_kernel_size linear_conv_kernel_dim; kda_state_shape, float32 recurrent state),
    'full_attention' -> Qwen3NextAttention `.self_attn.attn` (head_dim, else hidden_size //
    num_attention_heads). models/config.py AliceAIForCausalLMConfig and the model's own checks refuse the rest."""
    n = int_of(text, "num_hidden_layers", name=name)
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
        int_of(text, "num_experts", name=name, positive=False) > 0,
        f"{name}: num_experts: AliceAI requires sparse experts",
    )
    heads_k, heads_v = (
        int_of(text, "linear_num_key_heads", name=name),
        int_of(text, "linear_num_value_heads", name=name),
    )
    dim_k, dim_v = int_of(text, "linear_key_head_dim", name=name), int_of(text, "linear_value_head_dim", name=name)
    require(
        heads_k == heads_v and dim_k == dim_v,
        f"{name}: linear_num_key_heads/value_heads {heads_k}/{heads_v}, linear_key/value_head_dim {dim_k}/{dim_v}: "
        f"AliceAI KDA requires matching key/value head counts and dimensions",
    )
    slots = one_cache_a_layer(
        text,
        "layer_types",
        n,
        name=name,
        model="AliceAI",
        state=("linear_attention", "linear_attn"),
        attention=("full_attention", "self_attn.attn"),
    )
    args = (
        ("num_heads", heads_k),
        ("head_dim", dim_k),
        ("conv_kernel", int_of(text, "linear_conv_kernel_dim", name=name)),
    )
    return StateConfig(
        mamba_type="kda",
        slots=tuple(slots),
        num_hidden_layers=n,
        state_args=args,
        ssm_dtype="fp32",
        ssm_dtype_source="KDA recurrent state is float32 (kda_state_dtype)",
        **attn_fields(text, name=name, head_dim=head_dim_or_split(text, name=name)),
    )


def kimi_k3_config(raw: dict, *, name: str):
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


def interns2_config(raw: dict, *, name: str):
    """The InternS2 repositories' own config class (custom code) is Qwen3.5-MoE's with its text_config and
    vision_config: read with transformers' Qwen3_5MoeConfig and its text defaults (None: the config is one)."""
    if raw.get("model_type") in ("qwen3_5_moe", "qwen3_5"):
        return None
    return read_config({**raw, "model_type": "qwen3_5_moe"}, name=name)
