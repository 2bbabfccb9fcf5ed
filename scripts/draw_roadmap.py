"""Draw the proof roadmap of the lower bound (book/figures/roadmap.png, shown on the index).

Usage: python scripts/draw_roadmap.py
Nine steps from Observation A' to the 2^{Omega(m)} corollary, in three rows read left to right,
each box naming its result and chapter. The numbers of the companion's boxes (Lemma 3.11, ...)
are read from the proof boxes at drawing time (book/_ext/paper_names.py, the numbering the
book shows) and stored in the file's metadata; tests/book/test_ledger.py checks them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "book" / "figures" / "roadmap.png"
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import paper_names  # noqa: E402

#: The boxes the roadmap cites by number, and their names as the book shows them.
BOXES = ("lem-mediant", "lem-concatenation", "cor-every-width")
NAMES = {label: paper_names.box_names(ROOT)[label] for label in BOXES}
COR = NAMES["cor-every-width"].replace("Corollary", "Cor.")

# (title, what it says, where), in reading order
STEPS = [
    ("Observation A′", "error 0 is impossible at\nlength 3: solve = error $< 1/2$", "Ch. 1"),
    ("Mediant identity", f"mixed outputs average\nthe pure ones ({NAMES['lem-mediant']})",
     "Ch. 2"),
    ("Lemma B", "gap domination: one link\nforces a weight ratio $c(g)$", "Ch. 2"),
    ("Lemma C", "ladders: the ratios multiply,\n$\\rho(G) \\approx \\lambda^G$", "Ch. 3"),
    ("Weight matrix $M$", "unit diagonal, $M_{xy} < 1/\\rho$,\n$\\mathrm{rank}\\, M \\leq r$",
     "Ch. 3"),
    ("Lemmas D, D′", "a near-identity matrix\nhas large rank (trace)", "Ch. 3"),
    ("Theorem E", "$r \\geq |S|^2 / \\sum\\, \\rho(G_{xy})^{-2}$\non the family $F(S)$", "Ch. 3"),
    ("Concatenation", f"codes side by side: the\nbounds multiply ({NAMES['lem-concatenation']})",
     "Ch. 3"),
    ("$r \\geq 2^{\\Omega(m)}$", f"$r \\geq 2^{{0.1772\\,(m - 19)}}$\nfor every $m$ ({COR})",
     "Ch. 3"),
]


def main() -> None:
    fig, ax = plt.subplots(figsize=(7.2, 4.3), dpi=100)
    ax.set(xlim=(0, 3), ylim=(0, 3))
    ax.axis("off")
    width, height = 0.86, 0.72
    centres = []
    for i in range(len(STEPS)):
        row, col = divmod(i, 3)
        centres.append((col + 0.5, 2.5 - row))
    for i, ((title, text, where), (x, y)) in enumerate(zip(STEPS, centres, strict=True)):
        last = i == len(STEPS) - 1
        ax.add_patch(FancyBboxPatch(
            (x - width / 2, y - height / 2), width, height,
            boxstyle="round,pad=0.02,rounding_size=0.06",
            facecolor="#e8f1fb" if not last else "#fde9c9", edgecolor="#3a6ea5", lw=1.2))
        ax.text(x, y + 0.19, title, ha="center", va="center", fontsize=10, weight="bold")
        ax.text(x, y - 0.06, text, ha="center", va="center", fontsize=8.5, linespacing=1.3)
        ax.text(x + width / 2 - 0.04, y - height / 2 + 0.04, where, ha="right", va="bottom",
                fontsize=7.5, color="#555555")
    for (x0, y0), (x1, y1) in zip(centres, centres[1:], strict=False):
        if y0 == y1:
            start, end = (x0 + width / 2, y0), (x1 - width / 2, y1)
            style = "-|>"
            connection = "arc3"
        else:  # to the next row: down and back to the left
            start, end = (x0, y0 - height / 2), (x1, y1 + height / 2)
            style = "-|>"
            connection = "angle3,angleA=-90,angleB=0"
        ax.add_patch(FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=12,
                                     color="#3a6ea5", lw=1.2, connectionstyle=connection))
    fig.tight_layout(pad=0.2)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    # sharp on high-density screens; the names drawn are recorded for the tests
    fig.savefig(OUT, dpi=200, metadata={"Software": None,
                                        "Description": json.dumps({"names": NAMES},
                                                                  sort_keys=True)})
    print(f"wrote {OUT.relative_to(OUT.parents[2])}")


if __name__ == "__main__":
    main()
