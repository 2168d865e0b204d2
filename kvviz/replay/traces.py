"""Published serving traces read as they are published, streamed line by line (docs/replay.md#traces):
Mooncake's FAST'25 JSON Lines (`timestamp` in ms, `input_length`, `output_length`, `hash_ids` of chained
512-token blocks) and Azure's LLM inference CSV of 2023 (`TIMESTAMP` wall clock with 7 decimals,
`ContextTokens`, `GeneratedTokens`). The rule, as ../shared/data/vllm-0.33/replay-traces/README.md states it
for vLLM 0.33's own replays of these traces:

* a window of the file's data rows, `rows=(start, end)`, numbered from 0 (Azure's header is no row);
* arrival_step = floor((t - t0) / step_ms): t the row's time in ms, t0 the window's first row's, 25 ms a step
  unless given; requests of one step are added in file order;
* Mooncake: hash_ids and hash_block_tokens 512 (the trace's block); Azure: no prefix identity;
* a row with a zero prompt or output, or with prompt + output > max_model_len, is left out: not replayed,
  but counted by reason (`Trace.left_out`), never dropped without a word;
* ids `<prefix>-<row, 5 digits>` (`conv-03000`): prefix 'az' for Azure; for Mooncake 'synth' when the
  file's name says synthetic, else 'conv' (the references' names); `id_prefix=` chooses another.

Every bad row is one KvvizError line naming the file, the line number and the field."""

from __future__ import annotations

import dataclasses
import datetime
import math
import re
from fractions import Fraction
from pathlib import Path

from kvviz.base.errors import KvvizError, require
from kvviz.base.files import parse_json_text, read_lines
from kvviz.base.inputs import short_repr
from kvviz.replay.workload import WorkloadRequest

FORMATS = ("mooncake", "azure")
DEFAULT_STEP_MS = 25  # the references' fixed step time (replay-traces/README.md)
NS_PER_MS = 10**6
MOONCAKE_BLOCK_TOKENS = 512  # Mooncake FAST25-release/README.md: hash_ids are ids of 512-token blocks
MOONCAKE_FIELDS = ("timestamp", "input_length", "output_length")
AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
ZERO_LENGTH, TOO_LONG = "zero length", "longer than max_model_len"
# Azure's wall clock: 2023-11-16 18:15:46.6805900 (read to the nanosecond, exactly: no float)
_CLOCK = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?")


@dataclasses.dataclass(frozen=True)
class LeftOut:
    """A row of the window that is not replayed (`reason`: 'zero length' or 'longer than max_model_len')."""

    row: int
    id: str
    reason: str


@dataclasses.dataclass(frozen=True)
class Trace:
    """A window of a published trace as a workload: `requests` (WorkloadRequests in file order) and the rows
    `left_out`, with what it was read from and by which rule (`rows`: first row, one past the last read)."""

    source: str
    format: str
    rows: tuple[int, int]
    step_ms: float
    requests: tuple[WorkloadRequest, ...]
    left_out: tuple[LeftOut, ...] = ()
    max_model_len: int | None = None

    @property
    def num_rows(self) -> int:
        """Rows of the window: requests plus those left out."""
        return len(self.requests) + len(self.left_out)

    def left_out_counts(self) -> dict[str, int]:
        """Rows left out, by reason."""
        out: dict[str, int] = {}
        for x in self.left_out:
            out[x.reason] = out.get(x.reason, 0) + 1
        return out

    def within(self, max_model_len: int) -> "Trace":
        """The trace with the requests longer than `max_model_len` (prompt + output) left out as well."""
        require(
            type(max_model_len) is int and max_model_len > 0,
            f"max_model_len={short_repr(max_model_len)}: a positive integer",
        )
        keep, drop = [], list(self.left_out)
        for r in self.requests:
            if r.prompt_len + r.output_len > max_model_len:
                drop.append(LeftOut(int(r.id.rpartition("-")[2]), r.id, TOO_LONG))
            else:
                keep.append(r)
        drop.sort(key=lambda x: x.row)
        return dataclasses.replace(self, requests=tuple(keep), left_out=tuple(drop), max_model_len=max_model_len)

    def to_json(self) -> dict:
        """What was read and by which rule, with the rows left out counted by reason (and the first 20 named)."""
        return {
            "source": self.source,
            "format": self.format,
            "rows": list(self.rows),
            "step_ms": self.step_ms,
            "num_rows": self.num_rows,
            "num_requests": len(self.requests),
            "left_out_zero_length": self.left_out_counts().get(ZERO_LENGTH, 0),
            "left_out_too_long": self.left_out_counts().get(TOO_LONG, 0),
            "left_out_ids": [x.id for x in self.left_out[:20]],
            "max_model_len": self.max_model_len,
        }

    def describe(self) -> str:
        """One line: the file, the window, the step time and what was left out (`describe`)."""
        return describe(self.to_json())


