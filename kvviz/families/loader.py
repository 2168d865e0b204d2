"""Reading a model: a preset name, a config.json or a folder holding one -> `Model`, by the family its
architecture (else model_type) names. Importing this module registers every family (each family
module registers itself in `kvviz.families.registry` when imported)."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
from pathlib import Path

from kvviz.base.errors import KvvizError, require
from kvviz.base.files import read_json
from kvviz.base.inputs import printable, short_repr
from kvviz.families import decoder, deepseek_v4, encdec, mla, state, wrappers  # noqa: F401  (each registers its architectures)
from kvviz.families.hf import config_notes
from kvviz.families.record import Record
from kvviz.families.refused import refusal
from kvviz.families.registry import FAMILIES, Family, Model, record_of

# the presets shipped in the package (a plain folder: importlib.resources would import tempfile, zipfile
# and shutil on every command, ~10 ms of a first sight)
PRESETS_DIR = Path(__file__).resolve().parent.parent / "presets"


# transformers 5.24 configuration_utils.py: a non-finite float is saved as {"__float__": tag}
# (PreTrainedConfig._encode_special_floats) and read back by _decode_special_floats.
_FLOAT_TAG_KEY = "__float__"
_FLOAT_TAG_VALUES = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}


def decode_special_floats(obj: object) -> object:
    """A config.json's JSON as transformers reads it from a file (PreTrainedConfig._dict_from_json_file calls
    `_decode_special_floats`): an object `{"__float__": "Infinity" | "-Infinity" | "NaN"}` is that float, so a
    config transformers re-saved (`time_step_limit: [0.0, {"__float__": "Infinity"}]`) reads as the published one.
    Iterative, so a deeply nested JSON costs no recursion."""
    root = [obj]
    stack = [(root, 0)]
    while stack:
        holder, key = stack.pop()
        item = holder[key]
        if isinstance(item, dict):
            if set(item) == {_FLOAT_TAG_KEY} and isinstance(item[_FLOAT_TAG_KEY], str):
                if item[_FLOAT_TAG_KEY] in _FLOAT_TAG_VALUES:
                    holder[key] = _FLOAT_TAG_VALUES[item[_FLOAT_TAG_KEY]]
                continue
            item = holder[key] = dict(item)
            stack.extend((item, k) for k in item)
        elif isinstance(item, list):
            item = holder[key] = list(item)
            stack.extend((item, i) for i in range(len(item)))
    return root[0]


def record_for(raw: dict, *, name: str) -> Record:
    """The record of the architecture a parsed config.json names (its first architecture kvviz knows, then its
    model_type); an architecture kvviz does not plan is refused in one line naming vLLM's rule."""
    require(isinstance(raw, dict), f"{name}: config must be a JSON object")
    archs = raw.get("architectures")
    require(
        archs is None or (isinstance(archs, list) and all(isinstance(a, str) and a for a in archs)),
        f"{name}: architectures={short_repr(archs)}: must be a list of class names",
    )
    model_type = raw.get("model_type")
    record = record_of(raw)
    if record is not None:
        return record
    if not (archs or model_type):
        raise KvvizError(f"{name}: config has no architectures and no model_type")
    what = f"model_type {short_repr(model_type)}" + (f" ({', '.join(map(short_repr, archs))})" if archs else "")
    why = refusal(archs[0]) if archs else "no architectures: kvviz reads a model by its architecture"
    raise KvvizError(
        f"{name}: {what}: an architecture kvviz does not plan: {why}; `kvviz models --architectures` "
        f"lists vLLM 0.33's architectures and kvviz's status of each"
    )


def family_of(raw: dict, *, name: str) -> Family:
    """The family that reads a parsed config.json: its architecture's record's (record_for)."""
    return FAMILIES[record_for(raw, name=name).family]


def model_from_dict(raw: dict, *, name: str) -> Model:
    """The Model of a parsed config.json, read by the family of the record its architecture (else model_type)
    names, after vLLM's own rewrite of the architectures where the record has one (Record.convert: a MiMo config
    with a vision_config is MiMoV2OmniForCausalLM)."""
    record = record_for(raw, name=name)
    if record.convert is not None:
        raw = record.convert(raw)
        record = record_for(raw, name=name)
    model = FAMILIES[record.family].read(raw, name=name, record=record)
    notes = config_notes(raw)
    return dataclasses.replace(model, notes=model.notes + notes) if notes else model


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
    from kvviz.families import parsed

    raw = preset_raw(name)
    model = parsed.shipped(name, (PRESETS_DIR / f"{name}.json").read_bytes())
    return dataclasses.replace(model if model is not None else model_from_dict(raw, name=name), raw_config=raw)


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
    now and kept. The Model carries the file as parsed and its folder (`raw_config`, `config_dir`)."""
    from kvviz.families import parsed

    p = config_json_path(path, what=what)
    raw = decode_special_floats(read_json(p, what=what))  # as transformers reads the file
    name = config_name(p)
    try:
        data = p.read_bytes()
    except OSError:
        data = None
    hit = parsed.lookup(data, name) if data is not None else None
    model = hit if isinstance(hit, Model) else model_from_dict(raw, name=name)
    if data is not None and not isinstance(hit, Model):
        parsed.store(data, name, model)
    return dataclasses.replace(model, raw_config=raw, config_dir=str(p.parent))


def load(name_or_path: str | Path) -> Model:
    """A preset name ('llama-3.1-8b'), a config.json, or a folder holding one -> `Model`. A refusal of the argument
    names it (`name_or_path=...: ...`; kvviz.plan, loading one for you, says `model=`)."""
    if isinstance(name_or_path, Model):
        raise KvvizError(
            f"name_or_path={name_or_path.name}: is already a loaded model; pass it to kvviz.plan(model) as it is"
        )
    require(
        isinstance(name_or_path, (str, Path)),
        f"name_or_path={short_repr(name_or_path)}: give a preset name (kvviz.model_names()) or a config.json / "
        f"folder path",
    )
    if isinstance(name_or_path, str) and name_or_path in preset_names():
        return load_preset(name_or_path)
    if Path(name_or_path).exists() or os.path.lexists(name_or_path):
        return load_path(name_or_path)
    raise KvvizError(
        f"name_or_path={short_repr(name_or_path)}: neither a preset ({', '.join(preset_names())}) nor a config.json "
        f"or folder"
    )


def preset_summary(name: str) -> str:
    """One line about a preset for `kvviz models`: its family's description (from the preset's
    shipped parsed form: no transformers)."""
    return load_preset(name).describe()
