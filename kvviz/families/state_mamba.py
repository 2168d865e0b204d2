"""State-family readers of the Mamba-1 / Mamba-2 and short-conv hybrids and the pure Mamba models: config.json
-> `StateConfig`, each citing its vLLM 0.33 model file (vllm/model_executor/models/; kvviz.families.state says
what each registers). The records naming them: kvviz.families.state_records."""

from __future__ import annotations

from kvviz.base.errors import require
from kvviz.base.inputs import finite_number, short_repr
from kvviz.families.state_config import (
    ATTN,
    STATE,
    Slot,
    StateConfig,
    attn_fields,
    head_dim_or_split,
    int_of,
    list_of,
    one_cache_a_layer,
    ssm_element,
)


def jamba(raw, top, text, *, name):
    """jamba.py: layers_block_type 'mamba' is Mamba-1 `.mixer`, 'attention' `.attn`; intermediate
    mamba_expand x hidden_size."""
    n = int_of(text, "num_hidden_layers", name=name)
    slots = one_cache_a_layer(
        text,
        "layers_block_type",
        n,
        name=name,
        model="Jamba",
        state=("mamba", "mixer"),
        attention=("attention", "attn"),
    )
    hidden = int_of(text, "hidden_size", name=name)
    args = (
        ("intermediate_size", int_of(text, "mamba_expand", name=name) * hidden),
        ("state_size", int_of(text, "mamba_d_state", name=name)),
        ("conv_kernel", int_of(text, "mamba_d_conv", name=name)),
    )
    return StateConfig(
        mamba_type="mamba1", slots=tuple(slots), num_hidden_layers=n, state_args=args, **attn_fields(text, name=name)
    )


def nemotron_h(raw, top, text, *, name):
    """nemotron_h.py: hybrid_override_pattern 'M' Mamba-2 `.mixer`, '*' attention `.mixer.attn`, '-' / 'E' no cache."""
    n = int_of(text, "num_hidden_layers", name=name)
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
    heads, head_dim = int_of(text, "mamba_num_heads", name=name), int_of(text, "mamba_head_dim", name=name)
    args = (
        ("intermediate_size", heads * head_dim),
        ("n_groups", int_of(text, "n_groups", name=name)),
        ("num_heads", heads),
        ("head_dim", head_dim),
        ("state_size", int_of(text, "ssm_state_size", name=name)),
        ("conv_kernel", int_of(text, "conv_kernel", name=name)),
    )
    ssm = getattr(text, "mamba_ssm_cache_dtype", None) or "float32"
    return StateConfig(
        mamba_type="mamba2",
        slots=tuple(slots),
        num_hidden_layers=n,
        state_args=args,
        ssm_dtype=ssm_element(ssm, "mamba_ssm_cache_dtype", name=name),
        ssm_dtype_source="mamba_ssm_cache_dtype (NemotronHForCausalLMConfig, default float32)",
        **attn_fields(text, name=name, head_dim=head_dim_or_split(text, name=name)),
    )


def falcon_h1(raw, top, text, *, name):
    """falcon_h1.py FalconH1ParallelHybrid: every layer attention `model.layers.{i}.attn`, then Mamba-2
    `model.{L + i}.mixer`."""
    n = int_of(text, "num_hidden_layers", name=name)
    slots = []
    for i in range(n):  # FalconH1ParallelHybrid: self_attn built before mamba
        slots.append(Slot(ATTN, f"model.layers.{i}.attn", i))
        slots.append(Slot(STATE, f"model.{n + i}.mixer", i))
    d_ssm = getattr(text, "mamba_d_ssm", None)
    expand = getattr(text, "mamba_expand", 0) if d_ssm is None else 0
    inter = (
        int(finite_number(expand, field=f"{name}: mamba_expand") * int_of(text, "hidden_size", name=name))
        if d_ssm is None
        else int_of(text, "mamba_d_ssm", name=name)
    )
    require(inter > 0, f"{name}: config is missing field 'mamba_d_ssm' (or mamba_expand)")
    args = (
        ("intermediate_size", inter),
        ("n_groups", int_of(text, "mamba_n_groups", name=name)),
        ("num_heads", int_of(text, "mamba_n_heads", name=name)),
        ("head_dim", int_of(text, "mamba_d_head", name=name)),
        ("state_size", int_of(text, "mamba_d_state", name=name)),
        ("conv_kernel", int_of(text, "mamba_d_conv", name=name)),
    )
    return StateConfig(
        mamba_type="mamba2",
        slots=tuple(slots),
        num_hidden_layers=n,
        state_args=args,
        **attn_fields(text, name=name, head_dim=head_dim_or_split(text, name=name)),
    )


