"""Theorem E: the witness family F(S), its certificate, the verifier and the exact realisation."""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from types import MappingProxyType

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from companion.bounds.amplification import best_chain_factor
from companion.bounds.codes import paley_hadamard_code, paley_subset
from companion.bounds.gap_domination import total_weights
from companion.bounds.rank_bounds import certified_rank_bound
from companion.bounds.witness import (
    Certificate,
    WitnessFamily,
    family_size,
    kernel_ratio_matrix,
    max_error_exact,
    verify_certificate,
    without_rows,
    witness_family,
)
from companion.core.attention import KernelAttentionHead
from companion.core.task import query_target
from companion.experiments.e1 import (
    experiment_witness_24,
)
from companion.sandwich.heads import indicator_head, query_indicator_head

PALEY7 = paley_hadamard_code(7)  # m = 8, w = 4, gaps 2 and 4
PALEY11 = paley_hadamard_code(11)  # m = 12, w = 6, gaps 3 and 6


@pytest.fixture(scope="module")
def family24():
    return experiment_witness_24()


def _drop_rows(family: WitnessFamily, rows) -> WitnessFamily:
    keep = np.setdiff1d(np.arange(len(family)), np.asarray(rows))
    return dataclasses.replace(
        family, sequences=family.sequences[keep], targets=family.targets[keep],
        token_ids=family.token_ids[keep], query_ids=family.query_ids[keep],
        kinds=family.kinds[keep])


def _with(cert: Certificate, **changes) -> Certificate:
    return dataclasses.replace(cert, **changes)


def test_family_fields_are_consistent(family24):
    f = family24
    np.testing.assert_array_equal(f.tokens[f.token_ids], f.sequences)
    np.testing.assert_array_equal(query_target(f.sequences), f.targets)
    np.testing.assert_array_equal(f.sequences[:, 0], f.S[f.query_ids])
    assert len(np.unique(f.tokens, axis=0)) == len(f.tokens)
    assert len({s.tobytes() for s in f.sequences}) == len(f)  # no duplicated sequence
    assert set(f.kinds.tolist()) == {"pure", "mixed"}
    for link in f.links:
        x = f.S[link.query]
        better, worse = f.tokens[link.better], f.tokens[link.worse]
        assert x @ worse - x @ better == link.gap and link.factor == 5 - (6 - link.gap)
        assert f.targets[link.pure_rows[0]] == x @ better
        assert f.targets[link.pure_rows[1]] == x @ worse
        arrangements = {tuple(f.token_ids[r, 1:]) for r in link.mixed_rows}
        assert arrangements == {(link.better, link.worse), (link.worse, link.better)}
        assert all(f.targets[r] == x @ better for r in link.mixed_rows)
        assert all(f.query_ids[r] == link.query for r in link.mixed_rows + link.pure_rows)


def test_causal_family_puts_the_query_last():
    f = experiment_witness_24("causal")
    assert f.query_position == 2
    np.testing.assert_array_equal(f.sequences[:, 2], f.S[f.query_ids])
    verify_certificate(f.certificate, f)


# --- the verifier rejects tampering ---------------------------------------------------------

def test_tampered_rho_is_rejected(family24):
    cert = family24.certificate
    rho = dict(cert.rho)
    rho[(0, 1)] = rho[(0, 1)] + 1
    with pytest.raises(ValueError, match="rho"):
        verify_certificate(_with(cert, rho=MappingProxyType(rho)), family24)


def test_tampered_bound_is_rejected(family24):
    cert = family24.certificate
    bound = dataclasses.replace(cert.bound, sharpened_rank=cert.bound.sharpened_rank + 1)
    with pytest.raises(ValueError, match="bound"):
        verify_certificate(_with(cert, bound=bound), family24)


def test_tampered_chain_key_is_rejected(family24):
    cert = family24.certificate
    chains = dict(cert.chains)
    first = list(chains[(0, 1)])
    key = list(first[0])
    key[0] = 1 - key[0]
    first[0] = tuple(key)
    chains[(0, 1)] = tuple(first)
    with pytest.raises(ValueError, match="complement"):
        verify_certificate(_with(cert, chains=MappingProxyType(chains)), family24)


def test_tampered_S_entry_is_rejected(family24):
    cert = family24.certificate
    S = [list(x) for x in cert.S]
    S[3][S[3].index(0)] = 1  # one entry changed: weight 13 among weight 12
    with pytest.raises(ValueError, match="constant weight"):
        verify_certificate(_with(cert, S=tuple(map(tuple, S))), family24)


