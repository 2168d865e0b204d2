"""kvviz.views.report: the files render_report writes, the self-contained HTML, and `kvviz render`."""

from __future__ import annotations

import json
import re

import pytest

from kvviz.base.defaults import BLOCK_SIZE
from kvviz.base.errors import KvvizError
from kvviz.cli import main
from kvviz.core.group import KVGroup
from kvviz.core.spec import custom_cache as _custom_cache
from kvviz.families import load_preset as load_model
from kvviz.options import Options
from kvviz.views import report
from kvviz.vllm.plan import plan_model
from kvviz.vllm.planners import plan


def custom_cache(name, page_bytes):
    return _custom_cache(name, page_bytes, tokens_per_block=BLOCK_SIZE)


def compare_layouts(model, backend):
    """vLLM #48993's before/after: bucketed + FP8 indexer vs overlay + MXFP4."""
    return (
        plan_model(model, "bucketed", Options(backend=backend, indexer_format="fp8")).layout,
        plan_model(model, "overlay", Options(backend=backend, indexer_format="mxfp4")).layout,
    )


PNG = b"\x89PNG\r\n\x1a\n"


def _no_external_links(text: str) -> None:
    assert "http://" not in text and "https://" not in text
    assert not re.search(r"""(src|href)\s*=\s*["'](?!data:|#)""", text), "a resource outside the page"


@pytest.fixture(scope="module")
def flash():
    return compare_layouts(load_model("deepseek-v4-flash"), "flashmla")


def test_render_report_writes_figures_and_a_self_contained_html(tmp_path, flash):
    before, after = flash
    out = tmp_path / "new" / "report"  # parents are created
    written = report.render_report(out, layout=after, before=before, after=after, title="Flash <MLA> & co")
    names = [p.name for p in written]
    for stem in ("block-map", "before-after", "anatomy-fp8_ds_mla", "anatomy-indexer_mxfp4", "anatomy-fp32"):
        assert f"{stem}.png" in names and f"{stem}.svg" in names
        assert (out / f"{stem}.png").read_bytes().startswith(PNG)
        assert "<svg" in (out / f"{stem}.svg").read_text()
    assert names[-1] == "report.html" and all(p.exists() for p in written)

    page = (out / "report.html").read_text()
    _no_external_links(page)
    assert page.count('src="data:image/png;base64,') == 5
    assert "<title>Flash &lt;MLA&gt; &amp; co</title>" in page  # the title is escaped
    assert f"{after.block_stride:,}" in page and f"{before.block_stride:,}" in page
    for g in after.groups:  # the group table
        assert f"<td>{g.name}</td>" in page
    assert page.count("<tr>") >= len(after.groups) + after.num_layers  # group table + layout table
    for line in after.explain().splitlines():
        assert line.replace("&", "&amp;") in page
    assert "block stride" in page


def test_render_report_without_before_after_and_png_only(tmp_path):
    groups = (
        KVGroup(name="a", layers=(custom_cache("x", 5000), custom_cache("y", 3000))),
        KVGroup(name="b", layers=(custom_cache("z", 6000),)),
    )
    layout = plan(groups, "bucketed")
    written = report.render_report(tmp_path, layout=layout, title="custom", svg=False)
    assert [p.name for p in written] == ["block-map.png", "report.html"]  # opaque pages: no anatomy
    _no_external_links((tmp_path / "report.html").read_text())


def test_render_report_bad_input_names_the_field(tmp_path, flash):
    before, after = flash
    with pytest.raises(KvvizError, match="before/after"):
        report.render_report(tmp_path, layout=after, before=before, title="t")
    with pytest.raises(KvvizError, match="dpi"):
        report.render_report(tmp_path, layout=after, title="t", dpi=0)
    with pytest.raises(KvvizError, match="layout"):
        report.render_report(tmp_path, layout="pro", title="t")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(KvvizError, match="out_dir"):
        report.render_report(blocker / "sub", layout=after, title="t")


