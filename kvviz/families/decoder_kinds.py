"""Attention-only decoders whose layer kinds carry their own KV heads, head sizes and windows, or whose KV
heads are not the config's (issue 27): the rule of each vLLM 0.33 model file (vllm/model_executor/models/),
read into the fields of kvviz.families.decoder.DecoderConfig (each record's `kind_heads(text, n, name=...)`).

* MiMo-V2 / MiMo-V2-Flash (mimo_v2.py MiMoV2FlashDecoderLayer.__init__, MiMoV2Attention.__init__): layer i is
  a sliding ("compressed softmax") layer when hybrid_layer_pattern[i] == 1: swa_num_attention_heads,
  swa_num_key_value_heads, K head size swa_head_dim, V head size swa_v_head_dim (else swa_head_dim),
  window sliding_window_size (None where it is -1 or less); every other layer is full attention with
  num_attention_heads, num_key_value_heads, head_dim, v_head_dim (else head_dim). The layer sets
  cache_config.sliding_window to None, so config.sliding_window (and transformers' sliding_window_size + 1)
  is never a layer's window; attention_chunk_size is deleted from the config
  (transformers_utils/model_arch_config_convertor.py _strip_mimo_v2_attention_chunk_size);
* Step 3.5 (step3p5.py Step3p5DecoderLayer.__init__): layer i's kind is layer_types[i] (MTP layers, past
  num_hidden_layers, are the drafter's); KV heads num_attention_groups on every layer; query heads
  num_sliding_attention_heads on sliding layers, per_layer_config[i].num_attention_heads where the config is
  heterogeneous, else num_attention_heads (_get_num_attention_heads); head size head_dim, else hidden_size //
  that layer's query heads (Step3p5Attention.__init__); a sliding layer's window config.sliding_window
  (cache_config.sliding_window is set to None);
* Step 3 text (step3_text.py Step3TextDecoderLayer.__init__ -> Step3TextAttention.__init__): num_kv_heads=1
  passed as a literal, whatever num_attention_groups says, and never divided by TP (the K/V projection is a
  ReplicatedLinear): one KV head on every rank, which kv_heads_per_rank(1, tp) = max(1, 1 // tp) gives;
  head_dim, every layer full attention.

TP (kvviz.families.decoder DecoderFamily.caches): every layer's KV heads per rank are max(1, heads // tp)
(MiMoV2Attention / Step3p5Attention); each query head count in `tp_heads` must divide by TP as well.

`mimo_omni` (the MiMo records' `convert`, applied by kvviz.families.loader.model_from_dict): the architecture
vLLM builds where its config convertor rewrites the config's own (a MiMo config with a vision_config is
MiMoV2OmniForCausalLM).
"""

from __future__ import annotations

from kvviz.base.errors import require
from kvviz.base.inputs import MAX_DIM, bounded_int
from kvviz.families.hf_bounds import field

FULL, SLIDING = "full_attention", "sliding_attention"


def _int(text, key: str, *, name: str, default=None) -> int:
    value = field(text, key, model=name, required=default is None, default=default)
    return bounded_int(value, field=f"{name}: {key}", low=1, high=MAX_DIM)


def _heads_divide(heads: int, kv: int, where: str, *, name: str) -> None:
    require(heads % kv == 0, f"{name}: {where}: {kv} KV heads must divide {heads} attention heads")


def mimo_v2_kinds(text, n: int, *, name: str) -> dict:
    """mimo_v2.py MiMoV2FlashDecoderLayer.__init__: hybrid_layer_pattern[i] == 1 is a sliding layer of the
    swa_* heads."""
    pattern = getattr(text, "hybrid_layer_pattern", None)
    require(
        isinstance(pattern, (list, tuple)) and len(pattern) == n,
        f"{name}: hybrid_layer_pattern must list one entry per layer ({n}) (vLLM mimo_v2.py)",
    )
    heads, kv, head = (_int(text, k, name=name) for k in ("num_attention_heads", "num_key_value_heads", "head_dim"))
    _heads_divide(heads, kv, "num_key_value_heads", name=name)
    full = (kv, head, _int(text, "v_head_dim", name=name, default=head))
    kinds, layer_heads, tp_heads, window = [], [], [], None
    if any(p == 1 for p in pattern):
        swa_heads, swa_kv, swa_head = (
            _int(text, k, name=name) for k in ("swa_num_attention_heads", "swa_num_key_value_heads", "swa_head_dim")
        )
        _heads_divide(swa_heads, swa_kv, "swa_num_key_value_heads", name=name)
        swa = (swa_kv, swa_head, _int(text, "swa_v_head_dim", name=name, default=swa_head))
        size = getattr(text, "sliding_window_size", None)
        require(
            isinstance(size, int) and not isinstance(size, bool),
            f"{name}: sliding_window_size={size!r}: must be an integer (vLLM mimo_v2.py)",
        )
        window = size if size > -1 else None  # MiMoV2Attention: -1 or less is no window
        tp_heads.append(swa_heads)
    for p in pattern:
        kinds.append(SLIDING if p == 1 and window else FULL)
        layer_heads.append(swa if p == 1 else full)
    return dict(
        num_attention_heads=heads,
        num_key_value_heads=kv,
        head_dim=head,
        layer_kinds=tuple(kinds),
        sliding_window=window if SLIDING in kinds else None,
        kind_source="hybrid_layer_pattern: 1 is a sliding layer with the swa_* heads (vLLM mimo_v2.py)",
        layer_heads=tuple(layer_heads),
        tp_heads=tuple(tp_heads),
    )


