"""Reading a Hugging Face config.json the way vLLM 0.33 does: through transformers' config classes
(which fill in each architecture's defaults and derived fields such as `layer_types`), its text
config for multimodal models, and vLLM's resolutions of the dtype and max_model_len
(vllm/config/model.py). Nothing is downloaded: the JSON is handed to the config class directly
(`from_dict`, the last step of `AutoConfig.from_pretrained`).

transformers imports torch (seconds), so it is imported inside `_transformers_config`, only when
a config is parsed; `kvviz models` and everything else stay light.
"""

from __future__ import annotations

import types

from kvviz.base.errors import KvvizError, require
from kvviz.base.inputs import MAX_DIM, MAX_LAYERS, bounded_int, short_repr
from kvviz.base.quiet import quiet_library

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
# vllm/config/model.py _FLOAT16_NOT_SUPPORTED_MODELS: a float16 checkpoint of these is served in bf16.
FLOAT16_NOT_SUPPORTED = ("gemma2", "gemma3", "gemma3_text", "glm4")
# transformers_utils/model_arch_config_convertor.py derive_max_model_len_and_key: the keys read.
MAX_LEN_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)
# rope types whose factor does not multiply the derived length (same function).
_ROPE_NOT_SCALED = ("su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling")
# _get_and_verify_max_len: no key found -> 2048.
DEFAULT_MAX_MODEL_LEN = 2048


def _transformers_config(raw: dict, *, name: str, known_kinds: tuple[str, ...] | None = None):
    """The transformers config object for a parsed config.json (no download)."""
    model_type = raw.get("model_type")
    require(isinstance(model_type, str), f"{name}: config is missing field 'model_type'")
    # Heavy import (transformers pulls in torch); only reached when an HF config is parsed.
    try:
        from transformers import CONFIG_MAPPING
    except ImportError:  # e.g. a GPU box with torch alone: DeepSeek V4 and --groups still work
        raise KvvizError(
            f"{name}: reading a hybrid model's config needs transformers, which is not "
            f"importable here (pip install transformers)"
        ) from None

    if model_type not in CONFIG_MAPPING:
        raise KvvizError(
            f"{name}: model_type {model_type!r}: unknown to transformers; kvviz cannot read this architecture"
        )
    for where, part in (("", raw), ("text_config.", raw.get("text_config"))):
        kinds = part.get("layer_types") if isinstance(part, dict) else None
        if isinstance(kinds, list) and known_kinds is not None:  # name an unknown kind before transformers' own error
            for i, kind in enumerate(kinds):
                if kind not in known_kinds:
                    raise KvvizError(
                        f"{name}: {where}layer_types[{i}]={short_repr(kind)}: unknown layer kind; "
                        f"kvviz knows {', '.join(known_kinds)}"
                    )
    check_text_config(raw, CONFIG_MAPPING[model_type], name=name)
    try:
        return CONFIG_MAPPING[model_type].from_dict(raw)
    except Exception as e:  # noqa: BLE001 - any rejection by transformers becomes one line
        cause = e.__cause__ or e
        lines = [line.strip() for line in str(cause).splitlines() if line.strip()]
        raise KvvizError(
            f"{name}: transformers rejects the {model_type} config: {lines[0] if lines else type(cause).__name__}"
        ) from None


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
# Fields a multimodal model's text config holds; the same field at the top level is not read.
TEXT_FIELDS = ("num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim", "sliding_window")


def _parts(raw: dict):
    return (("", raw), ("text_config.", raw.get("text_config")))


def bound_layers(raw: dict, *, name: str) -> None:
    """Bound num_hidden_layers, the layer periods and the head counts before transformers builds
    per-layer lists from them or divides by them (each refusal names its field)."""
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


def read_config(raw: dict, *, name: str, known_kinds: tuple[str, ...] | None = None):
    """(top-level config, text config) as vLLM sees them: transformers' config classes where
    transformers knows the model_type; a plain namespace of the JSON (and its text_config) where
    it does not (vLLM ships its own config class then, e.g. kimi_k2, which reads the same fields)."""
    require(isinstance(raw, dict), f"{name}: config must be a JSON object")
    bound_layers(raw, name=name)
    model_type = raw.get("model_type")
    require(isinstance(model_type, str), f"{name}: config is missing field 'model_type'")
    if model_type in _NATIVE_ONLY:
        top = _namespace(raw)
        text = _namespace(raw["text_config"]) if isinstance(raw.get("text_config"), dict) else top
    else:
        with quiet_library():  # transformers' warnings: kvviz says what is wrong, in one line
            top = _transformers_config(raw, name=name, known_kinds=known_kinds)
        text = top.get_text_config()
    if text is not top:
        check_top_level(raw, text, name=name)
    return top, text


