"""vLLM 0.33's own plans with pipeline parallel (TP x PP, VLLM_PP_LAYER_PARTITION) and native CPU offload
(issue 32), made with vLLM's own code on CPU.

Runs ONLY in the throwaway venv (/root/vllm-ref, vllm==0.33.0, torch CPU); kvviz never imports it. It reuses
scripts/vllm_reference_plans.py's platform answers (`_h200_backends`: what CudaPlatform answers on an H200) and
record helpers. For each case (a config folder and the parallel / offload knobs):

1. `EngineArgs(model=DIR, dtype="bfloat16", max_model_len=min(32768, derived), max_num_batched_tokens=8192,
   tensor_parallel_size=TP, pipeline_parallel_size=PP, kv_offloading_size=GiB, kv_offloading_backend="native")
   .create_engine_config()` (VLLM_PP_LAYER_PARTITION set in the environment for a partition);
2. one worker per stage: vLLM's distributed state for world TP x PP at that stage's first rank (torch's fake
   process group stands in for gloo: no other process answers; the ranks are what ensure_model_parallel_
   initialized computes), the model's real `__init__` on the meta device (make_layers / get_pp_indices place
   only the stage's layers; the rest are PPMissingLayer), then each layer's own `get_kv_cache_spec` as
   GPUModelRunner collects them. Every TP rank of a stage registers the same specs (heads split evenly), so
   the stage's spec dict is given once per rank;
3. `get_global_kv_cache_groups` and `get_kv_cache_configs` with one spec dict per worker (stage x TP rank),
   `generate_scheduler_kv_cache_config`, `get_kv_cache_capacity` at max_num_batched_tokens 8192 and 2048; a
   ValueError (vLLM's start-up refusal) is recorded with its text;
4. with offload: `build_offloading_config(vllm_config, scheduler_config)` and `CPUOffloadingSpec(config)`, as
   OffloadingConnector.__init__ does on the scheduler side; CPUOffloadingSpec._uses_shared_region answers as
   on CUDA (True), set by hand, since this CPU platform would say False.

usage: VENV/bin/python scripts/vllm_reference_deploy.py --out cases.json [--only NAME ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from vllm_reference_plans import _h200_backends, _kind  # noqa: E402

GIB = 1 << 30
ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "vllm-0.33" / "deploy-more"
BUDGETS = {"2GiB": 2 * GIB, "8GiB": 8 * GIB, "40GiB": 40 * GIB}
MNBTS = (8192, 2048)

# name -> (config folder relative to DATA, options)
CASES = {
    # also in ../deploy/cases.json (real worker processes): a cross-check of this one-process method
    "llama-3.1-8b/pp=2": ("configs/llama-3.1-8b", {"pp": 2}),
    "llama-3.1-8b/pp=3": ("configs/llama-3.1-8b", {"pp": 3}),
    "llama-3.1-8b/pp=4": ("configs/llama-3.1-8b", {"pp": 4}),
    "llama-3.1-8b/tp=2,pp=2": ("configs/llama-3.1-8b", {"tp": 2, "pp": 2}),
    "llama-3.1-8b/pp=3/partition=4,20,8": ("configs/llama-3.1-8b", {"pp": 3, "partition": "4,20,8"}),
    "gpt-oss-120b/pp=4": ("configs/gpt-oss-120b", {"pp": 4}),
    "gpt-oss-120b/tp=2,pp=3": ("configs/gpt-oss-120b", {"tp": 2, "pp": 3}),
    "gemma-3-27b-text/pp=2": ("configs/gemma-3-27b-text", {"pp": 2}),
    "gemma-3-27b-text/pp=3/partition=30,20,12": ("configs/gemma-3-27b-text", {"pp": 3, "partition": "30,20,12"}),
    "deepseek-v2-lite/pp=3": ("configs/deepseek-v2-lite", {"pp": 3}),
    "deepseek-v2-lite/tp=2,pp=2": ("configs/deepseek-v2-lite", {"tp": 2, "pp": 2}),
    "deepseek-v3/pp=4": ("configs/deepseek-v3", {"pp": 4}),
    "nemotron-nano-9b-v2/pp=3": ("configs/nemotron-nano-9b-v2", {"pp": 3}),
    "nemotron-nano-9b-v2/tp=2,pp=2": ("configs/nemotron-nano-9b-v2", {"tp": 2, "pp": 2}),
    "jamba-v0.1/pp=4": ("configs/jamba-v0.1", {"pp": 4}),
    "jamba-v0.1/pp=2/partition=6,26": ("configs/jamba-v0.1", {"pp": 2, "partition": "6,26"}),
    "qwen3-next-80b-a3b/pp=4": ("configs/qwen3-next-80b-a3b", {"pp": 4}),
    "qwen3-next-80b-a3b/pp=3/partition=2,30,16": ("configs/qwen3-next-80b-a3b", {"pp": 3, "partition": "2,30,16"}),
    # CPU offload (GiB of host memory, all ranks together)
    "gemma-3-27b-text/kv-offloading-size=16": ("configs/gemma-3-27b-text", {"offload": 16}),
    "gpt-oss-120b/tp=2/kv-offloading-size=32": ("configs/gpt-oss-120b", {"tp": 2, "offload": 32}),
    "deepseek-v2-lite/kv-offloading-size=16": ("configs/deepseek-v2-lite", {"offload": 16}),
    "deepseek-v2-lite/tp=2/kv-offloading-size=16": ("configs/deepseek-v2-lite", {"tp": 2, "offload": 16}),
    "deepseek-v3/tp=4/kv-offloading-size=100": ("configs/deepseek-v3", {"tp": 4, "offload": 100}),
    "nemotron-nano-9b-v2/kv-offloading-size=16": ("configs/nemotron-nano-9b-v2", {"offload": 16}),
    "jamba-v0.1/kv-offloading-size=16": ("configs/jamba-v0.1", {"offload": 16}),
    "qwen3-next-80b-a3b/kv-offloading-size=100": ("configs/qwen3-next-80b-a3b", {"offload": 100}),
    # offload with pipeline parallel: vLLM 0.33 has no refusal for it (config.py only keeps the replicated
    # layout to PP 1); the scheduler's connector sizes chunks from the scheduler config (stage 0's tensors)
    "llama-3.1-8b/pp=2/kv-offloading-size=16": ("configs/llama-3.1-8b", {"pp": 2, "offload": 16}),
    "gpt-oss-120b/pp=3/kv-offloading-size=16": ("configs/gpt-oss-120b", {"pp": 3, "offload": 16}),
    "jamba-v0.1/pp=2/partition=6,26/kv-offloading-size=16": (
        "configs/jamba-v0.1",
        {"pp": 2, "partition": "6,26", "offload": 16},
    ),
    "deepseek-v2-lite/tp=2,pp=2/kv-offloading-size=16": ("configs/deepseek-v2-lite", {"tp": 2, "pp": 2, "offload": 16}),
    # data parallel / attention DP / DCP on the same GPUs (an MLA model): each DP rank is its own engine
    "deepseek-v2-lite/tp=1": ("configs/deepseek-v2-lite", {}),
    "deepseek-v2-lite/tp=2": ("configs/deepseek-v2-lite", {"tp": 2}),
    "deepseek-v2-lite/dp=2,ep": ("configs/deepseek-v2-lite", {"dp": 2, "ep": True}),
    "deepseek-v3/tp=1": ("configs/deepseek-v3", {}),
    "deepseek-v3/tp=8": ("configs/deepseek-v3", {"tp": 8}),
    "deepseek-v3/tp=8,dcp=8": ("configs/deepseek-v3", {"tp": 8, "dcp": 8}),
    "deepseek-v3/dp=8,ep": ("configs/deepseek-v3", {"dp": 8, "ep": True}),
    "llama-3.1-8b/tp=2,dp=2": ("configs/llama-3.1-8b", {"tp": 2, "dp": 2}),
    # refused by vLLM: a partition that does not sum to the layers
    "llama-3.1-8b/pp=2/partition=12,21": ("configs/llama-3.1-8b", {"pp": 2, "partition": "12,21"}),
}


def _fake_distributed(world: int, rank: int, tp: int, pp: int, dcp: int = 1) -> None:
    """vLLM's process groups for `world` ranks seen from `rank`, with torch's fake backend under them (one process
    stands for one worker; nothing is communicated at construction)."""
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore
    from vllm.distributed import parallel_state

    if dist.is_initialized():
        parallel_state.destroy_model_parallel()
        parallel_state.destroy_distributed_environment()
        if dist.is_initialized():
            dist.destroy_process_group()
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world)
    orig = getattr(dist, "_kvviz_orig_new_group", dist.new_group)
    dist._kvviz_orig_new_group = orig

    def new_group(ranks=None, backend=None, **kw):
        return orig(ranks, backend="fake", **kw)

    dist.new_group = new_group
    # the TP group's shared-memory broadcaster waits for the other ranks' processes (none here); it carries
    # scheduler messages at run time, nothing the planner reads
    from vllm.distributed.device_communicators.shm_broadcast import MessageQueue

    MessageQueue.create_from_process_group = staticmethod(lambda *a, **k: None)
    parallel_state.init_distributed_environment(
        world_size=world, rank=rank, local_rank=rank % tp, backend="fake", distributed_init_method="env://"
    )
    parallel_state.ensure_model_parallel_initialized(tp, pp, decode_context_model_parallel_size=dcp)


def _engine_config(folder: Path, o: dict):
    from vllm.engine.arg_utils import EngineArgs

    raw = json.loads((folder / "config.json").read_text())
    remote = "auto_map" in raw
    probe = EngineArgs(
        model=str(folder), dtype="bfloat16", skip_tokenizer_init=True, trust_remote_code=remote
    ).create_model_config()
    kw = {}
    if "offload" in o:
        kw = {"kv_offloading_size": float(o["offload"]), "kv_offloading_backend": "native"}
    args = dict(
        model=str(folder),
        dtype="bfloat16",
        skip_tokenizer_init=True,
        max_model_len=min(32768, probe.max_model_len),
        max_num_batched_tokens=MNBTS[0],
        enforce_eager=True,
        trust_remote_code=remote,
        tensor_parallel_size=o.get("tp", 1),
        pipeline_parallel_size=o.get("pp", 1),
        decode_context_parallel_size=o.get("dcp", 1),
        data_parallel_size=o.get("dp", 1),
        enable_expert_parallel=o.get("ep", False),
        distributed_executor_backend="mp",
        **kw,
    )
    args.update(o.get("engine", {}))  # a caller's own EngineArgs (scripts/vllm_reference_replay.py at PP)
    return EngineArgs(**args).create_engine_config(), probe.max_model_len


def _stage_specs(folder: Path, o: dict, stage: int):
    """The spec dict one worker of `stage` registers (its first TP rank), its layer range, backends."""
    import torch
    from vllm.config import set_current_vllm_config
    from vllm.config.vllm import get_layers_from_vllm_config
    from vllm.distributed import get_pp_group
    from vllm.distributed.utils import get_pp_indices
    from vllm.model_executor.layers.attention import Attention
    from vllm.model_executor.layers.attention_layer_base import AttentionLayerBase
    from vllm.model_executor.model_loader.utils import initialize_model
    from vllm.platforms import current_platform
    from vllm.utils.torch_utils import set_default_torch_dtype
    from vllm.v1.kv_cache_interface import AttentionSpec
    from vllm.v1.worker.utils import customize_attention_spec

    tp, pp = o.get("tp", 1), o.get("pp", 1)
    # FA3 on SM90 supports MLA (fa_utils.flash_attn_supports_mla on an H200); this CPU has no kernel to ask
    import vllm.v1.attention.backends.mla.flashattn_mla as flashattn_mla

    flashattn_mla.flash_attn_supports_mla = lambda: True
    vllm_config, _ = _engine_config(folder, o)
    with set_current_vllm_config(vllm_config):
        # the world across DP (DP rank 0's engine): ParallelConfig.world_size_across_dp ranks
        _fake_distributed(o.get("dp", 1) * tp * pp, stage * tp, tp, pp, o.get("dcp", 1))
        assert get_pp_group().rank_in_group == stage
        from vllm.v1.worker.workspace import init_workspace_manager

        torch.accelerator.empty_cache = lambda: None
        init_workspace_manager(torch.device("meta"))
        with set_default_torch_dtype(vllm_config.model_config.dtype), torch.device("meta"):
            initialize_model(vllm_config=vllm_config)
        current_platform.update_block_size_for_backend(vllm_config)
        specs, backends = {}, set()
        for name, layer in get_layers_from_vllm_config(vllm_config, AttentionLayerBase).items():
            if isinstance(layer, Attention) and layer.kv_sharing_target_layer_name:
                continue
            if spec := layer.get_kv_cache_spec(vllm_config):
                backend = layer.get_attn_backend()
                backends.add(backend.get_name())
                if isinstance(spec, AttentionSpec):
                    spec = customize_attention_spec(backend, spec)
                specs[name] = spec
        n = vllm_config.model_config.hf_text_config.num_hidden_layers
        rng = get_pp_indices(n, stage, pp)
        # EngineCore._initialize_kv_caches: the layout from the worker's backends (as vllm_reference_plans)
        from vllm.distributed.kv_transfer.kv_connector.utils import get_current_attn_backends
        from vllm.v1.attention.backends.utils import (
            get_supported_kv_cache_layouts,
            record_kv_cache_layout,
            resolve_kv_cache_layout,
        )

        supported = [[x.name for x in get_supported_kv_cache_layouts(get_current_attn_backends(vllm_config))]]
        layout = resolve_kv_cache_layout(vllm_config, supported, list(specs.values()))
        record_kv_cache_layout(vllm_config.cache_config, layout.name)
    return specs, rng, sorted(backends), vllm_config


def _offload(vllm_config, sched) -> dict:
    from vllm.distributed.kv_transfer.kv_connector.v1.offloading.config import build_offloading_config
    from vllm.v1.kv_offload.cpu.spec import CPUOffloadingSpec

    CPUOffloadingSpec._uses_shared_region = lambda self: True  # CudaPlatform: is_cuda_alike and not ROCm
    cfg = build_offloading_config(vllm_config, sched)
    spec = CPUOffloadingSpec(cfg)
    return {
        "cpu_bytes_to_use": int(vllm_config.kv_transfer_config.kv_connector_extra_config["cpu_bytes_to_use"]),
        "world_size": cfg.parallel.world_size,
        "worker_kv_bytes_per_block": cfg.worker_kv_bytes_per_block,
        "replicated_layout": cfg.replicated_layout,
        "blocks_per_chunk": cfg.cache.blocks_per_chunk,
        "tokens_per_hash": cfg.cache.tokens_per_hash,
        "kv_bytes_per_chunk": spec.kv_bytes_per_chunk,
        "cpu_page_size_per_worker": spec.cpu_page_size_per_worker,
        "num_chunks": spec.num_chunks,
        "groups": [
            {
                "group_id": g.group_id,
                "tokens_per_block": g.tokens_per_block,
                "tokens_per_chunk": g.tokens_per_block * cfg.cache.blocks_per_chunk,
                "sliding_window_size_in_chunks": g.sliding_window_size_in_chunks,
                "num_layers": len(g.layer_names),
            }
            for g in cfg.groups
        ],
    }


def _case(name: str) -> dict:
    rel, o = CASES[name]
    folder = (DATA / rel).resolve()
    if "partition" in o:
        os.environ["VLLM_PP_LAYER_PARTITION"] = o["partition"]
    tp, pp = o.get("tp", 1), o.get("pp", 1)
    _h200_backends()
    workers = []
    for stage in range(pp):  # each stage's worker, one after the other in this process (fresh config, groups)
        try:
            specs, rng, backends, vllm_config = _stage_specs(folder, o, stage)
        except Exception as e:  # vLLM's own refusal while a worker builds its stage
            return {"refused": {"where": f"stage {stage} worker", "error": f"{type(e).__name__}: {e}"}}
        workers.append({"specs": specs, "range": rng, "backends": backends})
    from vllm.config import set_current_vllm_config
    from vllm.v1.core import kv_cache_planning, kv_cache_utils
    from vllm.v1.core.single_type_kv_cache_manager import register_all_kvcache_specs

    # the last worker's config plans (its block size updated for the backend, the layout resolved), as
    # EngineCore does with the workers' answers; every stage's config is the same engine config
    derived = json.loads((folder / "config.json").read_text()).get("max_position_embeddings")
    per_worker = [w["specs"] for w in workers for _ in range(tp)]
    out = {
        "config_path": rel + "/config.json",
        "options": o,
        "settings": {
            "max_model_len": vllm_config.model_config.max_model_len,
            "max_position_embeddings": derived,
            "layout": vllm_config.cache_config.kv_cache_layout,
            "block_size": vllm_config.cache_config.block_size,
            "enable_prefix_caching": vllm_config.cache_config.enable_prefix_caching,
            "mamba_cache_mode": vllm_config.cache_config.mamba_cache_mode,
            "attention_backends": workers[0]["backends"],
            "max_concurrent_batches": vllm_config.max_concurrent_batches,
            "async_scheduling": vllm_config.scheduler_config.async_scheduling,
            "world_size": vllm_config.parallel_config.world_size,
            "world_size_across_dp": vllm_config.parallel_config.world_size_across_dp,
            "data_parallel_size": vllm_config.parallel_config.data_parallel_size,
            "workers_of_this_engine": len(per_worker),
            "kv_connector": getattr(vllm_config.kv_transfer_config, "kv_connector", None),
        },
    }
    with set_current_vllm_config(vllm_config):
        register_all_kvcache_specs(vllm_config)
        groups = kv_cache_planning.get_global_kv_cache_groups(vllm_config, per_worker)
        out["groups"] = [
            {
                "kind": _kind(g.kv_cache_spec),
                "spec_type": type(g.kv_cache_spec).__name__,
                "block_size": g.kv_cache_spec.block_size,
                "page_size_bytes": g.kv_cache_spec.page_size_bytes,
                "num_layers": len(g.layer_names),
            }
            for g in groups
        ]
        out["stages"] = [
            {
                "stage": i,
                "layer_range": list(w["range"]),
                "num_cache_layers": len(w["specs"]),
                "group_layers": [sum(n in w["specs"] for n in g.layer_names) for g in groups],
            }
            for i, w in enumerate(workers)
        ]
        budgets = {}
        for key, avail in BUDGETS.items():
            entry: dict = {"available_bytes_per_gpu": avail}
            try:
                configs = kv_cache_planning.get_kv_cache_configs(
                    vllm_config, per_worker, [avail] * len(per_worker), groups
                )
            except ValueError as e:
                entry["refused"] = f"ValueError: {e}"
                budgets[key] = entry
                continue
            sched = kv_cache_utils.generate_scheduler_kv_cache_config(configs)
            entry["num_blocks"] = sched.num_blocks
            entry["worker_tensor_bytes"] = [c.kv_cache_tensors[0].size for c in configs[::tp]]
            caps = {}
            for mnbt in MNBTS:
                vllm_config.scheduler_config.max_num_batched_tokens = mnbt
                tokens, conc = kv_cache_utils.get_kv_cache_capacity(vllm_config, sched)
                caps[f"max_num_batched_tokens={mnbt}"] = {"gpu_kv_cache_size_tokens": tokens, "max_concurrency": conc}
            vllm_config.scheduler_config.max_num_batched_tokens = MNBTS[0]
            entry["capacity"] = caps
            if vllm_config.kv_transfer_config is not None:
                entry["offload"] = _offload(vllm_config, sched)
            budgets[key] = entry
        out["budgets"] = budgets
    return out


def _case_main(name: str, out: Path) -> None:
    t0 = time.time()
    try:
        rec = _case(name)
    except Exception as e:  # vLLM's own refusal, recorded
        rec = {
            "refused": {
                "where": "engine",
                "error": f"{type(e).__name__}: {e}",
                "tail": traceback.format_exc().splitlines()[-8:],
            }
        }
    rec.setdefault("options", CASES[name][1])
    rec.setdefault("config_path", CASES[name][0] + "/config.json")
    rec["elapsed_s"] = round(time.time() - t0, 1)
    out.write_text(json.dumps(rec))


def case_arguments(argv, doc: str):
    """The reference scripts' command line (this one's and scripts/vllm_reference_pp_params.py's): --out FILE,
    --only CASE ..., and the hidden --case NAME a subprocess runs; vLLM's log kept to warnings. (namespace, the
    cases already in --out)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--case", default=None, help=argparse.SUPPRESS)
    ns = ap.parse_args(argv)
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    path = Path(ns.out)
    return ns, (json.loads(path.read_text())["cases"] if path.exists() and not ns.case else {})


