"""Model families: one reader per architecture family, registered in one table.

A family turns a config.json into a `Model` and a model plus `Options` into what each layer
registers (`core.declare`, or finished `CacheSpec`s for DeepSeek V4), and says which knobs and
planners apply. Adding an architecture is one entry in `ARCHITECTURES` (and, for a new family,
one module); nothing above this table changes (docs/model-core.md#families).

`load(name_or_path)` reads a preset name, a config.json or a folder holding one.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from importlib.resources import files
from pathlib import Path

from ..errors import KvvizError, require
from ..inputs import printable, read_json, short_repr
from ..options import Options

PRESETS_DIR = files("kvviz") / "presets"  # a Traversable: `/ name`, `.read_text()`, `.iterdir()`


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

    @property
    def reader(self) -> "Family":
        """The Family that read this model (and answers every question about it)."""
        if not _GUARDED:
            _ensure_registered()
        return FAMILIES[self.family]

    def describe(self) -> str:
        """The model in one line (its family's `describe`)."""
        return self.reader.describe(self)


class Family:
    """The interface every family implements (subclasses override what they need)."""

    key: str = ""
    title: str = ""
    knobs: tuple[str, ...] = ()  # Options fields that may apply (knobs_for narrows per model)
    planners: tuple[str, ...] = ("vllm", "packed", "separate")
    default_planner: str = "vllm"
    block_outermost: bool = False  # vLLM resolves a block-outermost layout (packed groups)

    def read(self, raw: dict, *, name: str) -> Model:
        """The `Model` of a parsed config.json (`raw`), named `name`; a bad or missing field is one line naming it."""
        raise NotImplementedError

    def knobs_for(self, model: Model) -> tuple[str, ...]:
        """The Options fields that apply to `model` (base: the family's `knobs`); any other given knob is refused."""
        return self.knobs

    def caches(self, model: Model, options: Options) -> tuple:
        """What each layer of `model` registers under `options`, in vLLM's registration order: declared caches
        (kvviz.core.declare, paged by kvviz.vllm.pages) or CacheSpecs already paged (DeepSeek V4)."""
        raise NotImplementedError

    def describe(self, model: Model) -> str:
        """One line saying what the model is, as `kvviz models` prints it (base: name and architecture)."""
        return f"{model.name}: {model.architecture}"

    def comparisons(self, model: Model, options: Options) -> tuple[tuple[str, str, Options], ...]:
        """What `kvviz compare` puts side by side: (label, planner, options) per column; by
        default every planner of the family with the same knobs."""
        return tuple((p, p, options) for p in self.planners)

    def compare_notes(self, model: Model, options: Options, plans, budget: int) -> dict:
        """Lines (and JSON members) `kvviz compare` adds under its table for this family."""
        return {"lines": ("vllm: vLLM 0.33 (pages unified, groups overlaid from byte 0); packed: state pages unpadded "
                          "inside the block (vLLM does not do this for these models); separate: one pool per cache "
                          "kind (docs/hybrid.md#separate-pools)",)}


FAMILIES: dict[str, Family] = {}
# HF architecture (architectures[0]) or model_type -> family key: the one table.
ARCHITECTURES: dict[str, str] = {}


def register(family: Family, names: tuple[str, ...]) -> Family:
    """Register `family` for the architectures and model types in `names`; returns the family."""
    FAMILIES[family.key] = family
    for n in names:
        ARCHITECTURES[n] = family.key
    return family


# The family methods that take a model: each refuses another family's model in one line.
MODEL_METHODS = ("caches", "describe", "knobs_for", "comparisons", "compare_notes", "with_full_layers", "with_layer_mix",
                 "full_layer_count", "kind_counts", "mixes_full_layers", "config_for", "state_parts",
                 "resolved_ssm_dtype")
# ... and those whose next argument is an Options record.
OPTIONS_METHODS = ("caches", "comparisons", "compare_notes", "config_for", "state_parts")
_GUARDED = False


def _guard(family: Family, name: str) -> None:
    method = getattr(family, name)

    def guarded(model, *args, **kwargs):
        if not isinstance(model, Model) or model.family != family.key:
            what = f"{model.name}, a {FAMILIES[model.family].title} model" if isinstance(model, Model) else \
                type(model).__name__
            raise KvvizError(f"{family.key}.{name}: {what}, is not of this family ({family.title}); call "
                             f"model.reader.{name}(model, ...) or kvviz.plan(model)")
        if name in OPTIONS_METHODS:
            options = args[0] if args else kwargs.get("options")
            require(isinstance(options, Options), f"{family.key}.{name}: options={short_repr(options)}: give a "
                                                  f"kvviz.Options(...) (kvviz.Options() for the engine's defaults)")
        return method(model, *args, **kwargs)

    guarded.__doc__, guarded.__name__ = method.__doc__, name
    setattr(family, name, guarded)  # on the instance: the class keeps the plain method


def _ensure_registered() -> None:
    # Each family module registers itself on import (light: no transformers at import time).
    global _GUARDED
    from . import decoder, deepseek_v4, mla, state  # noqa: F401

    if not _GUARDED:
        _GUARDED = True
        for family in FAMILIES.values():
            for name in MODEL_METHODS:
                if hasattr(family, name):
                    _guard(family, name)


def family_of(raw: dict, *, name: str) -> Family:
    """The family that reads a parsed config.json: by its architecture, then its model_type."""
    _ensure_registered()
    require(isinstance(raw, dict), f"{name}: config must be a JSON object")
    archs = raw.get("architectures")
    require(archs is None or (isinstance(archs, list) and all(isinstance(a, str) and a for a in archs)),
            f"{name}: architectures={short_repr(archs)}: must be a list of class names")
    model_type = raw.get("model_type")
    for key in list(archs or []) + [model_type]:
        if isinstance(key, str) and key in ARCHITECTURES:
            return FAMILIES[ARCHITECTURES[key]]
    if not (archs or model_type):
        raise KvvizError(f"{name}: config has no architectures and no model_type")
    what = f"model_type {short_repr(model_type)}" + (f" ({', '.join(map(short_repr, archs))})" if archs else "")
    raise KvvizError(f"{name}: {what}: an architecture kvviz does not plan (vLLM 0.33 does not serve it "
                     f"natively, or kvviz has no reader for it yet); known: {', '.join(sorted(k for k in ARCHITECTURES if k[0].isupper()))}")


def model_from_dict(raw: dict, *, name: str) -> Model:
    """The Model of a parsed config.json, read by the family its architecture (else model_type) names."""
    return family_of(raw, name=name).read(raw, name=name)


def preset_names() -> list[str]:
    """The presets kvviz ships (file stems in kvviz/presets)."""
    return sorted(p.name[: -len(".json")] for p in PRESETS_DIR.iterdir() if p.name.endswith(".json"))


def preset_raw(name: str) -> dict:
    """The shipped preset's config.json as a dict; an unknown name lists the known ones."""
    names = preset_names()
    if name not in names:
        raise KvvizError(f"--model {name!r}: unknown model; known: {', '.join(names)}")
    try:
        return json.loads((PRESETS_DIR / f"{name}.json").read_text())
    except json.JSONDecodeError as e:  # a broken package, not bad user input, but still one line
        raise KvvizError(f"preset {name!r}: malformed JSON at line {e.lineno}: {e.msg}") from None


@functools.lru_cache(maxsize=None)
def load_preset(name: str) -> Model:
    """A shipped preset by name (parsed once per process; models are frozen). Its parsed form
    ships with it (kvviz.families.parsed), so no preset imports transformers."""
    from . import parsed

    raw = preset_raw(name)
    model = parsed.shipped(name, (PRESETS_DIR / f"{name}.json").read_bytes())
    return model if model is not None else model_from_dict(raw, name=name)


def _stat_error(p: Path) -> str | None:
    """Why `p` cannot be looked at (a symlink loop, a permission), or None when it can or is
    simply absent: is_file() / is_dir() would answer False for all of them alike."""
    try:
        p.stat()
    except FileNotFoundError:
        return None
    except OSError as e:
        return e.strerror or str(e)
    return None


def config_json_path(path: str | Path, *, what: str = "--hf-config") -> Path:
    """The config.json a path names: the file itself, or `config.json` inside a folder."""
    p = Path(path)
    for q in (p, p / "config.json") if p.is_dir() else (p,):
        problem = _stat_error(q)
        require(problem is None, f"{what} {printable(q)!r}: cannot read ({problem})")
    if p.is_dir():
        p = p / "config.json"
        require(p.is_file(), f"{what} {str(path)!r}: folder holds no config.json")
        return p
    require(p.is_file(), f"{what} {str(path)!r}: no such file or folder")
    return p


def config_name(p: Path) -> str:
    """A config's name: its folder's for a `config.json` (the model's checkout), else the file stem."""
    return printable(p.parent.name if p.name == "config.json" and p.parent.name else p.stem)


def load_path(path: str | Path, *, what: str = "--hf-config") -> Model:
    """A config.json (or a folder holding one): from the parsed-config cache when this file's bytes
    were parsed before with the same transformers and kvviz (kvviz.families.parsed), else parsed
    now and kept."""
    from . import parsed

    p = config_json_path(path, what=what)
    raw = read_json(p, what=what)
    name = config_name(p)
    try:
        data = p.read_bytes()
    except OSError:
        data = None
    if data is not None:
        hit = parsed.lookup(data, name)
        if isinstance(hit, Model):
            return hit
    model = model_from_dict(raw, name=name)
    if data is not None:
        parsed.store(data, name, model)
    return model


def load(name_or_path: str | Path) -> Model:
    """A preset name ('llama-3.1-8b'), a config.json, or a folder holding one -> `Model`."""
    if isinstance(name_or_path, Model):
        raise KvvizError(f"{name_or_path.name}: is already a loaded model; pass it to kvviz.plan(model) as it is")
    require(isinstance(name_or_path, (str, Path)), f"{short_repr(name_or_path)}: give a preset name "
                                                   f"(kvviz.model_names()) or a config.json / folder path")
    if isinstance(name_or_path, str) and name_or_path in preset_names():
        return load_preset(name_or_path)
    if Path(name_or_path).exists() or os.path.lexists(name_or_path):
        return load_path(name_or_path)
    raise KvvizError(f"{short_repr(name_or_path)}: neither a preset ({', '.join(preset_names())}) nor a "
                     f"config.json or folder")


def preset_summary(name: str) -> str:
    """One line about a preset for `kvviz models`: its family's description (from the preset's
    shipped parsed form: no transformers)."""
    return load_preset(name).describe()
