"""kvviz.verify: clean round trips through a real pool, and each hazard's victims exactly as the
layout's offsets predict (interval overlap, computed here independently of kvviz.verify)."""

from __future__ import annotations

import json

import pytest
import torch

from kvviz.base import formats, regions
from kvviz.base.defaults import BLOCK_SIZE
from kvviz.base.errors import KvvizError
from kvviz.cli import main
from kvviz.core.group import KVGroup
from kvviz.core.kinds import CacheKind
from kvviz.core.spec import CacheSpec
from kvviz.core.spec import custom_cache as _custom_cache
from kvviz.families import load_preset
from kvviz.options import Options
from kvviz.pool import free_bytes
from kvviz.verify import blocks_for_budget, verify
from kvviz.vllm.grouping import groups_from_json
from kvviz.vllm.plan import plan_model
from kvviz.vllm.planners import plan

PRO = load_preset("deepseek-v4-pro")
HAZARD_BLOCKS = 10  # two blocks per group (5 groups), round robin: block b belongs to group b % 5


def custom_cache(name, page_bytes):
    return _custom_cache(name, page_bytes, tokens_per_block=BLOCK_SIZE)


def pro(backend="flashmla", indexer="mxfp4", planner="overlay"):
    return plan_model(PRO, planner, Options(backend=backend, indexer_format=indexer)).layout


def content(p):
    """[start, end) of a placement's rows (payloads + footers) inside the block; padding left out."""
    rows = [r for r in regions.page_regions(p.cache.row_format, p.cache.rows, p.page_bytes) if r.name != "padding"]
    return p.offset + rows[0].start, p.offset + rows[-1].end


def overlap(a, b):
    lo, hi = max(a[0], b[0]), min(a[1], b[1])
    return (lo, hi) if lo < hi else None


def victims(report):
    return {(c.layer, c.block) for c in report.corrupted}


# ---- clean runs --------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["flashmla", "flashinfer"])
@pytest.mark.parametrize("indexer", ["fp8", "mxfp4"])
def test_clean_pro_64_blocks(backend, indexer):
    lay = pro(backend, indexer)
    r = verify(lay, 64, device="cpu", seed=1)
    assert r.clean and r.corrupted == () and r.within_bounds and r.passed and r.hazard_showed is None
    assert r.layers == len(lay.placements) == 244 and r.blocks == 64
    assert [g.num_blocks for g in r.groups] == [13, 13, 13, 13, 12]
    assert all(b % 5 == gi for gi, g in enumerate(r.groups) for b in g.first_blocks)  # round robin
    want_pages = sum(len(g.layers) * gb.num_blocks for g, gb in zip(lay.groups, r.groups))
    want_bytes = sum(g.total_bytes * gb.num_blocks for g, gb in zip(lay.groups, r.groups))
    assert r.pages == want_pages and r.bytes_written == r.bytes_read == want_bytes
    main_fmt = "fp8_ds_mla" if backend == "flashmla" else "fp8"
    by = {f.format: f for f in r.formats}
    assert set(by) == {main_fmt, f"indexer_{indexer}", "fp32"}
    assert by["fp32"].max_abs_error == 0.0
    for f in r.formats:
        assert 0 <= f.max_error_over_bound <= 1.0 and f.values > 0
    assert by[main_fmt].max_abs_error > 0  # the quantizers ran
    doc = json.loads(json.dumps(r.to_json()))
    assert doc["clean"] and doc["corrupted"] == [] and doc["hazard"] is None
    assert doc["passed"] and doc["hazard_showed"] is None


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("hazard", [None, "shared-block", "zeroer", "misread"])
def test_on_cuda(hazard):
    r = verify(pro(), 10, device="cuda", hazard=hazard)
    assert r.device.startswith("cuda") and r.passed
    assert r.clean == (hazard in (None, "misread")) and r.hazard_showed is (None if hazard is None else True)


