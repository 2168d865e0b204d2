"""Published traces read as published (kvviz/replay/traces.py, docs/replay.md#traces): Mooncake JSON Lines and
Azure's 2023 CSV, windows of rows, the arrival rule and the rows left out, against the workloads vLLM 0.33's
own real-trace references were replayed from (../shared/data/vllm-0.33/replay-traces: the same rows, made by
another program from the same rule), and by hand from the rows themselves."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvviz.base.errors import KvvizError
from kvviz.replay import Trace, detect_format, read_trace
from kvviz.replay.traces import TOO_LONG, ZERO_LENGTH, window

TRACES = Path(__file__).parent / "data" / "traces"
# the real-trace references: w-rfast's copy in tests/data once merged, else the shared one
REFERENCES = [
    Path(__file__).parent / "data" / "vllm-0.33" / "replay-traces" / "trace-cases.json",
    Path(__file__).resolve().parents[2] / "shared" / "data" / "vllm-0.33" / "replay-traces" / "trace-cases.json",
    Path("/work/shared/data/vllm-0.33/replay-traces/trace-cases.json"),
]
# each reference case -> the shipped window of its rows (tests/data/traces/README.md) and its first row
WINDOWS = {
    "llama-3.1-8b/mooncake-conv-3000": ("mooncake-conversation-rows-3000-3149.jsonl", 3000),
    "qwen3-next-80b-a3b/mooncake-synth-1000": ("mooncake-synthetic-rows-1000-1119.jsonl", 1000),
    "gpt-oss-20b/mooncake-conv-9000": ("mooncake-conversation-rows-9000-9149.jsonl", 9000),
    "llama-3.1-8b/azure-conv-5000": ("azure-conv-rows-5000-5299.csv", 5000),
}


def _reference_cases() -> dict:
    path = next((p for p in REFERENCES if p.is_file()), None)
    if path is None:
        pytest.skip("the real-trace references are in neither tests/data/vllm-0.33/replay-traces nor ../shared")
    return {c["case"]: c for c in json.loads(path.read_text())["cases"]}


@pytest.mark.parametrize("case", sorted(WINDOWS))
def test_windows_give_the_references_workloads(case):
    """Every request of vLLM's reference run, field for field: id, arrival step, lengths, hash chain."""
    ref = _reference_cases()[case]
    name, first = WINDOWS[case]
    trace = read_trace(TRACES / name, first_row=first, max_model_len=ref["inputs"]["max_model_len"])
    assert [r.to_json() for r in trace.requests] == ref["workload"]
    assert trace.left_out == ()


def test_mooncake_rows_by_hand():
    """Rows 3,000 and 3,149 of the conversation trace, read from the raw lines with the README's rule."""
    lines = (TRACES / "mooncake-conversation-rows-3000-3149.jsonl").read_text().splitlines()
    first, last = json.loads(lines[0]), json.loads(lines[-1])
    trace = read_trace(TRACES / "mooncake-conversation-rows-3000-3149.jsonl", first_row=3000)
    a, b = trace.requests[0], trace.requests[-1]
    assert (a.id, a.arrival_step, a.prompt_len, a.output_len) == (
        "conv-03000",
        0,
        first["input_length"],
        first["output_length"],
    )
    assert b.id == "conv-03149" and b.arrival_step == (last["timestamp"] - first["timestamp"]) // 25
    assert b.hash_ids == tuple(last["hash_ids"]) and b.hash_block_tokens == 512
    assert trace.rows == (3000, 3150) and trace.format == "mooncake" and trace.step_ms == 25


def test_azure_clock_is_read_to_the_digit():
    """TIMESTAMP 18:32:50.3420690 and 18:32:50.8327360: 490.667 ms apart, step 19 at 25 ms, 49 at 10 ms,
    and at 490.667 ms a step exactly 1 (exact arithmetic, no float rounding at the boundary)."""
    path = TRACES / "azure-conv-rows-5000-5299.csv"
    assert [r.arrival_step for r in read_trace(path, rows=(0, 2)).requests] == [0, 19]
    assert [r.arrival_step for r in read_trace(path, rows=(0, 2), step_ms=10).requests] == [0, 49]
    assert [r.arrival_step for r in read_trace(path, rows=(0, 2), step_ms=490.667).requests] == [0, 1]
    assert [r.arrival_step for r in read_trace(path, rows=(0, 2), step_ms=490.6671).requests] == [0, 0]
    assert read_trace(path, rows=(0, 1)).requests[0].id == "az-00000"


def test_the_window_and_its_numbers():
    path = TRACES / "mooncake-synthetic-rows-1000-1119.jsonl"
    t = read_trace(path, rows="1010:1012", first_row=1000)
    assert [r.id for r in t.requests] == ["synth-01010", "synth-01011"] and t.requests[0].arrival_step == 0
    assert read_trace(path, rows=slice(1100, None), first_row=1000).rows == (1100, 1120)
    assert read_trace(path, rows=range(3, 5), id_prefix="s").requests[0].id == "s-00003"
    with pytest.raises(KvvizError, match="holds no row"):
        read_trace(path, rows=(500, 600))
    for bad in ("3000-3150", "a:b", (5, 2), (-1, 3), [1, 2, 3], range(0, 10, 2)):
        with pytest.raises(KvvizError, match="rows"):
            window(bad)


