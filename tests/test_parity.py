"""Same bytes on every device (docs/row-formats.md#row-formats).

On CUDA, torch computes ``tensor / python_number`` as a multiply by the rounded reciprocal, which
can be one bit off the CPU's IEEE division; vLLM's kernels divide. kvviz.quant therefore divides
by a tensor on the input's device everywhere (`kvviz.quant.bits.true_div`).

* The ``cuda`` tests (``pytest -m cuda``; skipped without CUDA) compare CPU and CUDA bytes of
  every codec on 2^16 rows with magnitudes over 1e-4..1e4 (`kvviz.tools.quant_parity`).
* The CPU tests hold the scales and codes to exact references written here with numpy (float64
  division rounded once to float32, which equals IEEE float32 division; E4M3 and E2M1 rounding
  from the formats' definitions), on inputs built so that ``x * (1/s)`` and ``x / s`` round to
  different codes. A reciprocal-multiply regression fails here without a GPU, and
  `test_reciprocal_multiply_is_caught` shows the inputs do tell the two apart.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from kvviz import quant as q
from kvviz.base.formats import DS_MLA_SCALE_BLOCK, INDEXER_FP8_BLOCK, MXFP4_BLOCK
from kvviz.quant import bits
from kvviz.tools import quant_parity

F32 = np.float32
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


# ---------------------------------------------------------------------------- exact references


def e4m3_values() -> np.ndarray:
    """The 127 non-negative finite E4M3 (fn) values by code 0..126, from the bit layout:
    1 sign, 4 exponent bits (bias 7), 3 mantissa bits; exponent 0 is subnormal (m/8 * 2^-6);
    code 127 (S.1111.111) is NaN."""
    code = np.arange(127)
    e, m = code >> 3, code & 7
    return np.where(e == 0, m / 8 * 2.0**-6, (1 + m / 8) * 2.0 ** (e - 7))


E4M3 = e4m3_values()
E4M3_MAX = E4M3[-1]
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])  # codes 0..7: exponent 2 bits, mantissa 1
E2M1_MAX = E2M1[-1]


def nearest_code(values: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Index of the nearest entry of the sorted table `values` to |v| (saturating), ties to the
    even index (the code whose low mantissa bit is 0)."""
    a = np.minimum(np.abs(v.astype(np.float64)), values[-1])
    hi = np.clip(np.searchsorted(values, a, side="left"), 1, len(values) - 1)
    lo = hi - 1
    d_lo, d_hi = a - values[lo], values[hi] - a  # exact: both are float32-range values near a
    return np.where(d_lo < d_hi, lo, np.where(d_hi < d_lo, hi, np.where(lo % 2 == 0, lo, hi)))


def e4m3_ref(v: np.ndarray) -> np.ndarray:
    """Saturating round-to-nearest-even E4M3 code bytes of float32 values (no NaN)."""
    return (nearest_code(E4M3, v) | np.where(np.signbit(v), 0x80, 0)).astype(np.uint8)


def e2m1_ref(v: np.ndarray) -> np.ndarray:
    """Saturating round-to-nearest-even E2M1 codes of float32 values (no NaN); sign -> bit 3."""
    return (nearest_code(E2M1, v) | np.where(np.signbit(v), 8, 0)).astype(np.uint8)


def true_div(x, s) -> np.ndarray:
    """float32 x / s rounded once: the float64 quotient of two float32s rounded to float32 is the
    correctly rounded float32 quotient (53 >= 2*24 + 2, so the double rounding is innocuous)."""
    return (np.asarray(x, np.float32).astype(np.float64) / np.asarray(s, np.float32).astype(np.float64)).astype(F32)


def recip_mul(x, s) -> np.ndarray:
    """What CUDA computes for x / s with s a host scalar: x * float32(1 / s)."""
    return np.asarray(x, F32) * (F32(1) / np.asarray(s, F32))


