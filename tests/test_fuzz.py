"""Bad and odd invocations of `kvviz`: each ends with exit status 2, exactly one line on stderr,
nothing on stdout and no traceback; Ctrl-C ends with `kvviz: interrupted` and status 130.

Every class of failure the fuzzing in the issue found has its own cases (a file that is not
UTF-8, a 5,000-digit integer, JSON nested 5,000 deep, a list where a name belongs, a lone
surrogate, an empty source, a budget of 1e308 GiB, a budget below one block, page_bytes of
10^30, /dev/zero, a FIFO, a billion MTP layers), then hypothesis (fixed seed) corrupts valid
groups files, configs and command lines at random. Most cases call `kvviz.cli.main` in this
process; the ones that need a process of their own (FIFO, /dev/zero, SIGINT) run one.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from kvviz.base.defaults import GIB
from kvviz.base.inputs import (
    MAX_BUDGET_BYTES,
    MAX_DIM,
    MAX_INPUT_BYTES,
    MAX_LAYERS,
    MAX_PAGE_BYTES,
    MAX_TOKENS_PER_BLOCK,
)
from kvviz.cli import main
from kvviz.families import PRESETS_DIR as MODELS_DIR

ROOT = Path(__file__).resolve().parent.parent
PRO_TEXT = (MODELS_DIR / "deepseek-v4-pro.json").read_text()
PRO = json.loads(PRO_TEXT)
PRO_STRIDE = 1_315_008  # overlay, flashmla, mxfp4 (checked against vLLM in test_cli)
FUZZ = settings(max_examples=90, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
SEED = 20261130

# A valid groups file; "@@" marks where a case puts its raw JSON text.
GROUPS = {
    "groups": [
        {
            "name": "attn",
            "layers": [
                {"name": "a0", "page_bytes": 300, "tokens_per_block": 16},
                {"name": "a1", "page_bytes": 300, "sliding_window": 128},
            ],
        },
        {"name": "mamba", "layers": [{"name": "m0", "page_bytes": 500, "kind": "custom"}]},
    ]
}


def invoke(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def assert_refused(argv: list[str], needle: str | None = None) -> str:
    code, out, err = invoke(argv)
    assert code == 2, (argv, code, out, err)
    assert out == "", (argv, out)
    assert err.startswith("kvviz: error: ") and err.endswith("\n") and err.count("\n") == 1, (argv, err)
    assert "Traceback" not in err
    if needle is not None:
        assert needle in err, (argv, err)
    return err


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Writes a file (text or bytes) under a fresh name and returns its path."""
    folder = tmp_path_factory.mktemp("fuzz")
    count = iter(range(10**9))

    def write(data: str | bytes, suffix: str = ".json") -> str:
        path = folder / f"f{next(count)}{suffix}"
        path.write_bytes(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
        return str(path)

    write.folder = folder
    return write


def groups_with(fragment: str, at: tuple = (0, "layers", 0, "page_bytes")) -> str:
    """The valid groups file with the value at `at` (group index, then keys) replaced by raw JSON text."""
    doc = json.loads(json.dumps(GROUPS))
    node = doc["groups"]
    for key in at[:-1]:
        node = node[key]
    node[at[-1]] = "@@"
    return json.dumps(doc).replace('"@@"', fragment)


def config_with(field: str, fragment: str | None) -> str:
    """The Pro preset with one field's value replaced by raw JSON text (None: the field removed)."""
    doc = dict(PRO)
    if fragment is None:
        del doc[field]
        return json.dumps(doc)
    doc[field] = "@@"
    return json.dumps(doc).replace('"@@"', fragment)


DEEP = "[" * 5000 + "]" * 5000
HUGE_INT = "1" * 5000

# ---- the classes from the issue, one or more cases each -----------------------------------
NOT_UTF8 = [
    ("binary", bytes(range(256)) * 4),
    ("latin-1", json.dumps(GROUPS).replace("attn", "attn\u00e9").encode("latin-1")),
    ("utf-16", json.dumps(GROUPS).encode("utf-16")),
    ("utf-16-le", json.dumps(GROUPS).encode("utf-16-le")),
    ("utf-32", PRO_TEXT.encode("utf-32")),
    ("lone 0xff", b'{"groups": [\xff]}'),
]


@pytest.mark.parametrize("option", ["--groups", "--config"])
@pytest.mark.parametrize("label,data", NOT_UTF8, ids=[n for n, _ in NOT_UTF8])
def test_file_that_is_not_utf8(files, option, label, data):
    assert_refused(["plan", option, files(data)], "not UTF-8")


@pytest.mark.parametrize(
    "text,needle",
    [
        (groups_with(HUGE_INT), "5,000 digits (at most 100)"),
        (groups_with("-" + HUGE_INT), "5,000 digits"),
        (groups_with(HUGE_INT, (0, "layers", 0, "tokens_per_block")), "digits"),
        (groups_with(HUGE_INT, (0, "layers", 1, "sliding_window")), "digits"),
        (config_with("num_hidden_layers", HUGE_INT), "digits"),
        (config_with("head_dim", "9" * 4301), "digits"),
        (config_with("compress_ratios", f"[{HUGE_INT}]"), "digits"),
    ],
)
def test_integer_of_thousands_of_digits(files, text, needle):
    option = "--groups" if text.startswith('{"groups"') else "--config"
    assert_refused(["plan", option, files(text)], needle)


@pytest.mark.parametrize(
    "text",
    [
        DEEP,
        '{"a": ' * 5000 + "1" + "}" * 5000,
        groups_with(DEEP),
        groups_with(DEEP, (0, "name")),
        config_with("compress_ratios", DEEP),
        config_with("name", DEEP),
    ],
)
@pytest.mark.parametrize("option", ["--groups", "--config"])
def test_json_nested_thousands_deep(files, text, option):
    assert_refused(["plan", option, files(text)])


WRONG_TYPES = [
    ((0, "name"), "[]"),
    ((0, "name"), "{}"),
    ((0, "name"), "1"),
    ((0, "name"), "null"),
    ((0, "name"), '""'),
    ((0, "layers", 0, "name"), "[]"),
    ((0, "layers", 0, "name"), "{}"),
    ((0, "layers", 0, "name"), "7"),
    ((0, "layers", 0, "tokens_per_block"), "[1]"),
    ((0, "layers", 0, "tokens_per_block"), '"x"'),
    ((0, "layers", 0, "tokens_per_block"), "true"),
    ((0, "layers", 0, "tokens_per_block"), "16.0"),
    ((0, "layers", 1, "sliding_window"), "{}"),
    ((0, "layers", 1, "sliding_window"), "[128]"),
    ((0, "layers", 1, "sliding_window"), '"128"'),
    ((0, "layers", 0, "page_bytes"), "[300]"),
    ((0, "layers", 0, "page_bytes"), '"300"'),
    ((0, "layers", 0, "page_bytes"), "true"),
    ((0, "layers", 0, "page_bytes"), "300.0"),
    ((0, "layers", 0, "page_bytes"), "null"),
    ((1, "layers", 0, "kind"), "[]"),
    ((1, "layers", 0, "kind"), "{}"),
    ((1, "layers", 0, "kind"), "3"),
    ((0, "layers"), "{}"),
    ((0, "layers"), '"a0"'),
    ((0, "layers", 0), "[]"),
    ((0, "layers", 0), "300"),
]


@pytest.mark.parametrize("at,fragment", WRONG_TYPES)
def test_wrong_type_where_a_name_or_number_belongs(files, at, fragment):
    assert_refused(["plan", "--groups", files(groups_with(fragment, at))])


@pytest.mark.parametrize(
    "field",
    [
        "num_hidden_layers",
        "num_nextn_predict_layers",
        "head_dim",
        "qk_rope_head_dim",
        "sliding_window",
        "index_head_dim",
    ],
)
@pytest.mark.parametrize("fragment", ["true", "false", "[61]", "{}", '"61"', "61.0", "null"])
def test_config_field_of_the_wrong_type(files, field, fragment):
    assert_refused(["plan", "--config", files(config_with(field, fragment))], field)


@pytest.mark.parametrize(
    "text,option",
    [
        (groups_with('"\\ud800"', (0, "name")), "--groups"),
        (groups_with('"a\\udfffb"', (0, "layers", 0, "name")), "--groups"),
        (groups_with('"\\ud800"', (1, "layers", 0, "kind")), "--groups"),
        (config_with("name", '"\\ud800"'), "--config"),
        ('{"\\ud800": 1}', "--config"),
    ],
)
def test_lone_surrogate(files, text, option):
    assert_refused(["plan", option, files(text)], "surrogate")


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "--groups", ""],
        ["plan", "--config", ""],
        ["plan", "--model", ""],
        ["render", "--model", ""],
        ["render", "--groups", "", "--out", "x"],
        ["compare", "--model", "", "--backend", "flashmla", "--budget-gib", "1"],
        ["render", "--model", "deepseek-v4-pro", "--out", ""],
    ],
)
def test_empty_source_or_output(argv):
    assert_refused(argv)


