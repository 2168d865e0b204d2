"""Absurd config values (issue 37 item 6, hostile inputs): each is refused in one line naming the field, or
planned as vLLM 0.33 plans it and said so in the output. Each case is a class of fields read without a bound:
windows and chunks (kvviz.families.hf_bounds.WINDOW_FIELDS), per-head and state sizes (DIM_FIELDS), layer counts
under another name than num_hidden_layers (LAYER_COUNT_FIELDS), and, behind them, one page's size
(kvviz.core.spec.CacheSpec: a size no field bound caught)."""

import contextlib
import copy
import io
import json
from pathlib import Path

import pytest

import kvviz
from kvviz.base.errors import KvvizError
from kvviz.base.formats import kv_row
from kvviz.base.inputs import MAX_PAGE_BYTES
from kvviz.cli.main import main as cli_main
from kvviz.core.kinds import CacheKind
from kvviz.core.spec import CacheSpec
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


def _cli(tmp_path: Path, raw: dict, *flags: str) -> tuple[int, str, str]:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main(["plan", "--hf-config", str(path), "--max-model-len", "8192", *flags])
    return code, out.getvalue(), err.getvalue()


REFUSED = [
    # Gemma 3's sliding layers take text_config.sliding_window as their window (gemma3.py); -1 is no window any
    # kernel reads (FlashAttention's is (sliding_window - 1, 0)), 2**63 overflows the kernels' int
    ("gemma-3-27b", "text_config.sliding_window", -1),
    ("gemma-3-27b", "text_config.sliding_window", 2**63),
    # llama4.py: ChunkedLocalAttention(attention_chunk_size) on the RoPE layers whenever the chunk is truthy
    ("llama-4-scout", "text_config.attention_chunk_size", -1),
    ("llama-4-scout", "text_config.attention_chunk_size", 2**63),
    # BailingMoeV3's KDA short-conv state is (short_conv_kernel_size - 1) x ... : 2**63 is a 2.3e23 B state
    ("registry-state/BailingMoeV3VLForConditionalGeneration", "text_config.short_conv_kernel_size", 2**63),
    # LongcatFlashConfig builds per-layer lists from num_layers: 10**7 took a minute, then MemoryError
    ("registry-mla/LongcatFlashForCausalLM", "num_layers", 10**7),
    ("registry-mla/LongcatFlashForCausalLM", "num_layers", 0),
]


@pytest.mark.parametrize(("where", "path", "value"), REFUSED, ids=[f"{w}-{p}={v}" for w, p, v in REFUSED])
def test_absurd_value_refused_in_one_line_naming_the_field(tmp_path, where, path, value):
    raw = _set(_raw(where), path, value)
    with pytest.raises(KvvizError) as e:
        model_from_dict(raw, name="x")
    assert f"{path}={value}" in str(e.value) and "\n" not in str(e.value)
    code, out, err = _cli(tmp_path, raw)
    assert (code, out, err.count("\n")) == (2, "", 1) and f"{path}={value}" in err and len(err) < 400


def test_zero_window_and_zero_chunk_are_none_as_vllm_reads_them():
    """vLLM 0.33 ModelConfig.__post_init__: a sliding_window of 0 disables the window (every layer full
    attention); llama4.py builds plain Attention where attention_chunk_size is 0 (`not nope and
    config.attention_chunk_size`). kvviz plans both so, as the same config without the field's effect."""
    gemma = kvviz.plan(model_from_dict(_set(_raw("gemma-3-27b"), "text_config.sliding_window", 0), name="g"))
    assert {c.kind for g in gemma.groups for c in g.layers} == {CacheKind.FULL_ATTENTION}
    llama = kvviz.plan(model_from_dict(_set(_raw("llama-4-scout"), "text_config.attention_chunk_size", 0), name="l"))
    assert {c.kind for g in llama.groups for c in g.layers} == {CacheKind.FULL_ATTENTION}


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
    code, out, err = _cli(tmp_path, raw, "--json")
    assert code == 0 and json.loads(out)["notes"] == list(model.notes)


def test_a_page_no_field_bound_caught_is_refused_naming_the_layer():
    """The last guard: a page above MAX_PAGE_BYTES (64 GiB a layer) is refused where the spec is made."""
    rows = MAX_PAGE_BYTES // kv_row(8, 128, 128, "bf16").row_bytes + 1
    with pytest.raises(KvvizError, match="model.layers.0.self_attn.attn: a page of"):
        CacheSpec(
            name="model.layers.0.self_attn.attn",
            kind=CacheKind.FULL_ATTENTION,
            layer=0,
            row_format=kv_row(8, 128, 128, "bf16"),
            rows=rows,
            tokens_per_block=rows,
        )
