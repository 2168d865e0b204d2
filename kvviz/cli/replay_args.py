"""`kvviz replay`'s own flags beside `kvviz plan`'s: how the traffic is read (--workload, --trace, --rows,
--step-ms, ...) and the swept flags (--sweep-*), shared by the single replay and the sweep."""

from __future__ import annotations

import argparse
import math

from kvviz.base.errors import require
from kvviz.cli.args import add_knob_arguments, add_source_arguments
from kvviz.cli.budget_args import add_budget_arguments
from kvviz.cli.values import _int_in, _nonempty

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


def add_parser(subparsers) -> None:
    """Register `kvviz replay` on an argparse subparsers object."""
    p = subparsers.add_parser(
        "replay", help="replay a workload or a published trace step by step as vLLM 0.33's scheduler runs it"
    )
    add_source_arguments(p, groups=False)
    traffic = p.add_argument_group("the traffic (one of)").add_mutually_exclusive_group(required=True)
    traffic.add_argument(
        "--workload",
        type=_nonempty("the workload path"),
        metavar="FILE.jsonl",
        help='kvviz JSON Lines: {"id", "arrival_step", "prompt_len", "output_len", "prefix_group", "prefix_len"} '
        'or "hash_ids" + "hash_block_tokens"',
    )
    traffic.add_argument(
        "--trace",
        type=_nonempty("the trace path"),
        metavar="FILE",
        help="a published trace, read as published: Mooncake JSON Lines or Azure's 2023 CSV",
    )
    t = p.add_argument_group("reading a trace (docs/replay.md#traces)")
    t.add_argument("--trace-format", choices=("auto", "mooncake", "azure"), default="auto")
    t.add_argument("--rows", metavar="START:END", help="a window of the trace's rows, numbered from 0 (default all)")
    t.add_argument(
        "--step-ms",
        type=positive_ms,
        metavar="MS",
        help="ms one engine step stands for (default 25; also the ms printed)",
    )
    t.add_argument("--id-prefix", metavar="NAME", help="request ids NAME-<row> (default: conv, synth or az)")
    t.add_argument(
        "--first-row",
        type=_int_in(0, 1 << 40),
        metavar="N",
        help="the number of the file's first row (a window cut from a longer trace keeps its ids)",
    )
    add_knob_arguments(p)
    p.add_argument(
        "--max-num-seqs", type=_int_in(1, 1 << 20), metavar="N", help="default min(1024, max-num-batched-tokens)"
    )
    add_budget_arguments(p, required=True)
    s = p.add_argument_group("what-if: one replay per setting, one table (kvviz.deploy.traffic)")
    for flag, (dest, what) in SWEEP_FLAGS.items():
        s.add_argument(flag, dest=dest, metavar=f"{what},{what}", help="comma-separated values")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="every step and request (the reference's fields), answers")
    out.add_argument("--markdown", action="store_true", help="the answers as a Markdown table")
    p.add_argument("--figure", metavar="OUT.png", help="the run (or the sweep) as a figure: .png, .svg or .pdf")
    p.set_defaults(func=run_replay, planner=None)


def run_replay(args) -> int:
    """`kvviz replay`: kvviz.cli.replay.run, imported as the command runs (the replay engine, ~0.1 s to import,
    stays off every other command's start)."""
    from kvviz.cli.replay import run

    return run(args)
