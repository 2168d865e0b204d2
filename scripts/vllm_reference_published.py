"""vLLM 0.33's own KV cache plans of published config.json files and their transformers re-saved forms (issue 39).

Runs ONLY in the throwaway venv of ../shared/tools/README.md (vllm==0.33.0, torch CPU, transformers 5.24);
kvviz never imports it. The plan of one config is scripts/vllm_reference_plans.py's `plan_one` (vLLM's
EngineArgs, the model class built with its real `__init__` on the meta device, every layer's
`get_kv_cache_spec`, `get_kv_cache_configs`, `generate_scheduler_kv_cache_config`, `get_kv_cache_capacity`
at 8 and 40 GiB a GPU, the H200 backends of its `_h200_backends`), unchanged. What this script adds:

* `--resave SRC OUT`: the transformers re-saved form, `AutoConfig.from_pretrained(SRC).save_pretrained(OUT)`,
  which is what a user's checkpoint folder holds after any transformers save (a fine-tune, a merge);
* one process that imports vLLM once and forks a fresh child per rank of every (config, setting): each
  model still gets its own process and its own gloo group, as in vllm_reference_plans.py's `_run_one`,
  without paying vLLM's 20 s import for each of a few hundred plans;
* one output file per setting (`--setting tp1 tp2 tp1-fp8 tp2-fp8`), the cases keyed by the config's
  folder relative to `--root` (`published/<model>`, `resaved/<model>`).

usage: VENV/bin/python scripts/vllm_reference_published.py --root tests/data/vllm-0.33/published \
           --setting tp1 tp2 tp1-fp8 tp2-fp8 [FOLDER ...]     (default: every config folder under the root)
       VENV/bin/python scripts/vllm_reference_published.py --resave SRC_DIR OUT_DIR
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import vllm_reference_plans as ref  # noqa: E402  (the sibling script: plan_one, _one, _free_port)

SETTINGS = {"tp1": (1, "auto"), "tp2": (2, "auto"), "tp1-fp8": (1, "fp8"), "tp2-fp8": (2, "fp8")}
TIMEOUT_S = 900


def _h200_published():
    """vllm_reference_plans._h200_backends (every answer it sets by hand, and why, is said there), then more
    answers the published configs ask, none of which changes a KV cache spec:

    * FlashAttention 4 is taken as absent: vLLM's wheel ships it (vllm_flash_attn/cute) and on SM90 FA4 serves
      head sizes over 256 with kernel pages of its own (fa_utils FA4_HD256_PAGE_SIZE, a 64-token page for an fp8
      head-512 cache), which neither kvviz nor this reference models: a stated gap (README), as in the registry
      reference of Gemma 4;
    * a backend the model's config hook forces is taken, as CudaPlatform.get_attn_backend_cls takes a selected
      backend: Gemma4Config.verify_and_update_config (model_executor/models/config.py) forces TRITON_ATTN for
      Gemma 4's heterogeneous head sizes (256 and 512) without FA4; where no hook forces one, a head size FA3
      does not take (over 256) gets TRITON_ATTN, the first of SM90's list that validates (FLASHINFER takes
      64 / 128 / 256);
    * the MXFP4 MoE kernel of gpt-oss (fused_moe/oracle/mxfp4.py select_mxfp4_moe_backend): TRITON, whose
      availability check needs a GPU; the experts hold weights, not KV cache;
    * FusedMoEConfig's check that a non-gated MoE activation (Nemotron-H's relu2) runs on CUDA, XPU or ROCm
      (fused_moe/config.py __post_init__) answers as on CUDA;
    * GeluAndMulSparse's std multiplier (Gemma 3n) is computed on CPU: Tensor.item() has no meta answer;
    * FlashMLA's dense kernel, the MLA backend of an fp8 cache on SM90, is there (FlashMLAImpl asserts it).
    """
    import torch

    platform = _H200_BACKENDS()
    plain_pick = type(platform).get_attn_backend_cls
    import vllm.v1.attention.backends.fa_utils as fa_utils
    import vllm.v1.attention.backends.flash_attn as flash_attn
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    fa_utils.is_fa_version_supported = flash_attn.is_fa_version_supported = lambda version: version in (2, 3)

    def pick(selected_backend, attn_selector_config, num_heads=None):
        c = attn_selector_config
        if (
            selected_backend is None
            and not c.use_mla
            and not flash_attn.FlashAttentionBackend.supports_head_size(c.head_size)
        ):
            selected_backend = AttentionBackendEnum.TRITON_ATTN
        if selected_backend is not None:
            ref.BACKEND_REQUESTS.append(
                {
                    "request": {k: str(v) for k, v in c._asdict().items()},
                    "picked": selected_backend.name,
                }
            )
            return selected_backend.get_path()
        return plain_pick(selected_backend, attn_selector_config, num_heads)

    type(platform).get_attn_backend_cls = staticmethod(pick)
    from vllm.model_executor.layers import activation
    from vllm.model_executor.layers.fused_moe import config as moe_config
    from vllm.model_executor.layers.fused_moe.oracle import mxfp4 as mxfp4_oracle
    from vllm.model_executor.layers.quantization import mxfp4 as mxfp4_quant

    triton = mxfp4_oracle.Mxfp4MoeBackend.TRITON
    chosen = (triton, mxfp4_oracle.backend_to_kernel_cls(triton)[0])
    mxfp4_oracle.select_mxfp4_moe_backend = mxfp4_quant.select_mxfp4_moe_backend = lambda *a, **k: chosen
    post_init = moe_config.FusedMoEConfig.__post_init__

    def post_init_as_on_cuda(self, *args, **kwargs):
        cls = type(platform)
        cuda_alike = cls.is_cuda_alike
        cls.is_cuda_alike = lambda _self: True
        try:
            return post_init(self, *args, **kwargs)
        finally:
            cls.is_cuda_alike = cuda_alike

    moe_config.FusedMoEConfig.__post_init__ = post_init_as_on_cuda
    sparse_init = activation.GeluAndMulSparse.__init__

    def sparse_init_on_cpu(self, *args, **kwargs):
        with torch.device("cpu"):
            sparse_init(self, *args, **kwargs)

    activation.GeluAndMulSparse.__init__ = sparse_init_on_cpu
    import vllm.v1.attention.backends.mla.flashmla as flashmla

    flashmla.is_flashmla_dense_supported = lambda: (True, None)
    return platform


_H200_BACKENDS = ref._h200_backends
ref._h200_backends = _h200_published  # vllm_reference_plans._one calls it in every child


def resave(src: Path, out: Path) -> None:
    """transformers' own reading and writing of a config folder (the form every later save has)."""
    from transformers import AutoConfig

    out.mkdir(parents=True, exist_ok=True)
    AutoConfig.from_pretrained(str(src)).save_pretrained(str(out))


