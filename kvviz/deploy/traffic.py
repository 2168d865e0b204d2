"""What-if under traffic: one trace (or workload) replayed at every combination of budgets or GPUs, TP sizes,
KV dtypes and max_num_seqs, as one table and one figure (docs/replay.md#sweeps).

    kvviz.deploy.sweep("llama-3.1-8b", "trace.jsonl", gpu=["H100", "H200"], kv_dtype=["auto", "fp8"])

An argument given as a list is an axis; everything else is the same in every setting. Each setting is planned
as `kvviz.plan` plans it (kvviz.api.plan) and replayed through the front door (kvviz.replay), the trace read
once; a setting vLLM 0.33 would refuse to start on (one max_model_len request does not fit the pool,
kvviz.vllm.pipeline.startup_refusal), or a GPU whose memory the weights fill, is a row saying so, not a
replay. With pipeline stages each setting's budget is one a stage (kvviz.core.budgets.plan_budget), checked and
replayed whole, as `kvviz.replay` takes it (docs/replay.md#pipeline-parallel)."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

from kvviz.base.errors import KvvizError, require
from kvviz.base.inputs import bounded_items, instance, short_repr
from kvviz.core.layout import text_table
from kvviz.replay import Trace, read_jsonl, read_trace, replay
from kvviz.replay.answers import answers
from kvviz.replay.traces import DEFAULT_STEP_MS, detect_format

MAX_SETTINGS = 64  # replays of one sweep (each a whole trace)
AXES = ("budget_gib", "gpu", "tensor_parallel_size", "kv_dtype", "max_num_seqs")  # what a list may be given for
_SHORT = {
    "budget_gib": "{} GiB",
    "gpu": "{}",
    "tensor_parallel_size": "TP {}",
    "kv_dtype": "{}",
    "max_num_seqs": "seqs {}",
}


@dataclasses.dataclass(frozen=True)
class SweepRow:
    """One setting's answers (kvviz.replay.answers), or why vLLM would not start on it (`refused`)."""

    label: str
    setting: tuple[tuple[str, object], ...]
    num_blocks: int
    max_concurrency: float
    requests: int
    finished: int
    hit_rate: float
    preemptions: int
    requests_preempted: int
    peak_running: int
    p99_queueing_steps: int | None
    p99_ttft_steps: int | None
    refused: str = ""


@dataclasses.dataclass(frozen=True)
class Sweep:
    """The rows of a sweep, one per setting, in the order of the axes' product (the first axis slowest)."""

    title: str
    step_ms: float | None
    rows: tuple[SweepRow, ...]

    def table(self) -> str:
        """The sweep as a text table."""
        return text_table([self._cells(r) for r in self.rows], list(_HEADERS))

    def markdown(self) -> str:
        """The sweep as a Markdown table."""
        out = [f"**{self.title}**", "", "| " + " | ".join(_HEADERS) + " |", "|" + "---|" * len(_HEADERS)]
        out += ["| " + " | ".join(self._cells(r)) + " |" for r in self.rows]
        return "\n".join(out) + "\n"

    def _cells(self, r: SweepRow) -> list[str]:
        if r.refused:
            return [r.label, f"{r.num_blocks:,}", f"{r.max_concurrency:.2f}x"] + ["-"] * 4 + [r.refused[:60]]
        q = "-" if r.p99_queueing_steps is None else f"{r.p99_queueing_steps:,}"
        if self.step_ms is not None and r.p99_queueing_steps is not None:
            q += f" ({r.p99_queueing_steps * self.step_ms:,.0f} ms)"
        return [
            r.label,
            f"{r.num_blocks:,}",
            f"{r.max_concurrency:.2f}x",
            f"{r.hit_rate:.1%}",
            f"{r.preemptions:,} ({r.requests_preempted:,} req)",
            f"{r.peak_running:,}",
            q,
            f"{r.finished:,}/{r.requests:,}",
        ]

    def to_json(self) -> dict:
        """The sweep as a dict."""
        return {
            "title": self.title,
            "step_ms": self.step_ms,
            "rows": [dataclasses.asdict(r) | {"setting": dict(r.setting)} for r in self.rows],
        }

    def figure_data(self):
        """The sweep as kvviz.views.traffic_replay.SweepData (refused settings drawn empty)."""
        from kvviz.views.traffic_replay import SweepData

        rows = self.rows
        return SweepData(
            self.title,
            tuple(r.label + (" (refused)" if r.refused else "") for r in rows),
            tuple(r.hit_rate for r in rows),
            tuple(r.preemptions for r in rows),
            tuple(r.peak_running for r in rows),
            tuple(r.p99_queueing_steps for r in rows),
        )

    def figure(self):
        """One bar per setting for the hit rate, preemptions, peak running and p99 queueing delay."""
        from kvviz.views.traffic_replay import sweep_figure

        return sweep_figure(self.figure_data())


_HEADERS = (
    "setting",
    "blocks",
    "promise",
    "hit rate",
    "preemptions",
    "peak running",
    "p99 queueing",
    "finished or why not",
)


