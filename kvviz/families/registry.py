"""Model families: one reader per architecture family, registered in one table.

A family turns a config.json into a `Model` and a model plus `Options` into what each layer
registers (`core.declare`, or finished `CacheSpec`s for DeepSeek V4), and says which knobs and
planners apply. Each architecture is one record (kvviz.families.record) in its family's records;
`register` builds the one table from them (`ARCHITECTURES`, `RECORDS`), so adding an architecture is
one record and nothing above this table changes (docs/architecture.md#adding-a-model-family).

`load(name_or_path)` reads a preset name, a config.json or a folder holding one.
"""

from __future__ import annotations

import dataclasses
import functools

from kvviz.base.errors import KvvizError, require
from kvviz.base.inputs import short_repr
from kvviz.families.record import TRANSFORMERS_CLASS, Read, Record
from kvviz.options import Options


@dataclasses.dataclass(frozen=True)
class Model:
    """A model as its family read it: its name, architecture, the dtype and max_model_len vLLM
    resolves for it, and the family's own parsed config (`config`)."""

    name: str
    family: str  # key of FAMILIES
    architecture: str
    model_type: str
    dtype: str  # resolved model dtype as an element name: 'bf16', 'fp16' or 'fp32'
    max_model_len: int  # what vLLM derives when --max-model-len is not given
    config: object
    max_model_len_source: str = ""
    # what kvviz read otherwise than the JSON literally says, as vLLM does (kvviz.families.hf.config_notes)
    notes: tuple[str, ...] = ()
    # What it was read from, for what the config says beyond the caches (kvviz.deploy sizes the weights from it):
    # the config.json as parsed, and the folder holding it (a checkpoint's safetensors index there gives the exact
    # weights). Set by kvviz.families.loader; not part of what the model is (compare=False).
    raw_config: dict | None = dataclasses.field(default=None, compare=False, repr=False)
    config_dir: str | None = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def reader(self) -> "Family":
        """The Family that read this model (and answers every question about it)."""
        return FAMILIES[self.family]

    def describe(self) -> str:
        """The model in one line (its family's `describe`), then each note on how its config was read."""
        return "".join([self.reader.describe(self), *(f"; note: {n}" for n in self.notes)])


# The family methods that take a model (each refuses another family's model in one line) ...
MODEL_METHODS = (
    "caches",
    "describe",
    "knobs_for",
    "comparisons",
    "compare_notes",
    "with_full_layers",
    "with_layer_mix",
    "full_layer_count",
    "kind_counts",
    "mixes_full_layers",
    "config_for",
    "state_parts",
    "resolved_ssm_dtype",
    "attention_free",
    "encoder_decoder",
)
# ... and those whose next argument is an Options record.
OPTIONS_METHODS = ("caches", "comparisons", "compare_notes", "config_for", "state_parts")


def check_call(family: "Family", name: str, model, options=None, *, takes_options: bool = False) -> None:
    """The check every family method of MODEL_METHODS makes first: `model` is a Model of this family
    (and `options` an Options record where the method takes one); else one line saying what to call."""
    if not isinstance(model, Model) or model.family != family.key:
        what = (
            f"{model.name}, a {FAMILIES[model.family].title} model"
            if isinstance(model, Model) and model.family in FAMILIES
            else type(model).__name__
        )
        raise KvvizError(
            f"{family.key}.{name}: {what}, is not of this family ({family.title}); call "
            f"model.reader.{name}(model, ...) or kvviz.plan(model)"
        )
    if takes_options:
        require(
            isinstance(options, Options),
            f"{family.key}.{name}: options={short_repr(options)}: give a "
            f"kvviz.Options(...) (kvviz.Options() for the engine's defaults)",
        )


def model_method(method):
    """Marks a family method of MODEL_METHODS: it runs `check_call` on its arguments before its body."""
    name = method.__name__.lstrip("_")
    takes_options = name in OPTIONS_METHODS

    @functools.wraps(method)
    def checked(self, model, *args, **kwargs):
        options = args[0] if args else kwargs.get("options")
        check_call(self, name, model, options, takes_options=takes_options)
        return method(self, model, *args, **kwargs)

    return checked


