"""Reading a Hugging Face config.json the way vLLM 0.33 does: through transformers' config classes
(which fill in each architecture's defaults and derived fields such as `layer_types`), its text
config for multimodal models, and vLLM's resolutions of the dtype and max_model_len
(vllm/config/model.py). Nothing is downloaded: the JSON is handed to the config class directly
(`from_dict`, the last step of `AutoConfig.from_pretrained`).

The one door to transformers is `transformers_module` (and the names built on it: `config_class`,
`transformers_knows`, `causal_lm_of`): imported only when a config is parsed for the first time
(kvviz.families.parsed keeps the result), and with torch kept out of the process. transformers
imports torch whenever it can (`is_torch_available()`, ~3 s), though its config classes need none;
in a process that has not imported torch, kvviz hides it while transformers is imported, so
transformers takes itself for a torch-less install (its configuration and tokenizer parts only, for
the rest of the process) and torch stays importable by anyone after. A process that imported torch
(or transformers) before is left as it is. The package's own `__init__`s, which index every model
file, are not run for a config (kvviz.base.package_shell; docs/model-core.md "One config path").
"""

from __future__ import annotations

import contextlib
import functools
import math
import sys
import types
from pathlib import Path

from kvviz.base.errors import KvvizError, require
from kvviz.base.inputs import finite_number, short_repr
from kvviz.base.package_shell import import_in_shell
from kvviz.base.quiet import quiet_library
from kvviz.families.hf_bounds import DTYPES, TEXT_FIELDS, bound_layers, check_text_config, check_top_level
from kvviz.families.record import JSON, VLLM, Read
from kvviz.families.registry import read_of

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


def check_kinds(raw: dict, *, name: str, known_kinds: tuple[str, ...] | None) -> None:
    """An unknown entry of layer_types is named before any reader (transformers' own error, or the
    table's reader, which would pass it on)."""
    for where, part in (("", raw), ("text_config.", raw.get("text_config"))):
        kinds = part.get("layer_types") if isinstance(part, dict) else None
        if isinstance(kinds, list) and known_kinds is not None:
            for i, kind in enumerate(kinds):
                if kind not in known_kinds:
                    raise KvvizError(
                        f"{name}: {where}layer_types[{i}]={short_repr(kind)}: unknown layer kind; "
                        f"kvviz knows {', '.join(known_kinds)}"
                    )


@contextlib.contextmanager
def _torch_kept_out():
    """Within the block `import torch` finds nothing (a None in sys.modules: importlib.util.find_spec answers
    None, so transformers' is_torch_available() is False), unless this process imported torch or transformers
    before; afterwards torch is importable again."""
    if "torch" in sys.modules or "transformers" in sys.modules:
        yield
        return
    sys.modules["torch"] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        if "torch" in sys.modules and sys.modules["torch"] is None:
            del sys.modules["torch"]


def transformers_module(name: str = "transformers.models.auto.configuration_auto"):
    """A module of transformers (by default the one holding CONFIG_MAPPING), imported with torch kept out; one
    line when transformers is not installed (a None in sys.modules for it stands for "not installed"). In a
    process that has not imported transformers, its two top packages are shells (kvviz.base.package_shell:
    their `__init__`s index every model file, which no config class needs); an import the shells cannot serve
    falls back to the plain one."""
    import importlib

    try:
        with _torch_kept_out(), quiet_library():
            if "transformers" not in sys.modules:
                with contextlib.suppress(Exception):
                    version = {"__version__": transformers_version()}
                    return import_in_shell(name, ("transformers", "transformers.models"), version)
            importlib.import_module("transformers")
            return importlib.import_module(name)
    except ImportError:  # e.g. a GPU box with torch alone: DeepSeek V4 and --groups still work
        raise KvvizError(
            "reading this model's config needs transformers, which is not importable here (pip install transformers)"
        ) from None


