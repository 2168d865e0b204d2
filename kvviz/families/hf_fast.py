"""Reading a config.json without importing transformers (which imports torch: ~3 s and 250 MB on a
first sight): each config class's defaults, aliases and the fields its __post_init__ derives come
from kvviz/families/hf_table.json, generated from transformers by scripts/hf_config_table.py and
checked against the installed transformers by tests/test_hf_fast.py.

`fast_read(raw)` gives the (top, text) configs as namespaces of the class defaults overlaid with the
JSON, or None when only transformers can say what the class makes of this JSON: a model_type the
table does not hold, a field some reader looks at that the class computes (a property), or one
that __post_init__ derives and this JSON leaves out (unless it is one of the two rules the table
confirmed: a copy of another field, or hidden_size // num_attention_heads), or a field __post_init__
sets whatever the JSON says (`sliding_window` is None unless `use_sliding_window`, Qwen2/Qwen3's) --
except where kvviz mirrors the class's own rule (kvviz/families/hf_fast_rules.py RULES: Nemotron-H,
Jamba, the Mamba models, Falcon-H1, Granite-4.0-H, Zamba2, DeepSeek-V2 / V3.2, Llama 4, Qwen3.5, ...);
or a JSON the class's `@strict` validation could refuse (kvviz/families/hf_fast_strict.py: a field's
type or validator, a class validator such as validate_architecture), so that the table never accepts
what transformers refuses.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
import types
from pathlib import Path

from kvviz.families.hf_fast_rules import RULES, remap
from kvviz.families.hf_fast_strict import fields_fit, validators_pass

TABLE = Path(__file__).resolve().parent / "hf_table.json"
# sha256 of the table, written by scripts/hf_config_table.py: a table changed without this line is
# not read (and, this module being readers' code, a new table invalidates the parsed-config cache).
TABLE_SHA256 = "82a11fa4948766242fef0c5615272beb3b6ea7425840b86de28900182d02e802"


@functools.lru_cache(maxsize=1)
def transformers_version() -> str:
    """The installed transformers' version, read from its dist-info folder's name on sys.path (what
    importlib.metadata reads, without its ~50 ms import); "none" when it is not installed."""
    import sys

    for entry in sys.path:
        try:
            found = sorted(Path(entry or ".").glob("transformers-*.dist-info"))
        except OSError:
            continue
        if found:
            return found[0].name[len("transformers-") : -len(".dist-info")]
    return "none"


@functools.lru_cache(maxsize=1)
def table() -> dict:
    """The shipped table: {"transformers": version, "models": {model_type: entry}}; empty (every config
    read by transformers itself) when it was made from another transformers than the installed one,
    whose classes may default otherwise."""
    try:
        data = TABLE.read_bytes()
        if hashlib.sha256(data).hexdigest() != TABLE_SHA256:
            return {"models": {}}
        made = json.loads(data)
    except (OSError, ValueError):
        return {"models": {}}
    return made if made.get("transformers") == transformers_version() else {"models": {}}


@functools.lru_cache(maxsize=1)
def family_sources() -> tuple[tuple[str, bytes], ...]:
    """(file name, bytes) of the readers' code (kvviz/families/*.py), sorted by name: read once per
    process for both read_keys() and the parsed-config cache's readers hash."""
    return tuple((p.name, p.read_bytes()) for p in sorted(Path(__file__).resolve().parent.glob("*.py")))


@functools.lru_cache(maxsize=1)
def read_keys() -> frozenset[str]:
    """Every quoted identifier in the readers' code (kvviz/families/*.py but hf_fast_strict.py, which
    falls back rather than reads): the config fields some reader may look at (a derived field no
    reader names does not matter)."""
    words: set[str] = set()
    for file, source in family_sources():
        if file == "hf_fast_strict.py":
            continue  # the fields the strict mirror reads only decide whether to ask transformers
        for quoted in re.findall(r"""["']([A-Za-z_][A-Za-z0-9_.]*)["']""", source.decode("utf-8")):
            words.update(quoted.split("."))  # a dotted path ("thinker_config.text_config") names each part
    return frozenset(words)


# The parts of a config a multimodal class builds as other towers' configs (scripts/hf_config_table.py
# IGNORED): no reader opens them as configs (decoder_kinds reads the JSON's vision_config itself).
OTHER_TOWERS = ("vision_config", "audio_config")


def _legacy_rope(part: dict, values: dict):
    """transformers' RotaryEmbeddingConfigMixin.convert_rope_params_to_dict + standardize_rope_params
    (modeling_rope_utils.py) for a flat legacy `rope_scaling`: it becomes `rope_parameters` with its
    rope_type (or `type`), rope_theta and partial_rotary_factor, and the pretraining length for
    llama3 / yarn / longrope; None (ask transformers) for anything else (a nested or odd value)."""
    scaling = part["rope_scaling"]
    if not isinstance(scaling, dict) or any(isinstance(v, dict) for v in scaling.values()):
        return None
    rope = dict(scaling)
    rope.setdefault("rope_theta", part.get("rope_theta", values.get("rope_theta", 10_000.0)))
    if values.get("partial_rotary_factor") is not None:
        rope.setdefault("partial_rotary_factor", values["partial_rotary_factor"])
    rope.setdefault("rope_type", rope.get("type", "default"))
    if rope["rope_type"] in ("llama3", "yarn", "longrope"):
        if "original_max_position_embeddings" in values:
            rope["original_max_position_embeddings"] = values["original_max_position_embeddings"]
        else:
            rope.setdefault("original_max_position_embeddings", values.get("max_position_embeddings"))
    return rope


