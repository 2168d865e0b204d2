"""The `kvviz` command: output shapes and one-line errors with exit status 2."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kvviz.base.published import PUBLISHED_TABLE
from kvviz.cli import main
from kvviz.families import PRESETS_DIR as MODELS_DIR
from kvviz.families import load_preset as load_model
from kvviz.options import Options
from kvviz.vllm.plan import plan_model


def compare_layouts(model, backend):
    """vLLM #48993's before/after for one backend: bucketed + FP8 indexer vs overlay + MXFP4."""
    return (
        plan_model(model, "bucketed", Options(backend=backend, indexer_format="fp8")).layout,
        plan_model(model, "overlay", Options(backend=backend, indexer_format="mxfp4")).layout,
    )


VLLM = json.loads((Path(__file__).parent / "data" / "vllm-0.33-deepseek-v4-pro.json").read_text())


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_plan_json_shape(capsys):
    code, out, _ = run(
        capsys, "plan", "--model", "deepseek-v4-pro", "--planner", "overlay", "--budget-gib", "26.09", "--json"
    )
    assert code == 0
    doc = json.loads(out)
    assert doc["block_stride"] == 1_315_008 and doc["planner"] == "overlay"
    assert doc["num_blocks"] == 28_013_924_188 // 1_315_008
    full = next(g for g in doc["groups"] if g["name"] == "full")
    assert full["total_bytes"] == 1_315_008
    assert set(full["layers"][0]) == {"name", "kind", "offset", "page_bytes"}
    offsets = [t["offset"] for t in doc["tensors"]]
    assert offsets == sorted(set(offsets))


def test_plan_json_without_budget_has_null_blocks(capsys):
    code, out, _ = run(capsys, "plan", "--model", "deepseek-v4-flash", "--json")
    assert code == 0 and json.loads(out)["num_blocks"] is None


def test_plan_overlay_by_spec_json_matches_vllm(capsys):
    case = next(c for c in VLLM["cases"] if (c["backend"], c["indexer"]) == ("flashinfer", "fp8"))
    code, out, _ = run(
        capsys,
        "plan",
        "--model",
        "deepseek-v4-pro",
        "--backend",
        "flashinfer",
        "--indexer",
        "fp8",
        "--planner",
        "overlay-by-spec",
        "--budget-bytes",
        "28411208663",
        "--json",
    )
    doc = json.loads(out)
    assert doc["block_stride"] == case["bytes_per_block"]
    assert doc["num_blocks"] == case["budgets"]["26.46GiB"]["num_blocks"]
    assert [t["shared_by"] for t in doc["tensors"]] == [t["layers"] for t in case["tensors"]]


def test_plan_human_table(capsys):
    code, out, _ = run(capsys, "plan", "--model", "deepseek-v4-pro", "--planner", "bucketed", "--indexer", "fp8")
    assert code == 0
    assert "1,473,408" in out and "c4-state" in out and "sum over page sizes" in out


def test_compare_json(capsys):
    code, out, _ = run(
        capsys, "compare", "--model", "deepseek-v4-pro", "--backend", "flashmla", "--budget-gib", "26.09", "--json"
    )
    doc = json.loads(out)
    assert (doc["before"]["block_stride"], doc["after"]["block_stride"]) == (1_473_408, 1_315_008)
    assert doc["stride_change_pct"] == -10.75
    assert doc["after"]["binding_group"] == "full"
    assert doc["admission_estimate_per_block"] == 1_357_056


def test_compare_human(capsys):
    code, out, _ = run(
        capsys, "compare", "--model", "deepseek-v4-pro", "--backend", "flashinfer", "--budget-gib", "26.46"
    )
    assert code == 0 and "1,228,800" in out and "c4-state" in out and "-6.10%" in out


def test_models_lists_presets(capsys):
    code, out, _ = run(capsys, "models")
    assert code == 0 and "deepseek-v4-pro: 61 layers" in out and "2 SWA-only" in out


def test_models_architectures_prints_docs_models_md(capsys):
    """`kvviz models --architectures` is docs/models.md (vLLM 0.33's registry with kvviz's status)."""
    from pathlib import Path

    code, out, _ = run(capsys, "models", "--architectures")
    assert code == 0 and out == (Path(__file__).resolve().parent.parent / "docs" / "models.md").read_text()
    code, out, _ = run(capsys, "models", "--architectures", "--json")
    data = json.loads(out)
    assert data["counts"]["_MULTIMODAL_MODELS"]["total"] == 127
    whisper = data["tables"]["_MULTIMODAL_MODELS"][-1]
    assert whisper["architecture"] == "WhisperForConditionalGeneration" and whisper["status"] == "planned"


