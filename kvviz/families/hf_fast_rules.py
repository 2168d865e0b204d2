"""The rules of transformers 5.24.0's config classes that kvviz's table reader (kvviz/families/hf_fast.py)
mirrors: a property a reader looks at (Jamba's layers_block_type, Nemotron-H's hybrid_override_pattern),
or a field __post_init__ derives from others (Granite-4.0-H's mamba_d_head, DeepSeek-V2's head_dim).

Each rule takes `values` (the class defaults overlaid with the JSON, aliases resolved), the JSON `part`
and `given` (the fields the JSON names, aliases resolved); it sets what the class would compute and says
True, or False when only transformers can say what the class makes of this JSON (a value the class
refuses, a type it converts). RULES maps model_type -> (rule, the fields it answers for: the table's
properties and derived fields that the reader then takes from the rule). tests/test_hf_fast.py checks
every rule against transformers on the shipped configs and on variations of each class's fields.
"""

from __future__ import annotations

import math

# configuration_utils.py _LEGACY_LAYER_TYPE_REMAP (remap_legacy_layer_types, PreTrainedConfig.__post_init__)
LEGACY_KINDS = {
    "mamba": "linear_attention",
    "attention": "full_attention",
    "deepseek_sparse_attention": "indexed_attention",
    "qwen_sparse_attention": "indexed_attention",
}


def remap(kinds):
    """remap_legacy_layer_types(layer_types): legacy names to today's, anything else unchanged."""
    return [LEGACY_KINDS.get(k, k) if isinstance(k, str) else k for k in kinds]


def _int(*xs) -> bool:
    return all(isinstance(x, int) and not isinstance(x, bool) for x in xs)


def _kv_heads(values: dict, part: dict, key: str = "num_key_value_heads") -> bool:
    """The backward-compatibility line most classes share: `if self.num_key_value_heads is None:
    self.num_key_value_heads = self.num_attention_heads`. A JSON null is left to transformers (most
    classes type the field `int`, and their strict dataclass refuses it)."""
    if key in part and part[key] is None:
        return False
    if values.get(key) is None:
        values[key] = values.get("num_attention_heads")
    return True


def _divides(values: dict) -> bool:
    """validate_architecture of DeepseekV2Config / MiniCPM3Config: hidden_size a multiple of
    num_attention_heads (else the class refuses)."""
    hidden, heads = values.get("hidden_size"), values.get("num_attention_heads")
    return _int(hidden, heads) and heads > 0 and hidden % heads == 0


def _period(values: dict, part: dict, *, key: str, default: int, every: str, other: str, pop: bool) -> bool:
    """layer_types every `key`-th layer `every`, the others `other`, when the JSON has none (the JSON's
    `key` -- which the class pops from its kwargs then, when `pop` -- or the class default)."""
    n = values.get("num_hidden_layers")
    period = part.get(key, default)
    if values.get("layer_types") is None:
        if not _int(n, period) or period == 0:
            return False
        values["layer_types"] = [other if (i + 1) % period else every for i in range(n)]
        if pop:
            values.pop(key, None)
    return True


def _gemma3_text(values: dict, part: dict, given: set) -> bool:
    """Gemma3TextConfig.__post_init__: every sliding_window_pattern-th layer full (default 6); a
    bidirectional model also changes its window there, so it is left to transformers."""
    if values.get("use_bidirectional_attention"):
        return False
    return _period(
        values,
        part,
        key="sliding_window_pattern",
        default=6,
        every="full_attention",
        other="sliding_attention",
        pop=False,
    )


def _qwen3_next(values: dict, part: dict, given: set) -> bool:
    """Qwen3NextConfig.__post_init__ (and Qwen3_5TextConfig / Qwen3_5MoeTextConfig.__post_init__, which
    pop the same `full_attention_interval`): every full_attention_interval-th layer full (default 4)."""
    return _period(
        values,
        part,
        key="full_attention_interval",
        default=4,
        every="full_attention",
        other="linear_attention",
        pop=True,
    )


_NEMOTRON_LETTERS = {"M": "linear_attention", "E": "moe", "*": "full_attention", "-": "mlp"}