def _namespace(part: dict, entry: dict, model_type: str, *, sub=None):
    """The class defaults overlaid with the JSON `part`, aliases resolved both ways; None when a
    derived field a reader looks at cannot be known without transformers."""
    values = dict(entry["fields"])
    aliases = entry.get("attribute_map") or {}
    for k, v in part.items():
        if isinstance(k, str) and k.isidentifier():
            values[aliases.get(k, k)] = v
    given = {aliases.get(k, k) for k in part}
    if not fields_fit(part, entry, table().get("types") or []):
        return None  # a value huggingface_hub's strict type check or a field validator could refuse
    if part.get("rope_scaling"):  # convert_rope_params_to_dict: `rope_scaling or self.rope_parameters`
        rope = _legacy_rope(part, values)
        if rope is None:
            return None
        values["rope_parameters"] = rope
        given.add("rope_parameters")
    rule, covered = RULES.get(model_type, (None, ()))
    if rule is not None and not rule(values, part, given):
        return None  # a value the class refuses or converts: transformers says what it makes of it
    for key in ("layer_types", "mtp_layer_types"):  # PreTrainedConfig.__post_init__: remap_legacy_layer_types
        key = aliases.get(key, key)
        if isinstance(values.get(key), list) and key not in entry.get("properties", ()):
            values[key] = remap(values[key])
    wanted = read_keys()
    if any(p in wanted and p not in covered for p in entry.get("properties", ())):
        return None  # a field the class computes on every read (a property): transformers says what it is
    if any(k in wanted for k in entry.get("opaque", ())):
        return None  # a field whose default is no JSON value (an object the class builds)
    if any(
        isinstance(part.get(k), dict) and "model_type" in part[k]
        for k in given & wanted - {"text_config", *OTHER_TOWERS}
    ):
        return None  # a nested config a reader opens (Qwen2.5-Omni's thinker_config): its own class fills it
    for key in given & wanted:
        value = values.get(key)
        if isinstance(value, float) and not math.isfinite(value):
            return None  # a NaN / Infinity where a reader looks: transformers' class says what it makes of it
        per_layer = isinstance(value, dict) and value and all(isinstance(k, str) and k.isdigit() for k in value)
        if per_layer or (isinstance(value, list) and any(isinstance(v, dict) for v in value)):
            return None  # per-layer nested configs (Gemma 4's per_layer_config): the class builds objects of them
    stale = set()  # derived fields no reader looks at, left at the class default: no validator may read them
    for key, how in (entry.get("derives") or {}).items():
        if key in covered:
            continue
        if key not in wanted and not any(a in wanted for a, c in aliases.items() if c == key):
            stale.add(key)
            continue
        if how == "always":
            if key == "sliding_window" and "use_sliding_window" in values:
                values[key] = values[key] if values.get("use_sliding_window") else None
                continue
            return None
        if key in given and not (key in entry["fields"] and values.get(key) == entry["fields"][key]):
            continue  # (a field the JSON gives as its default, null say, is derived as if left out)
        if how == "div" and isinstance(values.get("hidden_size"), int) and values.get("num_attention_heads"):
            values[key] = values["hidden_size"] // values["num_attention_heads"]
        elif how.startswith("copy:") and values.get(how[5:]) is not None:
            values[key] = values[how[5:]]
        else:
            return None
    for alias, canonical in aliases.items():
        if canonical in values:
            values[alias] = values[canonical]
    if not validators_pass(values, part, entry, table().get("layer_types") or [(), ()], covered, stale):
        return None  # a class validator (validate_architecture, ...) could refuse: transformers says
    if sub is not None:
        values["text_config"] = sub
    values["model_type"] = model_type
    return types.SimpleNamespace(**values)


def fast_read(raw: dict):
    """(top, text) as transformers' config classes would give them, or None (ask transformers)."""
    models = table().get("models", {})
    entry = models.get(raw.get("model_type"))
    if entry is None or entry.get("derives") is None:
        return None
    sub_type = entry.get("text_config")
    text = None
    if sub_type is not None:
        part = raw.get("text_config")
        if not isinstance(part, dict) or part.get("model_type") not in (None, sub_type):
            return None  # transformers' reader says what is wrong (kvviz.families.hf.check_text_config)
        sub_entry = models.get(sub_type)
        if sub_entry is None or sub_entry.get("derives") is None:
            return None
        text = _namespace(part, sub_entry, sub_type)
        if text is None:
            return None
    top = _namespace(raw, entry, raw["model_type"], sub=text)
    if top is None:
        return None
    return top, (text if text is not None else top)
