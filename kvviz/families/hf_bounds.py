"""Bounds on what a config.json may say before a family reads it: the dtype names vLLM knows, layer
and head counts, dimensions and periods each within kvviz.base.inputs' limits, checked on the top
level and the text config, one line naming the field; and the readers of one integer field (`field`,
`mla_dims`) every family uses."""

from __future__ import annotations

from kvviz.base.errors import require
from kvviz.base.inputs import MAX_DIM, MAX_LAYERS, bounded_int, short_repr

# transformers' dtype names -> kvviz's element names (a float16 model is sized like bf16: 2 B)
_DTYPES = {
    "torch.bfloat16": "bf16",
    "bfloat16": "bf16",
    "torch.float16": "fp16",
    "float16": "fp16",
    "torch.float32": "fp32",
    "float32": "fp32",
    "bf16": "bf16",
    "fp16": "fp16",
    "fp32": "fp32",
}


# Fields transformers' config classes take a period from when they derive layer_types, or divide
# by: a 0 would end in transformers' bare "integer modulo by zero", a -1 be read silently (every
# layer full: `(i + 1) % -1 == 0` in Gemma3TextConfig / Cohere2Config / Qwen3NextConfig /
# Qwen3_5TextConfig, which vLLM 0.33 reads through AutoConfig). Each must be a positive integer.
PERIOD_FIELDS = (
    "sliding_window_pattern",
    "full_attention_interval",
    "attn_layer_period",
    "expert_layer_period",
    "no_rope_layer_interval",
)


HEAD_COUNT_FIELDS = (
    "num_attention_heads",
    "num_key_value_heads",
    "n_mamba_heads",
    "mamba_n_heads",
    "mamba_num_heads",
    "linear_num_key_heads",
    "linear_num_value_heads",
    "n_groups",
    "mamba_n_groups",
    "mamba_ngroups",
    "num_mem_blocks",
)


# Per-head and per-state sizes every family multiplies into a page: each is bounded by MAX_DIM
# before any reader sees it (2**63 would be planned as given), naming the field. head_dim may be 0:
# vLLM's get_head_size (transformers_utils/model_arch_config_convertor.py) takes head_dim only when
# it is > 0 and derives hidden_size // num_attention_heads otherwise, as kvviz's readers do.
DIM_FIELDS = (
    "head_dim",
    "attention_head_dim",
    "kv_lora_rank",
    "q_lora_rank",
    "qk_rope_head_dim",
    "qk_nope_head_dim",
    "v_head_dim",
    "index_head_dim",
    "linear_key_head_dim",
    "linear_value_head_dim",
    "linear_conv_kernel_dim",
    "mamba_d_head",
    "mamba_head_dim",
    "mamba_headdim",
    "mamba_d_state",
    "ssm_state_size",
    "state_size",
    "mamba_d_conv",
    "conv_kernel",
    "conv_L_cache",
    "mamba_dt_rank",
)


# The same inside Kimi-Linear's linear_attn_config.
NESTED_DIM_FIELDS = {"linear_attn_config": ("head_dim", "num_heads", "short_conv_kernel_size")}


# Fields a multimodal model's text config holds; the same field at the top level is not read.
TEXT_FIELDS = ("num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim", "sliding_window")


def _parts(raw: dict):
    return (("", raw), ("text_config.", raw.get("text_config")))


