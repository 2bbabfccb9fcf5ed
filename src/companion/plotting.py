"""The book's figure style (issue 17), called in the setup cell of every chapter.

The book's text column shows a figure at about 720 px. A figure drawn at most
`BOOK_WIDTH` = 7.2 in wide at `BOOK_DPI` = 100 dots per inch is shown at its own size, so
the font sizes set here are the sizes the reader sees: no text below `MIN_FONT_SIZE` = 9 pt.
Serves no result of the paper; it only draws them.
"""

from __future__ import annotations

import matplotlib as mpl

#: the text column's width in inches at `BOOK_DPI`: 7.2 in x 100 dpi = 720 px
BOOK_WIDTH = 7.2
#: dots per inch of the inline PNG: one inch of figure is 100 px of page
BOOK_DPI = 100
#: the smallest font (legends, tick labels) in points at that size
MIN_FONT_SIZE = 9

#: the rcParams `use_book_style` sets
BOOK_STYLE = {
    "figure.figsize": (BOOK_WIDTH, 3.6),
    "figure.dpi": BOOK_DPI,
    "savefig.dpi": BOOK_DPI,
    "font.size": 10,
    "axes.titlesize": 10,
    "axes.labelsize": 10,
    "xtick.labelsize": MIN_FONT_SIZE,
    "ytick.labelsize": MIN_FONT_SIZE,
    "legend.fontsize": MIN_FONT_SIZE,
    "legend.title_fontsize": MIN_FONT_SIZE,
    "figure.titlesize": 11,
    "mathtext.fontset": "dejavusans",
}


def use_book_style() -> None:
    """Set matplotlib's rcParams so that figures fit the column and stay readable.

    Figures default to the column's width; a figure with `figsize` at most `BOOK_WIDTH`
    wide is shown unshrunk, so every legend and tick label is at least `MIN_FONT_SIZE` pt
    on the page. Maths in labels is written `$...$` (mathtext in the text's font).
    """
    mpl.rcParams.update(BOOK_STYLE)
