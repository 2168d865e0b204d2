"""The parameters each pipeline stage (and tensor-parallel rank) of vLLM 0.33 builds, counted on its own model
classes (issue 37 item 2): the reference for kvviz.deploy's weights per stage.

Runs ONLY in the throwaway venv (/root/vllm-ref, vllm==0.33.0, torch CPU); kvviz never imports it. For each case
(a config folder, PP, TP, optionally VLLM_PP_LAYER_PARTITION), for every PP rank (and, with TP, TP rank 0 and the
last TP rank):

1. the engine config as scripts/vllm_reference_deploy.py makes it (`EngineArgs(...).create_engine_config()`);
2. vLLM's process groups for world TP x PP seen from that rank (torch's fake backend: one process stands for one
   worker, nothing is communicated while a model is constructed), then the model's real `__init__` under
   `torch.device("meta")` (`initialize_model`): `make_layers` / `get_pp_indices` build only the stage's layers
   (the rest are PPMissingLayer), and the model file decides where the embedding, final norm and LM head go;
3. `sum(p.numel() for p in model.parameters())` (shared tensors counted once: a tied head is its embedding),
   and the same split by where each parameter lives: `layers` (inside a decoder layer of the stage), and every
   other parameter by name (embeddings, norms, heads, towers) with its numel.

usage: VENV/bin/python scripts/vllm_reference_pp_params.py --out tests/data/vllm-0.33/pp-params/cases.json
       [--only NAME ...]
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from vllm_reference_deploy import _engine_config, _fake_distributed, case_arguments  # noqa: E402
from vllm_reference_plans import _h200_backends  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
OWN = "own-configs"
MORE = "vllm-0.33/deploy-more/configs"
HERE = "vllm-0.33/pp-params/configs"

# name -> (config folder relative to tests/data, {"pp": N, "tp": N, "partition": "a,b,..."})
CASES = {
    # dense (llama.py: embedding on the first stage, norm and head on the last)
    **{f"llama-3.3-70b/pp={pp}": (f"{OWN}/llama-3.3-70b", {"pp": pp}) for pp in (1, 2, 3, 4)},
    "llama-3.3-70b/pp=3/partition=20,40,20": (f"{OWN}/llama-3.3-70b", {"pp": 3, "partition": "20,40,20"}),
    "llama-3.3-70b/tp=2": (f"{OWN}/llama-3.3-70b", {"tp": 2}),
    "llama-3.3-70b/tp=2,pp=2": (f"{OWN}/llama-3.3-70b", {"tp": 2, "pp": 2}),
    # MoE (qwen3_moe.py builds embedding, norm and head on every stage; gpt_oss.py likewise)
    **{f"qwen3-30b-a3b/pp={pp}": (f"{OWN}/qwen3-30b-a3b", {"pp": pp}) for pp in (1, 2, 3, 4)},
    "qwen3-30b-a3b/tp=2": (f"{OWN}/qwen3-30b-a3b", {"tp": 2}),
    # gpt-oss-120b's MXFP4 experts cannot be built on a CPU (no MXFP4 MoE backend for device None): its config
    # without quantization_config (set by hand), every parameter one element, as kvviz counts parameters
    **{
        f"gpt-oss-120b/unquantized/pp={pp}": (f"{OWN}/gpt-oss-120b", {"pp": pp, "unquantized": True})
        for pp in (1, 2, 3, 4)
    },
    # MLA (deepseek_v2.py)
    **{f"deepseek-v2-lite/pp={pp}": (f"{MORE}/deepseek-v2-lite", {"pp": pp}) for pp in (1, 2, 3, 4)},
    # DeepSeek-V3 as published (block FP8: weights of one byte and their scales) and without quantization_config
    "deepseek-v3/pp=2": (f"{HERE}/deepseek-v3", {"pp": 2}),
    **{
        f"deepseek-v3/unquantized/pp={pp}": (f"{HERE}/deepseek-v3", {"pp": pp, "unquantized": True}) for pp in (1, 2, 4)
    },
    # hybrids (nemotron_h.py, jamba.py, qwen3_next.py)
    **{f"nemotron-nano-9b-v2/pp={pp}": (f"{MORE}/nemotron-nano-9b-v2", {"pp": pp}) for pp in (1, 2, 3, 4)},
    **{f"jamba-v0.1/pp={pp}": (f"{MORE}/jamba-v0.1", {"pp": pp}) for pp in (1, 2, 4)},
    "jamba-v0.1/pp=2/partition=6,26": (f"{MORE}/jamba-v0.1", {"pp": 2, "partition": "6,26"}),
    **{f"qwen3-next-80b-a3b/pp={pp}": (f"{MORE}/qwen3-next-80b-a3b", {"pp": pp}) for pp in (1, 2, 3, 4)},
    # tied heads (llama.py: the last stage builds its own embedding for the tied head; lfm2.py: every stage)
    **{f"llama-3.2-1b/pp={pp}": (f"{HERE}/llama-3.2-1b", {"pp": pp}) for pp in (1, 2, 3, 4)},
    **{f"qwen3-0.6b/pp={pp}": (f"{HERE}/qwen3-0.6b", {"pp": pp}) for pp in (1, 2, 4)},
    **{f"lfm2-1.2b/pp={pp}": ("vllm-0.33/configs/lfm2-1.2b", {"pp": pp}) for pp in (1, 2, 4)},
}

# One tensor-parallel rank: what vLLM keeps whole on every rank (norms, routers, ...) and what it shards or
# replicates (KV heads when TP exceeds them: Qwen3-30B-A3B's 4 at TP 8)
CASES.update(
    {
        "qwen3-30b-a3b/tp=8": (f"{OWN}/qwen3-30b-a3b", {"tp": 8}),
        "gpt-oss-120b/unquantized/tp=2": (f"{OWN}/gpt-oss-120b", {"tp": 2, "unquantized": True}),
        "deepseek-v2-lite/tp=2": (f"{MORE}/deepseek-v2-lite", {"tp": 2}),
        "deepseek-v3/unquantized/tp=8": (f"{HERE}/deepseek-v3", {"tp": 8, "unquantized": True}),
        "nemotron-nano-9b-v2/tp=2": (f"{MORE}/nemotron-nano-9b-v2", {"tp": 2}),
        "jamba-v0.1/tp=2": (f"{MORE}/jamba-v0.1", {"tp": 2}),
        "qwen3-next-80b-a3b/tp=2": (f"{MORE}/qwen3-next-80b-a3b", {"tp": 2}),
        "qwen3-next-80b-a3b/tp=4": (f"{MORE}/qwen3-next-80b-a3b", {"tp": 4}),
        "lfm2-1.2b/tp=2": ("vllm-0.33/configs/lfm2-1.2b", {"tp": 2}),
        "llama-3.2-1b/tp=2,pp=2": (f"{HERE}/llama-3.2-1b", {"tp": 2, "pp": 2}),
    }
)

# Where each model file builds the embedding, final norm and head (kvviz/vllm/stage_modules.py), on the default
# config of every registry architecture whose file that table reads (../registry/configs, transformers' defaults),
# at PP 2; and tied (tie_word_embeddings set to true by hand) where the file ties as the config says.
REGISTRY = "vllm-0.33/registry/configs"
PLACEMENT = (
    "DeepseekV3ForCausalLM FalconH1ForCausalLM Gemma2ForCausalLM Gemma3ForCausalLM Gemma3nForCausalLM "
    "Qwen3NextForCausalLM GptOssForCausalLM GraniteMoeHybridForCausalLM InternLM3ForCausalLM JambaForCausalLM "
    "LlamaForCausalLM Llama4ForCausalLM Mamba2ForCausalLM Ministral3ForCausalLM MistralForCausalLM "
    "MixtralForCausalLM NemotronHForCausalLM Phi3ForCausalLM Qwen2ForCausalLM Qwen2MoeForCausalLM Qwen3ForCausalLM "
    "Qwen3MoeForCausalLM Qwen3_5ForCausalLM Qwen3_5MoeForCausalLM Zamba2ForCausalLM"
).split()
TIES_BY_CONFIG = "FalconH1ForCausalLM LlamaForCausalLM Qwen2ForCausalLM Qwen3ForCausalLM Qwen3MoeForCausalLM".split()
CASES.update({f"placement/{a}/pp=2": (f"{REGISTRY}/{a}", {"pp": 2, "tie": False}) for a in PLACEMENT})
CASES.update({f"placement/{a}/tied/pp=2": (f"{REGISTRY}/{a}", {"pp": 2, "tie": True}) for a in TIES_BY_CONFIG})

_LAYER = re.compile(r"(^|\.)layers\.(\d+)\.")


def _rank_params(folder: Path, o: dict, pp_rank: int, tp_rank: int) -> dict:
    import torch
    from vllm.config import set_current_vllm_config
    from vllm.distributed import get_pp_group, get_tp_group
    from vllm.model_executor.model_loader.utils import initialize_model
    from vllm.utils.torch_utils import set_default_torch_dtype

    tp, pp = o.get("tp", 1), o.get("pp", 1)
    _h200_backends()  # the platform's answers as on an H200 (scripts/vllm_reference_plans.py)
    import vllm.v1.attention.backends.mla.flashattn_mla as flashattn_mla

    flashattn_mla.flash_attn_supports_mla = lambda: True  # as scripts/vllm_reference_deploy.py: FA3 MLA on SM90
    vllm_config, _ = _engine_config(folder, o)
    with set_current_vllm_config(vllm_config):
        _fake_distributed(tp * pp, pp_rank * tp + tp_rank, tp, pp)
        assert get_pp_group().rank_in_group == pp_rank and get_tp_group().rank_in_group == tp_rank
        from vllm.v1.worker.workspace import init_workspace_manager

        torch.accelerator.empty_cache = lambda: None
        init_workspace_manager(torch.device("meta"))
        with set_default_torch_dtype(vllm_config.model_config.dtype), torch.device("meta"):
            model = initialize_model(vllm_config=vllm_config)
    total, layers, layer_ids, other = 0, 0, set(), {}
    dtypes: dict[str, int] = {}
    nbytes = 0
    for name, p in model.named_parameters():  # shared tensors (a tied head) appear once
        n = p.numel()
        total += n
        nbytes += n * p.element_size()
        key = str(p.dtype).replace("torch.", "")
        dtypes[key] = dtypes.get(key, 0) + n
        m = _LAYER.search(name)
        if m:
            layers += n
            layer_ids.add(int(m.group(2)))
        else:
            other[name] = n
    ids = sorted(layer_ids)
    return {
        "pp_rank": pp_rank,
        "tp_rank": tp_rank,
        "parameters": total,
        "parameter_bytes": nbytes,
        "layer_parameters": layers,
        "layers_built": [ids[0], ids[-1] + 1] if ids else None,
        "num_layers_built": len(ids),
        "other_parameters": other,
        "parameters_by_dtype": dtypes,
        "start_layer": getattr(getattr(model, "model", model), "start_layer", None),
        "end_layer": getattr(getattr(model, "model", model), "end_layer", None),
    }


def _case_main(name: str, out: Path) -> None:
    """Every rank of case `name`, one after the other in this process (each with vLLM's process groups made
    afresh for it, as scripts/vllm_reference_deploy.py builds its stages)."""
    rel, o = CASES[name]
    if "partition" in o:
        os.environ["VLLM_PP_LAYER_PARTITION"] = o["partition"]
    folder = (DATA / rel).resolve()
    if o.get("unquantized") or "tie" in o:  # a copy of the config: without quantization_config, or tied / untied
        raw = json.loads((folder / "config.json").read_text())
        if o.get("unquantized"):
            raw.pop("quantization_config", None)
        if "tie" in o:
            raw["tie_word_embeddings"] = o["tie"]
            if isinstance(raw.get("text_config"), dict):
                raw["text_config"]["tie_word_embeddings"] = o["tie"]
        folder = Path(tempfile.mkdtemp()) / folder.name
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(raw))
    tp, pp = o.get("tp", 1), o.get("pp", 1)
    ranks = []
    for pp_rank in range(pp):
        for tp_rank in sorted({0, tp - 1}):
            t0 = time.time()
            try:
                rec = _rank_params(folder, o, pp_rank, tp_rank)
            except Exception as e:  # vLLM's own refusal, recorded
                rec = {
                    "pp_rank": pp_rank,
                    "tp_rank": tp_rank,
                    "refused": f"{type(e).__name__}: {str(e)[:400]}",
                    "tail": traceback.format_exc().splitlines()[-6:-1],
                }
            rec["elapsed_s"] = round(time.time() - t0, 1)
            ranks.append(rec)
    out.write_text(json.dumps(ranks))


def _run(name: str) -> dict:
    rel, o = CASES[name]
    with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
        proc = subprocess.run(
            [sys.executable, __file__, "--case", name, "--out", tmp.name], capture_output=True, text=True
        )
        try:
            ranks = json.loads(Path(tmp.name).read_text())
        except ValueError:
            ranks = [{"failure": proc.stderr.splitlines()[-8:]}]
    return {"config_path": rel + "/config.json", "options": o, "ranks": ranks}


def main(argv=None) -> int:
    ns, done = case_arguments(argv, __doc__)
    if ns.case:
        _case_main(ns.case, Path(ns.out))
        return 0
    import torch
    import transformers
    import vllm

    for name in ns.only or [n for n in CASES if n not in done]:  # a case already recorded is kept
        done[name] = _run(name)
        bad = [r for r in done[name]["ranks"] if "failure" in r or "refused" in r]
        print(name, "->", "FAILED" if bad else [r["parameters"] for r in done[name]["ranks"]], file=sys.stderr)
        header = {
            "vllm_version": vllm.__version__,
            "torch_version": torch.__version__,
            "transformers_version": transformers.__version__,
            "how": "scripts/vllm_reference_pp_params.py (see its docstring and README.md)",
            "counted": "numel of model.named_parameters() on the meta device (a shared tensor once), per PP rank",
            "cases": dict(sorted(done.items())),
        }
        Path(ns.out).write_text(json.dumps(header, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