def _step3p5_heads(text, i: int, kind: str, *, name: str) -> int:
    """step3p5.py _get_num_attention_heads."""
    if kind == SLIDING:
        if sliding := getattr(text, "num_sliding_attention_heads", None):
            return bounded_int(sliding, field=f"{name}: num_sliding_attention_heads", low=1, high=MAX_DIM)
        other = getattr(text, "attention_other_setting", None) or {}
        if isinstance(other, dict) and other.get("attention_type") == kind:
            return bounded_int(
                other.get("num_attention_heads"),
                field=f"{name}: attention_other_setting.num_attention_heads",
                low=1,
                high=MAX_DIM,
            )
    if getattr(text, "is_heterogeneous", False):  # transformers' per-layer config: the global read refuses
        return bounded_int(
            text.per_layer_config[i].num_attention_heads,
            field=f"{name}: per_layer_config[{i}].num_attention_heads",
            low=1,
            high=MAX_DIM,
        )
    return _int(text, "num_attention_heads", name=name)


def step3p5_kinds(text, n: int, *, name: str) -> dict:
    """step3p5.py Step3p5DecoderLayer.__init__: layer_types; num_attention_groups KV heads; query heads per kind."""
    types = [*(getattr(text, "layer_types", None) or []), *(getattr(text, "mtp_layer_types", None) or [])]
    require(len(types) >= n, f"{name}: layer_types has {len(types)} entries, num_hidden_layers is {n}")
    kv = _int(text, "num_attention_groups", name=name)
    head_dim = getattr(text, "head_dim", None)
    window = getattr(text, "sliding_window", None)
    kinds, layer_heads, q_heads = [], [], []
    for i, kind in enumerate(types[:n]):
        require(kind in (FULL, SLIDING), f"{name}: layer_types[{i}]={kind!r}: kvviz knows {FULL}, {SLIDING}")
        heads = _step3p5_heads(text, i, kind, name=name)
        _heads_divide(heads, kv, f"layer {i}", name=name)
        size = head_dim or _int(text, "hidden_size", name=name) // heads
        bounded_int(size, field=f"{name}: head_dim", low=1, high=MAX_DIM)
        kinds.append(SLIDING if kind == SLIDING and window else FULL)
        layer_heads.append((kv, size))
        q_heads.append(heads)
    return dict(
        num_attention_heads=q_heads[0],
        num_key_value_heads=kv,
        head_dim=layer_heads[0][1],
        layer_kinds=tuple(kinds),
        sliding_window=window if SLIDING in kinds else None,
        kind_source="layer_types; KV heads num_attention_groups (vLLM step3p5.py Step3p5DecoderLayer)",
        layer_heads=tuple(layer_heads) if len(set(layer_heads)) > 1 else (),
        tp_heads=tuple(sorted(set(q_heads[1:]) - {q_heads[0]})),
    )


def step3_text_kinds(text, n: int, *, name: str) -> dict:
    """step3_text.py Step3TextAttention.__init__: one KV head (a literal) at every TP, every layer full."""
    return dict(
        num_attention_heads=_int(text, "num_attention_heads", name=name),
        num_key_value_heads=1,  # step3_text.py Step3TextDecoderLayer: Step3TextAttention(num_kv_heads=1)
        head_dim=_int(text, "head_dim", name=name),
        layer_kinds=(FULL,) * n,
        sliding_window=None,
        kind_source="every layer full attention, one KV head at every TP (vLLM step3_text.py Step3TextAttention)",
    )


def mimo_omni(raw: dict) -> dict:
    """config.json with the architectures vLLM builds where it rewrites them:
    transformers_utils/model_arch_config_convertor.py MimoV2ModelArchConfigConvertor.__init__ makes a
    mimo_v2 / mimo_v2_flash config that has a vision_config MiMoV2OmniForCausalLM, whatever it names."""
    if isinstance(raw, dict) and raw.get("model_type") in ("mimo_v2", "mimo_v2_flash") and raw.get("vision_config"):
        return dict(raw, architectures=["MiMoV2OmniForCausalLM"])
    return raw
