"""Chapter 3 fixes: K(x, complement x) > 0 follows from the weights alone when R > 1, and
the asymptotic table's certified column is computed exactly."""

import math
from fractions import Fraction

import numpy as np
import pytest

from companion.amplification import best_chain_factor
from companion.asymptotics import base_codes, explicit_code_log2_bounds
from companion.attention import KernelAttentionHead
from companion.experiments.witness_suite import experiment_witness_24
from companion.gap_domination import total_weights
from companion.witness import witness_family


def _query_only_head(m: int) -> KernelAttentionHead:
    """Rank 1, attends only to the query's own position (K = 0 on every key)."""
    def key_features(z, p):
        shape = np.shape(z)[:-1] + (1,)
        return np.ones(shape, np.int64) if p == 0 else np.zeros(shape, np.int64)

    return KernelAttentionHead(
        rank=1, query_features=lambda x: np.ones(np.shape(x)[:-1] + (1,), np.int64),
        key_features=key_features, values=lambda z, p: np.asarray(z, np.int64),
        readout_weights=lambda x: np.asarray(x, np.int64),
        readout_bias=lambda x: np.zeros(np.shape(x)[:-1], np.int64))


def _weight_inequality_holds(head, family) -> bool:
    """D(x; complement x) >= rho_xy D(x; complement y) for every pair of the certificate."""
    D = total_weights(head, family.sequences, family.convention, exact=True)
    index = {t.tobytes(): k for k, t in enumerate(family.tokens)}
    comp = [index[(1 - x).astype(np.int64).tobytes()] for x in family.S]
    return all(D[family.pure_rows[(i, comp[i])]] >= r * D[family.pure_rows[(i, comp[j])]]
               for (i, j), r in family.certificate.rho.items())


def test_r_equal_one_is_the_only_case_needing_the_pure_targets():
    """A head attending only to the query meets every weight inequality with R = 1 (gap 2 at
    n = 3) with K(x, complement x) = 0; with R > 1 it cannot meet them, because
    K(x, x~) >= (R-1) alpha_q + R K(x, y~) >= (R-1) D(x; y~) > 0."""
    assert best_chain_factor(2) == 1 and best_chain_factor(3) == 2
    S_gap_two = np.array([[1, 1, 0, 0], [0, 0, 1, 1]])  # w = 2, overlap 0: gap 2, R = 1
    fam = witness_family(S_gap_two)
    assert set(fam.certificate.rho.values()) == {Fraction(1)}
    assert _weight_inequality_holds(_query_only_head(4), fam)
    fam24 = experiment_witness_24()
    assert min(fam24.certificate.rho.values()) > 1  # the book's witness: R > 1 throughout
    assert not _weight_inequality_holds(_query_only_head(24), fam24)


@pytest.mark.parametrize("n", [3, 4, 6, 10])
def test_asymptotic_table_exact_equals_float(n):
    """The table's certified column, exactly (integer convolution, Fraction bound) and by the
    float64 convolution: equal to 1e-9 in log2 and identical when printed to 2 decimals."""
    widths = (24, 48, 100, 200, 500, 1000)
    bases = base_codes(n, widths=(12, 16, 20, 24, 28), seed=0, max_size=1000)
    exact = explicit_code_log2_bounds(bases, widths, n, exact=True)
    floats = explicit_code_log2_bounds(bases, widths, n)
    for m in widths:
        assert isinstance(exact[m], Fraction)
        log2_exact = math.log2(exact[m].numerator) - math.log2(exact[m].denominator)
        assert log2_exact == pytest.approx(floats[m], abs=1e-9)
        assert f"{log2_exact:.2f}" == f"{floats[m]:.2f}"
    if n == 3:
        assert f"{math.log2(exact[1000].numerator) - math.log2(exact[1000].denominator):.2f}" \
            == "184.65"