def _nemotron_h(values: dict, part: dict, given: set) -> bool:
    """NemotronHConfig.__post_init__ and its properties: the mamba_* names renamed (mamba_n_groups ->
    n_groups, mamba_d_conv -> conv_kernel, mamba_expand -> expand); layers_block_type from
    hybrid_override_pattern (M, E, *, -) when the JSON lists none, else the default
    [linear_attention, moe, full_attention, mlp]; legacy names remapped; mtp_layers_block_type likewise
    (default [full_attention, moe], which mtp_hybrid_override_pattern replaces); validate_layer_type
    refuses any other kind; properties num_hidden_layers = len(layers_block_type) (a given one is
    ignored), hybrid_override_pattern and mtp_hybrid_override_pattern (_list_to_pattern)."""
    for old, new in (("mamba_n_groups", "n_groups"), ("mamba_d_conv", "conv_kernel"), ("mamba_expand", "expand")):
        if old in part:
            values[new] = values.pop(old)
    kinds = values.get("layers_block_type")
    pattern = values.pop("hybrid_override_pattern", None)
    if "hybrid_override_pattern" in part:
        if kinds is None:
            if not isinstance(pattern, str) or any(c not in _NEMOTRON_LETTERS for c in pattern):
                return False
            kinds = [_NEMOTRON_LETTERS[c] for c in pattern]
    elif kinds is None:
        kinds = ["linear_attention", "moe", "full_attention", "mlp"]
    if not isinstance(kinds, list):
        return False
    kinds = remap(kinds)
    letter = {v: k for k, v in _NEMOTRON_LETTERS.items()}
    if any(not isinstance(k, str) or k not in letter for k in kinds):
        return False  # validate_layer_type: transformers says what is wrong
    mtp = values.get("mtp_layers_block_type")
    mtp = ["full_attention", "moe"] if mtp is None else remap(mtp) if isinstance(mtp, list) else mtp
    mtp_pattern = values.pop("mtp_hybrid_override_pattern", None)
    if "mtp_hybrid_override_pattern" in part and mtp == ["full_attention", "moe"]:
        if not isinstance(mtp_pattern, str) or any(c not in _NEMOTRON_LETTERS for c in mtp_pattern):
            return False
        mtp = [_NEMOTRON_LETTERS[c] for c in mtp_pattern]
    if values.get("num_nextn_predict_layers") and (
        not isinstance(mtp, list) or any(not isinstance(k, str) or k not in letter for k in mtp)
    ):
        return False  # validate_layer_type
    values["mtp_layers_block_type"] = mtp
    if isinstance(mtp, list) and all(isinstance(k, str) and k in letter for k in mtp):
        values["mtp_hybrid_override_pattern"] = "".join(letter[k] for k in mtp)
    else:
        return False  # the property's _list_to_pattern would fail on this list
    values["layers_block_type"] = kinds
    values["num_hidden_layers"] = len(kinds)
    values["hybrid_override_pattern"] = "".join(letter[k] for k in kinds)
    return _kv_heads(values, part)


def _jamba(values: dict, part: dict, given: set) -> bool:
    """JambaConfig: properties layers_block_type ('attention' where i % attn_layer_period ==
    attn_layer_offset, else 'mamba') and layer_types (the same in today's names); __post_init__'s
    num_key_value_heads and mamba_dt_rank ('auto' -> ceil(hidden_size / 16)); validate_architecture
    refuses an offset not below its period. A JSON that sets a property is refused by the class."""
    if given & {"layers_block_type", "layer_types"}:
        return False
    n, period, offset = (values.get(k) for k in ("num_hidden_layers", "attn_layer_period", "attn_layer_offset"))
    e_period, e_offset = values.get("expert_layer_period"), values.get("expert_layer_offset")
    if not _int(n, period, offset, e_period, e_offset) or offset >= period or e_offset >= e_period or period <= 0:
        return False
    values["layers_block_type"] = ["attention" if i % period == offset else "mamba" for i in range(n)]
    values["layer_types"] = remap(values["layers_block_type"])
    if not _kv_heads(values, part):
        return False
    if values.get("mamba_dt_rank") == "auto":
        if not isinstance(values.get("hidden_size"), int):
            return False
        values["mamba_dt_rank"] = math.ceil(values["hidden_size"] / 16)
    return True


