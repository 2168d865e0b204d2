"""Issue 37 item 6, the library's share: a public function called with a wrong argument answers one KvvizError
line naming that argument, never a raw Python error (the campaign found 46 of 275 such calls: `transfer(None)`,
...). `of_type` / `having` (kvviz.base.inputs) are the checks every public function asks first."""

import pytest

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
