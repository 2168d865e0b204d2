"""`kvviz replay`: a workload or a published trace replayed as vLLM 0.33's scheduler runs it, on the deployment the
same flags as `kvviz plan` describe, and its answers printed (kvviz.replay, docs/replay.md); with `--sweep-*`
flags, one replay per setting in one table (kvviz.deploy.traffic)."""

from __future__ import annotations

import argparse
import json

from kvviz.base.errors import KvvizError
from kvviz.cli.args import model_from_args, plan_from_args
from kvviz.cli.budget_args import budget_option
from kvviz.cli.engines import figure_path
from kvviz.cli.replay_args import SWEEP_FLAGS, traffic_args
from kvviz.cli.replay_sweep import run_sweep
from kvviz.replay import replay
from kvviz.replay.answers import answers
from kvviz.replay.traces import describe
from kvviz.views.staging import write_file
from kvviz.vllm.pipeline import startup_refusal


def planned_replay(args):
    """(model, plan, budget, the replay's own prefix-caching switch) the flags describe: the plan as `kvviz plan`
    makes it (kvviz.cli.args.plan_from_args through kvviz.api.make_plan, the one door; budget_args: one budget
    rule); --no-prefix-caching is the
    replay's switch for any model, and also the plan's where the family takes it (a Mamba hybrid's mode)."""
    model = model_from_args(args)
    prefix = args.prefix_caching
    if prefix is False and "prefix_caching" not in model.reader.knobs_for(model):
        args = argparse.Namespace(**{**vars(args), "prefix_caching": None})  # the scheduler's switch alone
    planned = plan_from_args(args)
    return planned.model, planned.plan, planned.budget, prefix


def run(args) -> int:
    """Replay the traffic and print its answers (--json: everything; --markdown: the answers' table)."""
    figure = figure_path(args.figure)
    if any(getattr(args, dest) is not None for dest, _ in SWEEP_FLAGS.values()):
        return run_sweep(args, figure)
    model, plan, given, prefix = planned_replay(args)
    budget = given.bytes
    # vLLM 0.33 does not start when one max_model_len request does not fit the pool
    # (kv_cache_planning._check_enough_kv_cache_memory), so neither does its replay on the command line
    refusal = startup_refusal(plan, budget)
    if refusal:
        raise KvvizError(f"{budget_option(args)}: {budget:,} B of KV memory: vLLM 0.33 refuses to start: {refusal}")
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
        print(json.dumps(result.to_json() | {"answers": found.to_json()} | given.to_json()))
        return 0
    if args.markdown:
        print(found.markdown(), end="")
        return 0
    cfg = result.to_json()["kv_cache_config"]
    t = result.totals_dict()
    print(f"{model.name}: {cfg['num_blocks']:,} blocks ({cfg['usable_blocks']:,} usable), {cfg['num_groups']} group(s)")
    for line in given.lines():
        print(line)
    print(found.capacity_line)
    trace = result.notes_dict().get("trace")
    if trace:
        print(describe(trace))
    print(f"{t['num_steps']:,} steps ({t['num_idle_steps']:,} idle)")
    for line in found.lines():
        print(line)
    return 0


def write_replay_figure(path, result) -> None:
    """The run's figure (kvviz.views.traffic_replay.answers_figure) to --figure, staged (never through a link)."""
    from kvviz.views.query import save_figure  # matplotlib: only when a figure is asked for
    from kvviz.views.traffic_replay import answers_figure

    fig = answers_figure(result)
    write_file(path, lambda tmp: save_figure(fig, tmp), what="--figure")