def granite_h(raw, top, text, *, name):
    """granitemoehybrid.py: layer_types 'linear_attention' is Mamba-2 `.mixer`, 'full_attention' `.self_attn.attn`."""
    n = int_of(text, "num_hidden_layers", name=name)
    slots = one_cache_a_layer(  # transformers remaps the legacy 'mamba' / 'attention'
        text,
        "layer_types",
        n,
        name=name,
        model="Granite-4.0-H",
        state=("linear_attention", "mixer"),
        attention=("full_attention", "self_attn.attn"),
    )
    hidden = int_of(text, "hidden_size", name=name)
    args = (
        ("intermediate_size", int_of(text, "mamba_expand", name=name) * hidden),
        ("n_groups", int_of(text, "mamba_n_groups", name=name)),
        ("num_heads", int_of(text, "mamba_n_heads", name=name)),
        ("head_dim", int_of(text, "mamba_d_head", name=name)),
        ("state_size", int_of(text, "mamba_d_state", name=name)),
        ("conv_kernel", int_of(text, "mamba_d_conv", name=name)),
    )
    return StateConfig(
        mamba_type="mamba2", slots=tuple(slots), num_hidden_layers=n, state_args=args, **attn_fields(text, name=name)
    )


def zamba2(raw, top, text, *, name):
    """zamba2.py Zamba2Model: the shared attention blocks first (`model.attn.{j}`), then every layer's Mamba-2."""
    n = int_of(text, "num_hidden_layers", name=name)
    kinds = list_of(text, "layers_block_type", n, name=name)
    hybrid = [i for i, k in enumerate(kinds) if k == "hybrid"]
    h, m = len(hybrid), int_of(text, "num_mem_blocks", name=name)
    slots = []
    for b in range(m):  # the shared blocks are built (and their Attention registered) first
        j = b * (h + m - 1) // m
        for k in range(h):
            if k % m == b:
                slots.append(Slot(ATTN, f"model.attn.{j}", hybrid[k]))
                j += 1
    slots += [Slot(STATE, f"{h + i}.mixer", i) for i in range(n)]
    hidden = int_of(text, "hidden_size", name=name)
    inter = int_of(text, "mamba_expand", name=name) * hidden
    heads = int_of(text, "n_mamba_heads", name=name)
    head_dim = int_of(text, "mamba_headdim", name=name)
    # get_mamba_state_shape_from_config reads mamba_headdim, the layer intermediate // n_mamba_heads:
    # vLLM pads to the first and allocates the second, so they must agree.
    require(
        head_dim * heads == inter,
        f"{name}: mamba_headdim={head_dim} x n_mamba_heads={heads} != mamba_expand x "
        f"hidden_size = {inter}: vLLM's Zamba2 state would not fit its page",
    )
    args = (
        ("intermediate_size", inter),
        ("n_groups", int_of(text, "mamba_ngroups", name=name)),
        ("num_heads", heads),
        ("head_dim", head_dim),
        ("state_size", int_of(text, "mamba_d_state", name=name)),
        ("conv_kernel", int_of(text, "mamba_d_conv", name=name)),
    )
    heads_attn = int_of(text, "num_attention_heads", name=name)
    return StateConfig(
        mamba_type="mamba2",
        slots=tuple(slots),
        num_hidden_layers=n,
        state_args=args,
        num_attention_heads=heads_attn,
        num_kv_heads=heads_attn,
        head_dim=int_of(text, "attention_head_dim", name=name),
        kv_heads_replicated=True,
    )


