"""`kvviz plan --hf-config DIR --json` and the library against vLLM 0.33's own plans of the nine released
configs of issue 27, at TP 1, TP 2 and TP 8 (bf16) and with an fp8 KV cache (TP 1).

tests/data/vllm-0.33/real-configs/plans*.json were written by scripts/vllm_reference_plans.py (see that
folder's README): vLLM 0.33.0's own model class built on the meta device in an N-rank gloo group (one
process a rank), every rank's layers' get_kv_cache_spec, get_kv_cache_configs over all ranks' specs with
8 and 40 GiB a GPU, generate_scheduler_kv_cache_config and get_kv_cache_capacity. Where vLLM refused
(heads that do not divide by the TP size), kvviz must refuse too, in one line naming the field."""

import json
from pathlib import Path

import pytest
from real_config_cases import assert_cli_equals, assert_library_equals, assert_refused_in_one_line, knobs_of

HERE = Path(__file__).parent / "data" / "vllm-0.33" / "real-configs"
REFERENCES = {
    "tp1": "plans.json",
    "tp2": "plans-tp2.json",
    "tp8": "plans-tp8.json",
    "tp1-fp8": "plans-fp8.json",
}
LOADED = {key: json.loads((HERE / name).read_text()) for key, name in REFERENCES.items()}


def _params(kind: str) -> list:
    return [pytest.param(key, name, id=f"{key}-{name}") for key, ref in LOADED.items() for name in sorted(ref[kind])]


def test_every_config_has_a_reference_at_every_setting():
    folders = {p.parent.name for p in HERE.glob("*/config.json")}
    for key, ref in LOADED.items():
        assert set(ref["cases"]) | set(ref["failures"]) == folders, key
        assert ref["vllm_version"] == "0.33.0"
    assert {k: (r["tensor_parallel_size"], r["kv_cache_dtype"]) for k, r in LOADED.items()} == {
        "tp1": (1, "auto"),
        "tp2": (2, "auto"),
        "tp8": (8, "auto"),
        "tp1-fp8": (1, "fp8"),
    }


@pytest.mark.parametrize(("key", "name"), _params("cases"))
def test_library_and_cli_json_equal_vllm(key, name):
    ref = LOADED[key]
    case = ref["cases"][name]
    assert_library_equals(HERE / case["config_path"], case, knobs_of(ref))
    assert_cli_equals(HERE / name, knobs_of(ref), case)


@pytest.mark.parametrize(("key", "name"), _params("failures"))
def test_vllm_refusals_are_kvviz_refusals(key, name):
    """vLLM's refusal (its error recorded in the reference) is kvviz's too, in one line naming the TP size."""
    failure = LOADED[key]["failures"][name]
    assert "Total number of attention heads" in failure["error"], failure["error"]
    assert_refused_in_one_line(HERE / name, knobs_of(LOADED[key]), match="tensor_parallel_size")
