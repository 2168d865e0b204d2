"""vLLM 0.33's own KV cache plans for config folders, made with vLLM's own code on CPU (issue 27).

Runs ONLY in the throwaway venv of ../shared/tools/README.md (vllm==0.33.0, torch CPU); kvviz never
imports it. For each folder holding a config.json:

1. `EngineArgs(model=DIR, dtype="bfloat16", skip_tokenizer_init=True, max_model_len=min(32768,
   derived), max_num_batched_tokens=8192).create_engine_config()`: vLLM's own config path (prefix
   caching, hybrid page alignment, platform hooks) with the current platform made a CudaPlatform
   that reports an H200 (SM90), so the attention backend is what CudaPlatform picks there (its
   priority list, each backend's own validate_configuration);
2. vLLM's distributed state, single rank, gloo on CPU;
3. the model class from vLLM's registry built with its real `__init__` on the meta device (no
   weights), then `Platform.update_block_size_for_backend` as the executor calls it after loading;
4. every layer's own `get_kv_cache_spec` as GPUModelRunner.get_kv_cache_spec collects them
   (KV-sharing layers skipped, `customize_attention_spec`), then `get_global_kv_cache_groups`,
   `get_kv_cache_configs`, `generate_scheduler_kv_cache_config` and `get_kv_cache_capacity` at 8
   and 40 GiB a GPU, as EngineCore._initialize_kv_caches does.

Writes one JSON entry per folder in the shape of tests/data/vllm-0.33/registry/plans.json `cases`.

usage: VENV/bin/python scripts/vllm_reference_plans.py --out plans.json DIR [DIR ...]
       (--label-root R: config_path is written relative to R)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import traceback
from pathlib import Path

_HIDE_TORCHVISION = """
import importlib.util, sys
_find_spec = importlib.util.find_spec
importlib.util.find_spec = lambda name, *a, **k: None if name == "torchvision" else _find_spec(name, *a, **k)
sys.modules["torchvision"] = None
"""


def _hide_unloadable_torchvision() -> None:
    """A torchvision whose C operators do not load against the venv's torch (a build for another
    torch) breaks `import transformers.image_utils`, which vLLM's config module imports. vLLM's planner
    never uses torchvision: where it cannot be imported (checked in a child process), it is hidden as
    if not installed (transformers' is_torchvision_available is False) in this process and, through a
    sitecustomize on PYTHONPATH, in every process vLLM starts (its registry inspection among them)."""
    import subprocess
    import tempfile

    if os.environ.get("KVVIZ_REF_TORCHVISION") is None:
        probe = subprocess.run([sys.executable, "-c", "import torchvision"], capture_output=True)
        os.environ["KVVIZ_REF_TORCHVISION"] = "ok" if probe.returncode == 0 else "hidden"
        if probe.returncode != 0:
            shim = tempfile.mkdtemp(prefix="vllm-ref-shim-")
            Path(shim, "sitecustomize.py").write_text(_HIDE_TORCHVISION)
            os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (shim, os.environ.get("PYTHONPATH")) if p)
    if os.environ["KVVIZ_REF_TORCHVISION"] == "hidden":
        exec(_HIDE_TORCHVISION, {})


GIB = 1 << 30
BUDGETS = {"8GiB": 8 * GIB, "40GiB": 40 * GIB}
MNBT = 8192
SPEC_FIELDS = (
    "block_size",
    "page_size_bytes",
    "real_page_size_bytes",
    "page_size_padded",
    "num_kv_heads",
    "head_size",
    "head_size_v",
    "sliding_window",
    "attention_chunk_size",
    "dtype",
    "shapes",
    "dtypes",
    "mamba_type",
    "cache_dtype_str",
)


def _h200_backends():
    """vLLM resolves its UnspecifiedPlatform here (no GPU), which is enough for the planner (pure
    Python). The one answer set by hand is the attention backend: what CudaPlatform picks on an H200
    (SM90) at the head of its priority list (platforms/cuda.py _get_backend_priorities): FLASH_ATTN
    for attention, FLASH_ATTN_MLA for MLA, FLASHMLA_SPARSE for sparse MLA. Every request is recorded."""
    from vllm.platforms import current_platform
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    def pick(selected_backend, attn_selector_config, num_heads=None):
        c = attn_selector_config
        if c.use_mla and c.use_sparse:
            enum = AttentionBackendEnum.FLASHMLA_SPARSE  # takes "fp8" as its fp8_ds_mla alias
        elif c.use_mla:
            # SM90's MLA list starts FLASH_ATTN_MLA, FLASHMLA: the first whose
            # supported_kv_cache_dtypes holds the cache dtype (FlashAttnMLA has no fp8; FlashMLA has)
            enum = next(
                e
                for e in (AttentionBackendEnum.FLASH_ATTN_MLA, AttentionBackendEnum.FLASHMLA)
                if c.kv_cache_dtype in e.get_class().supported_kv_cache_dtypes
            )
        else:
            # FA3 on SM90 takes fp8 / fp8_e4m3 (fa_utils.flash_attn_supports_kv_cache_dtype, head_size <= 256)
            enum = AttentionBackendEnum.FLASH_ATTN
        path = enum.get_path()
        BACKEND_REQUESTS.append({"request": {k: str(v) for k, v in c._asdict().items()}, "picked": enum.name})
        return path

    type(current_platform).get_attn_backend_cls = staticmethod(pick)
    # EngineArgs builds DeviceConfig(device=current_platform.device_type); the unspecified
    # platform has none, and the model is built on the meta device anyway
    type(current_platform).device_type = "cpu"
    # CudaPlatform's answers that change a plan (platforms/cuda.py): the hybrid KV cache manager
    # is supported (else VllmConfig disables it and every layer becomes full attention), SM90,
    # fp8 supported
    from vllm.platforms.interface import DeviceCapability

    type(current_platform).support_hybrid_kv_cache = classmethod(lambda cls: True)
    type(current_platform).get_device_capability = classmethod(lambda cls, device_id=0: DeviceCapability(9, 0))
    type(current_platform).supports_fp8 = classmethod(lambda cls: True)
    # fa_utils binds the FlashAttention kernels only on CUDA; the MLA backend's module imports
    # those names (never called by the planner)
    import vllm.v1.attention.backends.fa_utils as fa_utils
    import vllm.v1.attention.backends.flash_attn as flash_attn

    flash_attn.flash_attn_supports_sinks = lambda: True  # FA3 on SM90 (fa_utils.flash_attn_supports_sinks)

    def fa_version(requires_alibi=False, head_size=None, **kwargs):
        """fa_utils.get_flash_attn_version on SM90 with FA3 installed (it imports vllm_flash_attn, CUDA only):
        3, ALiBi falls back to 2; the FA3 -> FA4 upgrade of a head over 256 depends on FA4 being
        installed, which is not modelled here (refused rather than guessed). flash_attn_supports_kv_cache_dtype
        asks it: FA3 on SM90 takes an fp8 KV cache (--kv-cache-dtype fp8)."""
        if requires_alibi:
            return 2
        if head_size is not None and head_size > 256:
            raise NotImplementedError(f"head_size {head_size} > 256: FA3 -> FA4 upgrade not modelled")
        return 3

    fa_utils.get_flash_attn_version = fa_version
    flash_attn.get_flash_attn_version = fa_version
    # the MoE kernel (no KV cache): CudaPlatform's list on SM90 (fused_moe/oracle/unquantized.py
    # _get_priority_backends, FlashInfer moved behind Triton on Hopper)
    from vllm.model_executor.layers.fused_moe.oracle import unquantized

    M = unquantized.UnquantizedMoeBackend
    unquantized._get_priority_backends = lambda moe_config: [
        M.TRITON,
        M.BATCHED_TRITON,
        M.FLASHINFER_TRTLLM,
        M.FLASHINFER_CUTLASS,
    ]
    # the MoE and fp8 GEMM kernels hold no KV cache; CUDA's choices are made without asking the
    # kernels' CUDA-only availability checks
    from vllm.model_executor.layers.fused_moe import unquantized_fused_moe_method

    triton_experts = unquantized.backend_to_kernel_cls(M.TRITON)[0]
    unquantized_fused_moe_method.select_unquantized_moe_backend = lambda moe_config: (M.TRITON, triton_experts)
    import vllm.model_executor.kernels.linear as linear_kernels
    from vllm.platforms.interface import PlatformEnum

    for table in [v for v in vars(linear_kernels).values() if isinstance(v, dict) and PlatformEnum.CUDA in v]:
        table[current_platform._enum] = table[PlatformEnum.CUDA]
    linear_kernels.is_supported_and_can_implement_kernel = lambda kernel, config, capability=None: (True, None)
    # the GDN prefill kernel: on SM90 CUDA, "auto" (and "flashinfer") resolve to FlashInfer's
    # (model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py _resolve_gdn_prefill_backend), whose
    # mid-prefill states make the GDN layers export prefill checkpoints in align mode
    # (get_prefill_checkpoint_alignment, num_prefill_checkpoint_blocks=1) and align the hybrid block
    # size to FLASHINFER_GDN_CHECKPOINT_ALIGNMENT (platforms/interface.py _align_hybrid_block_size);
    # off CUDA the same function answers Triton and both are lost
    from vllm.model_executor.layers.mamba.gdn import qwen_gdn_linear_attn as gdn

    real_gdn = gdn._resolve_gdn_prefill_backend

    def gdn_on_sm90(vllm_config):
        requested, active = real_gdn(vllm_config)
        return (requested, "flashinfer") if requested in ("auto", "flashinfer") else (requested, active)

    gdn._resolve_gdn_prefill_backend = gdn_on_sm90
    for kernel in ("flash_attn_varlen_func", "get_scheduler_metadata", "compile_flash_attn_varlen_func_from_specs"):
        if not hasattr(fa_utils, kernel):
            setattr(fa_utils, kernel, None)
    # FlashAttnMLAImpl.__init__ asserts FA3's MLA kernel is there (fa_utils.flash_attn_supports_mla: SM90 with
    # FA3); the spec and page do not depend on it
    import vllm.v1.attention.backends.mla.flashattn_mla as flashattn_mla

    flashattn_mla.flash_attn_supports_mla = lambda: True
    # MLA's prefill kernel (no KV cache): FlashAttention on SM90, whose availability is its CUDA build
    # (mla/prefill/flash_attn.py FlashAttnPrefillBackend.is_available)
    import vllm.v1.attention.backends.mla.prefill.flash_attn as mla_prefill_fa

    mla_prefill_fa.FlashAttnPrefillBackend.is_available = classmethod(lambda cls: True)
    if mla_prefill_fa.flash_attn_varlen_func is None:  # the kernel, never called by the planner
        mla_prefill_fa.flash_attn_varlen_func = lambda *a, **k: None
    if hasattr(mla_prefill_fa, "is_flash_attn_varlen_func_available"):  # the check select_mla_prefill_backend asks
        mla_prefill_fa.is_flash_attn_varlen_func_available = lambda: True
    return current_platform


BACKEND_REQUESTS: list[dict] = []


def _spec_dict(spec) -> dict:
    out = {"class": type(spec).__name__}
    for k in SPEC_FIELDS:
        if hasattr(spec, k):
            v = getattr(spec, k)
            if k in ("dtype", "dtypes"):
                v = (
                    [str(x).replace("torch.", "") for x in v]
                    if isinstance(v, (list, tuple))
                    else str(v).replace("torch.", "")
                )
            elif k == "shapes":
                v = [list(s) for s in v]
            elif hasattr(v, "value"):
                v = v.value
            out[k] = v
    return out


def _kind(spec) -> str:
    """The group's kind as tests/data/vllm-0.33/registry/plans.json names it."""
    name = type(spec).__name__
    if "Mamba" in name:
        return "state"
    if "MLA" in name:
        return "mla"
    if getattr(spec, "sliding_window", None):
        return "sliding_attention"
    if getattr(spec, "attention_chunk_size", None):
        return "chunked_attention"
    return "full_attention"


_DIST = []


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _distributed_once(world: int = 1, rank: int = 0, port: int | None = None) -> None:
    """vLLM's process group on CPU (gloo), made once: `world` processes, one per tensor-parallel rank
    (../shared/tools/README.md step 2), each calling this with its own rank and the same port."""
    from vllm.distributed import ensure_model_parallel_initialized, init_distributed_environment

    if not _DIST:
        init_distributed_environment(
            world_size=world,
            rank=rank,
            local_rank=rank,
            backend="gloo",
            distributed_init_method=f"tcp://127.0.0.1:{port or _free_port()}",
        )
        ensure_model_parallel_initialized(world, 1)
        _DIST.append(True)


@contextlib.contextmanager
def vllm_model(
    folder: Path, max_model_len: int | None = None, *, rank: int = 0, port: int | None = None, **engine_kwargs
):
    """vLLM's own config and KV cache specs for a config folder (shared by this script and
    scripts/vllm_reference_replay.py): `EngineArgs(...).create_engine_config()` (max_model_len
    min(32768, derived) unless given; `engine_kwargs` go to EngineArgs), the model built with its real
    `__init__` on the meta device, `update_block_size_for_backend`, and every layer's own
    `get_kv_cache_spec` as GPUModelRunner.get_kv_cache_spec collects them. Yields a namespace (raw,
    derived, vllm_config, model_cls, arch, specs, shared, backends) inside `set_current_vllm_config`."""
    import types

    import torch
    from vllm.config import set_current_vllm_config
    from vllm.config.vllm import get_layers_from_vllm_config
    from vllm.engine.arg_utils import EngineArgs
    from vllm.model_executor.layers.attention import Attention
    from vllm.model_executor.layers.attention_layer_base import AttentionLayerBase
    from vllm.model_executor.model_loader.utils import get_model_architecture, initialize_model
    from vllm.platforms import current_platform
    from vllm.utils.torch_utils import set_default_torch_dtype
    from vllm.v1.kv_cache_interface import AttentionSpec
    from vllm.v1.worker.utils import customize_attention_spec

    raw = json.loads((folder / "config.json").read_text())
    # a custom-code config (no transformers class) is read as vLLM reads it with --trust-remote-code:
    # the folder's own configuration module named by config.json's auto_map (written beside the
    # reference config, holding only the keys the vLLM model file reads). A transcribed hub config
    # whose auto_map names a module not kept beside it (the folder has only config.json) is read
    # without remote code, by transformers' own class for its model_type, as before auto_map support
    auto_config = raw.get("auto_map", {}).get("AutoConfig", "")
    remote = bool(auto_config) and (folder / (auto_config.rsplit(".", 1)[0] + ".py")).is_file()
    probe = EngineArgs(
        model=str(folder), dtype="bfloat16", skip_tokenizer_init=True, trust_remote_code=remote
    ).create_model_config()  # max_model_len is derived from the config alone (no parallel size in it)
    derived = probe.max_model_len
    engine_kwargs.setdefault("max_num_batched_tokens", MNBT)
    args = EngineArgs(
        model=str(folder),
        dtype="bfloat16",
        skip_tokenizer_init=True,
        max_model_len=min(32768, derived) if max_model_len is None else max_model_len,
        enforce_eager=True,
        trust_remote_code=remote,
        **engine_kwargs,
    )
    vllm_config = args.create_engine_config()
    model_config = vllm_config.model_config
    with set_current_vllm_config(vllm_config):
        _distributed_once(vllm_config.parallel_config.tensor_parallel_size, rank, port)
        from vllm.v1.worker.workspace import init_workspace_manager

        torch.accelerator.empty_cache = lambda: None  # no accelerator here; the workspace is on meta
        init_workspace_manager(torch.device("meta"))  # the worker's (gpu_worker.init_device); sparse MLA asks it
        with set_default_torch_dtype(model_config.dtype), torch.device("meta"):
            model_cls, arch = get_model_architecture(model_config)
            initialize_model(vllm_config=vllm_config)
        current_platform.update_block_size_for_backend(vllm_config)
        specs = {}
        shared = {}
        backends = set()
        for name, layer in get_layers_from_vllm_config(vllm_config, AttentionLayerBase).items():
            if isinstance(layer, Attention) and (tgt := layer.kv_sharing_target_layer_name):
                shared[name] = tgt
                continue
            if spec := layer.get_kv_cache_spec(vllm_config):
                backend = layer.get_attn_backend()
                backends.add(f"{backend.get_name()}:{backend.__name__}")
                if isinstance(spec, AttentionSpec):
                    spec = customize_attention_spec(backend, spec)
                specs[name] = spec
        yield types.SimpleNamespace(
            raw=raw,
            derived=derived,
            vllm_config=vllm_config,
            model_cls=model_cls,
            arch=arch,
            specs=specs,
            shared=shared,
            backends=backends,
        )


def plan_one(
    folder: Path, label: str, tp: int = 1, rank: int = 0, port: int | None = None, kv_cache_dtype: str = "auto"
) -> dict | None:
    """One rank's part of the plan. Every rank builds its own model and collects its own layers'
    specs (GPUModelRunner.get_kv_cache_spec on each worker); the specs of all ranks are gathered
    (the executor's get_kv_cache_specs, one dict per worker) and rank 0 plans them with one budget
    per worker, as EngineCore._initialize_kv_caches does. Ranks other than 0 return None."""
    from vllm.distributed.kv_transfer.kv_connector.utils import get_current_attn_backends
    from vllm.v1.attention.backends.utils import (
        get_supported_kv_cache_layouts,
        record_kv_cache_layout,
        resolve_kv_cache_layout,
    )
    from vllm.v1.core import kv_cache_planning, kv_cache_utils
    from vllm.v1.core.single_type_kv_cache_manager import register_all_kvcache_specs

    parallel = {
        "tensor_parallel_size": tp,
        "kv_cache_dtype": kv_cache_dtype,
        # one process per rank is started by this script itself (the gloo group), as the
        # multiprocessing executor starts one worker per rank
        "distributed_executor_backend": "mp" if tp > 1 else None,
    }
    with vllm_model(folder, rank=rank, port=port, **parallel) as m:
        raw, derived, vllm_config, specs, shared, backends = (
            m.raw,
            m.derived,
            m.vllm_config,
            m.specs,
            m.shared,
            m.backends,
        )
        model_cls, arch, model_config = m.model_cls, m.arch, vllm_config.model_config
        register_all_kvcache_specs(vllm_config)
        # the executor's get_kv_cache_specs: one dict of specs per worker, gathered on rank 0
        per_worker = [specs]
        if tp > 1:
            import torch.distributed as dist
            from vllm.distributed.parallel_state import get_world_group

            per_worker = [None] * tp
            dist.all_gather_object(per_worker, (specs, sorted(backends), shared), group=get_world_group().cpu_group)
            if rank != 0:
                return None
            per_worker, _, _ = zip(*per_worker, strict=True)
            per_worker = list(per_worker)
            # the case records rank 0's layers; a rank whose layers differ would be a different plan
            assert all(list(w) == list(specs) for w in per_worker), "ranks hold different layers"
        # EngineCore._initialize_kv_caches: the layout from the worker's backends, then the groups
        supported = [[x.name for x in get_supported_kv_cache_layouts(get_current_attn_backends(vllm_config))]]
        layout = resolve_kv_cache_layout(vllm_config, supported, list(specs.values()))
        record_kv_cache_layout(vllm_config.cache_config, layout.name)
        groups = kv_cache_planning.get_global_kv_cache_groups(vllm_config, per_worker)
        budgets = {}
        sched = None
        for label_b, avail in BUDGETS.items():
            entry = {"available_bytes_per_gpu": avail}
            try:
                configs = kv_cache_planning.get_kv_cache_configs(vllm_config, per_worker, [avail] * tp, groups)
                sched = kv_cache_utils.generate_scheduler_kv_cache_config(configs)
                tokens, conc = kv_cache_utils.get_kv_cache_capacity(vllm_config, sched)
                per_group = [
                    -(-g.kv_cache_spec.max_memory_usage_bytes(vllm_config) // g.kv_cache_spec.page_size_bytes)
                    for g in sched.kv_cache_groups
                ]
                entry["num_blocks"] = sched.num_blocks
                # where each KVCacheTensor places its layers in the backing allocation (offset, strides
                # depend on num_blocks in a layer-outer layout); the layers are recorded once, below
                entry["kv_cache_tensors"] = [
                    {"offset": t.offset, "layer_stride": t.layer_stride, "block_stride": t.block_stride}
                    for t in sched.kv_cache_tensors
                ]
                entry["capacity"] = {
                    f"max_num_batched_tokens={MNBT}": {
                        "blocks_per_request": sum(per_group),
                        "blocks_per_request_per_group": per_group,
                        "gpu_kv_cache_size_tokens": tokens,
                        "max_concurrency": conc,
                    }
                }
            except ValueError as e:
                entry["error"] = "ValueError"
                entry["error_text"] = f"ValueError: {e}"
            budgets[label_b] = entry
        out_groups = []
        for g in groups:
            # each layer's spec as its group holds it: after get_kv_cache_groups unified the pages (a
            # sliding layer's block scaled up to the full layers' page), or inside UniformTypeKVCacheSpecs
            per_layer = getattr(g.kv_cache_spec, "kv_cache_specs", None)
            layer_specs = [per_layer[n] if per_layer else g.kv_cache_spec for n in g.layer_names]
            grouped = dict(zip(g.layer_names, layer_specs))  # the pages the pool holds
            distinct = [
                json.loads(s) for s in dict.fromkeys(json.dumps(_spec_dict(x), sort_keys=True) for x in layer_specs)
            ]
            out_groups.append(
                {
                    "kind": _kind(layer_specs[0]),
                    "spec_type": type(g.kv_cache_spec).__name__,
                    "block_size": g.kv_cache_spec.block_size,
                    "page_size_bytes": sorted({grouped[n].page_size_bytes for n in g.layer_names}),
                    "specs": distinct,
                    "layer_names": list(g.layer_names),
                    "kv_shared_by": {k: v for k, v in shared.items() if v in g.layer_names},
                }
            )
        bytes_per_block = None
        if sched is not None:
            # the pool's bytes per block id: every KVCacheTensor places its layers in ONE backing
            # allocation of `size` bytes (`offset` is where its first layer starts inside it, not a
            # second allocation): v1/kv_cache_interface.py KVCacheTensor, v1/worker/utils.py
            # allocate_kv_cache ("KV cache tensors must share one backing allocation"), sized
            # bytes_per_block * num_blocks by kv_cache_planning.get_kv_cache_config_from_groups
            sizes = {t.size for t in sched.kv_cache_tensors}
            assert len(sizes) == 1, sizes
            bytes_per_block = sizes.pop() // sched.num_blocks
        cc = vllm_config.cache_config
        return {
            "architecture": arch,
            "model_class": f"{model_cls.__module__}.{model_cls.__qualname__}",
            "model_type": raw.get("model_type"),
            "config_path": label,
            "settings": {
                "attention_backends": sorted(backends),
                "block_size": cc.block_size,
                "cache_config.sliding_window": cc.sliding_window,
                "cache_dtype": cc.cache_dtype,
                "derived_max_model_len": derived,
                "dtype": str(model_config.dtype).replace("torch.", ""),
                "enable_prefix_caching": cc.enable_prefix_caching,
                "mamba_block_size": cc.mamba_block_size,
                "mamba_page_size_padded": cc.mamba_page_size_padded,
                "mamba_ssm_cache_dtype": cc.mamba_ssm_cache_dtype,
                "max_model_len": model_config.max_model_len,
                "max_num_batched_tokens": vllm_config.scheduler_config.max_num_batched_tokens,
                "max_num_seqs": vllm_config.scheduler_config.max_num_seqs,
                "tp_world_size": vllm_config.parallel_config.tensor_parallel_size,
                "quantization": model_config.quantization,
            },
            "is_hybrid": model_config.is_hybrid,
            "use_mla": model_config.use_mla,
            "num_groups": len(groups),
            "num_cache_layers": len(specs),
            "kv_sharing": shared,
            "bytes_per_block": bytes_per_block,
            # kv_cache_planning.get_kv_cache_config_from_groups: one KVCacheTensor per distinct spec of a
            # group, its layers in first-seen order (a mixed-spec group's tensors are not its layer_names order)
            "kv_cache_tensor_layers": None if sched is None else [list(t.layers) for t in sched.kv_cache_tensors],
            "groups": out_groups,
            "budgets": budgets,
        }


def _run_one(folder: Path, label: str, tp: int = 1, kv_cache_dtype: str = "auto") -> dict:
    """Plan one folder in fresh processes, one per tensor-parallel rank (one gloo group): vLLM's
    process groups (expert parallel among them) are made for the model being built, so each model
    gets its own. Rank 0 writes the case."""
    import subprocess
    import tempfile

    port = _free_port()
    with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
        procs = [
            subprocess.Popen(
                [sys.executable, __file__, "--one", str(folder), "--label", label, "--out", tmp.name]
                + ["--tensor-parallel-size", str(tp), "--rank", str(r), "--port", str(port)]
                + ["--kv-cache-dtype", kv_cache_dtype],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for r in range(tp)
        ]
        errs = []
        for proc in procs:
            try:
                errs.append(proc.communicate(timeout=900)[1])
            except subprocess.TimeoutExpired:
                proc.kill()
                errs.append(proc.communicate()[1] + "\n(timed out)")
        try:
            return json.loads(Path(tmp.name).read_text())
        except ValueError:
            return {
                "failure": {
                    "config_path": label,
                    "error": f"process exited {procs[0].returncode}",
                    "traceback_tail": errs[0].splitlines()[-14:],
                }
            }


def _one(folder: Path, label: str, out: Path, tp: int, rank: int, port: int, kv_cache_dtype: str) -> None:
    _h200_backends()
    t0 = time.time()
    try:
        case = plan_one(folder, label, tp, rank, port, kv_cache_dtype)
        if case is None:  # not rank 0: its specs went to rank 0
            return
        case["elapsed_s"] = round(time.time() - t0, 2)
        case["backend_selection"] = list({json.dumps(r, sort_keys=True): r for r in BACKEND_REQUESTS}.values())
        result = {"case": case}
    except Exception as e:  # a reference run: record vLLM's own refusal
        if rank != 0:
            raise
        result = {
            "failure": {
                "config_path": label,
                "error": f"{type(e).__name__}: {e}",
                "traceback_tail": traceback.format_exc().splitlines()[-14:],
            }
        }
    out.write_text(json.dumps(result))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="*")
    ap.add_argument("--out", required=True)
    ap.add_argument("--label-root", default=None)
    ap.add_argument("--mode", default="real public configs")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--label", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--rank", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--tensor-parallel-size", type=int, default=1, help="N ranks, one process each, in one gloo group")
    ap.add_argument("--kv-cache-dtype", default="auto", help="vLLM's --kv-cache-dtype (auto, fp8, ...)")
    ns = ap.parse_args(argv)
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    _hide_unloadable_torchvision()
    if ns.one:
        _one(Path(ns.one), ns.label, Path(ns.out), ns.tensor_parallel_size, ns.rank, ns.port, ns.kv_cache_dtype)
        return 0
    import torch
    import transformers
    import vllm

    cases, failures = {}, {}
    for d in ns.dirs:
        folder = Path(d).resolve()
        label = (
            str(folder.relative_to(Path(ns.label_root).resolve())) + "/config.json" if ns.label_root else str(folder)
        )
        result = _run_one(folder, label, ns.tensor_parallel_size, ns.kv_cache_dtype)
        if "case" in result:
            cases[folder.name] = result["case"]
            print(f"{folder.name}: planned, {result['case']['num_groups']} groups", file=sys.stderr)
        else:
            failures[folder.name] = result["failure"]
            print(f"{folder.name}: FAILED {result['failure']['error']}", file=sys.stderr)
    out = {
        "vllm_version": vllm.__version__,
        "runtime": {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "torchvision": os.environ["KVVIZ_REF_TORCHVISION"],
        },
        "target_device": "NVIDIA H200 (SM90): attention backends as CudaPlatform picks them there (see _h200_backends)",
        "mode": ns.mode,
        "budgets": BUDGETS,
        "budgets_are": "KV-cache memory available on EACH GPU (rank)",
        "max_model_len": "min(32768, the model's derived maximum)",
        "max_num_batched_tokens": MNBT,
        "tensor_parallel_size": ns.tensor_parallel_size,
        "kv_cache_dtype": ns.kv_cache_dtype,
        "how": "scripts/vllm_reference_plans.py: EngineArgs.create_engine_config, the model's real __init__ on "
        f"the meta device in a {ns.tensor_parallel_size}-rank gloo group (one process per rank, fresh ones per "
        "model), each rank's layers' get_kv_cache_spec, get_kv_cache_configs over every rank's specs (one budget "
        "per rank), generate_scheduler_kv_cache_config, get_kv_cache_capacity",
        "cases": cases,
        "failures": failures,
    }
    Path(ns.out).write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
