"""Tensor parallel (and decode context parallel) for every architecture kvviz plans, at TP 1, 2, 4
and 8, against hand derivations from vLLM 0.33's own rules (wheel at /work/wheels/vllm/vllm/):

* per-rank KV heads: config/model.py ModelConfig.get_num_kv_heads = max(1, kv // tp) (1 for MLA);
  layers/linear.py QKVParallelLinear: tp >= kv must be a multiple of kv, kv > tp divisible by tp;
* state shapes per rank: layers/mamba/mamba_utils.py MambaStateShapeCalculator (every sharded
  dim `divide(x, tp)`; Mamba-2 groups grown by extra_groups_for_head_shards);
* the attention block of a hybrid: platforms/interface.py Platform._align_hybrid_block_size,
  block = k * cdiv(state_bytes, k * attention_bytes_per_token) with k = 16 (FlashAttention's
  MultipleOf(16)), lcm'd with the GDN prefill checkpoint alignment 64 in 'align' mode
  (FlashInfer GDN prefill on Hopper), max'd with 128 for an MLA hybrid; the state page padded to
  the attention page;
* groups: v1/core/kv_cache_planning.py _get_kv_cache_groups_uniform_page_size (group size = the
  fewest layers of one spec, or the most when max < 1.5 x min; cdiv(n, size) groups a spec);
  bytes per block = layers per group x page (one shared pool);
* blocks per request: v1/kv_cache_interface.py max_memory_usage_bytes // page: full / MLA
  cdiv(cdiv(L, dcp), block); sliding cdiv(min(W - 1 + in-flight, L), block) + 1; chunked
  cdiv(min(chunk + in-flight, L), block); Mamba in 'align' mode 2 + checkpoint blocks (Mamba-2
  and the gated delta net hold one); in-flight = 2 batches x 8192 tokens (vLLM serve on an H200);
* the capacity line: v1/core/kv_cache_utils.py update_kv_cache_capacity with
  num_blocks = budget // bytes_per_block (get_kv_cache_configs, null block counted),
  C = num_blocks / blocks per request (get_max_concurrency_for_kv_cache_config) and
  N = int(C x max_model_len) (get_kv_cache_capacity).

Every config number below is the shipped preset's config.json field (kvviz/presets/NAME.json);
every derived number is computed here from those fields by the rules above, not read from kvviz.

Qwen3-Next's block at TP 1/2/4/8 is 576/576/320/192 (not 576/320/192 at TP 1/2/4): the attention
page per token shrinks with the state at TP 2 (2 KV heads -> 1 a rank) and stops shrinking from
TP 4 (max(1, 2 // 4) = 1, a replicated head), while the state keeps halving. See
test_qwen3_next_block_falls_only_once_the_kv_heads_are_replicated.
"""

from __future__ import annotations

import dataclasses
import math

import pytest

from kvviz.base.errors import KvvizError
from kvviz.cli import main
from kvviz.families import load_preset
from kvviz.options import Options
from kvviz.vllm.plan import plan_model

