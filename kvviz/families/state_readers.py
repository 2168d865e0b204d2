"""One reader per state-hybrid architecture (Jamba, Nemotron-H, Falcon-H1, Granite-4.0-H, Zamba2,
LFM2 / LFM2-MoE, Qwen3-Next, Qwen3.5, OLMo-hybrid, Kimi-Linear) and the pure Mamba-1 / Mamba-2 models:
config.json -> `StateConfig`, each citing its vLLM 0.33 model file (the family's docstring,
kvviz.families.state, says what each registers)."""

from __future__ import annotations

import dataclasses

from kvviz.base.errors import require
from kvviz.base.inputs import finite_number, short_repr
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
    _one_cache_a_layer,
    _ssm_element,
    with_prefix,
)
from kvviz.families.state_readers_hybrid import ARCH_READER as HYBRID_ARCH_READER
from kvviz.families.state_readers_hybrid import READERS as HYBRID_READERS


def _jamba(raw, top, text, *, name):
    n = _int(text, "num_hidden_layers", name=name)
    slots = _one_cache_a_layer(
        text,
        "layers_block_type",
        n,
        name=name,
        model="Jamba",
        state=("mamba", "mixer"),
        attention=("attention", "attn"),
    )
    hidden = _int(text, "hidden_size", name=name)
    args = (
        ("intermediate_size", _int(text, "mamba_expand", name=name) * hidden),
        ("state_size", _int(text, "mamba_d_state", name=name)),
        ("conv_kernel", _int(text, "mamba_d_conv", name=name)),
    )
    return StateConfig(
        mamba_type="mamba1", slots=tuple(slots), num_hidden_layers=n, state_args=args, **_attn_fields(text, name=name)
    )


def _nemotron_h(raw, top, text, *, name):
    n = _int(text, "num_hidden_layers", name=name)
    pattern = getattr(text, "hybrid_override_pattern", None)
    require(
        isinstance(pattern, str) and len(pattern) == n,
        f"{name}: hybrid_override_pattern={short_repr(pattern)}: must be a string of one letter per layer ({n})",
    )
    slots = []
    for i, ch in enumerate(pattern):
        require(ch in "M*-E", f"{name}: hybrid_override_pattern[{i}]={ch!r}: Nemotron-H knows M, *, -, E")
        if ch == "M":
            slots.append(Slot(STATE, f"model.layers.{i}.mixer", i))
        elif ch == "*":
            slots.append(Slot(ATTN, f"model.layers.{i}.mixer.attn", i))
    heads, head_dim = _int(text, "mamba_num_heads", name=name), _int(text, "mamba_head_dim", name=name)
    args = (
        ("intermediate_size", heads * head_dim),
        ("n_groups", _int(text, "n_groups", name=name)),
        ("num_heads", heads),
        ("head_dim", head_dim),
        ("state_size", _int(text, "ssm_state_size", name=name)),
        ("conv_kernel", _int(text, "conv_kernel", name=name)),
    )
    ssm = getattr(text, "mamba_ssm_cache_dtype", None) or "float32"
    return StateConfig(
        mamba_type="mamba2",
        slots=tuple(slots),
        num_hidden_layers=n,
        state_args=args,
        ssm_dtype=_ssm_element(ssm, "mamba_ssm_cache_dtype", name=name),
        ssm_dtype_source="mamba_ssm_cache_dtype (NemotronHForCausalLMConfig, default float32)",
        **_attn_fields(text, name=name, head_dim=_head_dim_or_split(text, name=name)),
    )


def _falcon_h1(raw, top, text, *, name):
    n = _int(text, "num_hidden_layers", name=name)
    slots = []
    for i in range(n):  # FalconH1ParallelHybrid: self_attn built before mamba
        slots.append(Slot(ATTN, f"model.layers.{i}.attn", i))
        slots.append(Slot(STATE, f"model.{n + i}.mixer", i))
    d_ssm = getattr(text, "mamba_d_ssm", None)
    expand = getattr(text, "mamba_expand", 0) if d_ssm is None else 0
    inter = (
        int(finite_number(expand, field=f"{name}: mamba_expand") * _int(text, "hidden_size", name=name))
        if d_ssm is None
        else _int(text, "mamba_d_ssm", name=name)
    )
    require(inter > 0, f"{name}: config is missing field 'mamba_d_ssm' (or mamba_expand)")
    args = (
        ("intermediate_size", inter),
        ("n_groups", _int(text, "mamba_n_groups", name=name)),
        ("num_heads", _int(text, "mamba_n_heads", name=name)),
        ("head_dim", _int(text, "mamba_d_head", name=name)),
        ("state_size", _int(text, "mamba_d_state", name=name)),
        ("conv_kernel", _int(text, "mamba_d_conv", name=name)),
    )
    return StateConfig(
        mamba_type="mamba2",
        slots=tuple(slots),
        num_hidden_layers=n,
        state_args=args,
        **_attn_fields(text, name=name, head_dim=_head_dim_or_split(text, name=name)),
    )