def ceil_pow2_exponent(a: np.ndarray, max_elem: float) -> np.ndarray:
    """Smallest e with max_elem * 2^e >= a (all products exact in float64)."""
    e = np.ceil(np.log2(a.astype(np.float64) / max_elem)).astype(np.int64)
    e = np.where(np.ldexp(max_elem, e) < a, e + 1, e)
    return np.where(np.ldexp(max_elem, e - 1) >= a, e - 1, e)


def bf16_ref(x: np.ndarray) -> np.ndarray:
    """bf16 bytes (little-endian) of float32 values, round to nearest even (no NaN)."""
    u = x.astype(F32).view(np.uint32).astype(np.uint64)
    b = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return b.astype("<u2").view(np.uint8).reshape(*x.shape[:-1], -1)


def wide(shape, seed: int) -> np.ndarray:
    """float32 with magnitudes log-uniform over 1e-4..1e4 and random signs (no NaN, no zero)."""
    rng = np.random.default_rng(seed)
    return (rng.choice([-1.0, 1.0], size=shape) * 10.0 ** rng.uniform(-4, 4, size=shape)).astype(F32)


def test_references_match_the_format_definitions():
    assert E4M3_MAX == 448.0 and E4M3[1] == 2.0**-9 and len(set(E4M3)) == 127
    assert list(e4m3_ref(np.array([1.0, -2.0, 448.0, 0.5, 1e6, -0.0], F32))) == [0x38, 0xC0, 0x7E, 0x30, 0x7E, 0x80]
    assert list(e2m1_ref(np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0, -0.1], F32))) == [
        0,
        2,
        2,
        4,
        4,
        6,
        6,
        7,
        8,
    ]
    assert ceil_pow2_exponent(np.array([448.0, 449.0, 224.0, 1.0]), 448.0).tolist() == [0, 1, -1, -8]


# ---------------------------------------------------------------------------- discriminating inputs


def amaxes_where_reciprocal_differs(n: int, seed: int) -> np.ndarray:
    """float32 amax values in 1e-4..1e4 with amax * (1/448) != amax / 448 in float32."""
    a = np.abs(wide((20 * n,), seed))
    a = a[true_div(a, E4M3_MAX) != recip_mul(a, E4M3_MAX)]
    assert len(a) >= n
    return a[:n]


def values_where_reciprocal_changes_the_code(s: np.float32, count: int) -> np.ndarray:
    """float32 x in (0, 448*s] with E4M3(x / s) != E4M3(x * (1/s)): a few ulps around every
    E4M3 midpoint times s, kept where the two quotients round to different codes."""
    mids = (E4M3[:-1] + E4M3[1:]) / 2
    x0 = (mids * np.float64(s)).astype(F32).view(np.int32)
    cands = np.concatenate([x0 + k for k in range(-3, 4)]).view(F32)
    cands = cands[(cands > 0) & (cands <= F32(s) * F32(E4M3_MAX))]
    hit = cands[e4m3_ref(true_div(cands, s)) != e4m3_ref(recip_mul(cands, s))]
    return np.resize(hit, count) if len(hit) else hit


def discriminating_amaxes(n: int, seed: int, count: int) -> list[tuple[np.float32, np.float32, np.ndarray]]:
    """n triples (amax, scale = amax / 448, `count` values <= amax) where both the scale and the
    values' codes change when x / s is computed as x * (1/s)."""
    out = []
    for a in amaxes_where_reciprocal_differs(4 * n, seed):
        s = true_div(a, E4M3_MAX)
        vals = values_where_reciprocal_changes_the_code(s, count)
        if len(vals):
            assert np.all(vals <= a)
            out.append((a, s, vals))
    assert len(out) >= n
    return out[:n]


