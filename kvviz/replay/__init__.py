"""The pool under traffic: a workload replayed exactly as vLLM 0.33's scheduler runs it
(docs/replay.md). This module only re-exports."""

from kvviz.replay.engine import replay
from kvviz.replay.generators import agentic, burst, chat, documents, multi_turn, read_csv_trace
from kvviz.replay.result import Replay
from kvviz.replay.workload import WorkloadRequest, dumps, loads, read_jsonl

__all__ = [
    "replay",
    "chat",
    "documents",
    "multi_turn",
    "agentic",
    "burst",
    "read_csv_trace",
    "Replay",
    "WorkloadRequest",
    "read_jsonl",
    "loads",
    "dumps",
]
