"""Byte-exact tests of kvviz.quant (docs/row-formats.md#row-formats): hand-worked bytes, exact references,
round-trip error bounds, page placement, and input validation."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kvviz import quant as q
from kvviz.quant.elements import e2m1_encode_arith

U8 = torch.uint8
FAST = settings(max_examples=40, deadline=None)


def u8(*vals: int) -> torch.Tensor:
    return torch.tensor(vals, dtype=U8)


def rand(shape, *, seed: int, log2_scale: float = 0.0, zero_frac: float = 0.0) -> torch.Tensor:
    """Gaussian data with a per-row random magnitude around 2^log2_scale and some exact zeros."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g)
    row_scale = torch.exp2(log2_scale + 4 * torch.rand(*shape[:-1], 1, generator=g) - 2)
    x = x * row_scale
    if zero_frac:
        x = torch.where(torch.rand(*shape, generator=g) < zero_frac, 0.0, x)
    return x


# ---------------------------------------------------------------------------- E2M1


def e2m1_reference(v: float) -> int:
    """Nearest E2M1 code by brute force; ties to the even code; saturate; keep the sign."""
    mags = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    a = min(abs(v), 6.0)
    best = min(range(8), key=lambda c: (abs(mags[c] - a), c % 2))
    return best | (8 if math.copysign(1.0, v) < 0 else 0)


@pytest.mark.parametrize(
    "value, code",
    [
        (0.25, 0),
        (0.75, 2),
        (1.25, 2),
        (1.75, 4),
        (2.5, 4),
        (3.5, 6),
        (5.0, 6),  # ties -> even
        (7.0, 7),
        (1e30, 7),
        (6.0, 7),
        (-7.0, 15),
        (float("inf"), 7),
        (float("-inf"), 15),  # saturate
        (0.0, 0),
        (-0.0, 8),
        (-0.1, 8),
        (0.26, 1),
        (-1.5, 11),
        (4.9, 6),
        (5.1, 7),
        (float("nan"), 7),  # documented: NaN -> +6
    ],
)
def test_e2m1_encode_known(value, code):
    assert q.e2m1_encode(torch.tensor([value])).tolist() == [code]


def test_e2m1_values_table():
    assert q.E2M1_VALUES.tolist()[:8] == [0, 0.5, 1, 1.5, 2, 3, 4, 6]
    assert q.E2M1_VALUES.tolist()[8:] == [-0.0, -0.5, -1, -1.5, -2, -3, -4, -6]
    assert math.copysign(1.0, float(q.E2M1_VALUES[8])) == -1.0
    codes = torch.arange(16, dtype=U8)
    assert torch.equal(q.e2m1_decode(codes), q.E2M1_VALUES)
    assert torch.equal(q.e2m1_encode(q.E2M1_VALUES), codes)  # every code round-trips, -0 included


def test_e2m1_matches_reference_on_grid():
    grid = [k / 16 for k in range(-8 * 16, 8 * 16 + 1)] + [-0.0]
    got = q.e2m1_encode(torch.tensor(grid)).tolist()
    assert got == [e2m1_reference(v) for v in grid]


@FAST
@given(st.lists(st.floats(-20, 20, width=32), min_size=1, max_size=64))
def test_e2m1_matches_reference_random(vals):
    assert q.e2m1_encode(torch.tensor(vals)).tolist() == [e2m1_reference(v) for v in vals]


def test_e2m1_table_path_equals_arithmetic_path_on_any_bits():
    # e2m1_encode looks codes up by (top 16 bits, sticky); the exact bit arithmetic defines them
    bits = torch.randint(-(2**31), 2**31 - 1, (200_000,), dtype=torch.int32, generator=torch.Generator().manual_seed(0))
    x = bits.view(torch.float32)
    assert torch.equal(q.e2m1_encode(x), e2m1_encode_arith(x))
    near = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
    for d in (torch.nextafter(near, torch.zeros(7)), torch.nextafter(near, torch.full((7,), 9.0))):
        assert torch.equal(q.e2m1_encode(d), e2m1_encode_arith(d))
        assert q.e2m1_encode(d).tolist() == [e2m1_reference(v) for v in d.tolist()]


