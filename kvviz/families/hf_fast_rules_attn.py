"""The attention models' config-class rules that kvviz's table reader mirrors (DeepSeek-V2 / V3.2,
MiniCPM3, Hunyuan V3 / V4, Llama 4, Falcon, LongCat-Flash, Gemma 3, Qwen3-Next / Qwen3.5) and the
helpers every rule shares; kvviz/families/hf_fast_rules.py says what a rule is and holds the state
hybrids' (RULES gathers both).
"""

from __future__ import annotations

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


def ints(*xs) -> bool:
    """Whether every value is an int (a bool is not): what the classes' strict `int` fields accept."""
    return all(isinstance(x, int) and not isinstance(x, bool) for x in xs)


def kv_heads(values: dict, part: dict, key: str = "num_key_value_heads") -> bool:
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
    return ints(hidden, heads) and heads > 0 and hidden % heads == 0


def _period(values: dict, part: dict, *, key: str, default: int, every: str, other: str, pop: bool) -> bool:
    """layer_types every `key`-th layer `every`, the others `other`, when the JSON has none (the JSON's
    `key` -- which the class pops from its kwargs then, when `pop` -- or the class default)."""
    n = values.get("num_hidden_layers")
    period = part.get(key, default)
    if values.get("layer_types") is None:
        if not ints(n, period) or period == 0:
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


def _rope_head_dim(values: dict) -> bool:
    """head_dim = qk_rope_head_dim, whatever the JSON says (DeepseekV2Config, DeepseekV32Config,
    MiniCPM3Config, HYV4Config .__post_init__; each types qk_rope_head_dim `int`, so their fallback
    for a None is never reached)."""
    values["head_dim"] = values.get("qk_rope_head_dim")
    return ints(values["head_dim"])


def _deepseek_v2(values: dict, part: dict, given: set) -> bool:
    """DeepseekV2Config.__post_init__: head_dim (qk_rope_head_dim) and num_key_value_heads;
    validate_architecture."""
    return kv_heads(values, part) and _rope_head_dim(values) and _divides(values)


def _deepseek_v32(values: dict, part: dict, given: set) -> bool:
    """DeepseekV32Config.__post_init__ (GlmMoeDsaConfig.__post_init__ the same): head_dim =
    qk_rope_head_dim; mlp_layer_types 'dense' for the first min(first_k_dense_replace, num_hidden_layers)
    layers, then 'sparse'; layer_types every layer indexed_attention (both when the JSON lists none);
    num_experts also sets n_routed_experts (no reader's field)."""
    n, k = values.get("num_hidden_layers"), values.get("first_k_dense_replace")
    if not ints(n, k):
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
    if not (kv_heads(values, part) and _rope_head_dim(values) and _divides(values)):
        return False
    if values.get("v_head_dim") is None:
        values["v_head_dim"] = values["hidden_size"] // values["num_attention_heads"]
    return True


def _hy_v4(values: dict, part: dict, given: set) -> bool:
    """HYV4Config.__post_init__: num_key_value_heads = num_attention_heads and head_dim =
    qk_rope_head_dim whatever the JSON says; mlp_layer_types one 'dense' then 'sparse', layer_types
    every layer indexed_attention (when the JSON lists none)."""
    n = values.get("num_hidden_layers")
    if not ints(n):
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
    if not ints(n):
        return False
    if values.get("mlp_layer_types") is None:
        values["mlp_layer_types"] = ["dense"] * (1 if n > 0 else 0) + ["sparse"] * max(n - 1, 0)
    return True


def _llama4_text(values: dict, part: dict, given: set) -> bool:
    """Llama4TextConfig.__post_init__: num_key_value_heads; no_rope_layers (the JSON's when non-empty,
    else 1 except every no_rope_layer_interval-th layer); layer_types chunked_attention on RoPE layers
    when attention_chunk_size is set, else full_attention (when the JSON lists none)."""
    n, interval = values.get("num_hidden_layers"), values.get("no_rope_layer_interval")
    if not ints(n, interval) or not interval or not kv_heads(values, part) or not ints(values.get("head_dim")):
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
    if not kv_heads(values, part, "num_kv_heads"):
        return False
    hidden, heads = values.get("hidden_size"), values.get("num_attention_heads")
    if not ints(hidden, heads) or not heads:
        return False
    values["head_dim"] = hidden // heads
    return True


def _longcat_flash(values: dict, part: dict, given: set) -> bool:
    """LongcatFlashConfig: property num_hidden_layers = 2 x num_layers, whose setter (a JSON
    num_hidden_layers, set after __post_init__) makes num_layers value // 2; num_key_value_heads."""
    if "num_hidden_layers" in part:
        if not ints(part["num_hidden_layers"]):
            return False
        values["num_layers"] = part["num_hidden_layers"] // 2
    if not ints(values.get("num_layers")):
        return False
    values["num_hidden_layers"] = 2 * values["num_layers"]
    return kv_heads(values, part)


# MiMoV2FlashConfig.__post_init__'s rope_parameters where the JSON has none
_MIMO_ROPE = {
    "full_attention": {"rope_type": "default", "rope_theta": 5_000_000.0, "partial_rotary_factor": 0.334},
    "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0, "partial_rotary_factor": 0.334},
}


