"""What fits: for each GPU, tensor-parallel size and request length, the KV budget one rank has
and the requests vLLM 0.33 serves at once (its "Maximum concurrency" line).

`fit_table(...)` is plain data (`FitTable`, rows of `FitRow`); `.to_dataframe()` imports pandas,
`fit_figure(table)` imports matplotlib, both only when called. A TP size the model refuses (the
family's KvvizError: heads not divisible) or a budget with no room left becomes a row with a note,
not a crash. Request lengths above the model's own max_model_len are left out (vLLM refuses them
unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1) and the table says so.
"""

from __future__ import annotations

import dataclasses

from kvviz.base.defaults import GIB
from kvviz.base.errors import KvvizError, require
from kvviz.base.inputs import bounded_items, instance
from kvviz.deploy.budget import DEFAULT_GPU_MEMORY_UTILIZATION, KVBudget, check_budget_args, kv_budget
from kvviz.deploy.gpus import gpu_spec

DEFAULT_CONTEXTS = (4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1_048_576)
DEFAULT_GPUS = ("H100", "H200", "B200")
DEFAULT_TP_SIZES = (1, 2, 4, 8)


@dataclasses.dataclass(frozen=True)
class FitRow:
    """One row of the fit table: a GPU, TP size and request length, one rank's KV budget, and the blocks,
    concurrency and whole requests it holds (or why it was refused)."""

    gpu: str
    gpu_estimate: bool  # the GPU's memory is an estimate
    tp: int
    context: int  # max_model_len of the request
    max_num_batched_tokens: int
    kv_budget_bytes: int | None  # one rank's KV memory (None: refused, see note)
    budget_estimate: bool  # any budget term is an estimate
    num_blocks: int | None = None
    bytes_per_block: int | None = None
    blocks_per_request: int | None = None
    max_concurrency: float | None = None  # vLLM's "Maximum concurrency" (fractional)
    requests_fit: int | None = None  # whole requests at once
    kv_cache_tokens: int | None = None
    line: str | None = None  # vLLM's capacity line
    fits: bool = False  # vLLM starts: one request fits the budget less the null block
    note: str = ""

    def to_json(self) -> dict:
        """The row as a JSON object, with the KV budget in GiB too."""
        out = dataclasses.asdict(self)
        out["kv_budget_gib"] = None if self.kv_budget_bytes is None else round(self.kv_budget_bytes / GIB, 4)
        return out


@dataclasses.dataclass(frozen=True)
class FitTable:
    """What fits for one model: one FitRow per (GPU, TP, context), the budgets they used, the contexts skipped
    (above the model's max_model_len) and notes."""

    model: str
    planner: str | None
    rows: tuple[FitRow, ...]
    budgets: tuple[tuple[str, int, KVBudget | None], ...]  # (gpu, tp, budget) used by the rows
    skipped_contexts: tuple[int, ...]  # above the model's max_model_len
    max_model_len: int
    notes: tuple[str, ...] = ()

    def series(self) -> dict[tuple[str, int], list[FitRow]]:
        """(gpu, tp) -> its rows with a capacity, in context order."""
        out: dict[tuple[str, int], list[FitRow]] = {}
        for r in self.rows:
            if r.max_concurrency is not None:
                out.setdefault((r.gpu, r.tp), []).append(r)
        return {k: sorted(v, key=lambda r: r.context) for k, v in out.items()}

    def row(self, gpu: str, tp: int, context: int) -> FitRow:
        """The row of (gpu, tp, context); a KvvizError naming them when the table has none."""
        for r in self.rows:
            if (r.gpu, r.tp, r.context) == (gpu, tp, context):
                return r
        raise KvvizError(f"fit table: no row for gpu={gpu!r} tp={tp} context={context}")

    def to_dataframe(self):
        """The rows as a pandas DataFrame (pandas is imported here only)."""
        import pandas as pd

        return pd.DataFrame([r.to_json() for r in self.rows])

    def to_json(self) -> dict:
        """The table as a JSON object: model, planner, max_model_len, skipped contexts, notes and rows."""
        return {
            "model": self.model,
            "planner": self.planner,
            "max_model_len": self.max_model_len,
            "skipped_contexts": list(self.skipped_contexts),
            "notes": list(self.notes),
            "rows": [r.to_json() for r in self.rows],
        }

    def lines(self) -> list[str]:
        """The table as text: a title, a header and one line per row (estimates marked *)."""
        out = [f"what fits: {self.model} (max_model_len {self.max_model_len:,})"]
        head = f"{'gpu':<22} {'tp':>2} {'context':>9} {'KV GiB':>8} {'conc.':>9} {'fit':>6}  note"
        out.append(head)
        for r in self.rows:
            gib = (
                "-"
                if r.kv_budget_bytes is None
                else f"{r.kv_budget_bytes / GIB:.2f}" + ("*" if r.budget_estimate else "")
            )
            conc = "-" if r.max_concurrency is None else f"{r.max_concurrency:.2f}x"
            fit = "-" if r.requests_fit is None else str(r.requests_fit)
            name = r.gpu + ("*" if r.gpu_estimate else "")
            out.append(f"{name:<22} {r.tp:>2} {r.context:>9,} {gib:>8} {conc:>9} {fit:>6}  {r.note}")
        out.append("* an estimate (GPU memory from a floored-MiB reading, or an estimated weights / allowance term)")
        out.extend(self.notes)
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())


