"""`plan --engine` and `compare --engines`: SGLang's and TensorRT-LLM's pools beside vLLM's."""

from __future__ import annotations

from pathlib import Path

from kvviz import engines
from kvviz.base.errors import KvvizError, require
from kvviz.base.inputs import printable, short_repr
from kvviz.cli.args import model_from_args, options_from_args, refuse_knobs
from kvviz.cli.budget_args import Budget, budget_from_args
from kvviz.cli.output import print_json
from kvviz.core.layout import text_table
from kvviz.engines import EngineKnobs
from kvviz.engines.budget import engine_budgets
from kvviz.engines.figure import compare_figure
from kvviz.views.staging import write_file
from kvviz.vllm.plan import planned_setting


def _engine_inputs(args):
    """(model, options, budget) of an SGLang / TensorRT-LLM plan: a model and a budget, no planner."""
    which = f"--engine {args.engine}" if getattr(args, "engine", None) else "--engines"
    require(getattr(args, "groups", None) is None, f"{which}: plans a model, not a --groups file")
    require(
        getattr(args, "planner", None) is None, f"--planner: vLLM's planners; {which} sizes each engine's own pools"
    )
    model = model_from_args(args)
    options = options_from_args(args)
    refuse_knobs(model, options)
    require(
        (options.decode_context_parallel_size or 1) == 1,
        f"--decode-context-parallel-size: vLLM's decode context parallelism; {which} sizes SGLang's / "
        f"TensorRT-LLM's pools without it",
    )
    budget = budget_from_args(args, model)
    require(
        budget.bytes is not None,
        f"{which}: sizes pools from a KV budget: give --budget-gib, --kv-cache-memory-bytes or --gpu",
    )
    return model, options, budget


def run_plan_engine(args) -> int:
    """One model's pools as SGLang or TensorRT-LLM sizes them (kvviz.engines)."""

    model, options, given = _engine_inputs(args)
    own = _engine_own_budgets(given, model, (args.engine,))
    budget = own[args.engine].kv_budget_bytes if own else given.bytes
    p = engines.plan_engine(args.engine, model, options, kv_budget_bytes=budget, knobs=_engine_knobs(args))
    if args.json:
        print_json(p.to_json() | given.to_json())
    else:
        print(p.describe())
        for line in given.lines():
            print(line)
        _print_engine_budget_lines(given, own)
    return 0


def _engine_own_budgets(given: Budget, model, names) -> dict:
    """On the --gpu path (no --kv-cache-memory-bytes), each engine's own budget
    (kvviz.engines.budget); else {} and every engine gets the one budget given."""
    b = given.derived
    if b is None or b.exact_pool:
        return {}

    return engine_budgets(model, b, names)


def _print_engine_budget_lines(given: Budget, own) -> None:
    if own:
        print("each engine's own KV budget on this device (docs/engines.md#one-budget-meaning):")
        for b in own.values():
            for line in b.lines:
                print(f"  {line}" + ("  [estimate]" if b.estimate else ""))
    elif given.derived is not None:
        print("engines: --kv-cache-memory-bytes is every engine's KV memory as given; no engine's fraction applies")