def _mimo_v2_flash(values: dict, part: dict, given: set) -> bool:
    """MiMoV2FlashConfig.__post_init__: layer_types full on layer 0 and every 6th, else sliding;
    mlp_layer_types one 'dense' then 'sparse' (both when the JSON lists none); rope_parameters its own
    pair when None; sliding_window = sliding_window_size + 1 when that is given. Its
    convert_rope_params_to_dict keeps a legacy rope_scaling as it is, so such a JSON is transformers'."""
    n, size = values.get("num_hidden_layers"), part.get("sliding_window_size")
    if part.get("rope_scaling") or not ints(n) or n < 1 or not (size is None or ints(size)):
        return False
    if values.get("layer_types") is None:
        values["layer_types"] = [
            "full_attention" if (i == 0 or not ((i + 1) % 6)) else "sliding_attention" for i in range(n)
        ]
    if values.get("mlp_layer_types") is None:
        values["mlp_layer_types"] = ["dense"] + ["sparse"] * (n - 1)
    if values.get("rope_parameters") is None:
        values["rope_parameters"] = {k: dict(v) for k, v in _MIMO_ROPE.items()}
    if size is not None:
        values["sliding_window"] = size + 1
    return True


def _dbrx(values: dict, part: dict, given: set) -> bool:
    """DbrxConfig.__post_init__: attn_config a DbrxAttentionConfig (of the JSON's dict, or its defaults:
    attn_pdrop 0.0, clip_qkv None, kv_n_heads 1) and num_key_value_heads = its kv_n_heads, which a JSON
    num_key_value_heads (no field of the class: set after __post_init__) replaces; validate_architecture
    refuses tie_word_embeddings."""
    if values.get("tie_word_embeddings"):
        return False
    attn = values.get("attn_config")
    if attn is None:
        attn = {"attn_pdrop": 0.0, "clip_qkv": None, "kv_n_heads": 1}
    if not isinstance(attn, dict) or "model_type" in attn:
        return False
    values["attn_config"] = attn = {"attn_pdrop": 0.0, "clip_qkv": None, "kv_n_heads": 1, **attn}
    if not ints(attn["kv_n_heads"]):
        return False
    if "num_key_value_heads" not in given:
        values["num_key_value_heads"] = attn["kv_n_heads"]
    return True


def _hrm_text(values: dict, part: dict, given: set) -> bool:
    """HrmTextConfig.__post_init__: with no num_layers_per_stack, the JSON's num_hidden_layers is one
    stack's and num_hidden_layers becomes stack x H_cycles x (L_cycles + 1)."""
    if values.get("num_layers_per_stack") is None:
        stack, h, low = values.get("num_hidden_layers"), values.get("H_cycles"), values.get("L_cycles")
        if not ints(stack, h, low):
            return False
        values["num_layers_per_stack"] = stack
        values["num_hidden_layers"] = stack * h * (low + 1)
    return True


# model_type -> (rule, the properties and derived fields it answers for)
def _phi3_rope(values: dict, part: dict, given: set) -> bool:
    """Phi3Config / PhimoeConfig.validate_rope, past the base's checks (kvviz/families/hf_fast_strict.py):
    mirrored for a default rope only (Phi3's rope_type default or longrope with factor lists of its
    rotary size, Phimoe's mscale numbers otherwise): anything else is left to transformers."""
    rope = values.get("rope_parameters")
    if rope is not None and not isinstance(rope, dict):
        return False
    rope = rope or {}
    kind = rope.get("rope_type", rope.get("type", "default"))
    hidden, heads = values.get("hidden_size"), values.get("num_attention_heads")
    return kind == "default" and not {"short_factor", "long_factor"} & set(rope) and ints(hidden, heads) and heads > 0


ATTENTION_RULES = {
    "phi3": (_phi3_rope, ("validate_rope",)),
    "phimoe": (_phi3_rope, ("validate_rope",)),
    "hrm_text": (_hrm_text, ("num_hidden_layers", "num_layers_per_stack")),
    "mimo_v2_flash": (_mimo_v2_flash, ("layer_types", "mlp_layer_types")),
    "dbrx": (_dbrx, ("num_key_value_heads", "attn_config")),
    "gemma3_text": (_gemma3_text, ("layer_types",)),
    "qwen3_next": (_qwen3_next, ("layer_types",)),
    "qwen3_5_text": (_qwen3_next, ("layer_types",)),
    "qwen3_5_moe_text": (_qwen3_next, ("layer_types",)),
    "deepseek_v2": (_deepseek_v2, ("head_dim", "num_key_value_heads")),
    "deepseek_v32": (_deepseek_v32, ("head_dim", "layer_types", "mlp_layer_types")),
    "glm_moe_dsa": (_deepseek_v32, ("head_dim", "layer_types", "mlp_layer_types")),
    "minicpm3": (_minicpm3, ("head_dim", "v_head_dim", "num_key_value_heads")),
    "hy_v4": (_hy_v4, ("head_dim", "num_key_value_heads", "layer_types", "mlp_layer_types")),
    "hy_v3": (_hy_v3, ("mlp_layer_types",)),
    "llama4_text": (_llama4_text, ("num_key_value_heads", "no_rope_layers", "layer_types")),
    "falcon": (_falcon, ("head_dim", "num_kv_heads")),
    "longcat_flash": (_longcat_flash, ("num_hidden_layers", "num_key_value_heads")),
}
