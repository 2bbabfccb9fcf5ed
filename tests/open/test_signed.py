"""Signed heads: evaluator, denominator conventions, Proposition S's steps, its limit."""

from fractions import Fraction

import numpy as np
import pytest

from companion.bounds.codes import paley_subset
from companion.bounds.gap_domination import gap_domination_factor
from companion.bounds.witness import max_error_exact, witness_family
from companion.core.attention import KernelAttentionHead, kernel_attention
from companion.core.exact import exact_rank, rank_factorisation
from companion.open.signed import (
    newton_coefficients,
    overlap_kernel_head,
    overlap_kernel_rank,
    signed_attention,
    signed_denominators,
    signed_link_counterexample,
    signed_rank_lower_bound,
)


def overlap_kernel_matrix(vals, m: int) -> np.ndarray:
    """The matrix [P(<x,z>)] over all x, z in {0,1}^m (object array): the oracle."""
    toks = (np.arange(2 ** m)[:, None] >> np.arange(m)) & 1
    ov = toks @ toks.T
    out = np.empty(ov.shape, dtype=object)
    out.reshape(-1)[:] = [vals[int(v)] for v in ov.ravel()]
    return out


def signed_mediant(head, x, z, zp):
    """For n = 3: (the mediant of the arrangements (x,z,z'), (x,z',z) — numerators over
    denominators summed —, the closed form (D_z y_z + D_z' y_z') / (D_z + D_z') from the pure
    sequences, and the arrangements' (output, denominator)), exactly: the oracle."""
    seqs = np.stack([np.stack(s) for s in ((x, z, zp), (x, zp, z), (x, z, z), (x, zp, zp))])
    den = [Fraction(d) for d in signed_denominators(head, seqs, exact=True)]
    if 0 in den:
        raise ValueError("a denominator is 0 on one of the four sequences")
    y = [Fraction(v) for v in signed_attention(head, seqs, exact=True)]
    mediant = (y[0] * den[0] + y[1] * den[1]) / (den[0] + den[1])
    closed = (den[2] * y[2] + den[3] * y[3]) / (den[2] + den[3])
    return mediant, closed, ((y[0], den[0]), (y[1], den[1]))


def table_head(rng, m, rank, positional, sign=True, self_weight=True):
    """A random head with integer tables over {0,1}^m (signed unless sign=False)."""
    T = 2 ** m
    lo = -3 if sign else 0
    fq = rng.integers(lo, 4, size=(T, rank))
    fk = rng.integers(lo, 4, size=(3 if positional else 1, T, rank))
    if not self_weight:
        fk = np.concatenate([np.zeros_like(fk[:1]), fk[1:] if positional else fk, fk[-1:]])[:3]
    v = rng.integers(-4, 5, size=(3 if positional else 1, T, 2))
    a = rng.integers(-2, 3, size=(T, 2))
    w = 2 ** np.arange(m)

    def idx(z):
        return np.asarray(z) @ w

    def pos(p):
        return p if positional or not self_weight else 0

    return KernelAttentionHead(
        rank=rank,
        query_features=lambda x: fq[idx(x)],
        key_features=lambda z, p: fk[pos(p) if positional else 0][idx(z)],
        values=lambda z, p: v[pos(p) if positional else 0][idx(z)],
        readout_weights=lambda x: a[idx(x)],
        readout_bias=lambda x: np.zeros(np.shape(x)[:-1], dtype=np.int64))


def test_signed_attention_equals_kernel_attention_on_nka_heads():
    rng = np.random.default_rng(0)
    head = table_head(rng, 3, 2, positional=True, sign=False)
    seqs = rng.integers(0, 2, size=(40, 3, 3))
    seqs[:, :, 0] = 1  # keep every denominator positive: a nonzero feature everywhere
    dens = signed_denominators(head, seqs)
    keep = dens > 0
    y1 = signed_attention(head, seqs[keep], exact=True)
    y2 = kernel_attention(head, seqs[keep], exact=True)
    assert all(Fraction(a) == Fraction(b) for a, b in zip(y1, y2))


def test_denominator_conventions():
    head, x, z, zp = signed_link_counterexample()
    seqs = np.stack([np.stack([x, z, zp]), np.stack([x, zp, z])])
    y = signed_attention(head, seqs, exact=True)  # nonzero: fine
    assert [Fraction(v) for v in y] == [Fraction(2, 5), Fraction(-2, 5)]
    with pytest.raises(ValueError, match="change sign"):
        signed_attention(head, seqs, exact=True, denominators="positive")
    with pytest.raises(ValueError, match="is 0"):
        signed_attention(head, np.stack([np.stack([x, x, x])]), exact=True)
    with pytest.raises(ValueError, match="denominators must"):
        signed_attention(head, seqs, denominators="any")