class Family:
    """The interface every family implements (subclasses override what they need)."""

    key: str = ""
    title: str = ""
    knobs: tuple[str, ...] = ()  # Options fields that may apply (knobs_for narrows per model)
    planners: tuple[str, ...] = ("vllm", "packed", "separate")
    default_planner: str = "vllm"
    block_outermost: bool = False  # vLLM resolves a block-outermost layout (packed groups)

    def read(self, raw: dict, *, name: str, record: Record) -> Model:
        """The `Model` of a parsed config.json (`raw`), named `name`, read by the rules of its architecture's
        `record` (one of this family's); a bad or missing field is one line naming it."""
        raise NotImplementedError

    @model_method
    def knobs_for(self, model: Model) -> tuple[str, ...]:
        """The Options fields that apply to `model` (base: the family's `knobs`); any other given knob is refused."""
        return self.knobs

    @model_method
    def caches(self, model: Model, options: Options) -> tuple:
        """What each layer of `model` registers under `options`, in vLLM's registration order: declared caches
        (kvviz.core.declare, paged by kvviz.vllm.pages) or CacheSpecs already paged (DeepSeek V4)."""
        raise NotImplementedError

    @model_method
    def attention_free(self, model: Model) -> bool:
        """Whether vLLM's model class is attention-free (interfaces.py IsAttentionFree: Mamba, Mamba2):
        vLLM then turns prefix caching off by default (config/model.py ModelConfig.is_prefix_caching_supported).
        Base: no."""
        return False

    @model_method
    def encoder_decoder(self, model: Model) -> bool:
        """vLLM's ModelConfig.is_encoder_decoder (the config's is_encoder_decoder, or its text config's): the
        scheduler then runs without chunked prefill (config/scheduler.py SchedulerConfig.__post_init__). Base: no."""
        return False

    @model_method
    def describe(self, model: Model) -> str:
        """One line saying what the model is, as `kvviz models` prints it (base: name and architecture)."""
        return f"{model.name}: {model.architecture}"

    @model_method
    def comparisons(self, model: Model, options: Options) -> tuple[tuple[str, str, Options], ...]:
        """What `kvviz compare` puts side by side: (label, planner, options) per column; by
        default every planner of the family with the same knobs."""
        return tuple((p, p, options) for p in self.planners)

    @model_method
    def compare_notes(self, model: Model, options: Options, plans, budget: int) -> dict:
        """Lines (and JSON members) `kvviz compare` adds under its table for this family."""
        return {
            "lines": (
                "vllm: vLLM 0.33 (pages unified, groups overlaid from byte 0); packed: state pages unpadded "
                "inside the block (vLLM does not do this for these models); separate: one pool per cache "
                "kind (docs/hybrid.md#separate-pools)",
            )
        }


FAMILIES: dict[str, Family] = {}
# HF architecture (architectures[0]) or model_type -> family key, and -> its record: the one table, built by
# `register` from the records (each name in one record only)
ARCHITECTURES: dict[str, str] = {}
RECORDS: dict[str, Record] = {}


def register(family: Family, records: tuple[Record, ...]) -> Family:
    """Register `family` and the architectures of `records` (each record's names and model types); returns
    the family. A name given by two records is refused (one record per architecture)."""
    FAMILIES[family.key] = family
    for record in records:
        if record.family != family.key:
            raise ValueError(f"{record.name}: a {record.family} record registered by family {family.key}")
        for n in (*record.names, *record.model_types):
            if n in RECORDS and RECORDS[n] is not record:
                raise ValueError(f"{n}: named by two records ({RECORDS[n].name}, {record.name})")
            ARCHITECTURES[n] = family.key
            RECORDS[n] = record
    return family


def record_of(raw: dict) -> Record | None:
    """The record of a parsed config.json: of its first architecture kvviz knows, else of its model_type."""
    archs = raw.get("architectures") if isinstance(raw.get("architectures"), list) else []
    for key in [*archs, raw.get("model_type")]:
        if isinstance(key, str) and key in RECORDS:
            return RECORDS[key]
    return None


def read_of(model_type, read: Read | None = None) -> Read:
    """The config class a config of `model_type` is read through: `read` (an architecture's) where it names a
    class of its own for that model type, else the one of the record naming the model type (a MiMo-V2 config
    under MiMoV2FlashForCausalLM is read as MiMoV2ForCausalLM's), else transformers' class of the model type."""
    if read is not None and read is not TRANSFORMERS_CLASS and read.applies(model_type):
        return read
    record = RECORDS.get(model_type) if isinstance(model_type, str) else None
    if record is not None and record.config.applies(model_type):
        return record.config
    return TRANSFORMERS_CLASS
