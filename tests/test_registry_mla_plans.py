"""kvviz against vLLM 0.33's own plans of MLA-family architectures of its registry (issue 27, mla).

tests/data/vllm-0.33/registry-mla/plans.json was written by scripts/vllm_reference_plans.py from the config
folders beside it (see that folder's README: which keys are the public config's and which were set by hand):
vLLM's own model class built with its real __init__ on the meta device, every layer's get_kv_cache_spec,
get_kv_cache_configs, get_kv_cache_capacity at 8 and 40 GiB a GPU. Each case is compared field for field by
tests/test_registry_plans.py's _compare, and through the CLI (`kvviz plan --hf-config DIR --json`)."""

import json
from pathlib import Path

import pytest
from real_config_cases import assert_cli_equals
from test_registry_plans import _compare

import kvviz
from kvviz.families.catalog import architecture_status

HERE = Path(__file__).parent / "data" / "vllm-0.33" / "registry-mla"
PLANS = json.loads((HERE / "plans.json").read_text())


def test_every_folder_has_a_reference():
    folders = {p.parent.name for p in HERE.glob("*/config.json")}
    assert folders == set(PLANS["cases"]) | set(PLANS["failures"])
    assert PLANS["vllm_version"] == "0.33.0"
    # the OCR wrappers ask the tokenizer for '<image>' in __init__: derived by hand (test_registry_mla_hand.py)
    assert set(PLANS["failures"]) <= {"DeepseekOCRForCausalLM", "DeepseekOCR2ForCausalLM", "UnlimitedOCRForCausalLM"}


@pytest.mark.parametrize("arch", sorted(PLANS["cases"]))
def test_plan_equals_vllm_033(arch):
    case = PLANS["cases"][arch]
    assert case["architecture"] == arch
    assert architecture_status(arch)[0] == "planned"
    model = kvviz.load(str(HERE / case["config_path"]))
    assert model.max_model_len == case["settings"]["derived_max_model_len"]
    _compare(model, case)


@pytest.mark.parametrize("arch", sorted(PLANS["cases"]))
def test_cli_json_equals_vllm_033(arch):
    assert_cli_equals(HERE / arch, {"tensor_parallel_size": 1}, PLANS["cases"][arch])


def test_longcat_registers_two_mla_caches_a_layer():
    """longcat_flash.py FlashDecoderLayer: self_attn is a ModuleList of two DeepseekV2MLAAttention
    (prefixes self_attn.0 / self_attn.1), each an MLAAttention at `<prefix>.attn`; the layer count is
    num_layers (model_arch_config_convertor.py LongCatFlashModelArchConfigConvertor)."""
    case = PLANS["cases"]["LongcatFlashForCausalLM"]
    names = case["groups"][0]["layer_names"]
    raw = json.loads((HERE / "LongcatFlashForCausalLM" / "config.json").read_text())
    assert names == [f"model.layers.{i}.self_attn.{j}.attn" for i in range(raw["num_layers"]) for j in (0, 1)]


def test_sarvam_mla_builds_mla_although_use_mla_is_false():
    """sarvam_mla is not in is_deepseek_mla's list, so ModelConfig.use_mla is False, yet sarvam.py
    SarvamMLAAttention always builds MultiHeadLatentAttentionWrapper: vLLM's own plan has MLA specs."""
    case = PLANS["cases"]["SarvamMLAForCausalLM"]
    assert case["use_mla"] is False
    assert {s["class"] for g in case["groups"] for s in g["specs"]} == {"MLAAttentionSpec"}