def bound_layers(raw: dict, *, name: str) -> None:
    """Bound num_hidden_layers, the layer periods, the head counts and the per-head and state sizes
    before transformers builds per-layer lists from them or divides by them, and before a reader
    multiplies them into a page (each refusal names its field)."""
    for where, part in _parts(raw):
        if not isinstance(part, dict):
            continue
        if "num_hidden_layers" in part:
            bounded_int(part["num_hidden_layers"], field=f"{name}: {where}num_hidden_layers", low=1, high=MAX_LAYERS)
        for key in PERIOD_FIELDS:
            value = part.get(key)
            if key == "sliding_window_pattern" and isinstance(value, str) and isinstance(part.get("layer_types"), list):
                # EXAONE 4's "LLLG": transformers' Exaone4Config.__post_init__ reads the pattern only
                # when layer_types is absent (configuration_exaone4.py); vLLM's exaone4.py reads layer_types
                continue
            require(
                value is None or (type(value) is int and 1 <= value <= MAX_LAYERS),
                f"{name}: {where}{key}={short_repr(value)}: must be a period of layers from 1 to {MAX_LAYERS:,} "
                f"(transformers, which vLLM 0.33 reads, takes -1 as every layer full and divides by 0)",
            )
        for key in HEAD_COUNT_FIELDS:
            if part.get(key) is not None:
                bounded_int(part[key], field=f"{name}: {where}{key}", low=1, high=MAX_DIM)
        for key in DIM_FIELDS:
            if part.get(key) is not None and not (key == "head_dim" and part[key] == 0):
                bounded_int(part[key], field=f"{name}: {where}{key}", low=1, high=MAX_DIM)
        for outer, keys in NESTED_DIM_FIELDS.items():
            inner = part.get(outer)
            for key in keys if isinstance(inner, dict) else ():
                if inner.get(key) is not None:
                    bounded_int(inner[key], field=f"{name}: {where}{outer}.{key}", low=1, high=MAX_DIM)
        for key in ("torch_dtype", "dtype"):
            value = part.get(key)
            require(
                value is None or (isinstance(value, str) and value in _DTYPES),
                f"{name}: {where}{key}={short_repr(value)}: kvviz (like vLLM 0.33, through transformers) reads "
                f"a checkpoint's bfloat16, float16 or float32",
            )


def check_text_config(raw: dict, config_class, *, name: str) -> None:
    """A multimodal config (one whose transformers class has a text_config sub-config) must carry
    its text model's config, of that text model's type: transformers would otherwise build its
    default text model (or another architecture's) and kvviz would plan it under this name."""
    expected = (getattr(config_class, "sub_configs", None) or {}).get("text_config")
    if expected is None:
        return
    part, model_type = raw.get("text_config"), raw.get("model_type")
    require(
        isinstance(part, dict),
        f"{name}: text_config={short_repr(part)}: a {model_type} config must hold its "
        f"language model's config (transformers would read its defaults instead)",
    )
    want = getattr(expected, "model_type", None)
    got = part.get("model_type")
    require(
        got is None or not want or got == want,
        f"{name}: text_config.model_type={short_repr(got)}: a {model_type} model's text config is {want!r}",
    )


def check_top_level(raw: dict, text, *, name: str) -> None:
    """A field given at the top level of a config whose text config is read instead must agree
    with the text config (vLLM 0.33 reads get_text_config(); the top-level value is ignored)."""
    for key in TEXT_FIELDS:
        if key in raw and raw[key] is not None:
            used = getattr(text, key, None)
            require(
                used == raw[key],
                f"{name}: {key}={short_repr(raw[key])} at the top level is not read: vLLM reads "
                f"text_config.{key}={short_repr(used)}; give it there",
            )


def field(text, name: str, *, model: str, required: bool = True, default=None):
    """An integer field of the (text) config; a missing required one is a one-line error."""
    value = getattr(text, name, None)
    if value is None:
        require(not required, f"{model}: config is missing field {name!r}")
        return default
    require(
        isinstance(value, int) and not isinstance(value, bool),
        f"{model}: {name}={short_repr(value)}: must be an integer",
    )
    return value


def _raw_int(raw: dict, text, key: str, *, name: str) -> int:
    """A field as config.json has it (vLLM's get_head_size re-reads the raw file), else the
    config object's."""
    value = raw.get(key)
    if value is None and isinstance(raw.get("text_config"), dict):
        value = raw["text_config"].get(key)
    if value is None:
        value = getattr(text, key, None)
    require(value is not None, f"{name}: config is missing field {key!r}")
    require(
        isinstance(value, int) and not isinstance(value, bool) and value > 0,
        f"{name}: {key}={short_repr(value)}: must be a positive integer",
    )
    return value


def mla_dims(raw: dict, text, *, name: str) -> tuple[int, int]:
    """(kv_lora_rank, qk_rope_head_dim) of an MLA config; shared with the state family (Kimi-Linear)."""
    return _raw_int(raw, text, "kv_lora_rank", name=name), _raw_int(raw, text, "qk_rope_head_dim", name=name)
