"""kvviz.deploy.budget: the GPU catalogue, the KV budget term by term, and --max-model-len -1 (auto-fit),
each against a hand derivation from vLLM 0.33's rules (docs/deploy.md)."""

from __future__ import annotations

import json
import math
import re
import struct
import sys

import pytest

from kvviz.base.errors import KvvizError
from kvviz.base.text import format_gib
from kvviz.deploy.autofit import auto_fit, largest_context
from kvviz.deploy.budget import DEFAULT_ACTIVATION_BYTES, kv_budget
from kvviz.deploy.gpus import GPUS, gpu_spec
from kvviz.deploy.weights import estimate_parameters
from kvviz.families import load
from kvviz.families.loader import model_from_dict
from kvviz.options import Options
from kvviz.vllm.plan import plan_model

GIB, MIB = 2**30, 2**20
LLAMA_PARAMS = 8_030_261_248  # Llama-3.1-8B's published parameter count


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@pytest.fixture(scope="module")
def llama():
    return load("llama-3.1-8b")


# ---- catalogue -----------------------------------------------------------------------------------


def test_catalogue_has_the_accelerators_with_sources():
    assert set(GPUS) == {
        "H100",
        "H200",
        "B200",
        "GB200",
        "A100-40GB",
        "A100-80GB",
        "L40S",
        "RTX-4090",
        "MI300X",
        "MI325X",
    }
    # the exact byte counts (CUDA deviceQuery) and the MiB readings (torch's repr)
    assert GPUS["H100"].total_memory == 85_028_896_768 and GPUS["H100"].exact
    assert GPUS["A100-40GB"].total_memory == 42_298_834_944 and GPUS["A100-40GB"].exact
    assert GPUS["A100-80GB"].total_memory == 84_987_740_160 and GPUS["A100-80GB"].exact
    assert GPUS["H200"].total_memory == 143156 * MIB and GPUS["H200"].estimate
    assert GPUS["MI300X"].total_memory == 196592 * MIB and GPUS["MI300X"].estimate
    for g in GPUS.values():
        assert g.source and g.total_memory > 20 * GIB
        assert ("estimate" in g.label()) == g.estimate
    assert gpu_spec("nvidia h200") is GPUS["H200"] and gpu_spec("rtx4090") is GPUS["RTX-4090"]


def test_serve_batch_tier():
    assert GPUS["H200"].serve_max_num_batched_tokens == 8192
    assert GPUS["H100"].serve_max_num_batched_tokens == 8192
    assert GPUS["B200"].serve_max_num_batched_tokens == 16384
    assert GPUS["A100-80GB"].serve_max_num_batched_tokens == 2048


def test_unknown_gpu_lists_the_known(llama):
    with pytest.raises(KvvizError) as e:
        kv_budget(llama, gpu="TPU-v9")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("gpu=") and all(name in msg for name in GPUS)


# ---- the budget ----------------------------------------------------------------------------------


def test_terms_add_up_and_estimates_are_labelled(llama):
    b = kv_budget(llama, gpu="H200")
    total = 143156 * MIB
    assert b.total_memory == total
    assert b.requested_bytes == math.ceil(total * 0.92)  # vLLM 0.33's default utilization
    assert b.available_bytes == b.requested_bytes - b.weights_bytes - b.activation_bytes
    assert b.activation_bytes == DEFAULT_ACTIVATION_BYTES == 3 * GIB
    assert b.weights_bytes == LLAMA_PARAMS * 2  # bf16, from the config's parameter count
    for key in ("total", "requested", "weights", "activation"):  # H200 memory is itself an estimate
        assert b.term(key).estimate
    assert b.estimate
    text = b.lines()
    for t in b.terms:
        line = next(x for x in text if t.label in x)
        assert (f"{t.value:,} B" in line) and (f"{t.value / GIB:.2f} GiB" in line)
        assert ("[estimate]" in line) == t.estimate
    assert text[-1].endswith(f"Available KV cache memory: {format_gib(b.available_bytes)} GiB (from estimated terms)")
    assert re.search(r"Available KV cache memory: \d+\.\d{1,2} GiB", b.log_line)
    assert json.loads(json.dumps(b.to_json()))["available_bytes"] == b.available_bytes


