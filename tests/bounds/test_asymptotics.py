"""The asymptotics in m (bounds/asymptotics.py): concatenated codes, the explicit and exact
bounds per width, the large-context limit against exact code sizes, and the cost limits of the
exact DP behind them."""

from __future__ import annotations

import itertools
import math
import time
from fractions import Fraction

import numpy as np
import pytest

from companion.bounds import amplification as amp
from companion.bounds import asymptotics as asy
from companion.bounds.asymptotics import (
    MAX_WIDTH,
    BaseCode,
    base_codes,
    every_width_rank_bound,
    explicit_code_log2_bounds,
    large_context_limit_log2_bounds,
)
from companion.bounds.codes import check_code, paley_hadamard_code
from companion.bounds.rank_bounds import certified_rank_bound
from companion.checks import has_repeated_row

H = Fraction(1, 2)
gap_distribution = asy._gap_distribution
concatenate_distributions = asy._concatenate
large_context_lower_log2 = asy._large_context_lower_log2


def trace_bound_from_distribution(dist, n=3, eps=H):
    return asy._trace_bound(dist, n, eps)


def random_code_log2_estimate(m, n=3):
    return asy._random_code_log2_estimate(m, amp.log2_rho_table(m // 2, n))


# --- oracles of the large-context limit: A(m, w) = the largest weight-w code with gaps >= 2


def graham_sloane_code(m: int, w: int, residue: int) -> np.ndarray:
    """All weight-w words of {0,1}^m whose positions sum to `residue` mod m: every two have
    gap >= 2 (moving one 1 from i to j != i changes the sum by j - i, not 0 mod m)."""
    rows = [c for c in itertools.combinations(range(m), w) if sum(c) % m == residue]
    code = np.zeros((len(rows), m), dtype=np.int64)
    for i, c in enumerate(rows):
        code[i, list(c)] = 1
    return code


def code_size_lower_bound(m: int, w: int) -> int:
    """ceil(C(m, w)/m) <= A(m, w): the largest Graham-Sloane class."""
    return -(-math.comb(m, w) // m)


def code_size_upper_bound(m: int, w: int) -> int:
    """A(m, w) <= floor(C(m, w-1)/w): each (w-1)-subset lies in at most one codeword."""
    return math.comb(m, w - 1) // w


def max_code_size_gap_two(m: int, w: int) -> int:
    """A(m, w) exactly, by branch-and-bound clique search over all weight-w words (C(m, w) <= 84):
    the largest set with every pairwise overlap <= w - 2."""
    words = [sum(1 << i for i in c) for c in itertools.combinations(range(m), w)]
    N = len(words)
    adj = [sum(1 << j for j in range(N) if j != i and bin(words[i] & words[j]).count("1") <= w - 2)
           for i in range(N)]
    best = 0

    def colour_bound(cand: int) -> int:  # a clique uses at most one vertex per colour
        colours, rest = 0, cand
        while rest:
            colours += 1
            avail = rest
            while avail:
                v = avail & -avail
                rest &= ~v
                avail &= ~v & ~adj[v.bit_length() - 1]
        return colours

    def expand(size: int, cand: int) -> None:
        nonlocal best
        if cand == 0:
            best = max(best, size)
            return
        if size + colour_bound(cand) <= best:
            return
        while cand:
            if size + bin(cand).count("1") <= best:
                return
            v = cand & -cand
            expand(size + 1, cand & adj[v.bit_length() - 1])
            cand &= ~v

    expand(0, (1 << N) - 1)
    return best


@pytest.mark.parametrize("n, eps", [(3, H), (4, Fraction(1, 4)), (6, Fraction(1, 3)),
                                    (10, H), (3, Fraction(1, 1000)), (5, Fraction(999, 2000))])
def test_periodic_regime_matches_the_dp(n, eps):
    """R[G + p] = W[p] R[G] from the detected start on, and the shortcut past G = 4096 gives
    the plain DP's exact values."""
    full = amp._ChainTable(n, eps)
    full.grow(4500)
    a, p, w = amp._ChainTable(n, eps).period()
    for G in range(a, 4500 - p):
        assert full.R[G + p] == w * full.R[G]
    fast = amp._ChainTable(n, eps)
    for G in (4097, 4400, 4499):
        H_, k, w_ = fast.reduce(G)
        assert H_ < 4096 and k > 0
        assert fast.rho(G) == Fraction(full.R[G], full.D**G)


def test_huge_gaps_are_cheap_and_exact():
    start = time.perf_counter()
    # rho(5k) = 4**k at n = 3, eps = 1/2 (the notebook's identity), far past the DP table
    assert amp.log2_best_chain_factor(5 * 10**8) == pytest.approx(2 * 10**8, rel=1e-12)
    assert amp.log2_best_chain_factor(10**30) == pytest.approx(4e29, rel=1e-12)
    assert amp.best_chain_factor(5 * 20_000) == 4**20_000
    assert amp.chain_growth_rate(max_gap=10**9) == amp.chain_growth_rate()
    assert time.perf_counter() - start < 5


def test_log2_agrees_with_exact_below_the_limit():
    for G in (1, 2, 7, 100, 4097, 5003):
        exact = amp.best_chain_factor(G)
        log2 = amp.log2_best_chain_factor(G)
        if exact == 0:
            assert log2 == -math.inf
        else:
            assert log2 == pytest.approx(
                math.log2(exact.numerator) - math.log2(exact.denominator), abs=1e-9)


@pytest.mark.parametrize("call, limit", [
    (lambda: amp.best_chain_factor(10**7), "524288"),
    (lambda: amp.best_chain(40_000), "32768"),
    (lambda: amp.check_chain_growth(10**5), "4096"),
])
def test_limits_are_stated(call, limit):
    with pytest.raises(ValueError, match=limit):
        call()


def test_types_checked_where_they_were_not():
    with pytest.raises(TypeError, match="max_gap"):
        amp.chain_growth_rate(max_gap=2.5)


def test_tiny_eps_has_a_float_overflow_message():
    with pytest.raises(ValueError, match="eps"):
        amp.chain_growth_rate(eps=5e-324)
    growth = amp.chain_growth(eps=5e-324)  # exact constants still available
    assert growth.best_factor > 10**300


def test_repeated_rows_linear_time():
    wide = np.ones((3, 10**6), dtype=np.int8)
    start = time.perf_counter()
    assert has_repeated_row(wide)
    assert not has_repeated_row(np.eye(5, dtype=np.int64))
    assert time.perf_counter() - start < 2  # np.unique(axis=0) took ~30 s here
    with pytest.raises(ValueError, match="distinct"):
        check_code(wide)


def test_asymptotics_limits_and_checks():
    with pytest.raises(ValueError, match="widths"):
        explicit_code_log2_bounds(base_codes(widths=(12,), max_size=20), [MAX_WIDTH + 1])
    with pytest.raises(ValueError, match="max_size"):
        base_codes(widths=(12,), max_size=10**6)
    with pytest.raises(TypeError, match="bases"):
        explicit_code_log2_bounds(None, [12])
    assert concatenate_distributions({0: 2, 2: 2}, {0: 1}) == {0: 2, 2: 2}


# ----
# Corollary cor-every-width (chapter 3): the certified rank bound for every width m from one
# base code and the concatenation lemma, checked against codes built column by column.
PALEY20 = paley_hadamard_code(19)  # 38 words of width 20


def _bound_of(code: np.ndarray) -> Fraction:
    return trace_bound_from_distribution(gap_distribution(code), 3)


def test_base_code_is_the_papers_kind_and_its_bound_is_exact():
    assert PALEY20.shape == (38, 20)
    base = _bound_of(PALEY20)
    assert isinstance(base, Fraction) and 11 < base < 12
    assert every_width_rank_bound(PALEY20, 20) == base
    assert every_width_rank_bound(PALEY20, 39) == base  # one copy, 19 zero columns


def test_below_the_base_width_the_bound_is_trivial():
    for m in (1, 5, 19):
        assert every_width_rank_bound(PALEY20, m) == 1


@pytest.mark.parametrize("pad", [0, 3, 19])
def test_two_copies_built_column_by_column_certify_at_least_the_square(pad):
    """The code (x1, x2, 0...0) is built as an array and its bound computed from scratch:
    the corollary's value never exceeds it (concatenation can only gain)."""
    words = np.array([np.concatenate([a, b, np.zeros(pad, dtype=a.dtype)])
                      for a in PALEY20 for b in PALEY20])
    built = _bound_of(words)
    claimed = every_width_rank_bound(PALEY20, 40 + pad)
    assert claimed == _bound_of(PALEY20) ** 2
    assert built >= claimed


def test_three_copies_through_the_convolved_distribution():
    dist = gap_distribution(PALEY20)
    three = concatenate_distributions(concatenate_distributions(dist, dist), dist)
    assert trace_bound_from_distribution(three, 3) >= every_width_rank_bound(PALEY20, 60)


def test_the_rate_stated_in_the_book_holds_for_every_width_up_to_1000():
    """r >= 2^{0.1772 (m - 19)} for every m (chapter 3 prints the rate rounded down)."""
    for m in range(1, 1001):
        bound = every_width_rank_bound(PALEY20, m)
        log2 = math.log2(bound.numerator) - math.log2(bound.denominator)
        assert log2 >= 0.1772 * (m - 19) - 1e-9, m


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="m"):
        every_width_rank_bound(PALEY20, 0)
    with pytest.raises(ValueError):
        every_width_rank_bound(PALEY20[:1], 20)


PALEY23 = paley_hadamard_code(23)
SMALL = [(m, w) for m in range(4, 10) for w in range(2, m // 2 + 1) if math.comb(m, w) <= 84]


@pytest.mark.parametrize("m, w", SMALL)
def test_exact_code_sizes_lie_between_the_bounds(m, w):
    A = max_code_size_gap_two(m, w)
    assert code_size_lower_bound(m, w) <= A <= code_size_upper_bound(m, w)
    best_class = max(len(graham_sloane_code(m, w, r)) for r in range(m))
    assert code_size_lower_bound(m, w) <= best_class <= A


def test_known_values_of_A():
    # A(n, 4, w) from the tables of constant-weight codes (Brouwer et al.)
    assert max_code_size_gap_two(7, 3) == 7
    assert max_code_size_gap_two(8, 4) == 14
    assert max_code_size_gap_two(9, 3) == 12


@pytest.mark.parametrize("m, w", [(6, 3), (7, 3), (8, 4), (10, 5), (11, 4)])
def test_graham_sloane_classes_have_all_gaps_at_least_two(m, w):
    sizes = 0
    for r in range(m):
        code = graham_sloane_code(m, w, r)
        sizes += len(code)
        if len(code) >= 2:
            G = w - code @ code.T
            assert np.all(G[~np.eye(len(code), dtype=bool)] >= 2)
    assert sizes == math.comb(m, w)  # the classes partition the weight-w words


def test_the_book_column_is_not_the_limit():
    """log2(C(m, m/2)/m) is a lower bound on the limit; at m = 8 the limit is 14 > 70/8."""
    assert large_context_lower_log2(8) == pytest.approx(math.log2(70 / 8))
    assert max_code_size_gap_two(8, 4) == 14 > 70 / 8
    for m in range(2, 400):
        lo, hi = large_context_limit_log2_bounds(m)
        assert large_context_lower_log2(m) <= lo + 1e-12
        assert lo <= hi < lo + 1  # pinned within one bit


def test_limit_interval_closed_forms():
    """The closed forms are the best class bounds over every weight w."""
    for m in range(2, 300):
        lo, hi = large_context_limit_log2_bounds(m)
        assert lo == math.log2(max(code_size_lower_bound(m, w) for w in range(1, m)))
        assert hi == math.log2(max(code_size_upper_bound(m, w) for w in range(1, m)))


def test_theorem_e_bound_tends_to_the_code_size():
    """For a code with all gaps >= 2: |S|^2/(|S| + |S|(|S|-1)/(n-2)^2) <= bound <= |S|."""
    code = graham_sloane_code(8, 4, 0)
    S = len(code)
    for n in (3, 4, 10, 100, 10**4):
        b = certified_rank_bound(code, n).trace_bound
        assert S * S / (S + S * (S - 1) / (n - 2) ** 2) <= b <= S
    assert certified_rank_bound(code, 10**6).trace_bound > S - 1e-3


def test_bad_input():
    with pytest.raises(TypeError, match="m"):
        large_context_limit_log2_bounds(8.0)
    with pytest.raises(ValueError, match="m"):
        large_context_limit_log2_bounds(MAX_WIDTH + 1)


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


def test_concatenation_distribution_and_supermultiplicativity():
    A = paley_hadamard_code(7)[[0, 1, 2, 8]]
    B = paley_hadamard_code(11)[[0, 3, 5]]
    prod = np.array([np.concatenate([a, b]) for a, b in itertools.product(A, B)])
    assert gap_distribution(prod) == concatenate_distributions(gap_distribution(A),
                                                               gap_distribution(B))
    for n in (3, 4, 10):
        assert (certified_rank_bound(prod, n).trace_bound
                >= certified_rank_bound(A, n).trace_bound * certified_rank_bound(B, n).trace_bound)


def test_explicit_float_and_exact_agree():
    bases = [BaseCode.from_code("p23", PALEY23), BaseCode.from_code("p11", paley_hadamard_code(11))]
    widths = [24, 36, 100, 240]
    fl = explicit_code_log2_bounds(bases, widths, 3)
    ex = explicit_code_log2_bounds(bases, widths, 3, exact=True)
    for m in widths:
        assert fl[m] == pytest.approx(math.log2(ex[m].numerator) - math.log2(ex[m].denominator),
                                      abs=1e-9)
    assert ex[24] == certified_rank_bound(PALEY23).trace_bound


def test_large_context_limit_is_reached_by_graham_sloane_code():
    m = 10
    words = np.array([w for w in itertools.product([0, 1], repeat=m) if sum(w) == m // 2])
    classes = (words @ np.arange(m)) % m
    largest = np.bincount(classes).argmax()
    code = words[classes == largest]
    assert len(code) >= math.comb(m, m // 2) / m
    assert math.log2(len(code)) >= large_context_lower_log2(m) - 1e-12
    b = certified_rank_bound(code, n=10**6)  # every gap >= 2, so the check passes
    assert len(code) - 1 < b.trace_bound <= len(code)


def test_random_estimate_is_sane():
    assert random_code_log2_estimate(1000, 3) > random_code_log2_estimate(500, 3) > 0
    assert random_code_log2_estimate(4, 3) == 0.0  # not even two words survive
    for n in (4, 6, 10):
        assert random_code_log2_estimate(200, n) > random_code_log2_estimate(200, n - 1)
        assert random_code_log2_estimate(200, n) < large_context_lower_log2(200) + 1