def test_mediant_identity_holds_for_signed_heads():
    rng = np.random.default_rng(1)
    checked = 0
    for _ in range(60):
        head = table_head(rng, 3, 2, positional=True)
        x, z, zp = rng.integers(0, 2, size=(3, 3))
        try:
            mediant, closed, _ = signed_mediant(head, x, z, zp)
        except (ValueError, ZeroDivisionError):
            continue
        assert mediant == closed
        checked += 1
    assert checked > 20


def lemma_b_check(rng, positional, positive, trials=3000):
    """Random signed links (n = 3) whose pure outputs are exact by construction; returns
    (links with mixed error eps < 1/2 and some negative weight, all links with eps < 1/2 and
    |D(z)/D(z')| < c_{3,eps}(g), i.e. violating Lemma B's conclusion)."""
    tested, violations = 0, []
    for _ in range(trials):
        g = int(rng.integers(2, 6))
        a = int(rng.integers(0, 3))
        s = Fraction(int(rng.integers(-2, 4)))
        if positive:  # signed weights, biased so that D(z) can dominate D(z') (else no hit)
            A1z, A2z = (Fraction(int(v)) for v in rng.integers(-3, 16, size=2))
            A1p, A2p = (Fraction(int(v)) for v in rng.integers(-3, 5, size=2))
        else:
            A1z, A2z, A1p, A2p = (Fraction(int(v)) for v in rng.integers(-6, 7, size=4))
        if not positional:
            A2z, A2p = A1z, A1p
        Dz, Dp = s + A1z + A2z, s + A1p + A2p
        den_A, den_B = s + A1z + A2p, s + A1p + A2z
        if 0 in (Dz, Dp, den_A, den_B) or 0 in (A1z, A2z, A1p, A2p):
            continue
        if positive and min(Dz, Dp, den_A, den_B) < 0:
            continue
        # scores: pure outputs exact, self score free; position-dependent heads: the
        # arrangement (x, z, z') gets a random error delta in (-1/2, 1/2) (only
        # N_1(z) - N_1(z') matters there) and the other arrangement's error follows
        S0 = Fraction(int(rng.integers(-5, 6)))
        N1p = Fraction(int(rng.integers(-9, 10)))
        delta = Fraction(int(rng.integers(-49, 50)), 100)
        N1z = a * den_A - (a + g) * Dp + delta * den_A + N1p
        N2z = a * Dz - S0 - N1z
        N2p = (a + g) * Dp - S0 - N1p
        if not positional:
            N2z = N1z = (a * Dz - S0) / 2
            N2p = N1p = ((a + g) * Dp - S0) / 2
        yA = (S0 + N1z + N2p) / den_A
        yB = (S0 + N1p + N2z) / den_B
        eps = max(abs(yA - a), abs(yB - a))
        if eps >= Fraction(1, 2):
            continue
        tested += min(s, A1z, A2z, A1p, A2p) < 0  # count only links with a negative weight
        if abs(Dz / Dp) < gap_domination_factor(g, 3, eps):
            violations.append((Dz, Dp, den_A, den_B, g, eps))
    return tested, violations


def test_lemma_b_survives_positive_denominators():
    tested, violations = lemma_b_check(np.random.default_rng(2), True, True)
    assert tested > 50 and not violations


def test_lemma_b_survives_shared_keys_with_any_sign():
    tested, violations = lemma_b_check(np.random.default_rng(3), False, False)
    assert tested > 50 and not violations


def test_random_position_dependent_signed_links_break_lemma_b():
    tested, violations = lemma_b_check(np.random.default_rng(4), True, False)
    assert violations  # the open case: Lemma B's conclusion fails on some links
    for _dz, _dp, den_A, den_B, _g, _eps in violations:
        assert den_A * den_B < 0  # ... and only where the arrangements' signs differ


