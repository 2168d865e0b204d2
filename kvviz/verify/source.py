"""The seeded source of a verify run: what every byte of every page is meant to hold.

Two kinds of content, both reproducible from the run's seed alone (nothing is kept to compare
against; the read-back regenerates it):

* The pattern (`block_keys`, `layer_keys`, `fill_pattern`): the bulk of every page. Word i of the
  page of layer l in block b (words of `word_bytes` bytes, the widest that the page's offsets
  allow) is ``B(seed, b) + L(seed, l) + i * RAMP`` modulo 2^(8 * word_bytes), B and L splitmix64
  outputs (distinct pages differ in their key but for a 2^-64 chance). It costs no encoding and is computed
  on word views in one integer pass (exact on every device: no float, no division). Any changed
  byte changes its word; a page written to the wrong block or layer, or shifted inside its page,
  has the wrong key or the wrong ramp.
* Real rows (`source_values`): seeded fp32 rows (``randn`` times a random power of two per 32
  values, some all-zero rows, so every scale path runs), encoded by the layer's real codec
  (kvviz.quant) for the sample the decode-error report measures (kvviz.verify.samples).
"""

from __future__ import annotations

import math

import torch

from kvviz.base.errors import require
from kvviz.base.inputs import bounded_int, of_type, short_repr

MAX_SOURCE_VALUES = 1 << 30  # values of one batch of source rows (4 GiB of fp32)

# Source magnitudes: log2 of the per-32-value magnitude is uniform in [-SPREAD, SPREAD].
SPREAD = {"fp8_ds_mla": 6.0, "fp8": 2.0, "bf16": 8.0, "indexer_fp8": 6.0, "indexer_mxfp4": 6.0, "fp32": 8.0}
ZERO_ROW_FRACTION = 1 / 32  # all-zero rows exercise the amax floors
RAMP = 0x9E3779B97F4A7C15 - 2**64  # odd: i * RAMP differs for every word index i < 2^64 (as int64)
WORD_DTYPES = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.uint8}

_MASK64 = 2**64 - 1


def _mix64(x: int) -> int:
    """splitmix64's finalizer: a bijection of 64-bit integers that scatters nearby inputs."""
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def unit_seed(seed: int, layer: int, unit: int) -> int:
    """A 63-bit seed for (seed, layer, unit), mixed in turn so that neighbouring layers and units
    get unrelated seeds (torch.Generator.manual_seed takes 63 bits)."""
    x = _mix64((seed + 0x9E3779B97F4A7C15) & _MASK64)
    x = _mix64(x ^ layer)
    return _mix64(x ^ unit) >> 1


def _signed(x: int) -> int:
    """A 64-bit pattern as the int64 torch stores."""
    return x - 2**64 if x >= 2**63 else x


def _mix_tensor(x: torch.Tensor) -> torch.Tensor:
    """splitmix64's finalizer on an int64 tensor (products wrap modulo 2^64; shifts made logical)."""

    def shr(t, k):
        return (t >> k) & ((1 << (64 - k)) - 1)

    x = (x ^ shr(x, 30)) * _signed(0xBF58476D1CE4E5B9)
    x = (x ^ shr(x, 27)) * _signed(0x94D049BB133111EB)
    return x ^ shr(x, 31)


def block_keys(seed: int, num_blocks: int, device: torch.device) -> torch.Tensor:
    """(num_blocks,) int64: each block's part of the pattern key, splitmix64 of (seed, block)."""
    base = _signed(unit_seed(seed, 2**63 - 1, 0) << 1)
    ids = torch.arange(num_blocks, dtype=torch.int64, device=device)
    return _mix_tensor(ids * _signed(0xD1B54A32D192ED03) + base)


def layer_keys(seed: int, layers: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """(len(layers),) int64: each layer's part of the pattern key, from (seed, layer index)."""
    return torch.tensor([_signed(unit_seed(seed, layer, 0) << 1) for layer in layers], dtype=torch.int64, device=device)


def ramp(words: int, word_bytes: int, device: torch.device) -> torch.Tensor:
    """i * RAMP for the words of one page, in the word dtype (wrapping)."""
    r = torch.arange(words, dtype=torch.int64, device=device) * RAMP
    return r if word_bytes == 8 else r.to(WORD_DTYPES[word_bytes])


def fill_pattern(
    out: torch.Tensor, blocks: torch.Tensor, layers: torch.Tensor, page_ramp: torch.Tensor
) -> torch.Tensor:
    """Write the pattern of pages (blocks, layers, words) into `out` (any strides, e.g. the pool's
    own strided word view) in one pass: out[b, l, i] = blocks[b] + layers[l] + ramp[i] (wrapping;
    `blocks` and `layers` are block_keys and layer_keys entries)."""
    keys = blocks[:, None] + layers[None, :]
    if out.dtype != torch.int64:
        keys = keys.to(out.dtype)
    return torch.add(page_ramp, keys[:, :, None], out=out)


def source_values(fmt: str, shape: tuple[int, ...], generator: torch.Generator, device: torch.device) -> torch.Tensor:
    """Seeded fp32 source rows [..., rows, dims] for a format: randn times 2^u per 32 values (u
    uniform in [-SPREAD, SPREAD]), with some all-zero rows."""
    of_type(fmt, str, field="fmt", give="a row format's name")
    of_type(shape, tuple, field="shape", give="a tuple of positive sizes, e.g. (4, 128)")
    for n in shape:
        bounded_int(n, field="shape", low=1, high=MAX_SOURCE_VALUES)
    require(
        len(shape) > 0 and math.prod(shape) <= MAX_SOURCE_VALUES,
        f"shape={short_repr(shape)}: at most {MAX_SOURCE_VALUES:,} values",
    )
    of_type(generator, torch.Generator, field="generator", give="a torch.Generator")
    of_type(device, torch.device, field="device", give="a torch.device")
    x = torch.randn(shape, generator=generator, device=device)
    spread = SPREAD.get(fmt, 0.0)
    dims = shape[-1]
    chunk = 32 if dims % 32 == 0 else dims
    u = (torch.rand(*shape[:-1], dims // chunk, 1, generator=generator, device=device) * 2 - 1) * spread
    keep = torch.rand(*shape[:-1], 1, 1, generator=generator, device=device) >= ZERO_ROW_FRACTION
    scale = torch.exp2(u) * keep  # one factor per 32 values; 0 for the all-zero rows
    return (x.unflatten(-1, (dims // chunk, chunk)) * scale).flatten(-2)


def sample_source(
    fmt: str, layer: int, block: int, rows: int, dims: int, seed: int, device: torch.device
) -> torch.Tensor:
    """The fp32 rows [rows, dims] of one layer's sampled page (its own generator, from seed,
    layer and block): the same values however the sample is grouped."""
    gen = torch.Generator(device=device).manual_seed(unit_seed(seed, layer, block + 1))
    return source_values(fmt, (rows, dims), gen, device)
