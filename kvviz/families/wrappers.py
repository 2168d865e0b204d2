"""Multimodal wrappers: a vision / audio front end around a language model that another family reads
(docs/model-core.md#families). vLLM 0.33 builds the language model with
`init_vllm_registered_model(vllm_config, hf_config=<text config>, prefix=maybe_prefix(prefix,
"language_model"), architectures=[...])` (vllm/model_executor/models/utils.py), or constructs the
class itself under the same kind of prefix; the KV cache is the language model's alone.

The rule, for every wrapper record (kvviz.families.wrapper_records.WrapperRecord, each citing its model
file):

* the text config: the part of the wrapper's config its model file hands the language model
  (`text_config`, `get_text_config()`, `llm_config`, `thinker_config.text_config`, the top config),
  read through transformers' class of the wrapper's model_type as vLLM reads it (AutoConfig), or from
  the JSON where transformers does not know the wrapper (vLLM ships or loads that config class);
* the language model: the architectures override, else the text config's `architectures`, else
  transformers' causal-LM class of its model_type (config/vllm.py VllmConfig.with_hf_config); it is
  read by its own family (decoder, MLA, state), with the model_type of that class where the text
  config's own model_type is a multimodal one (qwen2_vl_text -> qwen2: the class's rules apply);
* every layer name gets the wrapper's prefix (`maybe_prefix`): `language_model.` before
  `model.layers.N.self_attn.attn`, `llm.`, `language.`, ... (`WrapperRecord.head`; `WrapperRecord.strip` where
  the wrapper builds the bare `...Model` rather than `...ForCausalLM`);
* dtype and max_model_len as vLLM resolves them for the whole model: the top config's dtype, then
  the text config's (model_arch_config_convertor.py get_torch_dtype), float16 refused by the top
  model_type (config/model.py _resolve_auto_dtype); the length from `get_text_config()`
  (ModelConfig.hf_text_config);
* the vision / audio encoder's outputs live in vLLM's encoder cache (v1/core/encoder_cache_manager.py
  EncoderCacheManager), not in the KV pool: `describe` says so.
"""

from __future__ import annotations

import dataclasses
import types

from kvviz.base.errors import KvvizError, require
from kvviz.base.inputs import short_repr
from kvviz.families import decoder, deepseek_v4, mla, state
from kvviz.families.deepseek_text import VL_V2_TEXT
from kvviz.families.hf import (
    causal_lm_of,
    derive_max_model_len,
    read_config,
    resolve_dtype,
    transformers_knows,
    vllm_own_defaults,
)
from kvviz.families.refused import refusal
from kvviz.families.registry import ARCHITECTURES, FAMILIES, RECORDS, Family, Model, check_call, model_method, register
from kvviz.families.wrapper_records import RECORDS as WRAPPER_RECORDS
from kvviz.families.wrapper_records import WrapperRecord
from kvviz.options import Options

ENCODER_NOTE = (
    "the vision/audio encoder's outputs live in vLLM's encoder cache "
    "(v1/core/encoder_cache_manager.py EncoderCacheManager), not in the KV pool"
)
INNER_FAMILIES = (decoder.DECODER, mla.MLA, state.STATE_FAMILY, deepseek_v4.DEEPSEEK_V4)


@dataclasses.dataclass(frozen=True)
class WrappedConfig:
    """A wrapper's language model (`lm`, the Model its own family read from the text config) and the
    names vLLM gives its layers: `head` + the LM's own name less `strip`. Any other attribute is the
    language model's config's (num_hidden_layers, num_key_value_heads, ...)."""

    lm: Model
    head: str
    strip: str
    source: str  # where the text config came from, e.g. "text_config"
    file: str  # the wrapper's vLLM model file
    rename: tuple[str, str] = ("", "")  # WrapperRecord.rename

    def __getattr__(self, attr: str):
        if attr.startswith("__") or attr in ("lm", "head", "strip", "source", "file", "rename"):
            raise AttributeError(attr)
        return getattr(self.lm.config, attr)

    def layer_name(self, name: str) -> str:
        """The name vLLM gives the language model's layer `name` under the wrapper (maybe_prefix). A name
        that starts with '.' is one its model built as f"{prefix}.layers" from the empty prefix
        (step3_text.py Step3TextModel): under the wrapper it is `head` less its dot, then the name."""
        require(name.startswith(self.strip), f"{name}: expected under {self.strip!r} (wrapper rule)")
        if name.startswith("."):
            out = self.head.removesuffix(".") + name
        else:
            out = self.head + name[len(self.strip) :]
        return out.replace(*self.rename) if self.rename[0] else out


