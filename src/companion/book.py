"""The book's own vocabulary, used by every chapter: result tables (:class:`Table`), the
figure style (:func:`use_book_style`) and the one switch for determinism
(:func:`seed_everything`). Serves no result of the paper; it only shows them."""

from __future__ import annotations

import contextlib
import html
import os
import random
import re
from collections.abc import Mapping, Sequence
from fractions import Fraction
from numbers import Real

import matplotlib as mpl
import numpy as np

from companion.checks import check_instance, check_int, check_mapping

__all__ = ["Table", "use_book_style", "seed_everything", "glue_text", "BOOK_WIDTH",
           "BOOK_COLORS", "BOOK_MARKERS", "BOOK_LINESTYLES"]


class Table:
    """A table of results: plain HTML in a notebook, aligned text elsewhere, both depending
    only on the cells (outputs compare exactly under nbval). rows: dicts (columns default to
    the first row's keys) or sequences; formats: {column: format spec}; else ints and
    Fractions print exactly, floats as their shortest repr, numpy scalars as Python numbers."""

    def __init__(self, rows, columns: Sequence[str] | None = None, caption: str | None = None,
                 formats: Mapping[str, str] | None = None):
        if isinstance(rows, (str, bytes, Mapping)) or not isinstance(rows, Sequence):
            raise TypeError(f"rows must be a sequence of dicts or of sequences, got "
                            f"{type(rows).__name__}")
        if columns is not None:
            if isinstance(columns, (str, bytes)) or not isinstance(columns, Sequence):
                raise TypeError(
                    f"columns must be a sequence of names, got {type(columns).__name__}")
            columns = [str(c) for c in columns]
        rows = list(rows)
        if rows and all(isinstance(r, Mapping) for r in rows):
            columns = [str(c) for c in rows[0]] if columns is None else columns
            for i, row in enumerate(rows):
                if missing := [c for c in columns if c not in row]:
                    raise ValueError(f"rows[{i}] lacks the columns {missing}")
            rows = [[row[c] for c in columns] for row in rows]
        elif all(isinstance(r, Sequence) and not isinstance(r, (str, bytes, Mapping))
                 for r in rows):
            if columns is None:
                raise ValueError("columns must be given when rows are sequences")
            for i, row in enumerate(rows):
                if len(row) != len(columns):
                    raise ValueError(f"rows[{i}] has {len(row)} cells, but there are "
                                     f"{len(columns)} columns")
        else:
            raise TypeError("rows must be all dicts or all sequences (lists, tuples)")
        if not columns:
            raise ValueError("a table needs at least one column")
        if caption is not None:
            check_instance(caption, "caption", str)
        formats = {} if formats is None else dict(check_mapping(formats, "formats"))
        if unknown := sorted(set(formats) - set(columns)):
            raise ValueError(f"formats names unknown columns {unknown}; columns are {columns}")
        self.columns, self.caption, self._formats = columns, caption, formats
        # numpy scalars as the Python values they hold (np.float64(0.5) -> 0.5)
        self.values = [[v.item() if isinstance(v, np.generic) else v for v in row]
                       for row in rows]
        for column, fmt in formats.items():  # a format that does not apply: refused here
            check_instance(fmt, f"formats[{column!r}] (a format spec)", str)
            for value in (row[columns.index(column)] for row in self.values):
                try:
                    self._cell(column, value)
                except (TypeError, ValueError) as exc:
                    raise ValueError(f"format {fmt!r} of column {column!r} does not apply to "
                                     f"{value!r}") from exc

    def _cell(self, column: str, value) -> str:
        fmt = self._formats.get(column)
        if value is None:
            return "\u2013"  # an empty cell reads as a dash, not as Python's None
        if fmt is None and _long_fraction(value):
            return f"{float(value):.9g}"  # the exact value is the cell's tooltip (HTML)
        if fmt is None:
            return repr(value) if isinstance(value, float) else str(value)
        return format(value, fmt)

    def cells(self) -> list[list[str]]:
        """Every cell as the string both renderings show."""
        return [[self._cell(c, v) for c, v in zip(self.columns, row, strict=True)]
                for row in self.values]

    def _layout(self):
        """The cells, which are numbers (not bool), which columns are numbers throughout."""
        cells = self.cells()
        numeric = [[isinstance(v, Real) and not isinstance(v, bool) for v in row]
                   for row in self.values]
        right = [bool(cells) and all(row[j] for row in numeric) for j in range(len(self.columns))]
        return cells, numeric, right

    def __repr__(self) -> str:
        cells, _, right = self._layout()
        widths = [max([len(c)] + [len(row[j]) for row in cells])
                  for j, c in enumerate(self.columns)]

        def line(items):
            return "  ".join(s.rjust(w) if r else s.ljust(w)
                             for s, w, r in zip(items, widths, right, strict=True)).rstrip()

        out = [self.caption] if self.caption else []
        out += [line(self.columns), "  ".join("-" * w for w in widths)]
        out += [line(row) for row in cells]
        return "\n".join(out)

    __str__ = __repr__

    def _repr_html_(self) -> str:
        cells, numeric, right = self._layout()

        def cell(tag: str, text: str, is_number: bool, value=None) -> str:
            attributes = ' class="num"' if is_number else ""
            if _long_fraction(value):  # the exact value as the cell's tooltip
                attributes += f' title="exact: {value}"'
            return f"<{tag}{attributes}>{html.escape(text)}</{tag}>"

        parts = ['<table class="companion-table">']
        if self.caption:
            parts.append(f"<caption>{html.escape(self.caption)}</caption>")
        parts.append("<thead><tr>" + "".join(map(cell, ["th"] * len(right), self.columns, right))
                     + "</tr></thead>")
        parts.append("<tbody>")
        for row, nums, raw in zip(cells, numeric, self.values, strict=True):
            parts.append("<tr>" + "".join(map(cell, ["td"] * len(row), row, nums, raw)) + "</tr>")
        parts.append("</tbody></table>")
        return "\n".join(parts)