def test_contiguous_assignment_and_opaque_groups():
    raw = {
        "groups": [
            {"name": "a", "layers": [{"name": "a0", "page_bytes": 1000}, {"name": "a1", "page_bytes": 24}]},
            {"name": "b", "layers": [{"name": "b0", "page_bytes": 333}]},
        ]
    }
    lay = plan(groups_from_json(raw), "overlay")
    r = verify(lay, 7, device="cpu", assignment="contiguous")
    assert r.clean and r.passed and r.formats == ()  # bytes only, no codec
    assert [g.first_blocks for g in r.groups] == [(0, 1, 2, 3), (4, 5, 6)]
    assert r.bytes_written == 4 * 1024 + 3 * 333
    z = verify(lay, 7, device="cpu", hazard="zeroer", hazard_layer="a1")
    # round robin: a holds 0, 2, 4, 6 and b 1, 3, 5. a1 is [1000, 1024) of a 1024-byte stride, the
    # last of its group: no neighbours, 1000 bytes spill over b0 = [0, 333) of block 1.
    assert z.hazard.facts["spill_range"] == [0, 1000] and z.hazard.facts["spill_owner"] == "b"
    assert victims(z) == {("b0", 1)} and z.corrupted[0].note == "spill"


def test_keep_pool_hands_back_the_real_bytes_and_owners():
    raw = {
        "groups": [
            {"name": "a", "layers": [{"name": "a0", "page_bytes": 64}]},
            {"name": "b", "layers": [{"name": "b0", "page_bytes": 32}]},
        ]
    }
    lay = plan(groups_from_json(raw), "overlay")
    r = verify(lay, 4, device="cpu", assignment="contiguous", keep_pool=True)
    assert r.block_groups == ("a", "a", "b", "b")
    blocks = r.pool.blocks
    assert tuple(blocks.shape) == (4, 64)
    # b owns blocks 2 and 3 but only writes [0, 32): the rest of those blocks stays zero.
    assert int(blocks[2:, 32:].count_nonzero()) == 0 and int(blocks[2:, :32].count_nonzero()) > 0
    assert verify(lay, 4, device="cpu").pool is None


# ---- hazards: victims exactly as the layout predicts -------------------------------------------
@pytest.mark.parametrize("backend, indexer", [("flashmla", "mxfp4"), ("flashinfer", "fp8")])
def test_shared_block_victims(backend, indexer):
    lay = pro(backend, indexer)
    r = verify(lay, HAZARD_BLOCKS, device="cpu", hazard="shared-block")
    f = r.hazard.facts
    assert (f["block"], f["owner"], f["intruder"]) == (0, lay.groups[0].name, lay.groups[1].name)
    assert (f["earlier_writer"], f["later_writer"]) == (lay.groups[0].name, lay.groups[1].name)
    # Predicted independently: a layer of the earlier writer is hit where a page of the later one
    # overlaps its page (verify writes every byte of a page: its pattern, its sampled rows).
    later = lay.group_placements(1)
    predicted = {}
    for p in lay.group_placements(0):
        page = (p.offset, p.end)
        hits = [h for h in (overlap(page, (q.offset, q.end)) for q in later) if h]
        if hits:
            predicted[p.name] = (min(h[0] for h in hits), max(h[1] for h in hits))
    # And each group's unused bytes (Layout.unused_ranges) that the other group's pages wrote into.
    for mine, other in ((0, 1), (1, 0)):
        hits = [overlap(u, (q.offset, q.end)) for u in lay.unused_ranges(mine) for q in lay.group_placements(other)]
        hits = [h for h in hits if h]
        if hits:
            predicted[f"unused bytes of group {lay.groups[mine].name}"] = (
                min(h[0] for h in hits),
                max(h[1] for h in hits),
            )
    assert predicted and victims(r) == {(name, 0) for name in predicted}
    for c in r.corrupted:
        lo, hi = predicted[c.layer]
        if c.unused:
            assert lo <= c.start < c.end <= hi and c.note == f"overwritten by {lay.groups[1].name}"
            continue
        assert lo <= c.start < c.end <= hi and 0 < c.bytes_changed <= c.end - c.start
        assert c.group == lay.groups[0].name and c.note == f"overwritten by {lay.groups[1].name}"
    assert r.hazard_showed and not r.clean and r.passed
    assert not r.within_bounds  # the sampled rows of block 0 decode far off: the damage shows there too