def _renamed(cache, config: WrappedConfig):
    return dataclasses.replace(cache, name=config.layer_name(cache.name))


class WrappedFamily(Family):
    """A language model of family `inner` under a multimodal wrapper: every question is the inner
    family's, asked of the language model; the layer names carry the wrapper's prefix."""

    def __init__(self, inner: Family):
        self.inner = inner
        self.key = f"multimodal_{inner.key}"
        self.title = f"{inner.title} under a multimodal wrapper"
        self.knobs = inner.knobs
        self.planners = inner.planners
        self.default_planner = inner.default_planner
        self.block_outermost = inner.block_outermost

    def __getattr__(self, attr: str):
        """The inner family's other model methods (with_full_layers, state_parts, ...), asked of the
        language model; a Model they return is wrapped again. Absent where the inner family has none."""
        if attr == "inner" or attr.startswith("__"):
            raise AttributeError(attr)
        method = getattr(self.inner, attr)
        if not callable(method):
            return method

        def on_lm(model, *args, **kwargs):
            check_call(self, attr, model)
            out = method(model.config.lm, *args, **kwargs)
            return wrap(model, out) if isinstance(out, Model) else out

        return on_lm

    def read(self, raw: dict, *, name: str, record) -> Model:
        """Not used: a wrapper's config is read by `WrapperReader` (the architecture's record)."""
        return WRAPPER_READER.read(raw, name=name, record=record)

    @model_method
    def knobs_for(self, model: Model) -> tuple[str, ...]:
        return self.inner.knobs_for(model.config.lm)

    @model_method
    def caches(self, model: Model, options: Options) -> tuple:
        return tuple(_renamed(c, model.config) for c in self.inner.caches(model.config.lm, options))

    @model_method
    def describe(self, model: Model) -> str:
        c: WrappedConfig = model.config
        text = self.inner.describe(c.lm)
        return (
            f"{model.name} ({model.architecture}): language model {text.removeprefix(f'{c.lm.name} ')}; "
            f"read from {c.source}, layers under {c.head or '(no prefix)'} (vLLM {c.file}); {ENCODER_NOTE}"
        )

    @model_method
    def comparisons(self, model: Model, options: Options):
        return self.inner.comparisons(model.config.lm, options)

    @model_method
    def compare_notes(self, model: Model, options: Options, plans, budget: int) -> dict:
        return self.inner.compare_notes(model.config.lm, options, plans, budget)


def wrap(model: Model, lm: Model) -> Model:
    """`model` (a wrapped Model) holding language model `lm` instead (the layer-mix knobs)."""
    return dataclasses.replace(model, name=lm.name, config=dataclasses.replace(model.config, lm=lm))


def _plain(value):
    """A namespace of a config kvviz read as JSON (custom code, vLLM's own class) as the dict transformers'
    to_dict() gives: nested parts (text_config) as dicts, so the language model's reader sees the same JSON
    either way."""
    if isinstance(value, types.SimpleNamespace):
        return {k: _plain(v) for k, v in vars(value).items()}
    return value


def _top_and_text(raw: dict, entry: WrapperRecord, *, name: str):
    """(top config, vLLM's get_text_config(), the config the language model is built from) of the wrapper."""
    if transformers_knows(raw.get("model_type")):
        top, hf_text = read_config(raw, name=name)
        sub = top
        for part in entry.source_path:
            sub = getattr(sub, part, None)
            require(sub is not None, f"{name}: config has no {entry.source} (vLLM {entry.vllm})")
        if entry.source == "get_text_config()":
            sub = hf_text
        return top, hf_text, sub.to_dict() if hasattr(sub, "to_dict") else _plain(sub)
    # vLLM ships (or loads with trust_remote_code) the config class: the JSON's own parts
    sub = raw
    if entry.source == "get_text_config()":
        sub = raw.get("text_config") or raw.get("llm_config") or raw
    for part in entry.source_path:
        sub = sub.get(part) if isinstance(sub, dict) else None
        if sub is None and entry.rule is not None:
            sub = {}  # the config class's own default (its rule: UltravoxConfig, MossAudioConfig, ...)
        require(isinstance(sub, dict), f"{name}: config has no {entry.source} object (vLLM {entry.vllm})")
    sub = vllm_own_defaults(sub)  # vLLM's own text config class fills what the JSON leaves out
    top = types.SimpleNamespace(**{k: v for k, v in raw.items() if isinstance(k, str) and k.isidentifier()})
    text = types.SimpleNamespace(**{k: v for k, v in sub.items() if isinstance(k, str) and k.isidentifier()})
    return top, text, dict(sub)


