"""sandwich/heads: the exact head built from factors of an admissible ratio matrix."""

from __future__ import annotations

from fractions import Fraction

from companion.bounds.witness import max_error_exact
from companion.sandwich.heads import build_exact_head
from companion.sandwich.matrix import (
    indicator_factors,
    ratio_bounds,
)

HALF = Fraction(1, 2)


def test_ladder_keys_are_scaled_bottom_keys(ladders, kernel_head):
    b = ratio_bounds(ladders)
    Q, K = indicator_factors(b)
    head = build_exact_head(ladders, Q, K)
    for (x, _y), (chain, gaps) in b.ladders.items():
        if len(gaps) == 2:
            mid = head.key_features[chain[1]]
            bottom = K[x]
            ratio = {m / k for m, k in zip(mid, bottom, strict=True) if k != 0}
            assert len(ratio) == 1 and all(m == 0 for m, k in zip(mid, bottom, strict=True)
                                           if k == 0)
    assert max_error_exact(kernel_head(head), ladders) == head.max_error < HALF