def test_given_terms_are_not_estimates(llama):
    b = kv_budget(llama, gpu="H100", weights_bytes=16 * 10**9, activation_bytes=2 * GIB)
    assert not b.term("weights").estimate and not b.term("activation").estimate
    assert not b.estimate  # H100's bytes are confirmed
    assert b.available_bytes == math.ceil(85_028_896_768 * 0.92) - 16 * 10**9 - 2 * GIB
    assert not any("[estimate]" in x for x in b.lines())


def test_checkpoint_index_is_exact_and_tp_halves_it(llama, tmp_path):
    size = 16_060_522_496
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps(
            {"metadata": {"total_size": size}, "weight_map": {"lm_head.weight": "model-00004-of-00004.safetensors"}}
        )
    )
    one = kv_budget(llama, gpu="H100", checkpoint_dir=tmp_path)
    two = kv_budget(llama, gpu="H100", checkpoint_dir=tmp_path, tensor_parallel_size=2)
    assert one.weights_bytes == size and not one.term("weights").estimate
    assert "metadata.total_size" in one.term("weights").source
    assert two.weights_bytes == size // 2
    assert two.available_bytes - one.available_bytes == size // 2


def test_single_safetensors_header(llama, tmp_path):
    header = {
        "a": {"dtype": "BF16", "shape": [4, 8], "data_offsets": [0, 64]},
        "b": {"dtype": "F32", "shape": [10], "data_offsets": [64, 104]},
        "__metadata__": {"format": "pt"},
    }
    raw = json.dumps(header).encode()
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(104))
    b = kv_budget(llama, gpu_memory_gib=80, checkpoint_dir=tmp_path)
    assert b.weights_bytes == 104 and not b.term("weights").estimate


# Llama-3.1-8B's parameters vLLM keeps whole on every TP rank: two RMSNorms a layer and the final norm
LLAMA_NORMS = 32 * 2 * 4096 + 4096


def test_estimated_weights_of_one_tp_rank(llama):
    """One TP rank holds the sharded layers and the vocabulary / TP and every norm whole (llama.py: QKVParallelLinear,
    MergedColumnParallelLinear, RowParallelLinear, VocabParallelEmbedding; RMSNorm unsharded)."""
    one = kv_budget(llama, gpu="H200")
    two = kv_budget(llama, gpu="H200", tensor_parallel_size=2)
    assert two.weights_bytes == 2 * ((LLAMA_PARAMS - LLAMA_NORMS) // 2 + LLAMA_NORMS) and two.term("weights").estimate
    assert one.weights_bytes == 2 * LLAMA_PARAMS


def test_parameter_estimates():
    # Llama-3.1-8B's config.json (the fields the estimate reads)
    cfg = {
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "vocab_size": 128256,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 14336,
        "tie_word_embeddings": False,
    }
    assert estimate_parameters(cfg)[0] == LLAMA_PARAMS
    # MoE: one MoE layer of 4 experts (+ router), tied embeddings
    moe = {
        "hidden_size": 8,
        "num_hidden_layers": 1,
        "vocab_size": 10,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "num_experts": 4,
        "moe_intermediate_size": 3,
        "tie_word_embeddings": True,
    }
    attn = 4 * 8 * 8
    # the embedding's 10 tokens are padded to 64 rows (vocab_parallel_embedding.py pad_vocab_size, padding 64)
    assert estimate_parameters(moe)[0] == attn + 4 * 3 * 8 * 3 + 8 * 4 + 2 * 8 + 8 + 64 * 8
    # DeepSeek V3 (MLA, 256 experts, 3 dense layers): ~671 B without the MTP layer
    params, how = estimate_parameters(load_raw("deepseek-v3"))
    assert 660e9 < params < 680e9 and "MLA" in how and "MoE" in how


def load_raw(name):
    from kvviz.families import preset_raw

    return preset_raw(name)


def test_kv_cache_memory_bytes_is_exact(llama):
    b = kv_budget(llama, gpu="H200", kv_cache_memory_bytes=40 * GIB)
    assert b.exact_pool and b.available_bytes == 40 * GIB and [t.key for t in b.terms] == ["kv_cache_memory_bytes"]
    assert not b.estimate and b.weights_bytes is None
    assert "reserved 40.0 GiB memory for KV Cache as specified by kv_cache_memory_bytes" in b.log_line
    assert kv_budget(llama, kv_cache_memory_bytes=10**9).available_bytes == 10**9  # no device needed


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(gpu="H200", gpu_memory_utilization=0), "gpu_memory_utilization"),
        (dict(gpu="H200", gpu_memory_utilization=1.01), "gpu_memory_utilization"),
        (dict(gpu="H200", gpu_memory_utilization=-0.5), "gpu_memory_utilization"),
        (dict(gpu="H200", weights_bytes=-1), "weights_bytes"),
        (dict(gpu="H200", activation_bytes=-1), "activation_bytes"),
        (dict(gpu_memory_gib=-80), "gpu_memory_gib"),
        (dict(gpu="H200", kv_cache_memory_bytes=-5), "kv_cache_memory_bytes"),
        (dict(gpu="RTX-4090", kv_cache_memory_bytes=30 * GIB), "kv_cache_memory_bytes"),
        (dict(gpu="H200", tensor_parallel_size=0), "tensor_parallel_size"),
        (dict(), "gpu"),
    ],
)
def test_bad_input_is_one_line_naming_the_field(llama, kwargs, field):
    with pytest.raises(KvvizError) as e:
        kv_budget(llama, **kwargs)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(field)


