"""Exact bit helpers every kvviz.quant codec shares: argument checks, powers of two, byte views.

Nothing here rounds: powers of two are built from bits, logarithms come from frexp, and the one
division (`true_div`) is an IEEE division on every device. Codecs call these through the module
(``bits.true_div(...)``), so a test can swap one out for all of them.
"""

from __future__ import annotations

import sys

import torch

from kvviz.base.errors import require

LITTLE_ENDIAN = sys.byteorder == "little"

_tables: dict = {}  # lookup tables, one per (name, device)
_constants: dict = {}  # (divisor, dtype, device) -> a 0-dim divisor tensor on that device
_MAX_CONSTANTS = 64


def as_f32(x: torch.Tensor, what: str) -> torch.Tensor:
    """`x` as float32; KvvizError naming argument `what` if it is not a tensor."""
    require(isinstance(x, torch.Tensor), f"{what}: expected a torch.Tensor, got {type(x).__name__}")
    return x.to(torch.float32)


def as_u8(x: torch.Tensor, what: str) -> torch.Tensor:
    """`x` itself once checked to be a uint8 tensor; KvvizError naming argument `what` otherwise."""
    require(isinstance(x, torch.Tensor), f"{what}: expected a torch.Tensor, got {type(x).__name__}")
    require(x.dtype == torch.uint8, f"{what}: expected dtype uint8, got {x.dtype}")
    return x


def last_dim(x: torch.Tensor, what: str) -> int:
    """The size of `x`'s last dim (the row); KvvizError naming `what` for a 0-dim tensor."""
    require(x.dim() >= 1, f"{what}: needs at least one dim (the row), got a 0-dim tensor")
    return int(x.shape[-1])


def groups(x: torch.Tensor, size: int) -> torch.Tensor:
    """[..., D] -> [..., D/size, size], the scale groups of a row (the caller checked D % size == 0)."""
    return x.reshape(*x.shape[:-1], x.shape[-1] // size, size)


def absmax(g: torch.Tensor) -> torch.Tensor:
    """max |g| over the last dim, without a full-size |g| temporary (a NaN propagates)."""
    lo, hi = torch.aminmax(g, dim=-1)
    return torch.maximum(hi, lo.neg_())


def cached_table(name: str, device: torch.device, build) -> torch.Tensor:
    """The lookup table `name` on `device`, built once by ``build()`` (on the CPU) and moved there."""
    key = (name, str(device))
    t = _tables.get(key)
    if t is None:
        t = _tables[key] = build().to(device)
    return t


def exp2i(k: torch.Tensor) -> torch.Tensor:
    """Exact 2^k in fp32 for an integer tensor k, built from bits (k clamped to [-149, 127])."""
    k = k.to(torch.int32).clamp(-149, 127)
    normal = (k + 127).clamp(min=1) << 23
    sub = torch.bitwise_left_shift(torch.ones_like(k), (k + 149).clamp(0, 22))
    return torch.where(k >= -126, normal, sub).view(torch.float32)


def floor_log2(a: torch.Tensor) -> torch.Tensor:
    """floor(log2 a) for a > 0, exact (frexp: a = m * 2^e with m in [0.5, 1)); int32."""
    _, e = torch.frexp(a)
    return e - 1


def pow2_ceil(s: torch.Tensor) -> torch.Tensor:
    """Positive fp32 values rounded UP to a power of two, exactly (vLLM's exp2(ceil(log2 s)))."""
    m, e = torch.frexp(s)
    return exp2i(torch.where(m == 0.5, e - 1, e))


def to_bytes(t: torch.Tensor) -> torch.Tensor:
    """Little-endian bytes of each element: [..., n] of itemsize k -> uint8 [..., n*k]."""
    k = t.element_size()
    b = t.contiguous().view(torch.uint8)
    if not LITTLE_ENDIAN and k > 1:
        b = b.reshape(*b.shape[:-1], -1, k).flip(-1).reshape(b.shape)
    return b


def from_bytes(b: torch.Tensor, dtype: torch.dtype, what: str) -> torch.Tensor:
    """The inverse of `to_bytes`: uint8 [..., n*k] (little-endian) -> `dtype` [..., n].

    Works from any byte offset (a slice of a page): a misaligned view is copied first.
    """
    k = torch.empty((), dtype=dtype).element_size()
    n = last_dim(b, what)
    require(n % k == 0, f"{what}: last dim {n} is not a multiple of {k} ({dtype} bytes)")
    if not LITTLE_ENDIAN and k > 1:
        b = b.reshape(*b.shape[:-1], -1, k).flip(-1).reshape(b.shape)
    if not b.is_contiguous() or b.storage_offset() % k:
        b = b.clone(memory_format=torch.contiguous_format)
    return b.view(dtype)


def true_div(x: torch.Tensor, divisor: float | torch.Tensor) -> torch.Tensor:
    """``x / divisor`` rounded once (an IEEE division), giving the same bits on every device.

    Every division of kvviz.quant goes through here. Why: on CUDA, torch computes a division by
    a Python number, or by a 0-dim CPU tensor (both count as a host scalar), as
    ``x * (1 / divisor)`` (ATen's ``div_true_kernel_cuda``: "this may lose one bit of precision
    compared to computing the division"), while the CPU kernel divides. With the rounded
    reciprocal, ``amax / 448`` and ``x / scale`` came out one bit off on an H200 for some inputs,
    so FP8 codes differed between CPU and CUDA. vLLM 0.33's cache writers divide (``scale =
    amax / 448``, then ``x / scale``); a divisor tensor on x's own device and of x's dtype makes
    torch run its elementwise division on every device, which is what this does.
    """
    if not isinstance(divisor, torch.Tensor):
        key = (float(divisor), x.dtype, str(x.device))
        d = _constants.get(key)
        if d is None:
            d = torch.tensor(float(divisor), dtype=x.dtype, device=x.device)
            if len(_constants) < _MAX_CONSTANTS:  # the codecs' fixed divisors; a caller's own scales pass through
                _constants[key] = d
        divisor = d
    elif divisor.device != x.device or divisor.dtype != x.dtype:
        divisor = divisor.to(device=x.device, dtype=x.dtype)
    return torch.div(x, divisor)


def f32_floor(v: float) -> float:
    """`v` rounded to the nearest fp32, as a Python float (an amax floor the kernels hold in fp32)."""
    return float(torch.tensor(v, dtype=torch.float32))
