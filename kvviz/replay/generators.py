"""Seeded workload generators for common traffic, and a CSV trace reader.

Every generator returns `WorkloadRequest`s in arrival order and is deterministic for a seed; it makes at
most `MAX_GENERATED` requests (a count above it is refused in one line, before anything is made: chat(10**12)
would fill memory for hours).
`read_csv_trace` maps a trace's arrival times to engine steps with one documented rule:
step = floor((t - t0) / step_seconds), t0 the first arrival, so requests keep their spacing in
units of one engine step (docs/replay.md#csv-traces)."""

from __future__ import annotations

import csv
import math
import random
from pathlib import Path

from kvviz.base.errors import KvvizError, require
from kvviz.base.files import read_lines
from kvviz.base.inputs import bounded_int, short_repr
from kvviz.replay.workload import WorkloadRequest, check

MAX_GENERATED = 10_000_000  # requests of one generated workload (a million-request trace is a benchmark's)


def _arrivals(rng, n, mean_gap):
    bounded_int(n, field="n", low=0, high=MAX_GENERATED)
    t, out = 0.0, []
    for _ in range(n):
        out.append(int(t))
        t += rng.expovariate(1.0 / mean_gap) if mean_gap > 0 else 0.0
    return out


def chat(
    n=64, *, seed=0, system_prompts=(1024, 600), user=(50, 400), output=(20, 300), mean_gap=2.0, shared_fraction=0.9
):
    """Chat: most requests start with one of a few shared system prompts, then a unique user turn."""
    rng = random.Random(seed)
    out = []
    for i, step in enumerate(_arrivals(rng, n, mean_gap)):
        if rng.random() < shared_fraction:
            k = rng.randrange(len(system_prompts))
            sys_len = system_prompts[k]
            out.append(
                WorkloadRequest(
                    f"chat-{i:05d}", step, sys_len + rng.randint(*user), rng.randint(*output), f"sys-{k}", sys_len
                )
            )
        else:
            out.append(WorkloadRequest(f"chat-{i:05d}", step, rng.randint(*user), rng.randint(*output)))
    return out


def documents(
    n=64, *, seed=0, num_documents=4, document=(2000, 3000), question=(20, 120), output=(30, 200), mean_gap=1.0
):
    """Long documents, each shared by many questions about it."""
    rng = random.Random(seed)
    lengths = [rng.randint(*document) for _ in range(num_documents)]
    out = []
    for i, step in enumerate(_arrivals(rng, n, mean_gap)):
        d = rng.randrange(num_documents)
        out.append(
            WorkloadRequest(
                f"doc-{i:05d}", step, lengths[d] + rng.randint(*question), rng.randint(*output), f"doc-{d}", lengths[d]
            )
        )
    return out


def multi_turn(sessions=16, turns=4, *, seed=0, first=(200, 600), turn=(50, 200), output=(50, 150), think=20):
    """Multi-turn sessions: each turn's prompt is the previous prompt, its answer and a new user turn, so
    the session's shared prefix grows turn by turn. Every prompt of a session is its prefix (two turns share
    the shorter: the earlier prompt; answers are generated tokens, unique to the request that made them)."""
    bounded_int(sessions, field="sessions", low=0, high=MAX_GENERATED)
    bounded_int(turns, field="turns", low=0, high=MAX_GENERATED)
    require(sessions * turns <= MAX_GENERATED, f"sessions x turns = {sessions * turns:,}: at most {MAX_GENERATED:,}")
    rng = random.Random(seed)
    out = []
    for s in range(sessions):
        step, prompt = rng.randint(0, 40), rng.randint(*first)
        for t in range(turns):
            gen = rng.randint(*output)
            out.append(WorkloadRequest(f"s{s:04d}-t{t}", step, prompt, gen, f"session-{s}", prompt))
            step += gen + think
            prompt += gen + rng.randint(*turn)
    out.sort(key=lambda r: r.arrival_step)
    return out


def agentic(n=40, *, seed=0, tool_prompt=3000, suffix=(200, 1500), output=(50, 300), mean_gap=2.0, shared_fraction=0.9):
    """Agents: one long shared tool prompt, long-ish unique suffixes, a few requests without it."""
    rng = random.Random(seed)
    out = []
    for i, step in enumerate(_arrivals(rng, n, mean_gap)):
        if rng.random() < shared_fraction:
            out.append(
                WorkloadRequest(
                    f"agent-{i:05d}",
                    step,
                    tool_prompt + rng.randint(*suffix),
                    rng.randint(*output),
                    "tools",
                    tool_prompt,
                )
            )
        else:
            out.append(WorkloadRequest(f"agent-{i:05d}", step, rng.randint(*suffix), rng.randint(*output)))
    return out


def burst(n=24, *, seed=0, bursts=4, prompt=(1000, 3000), output=(100, 600), gap=1):
    """Bursts: `n` long prompts arriving over `bursts` consecutive steps (`gap` apart)."""
    bounded_int(n, field="n", low=0, high=MAX_GENERATED)
    rng = random.Random(seed)
    return [
        WorkloadRequest(f"burst-{i:05d}", (i * bursts // n) * gap, rng.randint(*prompt), rng.randint(*output))
        for i in range(n)
    ]


def read_csv_trace(
    path,
    *,
    step_seconds: float = 0.025,
    max_model_len: int | None = None,
    time_column: str = "arrival_time",
    prompt_column: str = "prompt_tokens",
    output_column: str = "output_tokens",
):
    """A CSV trace (arrival time in seconds, prompt and output tokens a row) as a workload: arrival step =
    floor((t - first t) / step_seconds), rows in time order (stable), ids `trace-<line>`; every prompt unique.
    Streamed line by line (kvviz.base.files.read_lines); a time that is not a finite number (NaN, inf) or a
    count that is not a positive integer is one line naming the line and the column."""
    p = Path(path)
    ok = isinstance(step_seconds, (int, float)) and not isinstance(step_seconds, bool)
    require(
        ok and math.isfinite(step_seconds) and step_seconds > 0,
        f"step_seconds={short_repr(step_seconds)}: must be positive",
    )
    what = f"trace {short_repr(p.name)}"
    lines = read_lines(path, what=what, give="a CSV trace")
    numbers: list[int] = []

    def texts():
        for number, text in lines:
            numbers.append(number)
            yield text

    parsed = []
    for row in csv.DictReader(texts()):
        i = numbers[-1]
        t = _finite(row.get(time_column), f"{what} line {i}", time_column)
        vals = [_positive(row.get(col), f"{what} line {i}", col) for col in (prompt_column, output_column)]
        parsed.append((t, i, vals[0], vals[1]))
    if not parsed:
        return ()
    parsed.sort(key=lambda x: x[0])
    t0 = parsed[0][0]
    reqs = [WorkloadRequest(f"trace-{i}", int((t - t0) / step_seconds), pr, out) for t, i, pr, out in parsed]
    return check(reqs, max_model_len, what=what)


def _finite(text, where: str, column: str) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise KvvizError(f"{where}: {column}={short_repr(text)}: not a number") from None
    require(math.isfinite(value), f"{where}: {column}={short_repr(text)}: not a finite number")
    return value


def _positive(text, where: str, column: str) -> int:
    try:
        value = int(text)
    except (TypeError, ValueError):
        raise KvvizError(f"{where}: {column}={short_repr(text)}: not an integer") from None
    require(value >= 1, f"{where}: {column}={short_repr(value)}: must be at least 1")
    return value
