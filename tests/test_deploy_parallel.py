"""Data parallel and TP vs attention DP vs DCP per GPU (docs/deploy.md#data-parallel, kvviz/deploy/parallel.py).

Every expected number is a hand derivation from the vLLM 0.33 rules the module cites: each DP engine sizes its own
pool (v1/engine/core.py EngineCore._initialize_kv_caches: no minimum across DP ranks), MLA's latent is one KV head
on every TP rank (config/model.py ModelConfig.get_num_kv_heads returns 1 when use_mla), GQA heads split over TP
(max(1, kv // tp)), DCP divides a request's tokens (FullAttentionSpec.max_memory_usage_bytes: cdiv(cdiv(L, dcp),
block)), and the routed experts split over DP x TP (FusedMoEParallelConfig.make). tests/test_deploy_more.py holds
the same layouts against vLLM's own engines (DeepSeek-V3 TP 1 / TP 8 / TP 8 x DCP 8 / DP 8, DeepSeek-V2-Lite).
"""

from __future__ import annotations

import json

import pytest
from hand_weights import deepseek_v3_rank_bytes

import kvviz
from kvviz.base.errors import KvvizError
from kvviz.cli.main import main
from kvviz.deploy.parallel import attention_layouts, data_parallel
from kvviz.deploy.params import decoder_count
from kvviz.families import load_preset
from kvviz.options import Options

GIB = 2**30
L = 32768


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def test_dp_replicas_multiply_engines_not_blocks_by_hand():
    """Llama-3.1-8B, TP 1, 8 GiB a GPU, DP 4: a block is 2 (K, V) x 8 heads x 128 x 2 B x 16 tokens x 32 layers
    = 2,097,152 B; 8 GiB holds 4,096 of them; a 32k request holds 2,048: 2.00x and 65,536 tokens a replica, each
    replica its own pool, so 4 replicas hold 8 requests and 262,144 tokens on 4 GPUs."""
    stride = 2 * 8 * 128 * 2 * 16 * 32
    blocks = 8 * GIB // stride
    c = blocks / cdiv(L, 16)
    d = data_parallel(kvviz.plan("llama-3.1-8b", max_model_len=L), 8 * GIB, 4)
    assert (stride, blocks, c) == (2_097_152, 4096, 2.0)
    assert d.num_blocks == blocks and d.max_concurrency == c and d.kv_cache_tokens == int(c * L)
    assert d.gpus == 4 and d.total_concurrency == 4 * c and d.total_tokens == 4 * int(c * L)
    assert d.to_json()["total"] == {"kv_cache_tokens": 262_144, "max_concurrency": 8.0}


def test_dp_with_tp_and_pp_counts_every_gpu():
    """DP 2 of TP 2 x PP 2: 8 GPUs; each replica keeps its own plan's blocks (the smallest stage's)."""
    plan = kvviz.plan("llama-3.1-8b", max_model_len=L, tensor_parallel_size=2, pipeline_parallel_size=2)
    d = data_parallel(plan, 8 * GIB, 2)
    assert d.gpus == 8 and d.num_blocks == plan.capacity(8 * GIB).num_blocks
    # TP 2: 4 KV heads a rank; PP 2: 16 layers a stage -> 2 x 4 x 128 x 2 x 16 x 16 = 524,288 B a block
    assert d.num_blocks == 8 * GIB // (2 * 4 * 128 * 2 * 16 * 16)


def test_mla_tp_vs_attention_dp_vs_dcp_per_gpu_by_hand():
    """DeepSeek-V3 on 8 GPUs, 40 GiB of KV each: the latent (512 + 64) x 2 B x 61 layers x 16 tokens = 1,124,352 B
    a block on every rank whatever the TP (get_num_kv_heads = 1), so every layout's GPU holds 38,199 blocks. TP 8:
    one engine, 38,199 / 2,048 requests over the 8 GPUs; attention DP 8: 8 engines of that; DCP 8: one engine whose
    request holds cdiv(cdiv(32768, 8), 16) = 256 blocks. So attention DP and DCP hold 8x TP 8's (vLLM #51454)."""
    stride = (512 + 64) * 2 * 61 * 16
    blocks = 40 * GIB // stride
    a = attention_layouts(load_preset("deepseek-v3"), 8, 40 * GIB, Options(max_model_len=L))
    tp, dp, dcp = a.layout("tp"), a.layout("attention_dp"), a.layout("dcp")
    assert {x.bytes_per_block for x in a.layouts} == {stride} and {x.num_blocks for x in a.layouts} == {blocks}
    assert tp.engines == 1 and tp.total_concurrency == blocks / cdiv(L, 16)
    assert tp.per_gpu_concurrency == blocks / cdiv(L, 16) / 8
    assert dp.engines == 8 and dp.total_concurrency == 8 * blocks / cdiv(L, 16)
    assert dcp.engines == 1 and dcp.max_concurrency == blocks / cdiv(cdiv(L, 8), 16)
    assert a.ratio("attention_dp") == 8.0 and a.ratio("dcp") == 8.0 and a.replicated
    assert "get_num_kv_heads returns 1" in "\n".join(a.lines())