@pytest.mark.parametrize("backend, indexer", [("flashmla", "mxfp4"), ("flashinfer", "fp8")])
def test_zeroer_victims(backend, indexer):
    lay = pro(backend, indexer)
    r = verify(lay, HAZARD_BLOCKS, device="cpu", hazard="zeroer")
    f = r.hazard.facts
    target = lay.by_name[f["layer"]]
    assert target.cache.kind is CacheKind.INDEXER_K and target.offset > 0
    G, stride = len(lay.groups), lay.block_stride
    b = f["block"]
    assert b % G == target.group and f["spill_block"] == b + 1
    assert f["zeroed"] == [b * stride + target.offset, b * stride + target.offset + stride]
    # Predicted: the same group's layers in [end of target, stride) of block b, and the next block's
    # owner's layers in [0, target.offset) of block b + 1.
    predicted = {}
    for p in lay.group_placements(target.group):
        if p is not target and overlap((p.offset, p.end), (target.end, stride)):
            predicted[(p.name, b)] = overlap((p.offset, p.end), (target.end, stride))
    for p in lay.group_placements((b + 1) % G):
        if overlap((p.offset, p.end), (0, target.offset)):
            predicted[(p.name, b + 1)] = overlap((p.offset, p.end), (0, target.offset))
    assert any(k[1] == b for k in predicted) and any(k[1] == b + 1 for k in predicted)
    assert victims(r) == set(predicted)
    for c in r.corrupted:
        lo, hi = predicted[(c.layer, c.block)]
        assert lo <= c.start < c.end <= hi
        assert c.note == ("neighbour" if c.block == b else "spill")
    spill = [c for c in r.corrupted if c.block == b + 1]
    assert max(c.end for c in spill) <= target.offset == f["spill_range"][1]
    assert {c.group for c in spill} == {lay.groups[(b + 1) % G].name} != {lay.groups[target.group].name}
    assert r.hazard_showed and r.passed and not r.clean


def test_zeroer_at_offset_zero_has_no_spill():
    lay = pro()
    first = lay.group_placements(1)[0]
    r = verify(lay, HAZARD_BLOCKS, device="cpu", hazard="zeroer", hazard_layer=first.name)
    b = r.hazard.facts["block"]
    predicted = {(p.name, b) for p in lay.group_placements(1)[1:]}
    assert victims(r) == predicted and r.hazard.facts["spill_range"] == [0, 0]


@pytest.mark.parametrize("indexer", ["mxfp4", "fp8"])
def test_misread_reads_the_wrong_bytes(indexer):
    lay = pro("flashmla", indexer)
    r = verify(lay, HAZARD_BLOCKS, device="cpu", hazard="misread", keep_pool=True)
    m = r.hazard.misread
    p = lay.by_name[m.layer]
    assert p.cache.kind is CacheKind.INDEXER_K and m.format == f"indexer_{indexer}"
    rows, P, F = p.cache.rows, p.cache.row_format.payload_bytes, p.cache.row_format.footer_bytes
    assert (m.rows, m.payload_bytes, m.footer_bytes) == (rows, P, F)
    # Predicted: row t is read right only if both its payload (t*P vs t*(P+F)) and its scales
    # (rows*P + t*F vs t*(P+F) + P) sit where the interleaved reader looks: never for rows > 1 ...
    right = [t for t in range(rows) if t * P == t * (P + F) and rows * P + t * F == t * (P + F) + P]
    assert right == []
    # ... unless the bytes it takes happen to equal the right ones: read both places from the pool.
    page = r.pool.blocks[m.block, p.offset : p.end].tolist()
    same = [
        t
        for t in range(rows)
        if page[t * P : (t + 1) * P] == page[t * (P + F) : t * (P + F) + P]
        and page[rows * P + t * F : rows * P + (t + 1) * F] == page[t * (P + F) + P : (t + 1) * (P + F)]
    ]
    # Rows read from the same bytes decode the same; nearly every other row decodes wrong (an
    # all-zero row can still decode to zeros under the scale byte the wrong reader takes).
    assert not set(same) & set(m.wrong_rows) and m.rows_wrong >= rows - 2
    for s in m.sample:
        t, o = s.row, p.offset
        assert s.payload == (o + t * P, o + (t + 1) * P) and s.footer == (
            o + rows * P + t * F,
            o + rows * P + (t + 1) * F,
        )
        assert s.read_payload == (o + t * (P + F), o + t * (P + F) + P)
        assert s.read_footer == (o + t * (P + F) + P, o + (t + 1) * (P + F))
        assert s.truth != s.misread and len(s.source) == len(s.truth) == 8
    assert m.max_abs_error > m.truth_max_abs_error > 0
    assert r.clean and r.within_bounds and r.hazard_showed and r.passed  # the memory is intact; the reader is wrong


