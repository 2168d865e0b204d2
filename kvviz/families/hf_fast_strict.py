"""What transformers 5.24.0's `@strict` config classes refuse, as kvviz's table reader
(kvviz/families/hf_fast.py) asks it: never accept a config.json that transformers -- and so vLLM 0.33,
which loads configs through transformers -- refuses. Where a JSON could be refused the reader returns
None and transformers itself decides (and kvviz turns its refusal into one line).

The table (scripts/hf_config_strict.py writes this part of it) holds per class: each field's annotation
as a type code, judged here as huggingface_hub's strict type_validator judges a JSON value
(huggingface_hub/dataclasses.py: an `int` refuses a bool and a float, a `float` refuses an int); the
fields' own validators (transformers/utils/type_validators.py positive_int_field, interval, probability,
activation_fn_key); and the class validators as steps: PreTrainedConfig's own (validate_architecture's
head_dim * num_heads == embed_dim, validate_layer_type, validate_rope, validate_output_attentions:
configuration_utils.py, modeling_rope_utils.py), mirrored here, or a class's own `if <expr>: raise`
lines (LlamaConfig.validate_architecture's `hidden_size % num_attention_heads != 0`, Jamba's offsets,
...), evaluated by a small interpreter of a few node types; anything else falls back.
"""

from __future__ import annotations

import ast
import functools
import operator

_KINDS = (
    ("null", type(None)),
    ("bool", bool),
    ("int", int),
    ("float", float),
    ("str", str),
    ("list", list),
    ("dict", dict),
)


def _kind(value) -> str | None:
    return next((name for name, tp in _KINDS if type(value) is tp), None)


def fits(value, code, codes: list) -> bool:
    """Whether huggingface_hub's type_validator accepts the JSON `value` for the type `code`."""
    if code == "any":
        return True
    head, args = code[0], code[1:]
    if head == "is":
        return _kind(value) in args
    if head == "|":
        return any(fits(value, c, codes) for c in args)
    if head == "lit":  # _validate_literal: a bool matches only a bool, an int only an int
        return any(type(a) is type(value) and a == value for a in args) or (
            isinstance(value, str) and value in [a for a in args if isinstance(a, str)]
        )
    if head in ("list", "seq"):
        if not isinstance(value, (list, str) if head == "seq" else list):
            return False
        return not args or all(fits(v, args[0], codes) for v in value)
    if head == "dict":
        if not isinstance(value, dict):
            return False
        return not args or all(fits(k, args[0], codes) and fits(v, args[1], codes) for k, v in value.items())
    return False


def _passes(value, check) -> bool:
    """One field validator of transformers/utils/type_validators.py on a JSON value."""
    try:
        if check == "pos":  # positive_int_field
            return value is None or (isinstance(value, int) and value > 0)
        if check[0] == "in":  # interval(min, max, exclude_min, exclude_max), probability
            lo, hi, ex_lo, ex_hi = check[1:]
            lo_ok = lo is None or (lo < value if ex_lo else lo <= value)
            hi_ok = hi is None or (value < hi if ex_hi else value <= hi)
            if lo is None or hi is None:  # float("-inf") <= value: a str still raises
                value < 0  # noqa: B015
            return bool(lo_ok and hi_ok)
        if check[0] == "act":  # activation_fn_key: a key of ACT2FN
            return value in check[1]
    except TypeError:
        return False
    return False  # "custom": a validator kvviz does not mirror


def fields_fit(part: dict, entry: dict, codes: list) -> bool:
    """Every field the JSON `part` gives (by its name or an alias) fits its annotation and passes its
    own validators, as the value is set when the class is built (before __post_init__ converts any)."""
    hints, checks, aliases = entry.get("types") or {}, entry.get("checks") or {}, entry.get("attribute_map") or {}
    for name, value in part.items():
        key = aliases.get(name, name)
        if key in hints and not fits(value, codes[hints[key]], codes):
            return False
        if not all(_passes(value, c) for c in checks.get(key, ())):
            return False
    return True


_BIN = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_CMP = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}


class _Unknown(Exception):
    """A node the interpreter does not evaluate: the reader leaves the config to transformers."""


@functools.lru_cache(maxsize=512)
def _parsed(expr: str):
    return ast.parse(expr, mode="eval").body


