"""The multimodal wrappers' record (`WrapperRecord`) and what their vLLM 0.33 model files do to the config
before they build the language model:
pick its class by the config's version (MiniCPM-V, MiniCPM-o), read the text config with a class of their
own, merge it into the top config, or refuse what the file cannot build. Each rule is named by the wrapper
records that use it (kvviz.families.wrapper_records, `WrapperRecord.rule`) and cites the file
(vllm/model_executor/models/<file>) and function it mirrors:

    rule(raw, text, hf_text, *, name) -> (text dict, hf_text, the language model's class or None)
"""

from __future__ import annotations

import dataclasses
import types
from typing import Callable, ClassVar

from kvviz.base.errors import KvvizError, require
from kvviz.base.inputs import short_repr
from kvviz.families.hf import config_class, transformers_knows
from kvviz.families.record import Record


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class WrapperRecord(Record):
    """How one wrapper's model file builds its language model (see the module docstring); `rename`: a part of
    every layer name the wrapper's own modules name otherwise."""

    family: ClassVar[str] = "multimodal"

    source: str = "text_config"  # "text_config", "get_text_config()", "llm_config", "thinker_config.text_config", ...
    lm: str | None = None
    head: str = "language_model."
    strip: str = ""
    rule: Callable | None = None  # rule(raw, text, hf_text, name=...) -> (text, hf_text, lm or None)
    rename: tuple[str, str] = ("", "")

    @property
    def source_path(self) -> tuple[str, ...]:
        """The attributes walked from the top config to the text config (none for the top config and
        get_text_config())."""
        if self.source in ("get_text_config()", "top config"):
            return ()
        return tuple(self.source.split("."))


def _version(raw: dict, *, name: str, default, field_file: str) -> tuple[int, ...]:
    """The config's `version` as vLLM splits it: str(version).split(".") as integers."""
    if "version" not in raw:
        return default(raw)
    try:
        return tuple(int(x) for x in str(raw["version"]).split("."))
    except ValueError:
        raise KvvizError(f"{name}: version={short_repr(raw['version'])}: not a dotted version ({field_file})") from None


def _switch(table: dict, default, file: str):
    """A rule picking the language model's class by the config's version (MiniCPM-V, MiniCPM-o)."""

    def rule(raw, text, hf_text, *, name):
        version = _version(raw, name=name, default=default, field_file=file)
        key = version[:2] if file.startswith("minicpmo.py") else version
        require(
            key in table,
            f"{name}: version={short_repr(raw.get('version'))}: vLLM 0.33 serves versions "
            f"{', '.join('.'.join(map(str, v)) for v in sorted(table))} ({file})",
        )
        return text, hf_text, table[key]

    rule.__doc__ = f"The language model's class by the config's version ({file}: {len(table)} versions)."
    return rule


def _minicpmv_default(raw: dict) -> tuple[int, int]:
    # minicpmv.py MiniCPMV.__new__: no version: 2.0 when hidden_size == 2304 and query_num == 64, else 2.5
    return (2, 0) if raw.get("hidden_size") == 2304 and raw.get("query_num") == 64 else (2, 5)


# minicpmv.py _SUPPORT_VERSION: MiniCPMV2_0 .. MiniCPMV4_5, each init_llm's class
MINICPMV_LLM = {
    (2, 0): "MiniCPMForCausalLM",
    (2, 5): "LlamaForCausalLM",
    (2, 6): "Qwen2ForCausalLM",
    (4, 0): "LlamaForCausalLM",
    (4, 5): "Qwen3ForCausalLM",
}
# minicpmo.py _MINICPMO_SUPPORT_VERSION: MiniCPMO2_6 (MiniCPMV2_6: Qwen2), MiniCPMO4_5 (MiniCPMV4_5: Qwen3)
MINICPMO_LLM = {(2, 6): "Qwen2ForCausalLM", (4, 5): "Qwen3ForCausalLM"}


def _built(model_type: str, fields: dict):
    """transformers' config class of `model_type` built from `fields`, as the vLLM config classes do."""
    try:
        return config_class(model_type)(**{k: v for k, v in fields.items() if k != "model_type"})
    except (TypeError, ValueError) as e:
        raise KvvizError(f"{model_type} config: {str(e).splitlines()[0]}") from None


