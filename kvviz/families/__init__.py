"""Model families: one reader per architecture family, registered in one table.

A family turns a config.json into a `Model` and a model plus `Options` into what each layer
registers (`core.declare`, or finished `CacheSpec`s for DeepSeek V4), and says which knobs and
planners apply. Adding an architecture is one entry in `ARCHITECTURES` (and, for a new family,
one module); nothing above this table changes (docs/model-core.md#families).

* `registry`: `Model`, `Family`, `FAMILIES`, `ARCHITECTURES`, `register`, the call check;
* `loader`: `load(name_or_path)` (a preset name, a config.json or a folder holding one), presets;
* one module per family: `decoder`, `mla`, `state` (+ `state_config`, `state_shapes`),
  `deepseek_v4` (+ `deepseek_v4_config`); `hf` reads config.json, `parsed` keeps what was read.
"""

from kvviz.families.loader import (
    PRESETS_DIR,
    config_json_path,
    config_name,
    family_of,
    load,
    load_path,
    load_preset,
    model_from_dict,
    preset_names,
    preset_raw,
    preset_summary,
)
from kvviz.families.registry import (
    ARCHITECTURES,
    FAMILIES,
    MODEL_METHODS,
    OPTIONS_METHODS,
    Family,
    Model,
    check_call,
    model_method,
    register,
)

__all__ = [
    "Model",
    "Family",
    "FAMILIES",
    "ARCHITECTURES",
    "MODEL_METHODS",
    "OPTIONS_METHODS",
    "register",
    "check_call",
    "model_method",
    "family_of",
    "model_from_dict",
    "preset_names",
    "preset_raw",
    "load_preset",
    "config_json_path",
    "config_name",
    "load_path",
    "load",
    "preset_summary",
    "PRESETS_DIR",
]