def _namespace(raw: dict):
    return types.SimpleNamespace(**{k: v for k, v in raw.items() if isinstance(k, str) and k.isidentifier()})


# model_types vLLM reads with a config class of its own (vllm/transformers_utils/configs/): read
# from the JSON as it is.
_NATIVE_ONLY = ("kimi_k2", "kimi_linear")


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


def resolve_dtype(top, text, raw: dict, *, name: str) -> str:
    """vLLM's dtype 'auto' (config/model.py _resolve_auto_dtype on CUDA sm>=80): the checkpoint's
    dtype (the root config's first, then the text config's); float32 is served as bf16, float16
    as fp16 except for the models that refuse it (bf16), no dtype at all as bf16 (float32 ->
    bf16)."""
    with quiet_library():  # transformers warns on reading its deprecated torch_dtype
        dtype = (
            getattr(top, "dtype", None)
            or getattr(top, "torch_dtype", None)
            or getattr(text, "dtype", None)
            or raw.get("torch_dtype")
            or "float32"
        )
    dtype = _DTYPES.get(str(dtype))
    require(dtype is not None, f"{name}: torch_dtype={short_repr(str(dtype))}: kvviz sizes bfloat16, float16, float32")
    if dtype == "fp32":
        return "bf16"
    if dtype == "fp16" and getattr(text, "model_type", None) in FLOAT16_NOT_SUPPORTED:
        return "bf16"
    return dtype


def _rope_dicts(text):
    rp = getattr(text, "rope_parameters", None) or getattr(text, "rope_scaling", None)
    if isinstance(rp, dict) and rp and all(isinstance(v, dict) for v in rp.values()):
        return list(rp.values())  # one per layer type
    return [rp] if isinstance(rp, dict) else []


def derive_max_model_len(text) -> tuple[int, str]:
    """vLLM's max_model_len when none is given (config/model.py _get_and_verify_max_len with
    derive_max_model_len_and_key): the smallest of the length keys the text config has
    (model_max_length overriding), times a rope scaling factor for rope types that extend it
    (none for gemma3* models); longrope models take original_max_position_embeddings."""
    found = [(getattr(text, k), k) for k in MAX_LEN_KEYS if isinstance(getattr(text, k, None), int)]
    if not found:
        return DEFAULT_MAX_MODEL_LEN, "no length field: vLLM's default"
    length, key = min(found)
    mml = getattr(text, "model_max_length", None)
    if isinstance(mml, int) and mml:
        length, key = mml, "model_max_length"
    ropes = _rope_dicts(text)
    if any(r.get("rope_type") == "longrope" for r in ropes):
        orig = getattr(text, "original_max_position_embeddings", None)
        if isinstance(orig, int):
            return orig, "original_max_position_embeddings (longrope)"
    if "gemma3" not in str(getattr(text, "model_type", "")):
        for r in ropes:
            factor = r.get("factor")
            if (
                r.get("rope_type", r.get("type")) not in _ROPE_NOT_SCALED
                and isinstance(factor, (int, float))
                and factor > 1
            ):
                return int(length * factor), f"{key} x rope factor {factor}"
    return int(length), key


def kv_heads_per_rank(total: int, tp: int, *, model: str) -> int:
    """ModelConfig.get_num_kv_heads: max(1, total // tp); vLLM refuses a TP that neither divides
    the KV heads nor is a multiple of them (QKVParallelLinear)."""
    if tp >= total:
        require(
            tp % total == 0,
            f"tensor_parallel_size={tp}: {model} has {total} KV heads; vLLM needs TP to be a "
            f"multiple of them when it exceeds them",
        )
    else:
        require(total % tp == 0, f"tensor_parallel_size={tp}: {model}'s {total} KV heads are not divisible by it")
    return max(1, total // tp)


def check_tp_heads(num_attention_heads: int | None, tp: int, *, model: str) -> None:
    """ModelConfig.verify_with_parallel_config: the attention heads must divide by TP."""
    if num_attention_heads is not None:
        require(
            num_attention_heads % tp == 0,
            f"tensor_parallel_size={tp}: {model}'s {num_attention_heads} attention "
            f"heads are not divisible by it (vLLM refuses)",
        )
