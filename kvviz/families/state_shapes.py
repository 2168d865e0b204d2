"""The shapes of a hybrid's recurrent state tensors at a tensor-parallel size: vLLM 0.33's
MambaStateShapeCalculator (model_executor/layers/mamba/mamba_utils.py), with its `divide` as a
one-line refusal naming tensor_parallel_size. kvviz.families.state reads the configs; this module
only sizes the states it read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvviz.base.errors import KvvizError, require

if TYPE_CHECKING:
    from kvviz.families.state_config import StateConfig


def _divide(value: int, tp: int, what: str, *, model: str) -> int:
    require(
        value % tp == 0,
        f"tensor_parallel_size={tp}: {model}'s {what} ({value}) is not divisible by it "
        f"(vLLM refuses: mamba_utils divide)",
    )
    return value // tp


def state_shapes(c: StateConfig, tp: int, *, model: str) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """(part name, shape) per state tensor at TP rank size tp, conv first (SD layout)."""
    a = c.args
    t = c.mamba_type
    if t == "mamba1":  # mamba1_state_shape
        inter = a["intermediate_size"]
        return (
            ("conv", (a["conv_kernel"] - 1, _divide(inter, tp, "mamba intermediate size", model=model))),
            ("ssm", (_divide(inter, tp, "mamba intermediate size", model=model), a["state_size"])),
        )
    if t == "mamba2":  # mamba2_state_shape with extra_groups_for_head_shards
        groups = a["n_groups"]
        _divide(a["num_heads"], tp, "mamba heads", model=model)
        # MambaMixer2.__init__ (layers/mamba/mamba_mixer2.py): groups are replicated only from one group.
        require(
            groups % tp == 0 or groups == 1,
            f"tensor_parallel_size={tp}: {model}'s {groups} mamba groups are not divisible by it and are not 1 "
            f"(vLLM refuses: 'If tensor parallel world size does not divide num_groups, then num_groups must "
            f"equal 1.')",
        )
        groups = groups + (0 if groups % tp == 0 else tp - groups)
        conv_dim = a["intermediate_size"] + 2 * groups * a["state_size"]
        return (
            ("conv", (a["conv_kernel"] - 1, _divide(conv_dim, tp, "mamba conv dim", model=model))),
            ("ssm", (_divide(a["num_heads"], tp, "mamba heads", model=model), a["head_dim"], a["state_size"])),
        )
    if t == "short_conv":  # short_conv_state_shape
        return (("conv", (a["conv_kernel"] - 1, _divide(a["conv_dim"], tp, "conv_dim", model=model))),)
    if t == "gdn":  # gated_delta_net_state_shape
        conv_dim = 2 * a["num_k_heads"] * a["head_k_dim"] + a["num_v_heads"] * a["head_v_dim"]
        return (
            ("conv", (a["conv_kernel"] - 1, _divide(conv_dim, tp, "gated delta net conv dim", model=model))),
            (
                "ssm",
                (
                    _divide(a["num_v_heads"], tp, "linear_num_value_heads", model=model),
                    a["head_v_dim"],
                    a["head_k_dim"],
                ),
            ),
        )
    if t == "kda":  # kda_state_shape (num_k_heads = num_heads, head_k_dim = head_dim)
        proj = a["num_heads"] * a["head_dim"]
        return (
            ("conv", (a["conv_kernel"] - 1, _divide(3 * proj, tp, "KDA conv dim", model=model))),
            (
                "recurrent",
                (
                    _divide(a["num_heads"], tp, "linear_attn_config.num_heads", model=model),
                    a["head_dim"],
                    a["head_dim"],
                ),
            ),
        )
    if t == "linear":  # linear_attention_state_shape (layers/mamba/linear/base.py LinearAttention)
        # LinearAttention.__init__ asserts num_heads % tp == 0; BailingMoELinearAttention asserts
        # tp_size <= group_norm_size and group_norm_size % tp_size == 0
        norm = a.get("group_norm_size")
        require(
            norm is None or (tp <= norm and norm % tp == 0),
            f"tensor_parallel_size={tp}: {model}'s group_norm_size ({norm}) must be a multiple of it "
            f"(vLLM refuses: 'group_norm_size must be divisible by tp_size')",
        )
        heads = _divide(a["num_heads"], tp, "linear attention heads", model=model)
        return (("state", (heads, a["head_dim"], a["head_dim"])),)
    raise KvvizError(f"{model}: mamba_type {t!r}: kvviz knows mamba1, mamba2, short_conv, gdn, kda, linear")
