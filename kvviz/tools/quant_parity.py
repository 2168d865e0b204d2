"""Same bytes on every device: each kvviz.quant codec run on the CPU and on another device.

For every codec in ``kvviz.quant.CODECS`` (and the option variants vLLM uses: power-of-two
indexer scales, the OCP floor rule, a fixed per-tensor scale) it encodes one seeded input on the
CPU and on ``--device``, and compares, byte for byte: the payload, the footer, the side data
(the per-tensor FP8 scale), the decoded values (fp32 bits) and the error bounds. The rows are
those of DeepSeek-V4-Pro's caches (head dims from the shipped preset), at least 65,536 of them,
with magnitudes spread log-uniformly over 1e-4..1e4 with random signs (no NaN), so every scale
exponent and both E4M3 ranges (subnormal and normal) are hit.

    python -m kvviz.tools.quant_parity --device cuda [--rows 65536] [--json]

Exit status 0 when every byte agrees, 1 when some differ (one line per codec either way), 2 on
bad input. Plain torch, no pytest: ``scripts/gpu_check.sh`` runs it on a bare GPU machine, and
``tests/test_parity.py`` calls `check_case` for each case.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from typing import Any

import torch

from kvviz import quant
from kvviz.base import formats
from kvviz.base.errors import KvvizError, require
from kvviz.families import preset_names, preset_raw
from kvviz.families.deepseek_v4 import BACKENDS, CacheOptions, model_caches
from kvviz.families.deepseek_v4_config import config_from_dict, is_deepseek_v4
from kvviz.options import KV_DTYPES
from kvviz.pool import resolve_device

#: The model whose row formats are checked (its preset gives every head dim).
PARITY_MODEL = "deepseek-v4-pro"
# A hybrid preset whose attention rows (K | V, codec "parts") join the cases; read from its raw
# config.json, so the parity check needs no transformers (a GPU box may not have it).
PARITY_MLA_MODEL = "deepseek-v3"  # its MLA latent | rope rows
PARITY_STATE_MODEL = "qwen3-next-80b-a3b"  # its gated delta net states
PARITY_HYBRID_MODEL = "gpt-oss-120b"
#: Rows per case; 2^16 rows of 128..512 values is 8..33 M values per codec.
PARITY_ROWS = 65_536
PARITY_MAX_VALUES = 1 << 24  # values per case at most (64 MiB of fp32 inputs): wide state rows take fewer rows
PARITY_MIN_ROWS = 16
#: Magnitudes are 10^u with u uniform in [-DECADES, DECADES] around 1: 1e-4..1e4.
DECADES = 4.0
#: The per-tensor FP8 codec has one scale per tensor: its rows are encoded in this many separate
#: tensors (each with its own amax), so more than one scale is compared.
PER_TENSOR_CHUNKS = 64


@dataclasses.dataclass(frozen=True)
class ParityCase:
    """One codec, one head dim, one set of encode options."""

    codec: str
    dims: int
    opts: tuple[tuple[str, Any], ...] = ()

    @property
    def label(self) -> str:
        """'codec[dims] opt=value ...', the case's name in the output and in pytest ids."""
        extra = "".join(f" {k}={v}" for k, v in self.opts)
        return f"{self.codec}[{self.dims}]{extra}"


@dataclasses.dataclass(frozen=True)
class ParityResult:
    """What differed between the CPU and the device for one case (all zero: same bytes)."""

    case: ParityCase
    device: str
    rows: int
    bytes_compared: int  # payload + footer + side bytes
    mismatched: dict[str, int]  # part -> differing elements (payload, footer, side, decoded, bound)
    first_mismatch: str  # "" or where the first difference is
    seconds: float

    @property
    def equal(self) -> bool:
        """True when nothing differed (same bytes on the CPU and the device)."""
        return not any(self.mismatched.values())

    def line(self) -> str:
        """One line: the case, rows, bytes compared and the verdict (what differed first, if anything)."""
        verdict = (
            "same bytes"
            if self.equal
            else "DIFFERENT: "
            + ", ".join(f"{n} {part}" for part, n in self.mismatched.items() if n)
            + f" (first: {self.first_mismatch})"
        )
        return (
            f"{self.case.label:<44} {self.rows:>7,} rows  {self.bytes_compared:>13,} B  cpu vs {self.device}: "
            f"{verdict}  ({self.seconds:.2f} s)"
        )

    def to_json(self) -> dict:
        """The result as a JSON-ready dict (the --json output's per-case entry)."""
        return {
            "case": self.case.label,
            "codec": self.case.codec,
            "dims": self.case.dims,
            "opts": dict(self.case.opts),
            "device": self.device,
            "rows": self.rows,
            "bytes_compared": self.bytes_compared,
            "mismatched": self.mismatched,
            "first_mismatch": self.first_mismatch,
            "equal": self.equal,
            "seconds": round(self.seconds, 3),
        }


