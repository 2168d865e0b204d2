"""The one comparison of `kvviz replay --json` with a vLLM 0.33 scheduler reference case (the shape of
tests/data/vllm-0.33/replay/scheduler-cases.json), shared by tests/test_replay.py and
tests/test_replay_more.py: the CLI arguments a case's inputs mean (as ../shared/tools/check_replay_cases.py
builds them) and every step field, request field and total, field for field."""

from __future__ import annotations

import json
from pathlib import Path

REQUEST_FIELDS = (
    "id",
    "first_scheduled_step",
    "first_token_step",
    "finish_step",
    "finish_processed_step",
    "num_preemptions",
    "prefix_hit_tokens_at_admission",
    "admissions",
    "preempted_steps",
    "num_output_tokens",
    "finish_reason",
)
TOTAL_FIELDS = (
    "num_steps",
    "num_idle_steps",
    "total_preemptions",
    "requests_preempted",
    "prefix_cache",
    "tokens_scheduled",
    "prefill_tokens",
    "decode_tokens",
    "peak_held_blocks_per_group",
    "min_free_blocks",
    "peak_running",
    "last_finish_step",
)


def load_cases(path: Path) -> list[dict]:
    """The cases of a reference file."""
    return json.loads(path.read_text())["cases"]


def config_path(case: dict, data: Path) -> str:
    """The config.json the case's model was read from: `configs/<model>/` beside the reference."""
    return str(data / "configs" / case["inputs"]["model"] / "config.json")


def cli_args(case: dict, data: Path, workload: Path) -> list[str]:
    """`kvviz replay ... --json` for a case's inputs (every knob the reference records)."""
    inp = case["inputs"]
    argv = [
        "replay",
        "--hf-config",
        config_path(case, data),
        "--workload",
        str(workload),
        "--budget-bytes",
        str(inp["kv_budget"]),
        "--max-model-len",
        str(inp["max_model_len"]),
        "--json",
    ]
    if inp.get("tp", 1) != 1:
        argv += ["--tensor-parallel-size", str(inp["tp"])]
    if inp.get("kv_cache_dtype", "auto") != "auto":
        argv += ["--kv-cache-dtype", inp["kv_cache_dtype"]]
    if inp.get("prefix_caching") == "off":
        argv.append("--no-prefix-caching")
    if inp.get("async_scheduling") == "off":
        argv.append("--no-async-scheduling")
    if inp.get("max_num_batched_tokens", 8192) != 8192:
        argv += ["--max-num-batched-tokens", str(inp["max_num_batched_tokens"])]
    if inp.get("max_num_seqs"):
        argv += ["--max-num-seqs", str(inp["max_num_seqs"])]
    return argv


def write_workload(case: dict, path: Path) -> Path:
    """The case's workload as JSON Lines."""
    path.write_text("".join(json.dumps(r) + "\n" for r in case["workload"]))
    return path


def compare(out: dict, case: dict, unordered: tuple[str, ...] = ()) -> None:
    """Assert kvviz's replay equals vLLM's: num_blocks, every recorded step field step by step, every
    request field, the totals. A list field named in `unordered` is compared as a set of ids (a reference
    whose recorder listed it from a set)."""
    name = case["case"]
    assert out["kv_cache_config"]["num_blocks"] == case["kv_cache_config"]["num_blocks"], name
    ref, got = case["steps"], out["steps"]
    assert len(got["step"]) == len(ref["step"]), f"{name}: {len(got['step'])} steps, vLLM {len(ref['step'])}"
    for field, values in ref.items():  # every recorded step field, step by step
        for i, (a, b) in enumerate(zip(got[field], values)):
            if field in unordered:
                a, b = sorted(a), sorted(b)
            assert a == b, f"{name}: step {i} {field}: kvviz {a!r}, vLLM {b!r}"
    assert [r["id"] for r in out["requests"]] == [r["id"] for r in case["requests"]]
    for a, b in zip(out["requests"], case["requests"]):
        for field in REQUEST_FIELDS:
            assert a[field] == b[field], f"{name}: {b['id']} {field}: kvviz {a[field]!r}, vLLM {b[field]!r}"
    for field in TOTAL_FIELDS:
        assert out["totals"][field] == case["totals"][field], f"{name}: totals.{field}"