def _eval(node, self_get, local: dict):
    """Python's value of `node` (a validator's expression) with `self.x` read by `self_get`."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return self_get(node.attr)
    if isinstance(node, ast.Name) and node.id in local:
        return local[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
        return _BIN[type(node.op)](_eval(node.left, self_get, local), _eval(node.right, self_get, local))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub)):
        value = _eval(node.operand, self_get, local)
        return (not value) if isinstance(node.op, ast.Not) else -value
    if isinstance(node, ast.BoolOp):
        value = None
        for part in node.values:
            value = _eval(part, self_get, local)
            if bool(value) != isinstance(node.op, ast.And):
                return value
        return value
    if isinstance(node, ast.Compare):
        left = _eval(node.left, self_get, local)
        for op, right_node in zip(node.ops, node.comparators):
            if type(op) not in _CMP:
                raise _Unknown
            right = _eval(right_node, self_get, local)
            if not _CMP[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        test = _eval(node.test, self_get, local)
        return _eval(node.body if test else node.orelse, self_get, local)
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_eval(e, self_get, local) for e in node.elts]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        if node.func.id == "len" and len(node.args) == 1:
            return len(_eval(node.args[0], self_get, local))
        if node.func.id == "getattr" and len(node.args) == 3 and isinstance(node.args[0], ast.Name):
            name = _eval(node.args[1], self_get, local)
            try:
                return self_get(name)
            except _Unknown:
                raise
            except KeyError:
                return _eval(node.args[2], self_get, local)
    raise _Unknown


def _layers_ok(values: dict, allowed: list) -> bool:
    """PreTrainedConfig.validate_layer_type (its early `return` when layer_types is None included)."""
    for kinds, key in zip(allowed, ("layer_types", "mlp_layer_types")):
        layers = values.get(key)
        if not (layers is not None and "num_hidden_layers" in values):
            return True
        if not all(k in kinds for k in layers):
            return False
        n = values["num_hidden_layers"]
        if n is not None and n != len(layers):
            return False
    return True


# RotaryEmbeddingConfigMixin._validate_<rope_type>_rope_parameters' required keys (modeling_rope_utils.py);
# rope_theta is filled by standardize_rope_params first. A rope type not here (longrope's sizes, ...) falls back.
_ROPE_KEYS = {
    "default": (),
    "linear": ("factor",),
    "dynamic": ("factor",),
    "yarn": ("factor", "original_max_position_embeddings"),
    "llama3": ("factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor"),
}

# the keys the validators compute with (a comparison or a division of a non-number raises)
_ROPE_NUMBERS = (
    "factor",
    "original_max_position_embeddings",
    "low_freq_factor",
    "high_freq_factor",
    "beta_fast",
    "beta_slow",
    "attention_factor",
    "partial_rotary_factor",
    "rope_theta",
)


def _rope_ok(values: dict) -> bool:
    """RotaryEmbeddingConfigMixin.validate_rope, where its checks are plain: each rope dict of a known
    type with its required keys and numbers (a warning otherwise, but a comparison of a non-number
    raises), and validate_rope's even rotary dimension: `head_dim` > 4 odd and fully rotated refuses."""
    head_dim = values.get("head_dim")
    # __post_init__'s standardize_rope_params always leaves a rope dict (the class's default one where the
    # JSON has none), so the even-dimension check always runs: an odd head_dim > 4 is left to transformers
    if isinstance(head_dim, int) and head_dim > 4 and head_dim % 2:
        return False
    rope = values.get("rope_parameters")
    if not rope:
        return True
    if not isinstance(rope, dict):
        return False
    parts = list(rope.values()) if any(isinstance(v, dict) for v in rope.values()) else [rope]
    for part in parts:
        if part is None:
            continue
        if not isinstance(part, dict):
            return False
        kind = part.get("rope_type", part.get("type", "default"))
        if kind not in _ROPE_KEYS or any(k not in part for k in _ROPE_KEYS[kind]):
            return False
        numbers = [part.get(k) for k in _ROPE_NUMBERS]
        if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in numbers if v is not None):
            return False
        if kind == "llama3" and not isinstance(values.get("max_position_embeddings"), (int, float)):
            return False
        partial = part.get("partial_rotary_factor", 1.0)
        try:
            if head_dim is not None and head_dim > 4 and head_dim % 2 and int(head_dim * partial) == head_dim:
                return False
        except TypeError:
            return False
    return True


# The fields PreTrainedConfig's own validators read (mirrored above): a property or stale derived one among
# them is left to transformers.
_BASE_READS = (
    "head_dim",
    "num_heads",
    "embed_dim",
    "layer_types",
    "mlp_layer_types",
    "num_hidden_layers",
    "rope_parameters",
    "max_position_embeddings",
    "output_attentions",
)


def _reads_base(entry: dict) -> bool:
    return any(isinstance(step, str) for step in entry.get("validators") or ())


def validators_pass(values: dict, part: dict, entry: dict, allowed: list, covered, stale=()) -> bool:
    """Whether every class validator of the entry passes on `values` (the namespace the reader built:
    defaults, JSON, derived fields, aliases); False where one refuses or kvviz cannot tell (a field the
    class computes, a property or a `stale` derived field the reader left at its default, included)."""
    unknown = (set(entry.get("properties") or ()) - set(covered)) | set(stale)

    def self_get(name):
        if name in unknown:
            raise _Unknown  # the class computes it: what it makes of it is transformers'
        return values[name]

    try:
        seen = {k: self_get(k) for k in _BASE_READS if k in values or k in unknown} if _reads_base(entry) else {}
    except _Unknown:
        return False

    local: dict = {}
    for step in entry.get("validators") or ():
        try:
            if step == "arch":  # PreTrainedConfig.validate_architecture
                if "per_layer_config" in part:
                    return False  # a heterogeneous config validates each layer's config
                keys = ("head_dim", "num_heads", "embed_dim")
                if all(k in seen for k in keys) and seen["head_dim"] * seen["num_heads"] != seen["embed_dim"]:
                    return False
            elif step == "layers":
                if not _layers_ok(seen, allowed):
                    return False
            elif step == "rope":
                if not _rope_ok(seen):
                    return False
            elif step == "attn":  # validate_output_attentions: depends on the attention implementation
                if seen.get("output_attentions"):
                    return False
            elif step == "tokens":  # validate_token_ids only warns
                continue
            elif step[0] == "let":
                local[step[1]] = _eval(_parsed(step[2]), self_get, local)
            elif step[0] == "if":
                if _eval(_parsed(step[1]), self_get, local):
                    return False
            elif step[1] not in covered:  # ["?", name]: unless the model's RULES mirror it
                return False
        except Exception:  # noqa: BLE001 - a validator that would raise (or kvviz cannot evaluate): transformers'
            return False
    return True