def test_cli_render_groups(tmp_path, capsys):
    spec = {
        "groups": [
            {"name": "big", "layers": [{"name": "k0", "page_bytes": 40000}, {"name": "k1", "page_bytes": 9000}]},
            {"name": "small", "layers": [{"name": "s0", "page_bytes": 30000}]},
        ]
    }
    path = tmp_path / "groups.json"
    path.write_text(json.dumps(spec))
    out = tmp_path / "out"
    assert main(["render", "--groups", str(path), "--out", str(out), "--dpi", "60"]) == 0
    printed = capsys.readouterr().out.split()
    assert printed == [str(out / n) for n in ("block-map.png", "block-map.svg", "report.html")]
    assert "groups.json: overlay layout" in (out / "report.html").read_text()


def test_cli_render_model_includes_before_after(tmp_path, capsys):
    out = tmp_path / "flash"
    assert (
        main(
            [
                "render",
                "--model",
                "deepseek-v4-flash",
                "--backend",
                "flashinfer",
                "--planner",
                "overlay",
                "--out",
                str(out),
                "--no-svg",
                "--dpi",
                "50",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out.split()
    assert str(out / "before-after.png") in printed and printed[-1] == str(out / "report.html")
    page = (out / "report.html").read_text()
    assert "deepseek-v4-flash: overlay layout (TP 1, backend flashinfer)" in page  # what was planned (Plan.setting)
    _no_external_links(page)


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["render", "--model", "deepseek-v4-pro"], "--out"),
        (["render", "--out", "OUT"], "--model"),
        (["render", "--model", "nope", "--out", "OUT"], "--model"),
        (["render", "--model", "deepseek-v4-pro", "--backend", "tpu", "--out", "OUT"], "backend"),
        (["render", "--model", "deepseek-v4-pro", "--dpi", "0", "--out", "OUT"], "--dpi"),
        (["render", "--model", "deepseek-v4-pro", "--out", "FILE/sub"], "--out"),
    ],
)
def test_cli_render_bad_option_is_one_line_and_status_2(tmp_path, capsys, argv, needle):
    (tmp_path / "FILE").write_text("")
    argv = [a.replace("OUT", str(tmp_path / "out")).replace("FILE", str(tmp_path / "FILE")) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("kvviz: error: ") and err.count("\n") == 1
    assert needle in err
    assert not (tmp_path / "out").exists()  # bad input writes nothing


# ---- writing never follows a link ------------------------------------------------------------
def test_probe_never_truncates_through_a_link(tmp_path):
    victim = tmp_path / "outside.txt"
    victim.write_text("keep me")
    out = tmp_path / "out"
    out.mkdir()
    (out / ".kvviz-write-test").symlink_to(victim)  # the old probe name
    assert report.prepare_out_dir(out) == out
    assert victim.read_text() == "keep me"
    assert sorted(p.name for p in out.iterdir()) == [".kvviz-write-test"]  # no probe left behind


def test_output_name_that_is_a_link_is_refused(tmp_path, capsys):
    victim = tmp_path / "outside.html"
    victim.write_text("keep me")
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.html").symlink_to(victim)
    assert main(["render", "--model", "deepseek-v4-flash", "--out", str(out), "--no-svg", "--dpi", "30"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "symbolic link" in err and "report.html" in err
    assert victim.read_text() == "keep me" and (out / "report.html").is_symlink()
    assert [p.name for p in out.iterdir()] == ["report.html"]  # nothing written before the refusal


def test_write_file_replaces_whole_files_and_keeps_the_umask(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("a much longer old content")
    report.write_file(path, "new")
    assert path.read_text() == "new"
    assert path.stat().st_mode & 0o777 == 0o666 & ~_umask()
    report.write_file(tmp_path / "b.svg", lambda p: p.write_text(f"suffix {p.suffix}"))
    assert (tmp_path / "b.svg").read_text() == "suffix .svg"  # writers that go by the suffix still can
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.svg"]


def _umask() -> int:
    import os

    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_empty_out_is_an_error(capsys):
    assert main(["render", "--model", "deepseek-v4-flash", "--out", ""]) == 2
    assert capsys.readouterr().err == "kvviz: error: argument --out: the output folder is empty\n"
    with pytest.raises(KvvizError, match="needs a folder name"):
        report.prepare_out_dir("")
