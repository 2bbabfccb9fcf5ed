"""The book's figure style (issue 17): figures fit the 720 px column unshrunk and no text
on them is smaller than 9 pt there."""

import matplotlib as mpl
import pytest
from matplotlib.font_manager import FontProperties

from companion.plotting import BOOK_DPI, BOOK_STYLE, BOOK_WIDTH, MIN_FONT_SIZE, use_book_style


@pytest.fixture
def book_style():
    with mpl.rc_context():
        mpl.rcParams.update(mpl.rcParamsDefault)
        use_book_style()
        yield mpl.rcParams


def _points(value) -> float:
    """A font size in points, also for names such as 'small' (relative to font.size)."""
    return FontProperties(size=value).get_size_in_points()


def test_the_default_figure_fits_the_column(book_style):
    width, height = book_style["figure.figsize"]
    assert width * book_style["figure.dpi"] <= 720
    assert 0 < height <= width
    assert BOOK_WIDTH * BOOK_DPI == 720


@pytest.mark.parametrize(
    "key",
    ["font.size", "axes.titlesize", "axes.labelsize", "xtick.labelsize",
     "ytick.labelsize", "legend.fontsize", "legend.title_fontsize"],
)
def test_no_text_below_the_minimum(book_style, key):
    # matplotlib's defaults put legends at 'medium' of 10 pt, but ticks at 'medium' too;
    # the check resolves named sizes, so a 'small' legend (8.33 pt) fails it
    assert _points(book_style[key]) >= MIN_FONT_SIZE >= 9


def test_the_style_changes_matplotlib_defaults(book_style):
    # matplotlib's default figure is 6.4 in wide; the style's is the column's width
    assert book_style["figure.figsize"][0] == BOOK_WIDTH
    assert tuple(book_style["figure.figsize"]) != tuple(mpl.rcParamsDefault["figure.figsize"])
    for key, value in BOOK_STYLE.items():
        assert book_style[key] == (list(value) if isinstance(value, tuple) else value), key


def test_a_small_legend_fails_the_check():
    with mpl.rc_context({"legend.fontsize": "small", "font.size": 10}):
        assert _points(mpl.rcParams["legend.fontsize"]) < MIN_FONT_SIZE