def test_gqa_tp_shards_heads_so_attention_dp_gains_nothing():
    """Llama-3.1-8B (8 KV heads) on 8 GPUs: TP 8 gives each rank 1 head (max(1, 8 // 8)), an eighth of the TP 1
    block, so the GPUs hold the same requests either way (1.00x); DCP 8 is refused as vLLM refuses it (TP not
    greater than the KV heads)."""
    a = attention_layouts(load_preset("llama-3.1-8b"), 8, 8 * GIB, Options(max_model_len=L))
    tp, dp = a.layout("tp"), a.layout("attention_dp")
    assert tp.bytes_per_block * 8 == dp.bytes_per_block == 2 * 8 * 128 * 2 * 16 * 32
    assert tp.num_blocks == 8 * dp.num_blocks and a.ratio("attention_dp") == 1.0 and not a.replicated
    assert "greater than" in a.layout("dcp").refused and a.ratio("dcp") is None


def test_deepseek_v4_dcp_refused_attention_dp_holds_8x():
    """DeepSeek-V4-Flash (#51454's model): every cache is max_tp_shards=1, so attention DP 8 holds 8x TP 8's at one
    budget; DCP is refused (its SWA caches: 'DCP not support sliding window.')."""
    a = attention_layouts(load_preset("deepseek-v4-flash"), 8, 40 * GIB, Options(max_model_len=L))
    assert a.ratio("attention_dp") == 8.0 and "DCP not support sliding window" in a.layout("dcp").refused


def test_routed_experts_by_hand_and_the_gpu_budgets():
    """DeepSeek-V3's routed experts: (61 - 3 dense) layers x 256 x 3 x 7168 x 2048, in its FP8 checkpoint 1 B a
    parameter plus one float32 scale a 128 x 128 block (quantization_config weight_block_size). From a GPU,
    attention DP keeps everything else whole on each GPU, so its budget is TP 8's less (that rest) x 7/8: below 8x
    (#51454's 7.7x)."""
    from kvviz.deploy.budget import weights_term
    from kvviz.deploy.weights import raw_config_of

    model = load_preset("deepseek-v3")
    raw, _ = raw_config_of(model, None, None)
    routed = decoder_count(raw).parts["experts"]  # kvviz.deploy.params: the routed experts alone
    assert routed == 58 * 256 * 3 * 7168 * 2048
    assert raw["quantization_config"]["weight_block_size"] == [128, 128]
    routed_bytes = int(round(routed * (1 + 4 / (128 * 128))))
    whole = weights_term(model, 1, None, None, None, None).value
    rest = whole - routed_bytes
    for gpu in ("B200", "MI325X", "H200"):
        a = attention_layouts(model, 8, None, Options(max_model_len=131072), gpu=gpu)
        tp, dp = a.layout("tp"), a.layout("attention_dp")
        assert not tp.refused and not dp.refused, gpu
        # attention DP: all but the routed experts whole, 32 of the 256 experts; TP 8: one rank's shapes
        assert tp.budget_bytes - dp.budget_bytes == (rest + routed_bytes // 8) - deepseek_v3_rank_bytes(8), gpu
        assert 1 < a.ratio("attention_dp") < 8 and a.ratio("dcp") == pytest.approx(8, rel=1e-3), gpu


def test_refusals_are_one_line():
    model = load_preset("deepseek-v3")
    with pytest.raises(KvvizError, match="pipeline_parallel_size"):
        attention_layouts(model, 8, GIB, Options(pipeline_parallel_size=2))
    with pytest.raises(KvvizError, match="gpus=0"):
        attention_layouts(model, 0, GIB)
    with pytest.raises(KvvizError, match="weights_bytes: not a GPU term"):
        attention_layouts(model, 8, None, weights_bytes=1)
    with pytest.raises(KvvizError, match="data_parallel_size"):
        data_parallel(kvviz.plan("llama-3.1-8b"), GIB, 0)


def test_cli(capsys):
    """`kvviz plan -dp N --enable-expert-parallel --attention-layouts N --json` adds both keys; misuse is one line."""
    base = ["plan", "--model", "deepseek-v3", "--max-model-len", str(L), "--budget-gib", "40"]
    assert main(base + ["-dp", "8", "--enable-expert-parallel", "--attention-layouts", "8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["data_parallel"]["total"]["kv_cache_tokens"] == 8 * out["summary"]["kv_cache_tokens"]
    assert out["attention_layouts"]["ratio_over_tp"] == {"attention_dp": 8.0, "dcp": 8.0}
    assert main(base + ["-dp", "2"]) == 0
    assert "all 2 replicas" in capsys.readouterr().out
    for argv in (
        ["plan", "--model", "llama-3.1-8b", "--enable-expert-parallel", "--budget-gib", "4"],
        ["plan", "--model", "llama-3.1-8b", "-dp", "2"],
    ):
        assert main(argv) == 2
        assert capsys.readouterr().err.count("\n") == 1
