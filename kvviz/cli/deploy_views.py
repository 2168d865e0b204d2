"""`kvviz plan`'s deployment views past one GPU and one memory tier (docs/deploy.md): pipeline parallel's start-up
refusal, CPU offload beside the GPU pool, the prefill/decode transfer of one prompt, and what fp8 KV buys."""

from __future__ import annotations

import dataclasses

from kvviz.base.errors import KvvizError, require
from kvviz.base.inputs import MAX_CONTEXT_TOKENS
from kvviz.cli.values import int_in


@dataclasses.dataclass(frozen=True)
class DeployViews:
    """What the views add: lines after the capacity line, keys in `--json`."""

    lines: tuple[str, ...] = ()
    json: dict = dataclasses.field(default_factory=dict)


def add_deploy_view_arguments(p) -> None:
    """`kvviz plan`'s --transfer PROMPT_LEN [--prefill-tp N] and --fp8-gain."""
    g = p.add_argument_group("deployment views (docs/deploy.md)")
    g.add_argument(
        "--transfer",
        type=int_in(1, MAX_CONTEXT_TOKENS),
        metavar="PROMPT_LEN",
        help="bytes vLLM's NIXL connector moves from a prefill to this decode instance for one prompt, per group",
    )
    g.add_argument(
        "--prefill-tp",
        type=int_in(1, 1 << 16),
        metavar="N",
        help="with --transfer: the prefill instance's TP (default: the same as --tensor-parallel-size)",
    )
    g.add_argument(
        "--data-parallel-size",
        "-dp",
        type=int_in(1, 1 << 16),
        metavar="N",
        help="N engines of this plan, each its own pool: one replica's capacity line and the total",
    )
    g.add_argument(
        "--enable-expert-parallel",
        action="store_true",
        help="with --data-parallel-size: the routed experts split whole over DP x TP GPUs (the KV is the same)",
    )
    g.add_argument(
        "--attention-layouts",
        type=int_in(1, 1 << 16),
        metavar="GPUS",
        help="TP GPUS vs attention DP GPUS vs TP + DCP GPUS side by side, per GPU (MLA: vLLM #51454)",
    )
    g.add_argument(
        "--fp8-gain",
        action="store_true",
        help="the capacity of fp8 KV over bf16 KV at this context and budget, and the group that explains it",
    )


def deploy_views(args, planned, budget) -> DeployViews:
    """The views the flags ask for, on `planned` (a vLLM plan) at `budget`; a PP plan vLLM would refuse to start
    is refused in vLLM's words."""
    p, options = planned.plan, planned.options
    lines: list[str] = []
    out: dict = {}
    if p.stages and budget is not None:
        from kvviz.vllm.pipeline import startup_refusal

        refusal = startup_refusal(p, budget)
        if refusal is not None:
            raise KvvizError(f"--pipeline-parallel-size {len(p.stages)}: vLLM 0.33 refuses to start: {refusal}")
        stages = p.to_json(budget_bytes=budget)["stages"]
        lines.append(
            "stages: "
            + "; ".join(
                f"{s['stage']}: layers {s['layers'][0]}-{s['layers'][1] - 1}, {s['bytes_per_block']:,} B a block, "
                + (f"{s['budget_bytes']:,} B of KV memory, " if isinstance(budget, tuple) else "")
                + f"{s['num_blocks_alone']:,} blocks alone{' (binds)' if s['binds'] else ''}"
                for s in stages
            )
        )
    if not p.stages and budget is not None:
        from kvviz.vllm.pipeline import startup_refusal

        refusal = startup_refusal(p, budget)  # the line vLLM raises instead of logging a capacity below one request
        if refusal is not None:
            out["startup_refusal"] = refusal
            lines.append(f"vLLM 0.33 refuses to start at this budget: {refusal}")
    if options is not None and options.kv_offloading_size is not None:
        from kvviz.vllm.offload import offload_for

        off = offload_for(p, options)
        out["offload"] = off.to_json()
        lines.append(off.line())
    if getattr(args, "transfer", None) is not None:
        from kvviz.vllm.transfer import transfer

        t = transfer(p, args.transfer, decode_tp=options.tensor_parallel_size or 1, prefill_tp=args.prefill_tp)
        out["transfer"] = t.to_json()
        lines.extend(t.lines())
    else:
        require(getattr(args, "prefill_tp", None) is None, "--prefill-tp: goes with --transfer PROMPT_LEN")
    _parallel_views(args, planned, budget, lines, out)
    if getattr(args, "fp8_gain", False):
        from kvviz.deploy.fp8 import fp8_gain

        require(budget is not None, "--fp8-gain: compares capacity at a budget; give one")
        gain = fp8_gain(planned.model, p.max_model_len, budget, options)
        out["fp8_gain"] = gain.to_json()
        lines.append(gain.line)
    return DeployViews(tuple(lines), out)


def _parallel_views(args, planned, budget: int | None, lines: list, out: dict) -> None:
    """--data-parallel-size [--enable-expert-parallel] and --attention-layouts (kvviz.deploy.parallel)."""
    dp = getattr(args, "data_parallel_size", None)
    if dp is not None:
        from kvviz.deploy.parallel import data_parallel

        require(budget is not None, "--data-parallel-size: counts each replica's pool at a budget; give one")
        d = data_parallel(planned.plan, budget, dp, enable_expert_parallel=bool(args.enable_expert_parallel))
        out["data_parallel"] = d.to_json()
        lines.extend(d.lines())
    else:
        require(
            not getattr(args, "enable_expert_parallel", False),
            "--enable-expert-parallel: goes with --data-parallel-size N",
        )
    gpus = getattr(args, "attention_layouts", None)
    if gpus is None:
        return
    from kvviz.deploy.parallel import attention_layouts

    require(budget is not None, "--attention-layouts: compares capacity at a budget; give one")
    from_gpu = planned.budget.derived is not None and args.budget_bytes is None
    if from_gpu:
        for option, dest in (("--weights-bytes", "weights_bytes"), ("--checkpoint", "checkpoint")):
            require(
                getattr(args, dest, None) is None,
                f"{option}: --attention-layouts splits the weights per layout from its config.json estimate; "
                f"leave it out or give --kv-cache-memory-bytes",
            )
        terms = {
            "gpu": args.gpu,
            "gpu_memory_gib": args.gpu_memory_gib,
            "gpu_memory_utilization": planned.budget.derived.gpu_memory_utilization,
            "activation_bytes": args.activation_bytes,
        }
        a = attention_layouts(planned.model, gpus, None, planned.options, **{k: v for k, v in terms.items() if v})
    else:
        a = attention_layouts(planned.model, gpus, budget, planned.options)
    out["attention_layouts"] = a.to_json()
    lines.extend(a.lines())
