"""vLLM 0.33's `Scheduler.update_from_output` (vllm/v1/core/sched/scheduler.py), a mixin of
kvviz/replay/scheduler.py's `Scheduler`: a processed batch's tokens delivered, finished requests freed."""

from __future__ import annotations

from kvviz.replay.request import FINISHED, RUNNING


class OutputUpdate:
    """`update_from_output` (the `Scheduler` holds the state)."""

    def update_from_output(self, batch: dict, step: int) -> list:
        """`Scheduler.update_from_output`: one token for each sampled request; a request that reaches
        max_tokens (or max_model_len) finishes and frees its blocks."""
        finished = []
        stopped_running, stopped_waiting = [], []
        no_mamba = self.kv.no_mamba
        cache_blocks = self.kv.cache_blocks
        batch_step = batch["step"]
        log = self.log
        for r, n in batch["chunks"]:  # no token sampled: only the in-flight counts (nothing here reads another's)
            if r.status is not FINISHED:  # finished since (a request reported never admitted was never scheduled)
                r.num_in_flight_tokens -= n
                if r.num_stale_output_tokens > 0:
                    r.num_stale_output_tokens -= n
        for r, n in batch["sampled"]:
            status_before = r.status
            if status_before is FINISHED:
                continue
            r.num_in_flight_tokens -= n
            stale = r.num_stale_output_tokens > 0
            if stale:
                r.num_stale_output_tokens -= n
            placeholders = r.num_output_placeholders
            num_output = r.num_output = r.num_output + 1
            if num_output == 1:  # the first token (num_output only grows, here)
                log.first_token[r.index] = batch_step
            if not stale and placeholders > 0:
                r.num_output_placeholders = placeholders - 1
                if status_before is RUNNING:
                    upto = r.num_computed_tokens - r.num_in_flight_tokens
                    if upto >= r.cache_limit or not no_mamba:  # below it every full block is hashed already
                        cache_blocks(r, upto)
            if num_output >= r.finish_at:  # prompt + output >= max_model_len or output >= max_tokens
                rid = r.rid
                r.status = FINISHED
                log.finished(r.index, batch_step, step, num_output)
                self.finished_ids.add(rid)
                self.kv.free(rid)
                if r.num_preemptions:
                    self.kv.pool.unwatch(r.own)
                if status_before is RUNNING:
                    self.explicit.pop(r.seq, None)
                finished.append(rid)
                (stopped_running if status_before is RUNNING else stopped_waiting).append(r)
        if stopped_running:
            running = self.running
            if len(stopped_running) <= 8:  # a few C-level scans beat rebuilding the list in Python
                for r in stopped_running:
                    running.remove(r)  # Request has no __eq__: identity
            else:
                gone = set(id(r) for r in stopped_running)
                running[:] = [r for r in running if id(r) not in gone]
        for r in stopped_waiting:
            self.waiting.remove(r)
        return finished