def test_left_out_rows_are_counted_never_dropped_silently(tmp_path):
    p = tmp_path / "t.jsonl"
    rows = [(0, 100, 10), (5, 0, 10), (30, 4000, 200), (80, 100, 0), (90, 50, 5)]
    p.write_text(
        "".join(json.dumps({"timestamp": t, "input_length": i, "output_length": o}) + "\n" for t, i, o in rows)
    )
    t = read_trace(p, max_model_len=4096)
    assert [r.id for r in t.requests] == ["conv-00000", "conv-00004"]
    assert [(x.id, x.reason) for x in t.left_out] == [
        ("conv-00001", ZERO_LENGTH),
        ("conv-00002", TOO_LONG),
        ("conv-00003", ZERO_LENGTH),
    ]
    assert t.requests[1].arrival_step == 3  # t0 is the window's first row, left out or not
    assert t.left_out_counts() == {ZERO_LENGTH: 2, TOO_LONG: 1} and t.num_rows == 5
    assert read_trace(p).within(4096) == t
    assert t.to_json()["left_out_too_long"] == 1 and "left out: 2 zero length, 1 longer" in t.describe()


def test_times_that_are_not_whole_ms_and_a_bom(tmp_path):
    """A float timestamp is read at its exact value (25.5 - 0.5 = 25: step 1 at 25 ms, not 0.99...); a UTF-8
    byte-order mark before the header (a spreadsheet's CSV) is no part of it."""
    p = tmp_path / "t.jsonl"
    rows = [(0.5, 10, 1), (25.5, 10, 1), (50.4, 10, 1), (50.5, 10, 1)]
    p.write_text(
        "".join(json.dumps({"timestamp": t, "input_length": i, "output_length": o}) + "\n" for t, i, o in rows)
    )
    assert [r.arrival_step for r in read_trace(p).requests] == [0, 1, 1, 2]
    csv = tmp_path / "t.csv"
    csv.write_bytes(b"\xef\xbb\xbfTIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:15:46.68,374,44\r\n")
    assert detect_format(csv) == "azure" and read_trace(csv).requests[0].prompt_len == 374


def test_detect_format(tmp_path):
    assert detect_format(TRACES / "azure-conv-rows-5000-5299.csv") == "azure"
    assert detect_format(TRACES / "mooncake-synthetic-rows-1000-1119.jsonl") == "mooncake"
    w = tmp_path / "w.jsonl"
    w.write_text('\n{"id": "a", "arrival_step": 0, "prompt_len": 5, "output_len": 1}\n')
    assert detect_format(w) == "workload"
    with pytest.raises(KvvizError, match="a kvviz workload"):
        read_trace(w)
    for text, words in (("a,b,c\n1,2,3\n", "not a trace"), ('{"x": 1}\n', "neither Mooncake"), ("\n\n", "empty")):
        w.write_text(text)
        with pytest.raises(KvvizError, match=words):
            detect_format(w)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 10**7), st.integers(0, 5000), st.integers(0, 300)), min_size=1, max_size=30),
    st.integers(1, 400),
    st.integers(1, 6000),
)
def test_arrival_rule_holds_for_any_rows(tmp_path_factory, rows, step_ms, max_model_len):
    """Rows sorted by time: arrival = (t - t0) // step_ms in file order, ids by row; every row either a request
    or left out for exactly one reason."""
    rows = sorted(rows)
    p = tmp_path_factory.mktemp("h") / "t.jsonl"
    p.write_text(
        "".join(json.dumps({"timestamp": t, "input_length": i, "output_length": o}) + "\n" for t, i, o in rows)
    )
    t = read_trace(p, step_ms=step_ms, max_model_len=max_model_len)
    assert t.num_rows == len(rows)
    kept = {r.id: r for r in t.requests}
    for k, (ts, i, o) in enumerate(rows):
        rid = f"conv-{k:05d}"
        if i == 0 or o == 0:
            assert (k, rid, ZERO_LENGTH) in [(x.row, x.id, x.reason) for x in t.left_out]
        elif i + o > max_model_len:
            assert (k, rid, TOO_LONG) in [(x.row, x.id, x.reason) for x in t.left_out]
        else:
            assert kept[rid].arrival_step == (ts - rows[0][0]) // step_ms
    assert [r.arrival_step for r in t.requests] == sorted(r.arrival_step for r in t.requests)


