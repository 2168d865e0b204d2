"""The config-class rules kvviz's table reader mirrors (kvviz/families/hf_fast_rules.py RULES), checked
against transformers' own classes beyond the shipped configs: for each mirrored model_type and a set of
JSON variations that move the fields each rule reads, every field a reader may look at is what
transformers' class gives, and a JSON the class refuses is never read from the table."""

from __future__ import annotations

import math
import warnings

import pytest

from kvviz.families import hf_fast
from kvviz.families.hf_fast_rules import RULES

transformers = pytest.importorskip("transformers")

MISSING = "<missing>"
# kvviz reads these its own way (scripts/hf_config_table.py HANDLED), or they are other configs / class machinery
SKIP = {
    "rope_parameters",
    "rope_scaling",
    "dtype",
    "torch_dtype",
    "transformers_version",
    "model_type",
    "text_config",
    "vision_config",
    "audio_config",
    "attribute_map",
    "sub_configs",
    "is_heterogeneous",
    "per_layer_config",
}
NEMOTRON = [
    {"hybrid_override_pattern": "M*M-E"},
    {"hybrid_override_pattern": "MM*", "num_hidden_layers": 10},
    {"layers_block_type": ["mamba", "attention", "mlp"]},
    {"layer_types": ["moe", "attention"]},
    {"mamba_n_groups": 4, "mamba_d_conv": 3, "mamba_expand": 3, "n_groups": 2},
    {"num_key_value_heads": None},
    {"num_nextn_predict_layers": 1, "mtp_hybrid_override_pattern": "*E"},
    {"mtp_layers_block_type": ["attention", "mlp"]},
    {"hybrid_override_pattern": "MX"},
    {"layers_block_type": ["bad"]},
]
VARIATIONS = {
    "nemotron_h": NEMOTRON,
    "jamba": [
        {"attn_layer_period": 4, "attn_layer_offset": 1, "num_hidden_layers": 9},
        {"mamba_dt_rank": "auto", "hidden_size": 100},
        {"mamba_dt_rank": 7},
        {"num_key_value_heads": None},
        {"attn_layer_offset": 9},
        {"layer_types": ["mamba"]},
    ],
    "mamba": [{"expand": 3, "hidden_size": 64}, {"intermediate_size": 100}, {"num_hidden_layers": 3}],
    "falcon_mamba": [{"expand": 3, "hidden_size": 64}, {"intermediate_size": 100}, {"num_hidden_layers": 3}],
    "mamba2": [{"num_hidden_layers": 5}, {"num_heads": 7}, {"hidden_size": 1024, "num_heads": 32}],
    "falcon_h1": [
        {"mamba_d_ssm": None, "mamba_expand": 2, "hidden_size": 512, "mamba_n_heads": 8},
        {"mamba_d_head": 8, "mamba_n_heads": 128},
        {"mamba_d_head": 7},
        {"mamba_d_head": "auto", "mamba_d_ssm": 2048},
        {"num_key_value_heads": None, "num_attention_heads": 8},
        {"num_hidden_layers": 3},
        {"layer_types": ["hybrid"]},
    ],
    "granitemoehybrid": [
        {"layer_types": ["mamba", "attention"], "num_hidden_layers": 2},
        {"hidden_size": 1024, "mamba_n_heads": 64},
        {"mamba_n_heads": 3},
        {"mamba_d_head": 64},
        {"num_key_value_heads": 4},
    ],
    "zamba2": [
        {"intermediate_size": 100},
        {"head_dim": 32},
        {"use_long_context": True, "max_position_embeddings": 8192},
        {"layers_block_type": ["mamba", "hybrid"], "num_hidden_layers": 2},
        {"mamba_headdim": 16},
        {"hidden_size": 1024, "num_attention_heads": 16, "n_mamba_heads": 4},
        {"attention_head_dim": 48, "num_key_value_heads": 8},
    ],
    "deepseek_v2": [
        {"head_dim": 99},
        {"qk_rope_head_dim": 32},
        {"num_key_value_heads": None},
        {"hidden_size": 1000, "num_attention_heads": 3},
    ],
    "deepseek_v32": [
        {"first_k_dense_replace": 2, "num_hidden_layers": 5},
        {"first_k_dense_replace": 9, "num_hidden_layers": 5},
        {"qk_rope_head_dim": 32, "head_dim": 128},
        {"layer_types": ["deepseek_sparse_attention"] * 3, "num_hidden_layers": 3},
    ],
    "glm_moe_dsa": [
        {"first_k_dense_replace": 2, "num_hidden_layers": 5},
        {"qk_rope_head_dim": 32, "head_dim": 128},
        {"layer_types": ["deepseek_sparse_attention"] * 3, "num_hidden_layers": 3},
    ],
    "mimo_v2_flash": [
        {"num_hidden_layers": 13},
        {"sliding_window_size": 128, "sliding_window": 128},
        {"rope_parameters": {"rope_type": "default", "rope_theta": 1e6}},
        {"layer_types": ["full_attention"] * 2, "num_hidden_layers": 2},
    ],
    "dbrx": [
        {"attn_config": {"kv_n_heads": 8}, "num_key_value_heads": 2},
        {"attn_config": {}},
        {"tie_word_embeddings": True},
        {"attn_config": {"kv_n_heads": 2, "rope_theta": 5e5, "clip_qkv": 8}},
    ],
    "hrm_text": [
        {"num_hidden_layers": 4, "H_cycles": 3, "L_cycles": 1},
        {"num_hidden_layers": 128, "num_layers_per_stack": 16},
    ],
    "minicpm3": [
        {"head_dim": 5},
        {"v_head_dim": None, "hidden_size": 512},
        {"qk_rope_head_dim": 16},
        {"num_key_value_heads": None},
    ],
    "hy_v4": [{"num_key_value_heads": 4}, {"num_hidden_layers": 3}, {"head_dim": 3, "qk_rope_head_dim": 32}],
    "hy_v3": [
        {"num_hidden_layers": 3},
        {"num_hidden_layers": 1},
        {"mlp_layer_types": ["sparse"] * 2, "num_hidden_layers": 2},
    ],
    "llama4_text": [
        {"no_rope_layers": [1, 0, 1], "num_hidden_layers": 3},
        {"attention_chunk_size": None},
        {"head_dim": None},
        {"no_rope_layer_interval": 2},
        {"no_rope_layers": []},
        {"num_key_value_heads": None},
        {"layer_types": ["full_attention"] * 2, "num_hidden_layers": 2},
    ],
    "falcon": [
        {"n_embed": 128, "num_attention_heads": 8},
        {"num_kv_heads": 2},
        {"head_dim": 5},
        {"num_attention_heads": 8},
    ],
    "longcat_flash": [
        {"num_hidden_layers": 6},
        {"num_layers": 4},
        {"num_hidden_layers": 7},
        {"num_key_value_heads": None},
    ],
    "qwen3_next": [{"full_attention_interval": 2, "num_hidden_layers": 6}],
    "qwen3_5_text": [
        {"full_attention_interval": 2, "num_hidden_layers": 6},
        {"layer_types": ["full_attention"] * 2, "num_hidden_layers": 2},
    ],
    "qwen3_5_moe_text": [{"full_attention_interval": 3, "num_hidden_layers": 6}],
    "gemma3_text": [{"sliding_window_pattern": 3, "num_hidden_layers": 7}],
    "phi3": [
        {"rope_scaling": {"type": "longrope", "short_factor": [1.0] * 48, "long_factor": [1.0] * 48}},
        {"rope_parameters": {"rope_type": "linear", "factor": 2.0}},
        {"hidden_size": 3073},
    ],
    "phimoe": [{"rope_scaling": {"rope_type": "default"}}, {"rope_parameters": {"rope_type": "linear", "factor": 2.0}}],
}
CASES = [(mt, v) for mt, vs in VARIATIONS.items() for v in [{}, *vs]]


