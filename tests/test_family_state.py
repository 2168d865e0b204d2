"""The state-space / linear-attention family against vLLM 0.33's own planner output
(tests/data/vllm-0.33/new-kinds.json: Jamba-v0.1, Nemotron-Nano-9B-v2, LFM2-1.2B, prefix caching
on and off) and against hand derivations from vLLM's rules for the presets without such output.

Every expected number below is either read from vLLM's output file or computed here from the
config's own fields with the vLLM function cited beside it (paths under vllm/); none is copied
from kvviz. The rules the derivations use:

* state shapes: model_executor/layers/mamba/mamba_utils.py MambaStateShapeCalculator
  (mamba1_state_shape, mamba2_state_shape + extra_groups_for_head_shards, short_conv_state_shape,
  gated_delta_net_state_shape, kda_state_shape);
* attention block: platforms/interface.py Platform._align_hybrid_block_size
  kba = max(16, block_size) (MLA: max(kba, 128)); in 'align' mode (prefix caching on)
  kba = lcm(kba, checkpoint alignment) where the gated delta net's is 64
  (v1/attention/backends/gdn_attn.py FLASHINFER_GDN_CHECKPOINT_ALIGNMENT, SM90) and Mamba's None;
  block = 16 * cdiv(kba * cdiv(state, kba * attn_token_bytes), 16); the state page is padded
  to block * attn_token_bytes.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from kvviz.base.errors import KvvizError
from kvviz.families import load, load_path
from kvviz.options import Options
from kvviz.vllm.plan import plan_model

DATA = Path(__file__).parent / "data" / "vllm-0.33"
CASES = json.loads((DATA / "new-kinds.json").read_text())
BUDGETS = CASES["budgets"]
MNBT = "max_num_batched_tokens=8192"
STATE_CASES = [c for c in CASES["cases"] if c["model_key"] != "deepseek-v3"]
CONTEXT = 32768


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _layer_index(name: str) -> int:
    for part in name.split("."):
        if part.isdigit():
            return int(part)
    raise AssertionError(name)


def _kind(kind) -> str:
    """kvviz's CacheKind -> vLLM's group kind ('state', 'mla', 'full_attention', ...)."""
    if kind.is_state:
        return "state"
    return {
        "MLA": "mla",
        "FULL_ATTENTION": "full_attention",
        "SLIDING_ATTENTION": "sliding_attention",
        "CHUNKED_ATTENTION": "chunked_attention",
    }.get(kind.name, kind.name.lower())


def plan(model, *, prefix_caching: bool = True, **knobs):
    return plan_model(model, options=Options(max_model_len=CONTEXT, prefix_caching=prefix_caching, **knobs))


def check_against_vllm(case: dict) -> None:
    """kvviz's plan of the case's config against vLLM's own output for it (library path: the
    CLI is being rewired by the lead; the same fields the CLI's --json reports)."""
    cfg = case["config"]
    model = load_path(DATA / case["config_path"])
    options = {} if case["model_key"] == "deepseek-v3" else {"prefix_caching": cfg["enable_prefix_caching"]}
    p = plan_model(model, options=Options(max_model_len=cfg["max_model_len"], **options))
    v = case["plan"]
    assert p.tokens_per_block == cfg["block_size"]
    assert p.layout.block_stride == v["bytes_per_block"]
    got = [
        (_kind(g.layers[0].kind), [_layer_index(c.name) for c in g.layers], sorted({c.page_bytes for c in g.layers}))
        for g in p.layout.groups
    ]
    want = [(g["kind"], [_layer_index(n) for n in g["layer_names"]], sorted(g["page_size_bytes"])) for g in v["groups"]]
    assert got == want
    assert [[c.name for c in g.layers] for g in p.layout.groups] == [g["layer_names"] for g in v["groups"]]
    for budget_name, budget in BUDGETS.items():
        vb = v["budgets"][budget_name]
        cap = p.capacity(budget)
        assert cap.num_blocks == vb["num_blocks"], budget_name
        vc = vb["capacity"][MNBT]
        assert [g.blocks_per_request for g in cap.groups] == vc["blocks_per_request_per_group"]
        assert cap.blocks_per_request == vc["blocks_per_request"]
        assert cap.max_concurrency == pytest.approx(vc["max_concurrency"], rel=1e-12)
        assert cap.kv_cache_tokens == vc["gpu_kv_cache_size_tokens"]