def describe(note: dict) -> str:
    """One line from a trace's `to_json()` (a Replay's notes['trace']): file, window, step time, rows left out."""
    counts = ((ZERO_LENGTH, note["left_out_zero_length"]), (TOO_LONG, note["left_out_too_long"]))
    left = ", ".join(f"{n:,} {why}" for why, n in counts if n) or "none"
    first, end = note["rows"]
    return (
        f"{note['source']} ({note['format']}) rows {first:,}-{end - 1:,}: {note['num_requests']:,} requests at "
        f"{note['step_ms']:g} ms a step; left out: {left}"
    )


def window(rows) -> tuple[int, int | None]:
    """(start, end) of a window given as (start, end), a slice, a range or 'start:end' (either side may be
    left out; end None: to the end of the file)."""
    if rows is None:
        return 0, None
    if isinstance(rows, str):
        a, sep, b = rows.partition(":")
        if not sep or not re.fullmatch(r"\s*\d*\s*", a) or not re.fullmatch(r"\s*\d*\s*", b) or len(rows) > 40:
            raise KvvizError(f"rows={short_repr(rows)}: give START:END, row numbers from 0 (e.g. 3000:3150)")
        rows = (int(a) if a.strip() else 0, int(b) if b.strip() else None)
    elif isinstance(rows, (slice, range)):
        require(rows.step in (None, 1), f"rows={short_repr(rows)}: a window of consecutive rows (step 1)")
        rows = (rows.start or 0, rows.stop)
    require(
        isinstance(rows, (tuple, list)) and len(rows) == 2,
        f"rows={short_repr(rows)}: give (start, end), a slice or 'start:end'",
    )
    start, end = rows
    require(type(start) is int and start >= 0, f"rows: start={short_repr(start)}: a row number, 0 or more")
    require(end is None or (type(end) is int and end > start), f"rows: end={short_repr(end)}: a row number above start")
    return start, end


def _step(step_ms) -> Fraction:
    ok = isinstance(step_ms, (int, float)) and not isinstance(step_ms, bool) and math.isfinite(step_ms)
    require(ok and 0 < step_ms <= 86_400_000, f"step_ms={short_repr(step_ms)}: a positive number of ms (at most a day)")
    return Fraction(str(step_ms)) if isinstance(step_ms, float) else Fraction(step_ms)


def detect_format(path) -> str:
    """'mooncake', 'azure' or 'workload' (kvviz's JSON Lines), from the file's first non-blank line."""
    what = f"trace {short_repr(Path(path).name)}"
    for number, text in read_lines(path, what=what, give="a trace"):
        if not text.strip():
            continue
        if text.lstrip().startswith("{"):
            obj = parse_json_text(text, what=f"{what} line {number}")
            if isinstance(obj, dict) and all(k in obj for k in MOONCAKE_FIELDS):
                return "mooncake"
            if isinstance(obj, dict) and "arrival_step" in obj:
                return "workload"
            keys = ", ".join(short_repr(k) for k in list(obj)[:6]) if isinstance(obj, dict) else "not an object"
            raise KvvizError(
                f"{what} line {number}: neither Mooncake ({', '.join(MOONCAKE_FIELDS)}) nor a kvviz workload "
                f"(id, arrival_step, ...): {keys}"
            )
        if all(c in _cells(text) for c in AZURE_COLUMNS):
            return "azure"
        raise KvvizError(
            f"{what} line {number}: not a trace kvviz reads: Mooncake JSON Lines or an Azure CSV with the "
            f"header {','.join(AZURE_COLUMNS)}; got {short_repr(text)}"
        )
    raise KvvizError(f"{what}: empty")


