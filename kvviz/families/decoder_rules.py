"""The attention decoders' record (`DecoderRecord`: what kvviz believes an attention decoder's vLLM 0.33 model
file does) and the rules its fields name where a model file (vllm/model_executor/models/<file>.py) computes
something of its own: KV heads and head sizes, looped / stacked layers, what a model file refuses of a config
or asserts of a run, and vLLM's own config classes (their defaults and fill-ins). The records themselves:
kvviz.families.decoder_records. Each rule cites the function it mirrors.

A heads rule takes (text config, attention heads, KV heads, head size, layers) and returns (KV heads,
head size, per-layer (KV heads, head size) or ()); a looped rule returns (vLLM's cache names, each one's
layer kind) in registration order; a check takes (model, options, tp) and refuses in one line.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, ClassVar

from kvviz.base.errors import require
from kvviz.base.inputs import MAX_DIM, MAX_LAYERS, bounded_int
from kvviz.families.decoder_mix import config_layer_kinds
from kvviz.families.hf_bounds import field
from kvviz.families.record import JSON, VLLM, Read, Record

HEAD_DIM = "head_dim"  # config.head_dim (when > 0), else hidden_size // num_attention_heads
FROM_HIDDEN = "hidden_size // num_attention_heads"  # whatever config.head_dim says
LM = "language_model."  # maybe_prefix(prefix, "language_model"): a multimodal class's language model


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class DecoderRecord(Record):
    """An attention-only decoder (kvviz.families.decoder): every layer registers one K|V cache (full, sliding
    window or chunked local), or none where it shares another layer's KV. Its model file's rules:

    * `head_size` (HEAD_DIM or FROM_HIDDEN), `heads` (a rule of its own: KV heads / head size, decoder_rules),
      `per_layer` (per-layer heads: the global fields are not read);
    * `layer_kinds` (layer_types / a config-wide window, gpt-oss's alternation, Llama 4's no_rope_layers),
      `layer_plan` (the file decides each layer's cache: decoder_layers), `kind_heads` (each layer kind its own
      heads and window: decoder_kinds), `looped` (caches not one per decoder layer), `window_offset` (a sliding
      layer sees window + offset tokens), `share_by_kind` (KV-shared layers reuse the last earlier layer of
      their own kind, Gemma 4; else Gemma 3n's rule);
    * `layer_names` ((prefix, suffix) of `{prefix}.{i}.{suffix}`), `prefix` (the language model's prefix in a
      multimodal class);
    * `backend` (vLLM's Transformers backend builds it), `cache_dtype_fixed` (its Attention gets no
      cache_config: the model dtype whatever kv_dtype says), `refuse` (what it refuses of a config), `checks`
      (what it asserts of a run), `extra_kinds` (layer_types entries it reads besides the attention kinds)."""

    family: ClassVar[str] = "decoder"

    head_size: str = HEAD_DIM
    heads: Callable | None = None
    per_layer: bool = False
    layer_kinds: Callable = config_layer_kinds
    layer_plan: Callable | None = None
    kind_heads: Callable | None = None
    looped: Callable | None = None
    window_offset: int = 0
    share_by_kind: bool = False
    layer_names: tuple[str, str] = ("model.layers", "self_attn.attn")
    prefix: str = ""
    backend: bool = False
    cache_dtype_fixed: bool = False
    refuse: Callable | None = None
    checks: tuple[Callable, ...] = ()
    extra_kinds: tuple[str, ...] = ()


def chatglm_kv(text, heads: int, kv: int, head_dim: int, n: int, *, name: str):
    """chatglm.py GLMAttention.__init__: multi_query_group_num KV heads if multi_query_attention, else every
    head."""
    if not getattr(text, "multi_query_attention", False):
        return heads, head_dim, ()
    kv = bounded_int(
        getattr(text, "multi_query_group_num", None), field=f"{name}: multi_query_group_num", low=1, high=MAX_DIM
    )
    return kv, head_dim, ()


def step1_kv(text, heads: int, kv: int, head_dim: int, n: int, *, name: str):
    """step1.py StepAttention.__init__: num_attention_groups, else num_key_value_heads, else 1 (and 1 for a
    value that is None or <= 0)."""
    kv = getattr(text, "num_attention_groups", getattr(text, "num_key_value_heads", 1))
    if kv is None or (isinstance(kv, int) and not isinstance(kv, bool) and kv <= 0):
        return 1, head_dim, ()
    return bounded_int(kv, field=f"{name}: num_attention_groups", low=1, high=MAX_DIM), head_dim, ()


def dbrx_kv(text, heads: int, kv: int, head_dim: int, n: int, *, name: str):
    """dbrx.py DbrxAttention.__init__: config.attn_config.kv_n_heads."""
    attn = getattr(text, "attn_config", None)
    kv = attn.get("kv_n_heads") if isinstance(attn, dict) else getattr(attn, "kv_n_heads", None)
    return bounded_int(kv, field=f"{name}: attn_config.kv_n_heads", low=1, high=MAX_DIM), head_dim, ()


def minicpm3_heads(text, heads: int, kv: int, head_dim: int, n: int, *, name: str):
    """minicpm3.py MiniCPM3Attention.__init__: Attention(num_local_heads, qk_nope_head_dim + qk_rope_head_dim,
    num_kv_heads=num_local_heads)."""
    nope, rope = field(text, "qk_nope_head_dim", model=name), field(text, "qk_rope_head_dim", model=name)
    return heads, nope + rope, ()


def all_heads_kv(text, heads: int, kv: int, head_dim: int, n: int, *, name: str):
    """hrm_text.py HrmTextAttention.__init__: total_num_kv_heads = num_attention_heads."""
    return heads, head_dim, ()


def falcon_heads(text, heads: int, kv: int, head_dim: int, n: int, *, name: str):
    """falcon.py FalconAttention.__init__: num_kv_heads with new_decoder_architecture, else 1 if multi_query,
    else every head."""
    if getattr(text, "new_decoder_architecture", False):
        return field(text, "num_kv_heads", model=name, required=False, default=heads), head_dim, ()
    return (1 if getattr(text, "multi_query", True) else heads), head_dim, ()


def per_layer_heads(text, heads: int, kv: int, head_dim: int, n: int, *, name: str):
    """gemma4.py Gemma4DecoderLayer.__init__: layer i's KV heads and head size are
    config.per_layer_config[i].num_key_value_heads / .head_dim (the first layer's stand for the model)."""
    per_layer = getattr(text, "per_layer_config", None)
    require(per_layer is not None and len(per_layer) == n, f"{name}: config has no per_layer_config for {n} layers")
    pairs = []
    for i in range(n):
        lc = per_layer[i]
        k = bounded_int(
            lc.num_key_value_heads, field=f"{name}: per_layer_config[{i}].num_key_value_heads", low=1, high=MAX_DIM
        )
        pairs.append(
            (k, bounded_int(lc.head_dim, field=f"{name}: per_layer_config[{i}].head_dim", low=1, high=MAX_DIM))
        )
    for i, (k, _) in enumerate(pairs):
        require(heads % k == 0, f"{name}: per_layer_config[{i}].num_key_value_heads={k}: must divide {heads} heads")
    return pairs[0][0], pairs[0][1], tuple(pairs)


def _count(text, key: str, *, name: str, low: int = 1) -> int:
    return bounded_int(getattr(text, key, None), field=f"{name}: {key}", low=low, high=MAX_LAYERS)


def cosmos3_edge_layers(text, *, name: str):
    """cosmos3_edge.py _to_nemotron_h_config: layers_block_type ["full_attention", "mlp"] x num_hidden_layers,
    so text layer i is Nemotron-H layer 2i, Cosmos3EdgeAttentionDecoderLayer's mixer (.mixer.attn)."""
    n = _count(text, "num_hidden_layers", name=name)
    return tuple(f"model.layers.{2 * i}.mixer.attn" for i in range(n)), ("full_attention",) * n


def hrm_layers(text, *, name: str):
    """hrm_text.py HrmTextModel: the L_module stack is built before the H_module one; in each, layer k of
    num_layers_per_stack registers one PrefillPrefixLMAttention per recurrence step it runs at (L: steps
    h x (L_cycles + 1) + l, H: h x (L_cycles + 1) + L_cycles, h < H_cycles, l < L_cycles), named
    model.{L,H}_module.layers.{step x num_layers_per_stack + k}.self_attn.attn; all full attention."""
    h, low, per = (_count(text, k, name=name) for k in ("H_cycles", "L_cycles", "num_layers_per_stack"))
    names = []
    for stack, steps in (
        ("L", [c * (low + 1) + j for c in range(h) for j in range(low)]),
        ("H", [c * (low + 1) + low for c in range(h)]),
    ):
        for k in range(per):
            names += [f"model.{stack}_module.layers.{step * per + k}.self_attn.attn" for step in steps]
    return tuple(names), ("full_attention",) * len(names)


def dory_layers(text, *, name: str):
    """dory.py DoryBackbone: layer i of num_hidden_layers is attention unless layer_types[i] == 'mlp'; an
    attention layer of the recurrent range [n_input_layers, n_input_layers + n_recurrent_layers) registers
    n_recurrent_loops caches when recurrent_kv_cache_mode == 'per_loop' (else one), loop j named
    backbone.layers.{j x num_hidden_layers + i}.mixer.attn; sliding_attention layers carry config.sliding_window
    (DoryAttention per_layer_sliding_window)."""
    n = _count(text, "num_hidden_layers", name=name)
    types = getattr(text, "layer_types", None)
    require(isinstance(types, (list, tuple)) and len(types) == n, f"{name}: layer_types: must list {n} layers")
    first, recurrent = (
        _count(text, "n_input_layers", name=name, low=0),
        _count(text, "n_recurrent_layers", name=name, low=0),
    )
    loops = _count(text, "n_recurrent_loops", name=name)
    per_loop = getattr(text, "recurrent_kv_cache_mode", None) == "per_loop"
    names, kinds = [], []
    for i, kind in enumerate(types):
        require(
            kind in ("full_attention", "sliding_attention", "mlp"),
            f"{name}: layer_types[{i}]={kind!r}: Dory layers are full_attention, sliding_attention or mlp",
        )
        if kind == "mlp":
            continue
        for j in range(loops if per_loop and first <= i < first + recurrent else 1):
            names.append(f"backbone.layers.{j * n + i}.mixer.attn")
            kinds.append(kind)
    return tuple(names), tuple(kinds)


def refuse_rswa(text, *, name: str) -> None:
    """deepseek_v2.py DeepseekAttention: a config with rswa_window builds RSWAAttention, not modelled for
    DeepSeek V1."""
    require(
        getattr(text, "rswa_window", None) is None,
        f"{name}: rswa_window: vLLM's RSWAAttention (deepseek_v2.py DeepseekAttention) is not modelled",
    )


def refuse_without_original_rope(text, *, name: str) -> None:
    """chatglm.py GLMAttention.__init__ reads `not config.original_rope`, which vLLM's ChatGLMConfig does not
    default: vLLM fails without it (AttributeError)."""
    require(
        hasattr(text, "original_rope"),
        f"{name}: config is missing field 'original_rope' (vLLM's chatglm.py GLMAttention reads it)",
    )


def one_gpu(model, options, tp: int) -> None:
    """dory.py DoryForCausalLM.__init__: one GPU only."""
    require(tp == 1, f"tensor_parallel_size={tp}: vLLM's Dory runs on one GPU only (dory.py DoryForCausalLM.__init__)")


def kv_heads_split(model, options, tp: int) -> None:
    """param2moe.py Param2MoEAttention.__init__: assert num_key_value_heads % tp_size == 0 (KV heads are split
    over TP, never replicated)."""
    c = model.config
    require(
        c.num_key_value_heads % tp == 0,
        f"tensor_parallel_size={tp}: {model.name}'s {c.num_key_value_heads} KV heads are not divisible by it "
        f"(vLLM's {model.model_type}.py attention asserts it)",
    )


def bf16_only(model, options, tp: int) -> None:
    """flint/model.py FlintAttention.__init__: asserts a bfloat16 model and KV cache."""
    dtype = options.kv_dtype or model.dtype
    require(dtype == "bf16", f"kv_dtype={dtype}: vLLM's Flint asserts a bfloat16 model and KV cache (flint/model.py)")


def beam_fill(out: dict) -> dict:
    """transformers_utils/configs/beam.py BeamConfig.__init__: every layer sliding when layer_types is None."""
    if out["layer_types"] is None:
        out["layer_types"] = ["sliding_attention"] * out["num_hidden_layers"]
    return out


def flint_fill(out: dict) -> dict:
    """vllm/models/flint/configs.py FlintConfig.__init__: no window unless use_sliding_window; every layer full."""
    out["sliding_window"] = out["sliding_window"] if out["use_sliding_window"] else None
    out["layer_types"] = out["layer_types"] or ["full_attention"] * out["num_hidden_layers"]
    return out


def dory_fill(out: dict) -> dict:
    """transformers_utils/configs/dory.py DoryConfig.__post_init__: layer_types (odd layers MLP, layer i % 8 == 6
    full attention, the rest sliding) and n_recurrent_layers (the layers between the input and output ones)."""
    n = out["num_hidden_layers"]
    if out["layer_types"] is None:
        out["layer_types"] = [
            "mlp" if i % 2 else "full_attention" if i % 8 == 6 else "sliding_attention" for i in range(n)
        ]
    if out["n_recurrent_layers"] is None:
        first, last = out["n_input_layers"], out["n_output_layers"]
        if all(isinstance(x, int) for x in (first, last)):
            out["n_recurrent_layers"] = n - first - last
    return out


# vLLM's own config classes of attention decoders (transformers_utils/configs/, or the model's package): the
# defaults of the fields a reader reads, and their __post_init__ fill-ins above
CHATGLM_CONFIG = Read(
    how=JSON,
    cls="transformers_utils/configs/chatglm.py ChatGLMConfig",
    aliases={"num_hidden_layers": "num_layers", "max_position_embeddings": "seq_length"},
    defaults=dict(
        num_layers=28,
        hidden_size=4096,
        num_attention_heads=32,
        seq_length=2048,
        multi_query_attention=False,
        multi_query_group_num=1,
    ),
    only=("chatglm",),
)
BEAM_CONFIG = Read(
    how=VLLM,
    cls="transformers_utils/configs/beam.py BeamConfig",
    defaults=dict(
        hidden_size=2048,
        num_hidden_layers=24,
        num_attention_heads=32,
        num_key_value_heads=4,
        head_dim=None,
        max_position_embeddings=32768,
        sliding_window=4096,
        layer_types=None,
    ),
    fill=beam_fill,
    only=("beam",),
)
FLINT_CONFIG = Read(
    how=VLLM,
    cls="models/flint/configs.py FlintConfig",
    defaults=dict(
        hidden_size=2048,
        num_hidden_layers=49,
        num_attention_heads=32,
        num_key_value_heads=4,
        head_dim=128,
        max_position_embeddings=262144,
        use_sliding_window=True,
        sliding_window=513,
        layer_types=None,
    ),
    fill=flint_fill,
    only=("flint",),
)
DORY_CONFIG = Read(
    how=VLLM,
    cls="transformers_utils/configs/dory.py DoryConfig",
    defaults=dict(
        hidden_size=2560,
        num_hidden_layers=72,
        num_attention_heads=16,
        num_key_value_heads=4,
        head_dim=256,
        max_position_embeddings=8192,
        sliding_window=1024,
        layer_types=None,
        n_input_layers=0,
        n_recurrent_layers=None,
        n_output_layers=0,
        n_recurrent_loops=1,
        recurrent_kv_cache_mode="per_loop",
    ),
    fill=dory_fill,
    only=("dory",),
)
STEP3_TEXT_CONFIG = Read(
    how=VLLM,
    cls="transformers_utils/configs/step3_vl.py Step3TextConfig",
    defaults=dict(
        hidden_size=7168,
        num_attention_heads=64,
        num_attention_groups=1,
        num_hidden_layers=61,
        max_seq_len=65536,
        max_position_embedding=65536,
        head_dim=256,
    ),
    only=("step3_text",),
)