def sweep(model, workload, *, trace: dict | None = None, **given) -> Sweep:
    """`workload` (requests, a Trace or a file) replayed on `model` (a Model, preset name or path) at every
    combination of the arguments given as lists among budget_gib, gpu, tensor_parallel_size, kv_dtype and
    max_num_seqs (module docstring); the other arguments: `kvviz.plan` knobs, the budget (budget_gib=,
    budget_bytes=, gpu= with vLLM's deployment arguments) and `max_num_seqs`. `trace`: how to read a trace
    file (rows=, step_ms=, trace_format=, id_prefix=: kvviz.replay.read_trace)."""
    from kvviz.api import model_of, plan
    from kvviz.core.budgets import plan_budget
    from kvviz.deploy.gpus import gpu_spec
    from kvviz.vllm.pipeline import startup_refusal

    m = model_of(model)
    axes = {k: bounded_items(given.pop(k), field=k) for k in AXES if isinstance(given.get(k), (list, tuple, range))}
    require(axes, f"sweep: give at least one of {', '.join(AXES)} as a list of values")
    require(not ("budget_gib" in axes and "gpu" in axes), "budget_gib, gpu: sweep over budgets or over GPUs, not both")
    for name in axes.get("gpu", ()):
        gpu_spec(name)  # an unknown name is an error, not a row (only a GPU too small for the weights is a row)
    settings = list(itertools.product(*axes.values()))
    require(len(settings) <= MAX_SETTINGS, f"sweep: {len(settings):,} settings; at most {MAX_SETTINGS}")
    instance(dict, type(None), what="a dict of read_trace's arguments, e.g. {'rows': (0, 150)}").check(
        trace, field="trace"
    )
    trace = {k: v for k, v in (trace or {}).items() if v is not None}
    fmt = trace.pop("trace_format", None)
    if isinstance(workload, (str, Path)):
        fmt = fmt or detect_format(workload)
        if fmt == "workload":
            require(not trace, f"{next(iter(trace), '')}: applies to a trace (Mooncake or Azure), not a workload")
            workload = read_jsonl(workload)  # each setting's replay refuses what its max_model_len cannot hold
        else:
            trace.setdefault("step_ms", DEFAULT_STEP_MS)
            workload = read_trace(workload, format=fmt, **trace)  # read once; each plan leaves out what it cannot hold
    elif trace or fmt:
        raise KvvizError(f"{next(iter(trace), 'trace_format')}: applies to a trace file (Mooncake or Azure)")
    step_ms = workload.step_ms if isinstance(workload, Trace) else None
    budget_keys = ("budget_gib", "budget_bytes", "gpu", "gpu_memory_gib", "gpu_memory_utilization", "weights_bytes")
    budget_keys += ("checkpoint_dir", "activation_bytes", "kv_cache_memory_bytes")
    rows = []
    for values in settings:
        setting = {**given, **dict(zip(axes, values))}
        if "budget_gib" in axes:
            setting.pop("budget_bytes", None)
            setting.pop("gpu", None)
        seqs = setting.pop("max_num_seqs", None)
        budget = {k: setting.pop(k) for k in budget_keys if setting.get(k) is not None}
        knobs = {k: v for k, v in setting.items() if v is not None and not (k == "kv_dtype" and v == "auto")}
        p = plan(m, **knobs)
        label = " · ".join(_SHORT[k].format(v) for k, v in zip(axes, values))
        nothing = (0, 0, 0.0, 0, 0, 0, None, None)
        # the setting's budget as `plan` takes it (plan_budget): with pipeline stages, one a stage (each worker's
        # own memory), which the start-up check and the replay take whole: never one stage's for every stage
        try:
            pool_budget = plan_budget(p, **budget)
        except KvvizError as e:  # a GPU whose memory the weights fill leaves no KV cache: vLLM does not start on it
            if "gpu" not in budget and "gpu_memory_gib" not in budget:
                raise
            rows.append(SweepRow(label, tuple(zip(axes, values)), 0, 0.0, *nothing, str(e)))
            continue
        cap = p.capacity(pool_budget)
        refusal = startup_refusal(p, pool_budget)
        if refusal:
            rows.append(
                SweepRow(label, tuple(zip(axes, values)), cap.num_blocks, cap.max_concurrency, *nothing, refusal)
            )
            continue
        found = answers(replay(p, workload, budget_bytes=pool_budget, max_num_seqs=seqs))
        rows.append(
            SweepRow(
                label,
                tuple(zip(axes, values)),
                cap.num_blocks,
                cap.max_concurrency,
                found.requests,
                found.finished,
                found.hit_rate,
                found.preemptions,
                found.requests_preempted,
                found.peak_running,
                found.queueing_steps[-1] if found.queueing_steps else None,
                found.ttft_steps[-1] if found.ttft_steps else None,
            )
        )
    source = workload.source if isinstance(workload, Trace) else f"{len(workload):,} requests"
    return Sweep(f"{m.name} on {short_repr(source)}", step_ms, tuple(rows))