def test_lemma_b_fails_with_position_dependent_signs():
    head, x, z, zp = signed_link_counterexample(g=4, eps=Fraction(2, 5))
    seqs = np.stack([np.stack(s) for s in ((x, z, z), (x, zp, zp), (x, z, zp), (x, zp, z))])
    targets = [0, 4, 0, 0]
    y = signed_attention(head, seqs, exact=True)
    assert max(abs(Fraction(v) - t) for v, t in zip(y, targets)) == Fraction(2, 5)
    dens = signed_denominators(head, seqs, exact=True)
    assert dens[0] / dens[1] == 1 < gap_domination_factor(4, 3, Fraction(2, 5)) == 4
    assert dens[2] * dens[3] < 0  # the two arrangements' denominators have opposite signs
    mediant, _, ((yA, _), (yB, _)) = signed_mediant(head, x, z, zp)
    assert not min(yA, yB) <= mediant <= max(yA, yB)
    with pytest.raises(ValueError, match="eps"):
        signed_link_counterexample(4, Fraction(1, 2))


def test_signed_rank_bounds_on_a_family():
    fam = witness_family(paley_subset(23, 5))
    b = fam.certificate.bound
    assert (b.rank, b.trace_rank) == (20, 14)
    assert signed_rank_lower_bound(b, "nka") == 20
    assert signed_rank_lower_bound(b, "positive") == 19
    assert signed_rank_lower_bound(b, "shared_keys") == 13
    assert signed_rank_lower_bound(b, "position_dependent") is None
    with pytest.raises(ValueError, match="setting"):
        signed_rank_lower_bound(b, "signed")
    with pytest.raises(TypeError, match="RankLowerBound"):
        signed_rank_lower_bound(20, "nka")


def test_exact_rank_and_factorisation():
    rng = np.random.default_rng(4)
    for shape, r in (((6, 9), 3), ((8, 5), 5), ((5, 5), 1)):
        M = rng.integers(-3, 4, size=(shape[0], r)) @ rng.integers(-3, 4, size=(r, shape[1]))
        assert exact_rank(M) == np.linalg.matrix_rank(M)
        U, V = rank_factorisation(M)
        assert U.shape[1] == exact_rank(M)
        assert np.array_equal(np.asarray(U.dot(V.T), dtype=object), np.asarray(M, dtype=object))
    with pytest.raises(ValueError, match="non-empty"):
        exact_rank(np.zeros((0, 3)))


@pytest.mark.parametrize("m", [2, 3, 4])
def test_overlap_kernel_rank_formula(m):
    for P in ([(7 - t) ** 2 for t in range(m + 1)], [2 ** (m - t) for t in range(m + 1)],
              [1 + t for t in range(m + 1)], [int(t == 0) for t in range(m + 1)]):
        assert overlap_kernel_rank(P, m) == exact_rank(overlap_kernel_matrix(P, m))
    assert newton_coefficients([1, 4, 9, 16]) == [1, 3, 2, 0]
    with pytest.raises(ValueError, match="0..m"):
        overlap_kernel_rank([1, 2], 3)


def test_signed_features_with_a_nonnegative_kernel_obey_the_bound():
    fam = witness_family(paley_subset(23, 5))
    head, r = overlap_kernel_head(fam, lambda t: (14 - t) ** 4)
    feats = np.asarray(head.key_features(fam.tokens, 1), dtype=object)
    assert any(v < 0 for v in feats.ravel())  # signed features ...
    assert max_error_exact(head, fam) < Fraction(1, 2)  # ... an exact NKA head ...
    assert r >= fam.certificate.bound.rank  # ... so Theorem E applies to its rank
    with pytest.raises(ValueError, match="nonnegative"):
        overlap_kernel_head(fam, lambda t: 6 - t)


def test_one_sign_bound_with_the_sharper_lemma():
    # E1: the sharper lemma's value is 21 (strict bounds: NKA heads need 22), so a signed
    # head with one denominator sign per query needs 21 (the ratio matrix has rank <= r + 1)
    from collections import Counter

    from companion.bounds.rank_bounds import sharp_rank_bound
    from companion.open.signed import one_sign_rank_lower_bound

    fam = witness_family(paley_subset(23, 5))
    sharp = sharp_rank_bound(len(fam.S), dict(Counter(1 / r for r in
                                                     fam.certificate.rho.values())))
    assert (sharp.value, sharp.rank) == (21, 22)
    assert one_sign_rank_lower_bound(sharp) == 21
    assert one_sign_rank_lower_bound(sharp) > signed_rank_lower_bound(fam.certificate.bound,
                                                                       "positive")
    with pytest.raises(TypeError, match="sharp"):
        one_sign_rank_lower_bound(fam.certificate.bound)