_BUDGET_KEYS = (
    "gpu_memory_utilization",
    "weights_bytes",
    "checkpoint_dir",
    "activation_bytes",
    "kv_cache_memory_bytes",
    "raw_config",
)


def fit_table(
    model,
    *,
    gpus=DEFAULT_GPUS,
    tp_sizes=DEFAULT_TP_SIZES,
    contexts=DEFAULT_CONTEXTS,
    planner=None,
    gpu_memory_utilization=DEFAULT_GPU_MEMORY_UTILIZATION,
    weights_bytes=None,
    checkpoint_dir=None,
    activation_bytes=None,
    kv_cache_memory_bytes=None,
    raw_config=None,
    **knobs,
) -> FitTable:
    """One row per (gpu, tp, context): one rank's KV budget (`deploy.kv_budget`) and the plan's
    capacity at it (`kvviz.api.make_plan(model, planner, Options(tensor_parallel_size=tp,
    max_model_len=context, **knobs)).capacity(budget)`). `max_num_batched_tokens`, unless a knob
    sets it, is `vllm serve`'s default for the GPU (GPU.serve_max_num_batched_tokens)."""
    from kvviz.api import make_plan, model_of, options_from
    from kvviz.vllm.plan import resolve_planner

    m = model_of(model)
    for field in ("tensor_parallel_size", "max_model_len"):
        require(field not in knobs, f"{field}: set by the table (tp_sizes / contexts), not a knob here")
    gpus = tuple(gpu_spec(g) for g in bounded_items((gpus,) if isinstance(gpus, str) else gpus, field="gpus"))
    tp_sizes = bounded_items(tp_sizes, field="tp_sizes")
    contexts = bounded_items(contexts, field="contexts")
    require(all(type(t) is int and t >= 1 for t in tp_sizes), f"tp_sizes={tp_sizes!r}: must be positive integers")
    require(all(type(c) is int and c >= 1 for c in contexts), f"contexts={contexts!r}: must be positive integers")
    options_from(knobs)  # an unknown knob name: one line
    resolve_planner(m, planner)  # the table's arguments refused once, not as a note on every row
    check_budget_args(gpu_memory_utilization, weights_bytes, checkpoint_dir, activation_bytes, kv_cache_memory_bytes)
    kept = tuple(sorted({c for c in contexts if c <= m.max_model_len}))
    skipped = tuple(sorted({c for c in contexts if c > m.max_model_len}))
    notes = []
    if skipped:
        notes.append(
            f"left out: contexts {', '.join(f'{c:,}' for c in skipped)} exceed {m.name}'s max_model_len "
            f"{m.max_model_len:,} (vLLM refuses a longer --max-model-len unless "
            f"VLLM_ALLOW_LONG_MAX_MODEL_LEN=1)"
        )
    rows, budgets = [], []
    for g in gpus:
        for tp in tp_sizes:
            try:
                budget = kv_budget(
                    m,
                    gpu=g,
                    gpu_memory_utilization=gpu_memory_utilization,
                    tensor_parallel_size=tp,
                    weights_bytes=weights_bytes,
                    checkpoint_dir=checkpoint_dir,
                    activation_bytes=activation_bytes,
                    kv_cache_memory_bytes=kv_cache_memory_bytes,
                    raw_config=raw_config,
                )
                budget_note = ""
            except KvvizError as e:
                if str(e).startswith(("weights_bytes:", "checkpoint_dir", "raw_config", "quantization_config")):
                    raise  # the weights are unknown on every GPU and TP: one line, not one per row
                budget, budget_note = None, str(e)
            budgets.append((g.name, tp, budget))
            mnbt = knobs.get("max_num_batched_tokens") or g.serve_max_num_batched_tokens
            for ctx in kept:
                base = dict(
                    gpu=g.name,
                    gpu_estimate=g.estimate,
                    tp=tp,
                    context=ctx,
                    max_num_batched_tokens=mnbt,
                    kv_budget_bytes=None if budget is None else budget.available_bytes,
                    budget_estimate=budget is not None and budget.estimate,
                )
                if budget is None:
                    rows.append(FitRow(**base, note=budget_note))
                    continue
                opts = dict(knobs, max_model_len=ctx, max_num_batched_tokens=mnbt)
                if tp != 1:
                    opts["tensor_parallel_size"] = tp
                try:
                    plan = make_plan(m, planner, options_from(opts))
                except KvvizError as e:
                    rows.append(FitRow(**base, note=f"refused: {e}"))
                    continue
                cap = plan.capacity(budget.available_bytes)
                fits = cap.admission_bytes_per_request <= budget.available_bytes - cap.bytes_per_block
                note = (
                    ""
                    if fits
                    else (
                        f"vLLM refuses to start: a request of {ctx:,} tokens needs "
                        f"{cap.admission_bytes_per_request / GIB:.2f} GiB, "
                        f"{(budget.available_bytes - cap.bytes_per_block) / GIB:.2f} GiB usable"
                    )
                )
                rows.append(
                    FitRow(
                        **base,
                        num_blocks=cap.num_blocks,
                        bytes_per_block=cap.bytes_per_block,
                        blocks_per_request=cap.blocks_per_request,
                        max_concurrency=cap.max_concurrency,
                        requests_fit=cap.requests_fit,
                        kv_cache_tokens=cap.kv_cache_tokens,
                        line=cap.line,
                        fits=fits,
                        note=note,
                    )
                )
    return FitTable(m.name, planner, tuple(rows), tuple(budgets), skipped, m.max_model_len, tuple(notes))