def test_misread_needs_a_footer():
    raw = {"groups": [{"name": "a", "layers": [{"name": "a0", "page_bytes": 64}]}]}
    with pytest.raises(KvvizError, match="hazard='misread'"):
        verify(plan(groups_from_json(raw), "overlay"), 2, device="cpu", hazard="misread")


# ---- bad input ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"num_blocks": 4}, "num_blocks=4"),
        ({"num_blocks": 0}, "num_blocks=0"),
        ({"num_blocks": 10**9}, f"num_blocks=1000000000: pool {10**9 * pro().block_stride:,} B + "),
        ({"device": "tpu"}, "device='tpu': "),
        ({"hazard": "flood"}, "hazard='flood': "),
        ({"seed": -1}, "seed=-1: "),
        ({"hazard": "zeroer", "hazard_layer": "nope"}, "hazard_layer='nope': "),
        ({"hazard_layer": "nope"}, "hazard_layer: "),
        ({"assignment": "random"}, "assignment='random': "),
    ],
)
def test_bad_input_is_one_line_naming_the_python_argument(kwargs, needle):
    kwargs = {"num_blocks": 5, "device": "cpu", **kwargs}
    with pytest.raises(KvvizError) as e:
        verify(pro(), kwargs.pop("num_blocks"), **kwargs)
    assert str(e.value).startswith(needle) and "\n" not in str(e.value) and "--" not in str(e.value)


def test_misaligned_layout_is_refused():
    odd = custom_cache("odd", 7)  # an fp32 state after a 7-byte page: offset 7, not a multiple of 4
    state = CacheSpec(
        name="state", kind=CacheKind.CUSTOM, layer=None, row_format=formats.state_row(4), rows=2, tokens_per_block=256
    )
    with pytest.raises(KvvizError, match="offset=7") as e:
        verify(plan((KVGroup(name="g", layers=(odd, state)),), "overlay"), 2, device="cpu")
    assert "'state'" in str(e.value) and "\n" not in str(e.value)


# ---- CLI ---------------------------------------------------------------------------------------
def test_cli_clean_text(capsys):
    code = main(["verify", "--model", "deepseek-v4-pro", "--blocks", "5", "--device", "cpu"])
    out, err = capsys.readouterr()
    assert code == 0 and err == ""
    assert "corrupted layers: none" in out and "fp8_ds_mla" in out and out.rstrip().endswith("OK")


def test_cli_hazard_json_lists_victims(capsys):
    code = main(
        ["verify", "--model", "deepseek-v4-pro", "--blocks", "5", "--device", "cpu", "--hazard", "zeroer", "--json"]
    )
    out, _ = capsys.readouterr()
    doc = json.loads(out)
    assert code == 0 and doc["hazard"]["name"] == "zeroer" and doc["ok"]
    assert doc["corrupted"] and set(doc["corrupted"][0]) == {
        "layer",
        "group",
        "block",
        "start",
        "end",
        "bytes_changed",
        "note",
    }