# ---- bad rows: one line naming the line and the field --------------------------------------------------
@pytest.mark.parametrize(
    "line, words",
    [
        ('{"timestamp": NaN, "input_length": 5, "output_length": 1}', ["line 2", "timestamp=nan"]),
        ('{"timestamp": 5, "input_length": -5, "output_length": 1}', ["line 2", "input_length=-5"]),
        ('{"timestamp": 5, "input_length": 5.5, "output_length": 1}', ["line 2", "input_length=5.5"]),
        ('{"timestamp": 5, "input_length": 5}', ["line 2", "output_length: missing"]),
        ('{"timestamp": 5, "input_length": 5, "output_length": 1, "hash_ids": [1, -2]}', ["line 2", "hash_ids[1]"]),
        ('{"timestamp": 5, "input_length": 5, "output_length": 1, "hash_ids": "ab"}', ["line 2", "hash_ids="]),
        ('{"timestamp": 1, "input_length": 5, "output_length": 1}', ["line 2", "earlier than the window's first"]),
        ("[1, 2]", ["line 2", "not a JSON object"]),
        ("{oops", ["line 2", "malformed JSON"]),
        ("[" * 1000 + "]" * 1000, ["line 2", "nested too deeply"]),
        ('{"timestamp": 5, "input_length": ' + "7" * 5000 + ', "output_length": 1}', ["line 2", "5,000 digits"]),
    ],
)
def test_bad_mooncake_rows(tmp_path, line, words):
    p = tmp_path / "t.jsonl"
    p.write_text('{"timestamp": 3, "input_length": 5, "output_length": 1}\n' + line + "\n")
    with pytest.raises(KvvizError) as e:
        read_trace(p, format="mooncake")
    msg = str(e.value)
    assert "\n" not in msg and len(msg) < 300
    for w in words:
        assert w in msg


@pytest.mark.parametrize(
    "row, words",
    [
        ("2023-11-16 18:15:47.0,NaN,5", ["line 3", "ContextTokens='NaN'"]),
        ("2023-11-16 18:15:47.0,5,nan", ["line 3", "GeneratedTokens='nan'"]),
        ("NaN,5,5", ["line 3", "TIMESTAMP='NaN'"]),
        ("2023-13-16 18:15:47.0,5,5", ["line 3", "month must be in 1..12"]),
        ("2023-11-16 18:15:47.0,5", ["line 3", "2 cells"]),
        ("2023-11-16 18:15:47.0,-5,5", ["line 3", "ContextTokens='-5'"]),
        ("2023-11-16 18:15:45.0,5,5", ["line 3", "TIMESTAMP: earlier"]),
    ],
)
def test_bad_azure_rows(tmp_path, row, words):
    p = tmp_path / "t.csv"
    p.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n" + row + "\n")
    with pytest.raises(KvvizError) as e:
        read_trace(p)
    msg = str(e.value)
    assert "\n" not in msg and len(msg) < 300
    for w in words:
        assert w in msg


def test_bad_arguments(tmp_path):
    path = TRACES / "azure-conv-rows-5000-5299.csv"
    for kw, words in (
        ({"step_ms": 0}, "step_ms=0"),
        ({"step_ms": float("nan")}, "step_ms=nan"),
        ({"step_ms": True}, "step_ms=True"),
        ({"format": "sharegpt"}, "format='sharegpt'"),
        ({"id_prefix": "a b"}, "id_prefix"),
        ({"first_row": -1}, "first_row"),
    ):
        with pytest.raises(KvvizError, match=words):
            read_trace(path, **kw)
    with pytest.raises(KvvizError, match="max_model_len"):
        read_trace(path).within(0)


def test_a_trace_is_a_frozen_value():
    t = read_trace(TRACES / "azure-conv-rows-5000-5299.csv", rows=(0, 3))
    assert isinstance(t, Trace) and hash(t.requests) == hash(
        read_trace(TRACES / "azure-conv-rows-5000-5299.csv", rows=(0, 3)).requests
    )


# ---- files that are not traces: streamed, bounded, refused in one line ----------------------------------
def test_devices_and_fifos_are_refused_at_once(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, kind in (("/dev/zero", "a device"), ("/dev/urandom", "a device"), (str(fifo), "a FIFO")):
        with pytest.raises(KvvizError, match=f"not a regular file \\({kind}\\)"):
            read_trace(path)


def test_a_sparse_4_gib_file_is_refused_at_its_first_line(tmp_path):
    """4 GiB of zeros (sparse: nothing on disk) is refused after one line's bound, not read whole."""
    p = tmp_path / "sparse.jsonl"
    with open(p, "wb") as f:
        f.truncate(4 << 30)
    with pytest.raises(KvvizError, match="line 1: longer than 1,048,576 bytes"):
        read_trace(p)


def test_random_bytes_are_refused_in_one_line(tmp_path):
    p = tmp_path / "random.csv"
    p.write_bytes(b"TIMESTAMP,ContextTokens,GeneratedTokens\n" + bytes(range(128, 256)) * 64)
    with pytest.raises(KvvizError, match="line 2: not UTF-8"):
        read_trace(p, format="azure")
