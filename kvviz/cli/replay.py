"""`kvviz replay`: a workload replayed as vLLM 0.33's scheduler runs it (kvviz.replay, docs/replay.md)."""

from __future__ import annotations

import json

from kvviz.base.errors import KvvizError


def add_parser(subparsers) -> None:
    """Register `kvviz replay` on an argparse subparsers object."""
    from kvviz.base.inputs import MAX_BUDGET_BYTES, MAX_CONTEXT_TOKENS
    from kvviz.cli.args import add_source_arguments
    from kvviz.cli.values import _int_in, _nonempty

    p = subparsers.add_parser("replay", help="replay a workload step by step as vLLM 0.33's scheduler runs it")
    add_source_arguments(p, groups=False)
    p.add_argument(
        "--workload",
        required=True,
        type=_nonempty("the workload path"),
        metavar="FILE.jsonl",
        help='JSON Lines: {"id", "arrival_step", "prompt_len", "output_len", "prefix_group", "prefix_len"}',
    )
    p.add_argument(
        "--budget-bytes",
        "--kv-cache-memory-bytes",
        dest="budget_bytes",
        required=True,
        type=_int_in(1, MAX_BUDGET_BYTES),
        metavar="BYTES",
        help="KV budget per GPU in bytes",
    )
    p.add_argument(
        "--max-model-len",
        dest="max_model_len",
        required=True,
        type=_int_in(1, MAX_CONTEXT_TOKENS),
        metavar="TOKENS",
        help="vLLM's --max-model-len",
    )
    p.add_argument("--tensor-parallel-size", "-tp", type=_int_in(1, 1 << 16), metavar="N", help="plan one rank of N")
    p.add_argument(
        "--kv-cache-dtype",
        "--kv-dtype",
        dest="kv_dtype",
        choices=("auto", "bf16", "fp16", "fp8"),
        help="attention KV dtype (default auto)",
    )
    p.add_argument("--no-prefix-caching", dest="prefix_caching", action="store_false", default=True)
    p.add_argument(
        "--no-async-scheduling",
        dest="async_scheduling",
        action="store_false",
        default=True,
        help="EngineCore.step: one batch in flight (default: step_with_batch_queue, two)",
    )
    p.add_argument("--max-num-batched-tokens", type=_int_in(1, MAX_CONTEXT_TOKENS), default=8192, metavar="N")
    p.add_argument(
        "--max-num-seqs",
        type=_int_in(1, 1 << 20),
        default=None,
        metavar="N",
        help="default min(1024, max-num-batched-tokens)",
    )
    p.add_argument("--json", action="store_true", help="the reference's fields: steps, requests, totals")
    p.set_defaults(func=run)


def plan_for(model, args):
    """The vLLM plan the flags describe (knobs the model's family does not take are left out, not refused:
    prefix caching and async scheduling always reach the replay)."""
    from kvviz.api import make_plan, options_from

    knobs = {
        "max_model_len": args.max_model_len,
        "max_num_batched_tokens": args.max_num_batched_tokens,
        "async_scheduling": args.async_scheduling,
        "prefix_caching": args.prefix_caching,
        "tensor_parallel_size": args.tensor_parallel_size,
        "kv_dtype": None if args.kv_dtype in (None, "auto") else args.kv_dtype,
    }
    applies = set(model.reader.knobs_for(model))
    for name in ("tensor_parallel_size", "kv_dtype"):
        if knobs[name] is not None and name not in applies:
            raise KvvizError(f"{name}: does not apply to {model.name}")
    knobs = {k: v for k, v in knobs.items() if v is not None and k in applies}
    return make_plan(model, "vllm", options_from(knobs))


def run(args) -> int:
    """Replay the workload; print the totals (or, with --json, everything)."""
    from kvviz.cli.args import model_from_args
    from kvviz.replay import read_jsonl, replay
    from kvviz.vllm.pipeline import startup_refusal

    model = model_from_args(args)
    plan = plan_for(model, args)
    # vLLM 0.33 does not start when one max_model_len request does not fit the pool
    # (kv_cache_planning._check_enough_kv_cache_memory), so neither does its replay on the command line
    refusal = startup_refusal(plan, args.budget_bytes)
    if refusal:
        raise KvvizError(f"--budget-bytes {args.budget_bytes:,}: vLLM 0.33 refuses to start: {refusal}")
    workload = read_jsonl(args.workload, args.max_model_len)
    result = replay(
        plan,
        workload,
        budget_bytes=args.budget_bytes,
        max_model_len=args.max_model_len,
        max_num_batched_tokens=args.max_num_batched_tokens,
        max_num_seqs=args.max_num_seqs,
        enable_prefix_caching=None if args.prefix_caching else False,
        async_scheduling=args.async_scheduling,
    )
    if args.json:
        print(json.dumps(result.to_json()))
        return 0
    t = result.totals_dict()
    cfg = result.to_json()["kv_cache_config"]
    pc = t["prefix_cache"]
    print(f"{model.name}: {cfg['num_blocks']:,} blocks ({cfg['usable_blocks']:,} usable), {cfg['num_groups']} group(s)")
    print(
        f"{t['num_steps']:,} steps ({t['num_idle_steps']:,} idle), {t['num_finished']}/{t['num_requests']} requests "
        f"finished, peak running {t['peak_running']}, {t['total_preemptions']} preemptions of "
        f"{t['requests_preempted']} requests"
    )
    print(
        f"prefix cache: {pc['hits']:,} of {pc['queries']:,} tokens hit ({t['prefix_hit_rate']:.1%}); "
        f"re-admissions {pc['preempted_hits']:,} of {pc['preempted_queries']:,}"
    )
    print(f"held blocks peak per group: {t['peak_held_blocks_per_group']}, min free {t['min_free_blocks']}")
    if t["never_admitted"]:
        print(f"never admitted (longer than the pool can ever hold): {', '.join(t['never_admitted'])}")
    return 0
