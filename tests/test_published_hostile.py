"""Absurd config values (issue 37 item 6, hostile inputs): each is refused in one line naming the field, or
planned as vLLM 0.33 plans it and said so in the output."""

import contextlib
import copy
import io
import json
from pathlib import Path

import pytest

import kvviz
from kvviz.base.formats import kv_row
from kvviz.cli.main import main as cli_main
from kvviz.families import preset_raw
from kvviz.families.loader import model_from_dict

DATA = Path(__file__).parent / "data" / "vllm-0.33"


def _raw(where: str) -> dict:
    """A preset's config.json, or a reference config under tests/data/vllm-0.33."""
    if "/" not in where:
        return copy.deepcopy(preset_raw(where))
    return json.loads((DATA / where / "config.json").read_text())


def _set(raw: dict, path: str, value) -> dict:
    """`raw` with the dotted field `path` set to `value` (... removes it)."""
    *outer, key = path.split(".")
    part = raw
    for k in outer:
        part = part[k]
    if value is ...:
        part.pop(key, None)
    else:
        part[key] = value
    return raw


def _cli(tmp_path: Path, raw: dict) -> tuple[int, str, str]:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main(["plan", "--hf-config", str(path), "--max-model-len", "8192"])
    return code, out.getvalue(), err.getvalue()


def test_head_dim_zero_is_derived_and_said():
    """llama.py LlamaAttention: `head_dim or hidden_size // total_num_heads` (transformers keeps the 0): the
    plan equals the same config without head_dim (4096 // 32 = 128), and the output says so in a note."""
    raw = _raw("llama-3.1-8b")
    zero = model_from_dict(_set(copy.deepcopy(raw), "head_dim", 0), name="z")
    absent = model_from_dict(_set(copy.deepcopy(raw), "head_dim", ...), name="a")
    assert (
        kvviz.plan(zero).block_stride
        == kvviz.plan(absent).block_stride
        == 32 * kv_row(8, 128, 128, "bf16").row_bytes * 16
    )
    assert any("head_dim 0" in n for n in zero.notes) and not absent.notes
    assert "note: head_dim 0 is read as not given" in kvviz.plan(zero).describe


@pytest.mark.parametrize("form", ["missing", "empty"])
def test_missing_and_empty_text_config_are_read_alike(tmp_path, form):
    """transformers' Gemma3Config builds Gemma3TextConfig() for a text_config that is None or {} (and vLLM 0.33
    serves what transformers built): both are planned alike, as the default text model, and the output says it.
    A field left at the top level that the class does not read is still refused (test_fuzz)."""
    raw = _raw("gemma-3-27b")
    raw = _set(raw, "text_config", ... if form == "missing" else {})
    model = model_from_dict(raw, name="g")
    default = model_from_dict(_set(_raw("gemma-3-27b"), "text_config", {"model_type": "gemma3_text"}), name="g")
    assert kvviz.plan(model).block_stride == kvviz.plan(default).block_stride
    assert any("default text config of transformers' gemma3 config class" in n for n in model.notes)
    code, out, err = _cli(tmp_path, raw)
    assert code == 0, err
    assert "note: text_config is" in out.splitlines()[0]
