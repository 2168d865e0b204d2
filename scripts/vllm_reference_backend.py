"""vLLM 0.33's own KV cache plan of a model whose file requires an attention backend that CudaPlatform
does not pick by itself on an H200, as `vllm serve --attention-backend NAME` runs it, or whose
construction asks the device's name (issue 27).

Rnj1ForCausalLM's chunked layers assert the Triton backend (layers/attention/attention.py
Attention.__init__: "Chunked attention with lookback requires the Triton backend"); the H200 priority
list scripts/vllm_reference_plans.py answers with puts FLASH_ATTN first. With --attention-backend,
CudaPlatform.get_attn_backend_cls returns the selected backend for every layer (platforms/cuda.py);
this runs scripts/vllm_reference_plans.py's plan_one in-process with that answer, everything else as there.
Without --backend the backends are that script's. K2HorizonMoVAAttention.__init__ looks up its fused MoE
kernel's tuned config by device name (fused_moe.py get_config_file_name, no KV cache): the platform answers
"NVIDIA H200", as CudaPlatform.get_device_name does there; and current_device() is the meta device the
model is built on (OpenPanguSinkAttention makes its sink K/V there, then normalizes them with k_layernorm).

usage: VENV/bin/python scripts/vllm_reference_backend.py --backend TRITON_ATTN --out plans.json
       --label-root R DIR [DIR ...]
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import vllm_reference_plans as ref  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--backend", default=None)
    ap.add_argument("--out", required=True)
    ap.add_argument("--label-root", required=True)
    ns = ap.parse_args(argv)
    platform = ref._h200_backends()
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    type(platform).get_device_name = classmethod(lambda cls, device_id=0: "NVIDIA H200")
    # the device a layer puts its own tensors on (OpenPanguSinkAttention's sink K/V parameters): the one the
    # model is built on, as on the GPU, where current_device() is the model's cuda device
    import torch

    type(platform).current_device = classmethod(lambda cls: torch.device("meta"))
    if ns.backend:
        enum = AttentionBackendEnum[ns.backend]

        def pick(selected_backend, attn_selector_config, num_heads=None):
            ref.BACKEND_REQUESTS.append(
                {"request": {k: str(v) for k, v in attn_selector_config._asdict().items()}, "picked": enum.name}
            )
            return enum.get_path()

        type(platform).get_attn_backend_cls = staticmethod(pick)
    cases, failures = {}, {}
    for d in ns.dirs:
        folder = Path(d).resolve()
        label = str(folder.relative_to(Path(ns.label_root).resolve())) + "/config.json"
        try:
            case = ref.plan_one(folder, label)
            case["attention_backend_selected"] = f"--attention-backend {ns.backend}" if ns.backend else None
            cases[folder.name] = case
        except Exception as e:  # a reference run: record vLLM's own refusal
            failures[folder.name] = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
    Path(ns.out).write_text(json.dumps({"cases": cases, "failures": failures}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
