"""Model families: one reader per architecture family, one record per architecture, one table.

A family turns a config.json into a `Model` and a model plus `Options` into what each layer
registers (`core.declare`, or finished `CacheSpec`s for DeepSeek V4), and says which knobs and
planners apply. What kvviz believes about each architecture is one record (`record`); the table
(`ARCHITECTURES`, `RECORDS`) is built from the records, so adding an architecture is one record
(and, where its model file computes something new, one function it names); nothing above the table
changes (docs/model-core.md#one-record-per-architecture).

* `record`: `Record`, `Read` (the config class an architecture is read through);
* `registry`: `Model`, `Family`, `FAMILIES`, `ARCHITECTURES`, `RECORDS`, `register`, the call check;
* `loader`: `load(name_or_path)` (a preset name, a config.json or a folder holding one), presets;
* per family its module, its records and its rules: `decoder` (`decoder_records`,
  `transformers_backend`, `decoder_rules`, `decoder_layers`, `decoder_kinds`, `decoder_mix`), `mla`
  (`mla_records`, `deepseek_text`), `state` (`state_records`, `state_mamba`, `state_delta`,
  `state_bailing`, `state_config`, `state_shapes`), `encdec`, `deepseek_v4` (+ `deepseek_v4_config`),
  `wrappers` (`wrapper_records`, `wrapper_rules`); `hf` reads config.json through transformers'
  config classes, `parsed` keeps what was read, `catalog` renders vLLM's registry with kvviz's status.
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
from kvviz.families.record import Read, Record
from kvviz.families.registry import (
    ARCHITECTURES,
    FAMILIES,
    MODEL_METHODS,
    OPTIONS_METHODS,
    RECORDS,
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
    "RECORDS",
    "Record",
    "Read",
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
