"""`kvviz plan | compare | render` on hybrid models, in process (`kvviz.cli.main`).

Expected numbers are built here by hand from the preset's own fields and the rules of
docs/hybrid.md (#hybrid-caches for page sizes, #hybrid-grouping for the groups); bad input ends
with exit status 2 and one line naming the option.
"""

from __future__ import annotations

import json
from importlib.resources import files

import pytest

from kvviz.cli import main

BF16 = 2
KERNEL_BLOCK = 16  # the attention kernels' block (and vLLM's default block size)


def preset(name: str) -> dict:
    return json.loads((files("kvviz") / "presets" / f"{name}.json").read_text())


def run(capsys, *argv) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def refused(capsys, *argv) -> str:
    """The one error line of a refused command (exit status 2)."""
    rc, out, err = run(capsys, *argv)
    assert rc == 2, (rc, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kvviz: error: "), err
    return lines[0]


def gpt_oss_by_hand() -> tuple[int, int, list[int]]:
    """(page, block stride, group sizes): layer_types gives 18 sliding + 18 full layers; two
    buckets of 18 -> group size 18 -> one group each; a block holds 18 pages of 16 tokens."""
    c = preset("gpt-oss-120b")
    page = KERNEL_BLOCK * c["num_key_value_heads"] * c["head_dim"] * 2 * BF16
    kinds = c["layer_types"]
    buckets = [kinds.count("sliding_attention"), kinds.count("full_attention")]
    assert sum(buckets) == c["num_hidden_layers"]
    return page, max(buckets) * page, buckets


def check_gpt_oss_plan(data: dict) -> None:
    page, stride, buckets = gpt_oss_by_hand()
    assert data["block_stride"] == stride == 589_824
    assert [len(g["layers"]) for g in data["groups"]] == buckets == [18, 18]
    for g in data["groups"]:
        assert [lay["offset"] for lay in g["layers"]] == [i * page for i in range(len(g["layers"]))]
        assert {lay["page_bytes"] for lay in g["layers"]} == {page}
    assert [t["offset"] for t in data["tensors"]] == [0, 0]  # every group's tensor starts at byte 0


def test_plan_gpt_oss_json(capsys):
    rc, out, _ = run(capsys, "plan", "--model", "gpt-oss-120b", "--json")
    assert rc == 0
    check_gpt_oss_plan(json.loads(out))


def test_plan_from_an_hf_config_folder_matches_the_preset(capsys, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(preset("gpt-oss-120b")))
    rc, out, _ = run(capsys, "plan", "--hf-config", str(tmp_path), "--json")
    assert rc == 0
    from_file = json.loads(out)
    check_gpt_oss_plan(from_file)
    _, out, _ = run(capsys, "plan", "--model", "gpt-oss-120b", "--json")
    from_preset = json.loads(out)
    for d in (from_file, from_preset):
        d.pop("model")
    assert from_file == from_preset


def test_compare_qwen3_next_without_prefix_caching(capsys):
    """Mode 'none': the block is the smallest multiple of 16 tokens whose attention page holds a
    state; 12 full-attention pages per block."""
    c = preset("qwen3-next-80b-a3b")
    per_token = c["num_key_value_heads"] * c["head_dim"] * 2 * BF16
    conv_dim = (
        2 * c["linear_num_key_heads"] * c["linear_key_head_dim"]
        + c["linear_num_value_heads"] * c["linear_value_head_dim"]
    )
    state = (
        (c["linear_conv_kernel_dim"] - 1) * conv_dim
        + c["linear_num_value_heads"] * c["linear_value_head_dim"] * c["linear_key_head_dim"]
    ) * BF16
    tokens = -(-state // (KERNEL_BLOCK * per_token)) * KERNEL_BLOCK
    full = c["num_hidden_layers"] // c["full_attention_interval"]
    assert (state, tokens, tokens * per_token) == (1_097_728, 544, 1_114_112)
    rc, out, _ = run(
        capsys,
        "compare",
        "--model",
        "qwen3-next-80b-a3b",
        "--no-prefix-caching",
        "--context",
        "32768",
        "--budget-gib",
        "40",
        "--json",
    )
    assert rc == 0
    data = json.loads(out)
    assert [p["planner"] for p in data["layouts"]] == ["vllm", "packed", "separate"]
    vllm = data["layouts"][0]
    assert vllm["tokens_per_block"] == tokens
    assert vllm["bytes_per_block"] == full * tokens * per_token == 13_369_344
    assert data["budget_bytes"] == 40 * 2**30 and data["max_model_len"] == 32_768


def test_deepseek_knob_with_a_hybrid_model(capsys):
    line = refused(capsys, "plan", "--model", "gpt-oss-120b", "--indexer", "fp8")
    assert "--indexer" in line and "gpt-oss-120b" in line


def test_hybrid_knob_with_deepseek(capsys):
    line = refused(capsys, "plan", "--model", "deepseek-v4-flash", "--kv-dtype", "fp8")
    assert "--kv-dtype" in line


def test_a_planner_the_family_lacks(capsys):
    # bucketed is vLLM's pre-#48993 planner of DeepSeek V4 (DeepSeek V4 now has separate pools too)
    line = refused(capsys, "plan", "--model", "gpt-oss-120b", "--planner", "bucketed")
    assert "planner" in line and "'bucketed'" in line and "gpt-oss-120b" in line


def test_unknown_architecture(capsys, tmp_path):
    (tmp_path / "config.json").write_text(
        json.dumps({"model_type": "bert", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 2})
    )
    line = refused(capsys, "plan", "--hf-config", str(tmp_path))
    assert "bert" in line and "model_type" in line


def test_render_gemma_writes_block_map_and_pool_planes(capsys, tmp_path):
    rc, out, _ = run(capsys, "render", "--model", "gemma-3-27b", "--out", str(tmp_path), "--no-svg")
    assert rc == 0
    written = {p.split("/")[-1] for p in out.split()}
    assert {"block-map.png", "pool-planes.png", "report.html"} <= written
    # issue 37: Gemma 3's pages are one size, so packed is vLLM's layout: no before/after of two equal panels
    assert "before-after.png" not in written and out.startswith("no before/after: packed gives vllm's layout here")
    for name in ("block-map.png", "pool-planes.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert 'id="pool-planes"' in (tmp_path / "report.html").read_text()


def test_render_separate_writes_one_folder_per_pool(capsys, tmp_path):
    rc, _, _ = run(
        capsys, "render", "--model", "qwen3-next-80b-a3b", "--planner", "separate", "--out", str(tmp_path), "--no-svg"
    )
    assert rc == 0
    # One pool per cache kind: Qwen3-Next has linear-attention state and full attention.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pool-full", "pool-state"]
    for pool in tmp_path.iterdir():
        assert {"block-map.png", "pool-planes.png", "report.html"} <= {p.name for p in pool.iterdir()}


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["plan", "--model", "qwen3-next-80b-a3b", "--sliding-window", "64"], "--sliding-window"),
        (["plan", "--model", "gpt-oss-120b", "--mamba-ssm-dtype", "float32"], "--mamba-ssm-dtype"),
        (["plan", "--model", "gpt-oss-120b", "--no-prefix-caching"], "--no-prefix-caching"),
        (["plan", "--model", "gpt-oss-120b", "--head-dim", "64"], "--head-dim"),
        (["render", "--model", "gpt-oss-120b", "--no-prefix-caching", "--out", "OUT"], "--no-prefix-caching"),
    ],
)
def test_hybrid_knobs_that_change_nothing_are_refused(capsys, tmp_path, argv, needle):
    err = refused(capsys, *[str(tmp_path / "out") if a == "OUT" else a for a in argv])
    assert err.startswith(f"kvviz: error: {needle}")
    assert not (tmp_path / "out").exists()


