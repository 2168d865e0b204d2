"""Each pipeline stage's parameters equal vLLM 0.33's own model built on that stage (issue 37 item 2).

tests/data/vllm-0.33/pp-params/cases.json was made by scripts/vllm_reference_pp_params.py (README there): each
case's model constructed with vLLM's real `__init__` on the meta device in the process groups of every PP rank,
its parameters counted. kvviz's `stage_weights` (kvviz/deploy/stage_weights.py) must give each stage the same
layers, the same modules outside the layers (embedding, final norm, LM head, tied or not) and the same count, on
dense (Llama-3.3-70B), MoE (Qwen3-30B-A3B, gpt-oss-120b), MLA (DeepSeek-V2-Lite, DeepSeek-V3), hybrid
(Nemotron-Nano-9B-v2, Jamba, Qwen3-Next) and tied-head (Llama-3.2-1B, Qwen3-0.6B, LFM2-1.2B) models at PP 1-4.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import kvviz
from kvviz.base.errors import KvvizError
from kvviz.deploy.stage_weights import stage_weights
from kvviz.deploy.weights import param_count

DATA = Path(__file__).parent / "data"
CASES = json.loads((DATA / "vllm-0.33" / "pp-params" / "cases.json").read_text())["cases"]
EMBED, HEAD, NORM = re.compile(r"embed"), re.compile(r"lm_head"), re.compile(r"norm")
# placement cases vLLM could not construct on this CPU for reasons of their own (README): what each raised
NOT_BUILT_ON_CPU = {
    "placement/NemotronHForCausalLM/pp=2": "is_act_and_mul=False is supported only for CUDA",  # its MoE layers
    "placement/Qwen3_5ForCausalLM/pp=2": "failed to be inspected",  # its module imports torchvision
    "placement/Qwen3_5MoeForCausalLM/pp=2": "failed to be inspected",
}


def _case(name):
    case = CASES[name]
    folder = (DATA / case["config_path"]).parent
    cfg = json.loads((folder / "config.json").read_text())
    if case["options"].get("unquantized"):  # the reference dropped it too (README: set by hand)
        cfg.pop("quantization_config", None)
    o = case["options"]
    partition = tuple(int(x) for x in o["partition"].split(",")) if "partition" in o else None
    staged = stage_weights(
        kvviz.load(folder),
        cfg,
        pipeline_parallel_size=o.get("pp", 1),
        tensor_parallel_size=o.get("tp", 1),
        pp_layer_partition=partition,
    )
    return case, cfg, staged


def _outer(rank: dict) -> tuple[bool, bool, bool]:
    """(embedding, final norm, head) among the parameters outside the decoder layers vLLM built on a rank."""
    names = list(rank["other_parameters"])
    embed = any(EMBED.search(n) and not NORM.search(n) for n in names)
    return embed, any(NORM.search(n) for n in names), any(HEAD.search(n) for n in names)


def test_the_reference_covers_the_brief():
    """Dense, MoE, MLA, hybrid and tied models at PP 1 to 4, every rank of them built without an error."""
    archs = {name.split("/")[0] for name in CASES}
    assert {"llama-3.3-70b", "qwen3-30b-a3b", "gpt-oss-120b", "deepseek-v3", "jamba-v0.1", "llama-3.2-1b"} <= archs
    assert {c["options"].get("pp", 1) for c in CASES.values()} >= {1, 2, 3, 4}
    bad = [
        (n, r.get("refused") or r.get("failure"))
        for n, c in CASES.items()
        for r in c["ranks"]
        if "parameters" not in r and not n.startswith("placement/")  # those: test_each_model_files_rule...
    ]
    assert not bad


@pytest.mark.parametrize("name", sorted(n for n in CASES if not n.startswith("placement/")))
def test_each_stage_builds_what_vllm_builds(name):
    """Every rank: its layers, its modules outside the layers, and its parameters (one TP rank's: norms and
    routers whole, sharded layers / TP, KV heads replicated past their count)."""
    case, cfg, staged = _case(name)
    for rank in case["ranks"]:
        s = staged.stages[rank["pp_rank"]]
        assert (s.first_layer, s.end_layer) == (rank["start_layer"], rank["end_layer"]), name
        tied_head = s.head and s.tied and s.embedding  # the head is the embedding's tensor: no lm_head of its own
        assert _outer(rank) == (s.embedding, s.norm, s.head and not tied_head), (name, rank["other_parameters"])
        if "quantization_config" in cfg:  # DeepSeek-V3's block FP8: every linear and expert weight one byte
            by = rank["parameters_by_dtype"]
            parts = param_count(kvviz.load((DATA / case["config_path"]).parent), cfg).stage_parts(
                s.first_layer, s.end_layer, embedding=s.embedding, norm=s.norm, head=s.head, tied=s.tied
            )
            assert by["float8_e4m3fn"] == parts["linear"] + parts["experts"], name
            # float32 holds the weight_scale_inv blocks and e_score_correction_bias (256 a MoE layer: 3 on)
            bias = 256 * max(0, s.end_layer - max(s.first_layer, 3))
            assert by["float8_e4m3fn"] + by["bfloat16"] + bias == s.parameters, name
        else:
            assert rank["parameters"] == s.parameters, name


@pytest.mark.parametrize("name", sorted(n for n in CASES if n.startswith("placement/")))
def test_each_model_files_rule_places_the_outer_modules(name):
    """kvviz/vllm/stage_modules.py's rule of each file it reads, against vLLM's own construction on transformers'
    default config of every registry architecture built by that file, at PP 2, untied and (where the file ties
    as the config says) tied; an architecture without SupportsPP is refused by vLLM and by kvviz."""
    from kvviz.deploy.stage_weights import model_file
    from kvviz.vllm.stage_modules import stage_modules

    case = CASES[name]
    folder = (DATA / case["config_path"]).parent
    refused = [r["refused"] for r in case["ranks"] if "refused" in r]
    if name in NOT_BUILT_ON_CPU:
        assert refused and NOT_BUILT_ON_CPU[name] in refused[0], name
        return
    model = kvviz.load(folder)
    cfg = json.loads((folder / "config.json").read_text()) | {"tie_word_embeddings": case["options"]["tie"]}
    if any("Pipeline parallelism is not supported" in r for r in refused):
        with pytest.raises(KvvizError, match="Pipeline parallelism is not supported"):
            kvviz.plan(folder, pipeline_parallel_size=2)
        return
    if any("PPMissingLayer" in r for r in refused):  # a tied head on a stage without the embedding
        with pytest.raises(KvvizError, match="PPMissingLayer"):
            stage_weights(model, cfg, pipeline_parallel_size=2)
        return
    assert not refused, name
    rule, tie = stage_modules(model_file(model)), case["options"]["tie"]
    assert rule.read, name
    for rank in case["ranks"]:
        embedding, norm, head = rule.built(rank["pp_rank"], 2, tie)
        assert _outer(rank) == (embedding, norm, head and not (rule.tied(tie) and embedding)), (name, rank)
