"""kvviz.verify sees every byte it owns: a single-byte flip anywhere in an owned block, in a page
or in bytes no page of the group covers, is reported with its layer (or "unused bytes of group G"),
block and byte offset. The expected report is predicted from the layout by offset arithmetic
(which placement or unused range of the block's owner covers the byte), not from verify's output."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kvviz.vllm.grouping import groups_from_json
from kvviz.vllm.planners import plan

# Two groups of unequal totals: "a" fills the stride (1000 + 24 = 1024 B), "b" leaves
# [333, 1024) unused; round robin: a holds blocks 0, 2, 4 and b holds 1, 3.
RAW = {
    "groups": [
        {"name": "a", "layers": [{"name": "a0", "page_bytes": 1000}, {"name": "a1", "page_bytes": 24}]},
        {"name": "b", "layers": [{"name": "b0", "page_bytes": 333}]},
    ]
}
LAYOUT = plan(groups_from_json(RAW), "overlay")
BLOCKS = 5


def owner(block: int) -> int:
    return block % len(LAYOUT.groups)  # round robin, the default assignment


def predicted(block: int, offset: int) -> str:
    """Name the flip must be reported under: the owner's layer covering the byte, else its unused bytes."""
    g = owner(block)
    for p in LAYOUT.group_placements(g):
        if p.offset <= offset < p.offset + p.page_bytes:
            return p.name
    assert any(lo <= offset < hi for lo, hi in LAYOUT.unused_ranges(g))
    return f"unused bytes of group {LAYOUT.groups[g].name}"


def flip(block: int, offset: int):
    def corrupt(pool):
        pool.blocks[block, offset] ^= 0x5A  # changes the byte whatever it held

    return corrupt


@settings(derandomize=True, max_examples=25, deadline=None)
@given(st.integers(0, BLOCKS - 1), st.integers(0, LAYOUT.block_stride - 1))
def test_a_single_byte_flip_is_reported_where_it_is(block, offset):
    from kvviz.verify import verify

    r = verify(LAYOUT, BLOCKS, device="cpu", corrupt=flip(block, offset))
    assert not r.ok and len(r.corrupted) == 1
    c = r.corrupted[0]
    assert (c.layer, c.block, c.start, c.end, c.bytes_changed) == (
        predicted(block, offset),
        block,
        offset,
        offset + 1,
        1,
    )
    assert c.group == LAYOUT.groups[owner(block)].name


@pytest.mark.parametrize("offset", [333, 700, 1023])
def test_flips_in_the_unused_tail_are_named_after_the_group(offset):
    from kvviz.verify import verify

    r = verify(LAYOUT, BLOCKS, device="cpu", corrupt=flip(3, offset))  # block 3 belongs to b
    assert [(c.layer, c.block, c.start, c.end, c.unused) for c in r.corrupted] == [
        ("unused bytes of group b", 3, offset, offset + 1, True)
    ]


def test_pro_flips_in_a_page_and_in_a_tail():
    """DeepSeek-V4-Pro: one flip in an indexer page's footer, one in a SWA group's unused tail."""
    from kvviz.core.kinds import CacheKind
    from kvviz.families import load_preset
    from kvviz.options import Options
    from kvviz.verify import verify
    from kvviz.vllm.plan import plan_model

    lay = plan_model(load_preset("deepseek-v4-pro"), "overlay", Options(indexer_format="mxfp4")).layout
    G = len(lay.groups)
    idx = next(p for p in lay.placements if p.cache.kind is CacheKind.INDEXER_K)
    fmt = idx.cache.row_format
    in_footer = idx.offset + idx.cache.rows * fmt.payload_bytes + 3  # the 4th scale byte of the page
    small = min(range(G), key=lay.group_total)  # the group with the longest unused tail
    tail = lay.unused_ranges(small)[-1][0] + 11
    blocks = (G + idx.group, G + small)  # each group's second block

    def corrupt(pool):
        pool.blocks[blocks[0], in_footer] ^= 1
        pool.blocks[blocks[1], tail] ^= 0x80

    r = verify(lay, 2 * G, device="cpu", corrupt=corrupt)
    assert [(c.layer, c.block, c.start, c.end) for c in r.corrupted] == sorted(
        [
            (idx.name, blocks[0], in_footer, in_footer + 1),
            (f"unused bytes of group {lay.groups[small].name}", blocks[1], tail, tail + 1),
        ],
        key=lambda t: (t[1], t[2]),
    )


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("block, offset", [(0, 0), (2, 999), (3, 332), (3, 333), (4, 1023)])
def test_flips_on_cuda(block, offset):
    from kvviz.verify import verify

    r = verify(LAYOUT, BLOCKS, device="cuda", corrupt=flip(block, offset))
    assert r.device.startswith("cuda")
    assert [(c.layer, c.block, c.start, c.end) for c in r.corrupted] == [
        (predicted(block, offset), block, offset, offset + 1)
    ]