@pytest.mark.parametrize("budget", ["1e308", "inf", "-inf", "nan", "1e10", "0", "-0", "-1e-300", "0x10", ""])
@pytest.mark.parametrize("command", ["plan", "compare"])
def test_budget_gib_out_of_range(budget, command):
    extra = ["--backend", "flashmla"] if command == "compare" else []
    assert_refused([command, "--model", "deepseek-v4-pro", *extra, "--budget-gib", budget], "--budget-gib")


@pytest.mark.parametrize(
    "option,value",
    [
        ("--budget-gib", "1e-12"),
        ("--budget-gib", "1e-9"),
        ("--budget-gib", str((PRO_STRIDE - 1) / GIB)),
        ("--budget-bytes", "1"),
        ("--budget-bytes", str(PRO_STRIDE - 1)),
    ],
)
@pytest.mark.parametrize("command", ["plan", "plan-json", "compare", "compare-json"])
def test_budget_smaller_than_one_block(option, value, command):
    argv = {"plan": ["plan"], "compare": ["compare", "--backend", "flashmla"]}[command.split("-")[0]]
    argv = argv + ["--model", "deepseek-v4-pro", option, value] + (["--json"] if command.endswith("json") else [])
    assert_refused(argv, "smaller than one block stride")


@pytest.mark.parametrize(
    "backend,budget",
    [(b, n) for b in ("flashmla", "flashinfer") for n in ("1", "2", "1000")]
    + [("flashinfer", "1228799"), ("flashinfer", "1308671"), ("flashmla", "1315007"), ("flashmla", "1473407")],
)
def test_compare_budget_below_the_larger_stride(backend, budget):
    assert_refused(
        ["compare", "--model", "deepseek-v4-pro", "--backend", backend, "--budget-bytes", budget],
        "smaller than one block stride",
    )


@pytest.mark.parametrize("command", ["plan", "render"])
@pytest.mark.parametrize("page", [str(10**30), str(MAX_PAGE_BYTES + 1), str(2**63), "1e30"])
def test_page_bytes_beyond_the_bound(files, tmp_path, command, page):
    argv = [command, "--groups", files(groups_with(page))]
    if command == "render":
        argv += ["--out", str(tmp_path / "out")]
    err = assert_refused(argv, "page_bytes")
    assert page == "1e30" or f"{MAX_PAGE_BYTES:,}" in err  # the bound is in the message
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "field,value,needle",
    [
        ("num_nextn_predict_layers", "1000000000", f"{MAX_LAYERS:,}"),
        ("num_hidden_layers", str(MAX_LAYERS + 1), f"{MAX_LAYERS:,}"),
        ("head_dim", str(MAX_DIM + 1), f"{MAX_DIM:,}"),
        ("index_head_dim", str(2**40), f"{MAX_DIM:,}"),
    ],
)
def test_counts_that_size_work_are_bounded(files, field, value, needle):
    assert_refused(["plan", "--config", files(config_with(field, value))], needle)


def test_groups_file_with_too_many_layers(files):
    doc = {"groups": [{"name": "g", "layers": [{"name": f"l{i}", "page_bytes": 8} for i in range(MAX_LAYERS + 1)]}]}
    assert_refused(["plan", "--groups", files(json.dumps(doc))], f"{MAX_LAYERS:,}")


@pytest.mark.parametrize(
    "at,fragment,needle",
    [
        ((0, "layers", 0, "tokens_per_block"), "0", "tokens_per_block"),
        ((0, "layers", 0, "tokens_per_block"), "-1", "tokens_per_block"),
        ((0, "layers", 0, "tokens_per_block"), '"x"', "tokens_per_block"),
        ((0, "layers", 0, "tokens_per_block"), str(MAX_TOKENS_PER_BLOCK + 1), "tokens_per_block"),
        ((0, "layers", 1, "sliding_window"), "-1", "sliding_window"),
        ((0, "layers", 1, "sliding_window"), "0", "sliding_window"),
        ((1, "name"), '"attn"', "appears twice"),
        ((1, "layers", 0, "name"), '"a0"', "appears twice"),
    ],
)
def test_silently_accepted_before(files, at, fragment, needle):
    assert_refused(["plan", "--groups", files(groups_with(fragment, at))], needle)


def test_bool_where_a_count_belongs(files):
    assert_refused(["plan", "--config", files(config_with("num_hidden_layers", "true"))], "num_hidden_layers")


# ---- odd files ----------------------------------------------------------------------------
@pytest.mark.parametrize("option", ["--groups", "--config"])
@pytest.mark.parametrize(
    "content",
    [
        b"",
        b" ",
        b"null",
        b"[]",
        b"{}",
        b'"text"',
        b"1e999",
        # JSON's NaN / Infinity are read as floats since issue 27 (transformers writes them, vLLM reads them):
        # a whole file of one is refused because a config or groups file must be an object, not for the constant
        b"NaN",
        b"Infinity",
        b"\xef\xbb\xbf{}",
        b"\x00" * 64,
        b"{}{}",
        b'{"groups": {}}',
        b"[" * 100,
    ],
)
def test_odd_file_contents(files, option, content):
    err = assert_refused(["plan", option, files(content)])
    if content in (b"NaN", b"Infinity", b"1e999"):
        assert "must be a JSON object" in err or "groups" in err, err


# ---- JSON's Infinity / NaN (issue 27) -------------------------------------------------------
# transformers' default configs of Mamba2, FalconH1, GraniteMoeHybrid and NemotronH hold
# "time_step_limit": [0.0, Infinity], and vLLM reads them (Python's json): kvviz reads the constants as
# floats too (it refused the whole file before), and each field it reads refuses a non-finite value
# naming itself.
NON_FINITE = ["NaN", "Infinity", "-Infinity", "1e999"]
REGISTRY_CONFIGS = ROOT / "tests" / "data" / "vllm-0.33" / "registry" / "configs"


