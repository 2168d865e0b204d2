"""One record per architecture: what kvviz believes about an architecture of vLLM 0.33's registry, in
one place (docs/architecture.md#adding-a-model-family).

A `Record` names the architecture as vLLM's registry does (`name`, and `aliases`: other registry names
of the same class), the config model types that name it in a config whose architectures kvviz does not
know (`model_types`), the vLLM 0.33 file and class it mirrors (`vllm`), and the config class it is read
through (`config`, a `Read`). Each family subclasses it with the fields its rules read (an attention
decoder's head and KV-head rules, how its layer kinds are found, its layer names; a wrapper's text config
and prefix; ...) and keeps all its records in one place, its records module. kvviz.families.registry
builds the one table (`ARCHITECTURES`: name -> family, `RECORDS`: name -> record) from them when a
family registers; nothing else lists architectures.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, ClassVar

VLLM_VERSION = "0.33"

# how a config.json is read (Read.how)
TRANSFORMERS = "transformers"  # transformers' config class of the model_type (AutoConfig, as vLLM reads it)
JSON = "json"  # custom code (trust_remote_code): the model's own class holds the JSON's keys as they are
VLLM = "vllm"  # vLLM's own config class (vllm/transformers_utils/configs/): its defaults, then the JSON


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class Read:
    """The config class an architecture's config.json is read through: transformers' class of the config's
    model_type (or of `as_type`), the JSON as the model's own custom-code class holds it, or vLLM's own class
    (`defaults` under the JSON, then `fill`, the class's __post_init__ fill-ins). `aliases` ({field: the
    config's own key}) and `defaults` are the class's attribute_map and __init__ defaults of the fields a
    reader reads; `only` limits it to these config model types (empty: every config of the architecture)."""

    how: str = TRANSFORMERS
    cls: str = ""  # the class, cited (e.g. "transformers_utils/configs/chatglm.py ChatGLMConfig")
    as_type: str | None = None
    aliases: dict[str, str] = dataclasses.field(default_factory=dict)
    defaults: dict[str, object] = dataclasses.field(default_factory=dict)
    fill: Callable[[dict], dict] | None = None
    only: tuple[str, ...] = ()

    def applies(self, model_type) -> bool:
        """Whether this read is the one for a config of `model_type`."""
        return not self.only or model_type in self.only

    def __str__(self) -> str:
        how = {TRANSFORMERS: "transformers' class", JSON: "the JSON (custom code)", VLLM: "vLLM's own class"}[self.how]
        parts = [how + (f" of {self.as_type}" if self.as_type else "")]
        parts += [self.cls] if self.cls else []
        parts += [f"for model types {', '.join(self.only)}"] if self.only else []
        return ", ".join(parts)


TRANSFORMERS_CLASS = Read()


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class Record:
    """What kvviz believes about one architecture (the base of every family's record): its registry name
    and aliases, the model types that name it, the vLLM 0.33 source it mirrors and how its config is read;
    `lm_model_type`: the model_type its class is read with as a wrapper's language model whose text config
    names a multimodal one (qwen2_vl_text -> qwen2); `convert`: vLLM's rewrite of a config's architectures
    before it picks the class (its model_arch_config_convertor), which kvviz applies before anything else."""

    family: ClassVar[str] = ""

    name: str
    vllm: str
    aliases: tuple[str, ...] = ()
    model_types: tuple[str, ...] = ()
    config: Read = TRANSFORMERS_CLASS
    lm_model_type: str | None = None
    convert: Callable[[dict], dict] | None = None

    @property
    def names(self) -> tuple[str, ...]:
        """Every architecture name this record answers for: its registry name, then its aliases."""
        return (self.name, *self.aliases)

    def beliefs(self) -> dict[str, str]:
        """What this record says beyond its type's defaults, field by field, in words (a rule by its function's
        name): the answer to "what does kvviz believe about this architecture?"."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
            if f.name == "name" or (default is not dataclasses.MISSING and value == default):
                continue
            out[f.name] = getattr(value, "__qualname__", None) if callable(value) else str(value)
        return out

    def __str__(self) -> str:
        facts = "; ".join(f"{k}: {v}" for k, v in self.beliefs().items() if k != "vllm")
        return f"{self.name} ({self.family}), {self.mirrors}" + (f"; {facts}" if facts else "")

    @property
    def mirrors(self) -> str:
        """The vLLM source it mirrors, with the version (e.g. "vLLM 0.33 qwen2.py Qwen2Attention.__init__")."""
        return f"vLLM {VLLM_VERSION} {self.vllm}"