def parity_cases(model: str = PARITY_MODEL) -> tuple[ParityCase, ...]:
    """Every codec at the head dims `model`'s caches use, plus the option variants.

    Dims come from the preset through kvviz.families.deepseek_v4 (main rows: head_dim, with qk_rope_head_dim RoPE
    dims for fp8_ds_mla; indexer rows: index_head_dim; fp32 compressor states: the narrowest state
    row, as the fp32 codec only copies bytes and its width changes nothing).
    """
    config = config_from_dict(preset_raw(model), name=model)
    rows: dict[str, Any] = {}
    for backend in BACKENDS:
        for main in ("fp8_ds_mla", "fp8", "bf16"):
            for indexer in ("fp8", "mxfp4"):
                opts = CacheOptions(backend=backend, main_format=main, indexer_format=indexer)
                for cache in model_caches(config, opts):
                    row = cache.row_format
                    if row.name in quant.CODECS and (row.name not in rows or row.dims < rows[row.name].dims):
                        rows[row.name] = row
    raw = preset_raw(PARITY_HYBRID_MODEL)
    raw = raw.get("text_config") or raw
    # every two-part row kind: K|V rows, MLA latent|rope rows, recurrent conv|SSM states, each dtype
    kv_rows = [
        formats.kv_row(raw["num_key_value_heads"], raw["head_dim"], raw["head_dim"], dtype) for dtype in KV_DTYPES
    ]
    mla = preset_raw(PARITY_MLA_MODEL)
    kv_rows += [formats.mla_row(mla["kv_lora_rank"], mla["qk_rope_head_dim"], dtype) for dtype in KV_DTYPES]
    gdn = preset_raw(PARITY_STATE_MODEL)  # a gated delta net state (conv, SSM) in bf16 and fp32
    conv = (gdn["linear_conv_kernel_dim"] - 1) * (
        2 * gdn["linear_num_key_heads"] * gdn["linear_key_head_dim"]
        + gdn["linear_num_value_heads"] * gdn["linear_value_head_dim"]
    )
    ssm = gdn["linear_num_value_heads"] * gdn["linear_value_head_dim"] * gdn["linear_key_head_dim"]
    kv_rows += [
        formats.recurrent_state_row("gdn", (("conv", conv, "bf16"), ("ssm", ssm, dtype))) for dtype in ("bf16", "fp32")
    ]
    rows["parts"] = kv_rows[0]
    missing = set(quant.CODECS) - set(rows)
    require(not missing, f"model={model!r}: no cache uses codec(s) {', '.join(sorted(missing))}")
    cases = []
    for name in quant.CODECS:
        row = rows[name]
        if name == "parts":
            continue  # below, once per KV dtype
        base: tuple[tuple[str, Any], ...] = ()
        if name == "fp8_ds_mla":
            # the RoPE tail is the payload's bf16 field (formats.ds_mla_row), asked by element type
            base = (("rope_dims", sum(f.count for f in row.payload if f.element is formats.Element.BF16)),)
        cases.append(ParityCase(name, row.dims, base))
        if name == "indexer_fp8":
            cases.append(ParityCase(name, row.dims, (("pow2_scale", True),)))  # vLLM's use_ue8m0 variant
        if name == "indexer_mxfp4":
            cases.append(ParityCase(name, row.dims, (("scale_rule", "floor"),)))  # the OCP MX rule
        if name == "fp8":
            # a fixed scale that is not a power of two (the division x / scale rounds)
            cases.append(ParityCase(name, row.dims, (("scale", 0.3),)))
    # hybrid K | V rows in every KV dtype (E4M3 parts divide by their per-tensor scales)
    cases += [ParityCase("parts", r.dims, (("parts", quant.parts_of(r)),)) for r in kv_rows]
    return tuple(cases)


