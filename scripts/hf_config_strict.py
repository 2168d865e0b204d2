"""The `@strict` part of scripts/hf_config_table.py's table: what huggingface_hub's strict dataclass
(huggingface_hub/dataclasses.py strict, type_validator) and transformers' class validators
(configuration_utils.py PreTrainedConfig.validate_*, each class's validate_architecture, ...) refuse,
written so that kvviz's table reader (kvviz/families/hf_fast_strict.py) can tell, without
transformers, whether a JSON could be refused, and then leave the config to transformers.

- `type_code(annotation)`: a field's annotation as a JSON tree: ["is", kinds...] (the JSON value kinds
  -- null, bool, int, float, str, list, dict -- that `isinstance` accepts, a bool never an int),
  ["|", codes...] (a union), ["lit", values...] (a Literal), ["list", code?], ["dict", key, value],
  ["seq", code?] (collections.abc.Sequence: a list or a str); "any" (Any, or a string annotation,
  which strict does not check).
- `field_check(validator)`: a field's own validators (transformers/utils/type_validators.py):
  "pos" (positive_int_field), ["in", min, max, exclude_min, exclude_max] (interval, probability),
  ["act", names] (activation_fn_key: ACT2FN's keys), "custom" (any other: the reader falls back).
- `validator_steps(cls)`: the class validators as steps: a base validator by name ("arch", "layers",
  "rope", "attn", "tokens": PreTrainedConfig's own, which kvviz mirrors by hand), ["let", name, expr]
  and ["if", expr] (a class's own validator made of `x = expr` and `if expr: raise ...` lines, expr as
  source text, which kvviz evaluates with a small interpreter of a few node types), or ["?", name]
  (anything else: the reader falls back unless its RULES mirror that validator).
"""

from __future__ import annotations

import ast
import collections.abc
import dataclasses
import inspect
import textwrap
import types
import typing

_SAMPLES = (("null", None), ("bool", True), ("int", 1), ("float", 1.0), ("str", "s"), ("list", []), ("dict", {}))
BASES = {
    "validate_architecture": "arch",
    "validate_layer_type": "layers",
    "validate_rope": "rope",
    "validate_output_attentions": "attn",
    "validate_token_ids": "tokens",
}


def _kinds(tp) -> list:
    """The JSON kinds `isinstance(value, tp)` accepts (huggingface_hub _validate_simple_type: an int
    field refuses a bool; an isinstance that raises, a TypedDict's, refuses)."""
    out = ["is"]
    for kind, sample in _SAMPLES:
        if tp is int and kind == "bool":
            continue
        try:
            if isinstance(sample, tp):
                out.append(kind)
        except TypeError:
            pass
    return out


def type_code(tp):
    """The JSON tree of one annotation, as huggingface_hub's type_validator judges a JSON value."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is typing.Any or isinstance(tp, (str, typing.ForwardRef)):
        return "any"
    if tp is None or tp is type(None):
        return ["is", "null"]
    if origin in (typing.Union, types.UnionType):
        return ["|", *(type_code(a) for a in args)]
    if origin is typing.Literal:
        return ["lit", *(a for a in args if a is None or isinstance(a, (bool, int, float, str)))]
    if origin is list:
        return ["list", *(type_code(a) for a in args[:1])]
    if origin is dict:
        return ["dict", *(type_code(a) for a in args[:2])]
    if origin is collections.abc.Sequence:
        return ["seq", *(type_code(a) for a in args[:1])]
    if origin in (tuple, set):
        return ["is"]  # a JSON value is never a tuple or a set
    if isinstance(tp, type):
        return _kinds(tp)
    return ["is"]  # strict raises "Unsupported type" for anything else


def field_check(validator):
    """One field's own validators as a JSON code (see the module docstring)."""
    checks = validator if isinstance(validator, list) else [validator]
    out = []
    for check in checks:
        name = getattr(check, "__qualname__", "")
        cells = dict(zip(check.__code__.co_freevars, (c.cell_contents for c in check.__closure__ or ())))
        if name == "positive_int_field":
            out.append("pos")
        elif name == "probability":
            out.append(["in", 0, 1, False, False])
        elif name == "interval.<locals>._inner":
            lo, hi = cells["min"], cells["max"]
            out.append(
                ["in", None if lo == float("-inf") else lo, None if hi == float("inf") else hi]
                + [cells["exclude_min"], cells["exclude_max"]]
            )
        elif name == "activation_fn_key":
            from transformers.utils.type_validators import ACT2FN

            out.append(["act", sorted(ACT2FN)] if ACT2FN else "custom")
        else:
            out.append("custom")
    return out


def _own_steps(method) -> list | None:
    """A class's own validator as steps ("super" for `super().<its name>()`), or None when it is more
    than `x = expr` and `if expr: raise ...` lines."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(method)))
    except (OSError, TypeError, SyntaxError):
        return None
    func = tree.body[0]
    if not isinstance(func, ast.FunctionDef) or func.decorator_list:
        return None
    steps = []
    for stmt in func.body:
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if isinstance(call, ast.Constant):
            continue  # the docstring
        if (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == method.__name__
            and isinstance(call.func.value, ast.Call)
            and getattr(call.func.value.func, "id", None) == "super"
            and not call.args
            and not call.func.value.args
        ):
            steps.append("super")
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            steps.append(["let", stmt.targets[0].id, ast.unparse(stmt.value)])
        elif isinstance(stmt, ast.If) and not stmt.orelse and all(isinstance(s, ast.Raise) for s in stmt.body):
            steps.append(["if", ast.unparse(stmt.test)])
        else:
            return None
    return steps


def _steps(cls, name: str, function, after: int) -> list:
    """The steps of `function` (the validator `name` as cls.__mro__[after:] resolves it), its
    `super()` calls resolved along the MRO."""
    from transformers.configuration_utils import PreTrainedConfig

    if getattr(PreTrainedConfig, name, None) is function:
        return [BASES.get(name, ["?", name])]
    owner = next((i for i in range(after, len(cls.__mro__)) if vars(cls.__mro__[i]).get(name) is function), None)
    own = _own_steps(function) if owner is not None else None
    if own is None:
        return [["?", name]]
    out = []
    for step in own:
        if step != "super":
            out.append(step)
            continue
        parent = next((i for i in range(owner + 1, len(cls.__mro__)) if name in vars(cls.__mro__[i])), None)
        if parent is None:
            return [["?", name]]
        out.extend(_steps(cls, name, vars(cls.__mro__[parent])[name], parent))
    return out


def validator_steps(cls) -> list:
    """Every class validator strict runs for `cls` (its `__class_validators__`) as steps."""
    out = []
    for method in getattr(cls, "__class_validators__", ()):
        out.extend(_steps(cls, method.__name__, method, 0))
    return out


def strict_entry(cls) -> dict:
    """The entry's `types` ({field: type code}; the table holds each code once and the entry its index),
    `checks` (the fields' own validators) and `validators`."""
    hints = {f.name: type_code(f.type) for f in dataclasses.fields(cls)}
    checks = {
        f.name: field_check(f.metadata["validator"]) for f in dataclasses.fields(cls) if f.metadata.get("validator")
    }
    return {"types": hints, "checks": checks, "validators": validator_steps(cls)}
