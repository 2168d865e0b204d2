"""`kvviz replay`'s parser: its flags (beside `kvviz plan`'s), registered at every start, and the command,
whose module (kvviz.cli.replay, with the replay engine under it) is imported only when it runs."""

from __future__ import annotations

from kvviz.cli.args import add_knob_arguments, add_source_arguments
from kvviz.cli.budget_args import add_budget_arguments
from kvviz.cli.replay_args import SWEEP_FLAGS, positive_ms
from kvviz.cli.values import int_in, nonempty


def add_parser(subparsers) -> None:
    """Register `kvviz replay` on an argparse subparsers object."""
    p = subparsers.add_parser(
        "replay", help="replay a workload or a published trace step by step as vLLM 0.33's scheduler runs it"
    )
    add_source_arguments(p, groups=False)
    traffic = p.add_argument_group("the traffic (one of)").add_mutually_exclusive_group(required=True)
    traffic.add_argument(
        "--workload",
        type=nonempty("the workload path"),
        metavar="FILE.jsonl",
        help='kvviz JSON Lines: {"id", "arrival_step", "prompt_len", "output_len", "prefix_group", "prefix_len"} '
        'or "hash_ids" + "hash_block_tokens"',
    )
    traffic.add_argument(
        "--trace",
        type=nonempty("the trace path"),
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
        type=int_in(0, 1 << 40),
        metavar="N",
        help="the number of the file's first row (a window cut from a longer trace keeps its ids)",
    )
    add_knob_arguments(p)
    p.add_argument(
        "--max-num-seqs", type=int_in(1, 1 << 20), metavar="N", help="default min(1024, max-num-batched-tokens)"
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