@pytest.mark.parametrize("constant", NON_FINITE)
@pytest.mark.parametrize(
    "at", [(0, "layers", 0, "page_bytes"), (0, "layers", 0, "tokens_per_block"), (0, "layers", 1, "sliding_window")]
)
def test_non_finite_in_a_groups_field(files, constant, at):
    assert_refused(["plan", "--groups", files(groups_with(constant, at))], at[-1])


@pytest.mark.parametrize("constant", NON_FINITE)
@pytest.mark.parametrize("field", ["num_hidden_layers", "head_dim", "sliding_window", "index_head_dim"])
def test_non_finite_in_a_config_field(files, constant, field):
    assert_refused(["plan", "--config", files(config_with(field, constant))], field)


@pytest.mark.parametrize("constant", NON_FINITE)
def test_non_finite_rope_factor(files, constant):
    """vLLM multiplies max_model_len by a linear / dynamic rope factor (config/model.py
    _get_and_verify_max_len: int(inf) fails there): refused naming the factor, not a traceback."""
    doc = json.loads((REGISTRY_CONFIGS / "LlamaForCausalLM" / "config.json").read_text())
    doc["rope_scaling"] = {"rope_type": "linear", "factor": "@@"}
    path = files(json.dumps(doc).replace('"@@"', constant))
    assert_refused(["plan", "--hf-config", path], "rope_parameters.factor")


def test_time_step_limit_infinity_is_read():
    """The four default configs that hold Infinity load (tests/test_registry_plans.py compares their
    plans with vLLM's): the constant sits in time_step_limit, a field no cache size depends on."""
    from kvviz.families.loader import load_path

    for arch in ("Mamba2ForCausalLM", "FalconH1ForCausalLM", "GraniteMoeHybridForCausalLM", "NemotronHForCausalLM"):
        path = REGISTRY_CONFIGS / arch / "config.json"
        assert "Infinity" in path.read_text(), arch
        assert load_path(path).architecture == arch


def _plan_signature(raw: dict):
    from kvviz import plan
    from kvviz.families.loader import model_from_dict

    p = plan(model_from_dict(raw, name="x"))
    return p.block_stride, p.max_model_len, [[(c.name, c.page_bytes) for c in g.layers] for g in p.groups]


@pytest.mark.parametrize(
    "arch",
    [
        "LlamaForCausalLM",
        "Gemma3ForCausalLM",
        "DeepseekV3ForCausalLM",
        "NemotronHForCausalLM",
        "FalconH1ForCausalLM",
        "Qwen3NextForCausalLM",
        "Llama4ForCausalLM",
        "Zamba2ForCausalLM",
    ],
)
def test_non_finite_anywhere_in_a_config(arch):
    """Second method: every top-level number of a real config set to NaN, then Infinity, one at a time.
    Either the plan is the original's to the byte (kvviz and vLLM never size anything from the field), or
    the refusal is one KvvizError naming the field (kvviz's own check, or transformers' rejection with
    the non-finite field named)."""
    from kvviz.base.errors import KvvizError
    from kvviz.base.files import parse_json

    text = (REGISTRY_CONFIGS / arch / "config.json").read_text()
    raw = parse_json(text.encode(), what=arch)
    base = _plan_signature(raw)
    numbers = [k for k, v in raw.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    assert len(numbers) >= 10, arch
    for key in numbers:
        for constant in ("NaN", "Infinity"):
            doc = dict(raw, **{key: "@@"})
            bad = parse_json(json.dumps(doc).replace('"@@"', constant).encode(), what=arch)
            try:
                assert _plan_signature(bad) == base, (arch, key, constant)
            except KvvizError as e:
                assert key in str(e) and "\n" not in str(e), (arch, key, constant, str(e))


@pytest.mark.parametrize("option", ["--groups", "--config"])
def test_odd_paths(files, option, tmp_path):
    assert_refused(["plan", option, str(tmp_path)], "folder")  # a folder
    assert_refused(["plan", option, str(tmp_path / "absent.json")], "cannot read")
    assert_refused(["plan", option, str(tmp_path / "absent" / "x.json")], "cannot read")
    big = files(b" " * MAX_INPUT_BYTES + b"{}")
    assert_refused(["plan", option, big], "at most")
    link = tmp_path / "dangling.json"
    link.symlink_to(tmp_path / "nowhere")
    assert_refused(["plan", option, str(link)], "cannot read")
    unreadable = Path(files(b"{}"))
    unreadable.chmod(0)
    if os.geteuid() != 0:  # root reads anything
        assert_refused(["plan", option, str(unreadable)], "cannot read")


def test_files_given_to_the_wrong_option(files):
    assert_refused(["plan", "--config", files(json.dumps(GROUPS))], "--groups")
    assert_refused(["plan", "--groups", files(PRO_TEXT)], "--config")


# ---- options that do not apply, and the command line itself --------------------------------
@pytest.mark.parametrize(
    "knob",
    [
        ["--head-dim", "512"],
        ["--rope-dim", "64"],
        ["--index-head-dim", "128"],
        ["--indexer", "fp8"],
        ["--main-format", "bf16"],
        ["--backend", "flashinfer"],
        ["--no-mtp"],
        ["--block-size", "256"],
    ],
)
@pytest.mark.parametrize("command", ["plan", "render"])
def test_model_knobs_refused_with_groups(files, tmp_path, knob, command):
    argv = [command, "--groups", files(json.dumps(GROUPS)), *knob]
    if command == "render":
        argv += ["--out", str(tmp_path / "out")]
    assert_refused(argv, knob[0])


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["nope"],
        ["plan", "--model"],
        ["plan", "--model", "deepseek-v4-pro", "--model", "x", "--config", "y"],
        ["plan", "--model", "deepseek-v4-pro", "--budget-gib", "1", "--budget-bytes", "5"],
        ["plan", "--model", "deepseek-v4-pro", "--budget", "1"],
        ["plan", "--model", "deepseek-v4-pro", "extra"],
        ["plan", "--model", "deepseek-v4-pro", "--unknown"],
        ["plan", "--model", "deepseek-v4-pro", "a\nb"],
        ["plan", "--model", "deepseek-v4-pro\n"],
        ["plan", "--model", "\udcff"],
        ["plan", "--model", "a\rb"],
        ["plan", "--model", "deepseek-v4-pro", "--planner", "\x1b[31m"],
        ["models", "--json"],
        ["models", "x"],
        ["compare", "--model", "deepseek-v4-pro", "--backend", "bogus", "--budget-gib", "1"],
        ["compare", "--model", "deepseek-v4-pro", "--backend", "flashmla"],
        ["compare", "--model", "nope", "--backend", "flashmla", "--budget-gib", "1"],
        ["compare", "--config", "x", "--backend", "flashmla", "--budget-gib", "1"],
        ["render", "--model", "deepseek-v4-pro"],
        ["render", "--out", "x"],
        ["plan", "--model", "deepseek-v4-pro", "--block-size", "100"],
        ["plan", "--model", "deepseek-v4-pro", "--block-size", "4"],
        ["plan", "--model", "deepseek-v4-pro", "--rope-dim", "512"],
        ["plan", "--model", "deepseek-v4-pro", "--indexer", "mxfp4", "--index-head-dim", "100"],
        ["plan", "--model", "deepseek-v4-pro", "--main-format", ""],
        ["plan", "--model", "deepseek-v4-pro", "--backend", ""],
    ],
)
def test_bad_command_lines(argv):
    assert_refused(argv)