def read_trace(
    path,
    *,
    format: str | None = None,
    rows=None,
    step_ms: float = DEFAULT_STEP_MS,
    max_model_len: int | None = None,
    id_prefix: str | None = None,
    first_row: int | None = None,
) -> Trace:
    """A window of a Mooncake or Azure trace as a `Trace` (module docstring: the rule), read line by line up
    to the window's end. `format` None: detected from the first line; `max_model_len` None: no request is
    left out for its length (`Trace.within` does it later); `first_row`: the number of the file's first row
    (a window cut from a longer trace keeps its rows' numbers, hence its ids; `rows` counts from it)."""
    name = Path(path).name
    fmt = detect_format(path) if format is None else format
    if fmt == "workload":
        raise KvvizError(f"trace {short_repr(name)}: a kvviz workload (id, arrival_step, ...); give it as a workload")
    require(fmt in FORMATS, f"format={short_repr(fmt)}: choose {', '.join(FORMATS)} (None: detected)")
    start, end = window(rows)
    first_row = 0 if first_row is None else first_row
    require(type(first_row) is int and first_row >= 0, f"first_row={short_repr(first_row)}: a row number, 0 or more")
    start = max(start, first_row)
    step = _step(step_ms)
    if id_prefix is None:
        id_prefix = "az" if fmt == "azure" else ("synth" if "synth" in name.lower() else "conv")
    require(
        isinstance(id_prefix, str) and re.fullmatch(r"[\w.]{1,40}", id_prefix) is not None,
        f"id_prefix={short_repr(id_prefix)}: 1 to 40 letters, digits, '_' or '.'",
    )
    what = f"trace {short_repr(name)}"
    rows_of = _mooncake_rows if fmt == "mooncake" else _azure_rows
    unit = step * (1 if fmt == "mooncake" else NS_PER_MS)  # one step in the reader's time unit (ms; Azure: ns)
    unit = int(unit) if unit.denominator == 1 else unit  # whole units: integer arithmetic only
    requests, left = [], []
    t0 = None
    last = start
    stop = None if end is None else end - first_row
    for row, number, (t, prompt, output, ids) in rows_of(path, what, start - first_row, stop):
        row += first_row
        where = f"{what} line {number:,}"
        t0 = t if t0 is None else t0
        if t < t0:
            raise KvvizError(f"{where}: {_time_field(fmt)}: earlier than the window's first row (line order)")
        rid = f"{id_prefix}-{row:05d}"
        last = row + 1
        if not prompt or not output:
            left.append(LeftOut(row, rid, ZERO_LENGTH))
            continue
        arrival = (t - t0) // unit
        block = None if ids is None else MOONCAKE_BLOCK_TOKENS
        requests.append(WorkloadRequest(rid, arrival, prompt, output, None, 0, ids, block))
    if t0 is None:
        raise KvvizError(f"{what}: rows={start}:{'' if end is None else end}: the window holds no row")
    step_value = float(step) if step.denominator != 1 else int(step)
    trace = Trace(name, fmt, (start, last), step_value, tuple(requests), tuple(left))
    return trace if max_model_len is None else trace.within(max_model_len)


def _time_field(fmt: str) -> str:
    return "timestamp" if fmt == "mooncake" else "TIMESTAMP"


def _count(value, where: str, field: str) -> int:
    if type(value) is not int or value < 0:
        raise KvvizError(f"{where}: {field}={short_repr(value)}: must be a whole number of tokens, 0 or more")
    return value


def _filled(lines):
    """The (line number, text) pairs of the lines that are not blank."""
    return ((number, text) for number, text in lines if text.strip())


def _window(lines, start: int, end: int | None):
    """(row, line number, text) of the rows start .. end - 1 (rows numbered from 0), read no further than end."""
    for row, (number, text) in enumerate(lines):
        if end is not None and row >= end:
            return
        if row >= start:
            yield row, number, text


