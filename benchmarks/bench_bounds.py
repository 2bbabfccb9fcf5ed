"""Speed target of the rank-bound chapter (issue 3): all bounds for m <= 1000 and
n in {3, 4, 6, 10} in under 1 s.

"All bounds" = for every width m = 8..1000 and each n: the certified bound of the explicit
concatenated code (log2, from exact chain factors), the random-code estimate and the
large-context limit; the best-chain tables rho_{n,1/2}(G), G <= 500, are rebuilt from a
cold cache inside the timed region. The base codes (Paley + seeded greedy search) are inputs
and timed separately, as are the exact Fractions of the chapter's table widths. Prints the
measured times against the target; a report, not a test.

Usage: .venv/bin/python benchmarks/bench_bounds.py
"""

import time

from companion.bounds import amplification
from companion.bounds.asymptotics import asymptotic_rows, base_codes, explicit_code_log2_bounds

TARGET_S = 1.0
NS = (3, 4, 6, 10)
WIDTHS = range(8, 1001)


def main() -> None:
    start = time.perf_counter()
    bases = {n: base_codes(n) for n in NS}
    search_s = time.perf_counter() - start

    amplification._TABLES.clear()  # cold start: the exact DP is part of the timed work
    start = time.perf_counter()
    rows = {n: asymptotic_rows(bases[n], WIDTHS, n) for n in NS}
    bounds_s = time.perf_counter() - start

    start = time.perf_counter()
    for n in NS:
        explicit_code_log2_bounds(bases[n], (24, 48, 100, 200, 500, 1000), n, exact=True)
    exact_s = time.perf_counter() - start

    count = sum(len(r) for r in rows.values())
    print(f"base codes (Paley + seeded greedy search, 4 n):   {search_s:7.2f} s"
          "  (input, no target)")
    print(f"all bounds, {count} (m, n) pairs, m <= 1000:      {bounds_s:7.3f} s"
          f"  target < {TARGET_S} s  -> {'MET' if bounds_s < TARGET_S else 'MISSED'}"
          f" (ratio {bounds_s / TARGET_S:.2f})")
    print(f"exact Fractions at the 6 table widths x 4 n:     {exact_s:7.3f} s  (no target)")


if __name__ == "__main__":
    main()