@pytest.mark.parametrize(
    "option,low,high",
    [
        ("--block-size", 1, MAX_TOKENS_PER_BLOCK),
        ("--head-dim", 1, MAX_DIM),
        ("--rope-dim", 1, MAX_DIM),
        ("--index-head-dim", 1, MAX_DIM),
        ("--budget-bytes", 1, MAX_BUDGET_BYTES),
    ],
)
@pytest.mark.parametrize("value", ["LOW", "HIGH", "-1", "1" * 5000, "x", "1.5", "", "0x10", "1e3", "\udcff"])
def test_integer_options_out_of_range(option, low, high, value):
    value = {"LOW": str(low - 1), "HIGH": str(high + 1)}.get(value, value)
    assert_refused(["plan", "--model", "deepseek-v4-pro", option, value], option)


@pytest.mark.parametrize("dpi", ["0", "19", "601", "10" * 3000, "x", "-5"])
def test_render_dpi_out_of_range(tmp_path, dpi):
    assert_refused(["render", "--model", "deepseek-v4-pro", "--out", str(tmp_path / "o"), "--dpi", dpi], "--dpi")
    assert not (tmp_path / "o").exists()


def test_render_title_that_is_not_unicode(tmp_path):
    assert_refused(
        ["render", "--model", "deepseek-v4-flash", "--out", str(tmp_path / "o"), "--title", "\udcff"], "--title"
    )


# ---- hypothesis: random corruptions of valid inputs (fixed seed) ---------------------------
GROUP_SPOTS = [
    (0, "name"),
    (1, "name"),
    (0, "layers"),
    (0, "layers", 0),
    (0, "layers", 0, "name"),
    (0, "layers", 0, "page_bytes"),
    (0, "layers", 1, "page_bytes"),
    (1, "layers", 0, "page_bytes"),
    (0, "layers", 0, "tokens_per_block"),
    (0, "layers", 1, "sliding_window"),
    (1, "layers", 0, "kind"),
]
NUMBER_SPOTS = {"page_bytes": MAX_PAGE_BYTES, "tokens_per_block": MAX_TOKENS_PER_BLOCK, "sliding_window": 1 << 40}
BAD_FRAGMENTS = st.one_of(
    st.sampled_from(
        [
            "[]",
            "{}",
            "null",
            "true",
            "false",
            '""',
            '"\\ud800"',
            '"\\udfff"',
            DEEP,
            HUGE_INT,
            "1e999",
            "NaN",
            "-Infinity",
            "[[[[]]]]",
            '{"a": []}',
        ]
    ),
    st.lists(st.integers(), max_size=3).map(json.dumps),
    st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: not x.is_integer()).map(repr),
)


def bad_number(high: int):
    return st.one_of(st.integers(max_value=0), st.integers(min_value=high + 1, max_value=10**40)).map(str)


@seed(SEED)
@FUZZ
@given(data=st.data())
def test_random_groups_corruption(files, data):
    spot = data.draw(st.sampled_from(GROUP_SPOTS))
    if spot[-1] in NUMBER_SPOTS and data.draw(st.booleans()):
        fragment = data.draw(bad_number(NUMBER_SPOTS[spot[-1]]))
    elif spot[-1] == "kind":
        fragment = data.draw(
            st.one_of(
                BAD_FRAGMENTS,
                st.text(min_size=1)
                .filter(
                    lambda s: (
                        s.upper()
                        not in (
                            "MAIN_C4",
                            "MAIN_C128",
                            "INDEXER_K",
                            "SWA_KV",
                            "STATE_C4",
                            "STATE_C128",
                            "INDEXER_STATE",
                            "CUSTOM",
                        )
                    )
                )
                .map(json.dumps),
            )
        )
    elif spot[-1] == "name":
        fragment = data.draw(
            st.one_of(
                BAD_FRAGMENTS.filter(lambda f: not f.startswith('"') or "\\ud" in f),
                st.just('"attn"' if spot == (1, "name") else '""'),
            )
        )
    else:
        fragment = data.draw(BAD_FRAGMENTS)
    command = data.draw(st.sampled_from(["plan", "plan-json", "render"]))
    argv = ["plan" if command.startswith("plan") else "render", "--groups", files(groups_with(fragment, spot))]
    argv += ["--json"] if command == "plan-json" else []
    argv += ["--out", str(files.folder / "never")] if command == "render" else []
    assert_refused(argv)
    assert not (files.folder / "never").exists()


CONFIG_FIELDS = [
    "num_hidden_layers",
    "num_nextn_predict_layers",
    "head_dim",
    "qk_rope_head_dim",
    "sliding_window",
    "index_head_dim",
    "compress_ratios",
    "name",
]


@seed(SEED)
@FUZZ
@given(data=st.data())
def test_random_config_corruption(files, data):
    field = data.draw(st.sampled_from(CONFIG_FIELDS))
    how = data.draw(st.sampled_from(["remove", "fragment", "number", "truncate"]))
    if how == "truncate":
        text = PRO_TEXT[: data.draw(st.integers(min_value=0, max_value=PRO_TEXT.rindex("}") - 1))]
    elif how == "remove" and field != "name":
        text = config_with(field, None)
    elif how == "number" and field not in ("compress_ratios", "name"):
        high = {"num_hidden_layers": MAX_LAYERS, "num_nextn_predict_layers": MAX_LAYERS}.get(field, MAX_DIM)
        low = 0 if field == "num_nextn_predict_layers" else 1
        too_big = st.integers(min_value=high + 1, max_value=10**19)
        value = data.draw(
            st.integers(max_value=low - 1)
            if field == "sliding_window"
            # tokens: no upper bound
            else st.one_of(st.integers(max_value=low - 1), too_big)
        )
        text = config_with(field, str(value))
    elif field == "compress_ratios":
        text = config_with(
            field,
            data.draw(
                st.one_of(
                    BAD_FRAGMENTS.filter(lambda f: not f.startswith("[") or f.startswith("[[") or f == DEEP),
                    st.sampled_from(
                        [
                            "[]",
                            "[4]",
                            "[16]" * 1,
                            json.dumps([4] * 10),
                            json.dumps(PRO["compress_ratios"][:60]),
                            json.dumps([-1] + PRO["compress_ratios"][1:]),
                            json.dumps([True] * 62),
                        ]
                    ),
                )
            ),
        )
    elif field == "name":
        text = config_with(
            field,
            data.draw(
                BAD_FRAGMENTS.filter(lambda f: f not in ("null",) and not (f.startswith('"') and "\\ud" not in f))
            ),
        )
    else:
        text = config_with(field, data.draw(BAD_FRAGMENTS))
    assert_refused(["plan", "--config", files(text), *data.draw(st.sampled_from([[], ["--json"]]))])


def _not_a_valid_gib(x: float) -> bool:
    return not (PRO_STRIDE / GIB <= x <= MAX_BUDGET_BYTES / GIB)


