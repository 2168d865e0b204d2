"""Issue 37 item 6, the library's share: a public function called with a wrong argument answers one KvvizError
line naming that argument, never a raw Python error (the campaign found 46 of 275 such calls: `transfer(None)`,
...). `of_type` / `having` (kvviz.base.inputs) are the checks every public function asks first."""

import pytest
import torch

from kvviz.base.errors import KvvizError
from kvviz.base.inputs import having, of_type


def test_of_type_takes_the_kind_and_refuses_the_rest_naming_the_field():
    assert of_type(3, int, field="n", give="a count") == 3
    assert of_type(True, (int, bool), field="flag", give="True or False") is True
    with pytest.raises(KvvizError, match=r"^n=True: give a count$"):
        of_type(True, int, field="n", give="a count")  # a bool is no number unless bool is named
    with pytest.raises(KvvizError, match=r"^n=\[0, 0, 0, .*\.\.\.: give a count$"):
        of_type([0] * 1000, int, field="n", give="a count")  # the value shown short


def test_having_asks_for_attributes():
    class Model:
        name, reader = "m", object()

    assert having(Model, ("name", "reader"), field="model", give="a model") is Model
    with pytest.raises(KvvizError, match=r"^model=None: give a kvviz\.load\(\.\.\.\) model$"):
        having(None, ("name", "reader"), field="model", give="a kvviz.load(...) model")


# ---- the walk: every public function, each argument wrong in turn ---------------------------------
import importlib  # noqa: E402
import inspect  # noqa: E402

import kvviz  # noqa: E402
from kvviz.base.errors import MAX_MESSAGE  # noqa: E402
from kvviz.options import Options  # noqa: E402

# The rooms of the brief (kvviz.api, .deploy, .verify, .pool, .engines) and the deployment views of kvviz.vllm
# the campaign called (`transfer(None)`); kvviz.views and kvviz.explorer are walked beside them (test_explorer).
WALKED = ("kvviz.api", "kvviz.deploy", "kvviz.verify", "kvviz.pool", "kvviz.engines", "kvviz.vllm.transfer")
WALKED += ("kvviz.vllm.offload",)
CONSTRUCTED = ("BlockPool", "Pool", "EngineKnobs")  # the classes a user builds (the rest are results)


class Nothing:
    """An argument that is nothing kvviz knows: every public function must refuse it naming the argument."""

    def __repr__(self) -> str:
        return "Nothing()"


WRONG = (None, -1, 0, "x", 1.5, [], {}, True, float("nan"), 2**70, ("a", 1), Nothing())


def _samples() -> dict:
    """A value that is right for each argument name the walked functions use (so a call is valid but for the one
    argument made wrong)."""
    import torch

    from kvviz.deploy import fit_table
    from kvviz.engines import EngineKnobs, compare_rows
    from kvviz.verify import layer_batches

    model, jamba = kvviz.load("llama-3.1-8b"), kvviz.load("jamba-v0.1")
    plan = kvviz.plan(model, max_model_len=4096)
    rows = compare_rows(model, ("vllm",), kv_budget_bytes=1 << 30)
    return {
        "name_or_path": "llama-3.1-8b",
        "model": model,
        "plan": plan,
        "decode_plan": plan,
        "layout": plan.layout,
        "options": Options(max_model_len=4096),
        "budget_bytes": 1 << 30,
        "kv_budget_bytes": 1 << 30,
        "num_blocks": 4,
        "prompt_len": 1000,
        "gpu": "H100",
        "gpu_spec": "H100",
        "engine": "vllm",
        "engines": ("vllm",),
        "table": fit_table(model, gpus=("H100",), tp_sizes=(1,), contexts=(4096,)),
        "data_parallel_size": 2,
        "gpus": 2,
        "raw": dict(model.raw_config),
        "checkpoint_dir": str(ROOT / "tests" / "data" / "own-configs" / "llama-3.3-70b"),
        "num_bytes": 1024,
        "nbytes": 1024,
        "device": "cpu",
        "name": "cpu",
        "group": "full",
        "ids": torch.tensor([0, 1, 2]),
        "e": RuntimeError("x"),
        "rows": rows,
        "caches": model.reader.caches(model, Options()),
        "fmt": "bf16",
        "shape": (2, 32),
        "generator": torch.Generator(),
        "n": 1,
        "max_bytes": 1 << 20,
        "batches": layer_batches(plan.layout),
        "max_item_bytes": 1 << 20,
        "sample_values": 4,
        "knobs": EngineKnobs(),
        "a": plan,
        "b": kvviz.plan(model, max_model_len=4096, kv_dtype="fp8"),
        "kv_budget": kvviz.deploy.kv_budget(model, gpu="H100"),
        "state": next(c for c in jamba.reader.caches(jamba, Options()) if hasattr(c, "parts")),
        "conv_dtype": "bf16",
        "ssm_dtype": "fp32",
    }


ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]