def test_no_memory_left(llama):
    with pytest.raises(KvvizError) as e:
        kv_budget(llama, gpu="RTX-4090", weights_bytes=30 * GIB)
    msg = str(e.value)
    assert msg.startswith("no memory left for the KV cache: ") and "\n" not in msg
    assert "gpu_memory_utilization" in msg
    with pytest.raises(KvvizError, match="no memory left"):
        kv_budget(load("deepseek-v3"), gpu="H200")  # ~1.25 TiB of bf16 weights


def test_unestimable_family_asks_for_weights():
    from kvviz.families import preset_raw

    trimmed = {k: v for k, v in preset_raw("deepseek-v4-pro").items() if k != "hidden_size"}
    with pytest.raises(KvvizError, match="^weights_bytes: .*'hidden_size'.*pass weights_bytes="):
        kv_budget(load("deepseek-v4-pro"), gpu="H200", raw_config=trimmed)  # a config trimmed of a size
    assert (
        kv_budget(
            load("qwen3-next-80b-a3b"), gpu="H200", weights_bytes=160 * 10**9, tensor_parallel_size=2
        ).weights_bytes
        == 80 * 10**9
    )


def test_module_is_light():
    import subprocess

    code = (
        "import sys, kvviz.deploy.budget, kvviz.deploy.fit; "
        "print(any(m in sys.modules for m in ('torch', 'transformers', 'matplotlib', 'pandas')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ---- budget -> capacity: Llama-3.1-8B on an H200 -------------------------------------------------


@pytest.mark.parametrize("tp", [1, 2])
def test_llama_h200_capacity_by_hand(llama, tp):
    b = kv_budget(llama, gpu="H200", tensor_parallel_size=tp)
    total = 143156 * MIB
    weights = 2 * ((LLAMA_PARAMS - LLAMA_NORMS) // tp + LLAMA_NORMS)  # norms whole on every rank
    available = math.ceil(total * 0.92) - weights - 3 * GIB
    assert b.available_bytes == available
    # page = block 16 x kv_heads/tp x head_dim 128 x (K + V) x 2 B (bf16), per layer; 32 full layers in one group
    page = 16 * (8 // tp) * 128 * 2 * 2
    bytes_per_block = 32 * page
    num_blocks = available // bytes_per_block  # the null block counted, as vLLM's log does
    per_request = cdiv(131_072, 16)  # the model's own max_model_len
    concurrency = num_blocks / per_request
    tokens = int(concurrency * 131_072)
    line = (
        f"GPU KV cache size: {tokens:,} tokens, Maximum concurrency for 131,072 tokens per request: {concurrency:.2f}x"
    )
    opts = Options() if tp == 1 else Options(tensor_parallel_size=tp)
    cap = plan_model(llama, None, opts).capacity(b.available_bytes)
    assert cap.bytes_per_block == bytes_per_block
    assert cap.num_blocks == num_blocks and cap.blocks_per_request == per_request
    assert cap.line == line


# ---- --max-model-len -1 --------------------------------------------------------------------------


@pytest.mark.parametrize("budget", [GIB + 12345, 5 * GIB, 7 * 2**20 + 3, 3 * 2**21])
def test_largest_context_full_attention_by_hand(llama, budget):
    per_block = 32 * 16 * 8 * 128 * 2 * 2  # bytes per block at TP 1
    check = budget - per_block  # the null block held back
    # the largest L in [1, 131072] with cdiv(L, 16) x bytes per block <= budget - one block
    expect = min(131_072, 16 * (check // per_block))
    assert largest_context(llama, Options(), budget) == expect
    assert cdiv(expect, 16) * per_block <= check < cdiv(expect + 1, 16) * per_block or expect == 131_072
    fit = auto_fit(llama, Options(), budget)
    assert fit.reduced and fit.request_bytes == cdiv(expect, 16) * per_block
    assert fit.log_line == (
        f"Auto-fit max_model_len: reduced from 131072 to {expect} to fit in available KV cache "
        f"memory ({format_gib(check)} GiB GPU)"
    )


def test_largest_context_full_fit_and_too_small(llama):
    assert largest_context(llama, Options(), 100 * GIB) == 131_072
    assert "full model context length 131072 fits" in auto_fit(llama, Options(), 100 * GIB).log_line
    with pytest.raises(KvvizError, match="Cannot auto-fit max_model_len"):
        largest_context(llama, Options(), 2 * 2**21 - 1)  # one block + the null block do not fit
    # options.max_model_len is what -1 replaces: ignored
    assert largest_context(llama, Options(max_model_len=4096), 100 * GIB) == 131_072


@pytest.mark.parametrize(
    "name, knobs",
    [
        ("gpt-oss-120b", {}),
        ("lfm2-1.2b", {}),
        ("lfm2-1.2b", {"prefix_caching": False}),
        ("llama-3.1-8b", {"tensor_parallel_size": 4}),
    ],
)
def test_auto_fit_matches_plans_built_at_each_length(name, knobs):
    """The fast search (one layout, a Scheduling per length) agrees with plans built at the fitted
    length and one token more (sliding windows and Mamba states included)."""
    model = load(name)
    opts = Options(**knobs)
    budget = 3 * GIB + 777
    L = largest_context(model, opts, budget)

    def need(length):
        cap = plan_model(model, None, Options(**knobs, max_model_len=length)).capacity(budget)
        return cap.admission_bytes_per_request, cap.bytes_per_block

    got, block = need(L)
    assert got <= budget - block
    if L < model.max_model_len:
        over, block = need(L + 1)
        assert over > budget - block


def test_weights_estimate_from_a_checkpoint_config(tmp_path):
    """A model read from a folder: its config.json gives the estimate when no index is there."""
    raw = dict(load_raw("llama-3.1-8b"), intermediate_size=14336, vocab_size=128256, tie_word_embeddings=False)
    (tmp_path / "config.json").write_text(json.dumps(raw))  # Llama-3.1-8B's config.json fields
    model = load(tmp_path)
    b = kv_budget(model, gpu="H100", checkpoint_dir=tmp_path)
    assert b.weights_bytes == 2 * LLAMA_PARAMS and b.term("weights").estimate
    assert "checkpoint config.json" in b.term("weights").source
    # issue 37: the model carries the file it was read from, so no checkpoint_dir is needed for the same estimate
    assert kv_budget(model, gpu="H100").weights_bytes == b.weights_bytes
    bare = model_from_dict(raw, name="by-hand")  # a Model built from a dict, read from no file: nothing to estimate
    with pytest.raises(KvvizError, match="^weights_bytes: no config.json"):
        kv_budget(bare, gpu="H100")