def test_family_missing_one_mixed_sequence_is_rejected(family24):
    link = family24.links[len(family24.links) // 2]
    with pytest.raises(ValueError, match="mixed sequence"):
        verify_certificate(family24.certificate, _drop_rows(family24, [link.mixed_rows[1]]))


def test_family_missing_a_pure_sequence_is_rejected(family24):
    link = family24.links[-1]
    with pytest.raises(ValueError, match="pure sequence"):
        verify_certificate(family24.certificate, _drop_rows(family24, [link.pure_rows[1]]))


def test_family_with_a_wrong_target_is_rejected(family24):
    targets = family24.targets.copy()
    targets[7] += 1
    with pytest.raises(ValueError, match="targets"):
        verify_certificate(family24.certificate, dataclasses.replace(family24, targets=targets))


def test_chain_through_levels_without_mixed_sequences_is_rejected():
    # THEORY caution 1: claim the better chain 3+3 for a gap-6 pair of a Paley-11 witness
    # whose family only has the single link 0 -> 6 (rho(6) = 5 > c(3)^2 = 4, so the family
    # builder never adds level 3); the verifier must refuse the unsupported links.
    f = witness_family(PALEY11[[0, 1, 11]])  # S[2] is the complement of S[0]: G_02 = 6
    cert = f.certificate
    assert cert.gaps[(0, 2)] == (6,)
    x = np.asarray(cert.S[0])
    mid = 1 - x
    mid[np.flatnonzero(x)[:3]] = 1
    chains, gaps, rho = dict(cert.chains), dict(cert.gaps), dict(cert.rho)
    chains[(0, 2)] = (chains[(0, 2)][0], tuple(mid.tolist()), chains[(0, 2)][-1])
    gaps[(0, 2)] = (3, 3)
    rho[(0, 2)] = Fraction(4)
    tampered = _with(cert, chains=MappingProxyType(chains), gaps=MappingProxyType(gaps),
                     rho=MappingProxyType(rho))
    with pytest.raises(ValueError, match="lacks"):
        verify_certificate(tampered, f)


def test_gap_one_link_proves_nothing():
    # THEORY caution 2: at eps = 1/2 a gap-1 link has c = 0 and must be refused.
    f = witness_family(PALEY7[:3])  # gaps 2: single links of c(2) = 1
    cert = f.certificate
    x = np.asarray(cert.S[0])
    mid = 1 - x
    mid[np.flatnonzero(x)[:1]] = 1
    chains, gaps = dict(cert.chains), dict(cert.gaps)
    chains[(0, 1)] = (chains[(0, 1)][0], tuple(mid.tolist()), chains[(0, 1)][-1])
    gaps[(0, 1)] = (1, 1)
    with pytest.raises(ValueError, match="factor c <= 0"):
        verify_certificate(_with(cert, chains=MappingProxyType(chains),
                                 gaps=MappingProxyType(gaps)), f)


def test_certificate_for_another_family_is_rejected():
    a = witness_family(PALEY11[:4])
    b = witness_family(PALEY11[1:5])
    with pytest.raises(ValueError):
        verify_certificate(a.certificate, b)


# --- property tests --------------------------------------------------------------------------

@st.composite
def witness_inputs(draw):
    code = draw(st.sampled_from([PALEY7, PALEY11]))
    idx = draw(st.lists(st.integers(0, len(code) - 1), min_size=2, max_size=6, unique=True))
    n = draw(st.integers(3, 5))
    eps = draw(st.sampled_from([Fraction(1, 2), Fraction(2, 5), Fraction(1, 4)]))
    convention = draw(st.sampled_from(["bidirectional", "causal"]))
    return code[sorted(idx)], n, eps, convention


@settings(max_examples=25, deadline=None)
@given(witness_inputs(), st.data())
def test_random_witnesses_verify_and_any_tampering_fails(inputs, data):
    S, n, eps, convention = inputs
    f = witness_family(S, n, eps, convention)
    bound = verify_certificate(f.certificate, f)
    assert bound == certified_rank_bound(S, n, eps)
    assert len(f) == family_size(S, n, eps)
    # removing any one sequence that some link needs must be detected
    link = data.draw(st.sampled_from(f.links))
    row = data.draw(st.sampled_from(link.mixed_rows + link.pure_rows))
    with pytest.raises(ValueError, match="lacks"):
        verify_certificate(f.certificate, _drop_rows(f, [row]))
    # changing any one claimed rho must be detected
    pair = data.draw(st.sampled_from(sorted(f.certificate.rho)))
    rho = dict(f.certificate.rho)
    rho[pair] = rho[pair] * data.draw(st.sampled_from([Fraction(1, 2), Fraction(3, 2), 2]))
    with pytest.raises(ValueError, match="rho"):
        verify_certificate(_with(f.certificate, rho=MappingProxyType(rho)), f)


@settings(max_examples=15, deadline=None)
@given(witness_inputs())
def test_exact_realisation_solves_the_family(inputs):
    S, n, eps, convention = inputs
    f = witness_family(S, n, eps, convention)
    head = indicator_head(f)
    assert max_error_exact(head, f) < Fraction(1, 2)
    # the sandwich: certified bound <= rank of an explicit exact head
    assert f.certificate.integer_bound <= head.rank
    small = query_indicator_head(f)
    assert small.rank == len(S) and max_error_exact(small, f) < Fraction(1, 2)
    assert f.certificate.integer_bound <= small.rank


@settings(max_examples=15, deadline=None)
@given(witness_inputs(), st.integers(0, 2**32 - 1))
def test_solving_heads_obey_the_matrix_inequalities(inputs, seed):
    # Theorem E's proof: for any head with error < 1/2, M[x,y] = K(x,ybar)/K(x,xbar) has unit
    # diagonal and 0 <= M[x,y] <= 1/rho_xy. Perturb the exact head randomly; whenever the
    # perturbed head still solves the family, the inequalities must hold.
    S, n, eps, convention = inputs
    f = witness_family(S, n, eps, convention)
    exact = indicator_head(f, base=2 * n)
    noise = np.random.default_rng(seed).uniform(0.2, 5.0, size=exact.rank)

    head = dataclasses.replace(
        exact, query_features=lambda x: np.asarray(exact.query_features(x), float) * noise)
    from companion.core.attention import kernel_attention

    err = np.abs(kernel_attention(head, f.sequences, f.convention) - f.targets).max()
    if err < float(eps) - 1e-9:
        M = kernel_ratio_matrix(head, f)
        np.testing.assert_allclose(np.diag(M), 1.0)
        for (i, j), rho in f.certificate.rho.items():
            assert 0 <= M[i, j] <= 1 / float(rho) * (1 + 1e-9)


def test_weight_inequality_alone_does_not_give_positive_K():
    # THEORY 4 says K(x, z0) > 0 follows from D(z0) >= R D(zk) with R >= 1. It does not: a
    # head that attends only to the query has D(z) = alpha_q(x,x) for every key z, so
    # D(z0) >= 1 * D(zk) holds while K = 0. What rules it out is the pure sequences: it
    # returns the same value on P_xbar and P_ybar, whose targets differ by G_xy >= 2.
    f = witness_family(PALEY11[:4])
    q = f.query_position
    head = KernelAttentionHead(
        rank=1, query_features=lambda x: np.ones(np.shape(x)[:-1] + (1,), dtype=np.int64),
        key_features=lambda z, p: np.full(np.shape(z)[:-1] + (1,), int(p == q), dtype=np.int64),
        values=lambda z, p: np.asarray(z, dtype=np.int64),
        readout_weights=lambda x: np.asarray(x, dtype=np.int64),
        readout_bias=lambda x: np.zeros(np.shape(x)[:-1], dtype=np.int64))
    D = total_weights(head, f.sequences, f.convention, exact=True)
    assert all(d == 1 for d in D)  # so D(z0) >= 1 * D(zk) on every ladder
    with pytest.raises(ValueError, match="K\\(x, complement x\\) = 0"):
        kernel_ratio_matrix(head, f, exact=True)
    assert max_error_exact(head, f) >= 1  # and it does not solve the family


def test_rho_in_certificate_is_the_best_chain(family24):
    S = family24.S
    w = int(S[0].sum())
    for (i, j), rho in family24.certificate.rho.items():
        assert rho == best_chain_factor(w - int(S[i] @ S[j]))


# --- bad input -------------------------------------------------------------------------------

def test_bad_inputs_name_the_argument():
    with pytest.raises(ValueError, match="eps"):
        witness_family(PALEY7[:3], eps=Fraction(3, 4))
    with pytest.raises(ValueError, match="eps"):
        witness_family(PALEY7[:3], eps=0)
    with pytest.raises(ValueError, match="n"):
        witness_family(PALEY7[:3], n=2)
    with pytest.raises(ValueError, match="convention"):
        witness_family(PALEY7[:3], convention="left")
    mixed = np.array([[1, 1, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0]])
    with pytest.raises(ValueError, match="constant weight"):
        witness_family(mixed)
    close = np.array([[1, 1, 0, 0, 0, 0], [1, 0, 1, 0, 0, 0]])  # gap 1: no chain works
    with pytest.raises(ValueError, match="too small for any chain"):
        witness_family(close)
    with pytest.raises(ValueError, match="0 and 1"):
        witness_family(np.array([[2, 0, 0], [0, 2, 0]]))
    with pytest.raises(TypeError, match="S"):
        witness_family("0101")
    with pytest.raises(ValueError, match="max_sequences"):
        witness_family(PALEY11, max_sequences=100)
    with pytest.raises(TypeError, match="certificate"):
        verify_certificate(None, witness_family(PALEY7[:3]))
    with pytest.raises(ValueError, match="b must be an int in"):
        paley_subset(3, 5)


def test_without_rows():
    family = witness_family(paley_subset(11, 3, 11), 3, Fraction(1, 2))
    assert len(without_rows(family, [0, 5])) == len(family) - 2
    assert len(without_rows(family, 3)) == len(family) - 1
    assert len(without_rows(family, [])) == len(family)
    for bad, kind in ((len(family), ValueError), (-1, ValueError), (True, TypeError),
                      (2.5, TypeError), ("3", TypeError), ([[1]], ValueError)):
        with pytest.raises(kind, match="rows"):
            without_rows(family, bad)


def test_ratio_matrix_facts_of_the_exact_realisation(family24):
    from companion.bounds.witness import ratio_matrix_facts

    head = indicator_head(family24)
    worst, rank = ratio_matrix_facts(head, family24)
    assert worst <= 1 + 1e-9 and rank <= head.rank