def _model_type_of(arch: str, text_type, family: Family) -> str | None:
    """The model_type the language model is read with: the text config's when its family reads it,
    else the one of the class (its record's lm_model_type), else the text config's."""
    if isinstance(text_type, str) and ARCHITECTURES.get(text_type) == family.key:
        return text_type
    record = RECORDS.get(arch)
    if record is not None and record.lm_model_type is not None:
        return record.lm_model_type
    return text_type if isinstance(text_type, str) else None


class WrapperReader(Family):
    """Reads a multimodal wrapper's config.json into a Model of its language model's family under the
    wrapper (`multimodal_<family>`); registered for every wrapper record whose language model kvviz plans."""

    key = "multimodal"
    title = "multimodal wrapper: its language model's family, under the wrapper's prefix"

    def read(self, raw: dict, *, name: str, record: WrapperRecord) -> Model:
        require(isinstance(raw, dict), f"{name}: config must be a JSON object")
        archs = raw.get("architectures") or []
        arch = next((a for a in archs if a in record.names), record.name)
        entry = record
        top, hf_text, text = _top_and_text(raw, entry, name=name)
        chosen = None
        if entry.rule is not None:  # the model file's rewrite of the config or choice of class (wrapper_rules)
            text, hf_text, chosen = entry.rule(raw, text, hf_text, name=name)
        lm_arch = chosen or entry.lm or next(iter(text.get("architectures") or []), None)
        if lm_arch is None:
            lm_arch = causal_lm_of(text.get("model_type"))
        require(
            lm_arch is not None,
            f"{name}: {entry.source} names no architectures and its model_type "
            f"{short_repr(text.get('model_type'))} no causal LM (vLLM VllmConfig.with_hf_config)",
        )
        lm_record = RECORDS.get(lm_arch)
        family = FAMILIES.get(lm_record.family) if lm_record is not None else None
        if family not in INNER_FAMILIES:
            raise KvvizError(
                f"{name}: {arch} builds language model {lm_arch} from {entry.source}: an architecture kvviz "
                f"does not plan: {refusal(lm_arch)}"
            )
        inner_raw = dict(text, architectures=[lm_arch])
        if family is deepseek_v4.DEEPSEEK_V4:  # vl_model.py hands over the whole config, which the V4 family reads
            inner_raw = dict(raw, architectures=[lm_arch])
        model_type = _model_type_of(lm_arch, text.get("model_type"), family)
        if entry.source == "language_config" and family is mla.MLA:
            # transformers_utils/configs/deepseek_vl2.py DeepseekVLV2Config: DeepseekVLV2TextConfig(**language_config)
            # (the DeepSeek-OCR wrappers; MOSS-Audio's language_config is a Qwen3Config, its rule's)
            model_type = VL_V2_TEXT
        if model_type is not None:
            inner_raw["model_type"] = model_type
        lm = family.read(inner_raw, name=name, record=lm_record)
        dtype_of = types.SimpleNamespace(
            dtype=getattr(hf_text, "dtype", None) or getattr(hf_text, "torch_dtype", None),
            model_type=raw.get("model_type"),
        )
        dtype = resolve_dtype(top, dtype_of, raw, name=name)
        length, source = derive_max_model_len(hf_text) if hf_text is not None else (lm.max_model_len, "")
        lm = dataclasses.replace(lm, dtype=dtype, max_model_len=length, max_model_len_source=source)
        config = WrappedConfig(
            lm=lm, head=entry.head, strip=entry.strip, source=entry.source, file=entry.vllm, rename=entry.rename
        )
        return Model(
            name=name,
            family=WRAPPED[family.key].key,
            architecture=arch,
            model_type=str(raw.get("model_type")),
            dtype=dtype,
            max_model_len=length,
            config=config,
            max_model_len_source=source,
        )


WRAPPED = {f.key: register(WrappedFamily(f), ()) for f in INNER_FAMILIES}


def planned_wrappers() -> tuple[WrapperRecord, ...]:
    """The wrappers kvviz plans: every wrapper record whose language model is the text config's own or an
    architecture a family reads (the others stay refused in REFUSED)."""
    return tuple(r for r in WRAPPER_RECORDS if r.lm is None or r.lm in ARCHITECTURES)


WRAPPER_READER = register(WrapperReader(), planned_wrappers())
