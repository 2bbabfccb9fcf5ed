# Drop-in replacement for the asymptotic-table cell of notebooks/03_rank_bound.py (the cell
# starting `bases = {n: base_codes(...)`; see docs-draft/theory_fixes.md, 03-C and 03-D).
# The certified column is now the exact bound (a Fraction) of the explicit code; the
# large-context column is the interval that provably contains the n -> oo limit.
import math

from companion.large_context import large_context_limit_log2_bounds
from companion.rank_bounds import asymptotic_rows, base_codes, explicit_code_log2_bounds

# %%
bases = {n: base_codes(n, widths=(12, 16, 20, 24, 28), seed=0, max_size=1000)
         for n in (3, 4, 6, 10)}
table_widths = (24, 48, 100, 200, 500, 1000)
exact = {n: explicit_code_log2_bounds(bases[n], table_widths, n, exact=True) for n in bases}
print("   m |  n | certified log2 (exact) | estimate log2 (random) | n → ∞ limit: log2 in   |"
      " ceiling")
for m in table_widths:
    low, high = large_context_limit_log2_bounds(m)
    for n in (3, 4, 6, 10):
        row = asymptotic_rows(bases[n], [m], n)[0]
        bound = exact[n][m]  # a Fraction: Theorem E's bound for the explicit code, exactly
        certified = math.log2(bound.numerator) - math.log2(bound.denominator)
        print(f"{m:>4} | {n:>2} | {certified:22.2f} | {row.estimate_log2:22.2f} |"
              f" [{low:8.2f}, {high:8.2f}] | {row.ceiling_log2:>7}")