def _mamba(values: dict, part: dict, given: set) -> bool:
    """MambaConfig / FalconMambaConfig: property layer_types (every layer linear_attention);
    __post_init__'s intermediate_size = int(expand x hidden_size), which a JSON value (set after it)
    replaces."""
    if "layer_types" in given or not _int(values.get("num_hidden_layers")):
        return False
    values["layer_types"] = ["linear_attention"] * values["num_hidden_layers"]
    if "intermediate_size" not in given:
        expand, hidden = values.get("expand"), values.get("hidden_size")
        if not isinstance(expand, (int, float)) or not _int(hidden):
            return False
        values["intermediate_size"] = int(expand * hidden)
    return True


def _mamba2(values: dict, part: dict, given: set) -> bool:
    """Mamba2Config: property layer_types (every layer linear_attention); validate_architecture refuses
    hidden_size x expand != num_heads x head_dim."""
    keys = ("num_hidden_layers", "hidden_size", "expand", "num_heads", "head_dim")
    if "layer_types" in given or not _int(*(values.get(k) for k in keys)):
        return False
    if values["hidden_size"] * values["expand"] != values["num_heads"] * values["head_dim"]:
        return False
    values["layer_types"] = ["linear_attention"] * values["num_hidden_layers"]
    return True


def _mamba_d_head(values: dict, intermediate) -> bool:
    """FalconH1Config / GraniteMoeHybridConfig.__post_init__: mamba_d_head 'auto' -> the Mamba
    intermediate // mamba_n_heads; validate_architecture refuses a head split that does not fill it."""
    heads = values.get("mamba_n_heads")
    if not _int(intermediate, heads) or heads <= 0:
        return False
    if values.get("mamba_d_head") == "auto":
        values["mamba_d_head"] = intermediate // heads
    return _int(values["mamba_d_head"]) and intermediate % heads == 0 and values["mamba_d_head"] * heads == intermediate


def _falcon_h1(values: dict, part: dict, given: set) -> bool:
    """FalconH1Config: property layers_block_type (every layer 'hybrid'); __post_init__'s
    num_key_value_heads and mamba_d_head (the intermediate: mamba_d_ssm, or mamba_expand x hidden_size)."""
    if "layers_block_type" in given or not _int(values.get("num_hidden_layers")):
        return False
    values["layers_block_type"] = ["hybrid"] * values["num_hidden_layers"]
    if not _kv_heads(values, part):
        return False
    d_ssm, expand, hidden = values.get("mamba_d_ssm"), values.get("mamba_expand"), values.get("hidden_size")
    if d_ssm is None and not _int(expand, hidden):
        return False
    return _mamba_d_head(values, expand * hidden if d_ssm is None else d_ssm)


def _granite_h(values: dict, part: dict, given: set) -> bool:
    """GraniteMoeHybridConfig.__post_init__: num_key_value_heads, mamba_d_head (from mamba_expand x
    hidden_size), layer_types every layer linear_attention when the JSON lists none."""
    if not _kv_heads(values, part):
        return False
    if values.get("layer_types") is None:
        if not _int(values.get("num_hidden_layers")):
            return False
        values["layer_types"] = ["linear_attention"] * values["num_hidden_layers"]
    expand, hidden = values.get("mamba_expand"), values.get("hidden_size")
    return _int(expand, hidden) and _mamba_d_head(values, expand * hidden)


_ZAMBA2_KINDS = (
    ["linear_attention"]
    + (["linear_attention"] * 5 + ["hybrid"]) * 7
    + ["linear_attention"] * 4
    + ["hybrid"]
    + ["linear_attention"] * 3
    + ["hybrid"]
    + ["linear_attention"] * 2
)


def _zamba2(values: dict, part: dict, given: set) -> bool:
    """Zamba2Config.__post_init__: intermediate_size (or 4 x hidden_size), attention_head_dim
    (2 x hidden_size // num_attention_heads) and mamba_headdim (int(mamba_expand x hidden_size) //
    n_mamba_heads), which JSON values (set after them) replace; max_position_embeddings 16384 with
    use_long_context; num_key_value_heads; layers_block_type (its default list, or the JSON's remapped)."""
    hidden, heads, m_heads, expand = (
        values.get(k) for k in ("hidden_size", "num_attention_heads", "n_mamba_heads", "mamba_expand")
    )
    if not _int(hidden, heads, m_heads) or not isinstance(expand, (int, float)) or not heads or not m_heads:
        return False
    values["intermediate_size"] = values.get("intermediate_size") or 4 * hidden
    if "attention_head_dim" not in given:
        values["attention_head_dim"] = 2 * hidden // heads
    if "mamba_headdim" not in given:
        values["mamba_headdim"] = int(expand * hidden) // m_heads
    if values.get("use_long_context"):
        values["max_position_embeddings"] = 16384
    if not _kv_heads(values, part):
        return False
    kinds = values.get("layers_block_type")
    if kinds is not None and not isinstance(kinds, list):
        return False
    values["layers_block_type"] = list(_ZAMBA2_KINDS) if kinds is None else remap(kinds)
    return True