def _plain(value):
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    return value


def test_every_rule_has_variations():
    assert set(RULES) <= set(VARIATIONS)


@pytest.mark.parametrize("model_type, variation", CASES, ids=[f"{mt}-{i}" for i, (mt, _) in enumerate(CASES)])
def test_rule_gives_transformers_fields(model_type, variation):
    from transformers import CONFIG_MAPPING
    from transformers.utils import logging

    raw = {"model_type": model_type, **variation}
    refused = None
    verbosity = logging.get_verbosity()
    logging.set_verbosity_error()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = CONFIG_MAPPING[model_type].from_dict(dict(raw))
    except Exception as e:  # noqa: BLE001 - the class refuses this JSON
        refused = e
    finally:
        logging.set_verbosity(verbosity)
    fast = hf_fast.fast_read(dict(raw))
    if refused is not None:
        assert fast is None, f"transformers refuses ({refused!r}) but the table reads it"
        return
    if not variation:
        assert fast is not None, "the class defaults alone must take the table"
    if fast is None:
        return
    top = fast[0]
    for key in sorted(hf_fast.read_keys() - SKIP):
        ours = getattr(top, key, MISSING)
        try:
            theirs = getattr(config, key)
        except AttributeError:
            theirs = MISSING
        if callable(theirs) or hasattr(theirs, "to_dict") or (ours == MISSING and theirs is None):
            continue
        assert _plain(ours) == _plain(theirs), key
