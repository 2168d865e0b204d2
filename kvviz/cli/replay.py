"""`kvviz replay`: a workload or a published trace replayed as vLLM 0.33's scheduler runs it, on the deployment the
same flags as `kvviz plan` describe, and its answers printed (kvviz.replay, docs/replay.md); with `--sweep-*`
flags, one replay per setting in one table (kvviz.deploy.traffic)."""

from __future__ import annotations

import json

from kvviz.base.errors import KvvizError


def add_parser(subparsers) -> None:
    """Register `kvviz replay` on an argparse subparsers object."""
    from kvviz.cli.args import add_knob_arguments, add_source_arguments
    from kvviz.cli.budget_args import add_budget_arguments
    from kvviz.cli.replay_args import SWEEP_FLAGS, positive_ms
    from kvviz.cli.values import _int_in, _nonempty

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
    p.set_defaults(func=run, planner=None)


def planned_replay(args):
    """(model, plan, budget, the replay's own prefix-caching switch) the flags describe: the plan as `kvviz plan`
    makes it (kvviz.cli.args.plan_from_args through kvviz.api.make_plan, the one door; budget_args: one budget
    rule); --no-prefix-caching is the
    replay's switch for any model, and also the plan's where the family takes it (a Mamba hybrid's mode)."""
    from kvviz.cli.args import model_from_args, plan_from_args

    model = model_from_args(args)
    prefix = args.prefix_caching
    if prefix is False and "prefix_caching" not in model.reader.knobs_for(model):
        args.prefix_caching = None  # not a planning knob of this model: the scheduler's alone
    planned = plan_from_args(args)
    return planned.model, planned.plan, args.budget, prefix


def run(args) -> int:
    """Replay the traffic and print its answers (--json: everything; --markdown: the answers' table)."""
    from kvviz.cli.engines import figure_path
    from kvviz.cli.output import _budget_json, _budget_lines
    from kvviz.cli.replay_args import SWEEP_FLAGS, traffic_args
    from kvviz.vllm.pipeline import startup_refusal

    figure = figure_path(args.figure)
    if any(getattr(args, dest) is not None for dest, _ in SWEEP_FLAGS.values()):
        from kvviz.cli.replay_sweep import run_sweep

        return run_sweep(args, figure)
    model, plan, budget, prefix = planned_replay(args)
    # vLLM 0.33 does not start when one max_model_len request does not fit the pool
    # (kv_cache_planning._check_enough_kv_cache_memory), so neither does its replay on the command line
    refusal = startup_refusal(plan, budget)
    if refusal:
        raise KvvizError(f"{budget_option(args)}: {budget:,} B: vLLM 0.33 refuses to start: {refusal}")
    from kvviz.replay import replay
    from kvviz.replay.answers import answers

    result = replay(
        plan,
        budget_bytes=budget,
        max_num_seqs=args.max_num_seqs,
        enable_prefix_caching=False if prefix is False else None,
        **traffic_args(args),
    )
    found = answers(result, step_ms=args.step_ms)
    if figure is not None:
        write_replay_figure(figure, result)
    if args.json:
        print(json.dumps(result.to_json() | {"answers": found.to_json()} | _budget_json(args)))
        return 0
    if args.markdown:
        print(found.markdown(), end="")
        return 0
    cfg = result.to_json()["kv_cache_config"]
    t = result.totals_dict()
    print(f"{model.name}: {cfg['num_blocks']:,} blocks ({cfg['usable_blocks']:,} usable), {cfg['num_groups']} group(s)")
    for line in _budget_lines(args):
        print(line)
    print(found.capacity_line)
    trace = result.notes_dict().get("trace")
    if trace:
        from kvviz.replay.traces import describe

        print(describe(trace))
    print(f"{t['num_steps']:,} steps ({t['num_idle_steps']:,} idle)")
    for line in found.lines():
        print(line)
    return 0


def budget_option(args) -> str:
    """The flag the budget came from, for a refusal."""
    if getattr(args, "gpu", None) is not None or getattr(args, "gpu_memory_gib", None) is not None:
        return "--gpu" if args.gpu is not None else "--gpu-memory-gib"
    return "--budget-gib" if args.budget_gib is not None else "--budget-bytes"


def write_replay_figure(path, result) -> None:
    """The run's figure (kvviz.views.traffic_replay.answers_figure) to --figure, staged (never through a link)."""
    from kvviz.views.query import save_figure
    from kvviz.views.staging import write_file
    from kvviz.views.traffic_replay import answers_figure

    fig = answers_figure(result)
    write_file(path, lambda tmp: save_figure(fig, tmp), what="--figure")