def run_cases(script: str, ns, done: dict, names, header) -> None:
    """Each case of `names` in a fresh interpreter (`script --case NAME`: one vLLM engine config a process), its
    record (or its failure) kept in `done`, and the file at ns.out rewritten after each with `header(version,
    done)`."""
    import vllm

    path = Path(ns.out)
    for name in names:
        with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
            proc = subprocess.run(
                [sys.executable, script, "--case", name, "--out", tmp.name], capture_output=True, text=True
            )
            try:
                done[name] = json.loads(Path(tmp.name).read_text())
            except ValueError:
                done[name] = {"failure": proc.stderr.strip().splitlines()[-8:]}
        print(
            name,
            "->",
            "refused" if "refused" in done[name] else ("FAILED" if "failure" in done[name] else "ok"),
            file=sys.stderr,
            flush=True,
        )
        path.write_text(json.dumps(header(vllm.__version__, done), indent=1, sort_keys=True) + "\n")


def main(argv=None) -> int:
    ns, done = case_arguments(argv, __doc__)
    if ns.case:
        _case_main(ns.case, Path(ns.out))
        return 0
    run_cases(__file__, ns, done, ns.only or list(CASES), _header)
    return 0


def _header(version: str, cases: dict) -> dict:
    return {
        "vllm_version": version,
        "how": "scripts/vllm_reference_deploy.py (see its docstring and README.md)",
        "target_device": "NVIDIA H200 (SM90): attention backends as CudaPlatform picks them (vllm_reference_plans)",
        "budgets": BUDGETS,
        "budgets_are": "KV-cache memory available on EACH GPU (worker)",
        "max_model_len": "min(32768, the model's derived maximum)",
        "max_num_batched_tokens": list(MNBTS),
        "cases": cases,
    }


if __name__ == "__main__":
    sys.exit(main())