def test_nibble_order():
    # 0.5 (code 1) then 6.0 (code 7): element 0 in the low nibble -> byte 0x71.
    assert q.pack_nibbles(u8(1, 7)).tolist() == [0x71]
    assert q.unpack_nibbles(u8(0x71)).tolist() == [1, 7]
    x = torch.zeros(32)
    x[0], x[1], x[2], x[3] = 0.5, 6.0, -1.0, 3.0  # amax 6 -> scale byte 127 (1.0)
    packed, scales = q.mxfp4_encode(x)
    assert scales.tolist() == [127]
    assert packed[:2].tolist() == [0x71, 0x5A]  # -1.0 = code 10 (0xA) low, 3.0 = code 5 high
    assert packed.shape == (16,) and packed[2:].eq(0).all()


def test_nan_poisons_only_its_group():
    x = torch.ones(2, 64)
    x[0, 40] = float("nan")
    packed, scales = q.mxfp4_encode(x)
    assert scales.tolist() == [[127 - 2, 255], [125, 125]]  # amax 1 -> ceil(log2(1/6)) = -2
    y = q.mxfp4_decode(packed, scales)
    assert torch.isnan(y[0, 32:]).all() and torch.equal(y[0, :32], x[0, :32]) and torch.equal(y[1], x[1])
    xm = torch.ones(512)
    xm[70] = float("nan")
    p, f = q.ds_mla_encode(xm)
    assert f.tolist() == [119, 255, 119, 119, 119, 119, 119, 0]
    ym = q.ds_mla_decode(p, f)
    assert torch.isnan(ym[64:128]).all() and not torch.isnan(ym[:64]).any() and not torch.isnan(ym[128:]).any()


# ---------------------------------------------------------------------------- UE8M0


def ue8m0_reference(amax: float, max_elem: float, rule: str, floor: float) -> int:
    a = max(Fraction(amax), Fraction(floor))
    if a == 0:
        return 0
    r = a / Fraction(max_elem)
    e = math.frexp(float(r))[1]  # estimate, then fix exactly
    while Fraction(2) ** e < r:
        e += 1
    while Fraction(2) ** (e - 1) >= r:
        e -= 1
    # now 2^(e-1) < r <= 2^e: e = ceil(log2 r)
    if rule == "floor":  # OCP: floor(log2 a) - floor(log2 max_elem)
        e = floor_log2(a) - floor_log2(Fraction(max_elem))
    return min(max(e + 127, 0), 254)


def floor_log2(a: Fraction) -> int:
    k = math.frexp(float(a))[1] - 1
    while Fraction(2) ** k > a:
        k -= 1
    while Fraction(2) ** (k + 1) <= a:
        k += 1
    return k


def test_ue8m0_known():
    f = q.MXFP4_AMAX_FLOOR
    amax = torch.tensor([6.0, 6.01, 12.0, 12.01, 3.0, 0.0, 448.0, 5.0, 7.9, 8.0, float("inf"), float("nan")])
    assert q.ue8m0_from_amax(amax, max_elem=6, amax_floor=f).tolist() == [
        127,
        128,
        128,
        129,
        126,
        1,
        134,
        127,
        128,
        128,
        254,
        255,
    ]
    # OCP floor rule: floor(log2 amax) - 2, so 5.0 and 7.9 share scale 1 (7.9 saturates), 8 -> 2
    assert q.ue8m0_from_amax(amax, max_elem=6, rule="floor", amax_floor=f).tolist() == [
        127,
        127,
        128,
        128,
        126,
        1,
        133,
        127,
        127,
        128,
        254,
        255,
    ]
    # E4M3 scales: amax 448 -> 2^0, 1.0 -> ceil(log2(1/448)) = -8 -> 119
    assert q.ue8m0_from_amax(torch.tensor([448.0, 449.0, 1.0]), max_elem=448, amax_floor=1e-4).tolist() == [
        127,
        128,
        119,
    ]
    # the floor is applied first; floor 0 lets amax 0 reach byte 0; huge/tiny ratios clamp
    assert q.ue8m0_from_amax(torch.tensor([0.0, 1e-45, 3e38]), max_elem=6, amax_floor=0).tolist() == [0, 0, 253]
    assert q.ue8m0_from_amax(torch.tensor([3e38]), max_elem=1e-3, amax_floor=0).tolist() == [254]


