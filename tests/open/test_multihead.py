"""Several NKA heads: the evaluator, the two exact constructions, the transcript count."""

import itertools
from fractions import Fraction

import numpy as np
import pytest

from companion.bounds.codes import paley_subset
from companion.bounds.witness import witness_family
from companion.core.attention import KernelAttentionHead, kernel_attention
from companion.core.task import all_sequences, query_target
from companion.open import multihead
from companion.open.multihead import (
    answer_function_count,
    cauchy_level_max_error,
    multihead_max_error_exact,
    overlap_scores_lp,
    two_head_witness_heads,
)


@pytest.fixture(scope="module")
def small_family():
    return witness_family(paley_subset(6, 2))


def overlap_heads(m: int, P: dict, shifts) -> tuple:
    """Heads h with kernel <x, z> + t_h at the key positions (0 at the query's), rank m + 1,
    scores P[w][h][a] / (a + t_h) for a query of weight w and a key of overlap a, read from
    one-hot values over all 2^m tokens (d = 2^m): the heads the level computations describe."""
    weights = 2 ** np.arange(m)
    allz = (np.arange(2 ** m)[:, None] >> np.arange(m)) & 1

    def make(h):
        th = shifts[h]

        def key_features(z, p):
            z = np.asarray(z, dtype=np.int64)
            out = np.empty(z.shape[:-1] + (m + 1,), dtype=object)
            if p == 0:
                out[...] = Fraction(0)
            else:
                out[..., :m] = z
                out[..., m] = th
            return out

        def readout(x):
            x = np.asarray(x, dtype=np.int64)
            ov = x @ allz.T  # (..., 2^m): overlap of x with every token
            w = np.broadcast_to(x.sum(-1)[..., None], ov.shape)
            out = np.empty(ov.shape, dtype=object)
            out.reshape(-1)[:] = [P[int(ww)][h][int(a)] / (int(a) + th)
                                  for ww, a in zip(w.ravel(), ov.ravel())]
            return out

        return KernelAttentionHead(
            rank=m + 1,
            query_features=lambda x: np.concatenate(
                [x, np.ones(np.shape(x)[:-1] + (1,), np.int64)], axis=-1),
            key_features=key_features,
            values=lambda z, p: np.eye(2 ** m, dtype=np.int64)[np.asarray(z) @ weights],
            readout_weights=readout,
            readout_bias=lambda x: np.zeros(np.shape(x)[:-1], dtype=np.int64))

    return tuple(make(h) for h in range(len(shifts)))


def cauchy_overlap_heads(m: int) -> tuple:
    """The 2m+1 Cauchy heads of rank m+1 (``prf:prop-cauchy-heads``)."""
    shifts = multihead._default_shifts(2 * m + 1)
    return overlap_heads(m, multihead._cauchy_scores(m, shifts), shifts)


def exhaustive_max_error(heads, m: int) -> Fraction:
    """Exact max error over all 2^(3m) length-3 inputs in {0,1}^m (the oracle)."""
    return multihead_max_error_exact(heads, all_sequences(3, m))


def test_two_rank_one_heads_are_exact_on_a_witness_family(small_family):
    heads = two_head_witness_heads(small_family)
    assert [h.rank for h in heads] == [1, 1]
    assert multihead_max_error_exact(heads, small_family.sequences) == 0
    # the kernels are nonnegative: both are NKA heads (kernel_attention checks alpha >= 0)
    for h in heads:
        kernel_attention(h, small_family.sequences[:50], exact=True)
    # neither head alone solves the family: the sum is what matters
    for h in heads:
        y = kernel_attention(h, small_family.sequences, exact=True)
        err = max(abs(Fraction(v) - int(t)) for v, t in zip(y, small_family.targets))
        assert err >= Fraction(1, 2)
    assert small_family.certificate.bound.rank >= 2


def test_two_head_construction_also_works_in_the_causal_form():
    fam = witness_family(paley_subset(5, 1), convention="causal")
    heads = two_head_witness_heads(fam)
    assert multihead_max_error_exact(heads, fam.sequences, "causal") == 0


@pytest.mark.slow
def test_two_rank_one_heads_are_exact_on_the_e1_witness():
    pytest.importorskip("torch")  # E1's family is chosen in the experiment module (torch)
    from companion.experiments.e1 import experiment_witness_24

    fam = experiment_witness_24()
    assert fam.certificate.bound.rank == 20
    assert multihead_max_error_exact(two_head_witness_heads(fam), fam.sequences) == 0


def test_two_head_construction_rejects_bad_input(small_family):
    with pytest.raises(TypeError, match="WitnessFamily"):
        two_head_witness_heads(small_family.sequences)


@pytest.mark.parametrize("m", [1, 2, 3])
def test_cauchy_heads_are_exact_on_every_length_3_input(m):
    heads = cauchy_overlap_heads(m)
    assert len(heads) == 2 * m + 1 and all(h.rank == m + 1 for h in heads)
    assert exhaustive_max_error(heads, m) == 0


def test_cauchy_heads_fail_without_one_of_them():
    heads = cauchy_overlap_heads(2)
    assert exhaustive_max_error(heads[:-1], 2) > 0


@pytest.mark.parametrize("m", range(1, 9))
def test_cauchy_heads_are_exact_on_every_input_class(m):
    assert cauchy_level_max_error(m) == 0


def test_cauchy_bad_input():
    with pytest.raises(ValueError, match="m must"):
        cauchy_level_max_error(0)
    with pytest.raises(TypeError, match="m must"):
        cauchy_level_max_error(2.0)


def test_multihead_is_the_sum_of_heads(small_family):
    heads = two_head_witness_heads(small_family)
    seqs = small_family.sequences[:20]
    total = sum(kernel_attention(h, seqs, exact=True) for h in heads)
    assert multihead_max_error_exact(heads, seqs) == max(
        abs(y - t) for y, t in zip(total.ravel(), query_target(seqs).ravel(), strict=True))
    with pytest.raises(TypeError, match="KernelAttentionHead"):
        multihead_max_error_exact([heads[0], "head"], seqs)


@pytest.mark.parametrize("m", [1, 2, 3])
def test_answer_function_count_by_brute_force(m):
    toks = list(itertools.product((0, 1), repeat=m))
    tables = {tuple(min(np.dot(x, z), np.dot(x, zp)) for x in toks)
              for z in toks for zp in toks}
    assert answer_function_count(m) == len(tables)


def test_two_overlap_heads_suffice_on_all_inputs_at_small_m():
    m, shifts = 3, [Fraction(1, 2), Fraction(3, 2)]
    P = {0: [[Fraction(0)], [Fraction(0)]]}
    P.update({w: overlap_scores_lp(w, 2, Fraction(499, 1000)) for w in range(1, m + 1)})
    heads = overlap_heads(m, P, shifts)
    assert [h.rank for h in heads] == [4, 4]
    level = multihead._overlap_level_max_error(P, shifts)
    assert level < Fraction(1, 2)
    assert exhaustive_max_error(heads, 3) == level  # the classes are every input


def test_one_overlap_head_cannot_and_the_lp_says_so():
    assert overlap_scores_lp(3, 1, Fraction(1, 2)) is None
    assert overlap_scores_lp(3, 2, Fraction(499, 1000)) is not None