def parity_inputs(rows: int, dims: int, *, seed: int, row_groups: int | None = None) -> torch.Tensor:
    """Seeded fp32 [rows, dims] on the CPU: sign * 10^(c + v), no NaN, no zero.

    c is drawn per row (or per group of rows, `row_groups` groups) and v per value so that
    c + v stays in [-DECADES, DECADES]: magnitudes 1e-4..1e4, and each scale group's amax varies
    from row to row (many different scales), not only its elements.
    """
    require(isinstance(rows, int) and rows > 0, f"rows={rows!r}: must be a positive integer")
    g = torch.Generator().manual_seed(seed)
    groups = rows if row_groups is None else row_groups
    half = DECADES / 2
    center = (torch.rand(groups, 1, generator=g, dtype=torch.float64) * 2 - 1) * half
    center = center.repeat_interleave(-(-rows // groups), dim=0)[:rows]
    spread = (torch.rand(rows, dims, generator=g, dtype=torch.float64) * 2 - 1) * half
    sign = torch.where(torch.rand(rows, dims, generator=g) < 0.5, -1.0, 1.0).to(torch.float64)
    return (sign * torch.pow(10.0, center + spread)).to(torch.float32)


def _bits(t: torch.Tensor) -> torch.Tensor:
    """A tensor's raw bytes (CPU, uint8), so NaN payloads and -0.0 compare as bytes."""
    t = t.detach().to("cpu").contiguous()
    return t.reshape(-1).view(torch.uint8) if t.dim() else t.reshape(1).view(torch.uint8)


def _compare(name: str, a: torch.Tensor, b: torch.Tensor, mismatched: dict, first: list) -> int:
    """Count differing bytes of a and b into mismatched[name]; remember the first difference."""
    ba, bb = _bits(a), _bits(b)
    if ba.shape != bb.shape:
        mismatched[name] = mismatched.get(name, 0) + max(ba.numel(), bb.numel())
        first.append(f"{name}: shape {tuple(a.shape)} vs {tuple(b.shape)}")
        return ba.numel()
    diff = ba != bb
    n = int(diff.sum())
    mismatched[name] = mismatched.get(name, 0) + n
    if n and not first:
        i = int(diff.nonzero()[0, 0])
        first.append(f"{name} byte {i}: cpu 0x{int(ba[i]):02x} vs 0x{int(bb[i]):02x}")
    return ba.numel()


def check_case(case: ParityCase, device: str | torch.device, *, rows: int = PARITY_ROWS, seed: int = 0) -> ParityResult:
    """Encode, decode and bound one case on the CPU and on `device`; count what differs."""
    device = torch.device(device)
    t0 = time.perf_counter()
    codec = quant.get_codec(case.codec)
    opts = dict(case.opts)
    per_tensor = codec.side_option is not None and codec.side_option not in opts  # per-tensor scales
    chunks = min(PER_TENSOR_CHUNKS, rows) if per_tensor else 1
    x = parity_inputs(rows, case.dims, seed=seed, row_groups=chunks if per_tensor else None)
    mismatched = {part: 0 for part in ("payload", "footer", "side", "decoded", "bound")}
    first: list[str] = []
    compared = 0
    for part in torch.tensor_split(x, chunks):
        on_dev = part.to(device)
        cpu, dev = codec.encode(part, **opts), codec.encode(on_dev, **opts)
        compared += _compare("payload", cpu.payload, dev.payload, mismatched, first)
        compared += _compare("footer", cpu.footer, dev.footer, mismatched, first)
        sides = zip(*(s if isinstance(s, tuple) else (s,) for s in (cpu.side, dev.side)))
        for a, b in sides:  # one per-tensor scale, or one per part (None for a plain part)
            if a is not None or b is not None:
                compared += _compare("side", a, b, mismatched, first)
        _compare("decoded", codec.decode(cpu), codec.decode(dev), mismatched, first)
        _compare("bound", codec.error_bound(part, **opts), codec.error_bound(on_dev, **opts), mismatched, first)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return ParityResult(
        case, str(device), rows, compared, mismatched, first[0] if first else "", time.perf_counter() - t0
    )


def run(
    device: str | torch.device, *, rows: int = PARITY_ROWS, seed: int = 0, model: str = PARITY_MODEL
) -> list[ParityResult]:
    """`check_case` for every case of `parity_cases(model)`; a wide row (a recurrent state holds
    hundreds of thousands of values) gets as many rows as PARITY_MAX_VALUES values allow, and at
    least PARITY_MIN_ROWS."""
    return [
        check_case(c, device, rows=min(rows, max(PARITY_MIN_ROWS, PARITY_MAX_VALUES // c.dims)), seed=seed)
        for c in parity_cases(model)
    ]


class _Parser(argparse.ArgumentParser):
    """A usage error as one line and exit 2, as the kvviz command reports it."""

    def error(self, message: str):
        raise KvvizError(message)


def main(argv: list[str] | None = None) -> int:
    """The command line: 0 when every case gives the same bytes, 1 when some differ, 2 on bad input."""
    ap = _Parser(prog="python -m kvviz.tools.quant_parity", description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", help="device compared with the CPU (default cuda)")
    ap.add_argument("--rows", type=int, default=PARITY_ROWS, help=f"rows per case (default {PARITY_ROWS:,})")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--model",
        default=PARITY_MODEL,
        choices=[n for n in preset_names() if is_deepseek_v4(preset_raw(n))],
        help=f"DeepSeek V4 preset whose row formats are checked (hybrid K|V rows join from {PARITY_HYBRID_MODEL})",
    )
    ap.add_argument("--json", action="store_true", help="one JSON object instead of lines")
    try:
        args = ap.parse_args(argv)
        require(args.rows > 0, f"--rows={args.rows}: must be a positive integer")
        device = resolve_device(args.device, "--device")  # cpu, cuda or cuda:N; anything else refused in one line
        results = run(device, rows=args.rows, seed=args.seed, model=args.model)
    except KvvizError as e:
        print(f"kvviz: error: {e}", file=sys.stderr)
        return 2
    ok = all(r.equal for r in results)
    if args.json:
        print(
            json.dumps(
                {
                    "device": str(device),
                    "torch": torch.__version__,
                    "rows": args.rows,
                    "equal": ok,
                    "cases": [r.to_json() for r in results],
                },
                indent=1,
            )
        )
    else:
        for r in results:
            print(r.line())
        print(
            f"{'all codecs: same bytes' if ok else 'SOME CODECS DIFFER'} on cpu and {device} "
            f"({len(results)} cases, torch {torch.__version__})"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