def _walked():
    for modname in WALKED:
        mod = importlib.import_module(modname)
        names = getattr(mod, "__all__", None) or [
            n for n, v in vars(mod).items() if not n.startswith("_") and getattr(v, "__module__", "") == modname
        ]
        for name in names:
            fn = getattr(mod, name)
            if callable(fn) and (not inspect.isclass(fn) or name in CONSTRUCTED):
                yield f"{modname}.{name}", fn


def _call(fn, kwargs):
    try:
        out = fn(**kwargs)
        if hasattr(out, "__enter__") and hasattr(out, "__exit__"):  # a context manager checks as it is entered
            with out:
                pass
    except KvvizError as e:
        return str(e)
    return None


# Where one function's argument of a name takes another value than the name's sample.
SPECIFIC = {
    "kvviz.api.options_from": {"knobs": {}},
    "kvviz.api.compare": {"gpu": None},
    "kvviz.api.side_by_side": {"gpu": None},
    "kvviz.api.budget_record": {"budget_bytes": 1 << 30},
    "kvviz.api.gpu_budget": {"gpu": "H100"},
    "kvviz.deploy.kv_budget": {"checkpoint_dir": None},
    "kvviz.deploy.estimate_parameters": {"model": "llama-3.1-8b"},
    "kvviz.verify.cpu_threads": {"device": torch.device("cpu")},
    "kvviz.verify.source_values": {"device": torch.device("cpu")},
    "kvviz.deploy.fit_table": {"gpus": ("H100",), "tp_sizes": (1,), "contexts": (4096,), "checkpoint_dir": None},
    "kvviz.vllm.offload.offload_for": {"options": Options(kv_offloading_size=8, max_model_len=4096)},
}


@pytest.fixture(scope="module")
def samples():
    return _samples()


PARAMS = [
    (where, fn, p.name)
    for where, fn in _walked()
    for p in inspect.signature(fn).parameters.values()
    if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
]


@pytest.mark.parametrize("where, fn, param", PARAMS, ids=[f"{w}:{p}" for w, _, p in PARAMS])
def test_every_public_function_refuses_a_wrong_argument_in_one_line(samples, where, fn, param):
    """Each argument in turn given each of WRONG (the others right): the call works or raises one KvvizError line
    of at most a few hundred characters; an argument that is nothing kvviz knows is refused naming it."""
    sig = inspect.signature(fn).parameters
    own = SPECIFIC.get(where, {})
    base = {n: samples[n] for n in sig if n in samples and _named(sig[n])} | own
    assert _call(fn, base) is None, (where, "the right arguments are refused", _call(fn, base))
    # A function that takes the name of its argument (`what`: resolve_device's "device", a CLI flag) names that.
    named = param if param != "name" or "what" not in sig else sig["what"].default
    for wrong in WRONG:
        kwargs = {**base, param: wrong}
        message = _call(fn, kwargs)  # anything but a KvvizError fails the test here, naming the call
        if message is not None:
            assert "\n" not in message and len(message) <= MAX_MESSAGE + 40, (where, param, message)
        if isinstance(wrong, Nothing):
            assert message is not None and named in message, (where, param, message)


def _named(p: inspect.Parameter) -> bool:
    return p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)


def test_the_campaigns_calls(samples):
    """The campaign's own reproductions (issue 37): each one line naming its argument."""
    from kvviz.engines import plan_vllm
    from kvviz.vllm.transfer import transfer

    with pytest.raises(KvvizError, match=r"^decode_plan=None: give a kvviz\.plan"):
        transfer(None, 1000)
    with pytest.raises(KvvizError, match=r"^model=None: give a kvviz\.load"):
        plan_vllm(None, kv_budget_bytes=1 << 30)
    with pytest.raises(KvvizError, match=r"^name_or_path=None: give a preset name"):
        kvviz.load(None)
    with pytest.raises(KvvizError, match=r"^model='no-such-model': neither a preset"):
        kvviz.plan("no-such-model")
