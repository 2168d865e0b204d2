"""The rules of transformers 5.24.0's config classes that kvviz's table reader (kvviz/families/hf_fast.py)
mirrors: a property a reader looks at (Jamba's layers_block_type, Nemotron-H's hybrid_override_pattern),
or a field __post_init__ derives from others (Granite-4.0-H's mamba_d_head, DeepSeek-V2's head_dim).

Each rule takes `values` (the class defaults overlaid with the JSON, aliases resolved), the JSON `part`
and `given` (the fields the JSON names, aliases resolved); it sets what the class would compute and says
True, or False when only transformers can say what the class makes of this JSON (a value the class
refuses, a type it converts). RULES maps model_type -> (rule, the fields it answers for: the table's
properties and derived fields that the reader then takes from the rule). tests/test_hf_fast.py checks
every rule against transformers on the shipped configs, tests/test_hf_fast_rules.py on variations of
each class's fields. The state hybrids' rules are here, the attention models' (and the shared helpers)
in kvviz/families/hf_fast_rules_attn.py.
"""

from __future__ import annotations

import math

from kvviz.families.hf_fast_rules_attn import ATTENTION_RULES, ints, kv_heads, remap

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
    return kv_heads(values, part)


def _jamba(values: dict, part: dict, given: set) -> bool:
    """JambaConfig: properties layers_block_type ('attention' where i % attn_layer_period ==
    attn_layer_offset, else 'mamba') and layer_types (the same in today's names); __post_init__'s
    num_key_value_heads and mamba_dt_rank ('auto' -> ceil(hidden_size / 16)); validate_architecture
    refuses an offset not below its period. A JSON that sets a property is refused by the class."""
    if given & {"layers_block_type", "layer_types"}:
        return False
    n, period, offset = (values.get(k) for k in ("num_hidden_layers", "attn_layer_period", "attn_layer_offset"))
    e_period, e_offset = values.get("expert_layer_period"), values.get("expert_layer_offset")
    if not ints(n, period, offset, e_period, e_offset) or offset >= period or e_offset >= e_period or period <= 0:
        return False
    values["layers_block_type"] = ["attention" if i % period == offset else "mamba" for i in range(n)]
    values["layer_types"] = remap(values["layers_block_type"])
    if not kv_heads(values, part):
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
    if "layer_types" in given or not ints(values.get("num_hidden_layers")):
        return False
    values["layer_types"] = ["linear_attention"] * values["num_hidden_layers"]
    if "intermediate_size" not in given:
        expand, hidden = values.get("expand"), values.get("hidden_size")
        if not isinstance(expand, (int, float)) or not ints(hidden):
            return False
        values["intermediate_size"] = int(expand * hidden)
    return True


def _mamba2(values: dict, part: dict, given: set) -> bool:
    """Mamba2Config: property layer_types (every layer linear_attention); validate_architecture refuses
    hidden_size x expand != num_heads x head_dim."""
    keys = ("num_hidden_layers", "hidden_size", "expand", "num_heads", "head_dim")
    if "layer_types" in given or not ints(*(values.get(k) for k in keys)):
        return False
    if values["hidden_size"] * values["expand"] != values["num_heads"] * values["head_dim"]:
        return False
    values["layer_types"] = ["linear_attention"] * values["num_hidden_layers"]
    return True


def _mamba_d_head(values: dict, intermediate) -> bool:
    """FalconH1Config / GraniteMoeHybridConfig.__post_init__: mamba_d_head 'auto' -> the Mamba
    intermediate // mamba_n_heads; validate_architecture refuses a head split that does not fill it."""
    heads = values.get("mamba_n_heads")
    if not ints(intermediate, heads) or heads <= 0:
        return False
    if values.get("mamba_d_head") == "auto":
        values["mamba_d_head"] = intermediate // heads
    return ints(values["mamba_d_head"]) and intermediate % heads == 0 and values["mamba_d_head"] * heads == intermediate


def _falcon_h1(values: dict, part: dict, given: set) -> bool:
    """FalconH1Config: property layers_block_type (every layer 'hybrid'); __post_init__'s
    num_key_value_heads and mamba_d_head (the intermediate: mamba_d_ssm, or mamba_expand x hidden_size)."""
    if "layers_block_type" in given or not ints(values.get("num_hidden_layers")):
        return False
    values["layers_block_type"] = ["hybrid"] * values["num_hidden_layers"]
    if not kv_heads(values, part):
        return False
    d_ssm, expand, hidden = values.get("mamba_d_ssm"), values.get("mamba_expand"), values.get("hidden_size")
    if d_ssm is None and not ints(expand, hidden):
        return False
    return _mamba_d_head(values, expand * hidden if d_ssm is None else d_ssm)


def _granite_h(values: dict, part: dict, given: set) -> bool:
    """GraniteMoeHybridConfig.__post_init__: num_key_value_heads, mamba_d_head (from mamba_expand x
    hidden_size), layer_types every layer linear_attention when the JSON lists none."""
    if not kv_heads(values, part):
        return False
    if values.get("layer_types") is None:
        if not ints(values.get("num_hidden_layers")):
            return False
        values["layer_types"] = ["linear_attention"] * values["num_hidden_layers"]
    expand, hidden = values.get("mamba_expand"), values.get("hidden_size")
    return ints(expand, hidden) and _mamba_d_head(values, expand * hidden)


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
    if not ints(hidden, heads, m_heads) or not isinstance(expand, (int, float)) or not heads or not m_heads:
        return False
    values["intermediate_size"] = values.get("intermediate_size") or 4 * hidden
    if "attention_head_dim" not in given:
        values["attention_head_dim"] = 2 * hidden // heads
    if "mamba_headdim" not in given:
        values["mamba_headdim"] = int(expand * hidden) // m_heads
    if values.get("use_long_context"):
        values["max_position_embeddings"] = 16384
    if not kv_heads(values, part):
        return False
    kinds = values.get("layers_block_type")
    if kinds is not None and not isinstance(kinds, list):
        return False
    values["layers_block_type"] = list(_ZAMBA2_KINDS) if kinds is None else remap(kinds)
    return True


# model_type -> (rule, the properties and derived fields it answers for)
RULES = {
    **ATTENTION_RULES,
    "nemotron_h": (
        _nemotron_h,
        (
            "layers_block_type",
            "num_hidden_layers",
            "hybrid_override_pattern",
            "mtp_layers_block_type",
            "mtp_hybrid_override_pattern",
            "validate_layer_type",  # NemotronHConfig.validate_layer_type: the rule refuses what it refuses
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
}