@seed(SEED)
@FUZZ
@given(data=st.data())
def test_random_command_lines(data):
    kind = data.draw(st.sampled_from(["gib", "bytes", "int-option", "junk-option", "dpi"]))
    command = data.draw(st.sampled_from(["plan", "compare"])) if kind in ("gib", "bytes") else "plan"
    argv = [command, "--model", "deepseek-v4-pro"] + (["--backend", "flashinfer"] if command == "compare" else [])
    if kind == "gib":
        value = data.draw(
            st.one_of(
                st.floats().filter(_not_a_valid_gib).map(repr),
                st.text(alphabet="0123456789.e-+x ", max_size=12).filter(lambda s: not _parses_to_valid_gib(s)),
            )
        )
        argv += ["--budget-gib", value]
    elif kind == "bytes":
        argv += [
            "--budget-bytes",
            str(data.draw(st.one_of(st.integers(max_value=1_308_671), st.integers(min_value=MAX_BUDGET_BYTES + 1)))),
        ]
    elif kind == "int-option":
        option = data.draw(st.sampled_from(["--block-size", "--head-dim", "--rope-dim", "--index-head-dim"]))
        high = MAX_TOKENS_PER_BLOCK if option == "--block-size" else MAX_DIM
        argv += [option, str(data.draw(st.one_of(st.integers(max_value=0), st.integers(min_value=high + 1))))]
    elif kind == "junk-option":
        argv += [
            "--"
            + data.draw(
                st.text(alphabet="abcdefghijklmnopqrstuvwxyz-", min_size=2, max_size=10).filter(
                    lambda s: not any(o.startswith(s) for o in _PLAN_OPTIONS)
                )
            )
        ]
    else:
        argv = [
            "render",
            "--model",
            "deepseek-v4-flash",
            "--out",
            "never-written",
            "--dpi",
            str(data.draw(st.one_of(st.integers(max_value=19), st.integers(min_value=601)))),
        ]
    assert_refused(argv)
    assert not Path("never-written").exists()


_PLAN_OPTIONS = [
    "model",
    "config",
    "groups",
    "planner",
    "backend",
    "main-format",
    "indexer",
    "no-mtp",
    "block-size",
    "head-dim",
    "rope-dim",
    "index-head-dim",
    "budget-gib",
    "budget-bytes",
    "json",
    "help",
]


def _parses_to_valid_gib(text: str) -> bool:
    try:
        return not _not_a_valid_gib(float(text))
    except ValueError:
        return False


# ---- what needs a process of its own ------------------------------------------------------
def _kvviz(*argv, timeout=60, **kw):
    return subprocess.run(
        [sys.executable, "-m", "kvviz", *argv], capture_output=True, text=True, timeout=timeout, cwd=ROOT, **kw
    )


@pytest.mark.parametrize("option", ["--groups", "--config"])
@pytest.mark.parametrize("source", ["fifo", "/dev/zero", "/dev/null", "/dev/stdin"])
def test_files_that_are_not_regular_are_refused_at_once(tmp_path, option, source):
    if source == "fifo":
        source = str(tmp_path / "fifo")
        os.mkfifo(source)
    r = _kvviz("plan", option, source, timeout=30, stdin=subprocess.PIPE if source == "/dev/stdin" else None)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr.count("\n") == 1 and "not a regular file" in r.stderr


def as_foreground() -> None:
    """In the child, before exec: SIGINT handled by default, as in a command a terminal user
    starts. A shell starts a background job (`make test &`, or `(trap '' INT; make test)`) with
    SIGINT ignored, the child inherits that, and Python then never raises KeyboardInterrupt;
    kvviz leaves an inherited SIG_IGN alone, as a background job expects."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


_SLOW = textwrap.dedent("""
    import pathlib, sys, time
    from kvviz import cli
    from kvviz.views import report
    import kvviz.cli.args
    ready = pathlib.Path(sys.argv[1])

    def wait(*args, **kwargs):
        ready.write_text("ready")
        time.sleep(120)

    def slow_save(fig, path, dpi=100):
        pathlib.Path(path).write_bytes(b"<svg half-written")
        wait()

    if sys.argv[2] == "plan":
        kvviz.cli.args.make_plan = wait
    elif sys.argv[2] == "verify":
        # the real verify of a large pool; the first progress report says it is inside its work
        import kvviz.verify
        v = sys.modules["kvviz.verify"]  # the module (kvviz.verify, the name, is the function)
        real = v.verify

        def noted(*args, **kwargs):
            kwargs["progress"] = lambda n: ready.write_text("ready")
            return real(*args, **kwargs)

        v.verify = noted
    else:
        report.save_figure = slow_save
    sys.exit(cli.main(sys.argv[2:]))
