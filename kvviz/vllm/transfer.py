"""Prefill/decode disaggregation: the KV bytes vLLM 0.33's NIXL connector moves for one request, group by group
(docs/deploy.md#prefilldecode-transfer).

distributed/kv_transfer/kv_connector/v1/nixl/base_scheduler.py clips a request's block lists before they are
exchanged (`get_exchange_clipped_blocks`, used when the hybrid allocator is on and a group is not full
attention):

* a full-attention (or MLA) group: every block of the prompt, cdiv(prompt, block_size);
* a sliding-window group: the last `blocks_per_sw` = cdiv(window, block_size) + 1 blocks ("add 1 to
  conservatively account for boundary overlap");
* a Mamba group: one state (`clip_ssm_state_blocks`, kv_connector/utils.py: the running-state slot);
* below `kv_recompute_threshold` (64 tokens by default, nixl/pull_scheduler.py) the decode node recomputes
  the prompt instead of pulling it: nothing moves.

Bytes per block are one decode rank's pages of the group (its state's real bytes for a Mamba group, not the
padding to the attention page); each of the decode instance's TP ranks pulls its own share, from
max(1, prefill TP // decode TP) prefill ranks.
"""

from __future__ import annotations

import dataclasses

from kvviz.base.errors import require
from kvviz.base.inputs import of_type, short_repr
from kvviz.base.regions import cdiv
from kvviz.core.plan import Plan

KV_RECOMPUTE_THRESHOLD = 64  # nixl/base_scheduler.py: get_from_extra_config("kv_recompute_threshold", 64)


@dataclasses.dataclass(frozen=True)
class GroupTransfer:
    """One group's share of a request's transfer: the blocks its full list holds, those sent, bytes each."""

    name: str
    rule: str  # 'full', 'window', 'state'
    blocks_allocated: int
    blocks_sent: int
    bytes_per_block: int  # one decode rank's

    @property
    def bytes_per_rank(self) -> int:
        """Bytes one decode rank receives for this group."""
        return self.blocks_sent * self.bytes_per_block


@dataclasses.dataclass(frozen=True)
class Transfer:
    """What a prompt of `prompt_len` tokens moves from a prefill instance (TP `prefill_tp`) to a decode instance
    (TP `decode_tp`): per group, per decode rank, and over the decode instance's ranks."""

    model: str
    prompt_len: int
    prefill_tp: int
    decode_tp: int
    groups: tuple[GroupTransfer, ...]
    recomputed: bool  # below kv_recompute_threshold: nothing is pulled

    @property
    def bytes_per_rank(self) -> int:
        """Bytes one decode rank receives, over every group (0 when recomputed)."""
        return 0 if self.recomputed else sum(g.bytes_per_rank for g in self.groups)

    @property
    def total_bytes(self) -> int:
        """Bytes on the wire for the request: every decode rank's share."""
        return self.bytes_per_rank * self.decode_tp

    @property
    def prefill_ranks_per_decode_rank(self) -> int:
        """Prefill ranks one decode rank reads from (vLLM's heterogeneous-TP mapping: prefill TP // decode TP)."""
        return max(1, self.prefill_tp // self.decode_tp)

    def lines(self) -> list[str]:
        """The transfer as text: one line per group, then the totals."""
        out = [
            f"P/D transfer of a {self.prompt_len:,}-token prompt, prefill TP {self.prefill_tp} -> decode TP "
            f"{self.decode_tp} (each decode rank reads {self.prefill_ranks_per_decode_rank} prefill rank(s)):"
        ]
        if self.recomputed:
            out.append(f"  below kv_recompute_threshold ({KV_RECOMPUTE_THRESHOLD} tokens): recomputed, 0 B moved")
            return out
        for g in self.groups:
            out.append(
                f"  {g.name} ({g.rule}): {g.blocks_sent:,} of {g.blocks_allocated:,} blocks x "
                f"{g.bytes_per_block:,} B = {g.bytes_per_rank:,} B a decode rank"
            )
        out.append(f"  {self.bytes_per_rank:,} B a decode rank, {self.total_bytes:,} B over {self.decode_tp} rank(s)")
        return out

    def to_json(self) -> dict:
        """`--json`'s `transfer`."""
        return {
            "prompt_len": self.prompt_len,
            "prefill_tp": self.prefill_tp,
            "decode_tp": self.decode_tp,
            "recomputed": self.recomputed,
            "kv_recompute_threshold": KV_RECOMPUTE_THRESHOLD,
            "prefill_ranks_per_decode_rank": self.prefill_ranks_per_decode_rank,
            "bytes_per_decode_rank": self.bytes_per_rank,
            "total_bytes": self.total_bytes,
            "groups": [
                {
                    "name": g.name,
                    "rule": g.rule,
                    "blocks_allocated": g.blocks_allocated,
                    "blocks_sent": g.blocks_sent,
                    "bytes_per_block": g.bytes_per_block,
                    "bytes_per_decode_rank": g.bytes_per_rank,
                }
                for g in self.groups
            ],
        }


def transfer(decode_plan: Plan, prompt_len: int, *, decode_tp: int = 1, prefill_tp: int | None = None) -> Transfer:
    """The NIXL connector's transfer of one prompt of `prompt_len` tokens to the decode instance `decode_plan`
    plans (one of its `decode_tp` ranks); `prefill_tp` (default: decode_tp) only sets the fan-in. The rules are
    the module's; a group's blocks before clipping are cdiv(prompt_len, block_size) (a DCP-sharded group's block
    covers block_size x DCP tokens)."""
    of_type(decode_plan, Plan, field="decode_plan", give="a kvviz.plan(...) result (the decode instance's)")
    require(
        type(prompt_len) is int and prompt_len > 0, f"prompt_len={short_repr(prompt_len)}: must be a positive integer"
    )
    require(type(decode_tp) is int and decode_tp > 0, f"decode_tp={short_repr(decode_tp)}: must be a positive integer")
    require(decode_plan.planner == "vllm" and len(decode_plan.pools) == 1, "transfer: follows vLLM's own plan")
    ptp = decode_tp if prefill_tp is None else prefill_tp
    require(type(ptp) is int and ptp > 0, f"prefill_tp={ptp!r}: must be a positive integer")
    big, small = max(ptp, decode_tp), min(ptp, decode_tp)
    require(big % small == 0, f"prefill_tp={ptp}: vLLM's NIXL connector needs one TP size to divide the other")
    dcp = decode_plan.scheduling.dcp
    hybrid = any(not c.is_full_attention for g in decode_plan.groups for c in g.layers)  # _is_hma_required
    groups = []
    for g in decode_plan.groups:
        first = g.layers[0]
        tokens = first.tokens_per_block * (dcp if first.dcp_sharded else 1)
        allocated = cdiv(prompt_len, tokens)
        if first.kind.is_state:
            rule, sent = "state", min(1, allocated) if hybrid else allocated
            per_block = sum(c.content_bytes for c in g.layers)
        elif first.sliding_window is not None and hybrid:
            rule, sent = "window", min(allocated, cdiv(first.sliding_window, first.tokens_per_block) + 1)
            per_block = sum(c.page_bytes for c in g.layers)
        else:
            rule, sent = "full", allocated
            per_block = sum(c.page_bytes for c in g.layers)
        groups.append(GroupTransfer(g.name, rule, allocated, sent, per_block))
    return Transfer(decode_plan.model, prompt_len, ptp, decode_tp, tuple(groups), prompt_len < KV_RECOMPUTE_THRESHOLD)