def test_config_file_and_groups_file(capsys, tmp_path):
    cfg = tmp_path / "cfg.json"
    cfg.write_text((MODELS_DIR / "deepseek-v4-pro.json").read_text())
    code, out, _ = run(capsys, "plan", "--config", str(cfg), "--json")
    assert json.loads(out)["block_stride"] == 1_315_008
    groups = tmp_path / "g.json"
    groups.write_text(
        json.dumps(
            {
                "groups": [
                    {"name": "attn", "layers": [{"name": "a0", "page_bytes": 300}, {"name": "a1", "page_bytes": 300}]},
                    {"name": "mamba", "layers": [{"name": "m0", "page_bytes": 500}]},
                ]
            }
        )
    )
    code, out, _ = run(capsys, "plan", "--groups", str(groups), "--json")
    doc = json.loads(out)
    assert doc["block_stride"] == 600 and [t["shared_by"] for t in doc["tensors"]] == [["a0", "m0"], ["a1"]]
    code, out, _ = run(capsys, "plan", "--groups", str(groups), "--planner", "bucketed", "--json")
    assert json.loads(out)["block_stride"] == 600 + 500


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


BAD = [
    (["plan", "--model", "llama-9"], "--model 'llama-9'"),
    (["plan", "--model", "deepseek-v4-pro", "--indexer", "int4"], "indexer_format"),
    (["plan", "--model", "deepseek-v4-pro", "--main-format", "fp16"], "main_format"),
    (["plan", "--model", "deepseek-v4-pro", "--backend", "tpu"], "backend"),
    (["plan", "--model", "deepseek-v4-pro", "--planner", "magic"], "planner"),
    (["plan", "--model", "deepseek-v4-pro", "--indexer", "mxfp4", "--index-head-dim", "100"], "index_head_dim=100"),
    (["plan", "--model", "deepseek-v4-pro", "--head-dim", "0"], "--head-dim"),
    (["plan", "--model", "deepseek-v4-pro", "--budget-gib", "0"], "--budget-gib"),
    (["plan", "--model", "deepseek-v4-pro", "--budget-gib", "-3"], "--budget-gib"),
    (["plan", "--model", "deepseek-v4-pro", "--budget-bytes", "-1"], "--budget-bytes"),
    (["plan", "--model", "deepseek-v4-pro", "--budget-gib", "lots"], "--budget-gib"),
    (["plan"], "required"),
    (["compare", "--model", "deepseek-v4-pro", "--backend", "bogus", "--budget-gib", "1"], "--backend"),
]


@pytest.mark.parametrize("argv,needle", BAD)
def test_bad_input_one_line_exit_2(capsys, argv, needle):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err


@pytest.mark.parametrize(
    "content,needle",
    [
        ('{"groups": []}', "groups is empty"),
        ('{"groups": [{"name": "x", "layers": []}]}', "has no layers"),
        ('{"groups": [{"name": "x", "layers": [{"name": "a", "page_bytes": 0}]}]}', "page_bytes=0"),
        ('{"groups": [{"name": "x", "layers": [{"name": "a", "page_bytes": -4}]}]}', "page_bytes=-4"),
        ('{"groups": [{"name": "x", "layers": [{"name": "a"}]}]}', "missing page_bytes"),
        (
            '{"groups": [{"name": "x", "layers": [{"name": "a", "page_bytes": 8}, {"name": "a", "page_bytes": 8}]}]}',
            "appears twice",
        ),
        ('{"groups": [ {"name": "x",', "malformed JSON"),
        ("[1, 2]", "expected an object"),
    ],
)
def test_bad_groups_file(capsys, tmp_path, content, needle):
    code, _, err = run(capsys, "plan", "--groups", _write(tmp_path, "g.json", content))
    assert code == 2 and err.count("\n") == 1 and needle in err


def test_bad_config_files(capsys, tmp_path):
    raw = json.loads((MODELS_DIR / "deepseek-v4-pro.json").read_text())
    del raw["index_head_dim"]
    code, _, err = run(capsys, "plan", "--config", _write(tmp_path, "c.json", json.dumps(raw)))
    assert code == 2 and "missing field 'index_head_dim'" in err
    code, _, err = run(capsys, "plan", "--config", _write(tmp_path, "d.json", "{not json"))
    assert code == 2 and "malformed JSON" in err
    code, _, err = run(capsys, "plan", "--config", str(tmp_path / "absent.json"))
    assert code == 2 and "cannot read" in err
    raw = json.loads((MODELS_DIR / "deepseek-v4-pro.json").read_text())
    raw["compress_ratios"][5] = 16
    code, _, err = run(capsys, "plan", "--config", _write(tmp_path, "e.json", json.dumps(raw)))
    assert code == 2 and "compress_ratios[5]=16" in err


def test_console_script_and_module_entry_points():
    bindir = Path(sys.executable).parent
    for cmd in ([str(bindir / "kvviz")], [sys.executable, "-m", "kvviz"]):
        ok = subprocess.run(cmd + ["plan", "--model", "deepseek-v4-pro", "--json"], capture_output=True, text=True)
        assert ok.returncode == 0 and json.loads(ok.stdout)["block_stride"] == 1_315_008
        bad = subprocess.run(cmd + ["plan", "--model", "nope"], capture_output=True, text=True)
        assert bad.returncode == 2 and bad.stderr.count("\n") == 1