@pytest.mark.parametrize("case", STATE_CASES, ids=[c["case"] for c in STATE_CASES])
def test_matches_vllm(case):
    check_against_vllm(case)


@pytest.mark.parametrize("case", STATE_CASES, ids=[c["case"] for c in STATE_CASES])
def test_declared_states_match_vllm_specs(case):
    """Each layer's state tensors: vLLM's MambaSpec shapes and dtypes, in its part order."""
    model = load_path(DATA / case["config_path"])
    caches = model.reader.caches(model, Options(prefix_caching=case["config"]["enable_prefix_caching"]))
    names = {"bfloat16": "bf16", "float32": "fp32"}
    for spec in case["distinct_specs"]:
        if spec["class"] != "MambaSpec":
            continue
        mine = [c for c in caches if c.name in set(spec["layers"])]
        assert len(mine) == spec["count"]
        for c in mine:
            assert [list(p.shape) for p in c.parts] == spec["shapes"]
            assert [p.dtype for p in c.parts] == [names[d] for d in spec["dtypes"]]
            assert c.state_bytes == spec["real_page_size_bytes"]


def test_presets_equal_the_vllm_configs():
    for preset, folder in (
        ("jamba-v0.1", "jamba-v0.1"),
        ("nemotron-nano-9b-v2", "nemotron-nano-9b-v2"),
        ("lfm2-1.2b", "lfm2-1.2b"),
    ):
        a, b = load(preset), load_path(DATA / "configs" / folder)
        assert a.reader.caches(a, Options()) == b.reader.caches(b, Options())


# -- hand derivations (models without vLLM output) ------------------------------------------------


def _attn_block(state: int, token: int, *, kba: int = 16) -> int:
    """_align_hybrid_block_size: the smallest multiple of kba (then of 16) whose page holds a state."""
    return 16 * cdiv(kba * cdiv(state, kba * token), 16)


def _by_name(model, options=Options()):
    return {c.name: c for c in model.reader.caches(model, options)}


def test_qwen3_next_preset_as_before():
    m = load("qwen3-next-80b-a3b")
    on, off = plan(m), plan(m, prefix_caching=False)
    assert (on.tokens_per_block, on.layout.block_stride) == (576, 14_155_776)
    assert (off.tokens_per_block, off.layout.block_stride) == (544, 13_369_344)