def _mooncake_rows(path, what: str, start: int, end: int | None):
    """(row, line number, (t in ms: an int, or a Fraction of a float's exact value, prompt, output, hash ids
    or None)) of the window."""
    for row, number, text in _window(_filled(read_lines(path, what=what, give="Mooncake JSON Lines")), start, end):
        where = f"{what} line {number:,}"
        obj = parse_json_text(text, what=where)
        if not isinstance(obj, dict):
            raise KvvizError(f"{where}: not a JSON object")
        for field in MOONCAKE_FIELDS:
            if field not in obj:
                raise KvvizError(f"{where}: {field}: missing")
        t = obj["timestamp"]
        if not isinstance(t, (int, float)) or isinstance(t, bool) or not math.isfinite(t):
            raise KvvizError(f"{where}: timestamp={short_repr(t)}: must be a finite number of ms")
        ids = obj.get("hash_ids")
        if ids is not None:
            if not isinstance(ids, list):
                raise KvvizError(f"{where}: hash_ids={short_repr(ids)}: must be a list of integers")
            if ids and (set(map(type, ids)) != {int} or min(ids) < 0):  # at C speed; the loop names the culprit
                k, h = next((k, h) for k, h in enumerate(ids) if type(h) is not int or h < 0)
                raise KvvizError(f"{where}: hash_ids[{k}]={short_repr(h)}: must be an integer, 0 or more")
            ids = tuple(ids)
        prompt = _count(obj["input_length"], where, "input_length")
        output = _count(obj["output_length"], where, "output_length")
        yield row, number, (t if type(t) is int else Fraction(t), prompt, output, ids)


def _cells(text: str) -> list[str]:
    if '"' not in text:
        return [c.strip() for c in text.split(",")]
    import csv

    return [c.strip() for c in next(csv.reader([text]), [])]


def _azure_rows(path, what: str, start: int, end: int | None):
    """(row, line number, (t in ns, prompt, output, None)) of the window."""
    lines = _filled(read_lines(path, what=what, give="an Azure trace CSV"))
    number, header = next(lines, (1, ""))
    cells = _cells(header)
    missing = [c for c in AZURE_COLUMNS if c not in cells]
    require(not missing, f"{what} line {number}: {missing[0] if missing else ''}: missing from the header")
    columns = [cells.index(c) for c in AZURE_COLUMNS]
    for row, number, text in _window(lines, start, end):
        cells = _cells(text)
        where = f"{what} line {number:,}"
        if len(cells) <= max(columns):
            raise KvvizError(f"{where}: {len(cells)} cells; the header has {max(columns) + 1} or more")
        clock, prompt, output = (cells[i] for i in columns)
        prompt_len = _int_cell(prompt, where, AZURE_COLUMNS[1])
        yield row, number, (_clock_ns(clock, where), prompt_len, _int_cell(output, where, AZURE_COLUMNS[2]), None)


def _int_cell(text: str, where: str, column: str) -> int:
    if not re.fullmatch(r"\d{1,15}", text):
        raise KvvizError(f"{where}: {column}={short_repr(text)}: not a whole number of tokens")
    return int(text)


def _clock_ns(text: str, where: str) -> int:
    """A wall-clock TIMESTAMP in ns since 0001-01-01, exactly (the digits past the second as written)."""
    m = _CLOCK.fullmatch(text)
    if m is None:
        raise KvvizError(f"{where}: TIMESTAMP={short_repr(text)}: not a time like 2023-11-16 18:15:46.6805900")
    y, mo, d, h, mi, s, frac = m.groups()
    try:
        day = datetime.date(int(y), int(mo), int(d)).toordinal()
        datetime.time(int(h), int(mi), int(s))
    except ValueError as e:
        raise KvvizError(f"{where}: TIMESTAMP={short_repr(text)}: {e}") from None
    seconds = ((day * 24 + int(h)) * 60 + int(mi)) * 60 + int(s)
    return seconds * 10**9 + (int(frac) * 10 ** (9 - len(frac)) if frac else 0)