def run_compare_engines(args) -> int:
    """The same model and budget through each engine, side by side (kvviz.engines)."""

    figure = figure_path(getattr(args, "figure", None))
    names = tuple(e.strip() for e in args.engines.split(",") if e.strip())
    for e in names:
        require(e in engines.ENGINES, f"--engines: {short_repr(e)}: unknown; choose from {', '.join(engines.ENGINES)}")
    model, options, given = _engine_inputs(args)
    budget = given.bytes
    knobs = _engine_knobs(args)
    own = _engine_own_budgets(given, model, names)
    rows_ = engines.compare_rows(
        model,
        names,
        options,
        kv_budget_bytes=budget,
        knobs=knobs,
        budgets={e: b.kv_budget_bytes for e, b in own.items()},
    )
    if args.json:
        if figure is not None:
            _write_figure(figure, rows_, model, budget, announce=False, options=options)
        print_json(
            {
                "model": model.name,
                "planned": planned_setting(model, options),
                "given": {name: getattr(options, name) for name in options.given()},
                "figure": None if figure is None else printable(str(figure)),
                "budget_bytes": budget,
                "engines": [r.plan.to_json() if r.plan else {"engine": r.engine, "refusal": r.refusal} for r in rows_],
            }
            | given.to_json()
        )
        return 0
    rows = [
        [
            r.engine,
            r.plan.version,
            f"{r.plan.kv_budget_bytes:,}",
            r.plan.token_capacity_name,
            f"{r.plan.token_capacity:,}",
            f"{r.plan.full_length_requests:,}",
            f"{r.plan.request_bound:,}",
            f"{r.plan.max_model_len:,}",
            f"{r.plan.waste_bytes:,}",
        ]
        if r.plan
        else [
            r.engine,
            "-",
            f"{(own[r.engine].kv_budget_bytes if r.engine in own else budget):,}",
            "not planned",
            "-",
            "-",
            "-",
            "-",
            "-",
        ]
        for r in rows_
    ]
    print(f"{model.name}: " + ("each engine's own KV budget on this device" if own else f"KV budget {budget:,} B"))
    print(
        text_table(
            rows,
            [
                "engine",
                "version",
                "KV budget B",
                "capacity",
                "tokens",
                "requests at once",
                "engine's bound",
                "of tokens",
                "waste B",
            ],
        )
    )
    for r in rows_:
        print(f"{r.engine}: {r.plan.log_line if r.plan else r.refusal}")
    for line in engines.token_count_lines(rows_):
        print(line)
    for line in given.lines():
        print(line)
    _print_engine_budget_lines(given, own)
    if figure is not None:
        _write_figure(figure, rows_, model, budget, announce=True, options=options)
    return 0


def _write_figure(figure: Path, rows_, model, budget: int, *, announce: bool, options) -> None:
    """The engines figure to --figure: staged, renamed into place, never through a link."""
    from kvviz.views.query import save_figure

    fig = compare_figure(rows_, model=model.name, budget_bytes=budget, setting=planned_setting(model, options))
    write_file(figure, lambda tmp: save_figure(fig, tmp), what="--figure")
    if announce:
        print(f"figure: {printable(str(figure))}")


FIGURE_SUFFIXES = (".png", ".svg", ".pdf")


def figure_path(value) -> Path | None:
    """--figure checked before anything is planned: a file name ending in .png, .svg or .pdf
    (matplotlib would add .png to any other name, silently) in a folder that exists, not a folder
    itself and not a symbolic link (the write is staged and never follows one)."""
    if value is None:
        return None
    p = Path(value)
    name = printable(str(value))
    require(
        p.suffix.lower() in FIGURE_SUFFIXES,
        f"--figure {short_repr(name)}: name the file with its format: .png, .svg or .pdf",
    )
    require(not p.is_symlink(), f"--figure {short_repr(name)}: is a symbolic link; refusing to write through it")
    require(not p.is_dir(), f"--figure {short_repr(name)}: is a folder; name a file in it")
    parent = p.parent
    require(parent.is_dir(), f"--figure {short_repr(name)}: folder {short_repr(printable(str(parent)))} does not exist")
    return p


def _engine_knobs(args):
    """kvviz.engines.EngineKnobs from --max-attention-window / --enable-unified-memory / --max-batch-size /
    --use-py-mamba."""

    window = getattr(args, "max_attention_window", None)
    if window is not None:
        try:
            window = tuple(int(w) for w in window.split(","))
        except ValueError:
            raise KvvizError(f"--max-attention-window: {window!r}: comma-separated token counts") from None
    try:
        return EngineKnobs(
            max_attention_window=window,
            unified_memory=bool(getattr(args, "unified_memory", False)),
            max_batch_size=getattr(args, "max_batch_size", None),
            use_py_mamba=bool(getattr(args, "use_py_mamba", False)),
        )
    except KvvizError as err:
        raise KvvizError(f"--max-attention-window: {err}") from None