""")


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "--model", "deepseek-v4-pro"],
        ["render", "--model", "deepseek-v4-flash", "--dpi", "40", "--out", "OUT"],
        ["verify", "--model", "deepseek-v4-pro", "--blocks", "4000", "--device", "cpu"],
    ],
)
def test_ctrl_c_prints_one_line_and_exits_130(tmp_path, argv):
    out = tmp_path / "out"
    argv = [a.replace("OUT", str(out)) for a in argv]
    ready = tmp_path / "ready"
    proc = subprocess.Popen(
        [sys.executable, "-c", _SLOW, str(ready), *argv],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=as_foreground,
    )
    try:
        for _ in range(1200):  # until the command is inside its long step (at most 60 s)
            if ready.exists() or proc.poll() is not None:
                break
            time.sleep(0.05)
        assert ready.exists(), proc.communicate()
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert (proc.returncode, stderr) == (130, "kvviz: interrupted\n")
    if argv[0] == "render":
        # The PNG finished before the interrupt, the SVG was half written: a report takes its
        # names only once all of it is written, so nothing did, and the temporary files are gone.
        assert sorted(os.listdir(out)) == []
    else:
        assert stdout == ""


def test_console_script_refuses_with_one_line():
    r = subprocess.run(
        [str(Path(sys.executable).parent / "kvviz"), "plan", "--groups", "/dev/zero"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (r.returncode, r.stdout, r.stderr.count("\n")) == (2, "", 1)


# ---- issue 20 item 11: impossible or misread configs, refused naming the field -------------
def preset_with(preset: str, **changes) -> dict:
    """A shipped preset's config.json with fields changed; `a__b` names text_config's b when a is
    'text', ... (Ellipsis) removes the field."""
    from kvviz.families import preset_raw

    doc = json.loads(json.dumps(preset_raw(preset)))
    for key, value in changes.items():
        where, key = (doc["text_config"], key[len("text__") :]) if key.startswith("text__") else (doc, key)
        if value is ...:
            where.pop(key, None)
        else:
            where[key] = value
    return doc


# transformers' Gemma3TextConfig / Qwen3_5TextConfig / JambaConfig / Llama4TextConfig derive
# layer_types as `(i + 1) % period` (Jamba: i % period): -1 makes every layer full without a word,
# 0 ends in ZeroDivisionError ("integer modulo by zero", naming no field).
MISREAD_CONFIGS = [
    (
        "gemma-3-27b",
        dict(text__sliding_window_pattern=-1, text__layer_types=...),
        "text_config.sliding_window_pattern=-1",
    ),
    (
        "gemma-3-27b",
        dict(text__sliding_window_pattern=0, text__layer_types=...),
        "text_config.sliding_window_pattern=0",
    ),
    (
        "qwen3.5",
        dict(text__full_attention_interval=-1, text__layer_types=...),
        "text_config.full_attention_interval=-1",
    ),
    ("qwen3.5", dict(text__full_attention_interval=0, text__layer_types=...), "text_config.full_attention_interval=0"),
    ("qwen3-next-80b-a3b", dict(full_attention_interval=-1, layer_types=...), "full_attention_interval=-1"),
    ("jamba-v0.1", dict(attn_layer_period=0, layers_block_type=...), "attn_layer_period=0"),
    ("llama-4-scout", dict(text__no_rope_layer_interval=0, text__no_rope_layers=...), "no_rope_layer_interval=0"),
    # a text_config that is no config (a missing or empty one is transformers' default text model, planned with a
    # note as vLLM serves it: tests/test_published_hostile.py)
    ("gemma-3n-e4b", dict(text_config="gemma"), "text_config='gemma'"),
    # a multimodal config without its text model, a text field left at the top level the class does not read
    ("gemma-3-27b", dict(text_config=..., num_hidden_layers=10), "num_hidden_layers=10 at the top level"),
    # a text config of another architecture
    ("gemma-3-27b", dict(text__model_type="llama"), "text_config.model_type='llama'"),
    ("qwen3.5", dict(text__model_type="qwen3_next"), "text_config.model_type='qwen3_next'"),
    # a top-level field the text config overrides (vLLM reads get_text_config())
    ("gemma-3-27b", dict(num_hidden_layers=10), "num_hidden_layers=10 at the top level"),
    ("llama-4-scout", dict(num_key_value_heads=2), "num_key_value_heads=2 at the top level"),
    # 0 / negative head counts, every family (decoder, MLA, state)
    ("llama-3.1-8b", dict(num_attention_heads=0), "num_attention_heads=0"),
    ("deepseek-v3", dict(num_attention_heads=0), "num_attention_heads=0"),
    ("deepseek-v3", dict(num_attention_heads=-128), "num_attention_heads=-128"),
    ("kimi-k2", dict(num_attention_heads=-1), "num_attention_heads=-1"),
    ("zamba2", dict(num_attention_heads=0), "num_attention_heads=0"),
    ("zamba2", dict(n_mamba_heads=0), "n_mamba_heads=0"),
    ("nemotron-nano-9b-v2", dict(mamba_num_heads=-4), "mamba_num_heads=-4"),
    ("qwen3-next-80b-a3b", dict(linear_num_value_heads=0), "linear_num_value_heads=0"),
    ("kimi-linear", dict(num_attention_heads=-32), "num_attention_heads=-32"),
    ("gemma-3n-e4b", dict(text__num_kv_shared_layers=-5), "num_kv_shared_layers=-5"),
    # a dtype transformers cannot name ("module 'torch' has no attribute 'auto'")
    ("llama-3.1-8b", dict(torch_dtype="auto"), "torch_dtype='auto'"),
    ("qwen3-next-80b-a3b", dict(torch_dtype=16), "torch_dtype=16"),
]


@pytest.mark.parametrize(
    "preset,changes,needle", MISREAD_CONFIGS, ids=[f"{p}-{'-'.join(c)}" for p, c, _ in MISREAD_CONFIGS]
)
def test_misread_config_refused_naming_the_field(files, preset, changes, needle):
    path = files(json.dumps(preset_with(preset, **changes)))
    err = assert_refused(["plan", "--hf-config", path], needle)
    assert "modulo" not in err and "torch" not in err.split(needle)[0]


def test_the_period_rule_checked_is_transformers_own(files):
    """The positive control: with sliding_window_pattern 6 and no layer_types, Gemma 3's 62 layers
    are full where (i + 1) % 6 == 0 (Gemma3TextConfig): floor(62 / 6) = 10 full, 52 sliding."""
    path = files(json.dumps(preset_with("gemma-3-27b", text__sliding_window_pattern=6, text__layer_types=...)))
    code, out, err = invoke(["plan", "--hf-config", path, "--json"])
    assert code == 0, err
    from kvviz import load

    assert load(path).reader.kind_counts(load(path)) == {"sliding": 52, "full": 10}


@pytest.mark.parametrize(
    "text,key",
    [
        ('{"model_type": "llama", "num_hidden_layers": 32, "num_hidden_layers": 2}', "num_hidden_layers"),
        ('{"model_type": "gemma3", "text_config": {"sliding_window": 1024, "sliding_window": 4096}}', "sliding_window"),
        ('{"groups": [], "groups": []}', "groups"),
    ],
)
@pytest.mark.parametrize("option", ["--hf-config", "--groups"])
def test_duplicate_json_keys_refused_naming_the_key(files, text, key, option):
    """json keeps the last of two equal keys without a word; kvviz refuses, naming the key."""
    assert_refused(["plan", option, files(text)], f"key {key!r} appears twice")


@pytest.mark.parametrize("value", ["no", "yes", "false", 0, 1, None])
def test_deepseek_v4_mtp_is_a_bool(value):
    """DeepSeek V4's own options record takes True or False only: "no" is truthy in Python."""
    from kvviz.base.errors import KvvizError
    from kvviz.families.deepseek_v4 import CacheOptions

    with pytest.raises(KvvizError, match="mtp="):
        CacheOptions(mtp=value)


@pytest.mark.parametrize("block_size", [2**60, MAX_TOKENS_PER_BLOCK + 1, 0, -256, True, 256.0])
def test_library_block_size_bounds_are_the_clis(block_size):
    """Every library record refuses what the CLI refuses (--block-size: 1 to MAX_TOKENS_PER_BLOCK)."""
    from kvviz.base.errors import KvvizError
    from kvviz.families.deepseek_v4 import CacheOptions
    from kvviz.options import Options

    for make in (lambda: CacheOptions(block_size=block_size), lambda: Options(block_size=block_size)):
        with pytest.raises(KvvizError, match="block_size="):
            make()
    assert_refused(["plan", "--model", "deepseek-v4-pro", "--block-size", str(block_size)], "block-size")


# ---- issue 20 item 12: misuse of the Python API ends in kvviz's error, saying what to call ----
WRONG = [None, 0, -1, 1.5, True, "", b"llama-3.1-8b", [], {}, ("llama-3.1-8b",), object(), float("nan")]


