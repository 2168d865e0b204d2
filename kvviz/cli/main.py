"""`kvviz` console script (also `python -m kvviz`): the top floor.

Every subcommand lives here and no library module imports this one. The light commands
(`--help`, `models`, `plan`, `compare`) import neither torch nor matplotlib; a command that needs
one imports its module inside its run function (said there).

Every bad input ends with exit status 2 and one line `kvviz: error: ...`; Ctrl-C ends with the
line `kvviz: interrupted` and exit status 130, SIGTERM/SIGHUP with `kvviz: terminated` and
128 + N (kvviz.base.signals).
"""

from __future__ import annotations

import argparse
import os
import sys

from kvviz.base import signals
from kvviz.base.defaults import DPI, SEED, VERIFY_BLOCKS
from kvviz.base.errors import KvvizError, bounded
from kvviz.base.inputs import DPI_RANGE, MAX_BLOCKS, MAX_BUDGET_BYTES, printable
from kvviz.cli.args import Parser, add_knob_arguments, add_model_arguments, add_source_arguments
from kvviz.cli.budget_args import add_budget_arguments
from kvviz.cli.commands import run_fit, run_models, run_plan, run_render, run_verify
from kvviz.cli.compare import run_compare
from kvviz.cli.deploy_views import add_deploy_view_arguments
from kvviz.cli.replay_parser import add_parser as add_replay_parser
from kvviz.cli.values import int_in, nonempty
from kvviz.options import KNOB_OPTIONS, KV_DTYPES
from kvviz.vllm.plan import PLANNERS

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = signals.EXIT_INTERRUPTED  # 130: 128 + SIGINT, what a shell reports for a command ended by Ctrl-C


