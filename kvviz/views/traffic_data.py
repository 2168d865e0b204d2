"""The pool under traffic as plain data: occupancy per group over time, the scheduler's queues over time,
and the pool's blocks at one step (the time-lapse map).

Built from a `kvviz.replay.Replay` passed in and read duck-typed (`step_columns()`, `to_json()`,
`block_log`), so the views import neither the replay nor any planner family. Light on purpose: no
matplotlib. The time-lapse needs the replay run with `record_blocks=True` (docs/replay.md#views).
"""

from __future__ import annotations

import dataclasses

from kvviz.base.defaults import MAX_NUM_BATCHED_TOKENS
from kvviz.base.errors import KvvizError, require
from kvviz.base.inputs import checked
from kvviz.views.args import REPLAY, REPLAY_WITH_BLOCKS, STEP

__all__ = [
    "OccupancyData",
    "occupancy_data",
    "QueueData",
    "queue_data",
    "PoolMapData",
    "TimeLapse",
    "pool_map_data",
    "FREE",
    "HELD",
    "CACHED_FREE",
]

FREE, HELD, CACHED_FREE = 0, 1, 2  # a block's state, as `Replay.block_log` records it
_CHECKPOINT_EVERY = 64  # steps between the time-lapse's stored full states


def _title(replay) -> str:
    """The model, its max_model_len, the scheduler knobs given away from vLLM 0.33's defaults (the replay's own:
    kvviz.replay.replay) and the KV budget."""
    inp = replay.to_json()["inputs"]
    words = [inp["model"], f"max_model_len {inp['max_model_len']:,}"]
    batched = inp["max_num_batched_tokens"]
    if batched != MAX_NUM_BATCHED_TOKENS:
        words.append(f"max_num_batched_tokens {batched:,}")
    if inp["max_num_seqs"] != min(1024, batched):
        words.append(f"max_num_seqs {inp['max_num_seqs']:,}")
    words += [f"{name} off" for name in ("enable_prefix_caching", "async_scheduling") if inp.get(name) is False]
    return f"{', '.join(words)} · {inp['kv_budget']:,} B of KV cache"


@dataclasses.dataclass(frozen=True)
class OccupancyData:
    """Blocks per group held at the end of every step, the free blocks still cached (evictable) and the
    free ones; held + cached_free + free = usable_blocks (num_blocks less the null block) at every step."""

    title: str
    steps: tuple[int, ...]
    groups: tuple[str, ...]
    held: tuple[tuple[int, ...], ...]  # per group, one value per step
    cached_free: tuple[int, ...]
    free: tuple[int, ...]  # free blocks without a hash (cached_free not counted)
    usable_blocks: int


@checked(replay=REPLAY)
def occupancy_data(replay) -> OccupancyData:
    """The replay's `held_blocks`, `cached_free_blocks` and `free_blocks` columns, per group."""
    cols = replay.step_columns()
    cfg = replay.to_json()["kv_cache_config"]
    held = cols["held_blocks"]
    groups = tuple(g["name"] for g in cfg["groups"])
    per_group = tuple(tuple(h[i] for h in held) for i in range(len(groups)))
    cached = tuple(cols["cached_free_blocks"])
    return OccupancyData(
        title=_title(replay),
        steps=tuple(cols["step"]),
        groups=groups,
        held=per_group,
        cached_free=cached,
        free=tuple(f - c for f, c in zip(cols["free_blocks"], cached)),
        usable_blocks=cfg["usable_blocks"],
    )


@dataclasses.dataclass(frozen=True)
class QueueData:
    """Requests running and waiting at the end of every step, and the preemptions each step made."""

    title: str
    steps: tuple[int, ...]
    running: tuple[int, ...]
    waiting: tuple[int, ...]
    preemptions: tuple[int, ...]

    @property
    def total_preemptions(self) -> int:
        """Preemptions over the whole run."""
        return sum(self.preemptions)