def lfm2(raw, top, text, *, name, conv_dim: str = "conv_dim"):
    """lfm2.py: 'conv' is a short conv `.short_conv`, 'full_attention' `.self_attn.attn`."""
    n = int_of(text, "num_hidden_layers", name=name)
    slots = one_cache_a_layer(
        text,
        "layer_types",
        n,
        name=name,
        model="LFM2",
        state=("conv", "short_conv"),
        attention=("full_attention", "self_attn.attn"),
    )
    args = (("conv_dim", int_of(text, conv_dim, name=name)), ("conv_kernel", int_of(text, "conv_L_cache", name=name)))
    return StateConfig(
        mamba_type="short_conv",
        slots=tuple(slots),
        num_hidden_layers=n,
        state_args=args,
        **attn_fields(text, name=name),
    )


def lfm2_moe(raw, top, text, *, name):
    """lfm2_moe.py: LFM2's layers, the conv dim hidden_size (Lfm2MoeShortConvDecoderLayer)."""
    # lfm2_moe.py Lfm2MoeShortConvDecoderLayer: ShortConv(dim=config.hidden_size), and
    # get_mamba_state_shape_from_config(intermediate_size=hf_config.hidden_size); attention head_dim
    # hidden_size // num_attention_heads (Lfm2MoeAttention), as LFM2's.
    return lfm2(raw, top, text, name=name, conv_dim="hidden_size")


def _pure_mamba(raw, top, text, *, name, mamba_type: str):
    """Mamba / FalconMamba (mamba.py) and Mamba2 (mamba2.py): every layer's MambaMixer(2) registers a state
    at `backbone.layers.{i}.mixer` (MambaForCausalLM.backbone -> MambaModel layers -> `.mixer`)."""
    n = int_of(text, "num_hidden_layers", name=name)
    slots = tuple(Slot(STATE, f"backbone.layers.{i}.mixer", i) for i in range(n))
    state, kernel = int_of(text, "state_size", name=name), int_of(text, "conv_kernel", name=name)
    if mamba_type == "mamba1":  # MambaDecoderLayer: intermediate_size=config.intermediate_size
        args = (("intermediate_size", int_of(text, "intermediate_size", name=name)),)
        args += (("state_size", state), ("conv_kernel", kernel))
    else:  # Mamba2ForCausalLM.get_mamba_state_shape_from_config: expand x hidden_size
        expand, hidden = int_of(text, "expand", name=name), int_of(text, "hidden_size", name=name)
        inter = getattr(text, "intermediate_size", None)  # Mamba2DecoderLayer: getattr(..., expand x hidden)
        require(
            inter is None or inter == expand * hidden,
            f"{name}: intermediate_size={short_repr(inter)}: vLLM's Mamba2 layer sizes its state from it and "
            f"its planner from expand x hidden_size = {expand * hidden}; they must agree",
        )
        args = (
            ("intermediate_size", expand * hidden),
            ("n_groups", int_of(text, "n_groups", name=name)),
            ("num_heads", int_of(text, "num_heads", name=name)),
            ("head_dim", int_of(text, "head_dim", name=name)),
            ("state_size", state),
            ("conv_kernel", kernel),
        )
    return StateConfig(mamba_type=mamba_type, slots=slots, num_hidden_layers=n, state_args=args, attention_free=True)


def mamba1(raw, top, text, *, name):
    """mamba.py MambaForCausalLM (Mamba, FalconMamba): every layer's Mamba-1 state at `backbone.layers.{i}.mixer`."""
    return _pure_mamba(raw, top, text, name=name, mamba_type="mamba1")


def mamba2(raw, top, text, *, name):
    """mamba2.py Mamba2ForCausalLM: every layer's Mamba-2 state at `backbone.layers.{i}.mixer`."""
    return _pure_mamba(raw, top, text, name=name, mamba_type="mamba2")
