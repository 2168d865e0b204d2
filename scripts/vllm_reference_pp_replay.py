"""The pool vLLM 0.33's scheduler gets under pipeline parallel when each stage's worker has its own memory (issue 38:
`kvviz replay -pp`), made with vLLM's own code on CPU.

Runs ONLY in the throwaway venv (/root/vllm-ref, vllm==0.33.0, torch CPU); kvviz never imports it. Per case (a
config folder of tests/data/vllm-0.33/deploy-more/configs, PP, a layer partition, a GPU):

1. each stage's worker registers its own layers' specs exactly as scripts/vllm_reference_deploy.py builds them
   (`_stage_specs`: EngineArgs(max_model_len=min(32768, derived), max_num_batched_tokens=8192, PP,
   VLLM_PP_LAYER_PARTITION), vLLM's distributed state at that stage's rank, the model's real `__init__` on the
   meta device, each layer's own `get_kv_cache_spec`);
2. each worker's `available_memory` is what kvviz derives for that stage on the GPU (the input, not the answer):
   `kvviz plan --hf-config DIR --gpu G -pp N [--pp-layer-partition P] --max-model-len 32768 --json`, its
   `stages[i].budget_bytes` (run here through KVVIZ, default .venv/bin/kvviz; the command is recorded);
3. EngineCore._initialize_kv_caches' own calls: `get_global_kv_cache_groups(vllm_config, specs)`,
   `get_kv_cache_configs(vllm_config, specs, available_memory, groups)`, `generate_scheduler_kv_cache_config`.
   Recorded: every worker's pre-minimum num_blocks (available // its bytes per block, recomputed with
   `_pool_bytes_per_block` on its projected groups), each worker's config num_blocks after the minimum, and the
   scheduler's config: num_blocks and its groups (kind, block size, sliding window, page bytes, layers).

usage: VENV/bin/python scripts/vllm_reference_pp_replay.py --out tests/data/vllm-0.33/pp-replay/cases.json
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from vllm_reference_deploy import DATA, _stage_specs, case_arguments, run_cases  # noqa: E402
from vllm_reference_plans import _h200_backends, _kind  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
KVVIZ = os.environ.get("KVVIZ", str(ROOT / ".venv" / "bin" / "kvviz"))
MAX_MODEL_LEN = 32768
GIB = 1 << 30

# name -> (config folder relative to DATA, pp, partition or None, GPU, memory set by hand or None)
CASES = {
    "llama-3.1-8b/pp=2/H100": ("configs/llama-3.1-8b", 2, None, "H100", None),
    "llama-3.1-8b/pp=2/partition=12,20/H100": ("configs/llama-3.1-8b", 2, "12,20", "H100", None),
    # by hand: the stage with the larger bytes per block (stage 1: 20 layers) has the more memory, so the stage that
    # binds (stage 0) is not the one with the most bytes per block: one stage's memory on every stage is wrong here
    "llama-3.1-8b/pp=2/partition=12,20/memory=10GiB,40GiB": (
        "configs/llama-3.1-8b",
        2,
        "12,20",
        None,
        [10 * GIB, 40 * GIB],
    ),
    "gemma-3-27b-text/pp=2/partition=22,40/H100": ("configs/gemma-3-27b-text", 2, "22,40", "H100", None),
    "qwen3-next-80b-a3b/pp=2/H200": ("configs/qwen3-next-80b-a3b", 2, None, "H200", None),
    "jamba-v0.1/pp=2/partition=15,17/H100": ("configs/jamba-v0.1", 2, "15,17", "H100", None),
}


def kvviz_command(rel: str, pp: int, partition: str | None, gpu: str) -> list[str]:
    """The kvviz command whose `stages[i].budget_bytes` are the workers' available memory (module docstring)."""
    cmd = [KVVIZ, "plan", "--hf-config", str(DATA / rel), "--gpu", gpu, "-pp", str(pp)]
    cmd += ["--max-model-len", str(MAX_MODEL_LEN), "--json"]
    return cmd + (["--pp-layer-partition", partition] if partition else [])


