"""The hostile campaign's defects (issue 29), each reproduced: writes that follow a planted link,
OSErrors as tracebacks, silently renamed or ignored paths, absurd or zero sizes taken as given,
bare exceptions from render_report, errors echoing unbounded input."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kvviz.base.errors import KvvizError
from kvviz.cli.main import main

ROOT = Path(__file__).resolve().parent.parent
COMPARE = ["compare", "--model", "llama-3.1-8b", "--budget-gib", "10", "--engines", "vllm,sglang"]


def _run(*argv, cwd=None, stdout=subprocess.PIPE):
    return subprocess.run(
        [sys.executable, "-m", "kvviz", *argv],
        cwd=cwd or ROOT,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )


def test_engines_figure_never_writes_through_a_link(tmp_path, capsys):
    target = tmp_path / "target.png"
    target.write_text("not yours")
    (tmp_path / "fig.png").symlink_to(target)
    assert main(COMPARE + ["--figure", str(tmp_path / "fig.png")]) == 2
    assert "symbolic link" in capsys.readouterr().err
    assert target.read_text() == "not yours"


def test_engines_figure_is_written_staged(tmp_path, capsys):
    out = tmp_path / "fig.png"
    assert main(COMPARE + ["--figure", str(out)]) == 0
    assert out.read_bytes()[:4] == b"\x89PNG" and not [p for p in tmp_path.iterdir() if p.name.startswith(".kvviz")]


@pytest.mark.parametrize(
    "name, needle",
    [("missing/fig.png", "does not exist"), ("folder", "name the file with its format"), ("fig", "format")],
)
def test_engines_figure_path_problems_are_one_line(tmp_path, capsys, name, needle):
    (tmp_path / "folder").mkdir()
    assert main(COMPARE + ["--figure", str(tmp_path / name)]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "folder.png").exists() and not (tmp_path / "fig.png").exists()  # never renamed


def test_figure_without_engines_is_refused(tmp_path, capsys):
    assert main(["compare", "--model", "llama-3.1-8b", "--budget-gib", "10", "--figure", str(tmp_path / "f.png")]) == 2
    assert "--figure: applies with --engines" in capsys.readouterr().err


def test_output_to_a_full_device_is_one_line():
    with open("/dev/full", "w") as full:
        out = _run("plan", "--model", "llama-3.1-8b", stdout=full)
    assert out.returncode == 1
    assert out.stderr.strip() == "kvviz: error: No space left on device (writing the output)"


@pytest.mark.parametrize("path", ["a" * 5000, "a/" * 3000])
def test_a_path_too_long_is_one_line(path):
    out = _run("plan", "--hf-config", path)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert "--hf-config" in out.stderr and len(out.stderr) < 200  # the path is not echoed whole


def test_errors_echo_bounded_input(tmp_path, capsys):
    assert main(["render", "--model", "llama-3.1-8b", "--no-svg", "--out", str(tmp_path / ("b" * 300) / "c")]) != 0
    assert len(capsys.readouterr().err) < 300
    assert main(COMPARE[:-1] + ["vllm," + "x" * 5000]) == 2
    assert len(capsys.readouterr().err) < 300


def test_render_into_another_models_report_leaves_none_of_its_figures(tmp_path, capsys):
    out = tmp_path / "report"
    assert main(["render", "--model", "deepseek-v3", "--no-svg", "--out", str(out)]) == 0
    first = {p.name for p in out.iterdir()}
    capsys.readouterr()
    assert main(["render", "--model", "llama-3.1-8b", "--no-svg", "--out", str(out)]) == 0
    written = {Path(line).name for line in capsys.readouterr().out.split() if line.endswith((".png", ".html"))}
    assert {p.name for p in out.iterdir()} == written and first - written  # the old anatomies went


def test_a_users_own_files_beside_a_report_stay(tmp_path):
    (tmp_path / "notes.png").write_text("mine")
    assert main(["render", "--model", "llama-3.1-8b", "--no-svg", "--out", str(tmp_path)]) == 0
    assert main(["render", "--model", "deepseek-v3", "--no-svg", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "notes.png").read_text() == "mine"


@pytest.mark.parametrize(
    "kwargs, needle",
    # title=None is the default now: render_report titles the report from the plan (issue 29, test_plan_everywhere)
    [(dict(out_dir=None, title="t"), "out_dir=None"), (dict(title=7), "title=7"), (dict(title=b"t"), "title=b")],
)
def test_render_report_bad_arguments_are_one_line(tmp_path, kwargs, needle):
    import kvviz
    from kvviz.views.report import render_report

    layout = kvviz.plan(kvviz.load("llama-3.1-8b")).pools[0]
    args = dict(out_dir=tmp_path, title="t") | kwargs
    with pytest.raises(KvvizError, match=needle):
        render_report(args.pop("out_dir"), layout=layout, **args)


def _read(name, **changes):
    from kvviz.families import preset_raw
    from kvviz.families.loader import model_from_dict

    raw = preset_raw(name)
    part = raw["text_config"] if isinstance(raw.get("text_config"), dict) else raw
    for key, value in changes.items():
        outer, _, inner = key.partition("__")
        (part[outer].__setitem__(inner, value) if inner else part.__setitem__(key, value))
    return model_from_dict(raw, name=name)


@pytest.mark.parametrize(
    "name, field",
    [
        ("qwen3-next-80b-a3b", "head_dim"),
        ("nemotron-nano-9b-v2", "head_dim"),
        ("falcon-h1", "head_dim"),
        ("zamba2", "head_dim"),
        ("kimi-linear", "kv_lora_rank"),
        ("kimi-linear", "linear_attn_config__head_dim"),
        ("deepseek-v3", "kv_lora_rank"),
        ("jamba-v0.1", "mamba_d_state"),
    ],
)
def test_absurd_sizes_are_refused_per_field(name, field):
    with pytest.raises(KvvizError, match=field.replace("__", ".") + "=9223372036854775808: must be from 1"):
        _read(name, **{field: 2**63})


def test_zero_head_dim_is_derived_as_vllm_does():
    # vLLM 0.33 get_head_size takes head_dim only when > 0, else hidden_size // num_attention_heads
    model = _read("llama-3.1-8b", head_dim=0)
    assert model.config.head_dim == 4096 // 32


def test_zero_sliding_window_means_none_as_vllm_does():
    # vLLM 0.33 ModelConfig.__post_init__: sliding_window 0 -> None (disabled): every layer full attention
    model = _read("gemma-3-27b", sliding_window=0)
    assert set(model.config.layer_kinds) == {"full_attention"} and model.config.sliding_window is None
    assert model.max_model_len == 131072  # not capped to the window
