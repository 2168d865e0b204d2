"""One comparison of a kvviz Plan with a vLLM 0.33 reference plan (scripts/vllm_reference_plans.py's case
shape), by the library and by `kvviz plan --json`, shared by the real-config, registry and published-config tests."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from kvviz.cli.main import main as cli_main

MNBT = "max_num_batched_tokens=8192"


def vllm_line(line: dict, max_model_len: int) -> str:
    """vLLM 0.33's logged line (v1/core/kv_cache_utils.py update_kv_cache_capacity)."""
    return (
        f"GPU KV cache size: {line['gpu_kv_cache_size_tokens']:,} tokens, Maximum concurrency for "
        f"{max_model_len:,} tokens per request: {line['max_concurrency']:.2f}x"
    )


def assert_plan_equals(plan, case: dict, max_model_len: int) -> None:
    """Groups (layers, block size, pages, windows), bytes per block, and at every recorded budget the
    blocks, blocks per request per group, tokens, concurrency and the capacity line, or vLLM's refusal."""
    assert len(plan.groups) == case["num_groups"]
    assert plan.block_stride == case["bytes_per_block"]
    for ours, theirs in zip(plan.groups, case["groups"], strict=True):
        assert [c.name for c in ours.layers] == theirs["layer_names"]
        assert {c.tokens_per_block for c in ours.layers} == {theirs["block_size"]}
        assert sorted({c.page_bytes for c in ours.layers}) == theirs["page_size_bytes"]
        assert {c.sliding_window for c in ours.layers} == {s.get("sliding_window") for s in theirs["specs"]}
    for label, want in case["budgets"].items():
        budget = want["available_bytes_per_gpu"]
        cap = plan.capacity(budget)
        if "error" in want:
            assert want["error"] == "ValueError", (label, want["error_text"])
            assert cap.admission_bytes_per_request > budget, label
            continue
        line = want["capacity"][MNBT]
        assert cap.num_blocks == want["num_blocks"], label
        assert [g.blocks_per_request for g in cap.groups] == line["blocks_per_request_per_group"], label
        assert cap.kv_cache_tokens == line["gpu_kv_cache_size_tokens"], label
        assert cap.max_concurrency == pytest.approx(line["max_concurrency"], rel=1e-12), label
        assert cap.line == vllm_line(line, max_model_len), label


def cli_plan(folder, knobs: dict, max_model_len: int, budget: int) -> tuple[int, dict | None, str]:
    """`kvviz plan --hf-config FOLDER --json` at one budget a GPU with `knobs` (tensor_parallel_size, kv_dtype):
    (exit status, the JSON or None, stderr)."""
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


def assert_cli_equals(folder, knobs: dict, case: dict) -> None:
    """`kvviz plan --hf-config FOLDER --json` at every budget of a reference case: the block stride, groups
    (layers in placement order, pages), tokens per block, and the blocks, blocks per request, tokens and
    vLLM's capacity line, or vLLM's own start-up refusal."""
    max_len = case["settings"]["max_model_len"]
    for label, want in case["budgets"].items():
        rc, out, err = cli_plan(folder, knobs, max_len, want["available_bytes_per_gpu"])
        assert rc == 0, err
        assert out["block_stride"] == case["bytes_per_block"], label
        assert len(out["groups"]) == case["num_groups"]
        for ours, theirs in zip(out["groups"], case["groups"], strict=True):
            _assert_cli_layers(case, ours, theirs)
            assert sorted({x["page_bytes"] for x in ours["layers"]}) == theirs["page_size_bytes"]
            assert ours["tokens_per_block"] == theirs["block_size"]
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


def knobs_of(ref: dict) -> dict:
    """kvviz's knobs for one reference file: its TP size and cache dtype (vLLM's --kv-cache-dtype)."""
    knobs = {"tensor_parallel_size": ref["tensor_parallel_size"]}
    if ref["kv_cache_dtype"] != "auto":
        knobs["kv_dtype"] = ref["kv_cache_dtype"]
    return knobs


def assert_library_equals(folder, case: dict, knobs: dict) -> None:
    """kvviz.load(FOLDER) derives vLLM's max_model_len, and kvviz.plan at the case's max_model_len and `knobs`
    equals the case (assert_plan_equals)."""
    import kvviz

    settings = case["settings"]
    assert settings["tp_world_size"] == knobs["tensor_parallel_size"]
    model = kvviz.load(str(folder))
    assert model.max_model_len == settings["derived_max_model_len"]
    assert_plan_equals(
        kvviz.plan(model, max_model_len=settings["max_model_len"], **knobs), case, settings["max_model_len"]
    )


def assert_refused_in_one_line(folder, knobs: dict, match: str | None = None) -> None:
    """vLLM's refusal of a config is kvviz's too: a one-line KvvizError from the library (matching `match`),
    exit status 2 and one line from the CLI."""
    import kvviz
    from kvviz.base.errors import KvvizError

    model = kvviz.load(str(folder))
    with pytest.raises(KvvizError, match=match) as e:
        kvviz.plan(model, max_model_len=min(32768, model.max_model_len), **knobs)
    assert "\n" not in str(e.value)
    rc, out, err = cli_plan(folder, knobs, min(32768, model.max_model_len), 8 << 30)
    assert rc == 2 and out is None
    assert len(err.strip().splitlines()) == 1, err
