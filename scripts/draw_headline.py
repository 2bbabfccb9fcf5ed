"""Draw the book's headline figure (book/figures/headline.svg, shown on the index).

Usage: python scripts/draw_headline.py   (with the package importable: PYTHONPATH=src)

Both sides of the verdict, one above the other, sized for a phone (text at least 10 CSS px
in a 390-px window) and shown at its own width on a wide screen. Top, the theory: log2 of the
feature rank a single nonnegative-kernel head needs at length three against the token width
m -- the bound certified for every width (its corollary's number read from the proof boxes),
the bound certified for the explicit codes of Chapter 3, the sandwiches of the three 24-bit
witness families (certified lower end from the package, upper end from the committed head
files), the trivial ceiling 2^m -- beside the m-dimensional scores of dense softmax. Bottom,
Experiment E2: the pre-registered study's arm A headline family (unseen tokens, exp-affine
maps, uniform test triples; results/e2_study/) with the range over its 9 replicates at every
rank, against the sharp step at r = 8 -> 16 -> 64 the paper reports. Each panel's title is
its claim's verdict in the ledger (book/claims.yml); the names and verdicts used are stored in
the file's metadata, and tests/book/test_ledger.py checks them against the proof boxes and the
ledger. Every number is computed or read here.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from companion.book import (  # noqa: E402
    BOOK_COLORS,
    BOOK_LINESTYLES,
    BOOK_MARKERS,
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
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import claims_ledger  # noqa: E402
import paper_names  # noqa: E402

OUT = ROOT / "book" / "figures" / "headline.svg"
HEADS = ROOT / "results" / "heads"
STUDY = ROOT / "results" / "e2_study"
# the three witness families of the sandwich (Chapter 3), by head-file stem
FAMILIES = {"e1_28": "E1 family", "paley_rows_23": "23 Paley rows",
            "paley_code_46": "46-word code"}
M_MAX = 128
#: The claims whose verdicts title the panels, and the boxes whose numbers the legend cites.
CLAIMS = ("thm-e", "e2-transition")
BOXES = ("cor-every-width",)
#: 4.8 inches (461 px) wide: shown 342 px wide in a 390-px window, so 11-pt text (14.7 px)
#: is 10.9 CSS px there
WIDTH, FONT = 4.8, 11


def figure_facts() -> dict:
    """The verdicts (book/claims.yml) and box names (the proof boxes' numbering) drawn."""
    claims = {c["id"]: c for c in claims_ledger.load_claims(ROOT)}
    names = paper_names.box_names(ROOT)
    return {"verdicts": {c: claims[c]["verdict"] for c in CLAIMS},
            "claims": {c: " ".join(claims[c]["claim"].split()) for c in CLAIMS},
            "names": {b: names[b] for b in BOXES}}


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


def _short(name: str) -> str:
    """"Corollary 3.12" -> "Cor. 3.12" for a legend."""
    return name.replace("Corollary", "Cor.").replace("Proposition", "Prop.")


def draw_rank_panel(ax, facts: dict) -> None:
    widths = np.arange(1, M_MAX + 1)
    base = paley_hadamard_code(19)
    corollary = [_log2(every_width_rank_bound(base, int(m))) for m in widths]
    code_widths = np.arange(8, M_MAX + 1, 4)
    codes = asymptotic_rows(base_codes(3, widths=(12, 16, 20, 24, 28), seed=0, max_size=1000),
                            code_widths, 3)
    blue, vermillion, purple = BOOK_COLORS[:3]
    ax.plot(widths, widths, color="black", ls=":", lw=1.2, label="ceiling $2^m$")
    ax.plot(code_widths, [r.certified_log2 for r in codes], color=blue, ls=BOOK_LINESTYLES[0],
            marker=BOOK_MARKERS[0], ms=3.5, markevery=4, lw=1.6,
            label="certified: explicit codes")
    every = _short(facts["names"]["cor-every-width"])
    ax.step(widths, corollary, where="post", color=purple, ls=BOOK_LINESTYLES[1], lw=1.4,
            label=f"certified: every $m$ ({every})")
    ax.plot(widths, np.log2(widths), color=vermillion, ls=BOOK_LINESTYLES[2], lw=1.6)
    ax.text(M_MAX - 1, math.log2(M_MAX) + 0.6, "dense softmax: $m$ scores", ha="right",
            va="bottom", color=vermillion, fontsize=FONT)  # labelled on the curve
    curves = ax.legend(loc="upper left", bbox_to_anchor=(0.19, 1.0), handlelength=2.2,
                       fontsize=FONT, borderaxespad=0.3)
    handles = []
    families = sandwiches()
    for k, (label, m, low, high) in enumerate(families):
        x = m + 6 * (k - 1)  # side by side around m = 24, so the markers do not overlap
        window = f"{low} (closed)" if low == high else f"[{low}, {high}]"
        ax.plot([x, x], [math.log2(low), math.log2(high)], color="black", lw=1.2)
        handles += ax.plot([x], [math.log2(high)], marker=BOOK_MARKERS[1 + k], ms=7,
                           color=BOOK_COLORS[3 + k], markeredgecolor="black", mew=0.6,
                           ls="none", label=f"{label}: {window}")
    m = families[0][1]
    ax.annotate(f"smallest rank\nat $m = {m}$", (m, max(math.log2(h) for *_, h in families)
                                                 + 0.6), xytext=(m + 9, 9.6), ha="center",
                va="bottom", fontsize=FONT, arrowprops={"arrowstyle": "-|>", "lw": 0.8})
    ax.legend(handles=handles, loc="lower right", handletextpad=0.3, fontsize=FONT,
              borderaxespad=0.3)
    ax.add_artist(curves)
    ax.set(xlim=(0, M_MAX), ylim=(0, 26), xlabel="token width $m$",
           ylabel="$\\log_2$ of the feature rank")
    ax.set_title(f"{facts['claims']['thm-e']}: {facts['verdicts']['thm-e']}",
                 fontsize=FONT + 1, loc="left")


def study_curves(arm: str, kind: str, test: str) -> tuple[list[int], dict]:
    """Per size of one study family: the test accuracy of every replicate at every rank,
    (ranks, {size: array (ranks, replicates)}), from the committed record."""
    run = json.loads((STUDY / f"e2_study_{arm}_{kind}.json").read_text(encoding="utf-8"))
    ranks = run["config"]["ranks"]
    acc: dict = {}
    for key, unit in sorted(run["units"].items()):
        size = int(key.split("/")[0][1:])
        for model in unit["models"]:
            if model["kind"] == "nka":
                acc.setdefault(size, {}).setdefault(model["rank"], []).append(
                    model["test"][test])
    return ranks, {size: np.array([by_rank[r] for r in ranks])
                   for size, by_rank in sorted(acc.items())}


def draw_e2_panel(ax, facts: dict) -> None:
    summary = json.loads((STUDY / "e2_study_summary.json").read_text(encoding="utf-8"))
    kind, test = summary["headlines"]["A"]  # arm A: unseen tokens, the arm with widths m
    ranks, curves = study_curves("A", kind, test)
    family = summary["arms"]["A"][kind][test]
    reported = summary["paper_transitions"]
    low = 0.45  # the axis floor: no replicate goes below 0.5
    for r_paper in reported:  # the reported shape: low below the transition rank, exact above
        ax.step([ranks[0], r_paper, ranks[-1]], [low, 1.0, 1.0], where="post",
                color="0.62", lw=1.0, zorder=1)
        ax.plot([r_paper], [1.0], marker="v", ms=6, color="0.45", ls="none", zorder=1)
    for k, (size, acc) in enumerate(curves.items()):
        assert np.allclose(np.median(acc, axis=1), family["per_size"][k]["median"], atol=1e-6)
        x = np.array(ranks) * 2.0 ** (0.16 * (k - 1.5))  # dodged: no marker hides another
        med = np.median(acc, axis=1)
        line = family["per_size"][k]
        ax.errorbar(x, med, yerr=[med - acc.min(axis=1), acc.max(axis=1) - med],
                    color=BOOK_COLORS[k], marker=BOOK_MARKERS[k], ms=4, ls=BOOK_LINESTYLES[k],
                    lw=1.3, elinewidth=0.9, capsize=0, zorder=3,
                    label=f"$m = {size}$: $r^* = {line['r_star']['0.9']}$")
    ax.plot([], [], color="0.62", lw=1.0, marker="v", ms=5, mfc="0.45", mec="0.45",
            label="reported: $" + " \\to ".join(str(r) for r in reported) + "$")
    tau = 0.9  # the registered threshold of r*
    ax.axhline(tau, color="0.4", ls=":", lw=1, zorder=2)
    ax.text(0.8, tau + 0.006, f"$\\tau = {tau}$", ha="left", va="bottom",
            fontsize=FONT, color="0.3")
    ax.set_xscale("log", base=2)
    ax.set_xticks(ranks[::2], [str(r) for r in ranks[::2]])
    ax.set(xlim=(0.75, ranks[-1] * 1.4), ylim=(low, 1.03), xlabel="feature rank $r$",
           ylabel="test exact-sequence acc.")
    ax.legend(loc="lower right", fontsize=FONT, borderaxespad=0.3, handlelength=1.8,
              title="median, range of 9 runs", title_fontsize=FONT)
    ax.set_title(f"{facts['claims']['e2-transition']}: {facts['verdicts']['e2-transition']}",
                 fontsize=FONT + 1, loc="left")


def main() -> None:
    use_book_style()
    plt.rcParams.update({"font.size": FONT, "axes.labelsize": FONT, "xtick.labelsize": FONT,
                         "ytick.labelsize": FONT, "legend.fontsize": FONT,
                         "svg.hashsalt": "headline"})  # fixed clip-path ids: a stable file
    facts = figure_facts()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(WIDTH, 8.4),
                                      gridspec_kw={"height_ratios": [1, 1]})
    draw_rank_panel(top, facts)
    draw_e2_panel(bottom, facts)
    fig.tight_layout(h_pad=1.2)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    # no date or software version in the file: redrawing unchanged numbers changes no byte;
    # the verdicts and names drawn are recorded for tests/book/test_ledger.py
    fig.savefig(OUT, metadata={"Date": None, "Creator": None,
                               "Description": json.dumps(facts, sort_keys=True)})
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