def _rope_head_dim(values: dict) -> bool:
    """head_dim = qk_rope_head_dim, whatever the JSON says (DeepseekV2Config, DeepseekV32Config,
    MiniCPM3Config, HYV4Config .__post_init__; each types qk_rope_head_dim `int`, so their fallback
    for a None is never reached)."""
    values["head_dim"] = values.get("qk_rope_head_dim")
    return _int(values["head_dim"])


def _deepseek_v2(values: dict, part: dict, given: set) -> bool:
    """DeepseekV2Config.__post_init__: head_dim (qk_rope_head_dim) and num_key_value_heads;
    validate_architecture."""
    return _kv_heads(values, part) and _rope_head_dim(values) and _divides(values)


def _deepseek_v32(values: dict, part: dict, given: set) -> bool:
    """DeepseekV32Config.__post_init__: head_dim = qk_rope_head_dim; mlp_layer_types 'dense' for the
    first min(first_k_dense_replace, num_hidden_layers) layers, then 'sparse'; layer_types every layer
    indexed_attention (both when the JSON lists none); num_experts also sets n_routed_experts (no
    reader's field)."""
    n, k = values.get("num_hidden_layers"), values.get("first_k_dense_replace")
    if not _int(n, k):
        return False
    if values.get("mlp_layer_types") is None:
        dense = min(k, n)
        values["mlp_layer_types"] = ["dense"] * dense + ["sparse"] * (n - dense)
    if values.get("layer_types") is None:
        values["layer_types"] = ["indexed_attention"] * n
    return _rope_head_dim(values)


def _minicpm3(values: dict, part: dict, given: set) -> bool:
    """MiniCPM3Config.__post_init__: head_dim (qk_rope_head_dim), v_head_dim (hidden_size //
    num_attention_heads when None), num_key_value_heads; validate_architecture."""
    if not (_kv_heads(values, part) and _rope_head_dim(values) and _divides(values)):
        return False
    if values.get("v_head_dim") is None:
        values["v_head_dim"] = values["hidden_size"] // values["num_attention_heads"]
    return True


def _hy_v4(values: dict, part: dict, given: set) -> bool:
    """HYV4Config.__post_init__: num_key_value_heads = num_attention_heads and head_dim =
    qk_rope_head_dim whatever the JSON says; mlp_layer_types one 'dense' then 'sparse', layer_types
    every layer indexed_attention (when the JSON lists none)."""
    n = values.get("num_hidden_layers")
    if not _int(n):
        return False
    values["num_key_value_heads"] = values.get("num_attention_heads")
    if values.get("mlp_layer_types") is None:
        values["mlp_layer_types"] = ["dense"] * min(1, n) + ["sparse"] * max(n - 1, 0)
    if values.get("layer_types") is None:
        values["layer_types"] = ["indexed_attention"] * n
    return _rope_head_dim(values)


def _hy_v3(values: dict, part: dict, given: set) -> bool:
    """HYV3Config.__post_init__: mlp_layer_types one 'dense' then 'sparse' (when the JSON lists none)."""
    n = values.get("num_hidden_layers")
    if not _int(n):
        return False
    if values.get("mlp_layer_types") is None:
        values["mlp_layer_types"] = ["dense"] * (1 if n > 0 else 0) + ["sparse"] * max(n - 1, 0)
    return True