def test_cli_budget(capsys):
    lay = pro()
    code = main(
        [
            "verify",
            "--model",
            "deepseek-v4-pro",
            "--budget-bytes",
            str(6 * lay.block_stride + 1),
            "--device",
            "cpu",
            "--json",
            "--indexer",
            "mxfp4",
        ]
    )
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["num_blocks"] == 6 and doc["clean"]


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--blocks", "3", "--budget-gib", "1"], "--blocks"),
        (["--hazard", "flood"], "--hazard: hazard='flood': unknown"),
        (["--assignment", "x"], "--assignment: assignment='x': unknown"),
        (["--device", "tpu"], "--device: device='tpu': unknown"),
        (["--hazard", "zeroer", "--hazard-layer", "nope"], "--hazard-layer: hazard_layer='nope'"),
        (["--budget-bytes", "100"], "block stride"),
        (["--blocks", "2"], "num_blocks=2"),
    ],
)
def test_cli_errors(capsys, argv, needle):
    code = main(["verify", "--model", "deepseek-v4-pro", "--device", "cpu", *argv])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1 and needle in err


# ---- the pattern, progress, fit ------------------------------------------------------------
MASK = 2**64 - 1


def splitmix(x):
    """splitmix64's finalizer, written out here from its published constants."""
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def unit(seed, layer, u):
    return splitmix(splitmix(splitmix((seed + 0x9E3779B97F4A7C15) & MASK) ^ layer) ^ u) >> 1


