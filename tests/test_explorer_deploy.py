"""The explorer's deployment knobs (docs/deploy.md): pipeline parallel, CPU offload and data parallel appear where
tensor parallel does, and the lines under the capacity line show the stages, the host tier, the replicas and what
fp8 buys. Widgets are driven by setting `.value`; expected numbers are hand derivations of vLLM 0.33's rules (the
modules cite them) or the library called with the same knobs.
"""

from __future__ import annotations

from kvviz.base.defaults import GIB
from kvviz.explorer.app import Explorer
from kvviz.explorer.display import deploy_lines
from kvviz.explorer.knobs import default_knobs, knobs_for
from kvviz.explorer.sweeps import capacities, options_for, plan_knobs
from kvviz.options import Options

L = 32768
DEPLOY = ("pipeline_parallel_size", "kv_offloading_size", "data_parallel_size")


def test_the_deploy_knobs_apply_where_tp_does_and_are_off_by_default():
    """Every preset that takes tensor_parallel_size takes the three (kvviz.vllm.plan.check_knobs accepts them
    there); at their defaults (1 stage, 0 GiB, 1 replica) they set no Options field."""
    for name in ("llama-3.1-8b", "deepseek-v4-pro", "qwen3-next-80b-a3b", "gpt-oss-120b"):
        assert set(DEPLOY) <= set(knobs_for(name))
        assert (
            options_for(default_knobs(name)).given()
            == options_for({k: v for k, v in default_knobs(name).items() if k not in DEPLOY}).given()
        )
    knobs = default_knobs("llama-3.1-8b", pipeline_parallel_size=2, kv_offloading_size=16.0)
    assert options_for(knobs).pipeline_parallel_size == 2 and options_for(knobs).kv_offloading_size == 16.0


def test_pipeline_stages_in_the_app_by_hand():
    """Llama-3.1-8B, PP 2, 8 GiB: 16 layers a stage (get_pp_indices), 2 x 8 x 128 x 2 B x 16 tokens x 16 layers =
    1,048,576 B a block on each, 8,192 blocks; the line names both stages. PP plans with vLLM's planner only, so
    DeepSeek V4 at PP 2 shows vllm alone, not a refusal."""
    app = Explorer("llama-3.1-8b", budget_gib=8.0, context=L)
    app.pipeline_parallel_size.value = 2
    assert app.error == "" and app.plan.stages
    block = 2 * 8 * 128 * 2 * 16 * 16
    assert app.result.capacity.num_blocks == 8 * GIB // block == 8192
    text = app.deploy_label.value
    assert "stages: 0: layers 0-15" in text and f"{block:,} B a block" in text and "1: layers 16-31" in text
    pro = default_knobs("deepseek-v4-pro", pipeline_parallel_size=2, mtp=False)  # MTP layers sit on no stage
    assert [c.planner for c in capacities(pro)] == ["vllm"]


def test_offload_dp_and_fp8_lines_in_the_app():
    """CPU offload 16 GiB: the host tier's line is kvviz.vllm.offload's for the same plan; DP 4: the replicas' total
    is 4 x the capacity line's tokens (each engine its own pool); Llama's fp8 line says 2.00x (every page halves)."""
    app = Explorer("llama-3.1-8b", budget_gib=8.0, context=L)
    app.kv_offloading_size.value = 16.0
    app.data_parallel_size.value = 4
    assert app.error == ""
    from kvviz.vllm.offload import offload_for

    plan = app.plan
    off = offload_for(plan, Options(max_model_len=L, kv_offloading_size=16.0))
    cap = app.result.capacity
    text = app.deploy_label.value
    assert f"{off.num_chunks:,} chunks" in text
    assert f"all 4 replicas: {4 * cap.kv_cache_tokens:,} tokens" in text
    assert "fp8 KV buys 2.00x" in text
    app.kv_offloading_size.value = -1.0  # refused in one line, never clamped
    assert "kv_offloading_size" in app.error


def test_deploy_lines_without_widgets():
    knobs = default_knobs("llama-3.1-8b", budget_gib=8.0, context=L, data_parallel_size=2)
    lines = deploy_lines(plan_knobs(knobs), knobs)
    assert any(line.startswith("all 2 replicas") for line in lines)


def test_a_plan_with_stages_and_offload_opens_in_the_explorer():
    """`Explorer(kvviz.plan(...))` takes the plan's pipeline_parallel_size and kv_offloading_size as its knobs; the
    stages and the host tier both show (offload with PP: vLLM's scheduler-side connector, stage 0's bytes per block
    x TP x PP copies)."""
    import kvviz

    app = Explorer(kvviz.plan("llama-3.1-8b", pipeline_parallel_size=2, kv_offloading_size=8.0, max_model_len=L))
    assert app.error == "" and app.pipeline_parallel_size.value == 2 and app.kv_offloading_size.value == 8.0
    assert "stages:" in app.deploy_label.value and "CPU offload: 8 GiB host" in app.deploy_label.value
