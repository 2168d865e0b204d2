"""kvviz.pool: one uint8 backing, zero-copy views at base + block*stride + offset, block ownership,
and one-line errors for pools that cannot exist."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kvviz.base import formats
from kvviz.base.defaults import BLOCK_SIZE
from kvviz.base.errors import KvvizError
from kvviz.cli import main
from kvviz.core.group import KVGroup
from kvviz.core.kinds import CacheKind
from kvviz.core.spec import CacheSpec
from kvviz.core.spec import custom_cache as _custom_cache
from kvviz.families import load_preset as load_model
from kvviz.options import Options
from kvviz.pool import BlockPool, Pool, check_fits, free_bytes, resolve_device
from kvviz.vllm.plan import plan_model as _plan_model
from kvviz.vllm.planners import plan


def custom_cache(name, page_bytes):
    return _custom_cache(name, page_bytes, tokens_per_block=BLOCK_SIZE)


def plan_model(model, options, planner):
    """The one pool `planner` lays the model out in."""
    return _plan_model(model, planner, options).layout


PRO = load_model("deepseek-v4-pro")
NO_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
DEVICES = ["cpu", pytest.param("cuda", marks=[pytest.mark.cuda, NO_CUDA])]


def layout(planner="overlay", backend="flashmla", indexer="mxfp4"):
    return plan_model(PRO, Options(backend=backend, indexer_format=indexer), planner)


def one_line(e: Exception) -> str:
    msg = str(e)
    assert msg and "\n" not in msg
    return msg


# ---- views are where vLLM's worker puts them ---------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("planner", ["overlay", "overlay-by-spec", "bucketed"])
def test_view_pointers_are_base_plus_block_stride_plus_offset(planner, device):
    lay = layout(planner)
    pool = Pool(lay, 3, device)
    base, stride = pool.backing.data_ptr(), lay.block_stride
    assert pool.backing.numel() == 3 * stride and pool.backing.dtype == torch.uint8
    for p in lay.placements:
        page, typed = pool.page_view(p.name), pool.typed_view(p.name)
        assert page.shape == (3, p.page_bytes) and page.stride() == (stride, 1)
        assert typed.shape == (3, p.page_bytes // p.cache.dtype_size)
        assert typed.element_size() == p.cache.dtype_size
        assert page.untyped_storage().data_ptr() == base  # same memory, no copy
        for b in range(3):
            want = base + b * stride + p.offset
            assert page[b].data_ptr() == want
            assert typed[b].data_ptr() == want
            assert pool.byte_address(b, p.name) == want


def test_typed_views_have_the_layer_dtypes():
    pool = Pool(layout(backend="none"), 1, "cpu")
    kinds = {p.cache.row_format.name: pool.typed_view(p.name).dtype for p in pool.layout.placements}
    assert kinds["fp32"] == torch.float32 and kinds["fp8_ds_mla"] == torch.uint8
    assert kinds["indexer_mxfp4"] == torch.uint8
    bf = plan_model(PRO, Options(backend="flashinfer", main_format="bf16"), "overlay")
    pool = Pool(bf, 1, "cpu")
    assert {pool.typed_view(p.name).dtype for p in bf.placements} == {torch.bfloat16, torch.uint8, torch.float32}


def test_writes_through_a_page_view_land_at_the_flat_offsets():
    lay = layout()
    pool = Pool(lay, 4, "cpu")
    stride = lay.block_stride
    p = next(p for p in lay.placements if p.cache.kind is CacheKind.INDEXER_K and p.offset > 0)
    pattern = (torch.arange(p.page_bytes) % 251 + 1).to(torch.uint8)
    pool.page_view(p.name)[2] = pattern
    lo = 2 * stride + p.offset
    assert torch.equal(pool.backing[lo : lo + p.page_bytes], pattern)
    assert int(pool.backing.count_nonzero()) == p.page_bytes  # nothing else moved
    # footer_view / payload_view: row t's scales at rows*P + t*F, its payload at t*P
    fmt = p.cache.row_format
    rows, P, F = p.cache.rows, fmt.payload_bytes, fmt.footer_bytes
    pool.footer_view(p.name)[3, 5] = torch.tensor([7, 8, 9, 10], dtype=torch.uint8)[:F]
    at = 3 * stride + p.offset + rows * P + 5 * F
    assert pool.backing[at : at + F].tolist() == [7, 8, 9, 10][:F]
    pool.payload_view(p.name)[1, 4] = 0xAB
    at = 1 * stride + p.offset + 4 * P
    assert torch.all(pool.backing[at : at + P] == 0xAB) and pool.backing[at + P] == 0


def test_row_view_of_an_fp32_state_writes_whole_rows():
    lay = layout()
    pool = Pool(lay, 3, "cpu")
    p = next(p for p in lay.placements if p.cache.row_format.name == "fp32" and p.offset > 0)
    rv = pool.row_view(p.name)
    fmt = p.cache.row_format
    assert rv.shape == (3, p.cache.rows, fmt.dims) and rv.dtype == torch.float32
    assert rv[1, 2].data_ptr() == pool.backing.data_ptr() + lay.block_stride + p.offset + 2 * fmt.row_bytes
    rv[1, 2] = torch.arange(fmt.dims, dtype=torch.float32)
    lo = lay.block_stride + p.offset + 2 * fmt.row_bytes
    assert torch.equal(
        pool.backing[lo : lo + fmt.row_bytes].view(torch.float32), torch.arange(fmt.dims, dtype=torch.float32)
    )


def test_row_view_refuses_formats_with_a_footer():
    lay = layout()
    pool = Pool(lay, 1, "cpu")
    p = next(p for p in lay.placements if p.cache.row_format.name == "fp8_ds_mla")
    with pytest.raises(KvvizError) as e:
        pool.row_view(p.name)
    assert p.name in one_line(e.value) and "footer" in str(e.value)


def test_fp8_rows_are_plain_uint8_rows():
    lay = layout(backend="flashinfer")
    pool = Pool(lay, 2, "cpu")
    p = next(p for p in lay.placements if p.cache.row_format.name == "fp8")
    assert pool.row_view(p.name).shape == (2, p.cache.rows, 512)


@pytest.mark.parametrize("planner", ["overlay", "overlay-by-spec"])
def test_tensor_views_cover_their_layers(planner):
    lay = layout(planner)
    pool = Pool(lay, 2, "cpu")
    base, stride = pool.backing.data_ptr(), lay.block_stride
    views = pool.tensor_views()
    assert len(views) == len(lay.tensors)
    for tv in views:
        assert tv.view[1].data_ptr() == base + stride + tv.tensor.offset
        for i, name in enumerate(tv.tensor.layers):
            if tv.tensor.layer_stride is None:
                assert lay.by_name[name].offset == tv.tensor.offset
                assert lay.by_name[name].page_bytes <= tv.view.shape[1]
            else:
                assert tv.view[:, i].data_ptr() == pool.page_view(name).data_ptr()
                assert tv.view.shape[2] == lay.by_name[name].page_bytes


def test_from_budget_uses_floor():
    lay = layout()
    pool = Pool.from_budget(lay, 3 * lay.block_stride + 5, "cpu")
    assert pool.num_blocks == 3 and pool.nbytes == 3 * lay.block_stride
    with pytest.raises(KvvizError, match="budget_bytes"):
        Pool.from_budget(lay, lay.block_stride - 1, "cpu")


# ---- devices and memory ------------------------------------------------------------------------
def test_resolve_device():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(" CPU ") == torch.device("cpu")
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    for bad in ("tpu", "cuda:x", "auto:1", "", "gpu"):
        with pytest.raises(KvvizError) as e:
            resolve_device(bad, "device")
        assert one_line(e.value).startswith("device=")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this torch has CUDA")
def test_cuda_without_cuda_is_refused():
    with pytest.raises(KvvizError) as e:
        resolve_device("cuda:0", "device")
    assert one_line(e.value).startswith("device=") and "CUDA" in str(e.value)


def test_check_fits_names_both_numbers():
    free = free_bytes("cpu")
    assert free is None or free > 0
    check_fits(1, "cpu")
    with pytest.raises(KvvizError) as e:
        check_fits(2**62, "cpu", what="num_blocks=7")
    msg = one_line(e.value)
    assert msg.startswith("num_blocks=7") and f"{2**62:,} B" in msg and "GiB" in msg and "free" in msg


@pytest.mark.parametrize("blocks", [0, -3])
def test_zero_or_negative_blocks(blocks):
    with pytest.raises(KvvizError) as e:
        Pool(layout(), blocks, "cpu")
    assert f"num_blocks={blocks}" in one_line(e.value)


def test_absurd_pool_does_not_fit():
    with pytest.raises(KvvizError) as e:
        Pool(layout(), 10**9, "cpu")
    msg = one_line(e.value)
    assert "num_blocks=1000000000" in msg and "GiB" in msg and "free" in msg


def test_unknown_device():
    with pytest.raises(KvvizError) as e:
        Pool(layout(), 1, "tpu:0")
    assert one_line(e.value).startswith("device=")


def misaligned_layout():
    """An fp32 state after an odd-sized opaque page: its offset (7) is not a multiple of 4."""
    odd = custom_cache("odd", 7)
    state = CacheSpec(
        name="state", kind=CacheKind.CUSTOM, layer=None, row_format=formats.state_row(4), rows=2, tokens_per_block=256
    )
    return plan((KVGroup(name="g", layers=(odd, state)),), "overlay")


def test_offset_not_divisible_by_the_dtype_size():
    lay = misaligned_layout()
    assert lay.by_name["state"].offset == 7
    with pytest.raises(KvvizError) as e:
        Pool(lay, 2, "cpu")
    msg = one_line(e.value)
    assert "'state'" in msg and "offset=7" in msg and "float32" in msg


def test_stride_not_divisible_by_the_dtype_size():
    state = CacheSpec(
        name="state", kind=CacheKind.CUSTOM, layer=None, row_format=formats.state_row(4), rows=2, tokens_per_block=256
    )
    lay = plan((KVGroup(name="a", layers=(state,)), KVGroup(name="b", layers=(custom_cache("odd", 33),))), "overlay")
    with pytest.raises(KvvizError) as e:
        Pool(lay, 2, "cpu")
    assert "block_stride=33" in one_line(e.value) and "'state'" in str(e.value)


def test_unknown_layer_name():
    pool = Pool(layout(), 1, "cpu")
    with pytest.raises(KvvizError, match="nope"):
        pool.page_view("nope")


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--blocks", "0"], "--blocks: 0 is out of range"),
        (["--blocks", "1000000000"], "GiB"),
        (["--device", "tpu"], "--device"),
        (["--blocks", "x"], "--blocks"),
    ],
)
def test_cli_bad_pool_is_one_line_exit_2(capsys, argv, needle):
    code = main(["verify", "--model", "deepseek-v4-pro", *argv])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and needle in err and err.startswith("kvviz: error:")


# ---- block ownership ---------------------------------------------------------------------------
def test_block_pool_rules():
    bp = BlockPool(8)
    assert bp.allocate("full", 3) == [0, 1, 2]
    assert bp.allocate("swa", 2) == [3, 4]
    assert bp.owner(1) == "full" and bp.owner(7) is None and bp.num_free == 3
    with pytest.raises(KvvizError) as e:
        bp.claim("swa", 1)
    msg = one_line(e.value)
    assert "block 1" in msg and "'swa'" in msg and "'full'" in msg
    with pytest.raises(KvvizError, match="block 3"):
        bp.free("full", [0, 3])  # not all its own: nothing freed
    assert bp.owner(0) == "full"
    bp.free("full", [1])
    assert bp.owner(1) is None and bp.allocate("swa", 1) == [1]
    bp.claim("state", 6)
    assert bp.owner(6) == "state" and bp.allocate("x", 1) == [5]
    bp.claim("state", 0, hazard=True)
    assert bp.owners(0) == ("full", "state") and bp.hazards == [(0, ("full", "state"))]
    with pytest.raises(KvvizError, match="n=9"):
        bp.allocate("x", 9)
    with pytest.raises(KvvizError, match="block=8"):
        bp.claim("x", 8)
    with pytest.raises(KvvizError, match="nobody owns it"):
        bp.free("x", [7])
    with pytest.raises(KvvizError, match="num_blocks=0"):
        BlockPool(0)


ops = st.lists(
    st.tuples(st.sampled_from(["allocate", "free", "claim"]), st.integers(0, 3), st.integers(0, 11)),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(ops)
def test_block_pool_never_gives_one_block_to_two_groups(seq):
    bp = BlockPool(12)
    held: dict[int, set[int]] = {g: set() for g in range(4)}  # the model
    for op, g, k in seq:
        try:
            if op == "allocate":
                ids = bp.allocate(g, k % 4)
                assert len(ids) == len(set(ids)) and not set(ids) & set().union(*held.values())
                held[g] |= set(ids)
            elif op == "free":
                mine = sorted(held[g])
                ids = mine[: k % 3] if mine else [k]
                bp.free(g, ids)
                held[g] -= set(ids)
            else:
                bp.claim(g, k)
                held[g].add(k)
        except KvvizError:
            pass
        owned = [b for s in held.values() for b in s]
        assert len(owned) == len(set(owned))  # never two groups on one block
        for b in range(12):
            owners = [x for x, s in held.items() if b in s]
            assert bp.owners(b) == tuple(owners)
        assert bp.num_free == 12 - len(owned)
    assert bp.hazards == []


def test_block_pool_bookkeeping_is_one_small_integer_per_block():
    n = 10**7
    bp = BlockPool(n)
    assert bp.owner_ids.numel() == n and bp.owner_ids.element_size() == 2
    assert BlockPool.nbytes_for(n, 5) == n and BlockPool.nbytes_for(n, 200) == 2 * n
    assert bp.allocate("a", 3) == [0, 1, 2] and bp.allocate("b", 2) == [3, 4]
    bp.free("a", [1])
    assert bp.allocate("c", 2) == [1, 5] and bp.num_free == n - 6
    bp.claim("b", 0, hazard=True)
    assert bp.owners(0) == ("a", "b") and bp.blocks_of("b") == [0, 3, 4]
    bp.free("a", [0])
    assert bp.owners(0) == ("b",) and bp.owner(n - 1) is None


@pytest.mark.parametrize("planner", ["overlay", "overlay-by-spec"])
def test_stacked_and_group_views_are_the_layer_pages(planner):
    """One strided view over equally spaced layers (and over a whole group) is the same memory
    as each layer's own page view (data_ptr arithmetic), for a stepped slice of blocks."""
    lay = layout(planner)
    pool = Pool(lay, 7, "cpu")
    base, stride = pool.data_ptr, lay.block_stride
    fp32 = [p for p in lay.group_placements(3) if p.cache.row_format.name == "fp32"]
    step = fp32[1].offset - fp32[0].offset
    run = [fp32[0]] + [p for p in fp32[1:] if (p.offset - fp32[0].offset) % step == 0][:2]
    run = [p for i, p in enumerate(run) if p.offset == fp32[0].offset + i * step]
    v = pool.stacked_view([p.name for p in run], slice(1, None, 3))
    assert v.shape == (2, len(run), run[0].page_bytes)
    for k, b in enumerate((1, 4)):
        for j, p in enumerate(run):
            assert v[k, j].data_ptr() == base + b * stride + p.offset
            assert torch.equal(v[k, j], pool.page_view(p.name)[b])
    g = pool.group_view(2, slice(2, None, 5))
    first = min(p.offset for p in lay.group_placements(2))
    assert g.shape == (1, max(p.end for p in lay.group_placements(2)) - first)
    assert g[0].data_ptr() == base + 2 * stride + first
    small = [p for p in lay.group_placements(0) if p.page_bytes == lay.group_placements(0)[0].page_bytes][:3]
    if small[1].offset - small[0].offset != small[2].offset - small[1].offset:
        with pytest.raises(KvvizError, match="equally spaced"):
            pool.stacked_view([p.name for p in small])
    with pytest.raises(KvvizError, match="differ in size"):
        pool.stacked_view([run[0].name, lay.group_placements(1)[0].name])
    small = BlockPool(4, max_groups=2)
    small.allocate("x", 1), small.allocate("y", 1)
    with pytest.raises(KvvizError, match="max_groups=2"):
        small.allocate("z", 1)