def test_all_zero_group_gets_scale_byte_1():
    # vLLM's writer floor 6*2^-126: ceil(log2(2^-126)) = -126 -> byte 1; elements all +0.
    packed, scales = q.mxfp4_encode(torch.zeros(2, 3, 128))
    assert scales.eq(1).all() and scales.shape == (2, 3, 4)
    assert packed.eq(0).all() and packed.shape == (2, 3, 64)
    # the 1e-4 floor of other engines gives a different byte, which is why it is a keyword
    _, s2 = q.mxfp4_encode(torch.zeros(32), amax_floor=1e-4)
    assert s2.tolist() == [127 + math.ceil(math.log2(1e-4 / 6))]


@FAST
@given(
    st.lists(
        st.floats(0, 3.0000000054977558e38, width=32) | st.sampled_from([6.0, 448.0, 6 * 2.0**-126, 3.0, 12.0]),
        min_size=1,
        max_size=32,
    ),
    st.sampled_from([6.0, 448.0]),
    st.sampled_from(["ceil", "floor"]),
    st.sampled_from([0.0, q.MXFP4_AMAX_FLOOR, 1e-4]),
)
def test_ue8m0_matches_exact_reference(amaxes, max_elem, rule, floor):
    got = q.ue8m0_from_amax(torch.tensor(amaxes), max_elem=max_elem, rule=rule, amax_floor=floor).tolist()
    floor32 = float(torch.tensor(floor, dtype=torch.float32))
    assert got == [ue8m0_reference(a, max_elem, rule, floor32) for a in amaxes]


def test_ue8m0_exact_at_powers_of_two():
    k = torch.arange(-120, 120, dtype=torch.float32)
    amax = 6 * torch.exp2(k)
    assert torch.equal(q.ue8m0_from_amax(amax, max_elem=6, amax_floor=0).int(), (k + 127).int())
    above = torch.nextafter(amax, torch.tensor(float("inf")))
    assert torch.equal(q.ue8m0_from_amax(above, max_elem=6, amax_floor=0).int(), (k + 128).int())


def test_ue8m0_decode():
    b = torch.arange(256, dtype=torch.int32).to(U8)
    got = q.ue8m0_decode(b)
    want = b.view(torch.float8_e8m0fnu).float()  # torch's own E8M0 as the reference
    assert torch.equal(got[:255], want[:255]) and torch.isnan(got[255])
    assert got[127] == 1.0 and got[0] == 2.0**-127 and got[254] == 2.0**127


# ---------------------------------------------------------------------------- E4M3, bf16, fp32


def test_e4m3_bytes():
    x = torch.tensor([1.0, 448.0, 1000.0, -1000.0, -0.0, 464.0, 2.0**-9, 2.0**-10, 0.0])
    assert q.e4m3_encode(x).tolist() == [0x38, 0x7E, 0x7E, 0xFE, 0x80, 0x7E, 0x01, 0x00, 0x00]
    nan = q.e4m3_encode(torch.tensor([float("nan")]))
    assert nan.item() & 0x7F == 0x7F
    assert q.e4m3_decode(u8(0x38, 0x7E, 0xFE, 0x01)).tolist() == [1.0, 448.0, -448.0, 2.0**-9]