def fit_figure(table: FitTable, *, title: str | None = None):
    """Requests that fit (vLLM's max concurrency) against request length, log-log, one line per
    (gpu, tp), drawn from `table` (matplotlib.figure.Figure; no pyplot). Estimated GPU memory is
    marked '(est.)' in the legend."""
    from kvviz.views.canvas import KvvizFigure  # draws itself in Jupyter without %matplotlib inline
    from kvviz.views.style import pt  # every text at least 10 pt (docs/figures.md#text-size)

    instance(FitTable, what="a kvviz.deploy.fit_table(...) result").check(table, field="table")
    instance(str, type(None), what="the figure's title (a str) or None").check(title, field="title")
    fig = KvvizFigure(figsize=(8, 5.5))
    ax = fig.add_subplot()
    series = table.series()
    gpus = list(dict.fromkeys(g for g, _ in series))
    tps = sorted({t for _, t in series})
    styles = ("-", "--", "-.", ":", (0, (5, 1)), (0, (1, 3)))
    for (gpu, tp), rows in series.items():
        est = rows[0].gpu_estimate or any(r.budget_estimate for r in rows)
        label = f"{gpu} TP{tp}" + (" (est.)" if est else "")
        ax.plot(
            [r.context for r in rows],
            [r.max_concurrency for r in rows],
            marker="o",
            markersize=3,
            label=label,
            gid=f"{gpu}/tp{tp}",
            color=f"C{gpus.index(gpu) % 10}",
            linestyle=styles[tps.index(tp) % len(styles)],
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("request length (max_model_len, tokens)", fontsize=pt("axis"))
    ax.set_ylabel("requests that fit (vLLM max concurrency)", fontsize=pt("axis"))
    ax.tick_params(which="both", labelsize=pt("small"))
    ax.set_title(title or f"{table.model}: what fits (one rank's KV budget)", fontsize=pt("title"))
    ax.grid(True, which="both", alpha=0.3)
    if series:
        ax.legend(fontsize=pt("small"), ncols=2)
    notes = list(table.notes)
    refused = sorted({(r.gpu, r.tp) for r in table.rows} - set(series))
    if refused:
        notes.append("no line: " + ", ".join(f"{g} TP{t}" for g, t in refused) + " (refused; see the table)")
    line = 1.3 * pt("small") / 72 / fig.get_figheight()  # one line of the notes under the axes
    fig.subplots_adjust(left=0.12, right=0.97, top=0.92, bottom=0.13 + line * len(notes))
    if notes:
        fig.text(0.01, 0.005, "\n".join(notes), fontsize=pt("small"), va="bottom", wrap=True)
    return fig