def transformers_knows(model_type) -> bool:
    """Whether transformers ships a config class for `model_type` (its CONFIG_MAPPING)."""
    return isinstance(model_type, str) and model_type in transformers_module().CONFIG_MAPPING


def config_class(model_type: str):
    """transformers' config class of `model_type` (CONFIG_MAPPING[model_type])."""
    return transformers_module().CONFIG_MAPPING[model_type]


def causal_lm_of(model_type) -> str | None:
    """transformers' causal-LM class name of `model_type` (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES), or None."""
    names = transformers_module("transformers.models.auto.modeling_auto").MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    return names.get(model_type)


@functools.cache
def transformers_version() -> str:
    """The installed transformers' version, read from its dist-info folder's name on sys.path (what
    importlib.metadata reads, without importing transformers); "none" when it is not installed."""
    for entry in sys.path:
        try:
            found = sorted(Path(entry or ".").glob("transformers-*.dist-info"))
        except OSError:
            continue
        if found:
            return found[0].name[len("transformers-") : -len(".dist-info")]
    return "none"


def _transformers_config(raw: dict, *, name: str):
    """The transformers config object for a parsed config.json (no download)."""
    model_type = raw.get("model_type")
    require(isinstance(model_type, str), f"{name}: config is missing field 'model_type'")
    try:
        known = transformers_knows(model_type)
    except KvvizError as e:
        raise KvvizError(f"{name}: {e}") from None
    if not known:
        raise KvvizError(
            f"{name}: model_type {short_repr(model_type)}: unknown to transformers; kvviz cannot read this architecture"
        )
    cls = config_class(model_type)
    check_text_config(raw, cls, name=name)
    try:
        with quiet_library():  # transformers' warnings: kvviz says what is wrong, in one line
            return cls.from_dict(raw)
    except Exception as e:  # noqa: BLE001 - any rejection by transformers becomes one line
        cause = e.__cause__ or e
        lines = [line.strip() for line in str(cause).splitlines() if line.strip()]
        odd = _non_finite_fields(raw)  # transformers' own message does not name the field
        raise KvvizError(
            f"{name}: transformers rejects the {model_type} config: {lines[0] if lines else type(cause).__name__}"
            + (f" (non-finite values in {', '.join(odd)})" if odd else "")
        ) from None


def _non_finite_fields(raw: dict) -> list[str]:
    """The fields of a config.json (and its text_config) holding JSON's Infinity / NaN, for
    naming them when transformers rejects one (kvviz.base.inputs reads them as floats)."""
    out = []
    for where, part in (("", raw), ("text_config.", raw.get("text_config"))):
        for key, value in part.items() if isinstance(part, dict) else ():
            if isinstance(value, float) and not math.isfinite(value):
                out.append(f"{where}{key}")
    return out


def read_config(raw: dict, *, name: str, read: Read | None = None, known_kinds: tuple[str, ...] | None = None):
    """(top-level config, text config) as vLLM sees them, read through the config class of the architecture's
    record (`read`, where it applies to the config's model_type) or of the model_type's record
    (kvviz.families.registry.read_of): transformers' class (as AutoConfig gives it to vLLM), vLLM's own class
    (its defaults under the JSON), or a plain namespace of the JSON (and its text_config) where the model is
    custom code whose own class holds the JSON's keys (with that class's aliases and defaults)."""
    require(isinstance(raw, dict), f"{name}: config must be a JSON object")
    bound_layers(raw, name=name)
    model_type = raw.get("model_type")
    require(isinstance(model_type, str), f"{name}: config is missing field 'model_type'")
    how = read_of(model_type, read)
    if how.how == JSON:
        top = _namespace(raw)
        text = _namespace(raw["text_config"]) if isinstance(raw.get("text_config"), dict) else top
        for key, value in how.defaults.items():  # the custom class's __init__ defaults, then its attribute_map
            if getattr(text, key, None) is None:
                setattr(text, key, value)
        for key, own in how.aliases.items():
            if getattr(text, own, None) is not None:
                setattr(text, key, getattr(text, own))
    elif how.how == VLLM:
        top = text = _namespace(_with_vllm_defaults(raw, how))
    else:
        check_kinds(raw, name=name, known_kinds=known_kinds)
        top = _transformers_config({**raw, "model_type": how.as_type} if how.as_type else raw, name=name)
        text = top.get_text_config()
    if text is not top:
        check_top_level(raw, top, text, name=name)
    if getattr(text, "sliding_window", None) == 0:
        # vLLM 0.33 config/model.py ModelConfig.__post_init__: "Some checkpoints set sliding_window to
        # 0 to indicate that sliding window is disabled": it becomes None, every layer full attention.
        text.sliding_window = None
    return top, text