def test_bf16_and_fp32_bytes():
    assert q.bf16_encode(torch.tensor([1.0])).tolist() == [0x80, 0x3F]
    assert q.bf16_encode(torch.tensor([-2.0, 1.0 + 2**-8])).tolist() == [0x00, 0xC0, 0x80, 0x3F]  # tie -> even
    assert q.fp32_encode(torch.tensor([1.0])).tolist() == [0x00, 0x00, 0x80, 0x3F]
    assert q.bf16_decode(u8(0x80, 0x3F, 0x00, 0xC0)).tolist() == [1.0, -2.0]
    x = rand((3, 7, 16), seed=1)
    assert torch.equal(q.fp32_decode(q.fp32_encode(x)), x)
    # decoding from an odd byte offset (a slice of a page) works
    page = torch.cat((u8(0xAA), q.bf16_encode(torch.tensor([1.0, -2.0]))))
    assert q.bf16_decode(page[1:]).tolist() == [1.0, -2.0]


# ---------------------------------------------------------------------------- fp8_ds_mla


def test_ds_mla_row_layout():
    x = torch.ones(512)
    x[448:] = torch.arange(64, dtype=torch.float32)
    payload, footer = q.ds_mla_encode(x)
    assert payload.shape == (576,) and footer.shape == (8,)
    assert payload.shape[-1] + footer.shape[-1] == 584
    # NoPE: amax 1 -> scale 2^ceil(log2(1/448)) = 2^-8 (byte 119); 1.0/2^-8 = 256 = E4M3 0x78
    assert payload[:448].eq(0x78).all()
    assert footer.tolist() == [119] * 7 + [0]
    # RoPE: bf16 little-endian; dim 448+1 = 1.0 -> [0x80, 0x3F]
    assert payload[448:452].tolist() == [0x00, 0x00, 0x80, 0x3F]
    assert torch.equal(q.ds_mla_decode(payload, footer), x)
    assert q.ds_mla_row_bytes(512) == (576, 8)
    assert q.CODECS["fp8_ds_mla"].row_bytes(512) == (576, 8)


def test_ds_mla_footer_pad_is_zero_and_scale_per_64():
    x = rand((5, 512), seed=2)
    x[:, 64:128] *= 1000.0  # second scale group much larger
    payload, footer = q.ds_mla_encode(x)
    assert footer[:, 7].eq(0).all()
    assert (footer[:, 1].int() - footer[:, 0].int()).ge(8).all()
    assert payload.shape == (5, 576)


def test_ds_mla_other_rope_dims():
    x = rand((2, 3, 256), seed=3)
    p, f = q.ds_mla_encode(x, rope_dims=0)
    assert p.shape[-1] == 256 and f.shape[-1] == 8  # 4 scales + 4 pad
    y = q.ds_mla_decode(p, f, rope_dims=0)
    assert (y - x).abs().le(q.error_bound("fp8_ds_mla", x, rope_dims=0)).all()
    p, f = q.ds_mla_encode(x, rope_dims=64, scale_block=32)
    assert p.shape[-1] == 192 + 128 and f.shape[-1] == 8  # 6 scales + 2 pad
    enc = q.CODECS["fp8_ds_mla"].encode(x, rope_dims=64, scale_block=32)
    assert (
        (q.CODECS["fp8_ds_mla"].decode(enc) - x)
        .abs()
        .le(q.error_bound("fp8_ds_mla", x, rope_dims=64, scale_block=32))
        .all()
    )


# ---------------------------------------------------------------------------- indexer FP8, FP8 per tensor


def test_indexer_fp8_known():
    x = torch.zeros(2, 128)
    x[0, 5] = -448.0
    codes, scales = q.fp8_indexer_encode(x)
    assert scales.shape == (2, 1)
    assert scales[0, 0] == 1.0  # 448/448
    assert scales[1, 0] == torch.tensor(1e-4) / 448  # zero row: floor
    assert codes[0, 5] == 0xFE and codes[0, :5].eq(0).all() and codes[1].eq(0).all()
    # pow2: scale rounded UP to a power of two; 3.0/448 -> 2^-7
    x2 = torch.full((128,), 3.0)
    _, s2 = q.fp8_indexer_encode(x2, pow2_scale=True)
    assert s2.item() == 2.0**-7
    _, s3 = q.fp8_indexer_encode(torch.full((128,), 448.0 * 2**-7), pow2_scale=True)
    assert s3.item() == 2.0**-7  # already a power of two: unchanged
    enc = q.CODECS["indexer_fp8"].encode(x)
    assert enc.footer.shape == (2, 4)
    assert enc.footer[0].tolist() == [0x00, 0x00, 0x80, 0x3F]  # fp32 1.0 little-endian


