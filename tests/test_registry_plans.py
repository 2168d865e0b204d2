"""kvviz against vLLM 0.33's own plans of its registry's architectures (issue 27).

tests/data/vllm-0.33/registry/plans.json holds what vLLM 0.33.0 itself planned for 69 architectures
of `_TEXT_GENERATION_MODELS`, each built from transformers' default config (configs/<arch>/config.json;
see that folder's README). Every architecture kvviz loads must plan exactly as vLLM did: the groups
(count, block size, page size, layer names), num_blocks at 8 and 40 GiB a GPU and the capacity line;
where vLLM refused to start (a request of max_model_len tokens does not fit), kvviz's admission
estimate must exceed the budget too. Those kvviz refuses to load are listed in NOT_YET_PLANNED, so
registering an architecture must move it out of that list.

transformers-backend-plans.json holds the same for the architectures vLLM 0.33 serves through its
Transformers modeling backend (`_TRANSFORMERS_SUPPORTED_MODELS`), made by scripts/vllm_reference_plans.py
from transformers' default configs (transformers-backend/<arch>/config.json); every one must plan."""

import json
from pathlib import Path

import pytest

import kvviz
from kvviz.base.errors import KvvizError

HERE = Path(__file__).parent / "data" / "vllm-0.33" / "registry"
PLANS = json.loads((HERE / "plans.json").read_text())
CASES = PLANS["cases"]
BACKEND = json.loads((HERE / "transformers-backend-plans.json").read_text())
BACKEND_CASES = BACKEND["cases"]
MNBT = "max_num_batched_tokens=8192"

# Architectures with a vLLM plan that kvviz does not plan yet (docs/registry-work.md says why).
NOT_YET_PLANNED: frozenset[str] = frozenset()


def _load(arch: str):
    return kvviz.load(str(HERE / CASES[arch]["config_path"]))


def _planned(arch: str) -> dict:
    """The backend case of `arch`, checked to be a plan of vLLM's Transformers backend."""
    case = BACKEND_CASES[arch]
    assert case["model_class"].startswith("vllm.model_executor.models.transformers."), case["model_class"]
    return case


@pytest.mark.parametrize("arch", sorted(BACKEND_CASES))
def test_transformers_backend_plan_equals_vllm_033(arch):
    case = _planned(arch)
    _compare(kvviz.load(str(HERE / case["config_path"])), case)


def test_not_yet_planned_names_only_cases():
    assert NOT_YET_PLANNED <= set(CASES)


@pytest.mark.parametrize("arch", sorted(CASES))
def test_plan_equals_vllm_033(arch):
    case = CASES[arch]
    try:
        model = _load(arch)
    except KvvizError:
        assert arch in NOT_YET_PLANNED, f"{arch}: kvviz refuses it; list it in NOT_YET_PLANNED or plan it"
        return
    assert arch not in NOT_YET_PLANNED, f"{arch}: kvviz plans it now; take it out of NOT_YET_PLANNED"
    _compare(model, case)


def _compare(model, case: dict) -> None:
    """kvviz's plan of `model` field for field against vLLM's recorded `case`."""
    settings = case["settings"]
    assert settings["tp_world_size"] == 1 and settings["max_num_batched_tokens"] == 8192
    # vLLM's block size is its default (16) or derived by the platform (hybrid, sparse MLA): kvviz derives it too
    plan = kvviz.plan(model, max_model_len=settings["max_model_len"])
    assert plan.max_model_len == settings["max_model_len"]
    assert len(plan.groups) == case["num_groups"]
    assert plan.block_stride == case["bytes_per_block"]
    for ours, theirs in zip(plan.groups, case["groups"], strict=True):
        assert [c.name for c in ours.layers] == theirs["layer_names"]
        assert {c.tokens_per_block for c in ours.layers} == {theirs["block_size"]}
        assert sorted({c.page_bytes for c in ours.layers}) == sorted(set(theirs["page_size_bytes"]))
    for label, want in case["budgets"].items():
        budget = want["available_bytes_per_gpu"]
        cap = plan.capacity(budget)
        if "error" in want:
            assert want["error"] == "ValueError", (label, want["error_text"])
            # kv_cache_planning.py check_enough_kv_cache_memory: vLLM checks against the budget less the null
            # block's bytes (_pool_bytes_per_block), so a request needing exactly the budget is refused
            # (SeedOss at 8 GiB: 8.0 GiB needed, estimated max length 32752)
            assert cap.admission_bytes_per_request > budget - plan.block_stride, label
            continue
        line = want["capacity"][MNBT]
        assert cap.num_blocks == want["num_blocks"], label
        assert [g.blocks_per_request for g in cap.groups] == line["blocks_per_request_per_group"], label
        assert cap.kv_cache_tokens == line["gpu_kv_cache_size_tokens"], label
        assert cap.max_concurrency == pytest.approx(line["max_concurrency"], rel=1e-12), label


@pytest.mark.parametrize("label", sorted(BACKEND["failures"]))
def test_transformers_backend_failures_are_refused(label):
    """Where vLLM's Transformers backend could not build the model (HunYuan without head_dim), kvviz refuses."""
    failure = BACKEND["failures"][label]
    assert failure["error"].startswith("TypeError"), failure["error"]
    with pytest.raises(KvvizError, match="head_dim"):
        kvviz.load(str(HERE / failure["config_path"]))
