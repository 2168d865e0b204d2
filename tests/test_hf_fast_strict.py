"""The table reader (kvviz/families/hf_fast.py) never accepts a config.json that transformers' own
class refuses: transformers 5.24.0's config classes are `@strict` dataclasses (huggingface_hub's
dataclasses.strict), whose field type checks and class validators (validate_architecture, ...)
refuse what vLLM 0.33 (which loads configs through transformers) then cannot load. Each case
reads a config through the table and through transformers (hf.fast_read off) and asserts the same
answer: the same Model, or the same one-line refusal."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvviz.base.errors import KvvizError
from kvviz.families import hf, hf_fast, preset_names, preset_raw
from kvviz.families.loader import model_from_dict

ROOT = Path(__file__).resolve().parent.parent


def _raw_of(model_type: str) -> dict:
    """A shipped or test config whose model_type is `model_type` (a preset first)."""
    for name in preset_names():
        raw = preset_raw(name)
        if raw.get("model_type") == model_type:
            return copy.deepcopy(raw)
    for path in sorted((ROOT / "tests" / "data").rglob("config.json")):
        raw = json.loads(path.read_text())
        if raw.get("model_type") == model_type and "auto_map" not in raw:
            return raw
    raise LookupError(model_type)


def _both(raw: dict, monkeypatch, name: str = "m"):
    """(through the table, through transformers): a Model or 'refused: <the one line>'."""

    def read(use_table: bool):
        if not use_table:
            monkeypatch.setattr(hf, "fast_read", lambda raw: None)
        try:
            return model_from_dict(copy.deepcopy(raw), name=name)
        except KvvizError as e:
            return f"refused: {e}"
        finally:
            monkeypatch.undo()

    return read(True), read(False)


def _text(raw: dict) -> dict:
    return raw["text_config"] if isinstance(raw.get("text_config"), dict) else raw


ARCH_TYPES = ("llama", "mistral", "gemma3", "phi3", "qwen3_next", "gpt_oss")


@pytest.mark.parametrize("model_type", ARCH_TYPES)
def test_hidden_size_not_a_multiple_of_heads(model_type, monkeypatch):
    """LlamaConfig / Gemma3TextConfig.validate_architecture: `hidden_size % num_attention_heads != 0`
    raises; MistralConfig's does not check it: either way the table says what transformers says."""
    raw = _raw_of(model_type)
    text = _text(raw)
    text["hidden_size"] = text.get("hidden_size", 4096) + 1
    fast, slow = _both(raw, monkeypatch)
    assert fast == slow
    if model_type in ("llama", "gemma3"):
        assert isinstance(slow, str) and "not a multiple of the number of attention heads" in slow, slow


@pytest.mark.parametrize("model_type", ARCH_TYPES)
@pytest.mark.parametrize("value", ["32", 32.5, 32.0, True, None, [32]])
def test_num_hidden_layers_of_another_type(model_type, value, monkeypatch):
    """huggingface_hub's strict type check: `num_hidden_layers: int` refuses a str, a float (32.0
    too), a bool, a null, a list."""
    raw = _raw_of(model_type)
    _text(raw)["num_hidden_layers"] = value
    fast, slow = _both(raw, monkeypatch)
    assert fast == slow
    assert isinstance(slow, str) and slow.startswith("refused"), slow


@pytest.mark.parametrize(
    "key, value",
    [
        ("rms_norm_eps", 1),  # `float` refuses an int
        ("rms_norm_eps", "1e-5"),
        ("initializer_range", 2.0),  # interval(min=0.0, max=1.0)
        ("initializer_range", -0.5),
        ("max_position_embeddings", 1e4),
        ("vocab_size", None),
        ("hidden_act", 3),
        ("tie_word_embeddings", 1),
        ("eos_token_id", [1, "2"]),
        ("eos_token_id", [1, 2]),  # `int | list[int] | None`: accepted
        ("attention_dropout", 0),  # `int | float | None`: accepted
        ("head_dim", None),
        ("num_key_value_heads", 5),  # 32 heads, 5 KV heads: LlamaConfig does not check it
        ("rope_parameters", [1]),
    ],
)
def test_llama_field_types(key, value, monkeypatch):
    raw = _raw_of("llama")
    raw[key] = value
    fast, slow = _both(raw, monkeypatch)
    assert fast == slow


def test_valid_configs_still_take_the_table():
    """The strict mirror falls back only where transformers could refuse: the shipped presets that
    took the table still do."""
    for name in ("llama-3.1-8b", "mistral-7b-v0.1", "gemma-3-27b", "qwen3-next-80b-a3b", "gpt-oss-120b"):
        assert hf_fast.fast_read(preset_raw(name)) is not None, name


# The readable fields of the source configs a mutation may change, and the values it may give them:
# other types (str, float, bool, null, list, dict) and off-by-one sizes that break a class's invariants.
_SOURCES = ("llama", "mistral", "gemma3", "qwen3_next", "gpt_oss", "phi3", "granitemoehybrid", "jamba", "falcon_h1")
_KEYS = (
    "hidden_size",
    "num_attention_heads",
    "num_key_value_heads",
    "num_hidden_layers",
    "head_dim",
    "intermediate_size",
    "max_position_embeddings",
    "sliding_window",
    "rms_norm_eps",
    "vocab_size",
    "tie_word_embeddings",
    "attn_layer_period",
    "mamba_n_heads",
    "mamba_d_head",
)


_VALUES = st.one_of(
    st.sampled_from(["32", "auto", None, True, False, [8], {"a": 1}, 0, -1, 1e-5, 1.0]),
    st.integers(min_value=1, max_value=9000),
    st.floats(min_value=0.5, max_value=9000, allow_nan=False, allow_infinity=False),
)


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(
    model_type=st.sampled_from(_SOURCES),
    changes=st.lists(st.tuples(st.sampled_from(_KEYS), _VALUES, st.booleans()), min_size=1, max_size=3),
)
def test_random_mutations_read_as_transformers_reads_them(model_type, changes):
    """Random changes to a source config's readable fields (a value of another type, or an int off by
    one from the source's): through the table, the same Model or the same refusal as through transformers."""
    raw = _raw_of(model_type)
    text = _text(raw)
    for key, value, nudge in changes:
        if nudge and isinstance(text.get(key), int) and not isinstance(text.get(key), bool):
            text[key] = text[key] + 1
        else:
            text[key] = value
    mp = pytest.MonkeyPatch()
    try:
        fast, slow = _both(raw, mp)
    finally:
        mp.undo()
    assert fast == slow, (changes, fast, slow)