def _granite_h(raw, top, text, *, name):
    n = _int(text, "num_hidden_layers", name=name)
    kinds = _list(text, "layer_types", n, name=name)
    slots = []
    for i, k in enumerate(kinds):  # transformers remaps the legacy 'mamba' / 'attention'
        require(
            k in ("linear_attention", "full_attention"),
            f"{name}: layer_types[{i}]={short_repr(k)}: Granite-4.0-H layers are mamba or attention",
        )
        slots.append(
            Slot(STATE, f"model.layers.{i}.mixer", i)
            if k == "linear_attention"
            else Slot(ATTN, f"model.layers.{i}.self_attn.attn", i)
        )
    hidden = _int(text, "hidden_size", name=name)
    args = (
        ("intermediate_size", _int(text, "mamba_expand", name=name) * hidden),
        ("n_groups", _int(text, "mamba_n_groups", name=name)),
        ("num_heads", _int(text, "mamba_n_heads", name=name)),
        ("head_dim", _int(text, "mamba_d_head", name=name)),
        ("state_size", _int(text, "mamba_d_state", name=name)),
        ("conv_kernel", _int(text, "mamba_d_conv", name=name)),
    )
    return StateConfig(
        mamba_type="mamba2", slots=tuple(slots), num_hidden_layers=n, state_args=args, **_attn_fields(text, name=name)
    )


def _zamba2(raw, top, text, *, name):
    n = _int(text, "num_hidden_layers", name=name)
    kinds = _list(text, "layers_block_type", n, name=name)
    hybrid = [i for i, k in enumerate(kinds) if k == "hybrid"]
    h, m = len(hybrid), _int(text, "num_mem_blocks", name=name)
    slots = []
    for b in range(m):  # the shared blocks are built (and their Attention registered) first
        j = b * (h + m - 1) // m
        for k in range(h):
            if k % m == b:
                slots.append(Slot(ATTN, f"model.attn.{j}", hybrid[k]))
                j += 1
    slots += [Slot(STATE, f"{h + i}.mixer", i) for i in range(n)]
    hidden = _int(text, "hidden_size", name=name)
    inter = _int(text, "mamba_expand", name=name) * hidden
    heads = _int(text, "n_mamba_heads", name=name)
    head_dim = _int(text, "mamba_headdim", name=name)
    # get_mamba_state_shape_from_config reads mamba_headdim, the layer intermediate // n_mamba_heads:
    # vLLM pads to the first and allocates the second, so they must agree.
    require(
        head_dim * heads == inter,
        f"{name}: mamba_headdim={head_dim} x n_mamba_heads={heads} != mamba_expand x "
        f"hidden_size = {inter}: vLLM's Zamba2 state would not fit its page",
    )
    args = (
        ("intermediate_size", inter),
        ("n_groups", _int(text, "mamba_ngroups", name=name)),
        ("num_heads", heads),
        ("head_dim", head_dim),
        ("state_size", _int(text, "mamba_d_state", name=name)),
        ("conv_kernel", _int(text, "mamba_d_conv", name=name)),
    )
    heads_attn = _int(text, "num_attention_heads", name=name)
    return StateConfig(
        mamba_type="mamba2",
        slots=tuple(slots),
        num_hidden_layers=n,
        state_args=args,
        num_attention_heads=heads_attn,
        num_kv_heads=heads_attn,
        head_dim=_int(text, "attention_head_dim", name=name),
        kv_heads_replicated=True,
    )


def _lfm2(raw, top, text, *, name, conv_dim: str = "conv_dim"):
    n = _int(text, "num_hidden_layers", name=name)
    slots = _one_cache_a_layer(
        text,
        "layer_types",
        n,
        name=name,
        model="LFM2",
        state=("conv", "short_conv"),
        attention=("full_attention", "self_attn.attn"),
    )
    args = (("conv_dim", _int(text, conv_dim, name=name)), ("conv_kernel", _int(text, "conv_L_cache", name=name)))
    return StateConfig(
        mamba_type="short_conv",
        slots=tuple(slots),
        num_hidden_layers=n,
        state_args=args,
        **_attn_fields(text, name=name),
    )