def _api_misuse():
    """(label, call) for generated misuses of kvviz's public entries: every wrong value in the
    place of each argument, objects of the wrong kind (a Plan or a pool where a model belongs, a
    dict where Options belong), unknown or inapplicable knobs."""
    import kvviz
    from kvviz.api import options_from
    from kvviz.explorer.knobs import default_knobs
    from kvviz.explorer.sweeps import compare_knobs, sweep

    model = kvviz.load("llama-3.1-8b")
    plan = kvviz.plan(model)
    layout = plan.pools[0]
    calls = []
    for v in WRONG + [plan, layout, Path("/nonexistent/config.json"), "no-such-model", model.config]:
        calls += [
            (f"load({v!r:.24})", lambda v=v: kvviz.load(v)),
            (f"plan({v!r:.24})", lambda v=v: kvviz.plan(v)),
            # a Plan is what compare and verify take since issue 29 (tests/test_plan_everywhere.py)
            *([] if v is plan else [(f"compare({v!r:.24})", lambda v=v: kvviz.compare(v, budget_bytes=GIB))]),
        ]
    for v in [w for w in WRONG if w is not None] + [plan, "nope"]:
        calls += [
            (f"plan(planner={v!r:.24})", lambda v=v: kvviz.plan(model, planner=v)),
            (f"plan(kv_dtype={v!r:.24})", lambda v=v: kvviz.plan(model, kv_dtype=v)),
            (f"plan(block_size={v!r:.24})", lambda v=v: kvviz.plan(model, block_size=v)),
            (f"plan(tensor_parallel_size={v!r:.24})", lambda v=v: kvviz.plan(model, tensor_parallel_size=v)),
        ]
    for v in WRONG + [plan, "nope"]:
        calls += [
            (f"compare(budget_bytes={v!r:.24})", lambda v=v: kvviz.compare(model, budget_bytes=v)),
            (f"plan.capacity({v!r:.24})", lambda v=v: plan.capacity(v)),
            (f"sweep({v!r:.24}, [16])", lambda v=v: sweep(v, [16])),
            (f"default_knobs({v!r:.24})", lambda v=v: default_knobs(v)),
            *([] if v == {} else [(f"options_from({v!r:.24})", lambda v=v: options_from(v))]),
            (f"reader.caches(model, {v!r:.24})", lambda v=v: model.reader.caches(model, v)),
            (f"reader.caches({v!r:.24}, Options())", lambda v=v: model.reader.caches(v, kvviz.Options())),
            *([] if v is plan else [(f"verify({v!r:.24})", lambda v=v: kvviz.verify(v))]),
            (f"verify(layout, num_blocks={v!r:.24})", lambda v=v: kvviz.verify(layout, v)),
        ]
    for v in [w for w in WRONG if not isinstance(w, (list, tuple))] + [plan, "nope", range(10**9), iter(range(10**9))]:
        calls += [
            (f"sweep('block_size', {v!r:.24})", lambda v=v: sweep("block_size", v)),
            (f"compare_knobs({v!r:.24})", lambda v=v: compare_knobs(v)),
            *([] if v == {} else [(f"compare_knobs([{v!r:.24}])", lambda v=v: compare_knobs([v]))]),
        ]
    for v in [w for w in WRONG if w is not None]:
        calls += [
            *(
                []
                if type(v) in (int, float)
                else [(f"default_knobs(budget_gib={v!r:.24})", lambda v=v: default_knobs(model, budget_gib=v))]
            ),
            (
                f"default_knobs(tensor_parallel_size=[{v!r:.24}])",
                lambda v=v: default_knobs(model, tensor_parallel_size=v if isinstance(v, (list, dict)) else [v]),
            ),
        ]
    calls += [
        ("plan(nonsense=1)", lambda: kvviz.plan(model, nonsense=1)),
        ("plan(mtp=True) on a decoder", lambda: kvviz.plan(model, mtp=True)),
        ("plan(tensor_parallel_size=3)", lambda: kvviz.plan(model, tensor_parallel_size=3)),
        ("compare(nonsense=1)", lambda: kvviz.compare(model, budget_bytes=GIB, nonsense=1)),
        ("verify(model)", lambda: kvviz.verify(model)),
        ("verify(preset name)", lambda: kvviz.verify("llama-3.1-8b")),
        ("reader.caches(model, dict)", lambda: model.reader.caches(model, {"kv_dtype": "fp8"})),
        ("reader.describe(plan)", lambda: model.reader.describe(plan)),
        ("default_knobs(knob set without a model)", lambda: default_knobs({})),
        ("sweep of 10**9 values", lambda: sweep("block_size", range(10**9))),
        ("sweep of a 10**9 generator", lambda: sweep("block_size", (16 for _ in range(10**9)))),
    ]
    return calls


def test_api_misuse_is_a_kvviz_error_that_says_what_to_give():
    """Every misuse raises kvviz.base.errors.KvvizError (never a bare AttributeError, TypeError,
    KeyError or ZeroDivisionError from deep inside), in one line naming an argument."""
    from kvviz.base.errors import KvvizError

    calls = _api_misuse()
    assert len(calls) >= 250
    wrong = []
    for label, call in calls:
        try:
            call()
        except KvvizError as e:
            message = str(e)
            if "\n" in message or not message:
                wrong.append(f"{label}: not one line: {message!r}")
        except Exception as e:  # noqa: BLE001 - the test names every escape
            wrong.append(f"{label}: {type(e).__name__}: {e}")
        else:
            wrong.append(f"{label}: accepted")
    assert not wrong, f"{len(wrong)} of {len(calls)} misuses:\n" + "\n".join(wrong)


@pytest.mark.parametrize(
    "label,message",
    [
        ("plan(a Plan)", "already a plan"),
        ("load(a Model)", "already a loaded model"),
        ("plan(planner=[])", "give a planner's name"),
        ("reader.caches(model, {})", "kvviz.Options("),
        ("options_from(None)", "give a dict of Options fields"),
        ("default_knobs({})", "default_knobs(model)"),
    ],
)
def test_misuse_message_says_what_to_call_instead(label, message):
    import kvviz
    from kvviz.api import options_from
    from kvviz.base.errors import KvvizError
    from kvviz.explorer.knobs import default_knobs

    model = kvviz.load("llama-3.1-8b")
    call = {
        "plan(a Plan)": lambda: kvviz.plan(kvviz.plan(model)),
        "load(a Model)": lambda: kvviz.load(model),
        "plan(planner=[])": lambda: kvviz.plan(model, planner=[]),
        "reader.caches(model, {})": lambda: model.reader.caches(model, {}),
        "options_from(None)": lambda: options_from(None),
        "default_knobs({})": lambda: default_knobs({}),
    }[label]
    with pytest.raises(KvvizError, match=re.escape(message)):
        call()


def test_explorer_misuse_raises_or_names_the_knob():
    """The explorer never raises out of a callback; given a wrong argument it either refuses at
    once (KvvizError) or opens showing the refusal, naming the knob."""
    pytest.importorskip("ipywidgets")
    import kvviz
    from kvviz.base.errors import KvvizError

    model = kvviz.load("llama-3.1-8b")
    cases = [("model", v) for v in WRONG + ["no-such-model"]]  # a Plan is a right value now (test_plan_everywhere)
    cases += [("budget_gib", v) for v in [0, -1, True, "", b"x", [], {}, object(), float("nan"), "x"]]
    cases += [("block_size", v) for v in [0, -1, 1.5, True, "", b"x", [], {}, object(), float("nan"), 3]]
    cases += [("nonsense", 1), ("head_dim", 512)]
    wrong = []
    for knob, value in cases:
        try:
            ex = kvviz.Explorer(value) if knob == "model" else kvviz.Explorer(model, **{knob: value})
        except KvvizError:
            continue
        except Exception as e:  # noqa: BLE001
            wrong.append(f"{knob}={value!r:.30}: {type(e).__name__}: {e}")
            continue
        if knob not in ex.error:
            wrong.append(f"{knob}={value!r:.30}: opened without naming {knob} ({ex.error!r})")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("argument", ["gpus", "tp_sizes", "contexts"])
def test_fit_table_misuse_is_a_kvviz_error(argument):
    from kvviz.base.errors import KvvizError
    from kvviz.deploy.fit import fit_table

    for value in (None, 0, 1.5, object(), b"\x01\x02"):
        with pytest.raises(KvvizError, match=argument):
            fit_table("llama-3.1-8b", **{argument: value})


def test_a_symlink_loop_is_not_reported_as_missing(tmp_path):
    """A config path that loops (a -> b -> a) says so (ELOOP), not "no such file"."""
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    for target in (tmp_path / "a", tmp_path):
        if target == tmp_path:
            (tmp_path / "config.json").symlink_to(tmp_path / "a")
        err = assert_refused(["plan", "--hf-config", str(target)])
        assert "symbolic links" in err and "no such file" not in err, err
    from kvviz import load
    from kvviz.base.errors import KvvizError

    with pytest.raises(KvvizError, match="symbolic links"):
        load(tmp_path / "a")


# ---- issue 20 item 9: every count is bounded before anything is built from it -------------
@pytest.mark.parametrize(
    "label", ["sweep range", "sweep generator", "compare_knobs generator", "layer mix", "full layers"]
)
def test_a_billion_is_refused_before_anything_is_built(label):
    """A count of 10^9 from the library is refused at once, in well under a second and a few
    MiB: nothing (a list of a billion rows, layers or dicts) is built before the bound."""
    import time
    import tracemalloc

    from kvviz.base.errors import KvvizError
    from kvviz.base.inputs import MAX_VARIANTS
    from kvviz.explorer.knobs import default_knobs
    from kvviz.explorer.sweeps import compare_knobs, model_for, sweep

    call = {
        "sweep range": lambda: sweep("block_size", range(10**9)),
        "sweep generator": lambda: sweep("block_size", (16 for _ in range(10**9))),
        "compare_knobs generator": lambda: compare_knobs({"block_size": 16} for _ in range(10**9)),
        "layer mix": lambda: model_for(default_knobs("deepseek-v4-pro", c4=10**9)),
        "full layers": lambda: model_for(default_knobs("gemma-3-27b", full_layers=10**9)),
    }[label]
    tracemalloc.start()
    t0 = time.perf_counter()
    with pytest.raises(KvvizError, match=f"{MAX_VARIANTS:,}|{MAX_LAYERS:,}|from 0 to"):
        call()
    elapsed = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert elapsed < 2 and peak < 16 << 20, (elapsed, peak)