def test_every_page_holds_the_documented_pattern():
    """Word i of layer l's page in block b is B(seed, b) + L(seed, l) + i * RAMP mod 2^64
    (kvviz.verify.source), computed here in Python integers and read from the pool's bytes at
    base + b * stride + offset; the sampled real rows of each group's first block are left out."""
    raw = {
        "groups": [
            {"name": "a", "layers": [{"name": "a0", "page_bytes": 64}, {"name": "a1", "page_bytes": 32}]},
            {"name": "b", "layers": [{"name": "b0", "page_bytes": 40}]},
        ]
    }
    lay = plan(groups_from_json(raw), "overlay")
    seed = 7
    r = verify(lay, 6, device="cpu", seed=seed, keep_pool=True)
    flat = r.pool.backing.numpy().tobytes()
    ramp = 0x9E3779B97F4A7C15
    base = (unit(seed, 2**63 - 1, 0) << 1) & MASK
    for b in range(6):
        bk = splitmix((b * 0xD1B54A32D192ED03 + base) & MASK)
        for i, p in enumerate(lay.placements):
            if p.group != b % 2:  # round robin: a holds even blocks, b odd ones
                continue
            lk = (unit(seed, i, 0) << 1) & MASK
            start = b * lay.block_stride + p.offset
            words = [
                int.from_bytes(flat[start + 8 * w : start + 8 * w + 8], "little") for w in range(p.page_bytes // 8)
            ]
            assert words == [(bk + lk + w * ramp) & MASK for w in range(p.page_bytes // 8)], (p.name, b)
    other = verify(lay, 6, device="cpu", seed=seed + 1, keep_pool=True).pool.backing
    assert not torch.equal(other, r.pool.backing)  # another seed, other bytes


def test_a_page_copied_to_another_layer_or_block_is_reported():
    """Pages of one size hold different bytes per layer and block, so a page written to the wrong
    place (another layer's columns, another block of the same group) is seen."""
    lay = pro()
    a, b = [p for p in lay.group_placements(0) if p.page_bytes == lay.group_placements(0)[0].page_bytes][:2]

    def misplace(pool):
        pool.blocks[5, b.offset : b.end] = pool.blocks[5, a.offset : a.end].clone()  # layer a's page over b's
        pool.blocks[10, a.offset : a.end] = pool.blocks[5, a.offset : a.end].clone()  # block 5's page over block 10's

    r = verify(lay, 15, device="cpu", corrupt=misplace)
    assert {(c.layer, c.block) for c in r.corrupted} == {(b.name, 5), (a.name, 10)} and not r.passed


def test_real_rows_go_through_the_codecs_on_every_format():
    """The sample is real encoded rows: each format the layout holds reports decode errors over
    values it encoded, and a page's sampled rows decode (read back from the pool) within bound."""
    lay = pro("flashmla", "fp8")
    r = verify(lay, 5, device="cpu")
    formats_in_layout = {p.cache.row_format.name for p in lay.placements}
    assert {f.format for f in r.formats} == formats_in_layout
    assert all(f.values >= 1000 and f.layers >= 1 and f.within_bound for f in r.formats)


def test_progress_counts_every_byte_twice_and_threads_are_restored():
    done = []
    before = torch.get_num_threads()
    r = verify(pro(), 5, device="cpu", progress=done.append)
    assert sum(done) == 2 * r.bytes_written and torch.get_num_threads() == before
    assert r.gb_written == r.bytes_written / 1e9 and r.gb_per_s > 0
    doc = r.to_json()
    assert {"bytes_written", "gb_written", "seconds", "gb_per_s"} <= set(doc)


def test_the_fit_check_counts_the_working_copies_before_allocating(monkeypatch):
    """A pool that alone just fits the free memory is refused once verify's working copies are
    counted. The free memory is held fixed (other processes on a shared machine move it between
    two readings), so the check, not the machine's load, decides."""
    import kvviz.pool.devices as devices

    lay = pro()
    free = 2 * 2**30
    monkeypatch.setattr(devices, "host_memory", lambda: {"MemAvailable": free})
    assert free_bytes("cpu") == free
    n = free // lay.block_stride  # the pool alone would just fit
    with pytest.raises(KvvizError) as e:
        verify(lay, n, device="cpu")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"num_blocks={n}: pool {n * lay.block_stride:,} B + ")
    assert "working copies" in msg and "free" in msg


def test_budget_sizes_the_pool_and_a_tiny_budget_is_an_error():
    lay = pro()
    assert blocks_for_budget(lay, 7 * lay.block_stride + lay.block_stride - 1) == 7
    with pytest.raises(KvvizError, match="smaller than one block stride"):
        blocks_for_budget(lay, lay.block_stride - 1)


def test_many_tiny_blocks_keep_their_bookkeeping_compact():
    """10^6 one-byte blocks: ownership is a tensor, the report holds no per-block Python objects."""
    raw = {"groups": [{"name": "g", "layers": [{"name": "x", "page_bytes": 1}]}]}
    r = verify(plan(groups_from_json(raw), "overlay"), 10**6, device="cpu")
    assert r.ok and r.groups[0].num_blocks == 10**6 and len(r.groups[0].first_blocks) == 64
    assert r.owner_ids.dtype == torch.int8 and r.owner_ids.numel() == 10**6  # one byte per block


def test_same_pages_sees_every_changed_byte_of_the_pages_and_none_between_them():
    """The read-back's block-by-block memcmp (kvviz.verify.engine.same_pages) against torch.equal
    on the same strided view (the second method): a change in the first or last byte of any
    block's pages is seen, a change in the bytes between two blocks' pages (not in the view) is not."""
    import torch

    from kvviz.verify.engine import same_pages

    cases = (
        (1000 * 8, 3, 200, torch.int64, 8),
        (600, 1, 140, torch.int32, 8),
        (96, 2, 40, torch.uint8, 8),
        (600, 1, 150, torch.int32, 0),
    )  # the last: pages fill the whole block, back to back
    for stride, L, W, word, off in cases:
        back = torch.zeros(5 * stride, dtype=torch.uint8)
        size = torch.empty((), dtype=word).element_size()
        view = torch.as_strided(back.view(word), (5, L, W), (stride // size, W, 1), off // size)
        want = view.clone()
        assert same_pages(view, want) and torch.equal(view, want)
        for k in range(5):
            for at in (0, L * W * size - 1):
                byte = off + k * stride + at
                back[byte] ^= 1
                assert not same_pages(view, want) and not torch.equal(view, want), (stride, k, at)
                back[byte] ^= 1
        if stride > off + L * W * size:  # a byte after block 0's pages, before block 1's
            back[off + L * W * size] ^= 1
            assert same_pages(view, want) and torch.equal(view, want)