def _fork_one(folder: Path, label: str, tp: int, kv_cache_dtype: str) -> dict:
    """One (config, setting) in fresh forked children, one per rank in one gloo group; rank 0 writes the
    case (or vLLM's refusal) as vllm_reference_plans._one does."""
    port = ref._free_port()
    with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
        pids = []
        for rank in range(tp):
            pid = os.fork()
            if pid == 0:  # the child: plan, write, and leave without running the parent's atexit hooks
                code = 0
                try:
                    devnull = os.open(os.devnull, os.O_WRONLY)
                    os.dup2(devnull, 1)
                    ref._one(folder, label, Path(tmp.name), tp, rank, port, kv_cache_dtype)
                except BaseException:  # a non-zero rank's failure: rank 0 records vLLM's refusal
                    code = 1
                os._exit(code)
            pids.append(pid)
        deadline = time.time() + TIMEOUT_S
        for pid in pids:
            while True:
                done, _ = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
                if time.time() > deadline:
                    os.kill(pid, 9)
                    os.waitpid(pid, 0)
                    break
                time.sleep(0.2)
        try:
            return json.loads(Path(tmp.name).read_text())
        except ValueError:
            return {"failure": {"config_path": label, "error": "no result (a rank died or timed out)"}}


def _folders(root: Path, given: list[str]) -> list[Path]:
    if given:
        return [Path(g).resolve() for g in given]
    return sorted(p.parent for p in root.glob("*/*/config.json"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="*")
    ap.add_argument("--root", default="tests/data/vllm-0.33/published")
    ap.add_argument("--setting", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    ap.add_argument("--resave", nargs=2, metavar=("SRC", "OUT"))
    ns = ap.parse_args(argv)
    if ns.resave:
        resave(Path(ns.resave[0]), Path(ns.resave[1]))
        return 0
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    ref._hide_unloadable_torchvision()
    import torch
    import transformers
    import vllm

    torch.set_num_threads(1)  # no op runs on real tensors; one thread keeps the forks clean
    ref._h200_backends()  # the platform answers (_h200_published), set again in every child by ref._one
    root = Path(ns.root).resolve()
    for setting in ns.setting:
        tp, kv = SETTINGS[setting]
        out_path = root / f"plans-{setting}.json"
        previous = json.loads(out_path.read_text()) if out_path.is_file() else {"cases": {}, "failures": {}}
        cases, failures = previous["cases"], previous["failures"]
        for folder in _folders(root, ns.folders):
            key = str(folder.relative_to(root))
            ref.BACKEND_REQUESTS.clear()
            result = _fork_one(folder, key + "/config.json", tp, kv)
            cases.pop(key, None)
            failures.pop(key, None)
            if "case" in result:
                cases[key] = result["case"]
                print(f"{setting} {key}: planned, {result['case']['num_groups']} groups", file=sys.stderr)
            else:
                failures[key] = result["failure"]
                print(f"{setting} {key}: FAILED {result['failure']['error'][:300]}", file=sys.stderr)
        out = {
            "vllm_version": vllm.__version__,
            "runtime": {
                "torch": torch.__version__,
                "transformers": transformers.__version__,
                "torchvision": os.environ["KVVIZ_REF_TORCHVISION"],
            },
            "target_device": "NVIDIA H200 (SM90): attention backends as CudaPlatform picks them there "
            "(scripts/vllm_reference_plans.py _h200_backends)",
            "budgets": ref.BUDGETS,
            "budgets_are": "KV-cache memory available on EACH GPU (rank)",
            "max_model_len": "min(32768, the model's derived maximum)",
            "max_num_batched_tokens": ref.MNBT,
            "tensor_parallel_size": tp,
            "kv_cache_dtype": kv,
            "how": "scripts/vllm_reference_published.py: vllm_reference_plans.plan_one in forked children, one per "
            "rank in one gloo group (fresh ones per config and setting)",
            "cases": dict(sorted(cases.items())),
            "failures": dict(sorted(failures.items())),
        }
        out_path.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
