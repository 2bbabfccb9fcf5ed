"""sandwich/heads: the exact head built from factors of an admissible ratio matrix, and the
witness heads (one feature per key token, per query, one query spread) of chapters 3 and 6."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from companion.bounds.codes import paley_hadamard_code
from companion.bounds.witness import kernel_ratio_matrix, max_error_exact, witness_family
from companion.experiments.e1 import experiment_witness_24
from companion.sandwich.heads import (
    build_exact_head,
    indicator_head,
    query_indicator_head,
    spread_query_head,
)
from companion.sandwich.matrix import (
    indicator_factors,
    ratio_bounds,
)

HALF = Fraction(1, 2)
PALEY7 = paley_hadamard_code(7)
PALEY11 = paley_hadamard_code(11)


@pytest.fixture(scope="module")
def family24():
    return experiment_witness_24()


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



def test_witness_heads_come_from_the_sandwich_factors(single, kernel_head):
    """query_indicator_head and spread_query_head are build_exact_head on indicator_factors
    and spread_factors: one route to the constructed heads."""
    from companion.sandwich.heads import query_indicator_head, spread_query_head
    from companion.sandwich.matrix import spread_factors

    b = ratio_bounds(single)
    for make, factors, rank in ((query_indicator_head, indicator_factors, 14),
                                (spread_query_head, spread_factors, 13)):
        head = make(single)
        built = build_exact_head(single, *factors(b))
        assert head.rank == built.rank == rank
        assert max_error_exact(head, single) == built.max_error < HALF
        assert max_error_exact(kernel_head(built), single) == built.max_error


def test_exact_realisation_on_the_experiment_witness(family24):
    head = indicator_head(family24)
    assert max_error_exact(head, family24) < Fraction(1, 2)
    assert head.rank == len({tuple(t) for t in family24.tokens[family24.token_ids[:, 1:]]
                             .reshape(-1, 24)})
    M = kernel_ratio_matrix(head, family24, exact=True)
    assert all(M[i, i] == 1 for i in range(len(M)))
    assert all(M[i, j] <= 1 / family24.certificate.rho[(i, j)] for (i, j) in
               family24.certificate.rho)
    assert np.linalg.matrix_rank(M.astype(float)) >= family24.certificate.integer_bound


def test_query_indicator_head_on_the_experiment_witness(family24):
    head = query_indicator_head(family24)
    assert head.rank == len(family24.S) == 28
    assert max_error_exact(head, family24) < Fraction(1, 2)
    assert family24.certificate.integer_bound <= head.rank


@pytest.mark.parametrize("convention", ["bidirectional", "causal"])
def test_spread_query_head_has_rank_one_below_S(convention):
    # the spread of prop-one-query-spread on E1's family: an exact head of rank |S| - 1 = 27
    f = experiment_witness_24(convention)
    head = spread_query_head(f)
    assert head.rank == len(f.S) - 1
    err = max_error_exact(head, f)
    assert err < Fraction(1, 2)
    assert f.certificate.integer_bound <= head.rank


def test_spread_query_head_refuses_when_no_spread_exists():
    # 23 Paley rows: P_s = 22/25 <= 1 for every s (prop-one-query-spread)
    with pytest.raises(ValueError, match="no one-query spread"):
        spread_query_head(witness_family(paley_hadamard_code(23)[:23]))
    with pytest.raises(ValueError, match="base"):
        indicator_head(witness_family(PALEY7[:3]), base=1)
