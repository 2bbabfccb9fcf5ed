"""companion.tables.Table: both renderings are deterministic, cells keep exact values, and
bad input is refused with a clear error."""

from fractions import Fraction

import numpy as np
import pytest

from companion.tables import Table


def test_dict_rows_render_exact_values_in_text_and_html():
    t = Table([{"n": 3, "bound": Fraction(3, 4), "name": "a<b"},
               {"n": 10, "bound": Fraction(1), "name": "c"}], caption="Two rows")
    assert t.columns == ["n", "bound", "name"]
    assert t.cells() == [["3", "3/4", "a<b"], ["10", "1", "c"]]
    assert repr(t) == "\n".join([
        "Two rows",
        " n  bound  name",
        "--  -----  ----",
        " 3    3/4  a<b",
        "10      1  c",
    ])
    html = t._repr_html_()
    assert html.startswith('<table class="companion-table">\n<caption>Two rows</caption>')
    assert '<td class="num">3/4</td>' in html and "<td>a&lt;b</td>" in html
    assert '<th class="num">n</th>' in html and "<th>name</th>" in html
    assert "style" not in html and "id=" not in html
    assert html == Table(t.values, t.columns, "Two rows")._repr_html_()  # nothing random


def test_formats_by_spec_and_callable_and_numpy_scalars():
    t = Table([[np.float64(0.123456), np.int64(7), 0.5]], columns=["x", "k", "y"],
              formats={"x": ".3f", "k": lambda v: f"{v} seeds"})
    assert t.cells() == [["0.123", "7 seeds", "0.5"]]
    assert "np.float64" not in repr(t)


def test_text_columns_stay_left_aligned_and_mixed_columns_too():
    t = Table([["x", 1], [None, "dense"]], columns=["a", "r"])
    assert repr(t).splitlines()[2:] == ["x     1", "None  dense"]


@pytest.mark.parametrize("make, exc, word", [
    (lambda: Table("abc"), TypeError, "rows"),
    (lambda: Table([[1, 2]]), ValueError, "columns"),
    (lambda: Table([[1, 2]], columns=["a"]), ValueError, "rows\\[0\\] has 2 cells"),
    (lambda: Table([{"a": 1}, [2]]), TypeError, "all dicts"),
    (lambda: Table([{"a": 1}], columns=["b"]), ValueError, "lacks the columns"),
    (lambda: Table([{"a": 1}], formats={"b": ".2f"}), ValueError, "unknown columns"),
    (lambda: Table([{"a": 1}], formats={"a": 3}), TypeError, "formats"),
    (lambda: Table([{"a": 1}], caption=3), TypeError, "caption"),
    (lambda: Table([{"a": "x"}], formats={"a": ".2f"}).cells(), ValueError, "format"),
])
def test_bad_input_is_refused_clearly(make, exc, word):
    with pytest.raises(exc, match=word):
        make()