def test_separate_pools_need_a_block_each_from_their_share(capsys):
    # Qwen3-Next's separate pools split the budget by one request's need (docs/hybrid.md#separate-pools):
    # a budget of exactly the two pools' block strides leaves the state pool less than one block.
    data = json.loads(run(capsys, "plan", "--model", "qwen3-next-80b-a3b", "--planner", "separate", "--json")[1])
    strides = {g["name"]: g["block_stride"] for g in data["groups"]}
    err = refused(
        capsys,
        "plan",
        "--model",
        "qwen3-next-80b-a3b",
        "--planner",
        "separate",
        "--budget-bytes",
        str(sum(strides.values())),
    )
    assert "pool 'state'" in err and f"{strides['state']:,} B" in err


def test_deepseek_compare_takes_the_block_size(capsys):
    by_default = json.loads(
        run(capsys, "compare", "--model", "deepseek-v4-pro", "--backend", "flashmla", "--budget-gib", "26", "--json")[1]
    )
    half = json.loads(
        run(
            capsys,
            "compare",
            "--model",
            "deepseek-v4-pro",
            "--backend",
            "flashmla",
            "--budget-gib",
            "26",
            "--block-size",
            "128",
            "--json",
        )[1]
    )
    # half the tokens per block: c4 pages hold half the rows, so the overlay stride shrinks
    assert half["after"]["block_stride"] < by_default["after"]["block_stride"]
