"""One model of every cache kind through every view: the plan, its text map and JSON, the figures
(block map, page anatomy of each distinct row, the layer planes), the explorer and `render`;
`verify` of every preset and planner is in tests/test_verify_hybrid.py. And a family's function
called on another family's model is one line naming both."""

from __future__ import annotations

import json

import pytest

import kvviz
from kvviz import views as plot
from kvviz.base.errors import KvvizError
from kvviz.cli import main
from kvviz.core.kinds import CacheKind
from kvviz.families import FAMILIES, load_preset, preset_names

# A preset for each kind (docs/model-core.md#cache-kinds).
KIND_PRESETS = {
    CacheKind.FULL_ATTENTION: "llama-3.1-8b",
    CacheKind.SLIDING_ATTENTION: "mistral-7b-v0.1",
    CacheKind.CHUNKED_ATTENTION: "llama-4-scout",
    CacheKind.MLA: "deepseek-v3",
    CacheKind.MAMBA1_STATE: "jamba-v0.1",
    CacheKind.MAMBA2_STATE: "nemotron-nano-9b-v2",
    CacheKind.SHORT_CONV_STATE: "lfm2-1.2b",
    CacheKind.GDN_STATE: "qwen3-next-80b-a3b",
    CacheKind.KDA_STATE: "kimi-linear",
    CacheKind.MAIN_C4: "deepseek-v4-pro",
}


@pytest.mark.parametrize("kind,name", KIND_PRESETS.items(), ids=lambda x: getattr(x, "name", x))
def test_every_kind_plans_and_draws(kind, name):
    plan = kvviz.plan(name)
    kinds = {p.cache.kind for p in plan.layout.placements}
    assert kind in kinds
    text = plan.text_map()
    assert kind.glyph in text and kind.label in text  # the legend names it
    doc = plan.to_json(budget_bytes=8 << 30)
    assert kind.key in {lay["kind"] for g in doc["groups"] for lay in g["layers"]}
    assert doc["capacity_line"].startswith("GPU KV cache size: ")
    fig = kvviz.block_map(plan.layout)
    assert plot.find_patches(fig, kind="page", cache_kind=kind)  # drawn, in its own colour
    assert kind.label in plot.legend_labels(fig)
    rows = {p.cache.row_format: p.cache for p in plan.layout.placements}
    for cache in rows.values():  # each row's parts (K | V, latent | rope, conv | SSM) drawn and named
        anatomy = kvviz.page_anatomy(cache)
        texts = " ".join(plot.figure_texts(anatomy))
        for f in cache.row_format.payload + cache.row_format.footer:
            assert f.name in texts, (f.name, texts[:200])


@pytest.mark.parametrize("name", ["deepseek-v3", "nemotron-nano-9b-v2", "lfm2-1.2b", "kimi-linear"])
def test_render_writes_a_report_for_the_new_kinds(name, tmp_path, capsys):
    assert main(["render", "--model", name, "--out", str(tmp_path / "r"), "--no-svg", "--budget-gib", "8"]) == 0
    html = (tmp_path / "r" / "report.html").read_text()
    assert "GPU KV cache size:" in html
    assert (tmp_path / "r" / "block-map.png").stat().st_size > 0


@pytest.mark.parametrize("name", ["deepseek-v3", "jamba-v0.1", "lfm2-1.2b", "llama-3.1-8b", "gemma-3n-e4b"])
def test_the_explorer_shows_every_kind(name):
    app = kvviz.Explorer(name)
    assert app.error == ""
    assert app.capacity_label.value.startswith("GPU KV cache size: ")
    assert app.map_data["lanes"]


def test_a_family_function_on_another_familys_model_is_one_line():
    dsv4 = load_preset("deepseek-v4-pro")
    with pytest.raises(KvvizError) as e:
        FAMILIES["decoder"].caches(dsv4, kvviz.Options())
    assert "deepseek-v4-pro" in str(e.value) and "decoder" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(KvvizError):
        FAMILIES["deepseek_v4"].with_layer_mix(load_preset("llama-3.1-8b"), c4=1, c128=1, swa=0)


def test_every_preset_plans_with_one_import():
    for name in preset_names():
        plan = kvviz.plan(kvviz.load(name))
        assert plan.block_stride > 0 and json.dumps(plan.to_json())


def test_a_figure_draws_in_a_notebook_without_matplotlib_inline(tmp_path):
    """A notebook of one's own, with the default backend and no %matplotlib magic, shows the
    figure a kvviz function returns as an image, not as `<Figure size ...>`."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell('import kvviz\nkvviz.block_map(kvviz.plan("llama-3.1-8b").layout)')]
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = nb.cells[0].outputs
    assert any("image/png" in o.get("data", {}) for o in outputs), outputs