def test_fp8_tensor_known():
    x = torch.tensor([[1.0, -2.0], [448.0, 0.5]])
    codes, scale = q.fp8_tensor_encode(x)
    assert scale.dim() == 0 and scale.item() == 1.0
    assert codes.tolist() == [[0x38, 0xC0], [0x7E, 0x30]]
    codes, scale = q.fp8_tensor_encode(x * 4, scale=1.0)  # fixed scale: 1792 saturates
    assert scale.item() == 1.0 and codes[1, 0] == 0x7E
    assert torch.equal(q.fp8_tensor_decode(*q.fp8_tensor_encode(x)), x)


# ---------------------------------------------------------------------------- codecs and round trips

ROW_BYTES = {
    ("fp8_ds_mla", 512): (576, 8),
    ("fp8", 512): (512, 0),
    ("bf16", 512): (1024, 0),
    ("indexer_fp8", 128): (128, 4),
    ("indexer_mxfp4", 128): (64, 4),
    ("fp32", 2048): (8192, 0),  # c4 main compressor state row: 4 x 2048
}


@pytest.mark.parametrize("name, dims", list(ROW_BYTES))
def test_codec_row_bytes_and_shapes(name, dims):
    codec = q.get_codec(name)
    assert codec.name == name
    assert codec.row_bytes(dims) == ROW_BYTES[(name, dims)]
    enc = codec.encode(rand((2, 3, dims), seed=4))
    assert enc.payload.dtype == U8 and enc.footer.dtype == U8
    assert (enc.payload.shape[-1], enc.footer.shape[-1]) == ROW_BYTES[(name, dims)]
    assert enc.payload.shape[:-1] == enc.footer.shape[:-1] == (2, 3)
    assert (enc.side is not None) == (name == "fp8")
    assert codec.decode(enc).shape == (2, 3, dims)


DIMS = {
    "fp8_ds_mla": [512, 128, 256],
    "fp8": [512, 64],
    "bf16": [512, 8],
    "indexer_fp8": [128, 256],
    "indexer_mxfp4": [128, 32, 64],
    "fp32": [16],
    "parts": [96, 16, 2],
}


