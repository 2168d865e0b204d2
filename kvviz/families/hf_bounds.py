"""Bounds on what a config.json may say before a family reads it: the dtype names vLLM knows, layer
and head counts, dimensions and periods each within kvviz.base.inputs' limits, checked on the top
level and the text config, one line naming the field; and the readers of one integer field (`field`,
`mla_dims`) every family uses."""

from __future__ import annotations

from kvviz.base.errors import require
from kvviz.base.inputs import MAX_DIM, MAX_LAYERS, MAX_SLIDING_WINDOW, bounded_int, short_repr

# transformers' dtype names -> kvviz's element names (a float16 model is sized like bf16: 2 B)
DTYPES = {
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
    "short_conv_kernel_size",  # BailingMoeV3's KDA state (state_bailing.py): a 2**63 kernel is a 2e23 B state
    "mamba_d_ssm",
    "global_head_dim",
    "swa_head_dim",
    "swa_v_head_dim",
)


# Layer counts under another name than num_hidden_layers: LongcatFlashConfig builds per-layer lists from
# num_layers (10**7 layers: a minute, then MemoryError), GPT-2's n_layer, Whisper's decoder / encoder layers.
LAYER_COUNT_FIELDS = ("num_layers", "n_layer", "n_layers", "decoder_layers", "encoder_layers", "num_decoder_layers")


# Windows and chunks in tokens: a positive count, or 0 (vLLM 0.33: a sliding_window of 0 disables the window,
# ModelConfig.__post_init__; llama4.py builds plain Attention when attention_chunk_size is 0). A negative one is
# read by no kernel (FlashAttention's window is (sliding_window - 1, 0)); 2**63 overflows the kernels' int.
WINDOW_FIELDS = ("sliding_window", "sliding_window_size", "attention_chunk_size", "rswa_window", "loop_window_size")


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
        for key in ("num_hidden_layers", *LAYER_COUNT_FIELDS):
            if key in part and (key == "num_hidden_layers" or part[key] is not None):
                bounded_int(part[key], field=f"{name}: {where}{key}", low=1, high=MAX_LAYERS)
        for key in WINDOW_FIELDS:
            value = part.get(key)
            require(
                type(value) is not int or 0 <= value <= MAX_SLIDING_WINDOW,
                f"{name}: {where}{key}={short_repr(value)}: must be 1 to {MAX_SLIDING_WINDOW:,} tokens "
                f"(0: none, as vLLM 0.33 reads it)",
            )
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
                value is None or (isinstance(value, str) and value in DTYPES),
                f"{name}: {where}{key}={short_repr(value)}: kvviz (like vLLM 0.33, through transformers) reads "
                f"a checkpoint's bfloat16, float16 or float32",
            )


def check_text_config(raw: dict, config_class, *, name: str) -> None:
    """A multimodal config's text_config, where it gives one, must be of its text model's type: transformers
    would otherwise build another architecture's text model and kvviz would plan it under this name. A config
    without one is read as transformers reads it: its class moves the flat keys into its text config
    (Qwen2-VL's and Qwen2.5-VL's `__post_init__`: "Hub configs are saved as flat dicts") or builds its default
    text config, and check_top_level refuses a top-level field the class left unread."""
    expected = (getattr(config_class, "sub_configs", None) or {}).get("text_config")
    part = raw.get("text_config")
    if expected is None or part is None:
        return
    model_type = raw.get("model_type")
    require(
        isinstance(part, dict),
        f"{name}: text_config={short_repr(part)}: a {model_type} config's text_config must be a JSON object",
    )
    want = getattr(expected, "model_type", None)
    got = part.get("model_type")
    require(
        got is None or not want or got == want,
        f"{name}: text_config.model_type={short_repr(got)}: a {model_type} model's text config is {want!r}",
    )


def check_top_level(raw: dict, top, text, *, name: str) -> None:
    """A field given at the top level of a config whose text config is read instead must agree
    with the text config (vLLM 0.33 reads get_text_config(); the top-level value is ignored). Not refused:
    a field the config class took into its text config (a flat Qwen2.5-VL config.json:
    Qwen2_5_VLConfig.__post_init__ pops it from the top-level keys, so the top config does not hold it),
    a copy of what text_config itself gives, and a sliding_window beside a text config whose window is off
    (use_sliding_window false: transformers 4.57 saved a flat Qwen2.5-VL config as text_config, its window
    nulled, beside the flat keys it came from, and vLLM plans that exactly as the flat form)."""
    held = vars(top)
    given = raw.get("text_config") if isinstance(raw.get("text_config"), dict) else {}
    for key in TEXT_FIELDS:
        if key not in raw or raw[key] is None or key not in held or given.get(key) == raw[key]:
            continue
        if key == "sliding_window" and getattr(text, "use_sliding_window", True) is False:
            continue
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
