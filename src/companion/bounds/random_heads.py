"""Seeded random heads that try to break Lemma B (chapter 2: ``lem-mediant``,
``lem-gap-domination``, ``cor-error-floor``), in float64 and exactly."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from companion.bounds.gap_domination import (
    LinkCheck,
    balanced_link_head,
    chain_keys,
    family_checks,
    gap_domination_factor,
    gap_domination_ratio,
    link_check,
    link_errors,
    mediant_closed_form,
    mediant_of_arrangements,
    mediant_relative_error,
    min_error_for_ratio,
)
from companion.checks import check_float, check_int, check_token
from companion.core.attention import KernelAttentionHead
from companion.core.constructions import MAX_TABLE_WIDTH, lookup_head, softmax_kernel_head
from companion.core.task import all_tokens

__all__ = ["random_kernel_head", "mediant_survey", "perturbed_link_survey",
           "counterexample_search", "error_floor_survey"]

#: Most random heads one survey draws (~7 ms each; the book's surveys use <= 200).
MAX_SURVEY = 1_000
#: Most entries of a random head's key and value tables (2**24 float64, 128 MB).
MAX_HEAD_TABLE = 2**24
#: counterexample_search costs ~40 ms a head.
MAX_SEARCH_HEADS = 200


def random_kernel_head(m: int, n: int, rank: int = 3, d: int = 2, seed: int = 0,
                       integer: bool = False, zero_fraction: float = 0.25) -> KernelAttentionHead:
    """A seeded random NKA head of position-dependent tables: log-normal features and normal
    values, or small ints (integer: exact); a fraction of the features zeroed, coordinate 0
    kept positive. Limit: n * 2**m * (rank + d) <= 2**24 table entries."""
    m = check_int(m, "m", 1, MAX_TABLE_WIDTH)
    n, rank, d = check_int(n, "n", 1), check_int(rank, "rank", 1), check_int(d, "d", 1)
    if n * 2**m * (rank + d) > MAX_HEAD_TABLE:
        raise ValueError(f"n * 2**m * (rank + d) = {n * 2**m * (rank + d)} table entries, above "
                         f"MAX_HEAD_TABLE = {MAX_HEAD_TABLE}; choose smaller n, m, rank or d")
    zero_fraction = check_float(zero_fraction, "zero_fraction", 0, 1, high_open=True)
    rng = np.random.default_rng(check_int(seed, "seed", 0))
    size = 2**m
    shapes = ((size, rank), (n, size, rank), (n, size, d), (size, d), size)
    if integer:  # drawn in the order qf, kf, vals, a, b
        qf, kf, vals, a, b = (rng.integers(lo, hi, size=s) for (lo, hi), s in zip(
            ((0, 10), (0, 10), (-9, 10), (-5, 6), (-5, 6)), shapes, strict=True))
    else:
        qf, kf = (rng.lognormal(0.0, 2.0, size=s) for s in shapes[:2])
        vals, a, b = (rng.normal(size=s) for s in shapes[2:])
    qf = qf * (rng.random(qf.shape) >= zero_fraction)
    kf = kf * (rng.random(kf.shape) >= zero_fraction)
    qf[:, 0] = np.maximum(qf[:, 0], 1)
    kf[:, :, 0] = np.maximum(kf[:, :, 0], 1)
    if integer:  # Python ints: exact arithmetic without int64 overflow
        qf, kf, vals, a, b = (t.astype(object) for t in (qf, kf, vals, a, b))
    return lookup_head(qf, kf, vals, a, b)


def _perturbed_head(base: KernelAttentionHead, m: int, n: int, sigma: float,
                    seed: int = 0) -> KernelAttentionHead:
    """`base` with every position's kernel times exp(sigma N(0,1)) entrywise and its scores
    shifted by sigma/4 N(0,1), tabulated as alpha_p(x, z) (rank 2**m, one-hot queries)."""
    rng = np.random.default_rng(seed)
    size = 2**m
    tokens = all_tokens(m)
    qf = np.asarray(base.query_features(tokens), dtype=np.float64)  # (size, r)
    a = np.asarray(base.readout_weights(tokens), dtype=np.float64)  # (size, d)
    b = np.asarray(base.readout_bias(tokens), dtype=np.float64)
    kernels, scores = [], []
    for p in range(n):
        kf = np.asarray(base.key_features(tokens, p), dtype=np.float64)  # (size, r)
        vals = np.asarray(base.values(tokens, p), dtype=np.float64)  # (size, d)
        kernel = qf @ kf.T * np.exp(sigma * rng.normal(size=(size, size)))  # [x, z]
        kernels.append(kernel.T)  # row z: key feature of z = column of the kernel
        scores.append(vals @ a.T + b[None, :] + sigma / 4 * rng.normal(size=(size, size)))
    # query-dependent scores f_p(x, z) as values (d = 2**m), readout a(x) = one-hot(x)
    return lookup_head(np.eye(size), np.stack(kernels), np.stack(scores), np.eye(size),
                       np.zeros(size))


@dataclass(frozen=True)
class MediantCase:
    """One random check of the mediant identity."""

    seed: int
    m: int
    n: int
    k: int
    rank: int
    convention: str
    relative_error: float  # float64 check (see mediant_relative_error)
    exact_equal: bool | None  # exact check on an integer head; None when not run


def mediant_survey(num_heads: int, seed: int = 0, max_m: int = 4, max_n: int = 6,
                   exact_every: int = 4) -> list[MediantCase]:
    """The mediant identity on random heads (m <= max_m, n <= max_n), both conventions: float64
    relative error, and an exact check on an integer head every `exact_every`-th case."""
    num_heads = check_int(num_heads, "num_heads", 1, MAX_SURVEY)
    exact_every = check_int(exact_every, "exact_every", 1)
    max_m = check_int(max_m, "max_m", 1, MAX_TABLE_WIDTH)
    max_n = check_int(max_n, "max_n", 3, 16)
    rng = np.random.default_rng(check_int(seed, "seed", 0))
    cases = []
    for i in range(num_heads):
        m = int(rng.integers(1, max_m + 1))
        n = int(rng.integers(3, max_n + 1))
        k = int(rng.integers(1, n - 1))
        x, z, z_prime = (rng.integers(0, 2, size=m) for _ in range(3))
        rank = int(rng.integers(1, 5))
        head_seed = int(rng.integers(2**32))
        head = random_kernel_head(m, n, rank=rank, d=int(rng.integers(1, 4)), seed=head_seed)
        integer_head = (random_kernel_head(m, n, rank=rank, d=2, seed=head_seed, integer=True)
                        if i % exact_every == 0 else None)
        for convention in ("bidirectional", "causal"):
            link = (x, z, z_prime, k, n - 1 - k, convention)
            rel = mediant_relative_error(head, *link)
            exact_equal = None if integer_head is None else (
                mediant_of_arrangements(integer_head, *link, True)
                == mediant_closed_form(integer_head, *link, True))
            cases.append(MediantCase(head_seed, m, n, k, rank, convention, rel, exact_equal))
    return cases


def perturbed_link_survey(x, z, z_prime, n: int, num_heads: int = 150) -> list[LinkCheck]:
    """Lemma B on one link for perturbed heads seeded by index: odd ones balanced (ratio in
    [0.3, 20], sigma <= 0.5), even ones the softmax kernel (beta in [0, 2], sigma <= 1)."""
    num_heads = check_int(num_heads, "num_heads", 1, MAX_SURVEY)
    x = check_token(x, "x")
    z, z_prime = check_token(z, "z", len(x)), check_token(z_prime, "z_prime", len(x))
    if x @ z >= x @ z_prime:
        raise ValueError(f"z, z_prime need <x,z> < <x,z'>, got {x @ z} and {x @ z_prime}")
    m = check_int(len(x), "the width m of x (perturbed heads tabulate 2**m tokens)", 1,
                  MAX_TABLE_WIDTH)
    n = check_int(n, "n (sequence length)", 3, MAX_HEAD_TABLE // 4**m)  # n tables of 4**m
    checks = []
    for seed in range(num_heads):
        rng = np.random.default_rng(seed)
        base = (balanced_link_head(x, z, z_prime, float(rng.uniform(0.3, 20)), n) if seed % 2
                else softmax_kernel_head(float(rng.uniform(0, 2)), m, n))
        head = _perturbed_head(base, m, n, float(rng.uniform(0, 0.5 if seed % 2 else 1)), seed)
        checks.append(link_check(head, x, z, z_prime, 1, n - 2))
    return checks


def counterexample_search(num_heads: int = 120, m: int = 4,
                          seed: int = 1000) -> list[tuple[int, LinkCheck]]:
    """(n, LinkCheck) of perturbed heads (n = 3, 4, 5 in turn; odd: balanced of ratio about
    max(c_{n,1/2}(g), 1), even: softmax kernel) on every chain link, both conventions."""
    num_heads = check_int(num_heads, "num_heads", 1, MAX_SEARCH_HEADS)
    m = check_int(m, "m", 1, MAX_TABLE_WIDTH)
    seed = check_int(seed, "seed", 0)
    records = []
    for i in range(num_heads):
        rng = np.random.default_rng(seed + i)
        n = 3 + i % 3
        if i % 2:
            a, b = sorted(rng.choice(m + 1, size=2, replace=False))
            x, keys = chain_keys(m)
            c_half = float(gap_domination_factor(int(b - a), n, Fraction(1, 2)))
            base = balanced_link_head(x, keys[a], keys[b],  # gap 1: c = 0, use ratio ~1
                                      max(c_half, 1.0) * float(rng.uniform(0.5, 2.0)), n)
        else:
            base = softmax_kernel_head(float(rng.uniform(0.3, 4)), m, n)
        head = _perturbed_head(base, m, n, float(rng.uniform(0, 0.3 if i % 2 else 1)), i)
        for convention in ("bidirectional", "causal"):
            records += [(n, check) for check in family_checks(head, m, n, convention)]
    return records


def error_floor_survey(num_heads: int = 200) -> list[tuple[Fraction, Fraction]]:
    """(largest error, Lemma B's floor l g / (2 (k rho + l))), exactly, of seeded integer heads
    of rank 1-4 on the link x = 1, z = 0, z' = 1 at n = 3, both conventions."""
    num_heads = check_int(num_heads, "num_heads", 1, MAX_SURVEY)
    x, z, z_prime = np.array([1]), np.array([0]), np.array([1])
    out = []
    for seed in range(num_heads):
        for convention in ("bidirectional", "causal"):
            head = random_kernel_head(1, 3, rank=1 + seed % 4, d=2, seed=seed, integer=True)
            pure, mixed = link_errors(head, x, z, z_prime, 1, 1, convention, exact=True)
            ratio = gap_domination_ratio(head, x, z, z_prime, 3, convention, exact=True)
            out.append((max(*pure, mixed), min_error_for_ratio(ratio, 1, 3)))
    return out