def _gated_delta_net(raw, top, text, *, name, prefix: str, ssm_field: str | None, head_from_hidden: bool = False):
    n = _int(text, "num_hidden_layers", name=name)
    kinds = _list(text, "layer_types", n, name=name)
    slots = []
    for i, k in enumerate(kinds):
        require(
            k in ("linear_attention", "full_attention"),
            f"{name}: layer_types[{i}]={short_repr(k)}: a gated delta net hybrid's layers are linear_attention "
            f"or full_attention",
        )
        slots.append(
            Slot(STATE, f"{prefix}model.layers.{i}.linear_attn", i)
            if k == "linear_attention"
            else Slot(ATTN, f"{prefix}model.layers.{i}.self_attn.attn", i)
        )
    args = (
        ("num_k_heads", _int(text, "linear_num_key_heads", name=name)),
        ("num_v_heads", _int(text, "linear_num_value_heads", name=name)),
        ("head_k_dim", _int(text, "linear_key_head_dim", name=name)),
        ("head_v_dim", _int(text, "linear_value_head_dim", name=name)),
        ("conv_kernel", _int(text, "linear_conv_kernel_dim", name=name)),
    )
    ssm, source = None, ""
    if ssm_field and getattr(text, ssm_field, None) is not None:
        ssm = _ssm_element(getattr(text, ssm_field), ssm_field, name=name)
        source = f"{ssm_field} (Qwen3_5ForConditionalGenerationConfig)"
    return StateConfig(
        mamba_type="gdn",
        slots=tuple(slots),
        num_hidden_layers=n,
        state_args=args,
        ssm_dtype=ssm,
        ssm_dtype_source=source,
        **_attn_fields(text, name=name, head_dim=None if head_from_hidden else _head_dim_or_split(text, name=name)),
    )


def _qwen3_next(raw, top, text, *, name):
    return _gated_delta_net(raw, top, text, name=name, prefix="", ssm_field=None)


def _qwen3_5(raw, top, text, *, name):
    archs = raw.get("architectures") or []
    wrapper = bool(archs) and str(archs[0]).endswith("ForConditionalGeneration")
    return _gated_delta_net(
        raw, top, text, name=name, prefix="language_model." if wrapper else "", ssm_field="mamba_ssm_dtype"
    )


def _interns2(raw, top, text, *, name):
    # interns2_preview.py / interns2_mobius.py: Qwen3.5-MoE's layers under `language_model.`, the SSM
    # dtype the model dtype (not in MODELS_CONFIG_MAP: no Qwen3_5ForConditionalGenerationConfig)
    return _gated_delta_net(raw, top, text, name=name, prefix="language_model.", ssm_field=None)


def _lfm2_moe(raw, top, text, *, name):
    # lfm2_moe.py Lfm2MoeShortConvDecoderLayer: ShortConv(dim=config.hidden_size), and
    # get_mamba_state_shape_from_config(intermediate_size=hf_config.hidden_size); attention head_dim
    # hidden_size // num_attention_heads (Lfm2MoeAttention), as LFM2's.
    return _lfm2(raw, top, text, name=name, conv_dim="hidden_size")


def _olmo_hybrid(raw, top, text, *, name):
    # olmo_hybrid.py: 'linear_attention' -> OlmoHybridGatedDeltaNetAttention `.linear_attn` (the linear_*
    # fields, gated_delta_net_state_shape), else OlmoHybridAttention `.self_attn.attn` with head_dim
    # hidden_size // num_attention_heads whatever config.head_dim says, no window.
    config = _gated_delta_net(raw, top, text, name=name, prefix="", ssm_field=None, head_from_hidden=True)
    return dataclasses.replace(config, state_backend="gdn/base")  # no FlashInfer prefill checkpoint