def progress_bar(enabled: bool, **options):
    """A tqdm bar (a notebook widget where ipywidgets exists), or a silent one: tqdm.auto is
    imported only when shown, since without ipywidgets it warns on every chapter's stderr."""
    if enabled:
        from tqdm.auto import tqdm
    else:
        from tqdm import tqdm
    return tqdm(disable=not enabled, **options)


def _long_fraction(value) -> bool:
    """A Fraction too long to read (over 12 characters): shown as a decimal."""
    return isinstance(value, Fraction) and len(str(value)) > 12


#: the text column's width in inches at `BOOK_DPI`: 7.2 in x 100 dpi = 720 px
BOOK_WIDTH = 7.2
#: layout dots per inch: one inch of figure is 100 px of page
BOOK_DPI = 100
#: image pixels per page pixel: figures are rendered at 2 x 100 = 200 dpi and shown at the
#: layout size (the inline backend's "retina" format; saved files use `savefig.dpi`)
BOOK_PIXEL_DENSITY = 2
#: the smallest font (legends, tick labels) in points at that size
MIN_FONT_SIZE = 9
#: Okabe and Ito's colour-blind-safe palette as "C0".."C5" (blue, vermillion, reddish purple,
#: sky blue, bluish green, orange; yellow is too pale on white). In this order any of the
#: first four stay apart under all three dichromacies, all six under the two common ones.
BOOK_COLORS = ("#0072B2", "#D55E00", "#CC79A7", "#56B4E9", "#009E73", "#E69F00")
#: a marker and a line style per colour, so that series differ without colour too
BOOK_MARKERS = ("o", "s", "^", "D", "v", "P")
#: the Tableau names the chapters' figures use, drawn in their Okabe-Ito counterparts
#: (matplotlib's own "tab:red" and "tab:green" merge under deuteranopia)
TABLEAU_AS_OKABE_ITO = {"tab:blue": "#0072B2", "tab:orange": "#E69F00",
                        "tab:green": "#009E73", "tab:red": "#D55E00",
                        "tab:purple": "#CC79A7", "tab:cyan": "#56B4E9"}
BOOK_LINESTYLES = ("-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1)))

#: the rcParams `use_book_style` sets
BOOK_STYLE = {
    "figure.figsize": (BOOK_WIDTH, 3.6),
    "figure.dpi": BOOK_DPI,
    "savefig.dpi": BOOK_DPI * BOOK_PIXEL_DENSITY,
    "axes.prop_cycle": mpl.cycler(color=list(BOOK_COLORS)),
    "image.cmap": "viridis",
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
    """Set matplotlib's rcParams so that figures fit the 720 px column unshrunk (no text below
    `MIN_FONT_SIZE` pt on the page), colours cycle through the Okabe-Ito `BOOK_COLORS` and the
    Tableau names ("tab:red", ...) are drawn as `TABLEAU_AS_OKABE_ITO` for the session; inline
    figures render at `BOOK_PIXEL_DENSITY` times the layout's dpi."""
    mpl.rcParams.update(BOOK_STYLE)
    # matplotlib's public mapping of colour names; item assignment (not dict.update) clears
    # its cache
    names = mpl.colors.get_named_colors_mapping()
    for name, colour in TABLEAU_AS_OKABE_ITO.items():
        names[name] = colour
    try:
        from IPython import get_ipython
    except ImportError:  # plain python: no inline backend to configure
        return
    if get_ipython() is None:
        return
    # pyplot first: importing it activates the inline backend, which resets the formats
    import matplotlib.pyplot  # noqa: F401
    from matplotlib_inline.backend_inline import set_matplotlib_formats

    set_matplotlib_formats("retina")


#: Most torch threads accepted: the machine's cores or 64, whichever is more (every thread
#: reserves a stack; torch aborts the process on absurd counts such as 10**6).
MAX_THREADS = max(64, os.cpu_count() or 1)


def seed_everything(seed: int = 0, threads: int = 1) -> np.random.Generator:
    """Seed python, numpy and torch, fix torch's thread count (one by default: reductions in
    one fixed order, whatever the machine's cores) and return a numpy Generator."""
    seed = check_int(seed, "seed", 0, 2**32 - 1)
    threads = check_int(threads, "threads", 1, MAX_THREADS)
    random.seed(seed)
    np.random.seed(seed)
    with contextlib.suppress(ImportError):  # the exact chapters do not need torch
        import torch

        torch.manual_seed(seed)
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(True, warn_only=True)
    return np.random.default_rng(seed)


def glue_text(name: str, text: str) -> None:
    """Store `text` under `name` for MyST-NB's {glue:text} role, so that other pages quote a
    chapter's computed value instead of restating it; nothing where myst_nb is missing."""
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z][A-Za-z0-9-]*", name):
        raise ValueError(f"name must be letters, digits and hyphens (a glue key the ledger's "
                         f"escaping leaves alone), got {name!r:.60}")
    check_instance(text, "text", str)
    try:
        from myst_nb import glue
    except ImportError:  # Colab or a bare kernel: the book is not being built
        return
    glue(name, text, display=False)
