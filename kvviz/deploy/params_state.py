"""The parameters of the state-space and linear-attention hybrids (Mamba-1, Mamba-2, gated delta net, short
conv, KDA), one TP rank's, as vLLM 0.33's mixers build them (mamba_mixer.py, mamba_mixer2.py, qwen3_next.py,
short_conv.py, kimi_linear.py) beside their attention and feed-forward layers (kvviz.deploy.params)."""

from __future__ import annotations

from kvviz.base.errors import KvvizError
from kvviz.deploy.params import Need, ParamCount, count_from_layers, ffn, gqa, mla, text_config


def _state_mixer(need: Need, h: int, mamba_type: str, args: dict) -> tuple[int, int]:
    """(linear, other) of one state mixer on one TP rank, from the shape arguments the model's cache spec
    reads: every projection, convolution and per-channel / per-head vector split over the TP ranks (column- or
    row-parallel), Mamba-2's groups grown to TP from 1 group (extra_groups_for_head_shards) and the gated delta
    net's norm (head_v_dim) whole on every rank."""
    k, tp = args.get("conv_kernel", 4), need.tp
    if mamba_type == "mamba1":  # mamba_mixer.py MambaMixer
        d, n_state = args["intermediate_size"] // tp, args["state_size"]
        dt_rank = need.get("mamba_dt_rank") or -(-h // 16)
        linear = h * 2 * d + d * (dt_rank + 2 * n_state) + dt_rank * d + d * h
        # jamba.py builds its MambaMixer with use_rms_norm: dt_layernorm, b_layernorm, c_layernorm, whole a rank
        norms = dt_rank + 2 * n_state if need.cfg.get("model_type") == "jamba" else 0
        return linear, d * k + d + d + d * n_state + d + norms
    if mamba_type == "mamba2":  # mamba_mixer2.py MambaMixer2
        d, g, heads, n_state = args["intermediate_size"], args["n_groups"], args["num_heads"], args["state_size"]
        g = g // tp if g % tp == 0 else 1  # 1 group grown to TP groups, one a rank
        d, heads = d // tp, heads // tp
        conv = d + 2 * g * n_state
        return h * (2 * d + 2 * g * n_state + heads) + d * h, conv * k + conv + 3 * heads + d
    if mamba_type == "gdn":  # qwen3_next.py Qwen3NextGatedDeltaNet
        key = args["num_k_heads"] * args["head_k_dim"] // tp
        val = args["num_v_heads"] * args["head_v_dim"] // tp
        nv = args["num_v_heads"] // tp
        return h * (2 * key + 2 * val) + h * 2 * nv + val * h, (2 * key + val) * k + 2 * nv + args["head_v_dim"]
    if mamba_type == "short_conv":  # short_conv.py ShortConv
        c = args["conv_dim"] // tp
        return h * 3 * c + c * h, c * k
    if mamba_type == "kda":  # kimi_linear.py KimiDeltaAttention (every projection / TP: not read rank by rank)
        heads, d = args["num_heads"], args["head_dim"]
        hd = heads * d
        linear = 3 * h * hd + 2 * (h * d + d * hd) + h * heads + hd * h
        return linear // tp, (3 * hd * k + heads + hd) // tp + d
    raise KvvizError(f"weights_bytes: kvviz does not size a {mamba_type} mixer; {need.hint}")


def _lfm2_ff(need: Need) -> int:
    """lfm2.py Lfm2MLP: block_ff_dim, 2/3 of it when auto-adjusted, times the multiplier, rounded up."""
    ff = need("block_ff_dim", need.cfg.get("intermediate_size"))
    if need.cfg.get("block_auto_adjust_ff_dim"):
        ff = int(2 * ff / 3)
        mult = need.cfg.get("block_ffn_dim_multiplier")
        if isinstance(mult, (int, float)) and mult:
            ff = int(mult * ff)
        step = need("block_multiple_of", 256)
        ff = step * -(-ff // step)
    return ff


def state_count(model, raw: dict, *, hint: str = "", tp: int = 1) -> ParamCount:
    """The ParamCount of a state-space / linear-attention hybrid on one of `tp` ranks: its state mixers (from the
    model's parsed StateConfig: which layers hold them and their shape arguments), its attention layers (GQA or
    MLA) and each layer's feed-forward by the family's rule."""
    cfg = text_config(raw)
    c = model.config
    need = Need(cfg, model=model.name, hint=hint, tp=tp)
    h, n = need("hidden_size"), c.num_hidden_layers
    args = dict(c.state_args)
    mixer = _state_mixer(need, h, c.mamba_type, args)
    attn = mla(need, h) if c.kv_lora_rank else gqa(need, h)
    by_layer: dict[int, list[str]] = {}
    for slot in c.slots:
        by_layer.setdefault(slot.layer, []).append(slot.kind)
    mt = cfg.get("model_type")
    pattern = cfg.get("hybrid_override_pattern") if mt == "nemotron_h" else None
    layers = []
    for i in range(n):
        linear = other = experts = 0
        moe = False
        for kind in by_layer.get(i, ()):
            if mt == "zamba2" and kind != "state":
                continue  # a shared block, counted once below
            lin, oth = mixer if kind == "state" else attn[:2]
            linear, other = linear + lin, other + oth
        if pattern is not None:  # nemotron_h: one block per layer: M, *, - (relu2 MLP: up + down) or E
            ch = pattern[i] if i < len(pattern) else "M"
            if ch == "-":
                linear += 2 * h * (need("intermediate_size") // tp)
            elif ch == "E":
                lin, experts, oth, moe = ffn(need, h, i, n)
                linear, other = linear + lin, other + oth
        elif mt == "lfm2":
            linear += 3 * h * (_lfm2_ff(need) // tp)
        elif mt == "zamba2":
            pass  # the shared blocks are counted once below
        else:
            lin, experts, oth, moe = ffn(need, h, i, n)
            linear, other = linear + lin, other + oth
        layers.append((linear, experts, other, moe))
    kinds = [f"{c.mamba_type} hybrid", attn[2]]
    top = (0, 0, 0)
    if mt == "zamba2":  # Zamba2: num_mem_blocks shared blocks (attention on [h, embeddings] = 2h, gated MLP)
        blocks = need("num_mem_blocks", 1)
        a = 2 * h
        shared = a * a * 3 + a * h + 3 * h * need("ffn_hidden_size")
        hybrid_layers = sum(1 for slot in c.slots if slot.kind != "state")
        top = ((blocks * shared + hybrid_layers * h * h) // tp, 0, 0)  # TP > 1: / TP (not read rank by rank)
        kinds.append(f"({blocks} shared blocks, LoRA adapters not counted)")
    # nemotron_h.py: each block (Mamba, attention, MLP or MoE) is one mixer under one RMSNorm, `norm`
    return count_from_layers(need, raw, n, h, layers, kinds, top=top, norms=1 if mt == "nemotron_h" else 2)