def _as_config(model_type: str, fields: dict, *, name: str, what: str):
    """(the text dict, the config object) of `fields` read as transformers' `model_type` class."""
    require(isinstance(fields, dict), f"{name}: {what}: must be a JSON object")
    cfg = _built(model_type, fields)
    return dict(cfg.to_dict(), model_type=model_type), cfg


def isaac_text(raw, text, hf_text, *, name):
    """isaac.py IsaacForConditionalGeneration: its text config read as Qwen3Config (IsaacConfig.__init__)."""
    # transformers_utils/configs/isaac.py IsaacConfig.__init__: text_config = Qwen3Config(**text_config),
    # or of the top-level fields where there is none; isaac.py builds Qwen3ForCausalLM, which reads it
    # through get_text_config() (qwen2.py Qwen2Model.__init__)
    fields = raw.get("text_config") if raw.get("text_config") is not None else text
    text, cfg = _as_config("qwen3", fields, name=name, what="text_config")
    return text, cfg, None


def no_ssm_dtype_hook(raw, text, hf_text, *, name):
    """MiniCPM-V 4.6 / 4.7 / OCR: no MODELS_CONFIG_MAP hook, so the text config's mamba_ssm_dtype is not read."""
    # config/vllm.py VllmConfig.try_verify_and_update_config runs MODELS_CONFIG_MAP[model_config.architecture], the
    # wrapper's own architecture: models/config.py has no entry for MiniCPM-V 4.6 / 4.7 / OCR, so
    # Qwen3_5ForConditionalGenerationConfig never copies the text config's mamba_ssm_dtype into
    # mamba_ssm_cache_dtype ('auto': the states keep the model dtype) though their Qwen3_5ForCausalLM reads the rest
    return {k: v for k, v in text.items() if k != "mamba_ssm_dtype"}, hf_text, None


def ultravox_text(raw, text, hf_text, *, name):
    """ultravox.py UltravoxConfig.__init__: the wrapped model's config from text_config (no text_model_id)."""
    # transformers_utils/configs/ultravox.py UltravoxConfig.__init__: with no text_model_id the wrapped
    # model's config is CONFIG_MAPPING[text_config.get("model_type", "llama")](**text_config); with one,
    # __setattr__ loads it from that checkout (get_config), which kvviz does not fetch
    other = raw.get("text_model_id")
    require(
        other is None,
        f"{name}: text_model_id={short_repr(other)}: vLLM reads the language model's config from that "
        f"checkout (ultravox.py UltravoxConfig.__setattr__); give its config.json as text_config instead",
    )
    fields = raw.get("text_config") or {}
    model_type = fields.get("model_type", "llama") if isinstance(fields, dict) else None
    require(isinstance(model_type, str), f"{name}: text_config.model_type={short_repr(model_type)}: must be a name")
    require(transformers_knows(model_type), f"{name}: text_config.model_type={model_type!r}: no transformers config")
    text, cfg = _as_config(model_type, fields, name=name, what="text_config")
    text["architectures"] = fields.get("architectures")
    return text, cfg.get_text_config(), None


# ovis.py Ovis.__init__: IMAGE_PAD_TOKEN_ID_MAP[get_text_config().model_type]
OVIS_TEXT_TYPES = ("gemma2", "llama", "qwen2")


def ovis_text(raw, text, hf_text, *, name):
    """ovis.py Ovis.__init__: its llm_config read as AutoConfig.for_model(llm_config['model_type'])."""
    # transformers_utils/configs/ovis.py OvisConfig.__init__: text_config =
    # AutoConfig.for_model(llm_config["model_type"], **llm_config); ovis.py Ovis.__init__ builds the
    # text config's own architectures from it
    model_type = text.get("model_type")
    require(
        model_type in OVIS_TEXT_TYPES,
        f"{name}: llm_config.model_type={short_repr(model_type)}: vLLM's Ovis serves "
        f"{', '.join(OVIS_TEXT_TYPES)} (ovis.py IMAGE_PAD_TOKEN_ID_MAP)",
    )
    out, cfg = _as_config(model_type, text, name=name, what="llm_config")
    out["architectures"] = text.get("architectures")
    return out, cfg, None


