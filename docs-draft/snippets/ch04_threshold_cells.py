# Drop-in code cells for notebooks/04_dense_softmax.py (see docs-draft/theory_fixes.md, 04-E).
# Cell 1 replaces the cell that starts `diffs = [abs(thresholds[n][m - 1] ...`; it reuses
# `thresholds` (bisection, n = 3..8, m = 1..8) and `beta_table` from earlier cells.
import math
from fractions import Fraction

import matplotlib.pyplot as plt
import numpy as np

from companion.dense_softmax import (
    exact_threshold,
    max_error,
    max_error_closed_form,
    max_error_closed_form_exact,
    max_error_exact,
    threshold_closed_form,
    threshold_closed_form_terms,
    worst_gap,
)

# --- provided by earlier cells of the chapter; recomputed here so the file runs alone ---
beta_table = [0.0, 0.5, 1.0, math.log(4), 2.0, 3.0, 5.0]
thresholds = {n: [exact_threshold(n, m) for m in range(1, 9)] for n in range(3, 9)}

# %%  [cell 1: the theorem against the exhaustive search]
thresholds[2] = [exact_threshold(2, m) for m in range(1, 9)]
agree = all(abs(threshold_closed_form(n, m) - thresholds[n][m - 1]) <= 1e-9
            for n in range(2, 9) for m in range(1, 9))
print("beta*(n, m) closed form = bisection (to 1e-9), n <= 8, m <= 8:", agree)
agree = all(abs(max_error_closed_form(b, n, m) - max_error(b, n, m)) <= 1e-12
            for n in (2, 3, 4, 5) for m in range(1, 9) for b in beta_table)
print("max error closed form = exhaustive (to 1e-12), n <= 5, m <= 8, all tabulated beta:", agree)
for n, m in ((2, 1), (2, 5), (3, 1), (3, 8), (4, 8), (8, 8)):
    N, d = threshold_closed_form_terms(n, m)
    print(f"n = {n}, m = {m}: beta* = ln({N})/{d} = {math.log(N) / d:.6f}")
# exactly, with e^-beta rational: at beta* = ln 2 (n = 3, m = 1) the worst error is exactly 1/2,
# and on either side of ln(6)/2 (n = 3, m = 4) it is >= 1/2 or < 1/2
y_star = Fraction(1, 2)
print("n = 3, m = 1, e^-beta = 1/2: max error over all profiles =", max_error_exact(y_star, 3, 1))
for y in (Fraction(408249, 1000000), Fraction(408248, 1000000)):  # 1/sqrt(6) = 0.4082482...
    side = "beta < beta*" if 6 * y * y > 1 else "beta > beta*"
    print(f"n = 3, m = 4, e^-beta = {y}: {side}, max error >= 1/2: "
          f"{max_error_exact(y, 3, 4) >= Fraction(1, 2)}, = formula: "
          f"{max_error_exact(y, 3, 4) == max_error_closed_form_exact(y, 3, 4)}")

# %%  [cell 2: figure]
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
ns_plot = np.arange(2, 31)
ax1.plot(ns_plot, [threshold_closed_form(int(n), 1) for n in ns_plot], "o", ms=4,
         label="β*(n, 1) = ln(n−1)")
ax1.plot(ns_plot, [threshold_closed_form(int(n), 2) for n in ns_plot], "s", ms=4, mfc="none",
         label="β*(n, m), m ≥ 2")
ax1.plot(ns_plot, np.log(2 * (ns_plot - 1)), "k--", lw=1, label="sufficient ln(2(n−1))")
ax1.set(xlabel="sequence length n", ylabel="temperature β",
        title="Exact threshold (theorem): ln 3/2, ln 6/2, then ln(n−1)")
ax1.legend(fontsize=8)
betas_plot = np.linspace(0.05, 3.0, 119)
ns_map = np.arange(2, 41)
gap_map = np.array([[worst_gap(float(b), int(n), 40) for b in betas_plot] for n in ns_map])
image = ax2.pcolormesh(betas_plot, ns_map, np.minimum(gap_map, 6), cmap="viridis",
                       shading="nearest", vmin=1, vmax=6)
ax2.axvline(1.0, color="w", ls="--", lw=1)
ax2.axhline(15.5, color="w", ls=":", lw=1)
ax2.set(xlabel="β", ylabel="n", title="Worst gap d* (m = 40; 6 means ≥ 6)")
fig.colorbar(image, ax=ax2, ticks=range(1, 7))
fig.tight_layout()
plt.show()