def indexer_rows(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """[n, 128] rows: value 0 is the block amax (so scale = amax / 448), the rest are values whose
    E4M3 code depends on dividing rather than multiplying by the reciprocal. Returns (rows, scales)."""
    rows = np.empty((n, INDEXER_FP8_BLOCK), F32)
    scales = np.empty(n, F32)
    rng = np.random.default_rng(seed)
    for i, (a, s, vals) in enumerate(discriminating_amaxes(n, seed, INDEXER_FP8_BLOCK - 1)):
        rows[i, 0], scales[i] = a, s
        rows[i, 1:] = vals * rng.choice([-1, 1], size=len(vals)).astype(F32)
    return rows, scales


# ---------------------------------------------------------------------------- scales and codes, exact


def test_indexer_fp8_scale_is_amax_divided_by_448_rounded_once():
    rows, scales = indexer_rows(64, seed=1)
    _, got = q.fp8_indexer_encode(torch.from_numpy(rows))
    assert np.array_equal(got[:, 0].numpy(), scales)
    assert np.all(scales != recip_mul(rows[:, 0], E4M3_MAX))  # every row tells the two apart


def test_indexer_fp8_codes_are_e4m3_of_the_true_quotient():
    rows, scales = indexer_rows(64, seed=2)
    codes, _ = q.fp8_indexer_encode(torch.from_numpy(rows))
    want = e4m3_ref(true_div(rows, scales[:, None]))
    assert np.array_equal(codes.numpy(), want)
    assert (e4m3_ref(recip_mul(rows, scales[:, None])) != want).mean() > 0.5


def test_indexer_fp8_pow2_scale_is_the_next_power_of_two_of_the_true_quotient():
    rows, scales = indexer_rows(64, seed=3)
    codes, got = q.fp8_indexer_encode(torch.from_numpy(rows), pow2_scale=True)
    e = ceil_pow2_exponent(scales.astype(np.float64), 1.0)
    want_s = np.ldexp(1.0, e).astype(F32)
    assert np.array_equal(got[:, 0].numpy(), want_s)
    assert np.array_equal(codes.numpy(), e4m3_ref(true_div(rows, want_s[:, None])))


def test_indexer_fp8_wide_range_matches_reference():
    x = wide((512, 2 * INDEXER_FP8_BLOCK), seed=4)
    codes, scales = q.fp8_indexer_encode(torch.from_numpy(x))
    g = x.reshape(512, 2, INDEXER_FP8_BLOCK)
    want_s = true_div(np.maximum(np.abs(g).max(-1), F32(q.FP8_AMAX_FLOOR)), E4M3_MAX)
    assert np.array_equal(scales.numpy(), want_s)
    assert np.array_equal(codes.numpy(), e4m3_ref(true_div(g, want_s[..., None])).reshape(x.shape))


@pytest.mark.parametrize("seed", range(8))
def test_fp8_tensor_scale_and_codes_are_true_quotients(seed):
    ((a, s, vals),) = discriminating_amaxes(1, seed=10 + seed, count=4 * INDEXER_FP8_BLOCK - 1)  # a: the tensor's amax
    vals = vals * np.random.default_rng(seed).choice([-1, 1], size=len(vals)).astype(F32)
    x = np.concatenate([[a], vals]).astype(F32).reshape(4, -1)
    codes, got = q.fp8_tensor_encode(torch.from_numpy(x))
    assert got.item() == s and s != recip_mul(a, E4M3_MAX)
    want = e4m3_ref(true_div(x, s))
    assert np.array_equal(codes.numpy(), want) and np.any(e4m3_ref(recip_mul(x, s)) != want)


def test_fp8_tensor_fixed_scale_divides():
    s = F32(0.3)
    x = values_where_reciprocal_changes_the_code(s, 4096)
    x = x * np.where(np.arange(len(x)) % 2, F32(-1), F32(1))
    codes, got = q.fp8_tensor_encode(torch.from_numpy(x)[None], scale=0.3)
    assert got.item() == s
    want = e4m3_ref(true_div(x, s))
    assert np.array_equal(codes[0].numpy(), want) and np.any(e4m3_ref(recip_mul(x, s)) != want)


def test_mxfp4_matches_reference():
    x = wide((256, 4 * MXFP4_BLOCK), seed=5)
    packed, scales = q.mxfp4_encode(torch.from_numpy(x))
    g = x.reshape(256, 4, MXFP4_BLOCK)
    e = ceil_pow2_exponent(np.abs(g).max(-1), E2M1_MAX)
    assert np.array_equal(scales.numpy(), (e + 127).astype(np.uint8))
    codes = e2m1_ref(np.ldexp(g, -e[..., None]).astype(F32)).reshape(256, -1)  # x / 2^e is exact
    assert np.array_equal(packed.numpy(), codes[:, 0::2] | (codes[:, 1::2] << 4))


def test_ds_mla_matches_reference():
    rope = 64
    nope = 7 * DS_MLA_SCALE_BLOCK
    x = wide((256, nope + rope), seed=6)
    payload, footer = q.ds_mla_encode(torch.from_numpy(x), rope_dims=rope)
    g = x[:, :nope].reshape(256, -1, DS_MLA_SCALE_BLOCK)
    e = ceil_pow2_exponent(np.maximum(np.abs(g).max(-1), F32(q.FP8_AMAX_FLOOR)), E4M3_MAX)
    codes = e4m3_ref(np.ldexp(g, -e[..., None]).astype(F32)).reshape(256, nope)
    assert np.array_equal(payload.numpy(), np.concatenate([codes, bf16_ref(x[:, nope:])], axis=1))
    assert np.array_equal(footer.numpy()[:, : e.shape[1]], (e + 127).astype(np.uint8))
    assert not footer.numpy()[:, e.shape[1] :].any()


# ---------------------------------------------------------------------------- the guard has teeth


def _reciprocal_div(scalars: bool, tensors: bool):
    """A stand-in for kvviz.quant.bits.true_div that multiplies by the float32 reciprocal: for Python-number
    divisors (what CUDA does for x / 448.0) and/or for tensor divisors (code written as
    x * (1 / scale))."""

    def div(x: torch.Tensor, divisor) -> torch.Tensor:
        if isinstance(divisor, torch.Tensor):
            return x * torch.reciprocal(divisor.to(x.dtype)) if tensors else torch.div(x, divisor)
        return x * float(F32(1) / F32(divisor)) if scalars else torch.div(x, torch.tensor(divisor, dtype=x.dtype))

    return div


def test_reciprocal_multiply_is_caught(monkeypatch):
    """With quant's division swapped for a reciprocal multiply, the exact references above no
    longer hold: the constructed inputs catch either regression on a CPU."""
    rows, scales = indexer_rows(16, seed=7)
    x = torch.from_numpy(rows)
    with monkeypatch.context() as m:  # CUDA's x / 448.0: the scales come out wrong
        m.setattr(bits, "true_div", _reciprocal_div(scalars=True, tensors=False))
        _, got = q.fp8_indexer_encode(x)
        assert np.count_nonzero(got[:, 0].numpy() != scales) == len(scales)
    with monkeypatch.context() as m:  # x * (1 / scale): right scales, wrong codes
        m.setattr(bits, "true_div", _reciprocal_div(scalars=False, tensors=True))
        codes, got = q.fp8_indexer_encode(x)
        assert np.array_equal(got[:, 0].numpy(), scales)
        assert (codes.numpy() != e4m3_ref(true_div(rows, scales[:, None]))).mean() > 0.5


def test_no_division_by_a_host_scalar(monkeypatch):
    """Every codec divides only by a tensor on the dividend's device (never by a Python number
    or a tensor elsewhere, which CUDA would turn into a reciprocal multiply), and never calls
    reciprocal."""
    truediv = torch.Tensor.__truediv__
    div = torch.div

    def check(x, other):
        assert isinstance(other, torch.Tensor) and other.device == x.device, (
            f"division of a {tuple(x.shape)} tensor by {other!r}"
        )

    def guarded_truediv(self, other):
        check(self, other)
        return truediv(self, other)

    def guarded_div(x, other, *args, **kwargs):
        check(x, other)
        return div(x, other, *args, **kwargs)

    def refuse(*args, **kwargs):
        raise AssertionError("reciprocal used")

    monkeypatch.setattr(torch.Tensor, "__truediv__", guarded_truediv)
    monkeypatch.setattr(torch.Tensor, "__itruediv__", guarded_truediv)
    monkeypatch.setattr(torch.Tensor, "div", guarded_div)
    monkeypatch.setattr(torch.Tensor, "div_", refuse)
    monkeypatch.setattr(torch, "div", guarded_div)
    monkeypatch.setattr(torch, "true_divide", refuse)
    monkeypatch.setattr(torch.Tensor, "reciprocal", refuse)
    monkeypatch.setattr(torch, "reciprocal", refuse)
    for case in quant_parity.parity_cases():
        codec = q.get_codec(case.codec)
        x = torch.from_numpy(wide((4, case.dims), seed=8))
        enc = codec.encode(x, **dict(case.opts))
        codec.decode(enc)
        codec.error_bound(x, **dict(case.opts))
    with pytest.raises(AssertionError, match="division"):
        torch.ones(2) / 448.0  # the guard itself is live


# ---------------------------------------------------------------------------- the parity harness (CPU)


def test_parity_cases_cover_every_codec():
    cases = quant_parity.parity_cases()
    assert {c.codec for c in cases} == set(q.CODECS)
    assert quant_parity.PARITY_ROWS >= 2**16


def test_parity_inputs_are_wide_and_nan_free():
    x = quant_parity.parity_inputs(4096, 128, seed=0)
    a = x.abs()
    assert not x.isnan().any() and a.min() >= 1e-4 * (1 - 2**-20) and a.max() <= 1e4 * (1 + 2**-20)
    assert a.min() < 1e-3 and a.max() > 1e3 and (x < 0).any() and (x > 0).any()
    assert torch.equal(x, quant_parity.parity_inputs(4096, 128, seed=0))  # seeded


def test_compare_counts_differing_bytes():
    mismatched, first = {}, []
    a = torch.arange(8, dtype=torch.uint8)
    b = a.clone()
    b[5] = 99
    quant_parity._compare("payload", a, b, mismatched, first)
    assert mismatched == {"payload": 1} and first == ["payload byte 5: cpu 0x05 vs 0x63"]


def test_parity_cli_on_cpu(capsys):
    assert quant_parity.main(["--device", "cpu", "--rows", "64", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["equal"] and {c["codec"] for c in out["cases"]} == set(q.CODECS)
    assert quant_parity.main(["--device", "tpu"]) == 2
    assert "kvviz: error: --device" in capsys.readouterr().err


# ---------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("case", quant_parity.parity_cases(), ids=lambda c: c.label)
def test_cpu_and_cuda_give_the_same_bytes(case):
    r = quant_parity.check_case(case, "cuda", rows=quant_parity.PARITY_ROWS)
    assert r.equal, r.line()


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("name", sorted(q.CODECS))
def test_cuda_pages_equal_cpu_pages(name):
    case = next(c for c in quant_parity.parity_cases() if c.codec == name)
    x = quant_parity.parity_inputs(8 * 64, case.dims, seed=11).reshape(8, 64, case.dims)
    codec = q.get_codec(name)
    cpu, gpu = codec.encode(x, **dict(case.opts)), codec.encode(x.cuda(), **dict(case.opts))
    assert gpu.payload.is_cuda and gpu.footer.is_cuda
    page_bytes = 64 * sum(codec.row_bytes(case.dims, **dict(case.opts)))
    pages = q.pack_page(gpu.payload, gpu.footer, page_bytes)
    assert torch.equal(pages.cpu(), q.pack_page(cpu.payload, cpu.footer, page_bytes))
    p, f = q.unpack_page(pages, 64, gpu.payload.shape[-1], gpu.footer.shape[-1])
    assert torch.equal(p.cpu(), cpu.payload) and torch.equal(f.cpu(), cpu.footer)
