"""The pool under traffic: a workload replayed exactly as vLLM 0.33's scheduler runs it (docs/replay.md).
This module only re-exports; the package itself is callable: `kvviz.replay(plan, workload_or_trace, ...)` is
`kvviz.replay.replay(...)` (kvviz.replay.front), so `kvviz.replay.chat` and `from kvviz.replay import ...`
work beside it (kvviz.base.lazy.callable_package)."""

from kvviz.base.lazy import callable_package
from kvviz.replay.front import replay
from kvviz.replay.generators import agentic, burst, chat, documents, multi_turn, read_csv_trace
from kvviz.replay.result import Replay
from kvviz.replay.traces import LeftOut, Trace, detect_format, read_trace
from kvviz.replay.workload import WorkloadRequest, dumps, loads, read_jsonl

__all__ = [
    "replay",
    "chat",
    "documents",
    "multi_turn",
    "agentic",
    "burst",
    "read_csv_trace",
    "read_trace",
    "detect_format",
    "Trace",
    "LeftOut",
    "Replay",
    "WorkloadRequest",
    "read_jsonl",
    "loads",
    "dumps",
]

callable_package(__name__, replay)