@checked(replay=REPLAY)
def queue_data(replay) -> QueueData:
    """The replay's `num_running`, `num_waiting` and `preemptions` columns."""
    cols = replay.step_columns()
    return QueueData(
        _title(replay),
        tuple(cols["step"]),
        tuple(cols["num_running"]),
        tuple(cols["num_waiting"]),
        tuple(cols["preemptions"]),
    )


@dataclasses.dataclass(frozen=True)
class PoolMapData:
    """Every block of the pool at the end of `step`, in block-id order (block b starts at byte
    b x bytes_per_block of the pool): its state (HELD, CACHED_FREE, FREE; block 0 is the null block),
    the group of its last owner (-1: never handed out) and the request that last took it ("")."""

    title: str
    step: int
    num_steps: int
    bytes_per_block: int
    groups: tuple[str, ...]
    state: tuple[int, ...]
    group: tuple[int, ...]
    request: tuple[str, ...]

    @property
    def num_blocks(self) -> int:
        """Blocks in the pool, the null block included."""
        return len(self.state)

    def count(self, state: int) -> int:
        """How many blocks (the null block not counted) are in `state`."""
        return sum(1 for s in self.state[1:] if s == state)

    def requests_holding(self) -> tuple[str, ...]:
        """The requests that hold at least one block, in the order of their first block."""
        seen = dict.fromkeys(r for s, r in zip(self.state, self.request) if s == HELD and r)
        return tuple(seen)


class TimeLapse:
    """The pool's blocks at any step of a replay recorded with `record_blocks=True`: the log of changed
    blocks replayed from the nearest stored state (one every 64 steps), so a slider moves cheaply."""

    @checked(replay=REPLAY_WITH_BLOCKS)
    def __init__(self, replay) -> None:
        log = replay.block_log
        cols = replay.step_columns()
        self.num_steps = len(cols["step"])
        if not log and self.num_steps:
            raise KvvizError("replay: no block log; run kvviz.replay(..., record_blocks=True) for the time-lapse")
        cfg = replay.to_json()["kv_cache_config"]
        self.title = _title(replay)
        self.groups = tuple(g["name"] for g in cfg["groups"])
        self.bytes_per_block = cfg["bytes_per_block"]
        n = cfg["num_blocks"]
        state, group, request = [FREE] * n, [-1] * n, [""] * n
        state[0] = HELD  # the null block, taken at start
        self._log = log
        self._checkpoints = []
        for i, changes in enumerate(log):  # checkpoint k: the state after log[: k * _CHECKPOINT_EVERY]
            if i % _CHECKPOINT_EVERY == 0:
                self._checkpoints.append((tuple(state), tuple(group), tuple(request)))
            for b, s, g, r in changes:
                state[b], group[b], request[b] = s, g, r or ""
        if len(log) % _CHECKPOINT_EVERY == 0:
            self._checkpoints.append((tuple(state), tuple(group), tuple(request)))

    def at(self, step: int) -> PoolMapData:
        """The pool at the end of `step` (0 <= step < num_steps)."""
        require(
            isinstance(step, int) and 0 <= step < self.num_steps,
            f"step={step!r}: the replay ran steps 0 to {self.num_steps - 1}",
        )
        base = (step + 1) // _CHECKPOINT_EVERY
        state, group, request = (list(x) for x in self._checkpoints[base])
        for changes in self._log[base * _CHECKPOINT_EVERY : step + 1]:
            for b, s, g, r in changes:
                state[b], group[b], request[b] = s, g, r or ""
        return PoolMapData(
            self.title,
            step,
            self.num_steps,
            self.bytes_per_block,
            self.groups,
            tuple(state),
            tuple(group),
            tuple(request),
        )


@checked(replay=REPLAY_WITH_BLOCKS, step=STEP)
def pool_map_data(replay, step: int) -> PoolMapData:
    """The pool at the end of `step` of a replay recorded with `record_blocks=True` (`TimeLapse(replay).at`)."""
    return TimeLapse(replay).at(step)