def _llama4_text(values: dict, part: dict, given: set) -> bool:
    """Llama4TextConfig.__post_init__: num_key_value_heads; no_rope_layers (the JSON's when non-empty,
    else 1 except every no_rope_layer_interval-th layer); layer_types chunked_attention on RoPE layers
    when attention_chunk_size is set, else full_attention (when the JSON lists none)."""
    n, interval = values.get("num_hidden_layers"), values.get("no_rope_layer_interval")
    if not _int(n, interval) or not interval or not _kv_heads(values, part) or not _int(values.get("head_dim")):
        return False  # (head_dim is typed `int`: its None fallback is never reached)
    if not values.get("no_rope_layers"):
        values["no_rope_layers"] = [int((i + 1) % interval != 0) for i in range(n)]
    if values.get("layer_types") is None:
        if not isinstance(values["no_rope_layers"], list):
            return False
        chunked = values.get("attention_chunk_size") is not None
        values["layer_types"] = [
            "chunked_attention" if nope and chunked else "full_attention" for nope in values["no_rope_layers"]
        ]
    return True


def _falcon(values: dict, part: dict, given: set) -> bool:
    """FalconConfig: __post_init__'s n_embed (the hidden_size when given) and num_kv_heads; property
    head_dim = hidden_size // num_attention_heads. A JSON head_dim cannot be set on the property."""
    if "head_dim" in given:
        return False
    if "n_embed" in part and part["n_embed"] is not None:
        values["hidden_size"] = values.pop("n_embed")
    values.pop("n_embed", None)
    if not _kv_heads(values, part, "num_kv_heads"):
        return False
    hidden, heads = values.get("hidden_size"), values.get("num_attention_heads")
    if not _int(hidden, heads) or not heads:
        return False
    values["head_dim"] = hidden // heads
    return True


def _longcat_flash(values: dict, part: dict, given: set) -> bool:
    """LongcatFlashConfig: property num_hidden_layers = 2 x num_layers, whose setter (a JSON
    num_hidden_layers, set after __post_init__) makes num_layers value // 2; num_key_value_heads."""
    if "num_hidden_layers" in part:
        if not _int(part["num_hidden_layers"]):
            return False
        values["num_layers"] = part["num_hidden_layers"] // 2
    if not _int(values.get("num_layers")):
        return False
    values["num_hidden_layers"] = 2 * values["num_layers"]
    return _kv_heads(values, part)


# model_type -> (rule, the properties and derived fields it answers for)
RULES = {
    "gemma3_text": (_gemma3_text, ("layer_types",)),
    "qwen3_next": (_qwen3_next, ("layer_types",)),
    "qwen3_5_text": (_qwen3_next, ("layer_types",)),
    "qwen3_5_moe_text": (_qwen3_next, ("layer_types",)),
    "nemotron_h": (
        _nemotron_h,
        (
            "layers_block_type",
            "num_hidden_layers",
            "hybrid_override_pattern",
            "mtp_layers_block_type",
            "mtp_hybrid_override_pattern",
        ),
    ),
    "jamba": (_jamba, ("layers_block_type", "layer_types", "mamba_dt_rank")),
    "mamba": (_mamba, ("layer_types", "intermediate_size")),
    "falcon_mamba": (_mamba, ("layer_types", "intermediate_size")),
    "mamba2": (_mamba2, ("layer_types",)),
    "falcon_h1": (_falcon_h1, ("layers_block_type", "mamba_d_head")),
    "granitemoehybrid": (_granite_h, ("layer_types", "mamba_d_head", "num_key_value_heads")),
    "zamba2": (
        _zamba2,
        ("intermediate_size", "attention_head_dim", "mamba_headdim", "num_key_value_heads", "layers_block_type"),
    ),
    "deepseek_v2": (_deepseek_v2, ("head_dim", "num_key_value_heads")),
    "deepseek_v32": (_deepseek_v32, ("head_dim", "layer_types", "mlp_layer_types")),
    "minicpm3": (_minicpm3, ("head_dim", "v_head_dim", "num_key_value_heads")),
    "hy_v4": (_hy_v4, ("head_dim", "num_key_value_heads", "layer_types", "mlp_layer_types")),
    "hy_v3": (_hy_v3, ("mlp_layer_types",)),
    "llama4_text": (_llama4_text, ("num_key_value_heads", "no_rope_layers", "layer_types")),
    "falcon": (_falcon, ("head_dim", "num_kv_heads")),
    "longcat_flash": (_longcat_flash, ("num_hidden_layers", "num_key_value_heads")),
}
