"""Draw the book's headline figure (book/figures/headline.svg, shown on the index).

Usage: python scripts/draw_headline.py   (with the package importable: PYTHONPATH=src)

Left: log2 of the feature rank a single nonnegative-kernel head needs at length three, against
the token width m -- the certified bound for every width (Corollary 3.10 on the Paley-Hadamard
base code), the bound certified for the explicit codes of Chapter 3, the sandwiches of the
three 24-bit witness families (certified lower end from the package, upper end from the
committed head files), the trivial ceiling 2^m -- beside the m-dimensional scores of dense
softmax. Right: the converged E2 study's arm A headline family (unseen tokens, exp-affine
maps, uniform test triples; results/e2_study/e2_study_summary.json) against the sharp step at
r = 8 -> 16 -> 64 that the paper reports. Every number is computed or read here.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from companion.book import (  # noqa: E402
    BOOK_COLORS,
    BOOK_LINESTYLES,
    BOOK_MARKERS,
    BOOK_WIDTH,
    use_book_style,
)
from companion.bounds.asymptotics import (  # noqa: E402
    asymptotic_rows,
    base_codes,
    every_width_rank_bound,
)
from companion.bounds.codes import paley_hadamard_code  # noqa: E402
from companion.sandwich.certificates import verify_certificate_file  # noqa: E402
from companion.sandwich.head_files import read_head_claims  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "book" / "figures" / "headline.svg"
HEADS = ROOT / "results" / "heads"
# the three witness families of the sandwich (Chapter 3), by head-file stem
FAMILIES = {"e1_28": "E1 family", "paley_rows_23": "23 Paley rows",
            "paley_code_46": "46-word code"}
M_MAX = 128


def _log2(q) -> float:
    """log2 of a positive Fraction or int, without overflowing a float."""
    return math.log2(q.numerator) - math.log2(q.denominator)


def sandwiches() -> list[tuple[str, int, int, int]]:
    """(label, m, certified lower end, smallest verified head) per family: the lower end is the
    committed lower-bound certificate (re-checked exactly here), the upper end the committed
    signed head file."""
    out = []
    for stem, label in FAMILIES.items():
        claims = read_head_claims(HEADS / f"{stem}_signed.json")
        report = verify_certificate_file(HEADS / f"{stem}_lower_bound.json")
        assert report.passed, report.summary()
        out.append((label, claims["family"]["q"] + 1,  # Paley rows of order q: q + 1 bits
                    report.rank, claims["rank"]))
    return out


def draw_rank_panel(ax) -> None:
    widths = np.arange(1, M_MAX + 1)
    base = paley_hadamard_code(19)
    corollary = [_log2(every_width_rank_bound(base, int(m))) for m in widths]
    code_widths = np.arange(8, M_MAX + 1, 4)
    codes = asymptotic_rows(base_codes(3, widths=(12, 16, 20, 24, 28), seed=0, max_size=1000),
                            code_widths, 3)
    blue, vermillion, purple = BOOK_COLORS[:3]
    ax.plot(widths, widths, color="black", ls=":", lw=1.2, label="ceiling $2^m$")
    ax.plot(code_widths, [r.certified_log2 for r in codes], color=blue, ls=BOOK_LINESTYLES[0],
            marker=BOOK_MARKERS[0], ms=3, markevery=4, lw=1.6,
            label="certified, explicit codes")
    ax.step(widths, corollary, where="post", color=purple, ls=BOOK_LINESTYLES[1], lw=1.4,
            label="certified, every width (Cor. 3.10)")
    ax.plot(widths, np.log2(widths), color=vermillion, ls=BOOK_LINESTYLES[2], lw=1.6,
            label="dense softmax: $m$ scores")
    curves = ax.legend(loc="upper left", handlelength=2.6)
    handles = []
    families = sandwiches()
    for k, (label, m, low, high) in enumerate(families):
        window = f"{low} (closed)" if low == high else f"[{low}, {high}]"
        ax.plot([m, m], [math.log2(low), math.log2(high)], color="black", lw=1)
        handles += ax.plot([m], [math.log2(high)], marker=BOOK_MARKERS[1 + k], ms=6,
                           color=BOOK_COLORS[3 + k], markeredgecolor="black", mew=0.6,
                           ls="none", label=f"{label}: {window}")
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(0, 0.74),
              title=f"minimum rank at $m = {families[0][1]}$", handletextpad=0.3)
    ax.add_artist(curves)
    ax.set(xlim=(0, M_MAX), ylim=(0, 24), xlabel="token width $m$",
           ylabel="$\\log_2$ of the feature rank", title="Length 3: kernel rank vs softmax")


def draw_e2_panel(ax) -> None:
    summary = json.loads((ROOT / "results" / "e2_study" / "e2_study_summary.json")
                         .read_text(encoding="utf-8"))
    kind, test = summary["headlines"]["A"]  # arm A: unseen tokens, the arm with widths m
    family = summary["arms"]["A"][kind][test]
    ranks = family["ranks"]
    reported = summary["paper_transitions"]
    for k, size in enumerate(family["per_size"]):
        ax.plot(ranks, size["median"], color=BOOK_COLORS[k], marker=BOOK_MARKERS[k], ms=4,
                ls=BOOK_LINESTYLES[k], lw=1.4, label=f"measured, $m = {size['size']}$")
    low = 0.45  # the axis floor: the data never go below 0.5
    for r_paper in reported:  # the reported shape: low below the transition rank, exact above
        ax.step([ranks[0], r_paper, ranks[-1]], [low, 1.0, 1.0], where="post",
                color="0.6", lw=1.0)
        ax.plot([r_paper], [1.0], marker="v", ms=6, color="0.45", ls="none")
    ax.plot([], [], color="0.6", lw=1.0, marker="v", ms=5, mfc="0.45", mec="0.45",
            label="reported step, $r = " + " \\to ".join(str(r) for r in reported) + "$")
    tau = 0.9  # the registered threshold of the verdict
    ax.axhline(tau, color="0.4", ls=":", lw=1)
    ax.text(ranks[-1], tau - 0.015, f"$\\tau = {tau}$", ha="right", va="top", fontsize=9,
            color="0.3")
    ax.set_xscale("log", base=2)
    ax.set_xticks(ranks[::2], [str(r) for r in ranks[::2]])
    ax.set(ylim=(low, 1.02), xlabel="feature rank $r$",
           ylabel="median test exact-seq. accuracy",
           title=f"E2 at convergence, unseen tokens: {family['verdict'].split()[0]}")
    ax.legend(loc="lower right", fontsize=8.5)


def main() -> None:
    use_book_style()
    plt.rcParams["svg.hashsalt"] = "headline"  # fixed clip-path ids: a stable file
    fig, (left, right) = plt.subplots(1, 2, figsize=(BOOK_WIDTH, 4.2),
                                      gridspec_kw={"width_ratios": [1.15, 1]})
    draw_rank_panel(left)
    draw_e2_panel(right)
    fig.tight_layout()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    # no date or software version in the file: redrawing unchanged numbers changes no byte
    fig.savefig(OUT, metadata={"Date": None, "Creator": None})
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
