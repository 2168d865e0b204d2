"""`kvviz replay`'s own flags beside `kvviz plan`'s: how the traffic is read (--workload, --trace, --rows,
--step-ms, ...) and the swept flags (--sweep-*), shared by the single replay and the sweep."""

from __future__ import annotations

import argparse
import math

from kvviz.base.errors import require

SWEEP_FLAGS = {  # flag -> (dest, what a value is)
    "--sweep-budget-gib": ("sweep_budget_gib", "GiB"),
    "--sweep-gpu": ("sweep_gpu", "GPU"),
    "--sweep-tp": ("sweep_tp", "TP"),
    "--sweep-kv-dtype": ("sweep_kv_dtype", "DTYPE"),
    "--sweep-max-num-seqs": ("sweep_max_num_seqs", "N"),
}


def positive_ms(text: str) -> float:
    """--step-ms: a positive, finite number of ms, at most a day (an int when whole)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r}: a number of ms") from None
    if not (math.isfinite(value) and 0 < value <= 86_400_000):
        raise argparse.ArgumentTypeError(f"{text[:40]!r}: a positive number of ms, at most a day")
    return int(value) if value.is_integer() else value


def traffic_args(args) -> dict:
    """What the front door reads the traffic with: the file, and for a trace its format, rows and step time."""
    if args.workload is not None:
        for flag, value in (("--rows", args.rows), ("--id-prefix", args.id_prefix), ("--first-row", args.first_row)):
            require(value is None, f"{flag}: applies to --trace (a published trace), not to a --workload")
        require(args.trace_format == "auto", "--trace-format: applies to --trace, not to a --workload")
        return {"workload": args.workload, "trace_format": "workload"}
    return {
        "workload": args.trace,
        "trace_format": None if args.trace_format == "auto" else args.trace_format,
        "rows": args.rows,
        "step_ms": args.step_ms,
        "id_prefix": args.id_prefix,
        "first_row": args.first_row,
    }