# ---- issue 20 item 15: one noun, one number -------------------------------------------------
ONE_PLURAL = re.compile(r"(?<![\d,.])1 (blocks|requests|whole requests|pools|groups|layers|layer caches|tokens)\b")


def test_plural_helper():
    from kvviz.base.text import plural

    assert [plural(n, "block") for n in (0, 1, 2, 1000)] == ["0 blocks", "1 block", "2 blocks", "1,000 blocks"]
    assert plural(1, "entry") == "1 entry" and plural(3, "entry") == "3 entries"


@pytest.mark.parametrize("preset", ["llama-3.1-8b", "deepseek-v4-pro", "qwen3-next-80b-a3b"])
def test_no_count_of_one_takes_a_plural(preset):
    """At a budget of exactly one block (and a model of one group), every text kvviz prints says
    "1 block", "1 group", "1 whole request", never "1 blocks"."""
    import kvviz
    from kvviz.views.report_html import report_html

    model = kvviz.load(preset)
    texts = []
    for planner in model.reader.planners:
        plan = (
            kvviz.plan(model, planner, max_model_len=16) if preset != "deepseek-v4-pro" else kvviz.plan(model, planner)
        )
        one_block = plan.block_stride if len(plan.pools) == 1 else sum(p.block_stride for p in plan.pools)
        texts += [plan.explain(one_block), plan.text_map(), str(plan)]
        if len(plan.pools) == 1:
            texts += [plan.layout.explain(one_block), report_html(plan.layout, [], title="t")]
        code, out, err = invoke(["plan", "--model", preset, "--planner", planner, "--budget-bytes", str(one_block)])
        # vLLM's own capacity line is quoted as vLLM prints it ("GPU KV cache size: 1 tokens").
        texts.append("\n".join(line for line in (out + err).splitlines() if not line.startswith("GPU KV cache size")))
    found = sorted({m.group(0) for t in texts for m in ONE_PLURAL.finditer(t)})
    assert not found, found


def test_explorer_labels_say_one_block():
    pytest.importorskip("ipywidgets")
    import kvviz

    plan = kvviz.plan("llama-3.1-8b", max_model_len=16)
    ex = kvviz.Explorer("llama-3.1-8b", budget_gib=plan.block_stride / GIB, context=16)
    text = " ".join([ex.blocks_label.value, ex.fits_label.value, ex.change_label.value, ex.summary.value])
    assert "1 block at" in text and "1 whole request of" in text and not ONE_PLURAL.search(text), text


def test_comparison_json_has_no_float_noise():
    """26.46 GiB in, 26.46 out (not 26.459999999962747, what bytes / 2**30 gives back)."""
    import kvviz
    from kvviz.core import capacity

    pro = kvviz.load("deepseek-v4-pro")
    c = capacity.Comparison(
        before=kvviz.plan(pro, "bucketed").layout,
        after=kvviz.plan(pro, "overlay").layout,
        budget=kvviz.budget_bytes(gib=26.46),
    )
    assert c.to_json()["budget_gib"] == 26.46


def test_a_stride_change_says_what_it_compares():
    """Qwen3-Next, prefix caching off -> on: 544- then 576-token blocks (vLLM's GDN 'align' mode),
    each holding 12 attention pages of 2 KV x 2 heads x 256 x 2 B = 2,048 B a token (the group
    size is the 12 full-attention layers of 48): 12 x 2,048 = 24,576 B a token on both sides, so
    +5.88% a block (576 / 544 - 1) is 0% a token. DeepSeek V4's bucketed -> vllm at mxfp4 is
    between 256-token blocks, and says how it differs from vLLM #48993's -10.75%."""
    import kvviz
    from kvviz.core import capacity

    q = kvviz.load("qwen3-next-80b-a3b")
    c = capacity.Comparison(before=kvviz.plan(q, prefix_caching=False).layout, after=kvviz.plan(q).layout, budget=GIB)
    assert (c.before.block_stride, c.after.block_stride) == (544 * 12 * 2048, 576 * 12 * 2048)
    assert round(c.stride_change_pct, 2) == round(100 * (576 / 544 - 1), 2) == 5.88
    assert c.token_stride_change_pct == 0 and "blocks of 544 and 576 tokens: +0.00% a token" in c.stride_note()
    pro = kvviz.load("deepseek-v4-pro")
    d = capacity.Comparison(before=kvviz.plan(pro, "bucketed").layout, after=kvviz.plan(pro).layout, budget=GIB)
    assert "256-token blocks on both sides" in d.stride_note() and "fp8 to mxfp4" in d.stride_note()


# Values a corrupted HF config may hold where a count, a period, a dtype or a list belongs.
HF_ODD_VALUES = st.one_of(
    st.sampled_from([0, -1]),  # what divides or repeats: drawn as often as all the rest
    st.sampled_from(
        [
            1,
            2,
            3,
            10**6,
            2**40,
            None,
            True,
            False,
            "x",
            "",
            [],
            [1],
            {},
            1.5,
            "full_attention",
            ["full_attention"],
            "auto",
        ]
    ),
)


@seed(SEED)
@settings(max_examples=100, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_hf_config_corruption(files, data):
    """Any HF preset with one or two fields (top level or text_config) removed, cut short or set
    to an odd value either plans or is refused in one line; never a traceback (issue 20 #11/#12:
    periods, head counts, dtypes, text configs, counts that divide)."""
    from kvviz.families import preset_names, preset_raw

    preset = data.draw(st.sampled_from([n for n in preset_names() if "v4" not in n]))
    doc = json.loads(json.dumps(preset_raw(preset)))
    for _ in range(data.draw(st.integers(min_value=1, max_value=2))):
        where = doc["text_config"] if isinstance(doc.get("text_config"), dict) and data.draw(st.booleans()) else doc
        if not where:
            break
        # the fields the misreads hit, whether or not this config has them
        key = data.draw(
            st.sampled_from(
                sorted(where)
                + [
                    "num_attention_heads",
                    "num_key_value_heads",
                    "hidden_size",
                    "torch_dtype",
                    "text_config",
                    "num_hidden_layers",
                ]
            )
        )
        how = data.draw(st.sampled_from(["remove", "value", "shorten"])) if key in where else "value"
        if how == "remove":
            del where[key]
        elif how == "shorten" and isinstance(where[key], list) and where[key]:
            where[key] = where[key][: data.draw(st.integers(min_value=0, max_value=len(where[key]) - 1))]
        else:
            where[key] = data.draw(HF_ODD_VALUES)
    code, out, err = invoke(["plan", "--hf-config", files(json.dumps(doc))])
    assert "Traceback" not in err
    if code == 0:
        assert err == "" and out, (preset, err)
    else:
        assert code == 2 and out == "" and err.startswith("kvviz: error: ") and err.count("\n") == 1, (preset, err)
        assert "modulo" not in err and "division" not in err, err