def _case(name: str) -> dict:
    rel, pp, partition, gpu, memory = CASES[name]
    folder = (DATA / rel).resolve()
    how = "set by hand"
    if memory is None:
        cmd = kvviz_command(rel, pp, partition, gpu)
        plan = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
        memory = [s["budget_bytes"] for s in plan["stages"]]
        how = " ".join(c.replace(str(ROOT) + "/", "") for c in cmd)
    if partition:
        os.environ["VLLM_PP_LAYER_PARTITION"] = partition
    _h200_backends()
    o = {"pp": pp}
    workers = [_stage_specs(folder, o, stage) for stage in range(pp)]
    vllm_config = workers[-1][3]
    from vllm.config import set_current_vllm_config
    from vllm.v1.core import kv_cache_planning, kv_cache_utils
    from vllm.v1.core.single_type_kv_cache_manager import register_all_kvcache_specs

    specs = [w[0] for w in workers]
    with set_current_vllm_config(vllm_config):
        register_all_kvcache_specs(vllm_config)
        groups = kv_cache_planning.get_global_kv_cache_groups(vllm_config, specs)
        projected = [kv_cache_planning._project_kv_cache_groups_to_worker(groups, s) for s in specs]
        per_block = [kv_cache_planning._pool_bytes_per_block(vllm_config, g) for g in projected]
        configs = kv_cache_planning.get_kv_cache_configs(vllm_config, specs, list(memory), groups)
        sched = kv_cache_utils.generate_scheduler_kv_cache_config(configs)
    return {
        "config_path": rel + "/config.json",
        "options": {"pp": pp, "partition": partition, "gpu": gpu, "max_model_len": MAX_MODEL_LEN},
        "max_model_len": vllm_config.model_config.max_model_len,
        "available_memory": memory,
        "available_memory_from": how,
        "workers": [
            {
                "stage": i,
                "layer_range": list(w[1]),
                "num_cache_layers": len(w[0]),
                "group_layers": [len(g.layer_names) for g in projected[i]],
                "bytes_per_block": per_block[i],
                "num_blocks_alone": memory[i] // per_block[i],
                "num_blocks": configs[i].num_blocks,
            }
            for i, w in enumerate(workers)
        ],
        "global_groups": [len(g.layer_names) for g in groups],
        "scheduler": {
            "num_blocks": sched.num_blocks,
            "groups": [
                {
                    "kind": _kind(g.kv_cache_spec),
                    "spec_type": type(g.kv_cache_spec).__name__,
                    "block_size": g.kv_cache_spec.block_size,
                    "sliding_window": getattr(g.kv_cache_spec, "sliding_window", None),
                    "page_size_bytes": g.kv_cache_spec.page_size_bytes,
                    "num_layers": len(g.layer_names),
                }
                for g in sched.kv_cache_groups
            ],
        },
    }


def _case_main(name: str, out: Path) -> None:
    t0 = time.time()
    try:
        rec = _case(name)
    except Exception as e:  # recorded, never hidden
        rec = {"failure": [f"{type(e).__name__}: {e}", *traceback.format_exc().splitlines()[-8:]]}
    rec["elapsed_s"] = round(time.time() - t0, 1)
    out.write_text(json.dumps(rec))


def _header(version: str, cases: dict) -> dict:
    return {
        "vllm_version": version,
        "how": "scripts/vllm_reference_pp_replay.py (see its docstring and README.md)",
        "target_device": "NVIDIA H200 (SM90): attention backends as CudaPlatform picks them (vllm_reference_plans)",
        "available_memory_is": "each stage's worker's KV memory, as kvviz derives it on the GPU (the input)",
        "cases": cases,
    }


def main(argv=None) -> int:
    ns, done = case_arguments(argv, __doc__)
    if ns.case:
        _case_main(ns.case, Path(ns.out))
        return 0
    run_cases(__file__, ns, done, ns.only or list(CASES), _header)
    return 0


if __name__ == "__main__":
    sys.exit(main())
