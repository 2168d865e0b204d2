"""Issue 37 item 3: one door to a Plan. `kvviz.api.make_plan` is the only way a Plan is made (the CLI, the
explorer, deploy and the replay's CLI all go through it), and every Plan it makes can size a GPU from the
config the model was read from: `kvviz.load(own config.json)` then `kvviz.plan(m).capacity(gpu="H100")`
gives what `kvviz plan --hf-config ... --gpu H100` prints, for a user's own file and for a copy of it."""

import ast
import json
import shutil
from pathlib import Path

import pytest

import kvviz
from kvviz.api import make_plan
from kvviz.base.errors import KvvizError
from kvviz.cli import main
from kvviz.options import Options

ROOT = Path(__file__).resolve().parents[1]
OWN = sorted((ROOT / "tests" / "data" / "own-configs").glob("*/config.json"))
TP = (1, 2, 4, 8)


def _cli(capsys, *argv) -> tuple[int, dict | str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else err.strip().removeprefix("kvviz: error: "))


def _library(path: Path, tp: int) -> tuple[int, dict | str]:
    try:
        cap = kvviz.plan(kvviz.load(path), tensor_parallel_size=tp).capacity(gpu="H100")
    except KvvizError as e:
        return 2, str(e)
    return 0, cap.to_json()


def _same(cli: tuple, lib: tuple) -> None:
    assert cli[0] == lib[0], (cli, lib)
    if cli[0] == 0:  # every number and line (a copy's model is named after its folder)
        assert {**lib[1], "model": None} == {**cli[1]["summary"], "model": None}
    else:  # the same refusal; the CLI names its flag where the library names the argument
        assert cli[1].split(" (or ")[0] == lib[1].split(" (or ")[0]


@pytest.mark.parametrize("config", OWN, ids=lambda p: p.parent.name)
@pytest.mark.parametrize("tp", TP)
def test_a_loaded_own_config_sizes_a_gpu_as_the_cli_does(config, tp, capsys):
    cli = _cli(capsys, "plan", "--hf-config", str(config), "--gpu", "H100", "-tp", str(tp), "--json")
    _same(cli, _library(config, tp))


@pytest.mark.parametrize("config", OWN, ids=lambda p: p.parent.name)
def test_a_copy_under_another_name_sizes_the_same(config, tmp_path, capsys):
    """A copy in a folder of another name (no preset of that name, a parsed-cache hit by its bytes)."""
    copy = tmp_path / f"copy-of-{config.parent.name}" / "config.json"
    copy.parent.mkdir()
    shutil.copy(config, copy)
    tp = 8
    cli = _cli(capsys, "plan", "--hf-config", str(copy.parent), "--gpu", "H100", "-tp", str(tp), "--json")
    _same(cli, _library(copy, tp))
    _same(cli, _library(config, tp))  # the same bytes under the first name


def test_a_config_named_like_a_preset_is_sized_from_its_own_file(tmp_path):
    """A user's file in a folder named after a preset: its own fields size the weights, never the preset's."""
    raw = json.loads((ROOT / "tests" / "data" / "own-configs" / "llama-3.3-70b" / "config.json").read_text())
    own = tmp_path / "llama-3.1-8b" / "config.json"  # a 70B config in a folder named after the 8B preset
    own.parent.mkdir()
    own.write_text(json.dumps(raw))
    budget = kvviz.deploy.kv_budget(kvviz.load(own), gpu="H200", tensor_parallel_size=4)
    preset = kvviz.deploy.kv_budget(kvviz.load("llama-3.1-8b"), gpu="H200", tensor_parallel_size=4)
    assert budget.weights_bytes > 4 * preset.weights_bytes  # 70.6 B parameters against 8.0 B


def test_a_safetensors_index_beside_the_config_gives_exact_weights(tmp_path, capsys):
    """As the CLI does for --hf-config: the checkpoint's index beside the config.json is the exact weights."""
    folder = tmp_path / "ckpt"
    folder.mkdir()
    shutil.copy(OWN[0], folder / "config.json")
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 10 * 2**30}}))
    budget = kvviz.deploy.kv_budget(kvviz.load(folder), gpu="H100")
    assert budget.weights_bytes == 10 * 2**30 and not budget.term("weights").estimate
    cli = _cli(capsys, "plan", "--hf-config", str(folder), "--gpu", "H100", "--json")
    _same(cli, (0, kvviz.plan(kvviz.load(folder)).capacity(gpu="H100").to_json()))


def test_make_plan_is_the_door_and_its_plans_size_a_gpu():
    m = kvviz.load("llama-3.1-8b")
    p = make_plan(m, None, Options(tensor_parallel_size=2))
    assert p.capacity(gpu="H100") == kvviz.plan(m, tensor_parallel_size=2).capacity(gpu="H100")
    with pytest.raises(KvvizError, match=r"^options=.*Options"):
        make_plan(m, None, {"kv_dtype": "fp8"})


def _calls(path: Path, name: str) -> list[int]:
    tree = ast.parse(path.read_text())
    return [
        n.lineno
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and getattr(n.func, "id", getattr(n.func, "attr", None)) == name
    ]


# The vLLM planner itself and the engines' side-by-side rows, whose vLLM plan is counted at the bytes given and
# never handed out (kvviz.engines may not import the app, where the GPU budget rule lives: docs/architecture.md).
PLANNER_ROOMS = ("kvviz/vllm/", "kvviz/engines/", "kvviz/api.py")


def test_no_room_makes_a_plan_but_through_the_door():
    """Outside the planner itself, nothing calls kvviz.vllm.plan.plan_model: every room asks kvviz.api.make_plan."""
    offenders = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted((ROOT / "kvviz").rglob("*.py"))
        if not str(path.relative_to(ROOT)).startswith(PLANNER_ROOMS)
        for line in _calls(path, "plan_model")
    ]
    assert not offenders, "plans made past the door: " + ", ".join(offenders)
