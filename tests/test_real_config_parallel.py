"""`kvviz plan --hf-config DIR --json` and the library against vLLM 0.33's own plans of the nine released
configs of issue 27, at TP 1, TP 2 and TP 8 (bf16) and with an fp8 KV cache (TP 1).

tests/data/vllm-0.33/real-configs/plans*.json were written by scripts/vllm_reference_plans.py (see that
folder's README): vLLM 0.33.0's own model class built on the meta device in an N-rank gloo group (one
process a rank), every rank's layers' get_kv_cache_spec, get_kv_cache_configs over all ranks' specs with
8 and 40 GiB a GPU, generate_scheduler_kv_cache_config and get_kv_cache_capacity. Where vLLM refused
(heads that do not divide by the TP size), kvviz must refuse too, in one line naming the field."""

import contextlib
import io
import json
from pathlib import Path

import pytest
from real_config_cases import MNBT, assert_plan_equals, vllm_line

import kvviz
from kvviz.base.errors import KvvizError
from kvviz.cli.main import main as cli_main

HERE = Path(__file__).parent / "data" / "vllm-0.33" / "real-configs"
REFERENCES = {
    "tp1": "plans.json",
    "tp2": "plans-tp2.json",
    "tp8": "plans-tp8.json",
    "tp1-fp8": "plans-fp8.json",
}
LOADED = {key: json.loads((HERE / name).read_text()) for key, name in REFERENCES.items()}


def _knobs(ref: dict) -> dict:
    """kvviz's knobs for one reference file: its TP size and cache dtype (vLLM's --kv-cache-dtype)."""
    knobs = {"tensor_parallel_size": ref["tensor_parallel_size"]}
    if ref["kv_cache_dtype"] != "auto":
        knobs["kv_dtype"] = ref["kv_cache_dtype"]
    return knobs


def _cli(folder: Path, knobs: dict, max_model_len: int, budget: int) -> tuple[int, dict | None, str]:
    argv = ["plan", "--hf-config", str(folder), "--json", "--max-model-len", str(max_model_len)]
    argv += ["--budget-bytes", str(budget), "--tensor-parallel-size", str(knobs["tensor_parallel_size"])]
    if "kv_dtype" in knobs:
        argv += ["--kv-dtype", knobs["kv_dtype"]]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = cli_main(argv)
        except SystemExit as e:  # argparse's error(): exit 2 with one line on stderr
            rc = e.code
    return rc, (json.loads(out.getvalue()) if rc == 0 else None), err.getvalue()


def _placement_order(case: dict, theirs: dict) -> list[str] | None:
    """The order `kvviz plan --json` lists a group's layers in: their placement in the allocation, i.e. vLLM's
    KVCacheTensors of the group (v1/core/kv_cache_planning.py get_kv_cache_config_from_groups: one tensor per
    distinct spec, its layers in first-seen order). A group of one spec is one tensor of its layer_names; a
    mixed-spec group (DeepSeek V3.2's indexer K cache beside its MLA cache) needs the tensors the reference
    recorded, and without them (references made before the script recorded them) None: membership only."""
    names = theirs["layer_names"]
    if "kv_cache_tensor_layers" in case:
        return [n for layers in case["kv_cache_tensor_layers"] if set(layers) <= set(names) for n in layers]
    return names if len(theirs["specs"]) == 1 else None


def _assert_cli_layers(case: dict, ours: dict, theirs: dict) -> None:
    got = [x["name"] for x in ours["layers"]]
    want = _placement_order(case, theirs)
    assert (got if want is not None else sorted(got)) == (want or sorted(theirs["layer_names"]))


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
def test_library_equals_vllm(key, name):
    ref = LOADED[key]
    case = ref["cases"][name]
    settings = case["settings"]
    assert settings["tp_world_size"] == _knobs(ref)["tensor_parallel_size"]
    model = kvviz.load(str(HERE / case["config_path"]))
    assert model.max_model_len == settings["derived_max_model_len"]
    plan = kvviz.plan(model, max_model_len=settings["max_model_len"], **_knobs(ref))
    assert_plan_equals(plan, case, settings["max_model_len"])


@pytest.mark.parametrize(("key", "name"), _params("cases"))
def test_cli_json_equals_vllm(key, name):
    ref = LOADED[key]
    case = ref["cases"][name]
    max_len = case["settings"]["max_model_len"]
    for label, want in case["budgets"].items():
        rc, out, err = _cli(HERE / name, _knobs(ref), max_len, want["available_bytes_per_gpu"])
        assert rc == 0, err
        assert out["block_stride"] == case["bytes_per_block"], label
        assert len(out["groups"]) == case["num_groups"]
        for ours, theirs in zip(out["groups"], case["groups"], strict=True):
            _assert_cli_layers(case, ours, theirs)
            assert sorted({x["page_bytes"] for x in ours["layers"]}) == theirs["page_size_bytes"]
        assert out["tokens_per_block"] == case["groups"][0]["block_size"]
        if "error" in want:
            # vLLM's own words (kv_cache_utils._check_enough_kv_cache_memory), up to its docs link
            assert want["error_text"].removeprefix("ValueError: ").startswith(out["startup_refusal"]), label
            continue
        line = want["capacity"][MNBT]
        summary = out["summary"]
        assert "startup_refusal" not in out, label
        assert out["num_blocks"] == want["num_blocks"], label
        assert [g["blocks_per_request"] for g in summary["groups"]] == line["blocks_per_request_per_group"], label
        assert summary["blocks_per_request"] == line["blocks_per_request"], label
        assert summary["kv_cache_tokens"] == line["gpu_kv_cache_size_tokens"], label
        assert out["capacity_line"] == vllm_line(line, max_len), label


@pytest.mark.parametrize(("key", "name"), _params("failures"))
def test_vllm_refusals_are_kvviz_refusals(key, name):
    """vLLM's refusal (its error recorded in the reference) is kvviz's too: a one-line KvvizError from the
    library, exit status 2 and one line from the CLI."""
    ref = LOADED[key]
    failure = ref["failures"][name]
    assert "Total number of attention heads" in failure["error"], failure["error"]
    model = kvviz.load(str(HERE / name))
    with pytest.raises(KvvizError, match="tensor_parallel_size") as e:
        kvviz.plan(model, max_model_len=min(32768, model.max_model_len), **_knobs(ref))
    assert "\n" not in str(e.value)
    rc, out, err = _cli(HERE / name, _knobs(ref), min(32768, model.max_model_len), 8 << 30)
    assert rc == 2 and out is None
    assert len(err.strip().splitlines()) == 1, err