def opts_for(name: str, dims: int) -> dict:
    """The options a codec needs at `dims` (the parts codec: an E4M3 first part, an fp32 second)."""
    return {"parts": (("E4M3", dims // 2), ("fp32", dims - dims // 2))} if name == "parts" else {}


@FAST
@given(
    name=st.sampled_from(sorted(q.CODECS)),
    lead=st.lists(st.integers(1, 4), min_size=0, max_size=2),
    which=st.integers(0, 2),
    log2_scale=st.floats(-30, 30),
    zero_frac=st.sampled_from([0.0, 0.3, 1.0]),
    seed=st.integers(0, 2**31),
)
def test_round_trip_within_bound(name, lead, which, log2_scale, zero_frac, seed):
    dims = DIMS[name][which % len(DIMS[name])]
    x = rand((*lead, dims), seed=seed, log2_scale=log2_scale, zero_frac=zero_frac)
    codec = q.get_codec(name)
    opts = opts_for(name, dims)
    y = codec.decode(codec.encode(x, **opts))
    bound = q.error_bound(name, x, **opts)
    assert bound.shape == x.shape and y.dtype == torch.float32
    assert (y - x).abs().le(bound).all()


@FAST
@given(seed=st.integers(0, 2**31), log2_scale=st.floats(-20, 20), rule=st.sampled_from(["ceil", "floor"]))
def test_mxfp4_round_trip_both_rules(seed, log2_scale, rule):
    x = rand((2, 16, 128), seed=seed, log2_scale=log2_scale)
    y = q.mxfp4_decode(*q.mxfp4_encode(x, scale_rule=rule))
    assert (y - x).abs().le(q.error_bound("indexer_mxfp4", x, scale_rule=rule)).all()


def test_bounds_are_not_vacuous():
    # the worst observed error reaches a good share of the bound (the bound is a real one)
    x = rand((64, 512), seed=5)
    for name in ("fp8_ds_mla", "indexer_mxfp4", "bf16", "fp8"):
        codec = q.get_codec(name)
        ratio = ((codec.decode(codec.encode(x)) - x).abs() / codec.error_bound(x)).nan_to_num(0).max()
        assert 0.9 <= ratio <= 1.0, name


@pytest.mark.parametrize("name", ["fp8_ds_mla", "bf16", "indexer_fp8", "indexer_mxfp4", "fp32"])
def test_encode_is_vectorised_over_leading_dims(name):
    codec = q.get_codec(name)
    x = rand((4, 64, 128), seed=6)
    whole = codec.encode(x)
    for i in range(4):
        part = codec.encode(x[i])
        assert torch.equal(whole.payload[i], part.payload)
        assert torch.equal(whole.footer[i], part.footer)
    assert torch.equal(codec.decode(whole)[2], codec.decode(codec.encode(x[2])))


@pytest.mark.parametrize("name", sorted(q.CODECS))
def test_non_contiguous_and_bf16_inputs(name):
    codec = q.get_codec(name)
    dims = DIMS[name][0]
    wide = rand((6, 2 * dims), seed=12)
    x = wide[:, dims:]  # a column slice: not contiguous
    before = x.clone()
    opts = opts_for(name, dims)
    a, b = codec.encode(x, **opts), codec.encode(x.contiguous(), **opts)
    assert torch.equal(x, before)  # the input is never written
    assert torch.equal(a.payload, b.payload) and torch.equal(a.footer, b.footer)
    xb = x.to(torch.bfloat16)  # inputs are converted to fp32 first
    assert torch.equal(codec.encode(xb, **opts).payload, codec.encode(xb.float(), **opts).payload)


def test_e2m1_encode_leaves_input_alone():
    x = torch.tensor([-1.3, float("nan"), 7.0])
    q.e2m1_encode(x)
    assert x[0] == torch.tensor(-1.3) and torch.isnan(x[1]) and x[2] == 7.0


def test_fp8_tensor_vectorised_with_fixed_scale():
    x = rand((4, 64, 128), seed=7)
    codes, _ = q.fp8_tensor_encode(x, scale=0.01)
    assert torch.equal(codes[1], q.fp8_tensor_encode(x[1], scale=0.01)[0])


# ---------------------------------------------------------------------------- pages


def test_pack_page_offsets():
    rows, P, F, page = 3, 5, 2, 24
    payload = torch.arange(rows * P, dtype=U8).reshape(rows, P) + 10
    footer = torch.arange(rows * F, dtype=U8).reshape(rows, F) + 200
    pg = q.pack_page(payload, footer, page)
    assert pg.shape == (24,)
    assert pg.tolist() == list(range(10, 25)) + [200, 201, 202, 203, 204, 205] + [0, 0, 0]
    for t in range(rows):
        assert torch.equal(pg[t * P : (t + 1) * P], payload[t])
        assert torch.equal(pg[rows * P + t * F : rows * P + (t + 1) * F], footer[t])
    p2, f2 = q.unpack_page(pg, rows, P, F)
    assert torch.equal(p2, payload) and torch.equal(f2, footer)


def test_ds_mla_page_concrete_offsets():
    x = rand((2, 64, 512), seed=8)  # 2 blocks x 64 rows (c4 main KV)
    enc = q.CODECS["fp8_ds_mla"].encode(x)
    pages = q.pack_page(enc.payload, enc.footer, 37440)
    assert pages.shape == (2, 37440)
    assert torch.equal(pages[1, 3 * 576 : 4 * 576], enc.payload[1, 3])  # row 3 payload at 1728
    assert torch.equal(pages[1, 36888:36896], enc.footer[1, 3])  # 64*576 + 3*8
    assert pages[:, 64 * 584 :].eq(0).all()  # 64 alignment bytes of padding
    p, f = q.unpack_page(pages, 64, 576, 8)
    assert torch.equal(q.ds_mla_decode(p, f), q.CODECS["fp8_ds_mla"].decode(enc))


def test_mxfp4_page_round_trip():
    x = rand((3, 64, 128), seed=9)
    enc = q.CODECS["indexer_mxfp4"].encode(x)
    pages = q.pack_page(enc.payload, enc.footer, 4608)
    assert torch.equal(pages[0, 64 * 64 + 5 * 4 : 64 * 64 + 6 * 4], enc.footer[0, 5])
    p, f = q.unpack_page(pages, 64, 64, 4)
    assert torch.equal(p, enc.payload) and torch.equal(f, enc.footer)


def test_write_page_in_place_into_column_slice():
    backing = torch.full((4, 100), 0xEE, dtype=U8)  # (num_blocks, stride)
    view = backing[:, 30:60]  # a layer's page: columns [30, 60), not contiguous
    assert not view.is_contiguous()
    ptr = backing.data_ptr()
    payload = torch.arange(4 * 3 * 6, dtype=U8).reshape(4, 3, 6)
    footer = torch.full((4, 3, 2), 0x55, dtype=U8)
    out = q.write_page(view, payload, footer)
    assert out.data_ptr() == view.data_ptr() and backing.data_ptr() == ptr
    assert backing[:, :30].eq(0xEE).all() and backing[:, 60:].eq(0xEE).all()  # neighbours untouched
    assert torch.equal(backing[:, 30:60], q.pack_page(payload, footer, 30))
    backing[:, 30:60] = 0x11
    q.write_page(view, payload, footer, zero_padding=False)
    assert backing[:, 30 + 24 : 60].eq(0x11).all()


def test_read_interleaved_is_wrong_on_payload_first_pages():
    rows, P, F = 4, 6, 2
    payload = (torch.arange(rows * P) + 1).to(U8).reshape(rows, P)
    footer = (torch.arange(rows * F) + 100).to(U8).reshape(rows, F)
    page = q.pack_page(payload, footer, 40)
    wp, wf = q.read_interleaved(page, rows, P, F)
    assert wp.shape == (rows, P) and wf.shape == (rows, F)
    assert torch.equal(wp[0], payload[0])  # only row 0's values are where it looks
    assert not torch.equal(wp, payload) and not torch.equal(wf, footer)
    assert wf[0].tolist() == payload[1, :2].tolist()  # row 0's "scales" are row 1's values
    assert wp[1].tolist() == payload[1, 2:].tolist() + payload[2, :2].tolist()
    # the same reader on an interleaved page is right
    inter = torch.cat((payload, footer), dim=-1).reshape(-1)
    ip, if_ = q.read_interleaved(inter, rows, P, F)
    assert torch.equal(ip, payload) and torch.equal(if_, footer)


def test_read_interleaved_real_rows_break():
    x = rand((2, 512), seed=10)
    p, f = q.ds_mla_encode(x)
    page = q.pack_page(p, f, 1728)
    wp, wf = q.read_interleaved(page, 2, 576, 8)
    assert not torch.equal(wp[1], p[1]) and not torch.equal(wf, f)


# ---------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "call, field",
    [
        (lambda: q.mxfp4_encode(torch.zeros(100)), "head_dim=100"),
        (lambda: q.mxfp4_decode(torch.zeros(50, dtype=U8), torch.zeros(3, dtype=U8)), "head_dim=100"),
        (lambda: q.mxfp4_decode(torch.zeros(64, dtype=U8), torch.zeros(3, dtype=U8)), "scales"),
        (lambda: q.fp8_indexer_encode(torch.zeros(96)), "head_dim=96"),
        (lambda: q.fp8_indexer_encode(torch.zeros(128), amax_floor=0), "amax_floor"),
        (lambda: q.ds_mla_encode(torch.zeros(512), rope_dims=512), "rope_dims"),
        (lambda: q.ds_mla_encode(torch.zeros(512), rope_dims=600), "rope_dims"),
        (lambda: q.ds_mla_encode(torch.zeros(500)), "head_dim=500"),
        (lambda: q.ds_mla_decode(torch.zeros(100, dtype=U8), torch.zeros(8, dtype=U8)), "rope_dims"),
        (lambda: q.ue8m0_from_amax(torch.ones(1), max_elem=6, rule="up", amax_floor=0), "rule"),
        (lambda: q.get_codec("fp4"), "fp8_ds_mla, fp8, bf16, indexer_fp8, indexer_mxfp4, fp32"),
        (lambda: q.get_codec("indexer_mxfp4").encode(torch.zeros(128), rope_dims=3), "rope_dims"),
        (lambda: q.get_codec("indexer_mxfp4").row_bytes(100), "head_dim=100"),
        (lambda: q.get_codec("indexer_fp8").row_bytes(100), "head_dim=100"),
        (lambda: q.get_codec("fp8_ds_mla").row_bytes(64), "rope_dims"),
        (lambda: q.pack_page(torch.zeros(4, 10, dtype=U8), torch.zeros(4, 2, dtype=U8), 47), "page_bytes=47"),
        (lambda: q.pack_page(torch.zeros(4, 10, dtype=U8), torch.zeros(3, 2, dtype=U8), 64), "footer"),
        (lambda: q.unpack_page(torch.zeros(47, dtype=U8), 4, 10, 2), "page_bytes=47"),
        (lambda: q.read_interleaved(torch.zeros(47, dtype=U8), 4, 10, 2), "page_bytes=47"),
        (lambda: q.e2m1_decode(torch.zeros(3)), "codes"),
        (
            lambda: q.write_page(
                torch.zeros(2, 64, dtype=U8), torch.zeros(3, 4, 10, dtype=U8), torch.zeros(3, 4, 2, dtype=U8)
            ),
            "dst",
        ),
    ],
)
def test_bad_input_names_the_field(call, field):
    with pytest.raises(ValueError) as e:
        call()
    assert field in str(e.value)


def test_decode_refuses_other_codecs_encoding():
    enc = q.get_codec("bf16").encode(torch.zeros(8))
    with pytest.raises(ValueError, match="bf16"):
        q.get_codec("fp32").decode(enc)


# CPU/CUDA byte parity of every codec: tests/test_parity.py (marked `cuda`).


def test_parts_codec_writes_each_part_in_its_element():
    # a K | V row of 4 + 4 values: K as bf16 bytes (payload), V as E4M3 codes of V / its per-tensor
    # scale amax / 448 (footer), worked out by hand from the element definitions
    x = torch.tensor([[1.0, -2.0, 0.5, 3.0, 448.0, -224.0, 112.0, 0.0]])
    enc = q.get_codec("parts").encode(x, parts=(("bf16", 4), ("E4M3", 4)))
    assert enc.payload.tolist() == [[0x80, 0x3F, 0x00, 0xC0, 0x00, 0x3F, 0x40, 0x40]]  # bf16 1, -2, 0.5, 3
    assert enc.side[0] is None and float(enc.side[1]) == 1.0  # amax 448 / 448
    assert enc.footer.tolist() == [[0x7E, 0xF6, 0x6E, 0x00]]  # E4M3 448, -224, 112, 0
    assert q.get_codec("parts").decode(enc).tolist() == x.tolist()


def test_parts_codec_sizes_rows_like_the_hybrid_rows():
    from kvviz.base.formats import kv_row, recurrent_state_row

    # a gated delta net state of conv_dim 64, kernel 4, 4 V heads, head_k_dim = head_v_dim = 8:
    # conv (4 - 1) x 64 bf16, then SSM 4 x 8 x 8 fp32
    gdn = recurrent_state_row("gdn", (("conv", 3 * 64, "bf16"), ("ssm", 4 * 8 * 8, "fp32")))
    for row in (kv_row(8, 64, 64, "fp8"), kv_row(2, 256, 256, "bf16"), gdn):
        assert q.get_codec("parts").row_bytes(row.dims, parts=q.parts_of(row)) == (row.payload_bytes, row.footer_bytes)