# ---- CPU backings on transparent huge pages (issue 17: first touch of a fresh pool) ------------
def _vm_flags(addr: int) -> list[str] | None:
    """VmFlags of the mapping holding `addr`, as the kernel's /proc/self/smaps says ("hg": advised
    MADV_HUGEPAGE). Whether the kernel then finds free 2 MiB pages depends on fragmentation, so the
    advice, not AnonHugePages, is what a test can hold on every machine."""
    try:
        lines = open("/proc/self/smaps").read().splitlines()
    except OSError:
        return None
    inside = False
    for line in lines:
        head = line.split()[0]
        if "-" in head and ":" not in head:
            lo, hi = (int(x, 16) for x in head.split("-"))
            inside = lo <= addr < hi
        elif inside and line.startswith("VmFlags:"):
            return line.split()[1:]
    return None


def _thp_mode() -> str | None:
    try:
        text = open("/sys/kernel/mm/transparent_hugepage/enabled").read()
    except OSError:
        return None
    return text[text.index("[") + 1 : text.index("]")]


def test_a_cpu_pool_starts_zero_on_huge_pages_and_keeps_its_views():
    """A CPU pool of a few huge pages is zero without a fill of ours, starts at a 2 MiB boundary,
    and (where the kernel's THP mode is madvise or always) its mapping is advised MADV_HUGEPAGE; the
    typed views still sit at base + block * stride + offset."""
    from kvviz.pool import HUGE_PAGE

    lay = layout()
    n = -(-3 * HUGE_PAGE // lay.block_stride)
    pool = Pool(lay, n, "cpu", zero=False)
    assert pool.zeroed and pool.data_ptr % HUGE_PAGE == 0
    assert pool.backing.untyped_storage().data_ptr() == pool.data_ptr
    assert not bool(pool.backing.any())
    pool.backing.fill_(0x5A)
    if _thp_mode() in ("madvise", "always"):
        flags = _vm_flags(pool.data_ptr)
        assert flags is None or "hg" in flags, flags
    p = next(p for p in lay.placements if p.cache.row_format.view_dtype == "float32")
    typed = pool.typed_view(p.name)
    assert typed[n - 1].data_ptr() == pool.data_ptr + (n - 1) * lay.block_stride + p.offset
    assert typed.dtype == torch.float32 and bool((typed[n - 1].view(torch.uint8) == 0x5A).all())


def test_without_madvise_a_cpu_pool_falls_back_to_torch_zeros(monkeypatch):
    import mmap

    from kvviz.pool import HUGE_PAGE

    monkeypatch.delattr(mmap, "MADV_HUGEPAGE", raising=False)
    lay = layout()
    pool = Pool(lay, -(-2 * HUGE_PAGE // lay.block_stride), "cpu", zero=False)
    assert pool.zeroed and not bool(pool.backing.any())
    pool.page_view(lay.placements[0].name)[1].fill_(7)
    assert pool.byte_address(1, lay.placements[0].name) == pool.data_ptr + lay.block_stride + lay.placements[0].offset