def config_notes(raw: dict) -> tuple[str, ...]:
    """What kvviz (like vLLM 0.33) reads otherwise than the JSON literally says, in words for the output:
    a `head_dim` of 0, which the model files treat as not given (llama.py LlamaAttention:
    `head_dim or hidden_size // total_num_heads`; transformers keeps the 0), and a multimodal config with no
    text model in it (text_config missing or `{}`, no text field at the top level), whose config class builds
    its default text config, which vLLM then serves (transformers' class defaults, e.g. Gemma3Config's
    Gemma3TextConfig())."""
    notes = []
    for where, part in (("", raw), ("text_config.", raw.get("text_config"))):
        if isinstance(part, dict) and part.get("head_dim") == 0:
            notes.append(
                f"{where}head_dim 0 is read as not given: the head size is derived from the other fields, as "
                f"vLLM 0.33's model files do (head_dim or hidden_size // num_attention_heads)"
            )
    part = raw.get("text_config")
    if part in (None, {}) and not any(k in raw for k in TEXT_FIELDS) and _has_text_sub_config(raw.get("model_type")):
        notes.append(
            f"text_config {'is empty' if part == {} else 'is not given'} and no text field is at the top level: "
            f"the language model planned is the default text config of transformers' {raw['model_type']} config "
            f"class, which vLLM 0.33 (reading the config through transformers) would serve"
        )
    return tuple(notes)


def _has_text_sub_config(model_type: object) -> bool:
    """Whether transformers' config class of `model_type` holds a text_config sub-config (False where
    transformers is not installed or does not know the type)."""
    try:
        known = transformers_knows(model_type)
    except KvvizError:
        return False
    return known and "text_config" in (getattr(config_class(model_type), "sub_configs", None) or {})


def _namespace(raw: dict):
    return types.SimpleNamespace(**{k: v for k, v in raw.items() if isinstance(k, str) and k.isidentifier()})


def vllm_own_defaults(raw: dict) -> dict:
    """A (text) config.json as vLLM's own config class of its model_type fills it (a record's Read of VLLM),
    else as it is: e.g. the text_config of a step3_vl config, which Step3VLConfig makes a Step3TextConfig."""
    how = read_of(raw.get("model_type"))
    return _with_vllm_defaults(raw, how) if how.how == VLLM else raw


def _with_vllm_defaults(raw: dict, how: Read) -> dict:
    """config.json over the vLLM config class's defaults, with its __post_init__ fill-ins."""
    out = {**how.defaults, **raw}
    n = out.get("num_hidden_layers")
    if how.fill is None or not isinstance(n, int) or isinstance(n, bool):
        return out  # the family names a bad field
    return how.fill(out)


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
    dtype = DTYPES.get(str(dtype))
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
            scaled = r.get("rope_type", r.get("type")) not in _ROPE_NOT_SCALED
            if scaled and isinstance(factor, float):  # JSON's Infinity / NaN / 1e999 (vLLM: int(inf) fails)
                finite_number(factor, field="rope_parameters.factor")
            if scaled and isinstance(factor, (int, float)) and factor > 1:
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