def moss_audio_text(raw, text, hf_text, *, name):
    """moss_audio.py MossAudioConfig.__init__: its language_config read as Qwen3Config."""
    # moss_audio.py MossAudioConfig.__init__: language_config = Qwen3Config(**language_config);
    # get_text_config() returns it; MossAudioModel.__init__ builds MossQwen3ForCausalLM from it
    text, cfg = _as_config("qwen3", text, name=name, what="language_config")
    return text, cfg, None


def paddleocr_vl_text(raw, text, hf_text, *, name):
    """paddleocr_vl.py PaddleOCRVLForConditionalGeneration.__init__: the text config merged into the top one."""
    # paddleocr_vl.py PaddleOCRVLForConditionalGeneration.__init__: config.update(text_config less
    # model_type, architectures, tie_word_embeddings); Ernie4_5ForCausalLM then reads the top config
    require(hf_text is not None and "text_config" in raw, f"{name}: config has no text_config (vLLM paddleocr_vl.py)")
    sub = hf_text.to_dict() if hasattr(hf_text, "to_dict") else dict(vars(hf_text))
    merged = _own_fields(text)
    merged.update({k: v for k, v in sub.items() if k not in ("model_type", "architectures", "tie_word_embeddings")})
    return merged, hf_text, None


def _own_fields(top: dict) -> dict:
    """The top config's own fields, as a language model that reads hf_config itself sees them: its nested
    text_config is not that model's (a reader asking get_text_config() of it would take that instead)."""
    return {k: v for k, v in top.items() if k != "text_config"}


def top_fields(raw, text, hf_text, *, name):
    """ernie45_vl_moe.py Ernie4_5_VLMoeForCausalLM.__init__: the top config's own fields."""
    # ernie45_vl_moe.py Ernie4_5_VLMoeForCausalLM.__init__: config = vllm_config.model_config.hf_config, whose own
    # num_hidden_layers / num_attention_heads it reads (a nested config without them stops vLLM)
    for key in ("num_hidden_layers", "num_attention_heads"):
        require(key in raw, f"{name}: config has no top-level {key} (vLLM ernie45_vl_moe.py reads hf_config.{key})")
    return _own_fields(text), hf_text, None


def molmo2_text(raw, text, hf_text, *, name):
    """molmo2.py Molmo2ForConditionalGeneration.__init__: a config without vit_config stops vLLM."""
    # molmo2.py Molmo2ForConditionalGeneration.__init__ builds its vision backbone from config.vit_config (the
    # checkpoint's own config class): without it vLLM stops there
    require("vit_config" in raw, f"{name}: config has no vit_config (vLLM molmo2.py Molmo2ForConditionalGeneration)")
    return text, hf_text, None


# transformers_utils/configs/moondream3.py Moondream3TextConfig.__init__: its own names and defaults, and the
# standard ones it sets from them (hidden_size = dim, num_key_value_heads = n_kv_heads, ...)
MOONDREAM3_TEXT = {
    "hidden_size": ("dim", 2048),
    "intermediate_size": ("ff_dim", 8192),
    "num_hidden_layers": ("n_layers", 24),
    "vocab_size": ("vocab_size", 51200),
    "max_position_embeddings": ("max_context", 4096),
    "num_attention_heads": ("n_heads", 32),
    "num_key_value_heads": ("n_kv_heads", 32),
}


def moondream3_text(raw, text, hf_text, *, name):
    """moondream3.py Moondream3ForCausalLM.__init__: Moondream3TextConfig's own names and defaults."""
    # moondream3.py Moondream3ForCausalLM.__init__: Moondream3Config(config=hf_config.config), whose text_config
    # is Moondream3TextConfig(**config["text"]); Moondream3Attention: head size dim // n_heads, n_kv_heads KV
    # heads, full attention (llama.py LlamaAttention's rule without head_dim)
    out = {std: text.get(own, default) for std, (own, default) in MOONDREAM3_TEXT.items()}
    out["model_type"] = "llama"
    return out, types.SimpleNamespace(**out), None


# minicpmv.py MiniCPMV.__new__ / minicpmo.py MiniCPMO.__new__: the class by version
minicpmv_llm = _switch(MINICPMV_LLM, _minicpmv_default, "minicpmv.py MiniCPMV.__new__")
minicpmo_llm = _switch(MINICPMO_LLM, lambda raw: (2, 6), "minicpmo.py MiniCPMO.__new__")