# ---- compare says where the published counts come from (docs/published-numbers.md#budget-rounding)
@pytest.mark.parametrize("row", PUBLISHED_TABLE, ids=lambda r: r.backend)
def test_compare_names_the_budget_range_behind_the_published_counts(capsys, row):
    code, out, _ = run(
        capsys, "compare", "--model", row.model, "--backend", row.backend, "--budget-gib", str(row.budget_gib)
    )
    assert code == 0
    before, after = compare_layouts(load_model(row.model), row.backend)
    # Derived independently: the budgets B with B // stride == published count, for both strides.
    lo = max(row.blocks_before * before.block_stride, row.blocks_after * after.block_stride)
    hi = min((row.blocks_before + 1) * before.block_stride, (row.blocks_after + 1) * after.block_stride) - 1
    assert lo <= hi
    last = out.rstrip("\n").splitlines()[-1]
    assert f"{row.blocks_before:,} -> {row.blocks_after:,} blocks at {row.budget_gib} GiB" in last
    assert "rounded to 0.01 GiB" in last and f"{lo:,}..{hi:,} B" in last
    code, out, _ = run(
        capsys, "compare", "--model", row.model, "--backend", row.backend, "--budget-bytes", str(lo), "--json"
    )
    doc = json.loads(out)
    assert (doc["before"]["num_blocks"], doc["after"]["num_blocks"]) == (row.blocks_before, row.blocks_after)
    assert doc["published"]["budget_range_bytes"] == [lo, hi]


def test_compare_json_carries_the_budget_as_given(capsys):
    code, out, _ = run(
        capsys, "compare", "--model", "deepseek-v4-pro", "--backend", "flashmla", "--budget-gib", "26.09", "--json"
    )
    doc = json.loads(out)
    assert doc["budget_gib"] == 26.09 and doc["budget_bytes"] == int(26.09 * 2**30) == 28_013_924_188
    code, out, _ = run(
        capsys,
        "compare",
        "--model",
        "deepseek-v4-pro",
        "--backend",
        "flashmla",
        "--budget-bytes",
        "28013924188",
        "--json",
    )
    doc = json.loads(out)
    assert doc["budget_gib"] is None and doc["budget_bytes"] == 28_013_924_188


def test_compare_without_mtp_claims_no_published_counts(capsys):
    code, out, _ = run(
        capsys,
        "compare",
        "--model",
        "deepseek-v4-pro",
        "--backend",
        "flashmla",
        "--no-mtp",
        "--budget-gib",
        "26.09",
        "--json",
    )
    assert code == 0 and json.loads(out)["published"] is None


def test_plan_budget_below_one_block_prints_nothing_but_the_error(capsys):
    for extra in ([], ["--json"]):
        code, out, err = run(capsys, "plan", "--model", "deepseek-v4-pro", "--budget-gib", "1e-12", *extra)
        assert (code, out) == (2, "")
        assert err == "kvviz: error: --budget-gib 1e-12: 0 B is smaller than one block stride (1,315,008 B)\n"


def test_model_knobs_with_groups_are_refused_not_ignored(capsys, tmp_path):
    groups = _write(tmp_path, "g.json", json.dumps({"groups": [{"name": "g", "layers": [{"page_bytes": 64}]}]}))
    code, out, err = run(capsys, "plan", "--groups", groups, "--head-dim", "256")
    assert (code, out) == (2, "") and err.startswith("kvviz: error: --head-dim: a model knob")
    code, out, _ = run(capsys, "plan", "--groups", groups, "--json")
    assert code == 0 and json.loads(out)["block_stride"] == 64


def test_config_option_given_a_groups_file_points_to_groups(capsys, tmp_path):
    groups = _write(tmp_path, "g.json", json.dumps({"groups": [{"name": "g", "layers": [{"page_bytes": 64}]}]}))
    code, _, err = run(capsys, "plan", "--config", groups)
    assert code == 2 and "is a groups file" in err and "--groups" in err


def test_help_lists_every_subcommand(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for command in ("plan", "compare", "models", "render", "verify"):
        assert f"    {command} " in out


def test_a_budget_refusal_names_the_flag_the_budget_came_from():
    """A GPU's budget is named by the GPU flag, not by a --budget-bytes the user never gave ('--budget-bytes None')."""
    import argparse

    from kvviz.cli.budget_args import budget_option

    def given(**flags):
        return argparse.Namespace(
            **({"gpu": None, "gpu_memory_gib": None, "budget_gib": None, "budget_bytes": None} | flags)
        )

    assert budget_option(given(gpu="H100")) == "--gpu H100"
    assert budget_option(given(gpu_memory_gib=80.0)) == "--gpu-memory-gib 80.0"
    assert budget_option(given(budget_gib=1.5)) == "--budget-gib 1.5"
    assert budget_option(given(budget_bytes=4096)) == "--budget-bytes 4096"
