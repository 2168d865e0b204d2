"""The replay under pipeline parallel (issue 38's -pp): each stage's worker sizes its own pool from its own memory
and its own layers, every worker keeps the smallest block count, and the scheduler gets worker 0's config: the
whole model's groups, that count (vLLM 0.33 get_kv_cache_configs, generate_scheduler_kv_cache_config). Checked
against vLLM's own functions run on each stage's specs and memory (tests/data/vllm-0.33/pp-replay)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import kvviz
from kvviz.base.errors import KvvizError
from kvviz.cli.main import main
from kvviz.replay.answers import answers

DATA = Path(__file__).parent / "data" / "vllm-0.33"
CONFIGS = DATA / "deploy-more"
CASES = json.loads((DATA / "pp-replay" / "cases.json").read_text())["cases"]


def _requests(n: int, prompt: int, output: int) -> list[dict]:
    return [{"id": f"r{i}", "prompt_len": prompt, "output_len": output, "arrival_step": 0} for i in range(n)]


def _plan(case: dict):
    o = case["options"]
    part = None if o["partition"] is None else tuple(int(x) for x in o["partition"].split(","))
    folder = CONFIGS / Path(case["config_path"]).parent
    return kvviz.plan(folder, pipeline_parallel_size=o["pp"], pp_layer_partition=part, max_model_len=o["max_model_len"])


def _pool(result) -> tuple:
    cfg = result.to_json()["kv_cache_config"]
    return cfg["num_blocks"], [(g["kind"], g["block_size"], g["sliding_window"]) for g in cfg["groups"]]


def _reference_pool(case: dict) -> tuple:
    sched = case["scheduler"]
    # the reference's kind names (vllm_reference_plans._kind) -> the replay's manager kinds (MLA is full attention)
    kinds = {"state": "mamba", "sliding_attention": "sliding", "full_attention": "full", "mla": "full"}
    kinds["chunked_attention"] = "chunked"
    return sched["num_blocks"], [
        (kinds.get(g["kind"], g["kind"]), g["block_size"], g["sliding_window"]) for g in sched["groups"]
    ]


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_replay_pool_is_the_schedulers_under_pipeline_parallel(name):
    """kvviz.replay with one budget a stage (vLLM's available_memory of each worker) replays on the pool vLLM's
    scheduler gets: the smallest worker's block count, the whole model's groups."""
    case = CASES[name]
    result = kvviz.replay(_plan(case), _requests(4, 100, 4), budget_bytes=tuple(case["available_memory"]))
    assert _pool(result) == _reference_pool(case)
    workers = case["workers"]
    assert case["scheduler"]["num_blocks"] == min(w["num_blocks_alone"] for w in workers)
    assert len(case["scheduler"]["groups"]) == len(case["global_groups"])


@pytest.mark.parametrize("name", sorted(n for n in CASES if CASES[n]["options"]["gpu"]))
def test_a_gpu_with_pipeline_stages_replays_each_stage_at_its_own_budget(name):
    """kvviz.replay(plan, work, gpu=...) at PP 2 (refused before): each stage's budget as `plan` derives it (the
    reference's available_memory was read from `kvviz plan --gpu -pp --json`), the pool vLLM's."""
    case = CASES[name]
    result = kvviz.replay(_plan(case), _requests(4, 100, 4), gpu=case["options"]["gpu"])
    assert _pool(result) == _reference_pool(case)
    assert result.to_json()["kv_cache_config"]["kv_budget_bytes_per_stage"] == case["available_memory"]


def test_the_cli_replays_with_pp_and_a_gpu(capsys, tmp_path):
    """`kvviz replay --gpu H100 -pp 2` (refused before in one line) replays on vLLM's scheduler pool."""
    case = CASES["llama-3.1-8b/pp=2/partition=12,20/H100"]
    work = tmp_path / "w.jsonl"
    work.write_text("".join(json.dumps(r) + "\n" for r in _requests(8, 500, 8)))
    folder = CONFIGS / Path(case["config_path"]).parent
    argv = ["replay", "--hf-config", str(folder), "--gpu", "H100", "-pp", "2", "--pp-layer-partition", "12,20"]
    code = main(argv + ["--max-model-len", "32768", "--workload", str(work), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    found = json.loads(out)
    assert found["kv_cache_config"]["num_blocks"] == case["scheduler"]["num_blocks"]
    assert found["kv_cache_config"]["kv_budget_bytes_per_stage"] == case["available_memory"]
    assert found["answers"]["finished"] == 8


def test_a_sweep_sizes_every_setting_with_each_stages_own_budget():
    """A sweep at PP 2 with one budget a stage replays each setting on the scheduler's pool (it priced every stage
    at the binding stage's budget: 10 GiB // stage 1's 20-layer blocks = 8,192 blocks where vLLM makes 13,653), so
    each row is the single replay at that setting, and its blocks vLLM's."""
    case = CASES["llama-3.1-8b/pp=2/partition=12,20/memory=10GiB,40GiB"]
    budget = tuple(case["available_memory"])
    work = _requests(100, 2000, 100)  # 210,000 tokens: 13,125 blocks of 16 at once, over 8,192 and under 13,653
    folder = CONFIGS / Path(case["config_path"]).parent
    knobs = {"pipeline_parallel_size": 2, "pp_layer_partition": (12, 20), "max_model_len": 32768}
    s = kvviz.sweep(folder, work, budget_bytes=budget, max_num_seqs=[128, 256], **knobs)
    for row, seqs in zip(s.rows, (128, 256)):
        single = answers(kvviz.replay(kvviz.plan(folder, **knobs), work, budget_bytes=budget, max_num_seqs=seqs))
        assert row.num_blocks == case["scheduler"]["num_blocks"]
        assert (row.preemptions, row.peak_running, row.finished) == (
            single.preemptions,
            single.peak_running,
            single.finished,
        )
        assert row.preemptions == 0


def test_a_gpu_sweep_with_pp_equals_the_single_replays():
    """`--sweep-gpu H100,H200 -pp 2`: each GPU's row is kvviz.replay(plan, work, gpu=G) at PP 2."""
    case = CASES["gemma-3-27b-text/pp=2/partition=22,40/H100"]
    folder = CONFIGS / Path(case["config_path"]).parent
    knobs = {"pipeline_parallel_size": 2, "pp_layer_partition": (22, 40), "max_model_len": 32768}
    work = _requests(6, 300, 5)
    s = kvviz.sweep(folder, work, gpu=["H100", "H200"], **knobs)
    assert s.rows[0].num_blocks == case["scheduler"]["num_blocks"]
    for row, gpu in zip(s.rows, ("H100", "H200")):
        single = kvviz.replay(kvviz.plan(folder, **knobs), work, gpu=gpu)
        assert row.num_blocks == single.to_json()["kv_cache_config"]["num_blocks"]
        assert row.finished == answers(single).finished == 6


@pytest.mark.parametrize("mnbt", [2048, 8192])
def test_the_window_admission_cap_takes_the_in_flight_tokens_of_pp(mnbt, monkeypatch):
    """vLLM's scheduler caps a sliding window's blocks a request at its max_in_flight_tokens, which at PP 2 with
    async scheduling is 3 batches (VllmConfig.max_concurrent_batches = PP + 1): the replay's window manager takes
    the cap vLLM's own run recorded for gpt-oss-20b at PP 2 (tests/data/vllm-0.33/deploy: 393 blocks at 2,048
    batched tokens, 1,545 at 8,192; 2 batches at PP 1 would make 265 and 1,033)."""
    from test_deploy_axes import PP_CASES, _plan

    from kvviz.replay import engine
    from kvviz.replay.kvcache import KVCacheManager

    made = []

    def keep(*args, **kwargs):
        made.append(KVCacheManager(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(engine, "KVCacheManager", keep)
    case = next(c for c in PP_CASES if c["case"] == "gpt-oss-20b/pp=2")
    want = case["plan"]["budgets"]["8GiB"]["capacity"][f"max_num_batched_tokens={mnbt}"]["blocks_per_request_per_group"]
    kvviz.replay(_plan(case, mnbt), _requests(2, 100, 2), budget_gib=8)
    caps = [(m.kind, m.cap) for m in made[0].managers]
    assert [c for (kind, c) in caps if kind == "sliding"] == [want[0]]


@pytest.mark.parametrize(
    ("budget", "words"),
    [
        ((8 << 30,), "budget_bytes: one positive integer a stage (2), got 1 values"),
        ((8 << 30, 0), "budget_bytes: one positive integer a stage (2)"),
        ((8 << 30, "8"), "budget_bytes: one positive integer a stage (2)"),
    ],
)
def test_a_wrong_budget_a_stage_is_one_line(budget, words):
    plan = kvviz.plan("llama-3.1-8b", pipeline_parallel_size=2, max_model_len=8192)
    with pytest.raises(KvvizError) as e:
        kvviz.replay(plan, _requests(1, 10, 1), budget_bytes=budget)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_a_budget_a_stage_without_stages_is_one_line():
    plan = kvviz.plan("llama-3.1-8b", max_model_len=8192)
    with pytest.raises(KvvizError, match="the plan has no pipeline stages"):
        kvviz.replay(plan, _requests(1, 10, 1), budget_bytes=(8 << 30, 8 << 30))
