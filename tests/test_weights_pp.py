"""The weights of each pipeline stage and each rank (issue 37 item 2):
docs/deploy.md#the-weights-of-each-pipeline-stage. A stage holds its own decoder layers (get_pp_indices) and the
modules its model file builds there (kvviz/vllm/stage_modules.py), each stage's GPU has its own KV budget, and the
stage that makes the fewest blocks binds. The totals are derived here by hand from the config's shapes (as
tests/test_weights.py derives the whole model's); tests/test_weights_pp_vllm.py holds the per-stage counts equal to
vLLM's own model construction."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvviz
from kvviz.base.errors import KvvizError
from kvviz.cli.main import main
from kvviz.deploy.budget import kv_budget
from kvviz.deploy.stage_weights import expert_range, expert_share, stage_weights
from kvviz.vllm import pipeline
from kvviz.vllm.stage_modules import EVERY, FIRST, FIRST_OR_TIED_LAST, LAST, STAGE_MODULES, UNREAD, stage_modules

OWN = Path(__file__).parent / "data" / "own-configs"
H100 = ["--gpu", "H100", "--gpu-memory-utilization", "0.9"]


def raw(name: str) -> dict:
    return json.loads((OWN / name / "config.json").read_text())


def plan_json(capsys, name: str, *flags: str) -> dict:
    assert main(["plan", "--hf-config", str(OWN / name), *H100, *flags, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def qwen3_30b_parts():
    """Qwen3-30B-A3B's parameters by hand (as tests/test_weights.py): one layer, the embedding, the head, and the
    part of a layer vLLM keeps whole on every TP rank (q_norm, k_norm, the router, the two norms)."""
    h, n, hq, hkv, d, e, i_moe, vocab = 2048, 48, 32, 4, 128, 128, 768, 151936
    whole = 2 * d + h * e + 2 * h
    layer = h * hq * d + 2 * h * hkv * d + hq * d * h + e * 3 * h * i_moe + whole
    return n, layer, vocab * h, h, whole  # 151,936 is a multiple of 64: no padding


def test_qwen3_30b_pp2_holds_half_the_layers_and_every_outer_module_on_each_gpu(capsys):
    """The symptom: PP 2 was charged the whole model on each GPU (6.08x against TP 2's 21.25x; 21.24x now that TP's
    whole norms and routers are counted). qwen3_moe.py builds embed_tokens, norm and lm_head on every stage, so a
    PP 2 GPU holds 24 layers + embedding + head + norm, and TP 2's holds half of everything: the two differ by half
    the embedding and head (and half a norm)."""
    n, layer, vocab_h, h, whole = qwen3_30b_parts()
    pp, tp = plan_json(capsys, "qwen3-30b-a3b", "-pp", "2"), plan_json(capsys, "qwen3-30b-a3b", "-tp", "2")
    tp_rank = n * ((layer - whole) // 2 + whole) + vocab_h + h  # sharded / 2, the rest whole
    assert tp["kv_budget"]["terms"][2]["bytes"] == 2 * tp_rank  # bf16
    stages = pp["kv_budget"]["stages"]
    assert [s["weights_bytes_per_gpu"] for s in stages] == [2 * ((n // 2) * layer + 2 * vocab_h + h)] * 2
    assert all(s["embedding"] and s["final_norm"] and s["lm_head"] for s in stages)
    diff = stages[0]["weights_bytes_per_gpu"] - tp["kv_budget"]["terms"][2]["bytes"]
    assert diff == 2 * (vocab_h - (n // 2) * whole)  # the embedding and head, less TP's whole norms and routers
    assert pp["summary"]["max_concurrency"] > 0.98 * tp["summary"]["max_concurrency"]  # 20.94x against 21.24x


def test_llama_3_3_70b_fits_at_pp2_as_at_tp2(capsys):
    """The symptom: Llama-3.3-70B at PP 2 was refused ('No available memory') while TP 2 fit. llama.py builds the
    embedding on the first stage and the norm and head on the last: each stage holds 40 layers and one vocabulary
    matrix, as TP 2's GPU holds half of 80 layers and both matrices."""
    h, n, hq, hkv, d, inter, vocab = 8192, 80, 64, 8, 128, 28672, 128256
    layer = h * hq * d + 2 * h * hkv * d + hq * d * h + 3 * h * inter + 2 * h  # the two norms whole at TP 2
    flags = ("--max-model-len", "16384")  # vLLM starts neither at the default 131,072 on an H100 (TP 2 says so too)
    pp, tp = (
        plan_json(capsys, "llama-3.3-70b", "-pp", "2", *flags),
        plan_json(capsys, "llama-3.3-70b", "-tp", "2", *flags),
    )
    stages = pp["kv_budget"]["stages"]
    assert [s["weights_bytes_per_gpu"] for s in stages] == [
        2 * (40 * layer + vocab * h),
        2 * (40 * layer + vocab * h + h),
    ]
    assert [(s["embedding"], s["final_norm"], s["lm_head"]) for s in stages] == [
        (True, False, False),
        (False, True, True),
    ]
    assert tp["kv_budget"]["terms"][2]["bytes"] == 2 * (n * ((layer - 2 * h) // 2 + 2 * h) + vocab * h + h)
    # TP 2 keeps the 160 norms whole on each GPU, PP 2 holds each once: PP's GPUs have n x h bf16 elements more
    assert pp["kv_budget"]["available_bytes"] - tp["kv_budget"]["available_bytes"] == 2 * n * h
    assert pp["summary"]["num_blocks"] >= tp["summary"]["num_blocks"] > 0 and "startup_refusal" not in pp


def test_each_stage_has_its_own_budget_and_the_fewest_blocks_bind(capsys):
    """get_kv_cache_configs takes each worker's own available memory and keeps the smallest block count: with the
    layers split 4,20,8 the middle stage has the most layers a block and binds, named in the output."""
    assert main(["plan", "--model", "llama-3.1-8b", "--gpu", "H100", "-pp", "3", "--pp-layer-partition", "4,20,8"]) == 0
    line = capsys.readouterr().out.splitlines()[-1]
    assert line.startswith("stages: ") and line.count("(binds)") == 1 and "1: layers 4-23" in line.split("(binds)")[0]
    plan = kvviz.plan("llama-3.1-8b", pipeline_parallel_size=3, pp_layer_partition=(4, 20, 8))
    b = kv_budget(plan, gpu="H100")
    assert len(b.budget) == 3 and b.stages[0].weights.embedding and b.stages[2].weights.head
    cap = plan.capacity(gpu="H100")
    stride = plan.stages[1].bytes_per_block
    assert cap.num_blocks == min(a // s.bytes_per_block for a, s in zip(b.budget, plan.stages)) == b.budget[1] // stride
    assert plan.capacity(b.budget).num_blocks == cap.num_blocks == plan.capacity(b).num_blocks


def test_a_plan_of_stages_takes_its_pp_and_refuses_another():
    plan = kvviz.plan("llama-3.1-8b", pipeline_parallel_size=2)
    with pytest.raises(KvvizError, match="pipeline_parallel_size=4: the plan was made with pipeline_parallel_size=2"):
        kv_budget(plan, gpu="H100", pipeline_parallel_size=4)
    one = kv_budget(kvviz.load("llama-3.1-8b"), gpu="H100")
    with pytest.raises(KvvizError, match="a KVBudget of pipeline_parallel_size=1 for a plan of 2 stages"):
        plan.capacity(one)
    with pytest.raises(KvvizError, match="one positive integer a stage"):
        plan.capacity((10**9,))


def test_tied_heads_by_file():
    """llama.py builds the embedding on the last stage too when the config ties it (the head is that tensor);
    qwen3_moe.py builds all three everywhere; deepseek_v2.py never ties; gemma2.py's logits use the embedding."""
    llama = stage_modules("vllm/model_executor/models/llama.py")
    assert [llama.built(s, 3, True) for s in range(3)] == [
        (True, False, False),
        (False, False, False),
        (True, True, True),
    ]
    assert [llama.built(s, 3, False) for s in range(3)] == [
        (True, False, False),
        (False, False, False),
        (False, True, True),
    ]
    moe = stage_modules("vllm/model_executor/models/qwen3_moe.py")
    assert all(moe.built(s, 4, False) == (True, True, True) for s in range(4))
    assert not stage_modules("vllm/model_executor/models/deepseek_v2.py").tied(True)
    assert stage_modules("vllm/model_executor/models/gemma2.py").tied(False)
    assert stage_modules("vllm/model_executor/models/some_new_model.py") is UNREAD and not UNREAD.read


def test_every_rule_names_its_file_and_places_each_module():
    for file, rule in STAGE_MODULES.items():
        assert file.rsplit("/", 2)[-1].split(".")[0] in rule.source or file.split("/")[-2] in rule.source, file
        assert rule.embedding in (FIRST, EVERY, FIRST_OR_TIED_LAST) and {rule.norm, rule.head} <= {
            FIRST,
            LAST,
            EVERY,
        }


@pytest.mark.parametrize("name", ["zamba2", "gemma-3n-e4b"])
def test_a_model_vllm_does_not_pipeline_is_refused(name):
    """ModelConfig.verify_with_parallel_config: 'Pipeline parallelism is not supported for this model' for a class
    without SupportsPP, by vLLM's own registry inspection (kvviz/vllm/supports_pp.json): Zamba2ForCausalLM,
    Gemma3nForConditionalGeneration. Refused as a plan, and from a GPU."""
    with pytest.raises(KvvizError, match="Pipeline parallelism is not supported for this model"):
        kvviz.plan(name, pipeline_parallel_size=2)
    with pytest.raises(KvvizError, match="Pipeline parallelism is not supported for this model"):
        kv_budget(kvviz.load(name), gpu="H200", pipeline_parallel_size=2)


def test_the_supports_pp_table_is_vllms_own():
    """scripts/vllm_supports_pp.py's record: every architecture of the registry kvviz ships either inspected (its
    verdict kept) or named with the import error that kept it from being inspected on this CPU."""
    from kvviz.families.refused import vllm_architectures

    table = json.loads((Path(kvviz.__file__).parent / "vllm" / "supports_pp.json").read_text())
    assert table["vllm_version"] == "0.33.0"
    seen = set(table["supports_pp"]) | set(table["no_supports_pp"]) | set(table["not_inspected"])
    assert vllm_architectures() <= seen
    assert {"Zamba2ForCausalLM", "Mamba2ForCausalLM", "Gemma3nForCausalLM"} <= set(table["no_supports_pp"])
    assert {"LlamaForCausalLM", "Qwen3MoeForCausalLM", "DeepseekV3ForCausalLM"} <= set(table["supports_pp"])


def test_expert_parallel_holds_whole_experts_the_first_ranks_one_more():
    """determine_expert_map: E // EP experts a rank, one more on the first E % EP ranks; without expert parallel
    the experts are TP-sharded over DP x TP (FusedMoEParallelConfig.make)."""
    assert expert_share(128, 2, True) == expert_share(128, 2, False) == 0.5
    assert expert_share(64, 3, True) == 22 / 64 and expert_share(64, 3, False) == 1 / 3
    # the linear placement: 64 over 3 ranks is 22, 21, 21 experts, in order
    assert [expert_range(64, 3, r) for r in range(3)] == [(0, 22), (22, 43), (43, 64)]
    model, cfg = kvviz.load(OWN / "qwen3-30b-a3b"), raw("qwen3-30b-a3b")
    experts = 48 * 128 * 3 * 2048 * 768
    one = stage_weights(model, cfg).stages[0].bytes_per_gpu
    ep = stage_weights(model, cfg, data_parallel_size=2, enable_expert_parallel=True).stages[0].bytes_per_gpu
    assert one - ep == 2 * experts // 2  # bf16: half the routed experts leave each GPU
    b = kv_budget(model, gpu="H100", raw_config=cfg, data_parallel_size=2, enable_expert_parallel=True)
    assert b.weights_bytes == ep and "EP rank 0 holds experts 0-63 of 128" in b.term("weights").source


def test_an_exact_checkpoint_total_is_split_as_the_count_splits_it():
    model, cfg = kvviz.load(OWN / "llama-3.3-70b"), raw("llama-3.3-70b")
    staged = stage_weights(model, cfg, pipeline_parallel_size=2)
    total = 141_107_412_992 + 1000
    b = kv_budget(model, gpu="H200", raw_config=cfg, pipeline_parallel_size=2, weights_bytes=total)
    assert [s.weights_bytes for s in b.stages] == [
        -(-s.bytes_per_gpu * total // staged.whole_bytes) for s in staged.stages
    ]
    assert "split over the stages as the count" in b.term("weights").source


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 80), st.data())
def test_stages_hold_every_layer_once_and_the_outer_modules_where_built(pp, data):
    """Invariant: the stages' parameters add up to the whole model's plus each extra copy of the embedding, norm and
    head the model file builds (llama.py: none untied; qwen3_moe.py: PP - 1 of each)."""
    for name, extra in (("llama-3.3-70b", 0), ("qwen3-30b-a3b", 1)):
        cfg = raw(name)
        model = kvviz.load(OWN / name)
        n = cfg["num_hidden_layers"]
        k = min(pp, n)
        cuts = sorted(data.draw(st.sets(st.integers(1, n - 1), min_size=k - 1, max_size=k - 1))) if k > 1 else []
        partition = tuple(b - a for a, b in zip([0, *cuts], [*cuts, n])) if k > 1 else None
        staged = stage_weights(model, cfg, pipeline_parallel_size=k, pp_layer_partition=partition)
        assert [s.end_layer - s.first_layer for s in staged.stages] == list(partition or (n,))
        whole = stage_weights(model, cfg).stages[0].parameters
        outer = cfg["vocab_size"] * cfg["hidden_size"] * (1 if cfg["tie_word_embeddings"] else 2) + cfg["hidden_size"]
        assert sum(s.parameters for s in staged.stages) == whole + extra * (k - 1) * outer


def test_an_absurd_pp_size_is_refused_before_any_stage_is_built(monkeypatch):
    """-pp 65536 took 11-14 s to refuse: a hybrid's state-only check walked every stage, each walk summing the
    partition again. The split is now made once, and a size above the layers refused before it."""
    calls = []
    real = pipeline.stage_layer_counts
    monkeypatch.setattr(pipeline, "stage_layer_counts", lambda *a: calls.append(a) or real(*a))
    with pytest.raises(KvvizError, match=r"pipeline_parallel_size=65536: more stages than qwen3-next-80b-a3b's 48"):
        kvviz.plan("qwen3-next-80b-a3b", pipeline_parallel_size=65536)
    assert calls == []


def test_a_huge_partition_is_not_echoed_whole(capsys):
    part = ",".join(["1"] * 5000)
    assert main(["plan", "--model", "llama-3.1-8b", "-pp", "2", "--pp-layer-partition", part]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and len(err) < 300 and "len(partitions)=5000" in err
    with pytest.raises(KvvizError) as e:
        kvviz.plan("llama-3.1-8b", pipeline_parallel_size=2, pp_layer_partition=[1] * 4999 + [0])
    assert len(str(e.value)) < 300 and "pp_layer_partition=" in str(e.value)


def test_auto_fit_from_a_gpu_fits_each_stage(capsys):
    """--max-model-len -1 with -pp and --gpu: each stage fits its own length from its own budget, the shortest kept
    (tests/test_vllm_own_pipeline.py holds the rule to vLLM's _auto_fit_max_model_len); the CLI prints that line."""
    from kvviz.deploy.autofit import auto_fit
    from kvviz.options import Options

    argv = ["plan", "--model", "llama-3.1-8b", "--gpu", "RTX4090", "-pp", "2", "--pp-layer-partition", "12,20"]
    assert main(argv + ["--max-model-len", "-1"]) == 0
    out = capsys.readouterr().out
    options = Options(pipeline_parallel_size=2, pp_layer_partition=(12, 20))
    budget = kv_budget(kvviz.plan("llama-3.1-8b", pipeline_parallel_size=2, pp_layer_partition=(12, 20)), gpu="RTX4090")
    fit = auto_fit(kvviz.load("llama-3.1-8b"), options, budget.budget)
    assert fit.reduced and fit.log_line in out and f"{fit.max_model_len:,} tokens per request" in out


def test_a_review_of_pp2_against_tp2_records_each_stages_budget(capsys):
    """`kvviz compare` of PP 2 against TP 2 on a GPU: A's budget is one a stage, each what the door's plan sizes
    (kvviz.plan(...).capacity(gpu=...)'s rule, kv_budget of the plan); both sides' weights come from the same
    config, so the budget's inputs do not differ: only TP and PP (and what the scheduler derives from them) do."""
    config = str(OWN / "qwen3-30b-a3b" / "config.json")
    argv = ["compare", "--config", config, *H100, "-pp", "2", "--json", "--", "-tp", "2", "-pp", "1"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    a, b = doc["sides"]
    door = kvviz.plan(config, pipeline_parallel_size=2)
    assert a["budget"]["bytes"] == list(kv_budget(door, gpu="H100", gpu_memory_utilization=0.9).budget)
    assert a["capacity"] == door.capacity(gpu="H100", gpu_memory_utilization=0.9).to_json()
    assert a["budget"]["inputs"] == b["budget"]["inputs"]
    assert not [d for d in doc["differs"] if d["knob"].startswith("budget")]
    assert {"tensor_parallel_size", "pipeline_parallel_size"} <= {d["knob"] for d in doc["differs"]}


def test_a_stage_whose_kv_memory_holds_no_block_is_one_line_naming_the_device_option(capsys):
    """A stage left with less KV memory than one of its blocks is refused before anything is printed, naming the
    option that gave the device (--gpu-memory-gib here, not a `--gpu None`)."""
    flags = ["--model", "llama-3.1-8b", "--gpu-memory-gib", "40", "--gpu-memory-utilization", "1.0", "-pp", "2"]
    assert main(["plan", *flags, "--json"]) == 0
    stages = json.loads(capsys.readouterr().out)["kv_budget"]["stages"]
    allowance = 3 * 2**30 + min(s["available_bytes"] for s in stages) - 1000  # leaves the emptier stage 1,000 B
    assert main(["plan", *flags, "--activation-bytes", str(allowance)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("kvviz: error: --gpu-memory-gib 40.0: stage ")
    assert "is smaller than its block (1,048,576 B)" in err  # 32 / 2 layers x 65,536 B (PAGE: 2 x 16 x 8 x 128 x 2)