# ---- verify -------------------------------------------------------------------------------
def add_verify_parser(sub) -> None:
    """`kvviz verify`: write encoded data through a real pool's views, read it back (kvviz.verify).

    Builds the parser without importing kvviz.verify (torch): kvviz.verify checks --hazard and
    --assignment and names the choices when one is wrong."""
    p = sub.add_parser("verify", help="write encoded data through real pool views, read it back, show hazards")
    add_model_arguments(p)
    add_budget_arguments(p)
    p.add_argument(
        "--blocks",
        type=int_in(1, MAX_BLOCKS),
        default=None,
        help=f"number of blocks (default {VERIFY_BLOCKS}; or give a budget: budget // block stride)",
    )
    p.add_argument("--device", default="auto", help="auto (CUDA when available), cpu, cuda or cuda:N")
    p.add_argument(
        "--seed", type=int_in(0, 2**63 - 1), default=SEED, help=f"seed of the source values (default {SEED})"
    )
    p.add_argument("--hazard", default=None, help="act out a known overlay hazard: shared-block, zeroer or misread")
    p.add_argument("--hazard-layer", default=None, help="the layer the zeroer/misread hazard acts on")
    p.add_argument(
        "--assignment",
        default="round-robin",
        help="how block ids go to groups: round-robin (default: block b to group b mod groups) or contiguous",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output, every victim listed")
    p.set_defaults(func=run_verify)


def _engine_knob_arguments(p) -> None:
    p.add_argument(
        "--max-attention-window",
        default=None,
        metavar="W,W",
        help="TensorRT-LLM KvCacheConfig.max_attention_window (a per-layer pattern; docs/engines.md)",
    )
    p.add_argument(
        "--enable-unified-memory",
        dest="unified_memory",
        action="store_true",
        help="SGLang --enable-unified-memory: one buffer for a hybrid-SWA model's pools",
    )
    p.add_argument(
        "--max-batch-size",
        type=int_in(1, 1 << 20),
        default=None,
        help="TensorRT-LLM max_batch_size (default 2048; a hybrid Mamba model's state slots)",
    )
    p.add_argument(
        "--use-py-mamba",
        action="store_true",
        help="TensorRT-LLM TRTLLM_USE_PY_MAMBA=1 with use_kv_cache_manager_v2=False: the legacy "
        "MixedMambaHybridCacheManager (states outside the KV budget) instead of MambaHybridCacheManagerV2",
    )


def build_parser() -> argparse.ArgumentParser:
    """The `kvviz` argument parser: plan, compare, render, fit, models and verify, each with its flags."""
    parser = Parser(prog="kvviz", description="Byte-exact views of LLM serving engines' KV-cache layouts.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    p = sub.add_parser("plan", help="plan one block and print the layout (and, with a budget, vLLM's capacity line)")
    add_model_arguments(p)
    add_budget_arguments(p)
    p.add_argument(
        "--engine",
        choices=("vllm", "sglang", "trtllm"),
        default="vllm",
        help="whose pools: vLLM's (default, every planner), SGLang's or TensorRT-LLM's (docs/engines.md#sglang)",
    )
    _engine_knob_arguments(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--markdown", action="store_true", help="the plan's table as Markdown, for a review")
    add_deploy_view_arguments(p)
    p.set_defaults(func=run_plan)

    p = sub.add_parser(
        "compare",
        help="the planners side by side at one budget (DeepSeek V4: vLLM #48993's before/after), the engines "
        "(--engines), or two configurations: `kvviz compare A-FLAGS -- B-CHANGES` "
        "(docs/review.md#two-configurations-side-by-side)",
    )
    add_source_arguments(p, groups=False)
    add_knob_arguments(p)
    add_budget_arguments(p, required=True)
    p.add_argument("--planner", choices=PLANNERS, help="with `--`: the planner of both sides (default vllm)")
    p.add_argument(
        "vs",
        nargs="*",
        metavar="-- B-CHANGES",
        help="after `--`: what side B changes (e.g. -- --kv-cache-dtype fp8; -- -tp 4; -- --model mistral-7b-v0.1)",
    )
    p.add_argument(
        "--engines",
        default=None,
        metavar="E,E",
        help="engines side by side instead of planners: any of vllm,sglang,trtllm",
    )
    _engine_knob_arguments(p)
    p.add_argument(
        "--figure",
        default=None,
        metavar="FILE",
        help="with --engines or `--`: also write the figure (.png, .svg, .pdf)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--markdown", action="store_true", help="the table as Markdown, for a review")
    p.set_defaults(func=run_compare)

    p = sub.add_parser("fit", help="what fits: requests against context length on a few GPUs and TP sizes")
    add_source_arguments(p, groups=False)
    p.add_argument("--planner", choices=PLANNERS, help="the planner (default vllm)")
    p.add_argument("--gpus", default="H100,H200,B200", help="GPUs of kvviz.deploy.budget.budget.GPUS, comma-separated")
    p.add_argument("--tp", default="1,2,4,8", help="tensor-parallel sizes, comma-separated")
    p.add_argument("--contexts", default=None, help="request lengths, comma-separated (default 4k to 1M)")
    p.add_argument("--kv-dtype", dest="kv_dtype", choices=KV_DTYPES + ("auto",), help="attention KV dtype")
    p.add_argument("--gpu-memory-utilization", type=float, default=None, metavar="F")
    p.add_argument("--weights-bytes", type=int_in(0, MAX_BUDGET_BYTES), metavar="BYTES")
    p.add_argument("--checkpoint", metavar="DIR")
    p.add_argument("--out", default=None, metavar="DIR", help="also write the figure (fit.png) here")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run_fit)

    add_replay_parser(sub)  # kvviz replay (issue 28)

    p = sub.add_parser(
        "models", help="list the shipped model presets (--architectures: vLLM 0.33's, with kvviz's status)"
    )
    p.add_argument(
        "--architectures",
        action="store_true",
        help="every architecture of vLLM 0.33's registry, its model file and kvviz's status (docs/models.md)",
    )
    p.add_argument("--json", action="store_true", help="with --architectures: machine-readable output")
    p.set_defaults(func=run_models)
    add_verify_parser(sub)

    p = sub.add_parser("render", help="write the figures (PNG + SVG) and a self-contained report.html")
    add_model_arguments(p)
    add_budget_arguments(p)
    p.add_argument(
        "--out",
        required=True,
        type=nonempty("the output folder"),
        metavar="DIR",
        help="output folder (created when missing)",
    )
    p.add_argument("--title", default=None, help="report title (default: model, planner)")
    p.add_argument("--dpi", type=int_in(*DPI_RANGE), help=f"PNG resolution (default {DPI})")
    p.add_argument("--no-svg", action="store_true", help="write PNGs only")
    p.set_defaults(func=run_render)

    return parser


# kvviz.verify's and kvviz.pool's arguments -> the verify flags that set them
VERIFY_FLAGS = {
    "seed": "--seed",
    "hazard": "--hazard",
    "hazard_layer": "--hazard-layer",
    "assignment": "--assignment",
    "device": "--device",
    "num_blocks": "--blocks",
}


def _as_flags(message: str) -> str:
    """The library names Python arguments (`backend='x': ...`); the CLI says which flag set it."""
    from kvviz.deploy.budget import NO_ROOM_HINT
    from kvviz.deploy.weights import CLI_HINT, PYTHON_HINT

    message = message.replace(PYTHON_HINT, CLI_HINT).replace(NO_ROOM_HINT, "(or --tensor-parallel-size / -tp)")
    field, sep, rest = message.partition("=")
    if sep and field in VERIFY_FLAGS:
        return f"{VERIFY_FLAGS[field]}: {field}={rest}"
    if sep and field in KNOB_OPTIONS:
        return f"{KNOB_OPTIONS[field]}: {field}={rest}"
    field, sep, rest = message.partition(": ")
    if sep and field in KNOB_OPTIONS:  # "kv_dtype: does not apply to ..." names the flag, and its knobs the flags
        if "; its knobs are " in rest:
            head, knobs = rest.split("; its knobs are ", 1)
            rest = f"{head}; its knobs: " + ", ".join(KNOB_OPTIONS.get(k, k) for k in knobs.split(", "))
        return f"{KNOB_OPTIONS[field]}: {rest}"
    return message


def main(argv: list[str] | None = None) -> int:
    """Run `kvviz` on `argv` (None: sys.argv) and return the exit status: 0, 2 on bad input (one line naming the
    flag), 130 on Ctrl-C, 128 + N on SIGTERM / SIGHUP."""
    closed = _closed_streams()  # `>&-`: what the command prints goes nowhere, and the status says so
    try:
        with signals.handled():  # SIGTERM/SIGHUP: as Ctrl-C, `kvviz: terminated`, 128 + N
            parser = build_parser()
            args = parser.parse_args(argv)
            if args.func is run_compare:  # `compare A -- B` reads the words as given and parses side B again
                status = run_compare(args, list(sys.argv[1:] if argv is None else argv), parser)
            else:
                status = args.func(args)
            sys.stdout.flush()  # a full disk or a closed pipe under the output: reported here, one line
            return EXIT_OS_ERROR if "stdout" in closed and status == 0 else status
    except KeyboardInterrupt as e:  # Ctrl-C, and SIGTERM / SIGHUP (signals.Terminated)
        return _ended_by(getattr(e, "signum", signals.SIGINT))
    except Exception as e:
        if signals.received() is not None:  # a library turned the signal into its own error (numpy's import)
            return _ended_by(signals.received())
        return _failed(e)


def _ended_by(signum: int) -> int:
    line, status = signals.signalled(signum)
    print(line, file=sys.stderr)
    return status


def _failed(e: Exception) -> int:
    """The exit status of a command that raised `e`, after its one line: bad input (2), a closed pipe under the
    output (0, quietly), an operating-system failure (1); anything else is a bug, raised again."""
    if isinstance(e, KvvizError):
        print(f"kvviz: error: {bounded(_as_flags(str(e)))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if isinstance(e, BrokenPipeError):  # output piped into `head`
        sys.stderr.close()
        return 0
    if isinstance(e, OSError):  # the output cannot be written (`> /dev/full`), a path the system refuses
        _drop_stdout()
        where = f" ({repr(printable(e.filename))})" if e.filename else " (writing the output)"
        print(f"kvviz: error: {bounded(f'{e.strerror or type(e).__name__}{where}')}", file=sys.stderr)
        return EXIT_OS_ERROR
    raise e


# Exit status of an operating-system failure (a full disk, a name too long): not bad input.
EXIT_OS_ERROR = 1


def _closed_streams() -> tuple[str, ...]:
    """The standard streams the process was started without (`kvviz plan ... >&-` leaves sys.stdout None),
    each pointed at /dev/null (for the rest of the process), so that printing needs no check; their names."""
    closed = []
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w"))  # noqa: SIM115 (the process's stream until it exits)
            closed.append(name)
    return tuple(closed)


def _drop_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's own flush at exit does not fail again on
    the output that could not be written (and print a second, multi-line error)."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError, AttributeError):  # no real stdout (a notebook, a test's capture)
        pass


if __name__ == "__main__":
    sys.exit(main())
