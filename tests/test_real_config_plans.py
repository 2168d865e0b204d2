"""kvviz against vLLM 0.33's own plans of released models' public configs (issue 27).

tests/data/vllm-0.33/real-configs/plans.json was written by scripts/vllm_reference_plans.py (vLLM 0.33.0's
own model class built on the meta device from each transcribed config.json beside it, each layer's
get_kv_cache_spec, get_kv_cache_configs and get_kv_cache_capacity at 8 and 40 GiB a GPU; see that
folder's README). Real configs carry what transformers' defaults do not: GLM's head_dim, EXAONE 4's
LLLG layer pattern, MiniMax-M2's fp8 quantization_config, SmolLM3's NoPE layers. Every model kvviz
plans must match vLLM field for field; the ones it does not plan yet are xfail with the reason."""

import json
from pathlib import Path

import pytest
from real_config_cases import assert_plan_equals

import kvviz

HERE = Path(__file__).parent / "data" / "vllm-0.33" / "real-configs"
PLANS = json.loads((HERE / "plans.json").read_text())
CASES = PLANS["cases"]

# vLLM's reference is recorded; kvviz's side belongs to other work (strict: planning one must remove it here).
NOT_YET: dict = {}


def _params() -> list:
    return [
        pytest.param(name, marks=[pytest.mark.xfail(reason=NOT_YET[name], strict=True)] if name in NOT_YET else [])
        for name in sorted(set(CASES) | set(NOT_YET))
    ]


def test_every_transcribed_config_has_a_reference_or_a_reason():
    folders = {p.parent.name for p in HERE.glob("*/config.json")}
    assert folders == set(CASES) | set(PLANS["failures"])
    assert set(PLANS["failures"]) <= set(NOT_YET)


@pytest.mark.parametrize("name", _params())
def test_plan_equals_vllm_033(name):
    case = CASES[name]  # a KeyError (vLLM's own run failed) is the recorded reason too
    model = kvviz.load(str(HERE / case["config_path"]))
    settings = case["settings"]
    assert settings["tp_world_size"] == 1 and settings["max_num_batched_tokens"] == 8192
    assert min(32768, model.max_model_len) == settings["max_model_len"]
    assert model.max_model_len == settings["derived_max_model_len"]
    plan = kvviz.plan(model, max_model_len=settings["max_model_len"])
    assert_plan_equals(plan, case, settings["max_model_len"])
