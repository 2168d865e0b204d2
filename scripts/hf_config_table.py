"""Write kvviz/families/hf_table.json (and its sha256 into kvviz/families/hf_fast.py): each
transformers config class's defaults, so kvviz reads a new config.json without importing
transformers (which imports torch: seconds, 250 MB).

For every model_type of transformers' CONFIG_MAPPING_NAMES whose config class is a dataclass: its
fields' defaults (JSON values only; a field whose default is not JSON is listed in `opaque`), its
`attribute_map` (aliases such as gpt_oss's num_experts -> num_local_experts), the model_type of its
`text_config` sub-config, and `derives`: the fields its __post_init__ sets or changes from the
defaults alone (found by building the class from its own defaults and comparing), and the integer
fields it sets whatever the JSON says (found by building it from a JSON giving one of its own). kvviz's fast
reader (kvviz/families/hf_fast.py) reads a config only when the JSON gives every derived field
itself (or kvviz derives it the same way); otherwise it asks transformers. Each entry also holds what
the class's `@strict` validation refuses (scripts/hf_config_strict.py): its fields' types and own
validators and its class validators, so that the reader leaves to transformers a JSON it could refuse.

tests/test_hf_fast.py checks the table against the installed transformers and every config kvviz
ships or tests against both readers.

    PYTHONPATH=$PWD python scripts/hf_config_table.py
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hf_config_strict import strict_entry  # noqa: E402 - the strict half of each entry, beside this script

OUT = Path(__file__).resolve().parent.parent / "kvviz" / "families" / "hf_table.json"
# Fields kvviz reads its own way whatever transformers derives (kvviz/families/hf.py): the rope
# dicts (rope_parameters or rope_scaling), the dtype (resolve_dtype), and bookkeeping fields.
HANDLED = ("rope_parameters", "rope_scaling", "dtype", "torch_dtype", "transformers_version", "model_type")


# Fields no kvviz reader looks at (labels, sub-configs of other towers, bookkeeping).
IGNORED = (
    "_name_or_path",
    "id2label",
    "label2id",
    "output_attentions",
    "vision_config",
    "audio_config",
    "text_config",
    "time_step_limit",
)


def _how(cls, model_type: str, key: str, built) -> str:
    """'absent': __post_init__ fills `key` only when the JSON leaves it out (a given value is kept);
    'always': it sets `key` whatever the JSON says (the fast reader then leaves the type to
    transformers)."""
    if isinstance(built, (list, dict, str, bool)):
        return "absent"  # layer lists and names: a given one is kept (checked per config by the tests)
    probe = (built * 2) if isinstance(built, int) and built else 8
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = cls.from_dict({"model_type": model_type, key: probe}).to_dict().get(key)
    except Exception:  # noqa: BLE001 - a value the class refuses: leave the type to transformers
        return "always"
    if got != probe:
        return "always"
    return _formula(cls, model_type, key, built) or "absent"


def _built(cls, model_type: str, extra: dict) -> dict | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return cls.from_dict({"model_type": model_type, **extra}).to_dict()
    except Exception:  # noqa: BLE001
        return None


def _formula(cls, model_type: str, key: str, built) -> str | None:
    """How an integer filled in when absent follows from other fields, when it is one of two simple
    rules confirmed by a second build with the source fields changed: 'copy:F' (the value of field F)
    or 'div' (hidden_size // num_attention_heads)."""
    if not isinstance(built, int) or isinstance(built, bool):
        return None
    base = _built(cls, model_type, {}) or {}
    h, heads = base.get("hidden_size"), base.get("num_attention_heads")
    if isinstance(h, int) and isinstance(heads, int) and heads and built == h // heads:
        again = _built(cls, model_type, {"hidden_size": 2 * h})
        if again is not None and again.get(key) == (2 * h) // heads:
            return "div"
    for f, v in base.items():
        if f != key and type(v) is int and v == built and v:
            again = _built(cls, model_type, {f: 2 * v})
            if again is not None and again.get(key) == 2 * v:
                return f"copy:{f}"
    return None


def _jsonable(value) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def _properties(cls) -> list[str]:
    """The class's own computed attributes (properties its classes define below PreTrainedConfig):
    a reader that looks at one needs transformers."""
    from transformers.configuration_utils import PreTrainedConfig

    names = set()
    for klass in cls.__mro__:
        if klass is PreTrainedConfig or not issubclass(klass, PreTrainedConfig):
            break
        names.update(k for k, v in vars(klass).items() if isinstance(v, property))
    return sorted(names)


def make_entry(cls, model_type: str) -> dict | None:
    """The table's entry of one config class (None: not a dataclass, so not tabled)."""
    if not dataclasses.is_dataclass(cls):
        return None
    fields, opaque = {}, []
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING and _jsonable(f.default):
            fields[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            value = f.default_factory()
            if _jsonable(value):
                fields[f.name] = value
            else:
                opaque.append(f.name)
        else:
            opaque.append(f.name)
    sub = (getattr(cls, "sub_configs", None) or {}).get("text_config")
    spec = (getattr(cls, "sub_configs_defaults", None) or {}).get("text_config")
    sub_type = getattr(spec, "model_type", None) or (getattr(sub, "model_type", None) if sub is not None else None)
    entry = {
        "fields": fields,
        "attribute_map": dict(getattr(cls, "attribute_map", {}) or {}),
        "text_config": sub_type or None,
        "opaque": sorted(opaque),
        "properties": _properties(cls),
        **strict_entry(cls),
    }
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            built = cls.from_dict({"model_type": model_type}).to_dict()
    except Exception:  # noqa: BLE001 - a class that cannot be built from its defaults: always transformers
        entry["derives"] = None
    else:
        derived = sorted(
            k
            for k, v in built.items()
            if k not in HANDLED and k not in IGNORED and fields.get(k, object()) != v and _jsonable(v)
        )
        entry["derives"] = {k: _how(cls, model_type, k, built[k]) for k in derived}
        entry["derives"].update(_overridden(cls, model_type, fields, entry["derives"]))
    return entry


def _overridden(cls, model_type: str, fields: dict, derived: dict) -> dict:
    """The integer fields __post_init__ sets whatever the JSON says though their default is what it
    sets from the other defaults, so that building from the defaults cannot show it (DeepseekV32Config's
    head_dim = qk_rope_head_dim, both 64; HYV4Config's num_key_value_heads = num_attention_heads):
    each such field built from a JSON value of its own (twice its default) comes back otherwise.
    They are 'always' fields (the fast reader leaves them to transformers unless it mirrors the rule)."""
    out = {}
    for key, value in fields.items():
        if key in derived or key in HANDLED or type(value) is not int:
            continue
        probe = 2 * value if value else 8
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = getattr(cls.from_dict({"model_type": model_type, key: probe}), key, None)
        except Exception:  # noqa: BLE001 - a value the class refuses says nothing of what it derives
            continue
        if got != probe:
            out[key] = "always"
    return out


def table() -> dict:
    """The table: {"transformers": version, "models": {model_type: entry}}."""
    import transformers
    from transformers.configuration_utils import ALLOWED_ATTN_LAYER_TYPES, ALLOWED_MLP_LAYER_TYPES
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING, CONFIG_MAPPING_NAMES

    models, codes = {}, {}
    for model_type in sorted(CONFIG_MAPPING_NAMES):
        try:
            cls = CONFIG_MAPPING[model_type]
        except Exception:  # noqa: BLE001 - a class transformers cannot import here is left out
            continue
        entry = make_entry(cls, model_type)
        if entry is not None:
            # each field's type code is held once, in the table's `types`; the entry names its index
            for key, code in entry["types"].items():
                entry["types"][key] = codes.setdefault(json.dumps(code), len(codes))
            models[model_type] = entry
    return {
        "transformers": transformers.__version__,
        "models": models,
        "types": [json.loads(code) for code in codes],
        "layer_types": [list(ALLOWED_ATTN_LAYER_TYPES), list(ALLOWED_MLP_LAYER_TYPES)],
    }


def main() -> int:
    """Write the table next to the readers."""
    doc = table()
    data = (json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n").encode()
    OUT.write_bytes(data)
    reader = OUT.parent / "hf_fast.py"
    line = f'TABLE_SHA256 = "{hashlib.sha256(data).hexdigest()}"'
    text = re.sub(r'^TABLE_SHA256 = ".*"$', line, reader.read_text(), flags=re.M)
    reader.write_text(text)
    print(f"{OUT}: {len(doc['models'])} model types, transformers {doc['transformers']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