def _qwen3_next_raw():
    return json.loads((Path(__file__).parents[1] / "kvviz" / "presets" / "qwen3-next-80b-a3b.json").read_text())


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_qwen3_next_gdn_tp(tp):
    """gated_delta_net_state_shape at TP tp; attention kv heads max(1, 2 // tp) x 256 x 2 x bf16."""
    r = _qwen3_next_raw()
    m = load("qwen3-next-80b-a3b")
    kh, vh, kd, vd, k = (
        r["linear_num_key_heads"],
        r["linear_num_value_heads"],
        r["linear_key_head_dim"],
        r["linear_value_head_dim"],
        r["linear_conv_kernel_dim"],
    )
    conv = (k - 1, (2 * kh * kd + vh * vd) // tp)
    ssm = (vh // tp, vd, kd)
    caches = _by_name(m, Options(tensor_parallel_size=tp))
    gdn = caches["model.layers.0.linear_attn"]
    assert [p.shape for p in gdn.parts] == [conv, ssm]
    assert [p.dtype for p in gdn.parts] == ["bf16", "bf16"]
    state = 2 * math.prod(conv) + 2 * math.prod(ssm)
    kv = max(1, r["num_key_value_heads"] // tp)
    token = kv * r["head_dim"] * 2 * 2
    block = _attn_block(state, token, kba=math.lcm(16, 64))  # align mode: GDN checkpoint alignment 64
    p = plan(m, tensor_parallel_size=tp)
    # The attention token bytes shrink with TP too (Platform._align_hybrid_block_size takes
    # ModelConfig.get_num_kv_heads(parallel_config) = max(1, 2 // tp)), so the block stays 576 at
    # TP 2 and is 320 at TP 4. (320 at TP 2 / 192 at TP 4 would need the 2 KV heads unsplit.)
    assert p.tokens_per_block == block == {1: 576, 2: 576, 4: 320}[tp]
    assert caches["model.layers.3.self_attn.attn"].num_kv_heads == kv


def test_qwen3_next_tp_refused():
    m = load("qwen3-next-80b-a3b")
    with pytest.raises(KvvizError, match="tensor_parallel_size=3"):
        plan(m, tensor_parallel_size=3)


def _preset_raw(name):
    return json.loads((Path(__file__).parents[1] / "kvviz" / "presets" / f"{name}.json").read_text())


def test_falcon_h1_two_caches_per_layer():
    """falcon_h1.py FalconH1ParallelHybrid: attention model.layers.{i}.attn, then Mamba-2 model.{L+i}.mixer."""
    r = _preset_raw("falcon-h1")
    m = load("falcon-h1")
    L = r["num_hidden_layers"]
    caches = m.reader.caches(m, Options())
    assert [c.name for c in caches[:4]] == [
        "model.layers.0.attn",
        f"model.{L}.mixer",
        "model.layers.1.attn",
        f"model.{L + 1}.mixer",
    ]
    assert len(caches) == 2 * L
    inter = r["mamba_d_ssm"]  # mamba_d_ssm given, else mamba_expand * hidden_size
    groups = r["mamba_n_groups"]
    conv = (r["mamba_d_conv"] - 1, inter + 2 * groups * r["mamba_d_state"])
    ssm = (r["mamba_n_heads"], r["mamba_d_head"], r["mamba_d_state"])
    assert [p.shape for p in caches[1].parts] == [conv, ssm]
    state = 2 * math.prod(conv) + 2 * math.prod(ssm)  # no dtype override: bf16 SSM
    token = r["num_key_value_heads"] * r["head_dim"] * 2 * 2
    block = _attn_block(state, token)  # Mamba-2: no checkpoint alignment, kba 16 in both modes
    for pc in (True, False):
        p = plan(m, prefix_caching=pc)
        assert p.tokens_per_block == block == 1568
        pages = {c.page_bytes for g in p.layout.groups for c in g.layers}
        assert pages == {block * token}


def test_mamba2_tp2_nemotron_h():
    """mamba2_state_shape at TP 2: n_groups 8 divides 2 (no extra groups); heads 128 / 2;
    ssm dtype float32 (NemotronHForCausalLMConfig.update_mamba_ssm_cache_dtype)."""
    r = _preset_raw("nemotron-nano-9b-v2")
    m = load("nemotron-nano-9b-v2")
    for tp in (1, 2):
        inter = r["mamba_num_heads"] * r["mamba_head_dim"]
        conv = (r["conv_kernel"] - 1, (inter + 2 * r["n_groups"] * r["ssm_state_size"]) // tp)
        ssm = (r["mamba_num_heads"] // tp, r["mamba_head_dim"], r["ssm_state_size"])
        c = _by_name(m, Options(tensor_parallel_size=tp))["model.layers.0.mixer"]
        assert [p.shape for p in c.parts] == [conv, ssm]
        assert [p.dtype for p in c.parts] == ["bf16", "fp32"]
        state = 2 * math.prod(conv) + 4 * math.prod(ssm)
        token = (r["num_key_value_heads"] // tp) * r["head_dim"] * 2 * 2
        assert plan(m, tensor_parallel_size=tp).tokens_per_block == _attn_block(state, token)


def test_mamba2_extra_groups_granite_tp2():
    """extra_groups_for_head_shards: n_groups 1 at TP 2 grows to 2 groups before the split."""
    r = _preset_raw("granite-4.0-h")
    m = load("granite-4.0-h")
    inter = r["mamba_expand"] * r["hidden_size"]
    groups = 1 + (2 - 1)
    conv = (r["mamba_d_conv"] - 1, (inter + 2 * groups * r["mamba_d_state"]) // 2)
    ssm = (r["mamba_n_heads"] // 2, r["mamba_d_head"], r["mamba_d_state"])
    c = _by_name(m, Options(tensor_parallel_size=2))["model.layers.0.mixer"]
    assert [p.shape for p in c.parts] == [conv, ssm]
    state1 = (
        2 * (3 * (inter + 2 * r["mamba_d_state"])) + 2 * r["mamba_n_heads"] * r["mamba_d_head"] * r["mamba_d_state"]
    )
    token = r["num_key_value_heads"] * (r["hidden_size"] // r["num_attention_heads"]) * 2 * 2
    assert plan(m).tokens_per_block == _attn_block(state1, token) == 528


def test_jamba_linear_attention_is_mamba1():
    """transformers 5 names Jamba's mamba layers 'linear_attention': they are Mamba-1 (jamba.py)."""
    m = load("jamba-v0.1")
    kinds = {c.mamba_type for c in m.reader.caches(m, Options()) if hasattr(c, "mamba_type")}
    assert kinds == {"mamba1"}
    g = load("granite-4.0-h")
    assert {c.mamba_type for c in g.reader.caches(g, Options()) if hasattr(c, "mamba_type")} == {"mamba2"}


def test_zamba2_names_and_pages():
    """zamba2.py: shared attention blocks registered first as model.attn.{j} (block b from
    b*(H+M-1)//M), then {H+i}.mixer for every layer; attention heads = num_attention_heads with
    head_size attention_head_dim = 2*hidden/heads (transformers Zamba2Config)."""
    r = _preset_raw("zamba2")
    m = load("zamba2")
    kinds = r["layers_block_type"]
    H, M, L = kinds.count("hybrid"), r["num_mem_blocks"], r["num_hidden_layers"]
    caches = m.reader.caches(m, Options())
    attn = [f"model.attn.{j}" for j in range(H)]
    assert [c.name for c in caches[:H]] == [
        n
        for b in range(M)
        for n in [f"model.attn.{j}" for j in range(b * (H + M - 1) // M, b * (H + M - 1) // M + len(range(b, H, M)))]
    ]
    assert sorted(c.name for c in caches[:H]) == sorted(attn)
    assert [c.name for c in caches[H:]] == [f"{H + i}.mixer" for i in range(L)]
    inter = r["mamba_expand"] * r["hidden_size"]
    conv = (r["mamba_d_conv"] - 1, inter + 2 * r["mamba_ngroups"] * r["mamba_d_state"])
    ssm = (r["n_mamba_heads"], inter // r["n_mamba_heads"], r["mamba_d_state"])
    assert [p.shape for p in caches[H].parts] == [conv, ssm]
    head = 2 * r["hidden_size"] // r["num_attention_heads"]
    token = r["num_attention_heads"] * head * 2 * 2
    state = 2 * math.prod(conv) + 2 * math.prod(ssm)
    for pc in (True, False):
        p = plan(m, prefix_caching=pc)
        assert p.tokens_per_block == _attn_block(state, token) == 48
        assert {c.page_bytes for g in p.layout.groups for c in g.layers} == {48 * token}


def test_lfm2_has_no_ssm_knob():
    m = load("lfm2-1.2b")
    assert "mamba_ssm_dtype" not in m.reader.knobs_for(m)
    with pytest.raises(KvvizError, match="mamba_ssm_dtype"):
        plan(m, mamba_ssm_dtype="float32")


def test_qwen3_5_fp32_ssm_and_wrapper_names():
    """Qwen3_5ForConditionalGenerationConfig: the text config's mamba_ssm_dtype (float32) is the
    SSM dtype; the ConditionalGeneration wrapper names layers language_model.model.layers.{i}."""
    r = _preset_raw("qwen3.5")["text_config"]
    m = load("qwen3.5")
    caches = _by_name(m)
    c = caches["language_model.model.layers.0.linear_attn"]
    conv = (
        r["linear_conv_kernel_dim"] - 1,
        2 * r["linear_num_key_heads"] * r["linear_key_head_dim"]
        + r["linear_num_value_heads"] * r["linear_value_head_dim"],
    )
    ssm = (r["linear_num_value_heads"], r["linear_value_head_dim"], r["linear_key_head_dim"])
    assert [p.shape for p in c.parts] == [conv, ssm]
    assert [p.dtype for p in c.parts] == ["bf16", "fp32"]
    assert "language_model.model.layers.3.self_attn.attn" in caches
    state = 2 * math.prod(conv) + 4 * math.prod(ssm)
    token = r["num_key_value_heads"] * r["head_dim"] * 2 * 2
    assert plan(m).tokens_per_block == _attn_block(state, token, kba=64) == 1088
    assert plan(m, prefix_caching=False).tokens_per_block == _attn_block(state, token) == 1056
    # an explicit --mamba-ssm-dtype wins over the config's
    assert plan(m, mamba_ssm_dtype="bfloat16").tokens_per_block == 576


@pytest.mark.parametrize("tp", [1, 2])
def test_kimi_linear(tp):
    """kimi_k3/nvidia/model.py: layer i is KDA iff i+1 in kda_layers; kda_state_shape; recurrent
    fp32; MLA (576 latent, not sharded) makes kba max(16, 128) = 128."""
    r = _preset_raw("kimi-linear")
    lac = r["linear_attn_config"]
    m = load("kimi-linear")
    caches = m.reader.caches(m, Options(tensor_parallel_size=tp))
    kda = [c for c in caches if hasattr(c, "mamba_type")]
    mla = [c for c in caches if not hasattr(c, "mamba_type")]
    assert [c.layer + 1 for c in kda] == lac["kda_layers"]
    assert [c.layer + 1 for c in mla] == lac["full_attn_layers"]
    assert all(c.name == f"model.layers.{c.layer}.self_attn" for c in caches)
    proj = lac["num_heads"] * lac["head_dim"]
    conv = (lac["short_conv_kernel_size"] - 1, 3 * proj // tp)
    rec = (lac["num_heads"] // tp, lac["head_dim"], lac["head_dim"])
    assert [p.shape for p in kda[0].parts] == [conv, rec]
    assert [p.dtype for p in kda[0].parts] == ["bf16", "fp32"]
    state = 2 * math.prod(conv) + 4 * math.prod(rec)
    token = (r["kv_lora_rank"] + r["qk_rope_head_dim"]) * 2
    assert mla[0].token_bytes == token
    block = _attn_block(state, token, kba=128)
    assert plan(load("kimi-linear"), tensor_parallel_size=tp).tokens_per_block == block == {1: 1920, 2: 1024}[tp]


def test_missing_field_is_one_line():
    raw = _preset_raw("kimi-linear")  # read without transformers: no class default fills it in
    del raw["linear_attn_config"]["head_dim"]
    from kvviz.families import model_from_dict

    with pytest.raises(KvvizError) as e:
        model_from_dict(raw, name="x")
    assert "linear_attn_config.head_dim" in str(e.value) and "\n" not in str(e.value)


def test_describe_one_line():
    for name in (
        "jamba-v0.1",
        "nemotron-nano-9b-v2",
        "lfm2-1.2b",
        "falcon-h1",
        "granite-4.0-h",
        "zamba2",
        "qwen3.5",
        "kimi-linear",
        "qwen3-next-80b-a3b",
    ):
        m = load(name)
        assert m.family == "state" and "\n" not in m.describe() and name in m.describe()


def cli_plan(path, budget: int, *, prefix_caching: bool) -> dict:
    """`kvviz plan --hf-config PATH --json --context 32768 --budget-bytes B [--no-prefix-caching]`."""
    import contextlib
    import io

    from kvviz.cli import main

    out = io.StringIO()
    argv = ["plan", "--hf-config", str(path), "--json", "--context", str(CONTEXT), "--budget-bytes", str(budget)]
    with contextlib.redirect_stdout(out):
        rc = main(argv + ([] if prefix_caching else ["--no-prefix-caching"]))
    assert rc in (0, None)
    return json.loads(out.getvalue())


def check_cli_against_vllm(case: dict) -> None:
    v = case["plan"]
    pc = case["config"]["enable_prefix_caching"]
    for budget_name, budget in BUDGETS.items():
        d = cli_plan(DATA / case["config_path"], budget, prefix_caching=pc)
        assert d["tokens_per_block"] == case["config"]["block_size"]
        assert d["block_stride"] == v["bytes_per_block"]
        got = [[(lay["name"], lay["page_bytes"]) for lay in g["layers"]] for g in d["groups"]]
        want = [[(n, g["page_size_bytes"][0]) for n in g["layer_names"]] for g in v["groups"]]
        assert got == want
        vb = v["budgets"][budget_name]
        vc = vb["capacity"][MNBT]
        assert d["num_blocks"] == vb["num_blocks"]
        s = d["summary"]
        assert s["blocks_per_request"] == vc["blocks_per_request"]
        assert [g["blocks_per_request"] for g in s["groups"]] == vc["blocks_per_request_per_group"]
        assert s["kv_cache_tokens"] == vc["gpu_kv_cache_size_tokens"]
        assert s["max_concurrency"] == pytest.approx(vc["max_concurrency"], abs=5e-4)


@pytest.mark.parametrize("case", STATE_CASES, ids=[c["case"] for c in STATE_CASES])
def test_cli_matches_vllm(case):
    check_cli_against_vllm(case)


# -- issue 27: pure Mamba models, LFM2-MoE, OLMo-hybrid (vLLM's own plans: tests/test_registry_plans.py) --------

REGISTRY = DATA / "registry" / "configs"


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_mamba2_pure_tp(tp):
    """Mamba2ForCausalLM (mamba2.py get_mamba_state_shape_from_config): intermediate = expand x hidden_size,
    mamba2_state_shape: conv (conv_kernel - 1, (intermediate + 2 x n_groups x state_size) / tp), ssm
    (num_heads / tp, head_dim, state_size); n_groups % tp == 0 here, so no extra groups. Every layer's
    mixer at backbone.layers.{i}.mixer, no attention; attention-free (IsAttentionFree), so prefix caching
    is off by default: 'none' mode, one block of max_model_len tokens a request."""
    raw = json.loads(
        (REGISTRY / "Mamba2ForCausalLM" / "config.json").read_text(encoding="utf-8").replace("Infinity", "1e30")
    )
    m = load_path(REGISTRY / "Mamba2ForCausalLM")
    inter = raw["expand"] * raw["hidden_size"]
    conv = (raw["conv_kernel"] - 1, (inter + 2 * raw["n_groups"] * raw["state_size"]) // tp)
    ssm = (raw["num_heads"] // tp, raw["head_dim"], raw["state_size"])
    caches = m.reader.caches(m, Options(tensor_parallel_size=tp))
    assert [c.name for c in caches] == [f"backbone.layers.{i}.mixer" for i in range(raw["num_hidden_layers"])]
    assert {tuple(tuple(p.shape) for p in c.parts) for c in caches} == {(conv, ssm)}
    p = plan_model(m, options=Options(tensor_parallel_size=tp))
    assert p.scheduling.mamba_cache_mode == "none"
    # MambaModelConfig.verify_and_update_config: mamba_block_size = max_model_len without prefix caching
    assert {c.tokens_per_block for g in p.layout.groups for c in g.layers} == {m.max_model_len}
    assert p.layout.block_stride == raw["num_hidden_layers"] * 2 * (math.prod(conv) + math.prod(ssm))


def test_mamba1_falcon_mamba_reads_like_mamba():
    """registry.py maps FalconMambaForCausalLM to mamba.py's MambaForCausalLM: mamba1_state_shape
    (conv (conv_kernel - 1, intermediate), ssm (intermediate, state_size)) with transformers'
    intermediate_size = expand x hidden_size; prefix caching given explicitly turns 'align' mode on."""
    raw = json.loads((REGISTRY / "FalconMambaForCausalLM" / "config.json").read_text(encoding="utf-8"))
    m = load_path(REGISTRY / "FalconMambaForCausalLM")
    inter = raw["expand"] * raw["hidden_size"]
    c = m.reader.caches(m, Options())[0]
    assert c.name == "backbone.layers.0.mixer" and c.mamba_type == "mamba1"
    assert [tuple(p.shape) for p in c.parts] == [(raw["conv_kernel"] - 1, inter), (inter, raw["state_size"])]
    assert plan(m, prefix_caching=True).scheduling.mamba_cache_mode == "align"


def test_mamba2_intermediate_size_disagreeing_is_refused():
    from kvviz.families.loader import model_from_dict

    raw = json.loads(
        (REGISTRY / "Mamba2ForCausalLM" / "config.json").read_text(encoding="utf-8").replace("Infinity", "1e30")
    )
    raw["intermediate_size"] = 1000
    with pytest.raises(KvvizError, match="intermediate_size=1000"):
        model_from_dict(raw, name="m2")


@pytest.mark.parametrize("tp", [1, 2])
def test_lfm2_moe_hand_derived(tp):
    """LFM2-MoE (lfm2_moe.py; vLLM could not build transformers' default config, whose layer_types is None,
    so this is derived by hand). Lfm2MoeShortConvDecoderLayer: ShortConv(dim=config.hidden_size) at
    `model.layers.{i}.short_conv`, get_mamba_state_shape_from_config short_conv_state_shape(intermediate_size=
    hidden_size): conv (conv_L_cache - 1, hidden_size / tp); Lfm2MoeAttention: head_dim = hidden_size //
    num_attention_heads, KV heads num_key_value_heads / tp, at `model.layers.{i}.self_attn.attn`. Short conv
    has no checkpoint alignment: the attention block is the smallest multiple of 16 whose page holds a state."""
    from kvviz.families.loader import model_from_dict

    full = {2, 6, 10, 14, 18, 21}  # a layer mix of our own choosing: 6 attention layers of 24
    raw = {
        "architectures": ["Lfm2MoeForCausalLM"],
        "model_type": "lfm2_moe",
        "hidden_size": 2048,
        "num_hidden_layers": 24,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "conv_L_cache": 3,
        "max_position_embeddings": 128000,
        "dtype": "bfloat16",
        "layer_types": ["full_attention" if i in full else "conv" for i in range(24)],
    }
    m = model_from_dict(raw, name="lfm2-moe")
    caches = m.reader.caches(m, Options(tensor_parallel_size=tp))
    assert [c.name for c in caches] == [
        f"model.layers.{i}.self_attn.attn" if i in full else f"model.layers.{i}.short_conv" for i in range(24)
    ]
    state = 2 * (3 - 1) * (2048 // tp)
    token = 2 * (8 // tp) * (2048 // 32) * 2  # K and V, bf16
    p = plan(m, tensor_parallel_size=tp)
    assert p.tokens_per_block == _attn_block(state, token)
    assert {c.page_bytes for g in p.layout.groups for c in g.layers} == {p.tokens_per_block * token}