BUDGET = 20_000_000_000  # --kv-cache-memory-bytes
IN_FLIGHT = 2 * 8192  # VllmConfig.max_in_flight_tokens: 2 batches (async) x 8192 (vllm serve, H200)
TPS = (1, 2, 4, 8)
BF16, FP32 = 2, 4


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def kv_per_rank(kv: int, tp: int) -> int:
    """ModelConfig.get_num_kv_heads: max(1, kv // tp)."""
    return max(1, kv // tp)


def kv_token_bytes(kv: int, head_dim: int, tp: int, dtype: int = BF16) -> int:
    """FullAttentionSpec page for one token: K and V, per-rank heads x head_size x dtype."""
    return 2 * kv_per_rank(kv, tp) * head_dim * dtype


def hybrid_block(state_bytes: int, token_bytes: int, k: int = 16) -> int:
    """_align_hybrid_block_size: k * cdiv(state, k * token), then rounded to the backends' 16."""
    block = k * cdiv(state_bytes, k * token_bytes)
    return 16 * cdiv(block, 16)


def group_layout(counts: list[int]) -> tuple[int, list[int]]:
    """_get_kv_cache_groups_uniform_page_size: (layers per group, groups of each spec)."""
    size = min(counts)
    if max(counts) < size * 1.5:
        size = max(counts)
    return size, [cdiv(n, size) for n in counts]


def sliding_blocks(window: int, block: int, length: int) -> int:
    return cdiv(min(window - 1 + IN_FLIGHT, length), block) + 1


@dataclasses.dataclass(frozen=True)
class Expected:
    """One rank's numbers as vLLM 0.33 would size them."""

    block: int  # attention tokens per block
    page: int  # bytes of one layer's page (states padded to it)
    layers_per_group: int
    blocks_per_request: int
    length: int  # max_model_len

    @property
    def bytes_per_block(self) -> int:
        return self.layers_per_group * self.page

    def line(self, budget: int = BUDGET) -> str:
        num_blocks = budget // self.bytes_per_block
        c = num_blocks / self.blocks_per_request
        return (
            f"GPU KV cache size: {int(c * self.length):,} tokens, Maximum concurrency for {self.length:,} tokens "
            f"per request: {c:.2f}x"
        )


# ---- the hand derivations, one function per architecture --------------------------------------------


def dense(tp, *, layers, kv, head_dim, length=32_768):
    """Llama-3.1-8B: 32 layers, 32 heads, 8 KV heads, head_dim 4096 / 32 = 128; one group, block 16."""
    page = 16 * kv_token_bytes(kv, head_dim, tp)
    return Expected(16, page, layers, cdiv(length, 16), length)


def all_sliding(tp, *, layers, kv, head_dim, window, length=32_768):
    """Mistral-7B-v0.1: every layer windowed (4096): one SlidingWindowSpec group."""
    page = 16 * kv_token_bytes(kv, head_dim, tp)
    return Expected(16, page, layers, sliding_blocks(window, 16, length), length)


def sliding_and_full(tp, *, sliding, full, kv, head_dim, window, length=32_768):
    """Gemma 3 (52 sliding + 10 full) / gpt-oss (18 + 18) / Gemma 3n (16 + 4 with a cache)."""
    page = 16 * kv_token_bytes(kv, head_dim, tp)
    size, (n_full, n_sliding) = group_layout([full, sliding])
    per_request = n_full * cdiv(length, 16) + n_sliding * sliding_blocks(window, 16, length)
    return Expected(16, page, size, per_request, length)


def chunked_and_full(tp, *, chunked, full, kv, head_dim, chunk, length=32_768):
    """Llama 4 Scout: 36 chunked-local (8192) + 12 full layers."""
    page = 16 * kv_token_bytes(kv, head_dim, tp)
    size, (n_full, n_chunked) = group_layout([full, chunked])
    per_request = n_full * cdiv(length, 16) + n_chunked * cdiv(min(chunk + IN_FLIGHT, length), 16)
    return Expected(16, page, size, per_request, length)


def mla(tp, *, layers, rank=512, rope=64, length=32_768, dcp=1):
    """DeepSeek-V3: MLA latent 512 + 64 = 576 bf16 a token, one head on every rank (not sharded)."""
    return Expected(16, 16 * (rank + rope) * BF16, layers, cdiv(cdiv(length, dcp), 16), length)


def hybrid(*, state_bytes, token_bytes, n_states, n_attention, state_blocks, length, k=16):
    """A state + attention hybrid: block raised until the attention page holds a state."""
    block = hybrid_block(state_bytes, token_bytes, k)
    size, (n_attn_groups, n_state_groups) = group_layout([n_attention, n_states])
    per_request = n_attn_groups * cdiv(length, block) + n_state_groups * state_blocks
    return Expected(block, block * token_bytes, size, per_request, length)


def jamba(tp):
    """Jamba-v0.1: Mamba-1, intermediate 2 x 4096 = 8192, d_state 16, d_conv 4 (mamba1_state_shape:
    conv (I/tp, 3), ssm (I/tp, 16), both bf16); 28 Mamba + 4 attention (8 KV heads x 128);
    align mode: 2 blocks a Mamba-1 state (no checkpoint block)."""
    inter = 8192 // tp
    state = (inter * 3 + inter * 16) * BF16
    return hybrid(
        state_bytes=state,
        token_bytes=kv_token_bytes(8, 128, tp),
        n_states=28,
        n_attention=4,
        state_blocks=2,
        length=32_768,
    )


def mamba2_state(tp, *, heads, head_dim, groups, d_state, conv, ssm_dtype):
    """mamba2_state_shape: groups' = groups + (0 if groups % tp == 0 else tp - groups);
    conv ((I + 2 groups' N) / tp, conv - 1) bf16; ssm (heads / tp, head_dim, N)."""
    inter = heads * head_dim
    g = groups + (0 if groups % tp == 0 else tp - groups)
    conv_dim = inter + 2 * g * d_state
    return conv_dim // tp * (conv - 1) * BF16 + heads // tp * head_dim * d_state * ssm_dtype


def nemotron_h(tp):
    """Nemotron-Nano-9B-v2: 128 heads x 80, 8 groups, state 128, conv 4, ssm float32
    (NemotronHForCausalLMConfig); 27 Mamba-2 ('M') + 4 attention ('*', 8 KV heads x 128); Mamba-2
    holds 3 blocks in align mode (2 + 1 checkpoint, MambaMixer2.get_kv_cache_spec)."""
    state = mamba2_state(tp, heads=128, head_dim=80, groups=8, d_state=128, conv=4, ssm_dtype=FP32)
    return hybrid(
        state_bytes=state,
        token_bytes=kv_token_bytes(8, 128, tp),
        n_states=27,
        n_attention=4,
        state_blocks=3,
        length=32_768,
    )


def falcon_h1(tp):
    """Falcon-H1: every layer both attention (2 KV heads x 128) and Mamba-2 (24 heads x 128,
    1 group, d_state 256, conv 4, d_ssm 3072 = 24 x 128, bf16): 44 + 44 layers, one group each."""
    state = mamba2_state(tp, heads=24, head_dim=128, groups=1, d_state=256, conv=4, ssm_dtype=BF16)
    return hybrid(
        state_bytes=state,
        token_bytes=kv_token_bytes(2, 128, tp),
        n_states=44,
        n_attention=44,
        state_blocks=3,
        length=32_768,
    )


def zamba2(tp):
    """Zamba2: 112 Mamba-2 heads x 64, 2 groups, d_state 64, conv 4, bf16; 13 shared attention
    layers, num_kv_heads = num_heads / tp = 32 / tp, head 2 x 3584 / 32 = 224; 81 Mamba layers;
    max_model_len 4096 (the config's own)."""
    state = mamba2_state(tp, heads=112, head_dim=64, groups=2, d_state=64, conv=4, ssm_dtype=BF16)
    return hybrid(
        state_bytes=state,
        token_bytes=2 * (32 // tp) * 224 * BF16,
        n_states=81,
        n_attention=13,
        state_blocks=3,
        length=4096,
    )


def lfm2(tp):
    """LFM2-1.2B: short conv (conv_dim 2048 / tp, conv_L_cache 3 - 1) bf16; 10 conv + 6 attention
    (8 KV heads x 2048 / 32 = 64); a short-conv state holds 2 blocks in align mode."""
    state = 2048 // tp * 2 * BF16
    return hybrid(
        state_bytes=state,
        token_bytes=kv_token_bytes(8, 64, tp),
        n_states=10,
        n_attention=6,
        state_blocks=2,
        length=32_768,
    )


def qwen3_next(tp):
    """Qwen3-Next-80B-A3B: GDN with 16 key heads x 128, 32 value heads x 128, conv 4
    (gated_delta_net_state_shape: conv ((2 x 16 x 128 + 32 x 128) / tp, 3) bf16, recurrent
    (32 / tp, 128, 128) bf16, mamba_ssm_cache_dtype auto); 36 GDN + 12 attention (2 KV heads x
    256); align mode on Hopper: k = lcm(16, 64) = 64, a GDN state holds 3 blocks."""
    conv_dim = 2 * 16 * 128 + 32 * 128
    state = conv_dim // tp * 3 * BF16 + 32 // tp * 128 * 128 * BF16
    return hybrid(
        state_bytes=state,
        token_bytes=kv_token_bytes(2, 256, tp),
        n_states=36,
        n_attention=12,
        state_blocks=3,
        length=32_768,
        k=math.lcm(16, 64),
    )


def kimi_linear(tp):
    """Kimi-Linear: KDA 32 heads x 128, kernel 4 (kda_state_shape: conv (3 x 32 x 128 / tp, 3)
    bf16, recurrent (32 / tp, 128, 128) float32); 20 KDA + 7 MLA (576 bf16 a token, unsharded);
    MLA hybrid: k = max(16, 128) = 128; KDA holds 2 blocks; max_model_len 4096."""
    state = 3 * 32 * 128 // tp * 3 * BF16 + 32 // tp * 128 * 128 * FP32
    return hybrid(
        state_bytes=state, token_bytes=576 * BF16, n_states=20, n_attention=7, state_blocks=2, length=4096, k=128
    )


# model -> (TP -> Expected); a TP missing from TPS_FOR is one vLLM refuses (tested below).
CASES = {
    "llama-3.1-8b": lambda tp: dense(tp, layers=32, kv=8, head_dim=128),
    "mistral-7b-v0.1": lambda tp: all_sliding(tp, layers=32, kv=8, head_dim=128, window=4096),
    "gemma-3-27b": lambda tp: sliding_and_full(tp, sliding=52, full=10, kv=16, head_dim=128, window=1024),
    "gpt-oss-120b": lambda tp: sliding_and_full(tp, sliding=18, full=18, kv=8, head_dim=64, window=128),
    "llama-4-scout": lambda tp: chunked_and_full(tp, chunked=36, full=12, kv=8, head_dim=128, chunk=8192),
    "gemma-3n-e4b": lambda tp: sliding_and_full(tp, sliding=16, full=4, kv=2, head_dim=256, window=512),
    "deepseek-v3": lambda tp: mla(tp, layers=61),
    "kimi-k2": lambda tp: mla(tp, layers=61),
    "jamba-v0.1": jamba,
    "nemotron-nano-9b-v2": nemotron_h,
    "falcon-h1": falcon_h1,
    "zamba2": zamba2,
    "lfm2-1.2b": lfm2,
    "qwen3-next-80b-a3b": qwen3_next,
    "kimi-linear": kimi_linear,
}
# Falcon-H1: 12 attention heads, not divisible by 8. Zamba2: 2 Mamba-2 groups, neither divisible
# by 4 or 8 nor 1 (MambaMixer2.__init__).
TPS_FOR = {"falcon-h1": (1, 2, 4), "zamba2": (1, 2)}
PAIRS = [(m, tp) for m in CASES for tp in TPS_FOR.get(m, TPS)]


def kvviz_plan(model: str, tp: int, length: int, **knobs):
    return plan_model(load_preset(model), None, Options(tensor_parallel_size=tp, max_model_len=length, **knobs))


@pytest.mark.parametrize("model,tp", PAIRS)
def test_one_rank_matches_vllms_rules(model, tp):
    want = CASES[model](tp)
    plan = kvviz_plan(model, tp, want.length)
    cap = plan.capacity(BUDGET)
    pages = {c.page_bytes for g in plan.layout.groups for c in g.layers}
    assert (plan.tokens_per_block, pages) == (want.block, {want.page})
    assert cap.bytes_per_block == want.bytes_per_block
    assert cap.blocks_per_request == want.blocks_per_request
    assert cap.num_blocks == BUDGET // want.bytes_per_block
    assert cap.line == want.line()


@pytest.mark.parametrize("model", list(CASES))
def test_the_cli_prints_vllms_capacity_line_at_each_tp(model, capsys):
    """`kvviz plan --model M --tensor-parallel-size N --kv-cache-memory-bytes B` ends with the line."""
    for tp in TPS_FOR.get(model, TPS):
        want = CASES[model](tp)
        rc = main(
            [
                "plan",
                "--model",
                model,
                "--tensor-parallel-size",
                str(tp),
                "--kv-cache-memory-bytes",
                str(BUDGET),
                "--max-model-len",
                str(want.length),
            ]
        )
        out, err = capsys.readouterr()
        assert rc == 0, err
        assert want.line() in out.splitlines(), (tp, out[-400:])


def test_qwen3_next_block_falls_only_once_the_kv_heads_are_replicated():
    """_align_hybrid_block_size with per-rank sizes, Qwen3-Next (align mode, k = 64):
    TP 1: state 3 x 8192 x 2 + 32 x 128 x 128 x 2 = 1,097,728 B; 2 KV heads x 256 x 2 x 2 = 2,048 B
          a token; 64 x cdiv(1,097,728, 64 x 2,048 = 131,072) = 64 x 9 = 576.
    TP 2: 548,864 B; 1 KV head: 1,024 B a token; 64 x cdiv(548,864, 65,536) = 64 x 9 = 576.
    TP 4: 274,432 B; still 1 KV head (max(1, 2 // 4)): 64 x cdiv(274,432, 65,536) = 64 x 5 = 320.
    TP 8: 137,216 B; 64 x cdiv(137,216, 65,536) = 64 x 3 = 192."""
    assert [qwen3_next(tp).block for tp in TPS] == [576, 576, 320, 192]
    assert [kvviz_plan("qwen3-next-80b-a3b", tp, 32_768).tokens_per_block for tp in TPS] == [576, 576, 320, 192]


def test_mla_is_not_sharded_so_tp_leaves_the_rank_unchanged():
    lines = {kvviz_plan("deepseek-v3", tp, 32_768).capacity(BUDGET).line for tp in TPS}
    assert lines == {mla(1, layers=61).line()}


def test_deepseek_v4_takes_tp_and_shards_no_cache():
    """DeepSeek V4 (models/deepseek_v4/): every spec is num_kv_heads=1, max_tp_shards=1 and the
    compressor state is 2 x coff x head_dim wide, so one rank's pages and blocks are TP 1's."""
    base = kvviz_plan("deepseek-v4-flash", 1, 32_768).capacity(BUDGET)
    for tp in TPS[1:]:
        cap = kvviz_plan("deepseek-v4-flash", tp, 32_768).capacity(BUDGET)
        assert (cap.bytes_per_block, cap.blocks_per_request, cap.line) == (
            base.bytes_per_block,
            base.blocks_per_request,
            base.line,
        )


def test_deepseek_v4_refuses_a_tp_that_does_not_divide_its_heads():
    """DeepseekV4MLAAttention: assert n_heads % tp_size == 0 (DeepSeek-V4-Flash: 64 heads)."""
    import json
    from importlib.resources import files

    from kvviz.families import model_from_dict
    from kvviz.families.deepseek_v4 import DeepSeekV4Family  # noqa: F401  (registers the family)

    raw = json.loads((files("kvviz") / "presets" / "deepseek-v4-flash.json").read_text())
    model = model_from_dict({**raw, "num_attention_heads": 64}, name="dsv4-64")
    plan_model(model, None, Options(tensor_parallel_size=8))  # 64 / 8
    with pytest.raises(KvvizError, match=r"^tensor_parallel_size=3: dsv4-64's 64 attention heads are not divisible"):
        plan_model(model, None, Options(tensor_parallel_size=3))


@pytest.mark.parametrize(
    "model,tp,match",
    [
        ("llama-3.1-8b", 3, r"tensor_parallel_size=3: .*32 attention heads"),  # verify_with_parallel_config
        ("falcon-h1", 8, r"tensor_parallel_size=8: falcon-h1's 12 attention heads"),
        ("zamba2", 4, r"tensor_parallel_size=4: zamba2's 2 mamba groups"),  # MambaMixer2.__init__
        ("gemma-3n-e4b", 16, r"tensor_parallel_size=16: .*8 attention heads"),
        ("qwen3-next-80b-a3b", 3, r"tensor_parallel_size=3: "),
    ],
)
def test_tps_vllm_refuses_are_refused(model, tp, match):
    with pytest.raises(KvvizError, match=match):
        plan_model(load_preset(model), None, Options(tensor_parallel_size=tp))


# ---- decode context parallel -------------------------------------------------------------------------


def test_dcp_divides_full_attention_and_mla_tokens():
    """FullAttentionSpec.max_memory_usage_bytes: cdiv(cdiv(L, dcp), block) blocks a request; the
    per-rank page is unchanged. Kimi-K2 at TP 8, DCP 8: cdiv(4096, 16) = 256 blocks (2,048 at DCP 1).
    Llama-3.1-8B at TP 16 (1 KV head a rank, two replicas each), DCP 2: cdiv(16384, 16) = 1,024."""
    want = mla(8, layers=61, dcp=8)
    cap = kvviz_plan("kimi-k2", 8, 32_768, decode_context_parallel_size=8).capacity(BUDGET)
    assert (cap.blocks_per_request, cap.line) == (256, want.line())
    llama = dense(16, layers=32, kv=8, head_dim=128)
    llama = dataclasses.replace(llama, blocks_per_request=cdiv(cdiv(32_768, 2), 16))
    cap = kvviz_plan("llama-3.1-8b", 16, 32_768, decode_context_parallel_size=2).capacity(BUDGET)
    assert (cap.blocks_per_request, cap.line) == (1024, llama.line())


def test_dcp_leaves_state_blocks_alone():
    """MambaSpec is not dcp_sharded: Qwen3-Next TP 4 DCP 2 (2 KV heads < 4; 16 / 2 = 8 query heads a
    KV head, divisible by 2): attention cdiv(cdiv(32768, 2), 320) = 52, states 3 x 3 = 9."""
    cap = kvviz_plan("qwen3-next-80b-a3b", 4, 32_768, decode_context_parallel_size=2).capacity(BUDGET)
    want = dataclasses.replace(qwen3_next(4), blocks_per_request=cdiv(16_384, 320) + 9)
    assert (cap.blocks_per_request, cap.line) == (52 + 9, want.line())


@pytest.mark.parametrize(
    "model,tp,dcp,match",
    [
        ("llama-3.1-8b", 4, 3, r"tensor_parallel_size=4 must be divisible by it"),  # ParallelConfig
        ("llama-3.1-8b", 8, 2, r"requires tensor_parallel_size \(8\) to be greater than .* KV heads \(8\)"),
        ("llama-3.1-8b", 16, 4, r"exceeds the maximum supported value \(2\)"),
        ("llama-4-scout", 40, 5, None),  # 40 heads / 8 KV = 5 query heads a KV head; tp // kv = 5: accepted
        ("llama-4-scout", 40, 2, r"query heads per KV head \(5\) must be divisible by it"),
        ("mistral-7b-v0.1", 16, 2, r"DCP not support sliding window"),  # SlidingWindowSpec assert
        ("gpt-oss-120b", 16, 2, r"DCP not support sliding window"),
        ("deepseek-v4-flash", 8, 2, r"DCP not support sliding window"),  # SlidingWindowMLASpec
    ],
)
def test_dcp_refusals_are_vllms(model, tp, dcp, match):
    options = Options(tensor_parallel_size=tp, decode_context_parallel_size=dcp, max_model_len=32_768)
    if match is None:
        plan_model(load_preset(model), None, options)
        return
    with pytest.raises(KvvizError, match=r"^decode_context_parallel_size=" + f"{dcp}: .*" + match):
        plan_model(load_preset(model), None, options)


def test_the_cli_names_the_dcp_flag(capsys):
    """A refused DCP is one line naming --decode-context-parallel-size (Llama-3.1-8B at TP 32: 32 / 8
    = 4 query heads a KV head and tp // kv = 4, so DCP 4 is taken and DCP 8 exceeds the maximum)."""
    rc = main(
        [
            "plan",
            "--model",
            "llama-3.1-8b",
            "--tensor-parallel-size",
            "32",
            "--decode-context-parallel-size",
            "4",
            "--kv-cache-memory-bytes",
            str(BUDGET),
            "--max-model-len",
            "32768",
        ]
    )
    out, err = capsys.readouterr()
    assert rc == 0, err
    rc = main(
        [
            "plan",
            "--model",
            "llama-3.1-8b",
            "--tensor-parallel-size",
            "32",
            "--decode-context-parallel-size",
            "8",
            "--kv-cache-memory-bytes",
            str(BUDGET),
        ]
    )
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("kvviz: error: --decode-context-parallel-size")
    assert "exceeds the maximum supported value (4)" in lines[0]


def test_json_carries_the_dcp_and_the_line(capsys):
    """`--json`: the scheduling a request's blocks were counted with, and vLLM's line."""
    import json

    rc = main(
        [
            "plan",
            "--model",
            "kimi-k2",
            "--tensor-parallel-size",
            "8",
            "--decode-context-parallel-size",
            "8",
            "--kv-cache-memory-bytes",
            str(BUDGET),
            "--max-model-len",
            "32768",
            "--json",
        ]
    )
    out, err = capsys.readouterr()
    assert rc == 0, err
    data = json.loads(out)
    assert data["scheduling"]["decode_context_parallel_size"] == 8
    assert data["capacity_line"] == mla(8, layers=61, dcp=8).line()
    assert data["summary"]["num_blocks"] == BUDGET // (61 * 16 * 576 * BF16)


def test_other_engines_refuse_dcp_rather_than_ignore_it(capsys):
    rc = main(
        [
            "plan",
            "--model",
            "kimi-k2",
            "--engine",
            "sglang",
            "--tensor-parallel-size",
            "8",
            "--decode-context-parallel-size",
            "8",
            "--budget-gib",
            "20",
        ]
    )
    out, err = capsys.readouterr()
    assert rc == 2 and err.strip().startswith("kvviz: error: --decode-context-parallel-size:"), err