def _pure_mamba(raw, top, text, *, name, mamba_type: str):
    """Mamba / FalconMamba (mamba.py) and Mamba2 (mamba2.py): every layer's MambaMixer(2) registers a state
    at `backbone.layers.{i}.mixer` (MambaForCausalLM.backbone -> MambaModel layers -> `.mixer`)."""
    n = _int(text, "num_hidden_layers", name=name)
    slots = tuple(Slot(STATE, f"backbone.layers.{i}.mixer", i) for i in range(n))
    state, kernel = _int(text, "state_size", name=name), _int(text, "conv_kernel", name=name)
    if mamba_type == "mamba1":  # MambaDecoderLayer: intermediate_size=config.intermediate_size
        args = (("intermediate_size", _int(text, "intermediate_size", name=name)),)
        args += (("state_size", state), ("conv_kernel", kernel))
    else:  # Mamba2ForCausalLM.get_mamba_state_shape_from_config: expand x hidden_size
        expand, hidden = _int(text, "expand", name=name), _int(text, "hidden_size", name=name)
        inter = getattr(text, "intermediate_size", None)  # Mamba2DecoderLayer: getattr(..., expand x hidden)
        require(
            inter is None or inter == expand * hidden,
            f"{name}: intermediate_size={short_repr(inter)}: vLLM's Mamba2 layer sizes its state from it and "
            f"its planner from expand x hidden_size = {expand * hidden}; they must agree",
        )
        args = (
            ("intermediate_size", expand * hidden),
            ("n_groups", _int(text, "n_groups", name=name)),
            ("num_heads", _int(text, "num_heads", name=name)),
            ("head_dim", _int(text, "head_dim", name=name)),
            ("state_size", state),
            ("conv_kernel", kernel),
        )
    return StateConfig(mamba_type=mamba_type, slots=slots, num_hidden_layers=n, state_args=args, attention_free=True)


def _kimi_linear(raw, top, text, *, name):
    n = _int(text, "num_hidden_layers", name=name)
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
    return StateConfig(
        mamba_type="kda",
        slots=slots,
        num_hidden_layers=n,
        state_args=tuple(args),
        num_attention_heads=_int(text, "num_attention_heads", name=name),
        kv_lora_rank=rank,
        qk_rope_head_dim=rope,
        ssm_dtype="fp32",
        ssm_dtype_source="KDA recurrent state is float32 (kda_state_dtype)",
    )


READERS = {
    "jamba": _jamba,
    "nemotron_h": _nemotron_h,
    "falcon_h1": _falcon_h1,
    "granitemoehybrid": _granite_h,
    "zamba2": _zamba2,
    "lfm2": _lfm2,
    "qwen3_next": _qwen3_next,
    "qwen3_5": _qwen3_5,
    "qwen3_5_moe": _qwen3_5,
    "qwen3_5_text": _qwen3_5,
    "qwen3_5_moe_text": _qwen3_5,
    "kimi_linear": _kimi_linear,
    "lfm2_moe": _lfm2_moe,
    "olmo_hybrid": _olmo_hybrid,
    "mamba": lambda raw, top, text, *, name: _pure_mamba(raw, top, text, name=name, mamba_type="mamba1"),
    "falcon_mamba": lambda raw, top, text, *, name: _pure_mamba(raw, top, text, name=name, mamba_type="mamba1"),
    "mamba2": lambda raw, top, text, *, name: _pure_mamba(raw, top, text, name=name, mamba_type="mamba2"),
    "interns2": _interns2,
    # kimi_k3/nvidia/model.py KimiK3ForConditionalGeneration: KimiLinearForCausalLM under `language_model.`
    "kimi_k3": lambda raw, top, text, *, name: with_prefix(_kimi_linear(raw, top, text, name=name), "language_model."),
    **HYBRID_READERS,
}


# architecture -> the reader's model_type, for configs whose model_type kvviz maps by architecture
ARCH_READER = {
    "JambaForCausalLM": "jamba",
    "NemotronHForCausalLM": "nemotron_h",
    "FalconH1ForCausalLM": "falcon_h1",
    "GraniteMoeHybridForCausalLM": "granitemoehybrid",
    "Zamba2ForCausalLM": "zamba2",
    "Lfm2ForCausalLM": "lfm2",
    "Qwen3NextForCausalLM": "qwen3_next",
    "Qwen3_5ForCausalLM": "qwen3_5",
    "Qwen3_5MoeForCausalLM": "qwen3_5",
    "Qwen3_5ForConditionalGeneration": "qwen3_5",
    "Qwen3_5MoeForConditionalGeneration": "qwen3_5",
    "KimiLinearForCausalLM": "kimi_linear",
    "Lfm2MoeForCausalLM": "lfm2_moe",
    "OlmoHybridForCausalLM": "olmo_hybrid",
    "NemotronHPuzzleForCausalLM": "nemotron_h",  # registry.py: ("nemotron_h", "NemotronHForCausalLM")
    "MambaForCausalLM": "mamba",
    "FalconMambaForCausalLM": "mamba",  # registry.py: ("mamba", "MambaForCausalLM")
    "Mamba2ForCausalLM": "mamba2",
    **HYBRID_ARCH_READER,
}
