"""E2 data: the distributions' defining properties, the splits' disjointness, the stored
protocols' token-pool generator, and the heads' inputs."""

import numpy as np
import pytest
import torch

from companion.bounds.codes import paley_hadamard_code
from companion.core.task import min_ip_targets, token_pool
from companion.experiments.e2 import data


def _gram_of(pool, idx):
    s = pool[idx]
    return np.einsum("sim,sjm->sij", s, s)


def _codes(idx, size):
    return set(data.multiset_codes(idx, size).tolist())


def test_multiset_codes_ignore_order_and_separate_different_multisets():
    idx = np.array([[0, 1, 2], [2, 0, 1], [1, 1, 2], [1, 2, 2]])
    codes = data.multiset_codes(idx, 5)
    assert codes[0] == codes[1] and len(set(codes.tolist())) == 3


def test_gap_triples_have_their_defining_property():
    pool = token_pool(12, 300, 1)
    gram = pool @ pool.T
    rng = np.random.default_rng(0)
    for gap, idx in [(g, data.draw_triples(f"gap{g}", pool, 400, rng, gram)) for g in (1, 2)
                     ] + [(1, data._near_tie_triples(gram, 400, rng))]:
        assert (data.query_gaps(pool[idx]) == gap).any(axis=1).all()
        assert (idx[:, 0] != idx[:, 1]).all() and (idx[:, 1] != idx[:, 2]).all()
        assert (idx[:, 0] != idx[:, 2]).all()
    # uniform triples are a different distribution: many queries face a gap >= 2
    u = data.query_gaps(pool[data.draw_triples("uniform", pool, 400, rng, gram)])
    assert (u >= 2).mean() > 0.2


def test_a_pool_without_near_ties_fails_instead_of_hanging():
    with pytest.raises(RuntimeError, match="gap"):  # one-hot: every cross overlap is 0
        data._near_tie_triples(np.eye(4, dtype=np.int64), 5, np.random.default_rng(0))
    with pytest.raises(RuntimeError, match="gap-1"):
        data.draw_triples("gap1", np.eye(4, dtype=np.int64), 5, np.random.default_rng(0), None)


def test_witness_triples_hold_a_query_its_complement_and_a_worse_key():
    pool = paley_hadamard_code(11)
    comp = data.complement_index(pool)
    assert (comp >= 0).all() and (comp[comp] == np.arange(len(pool))).all()
    idx = data.draw_triples("witness", pool, 500, np.random.default_rng(0), None)
    mixed = 0
    for row in idx:
        if len(set(row.tolist())) == 3:
            assert any(comp[u] == v for u in row for v in row if u != v)
            mixed += 1
        else:
            assert len(set(row.tolist())) == 2  # pure sequences (x, y, y)
    assert mixed == 375  # a quarter pure


def test_complement_closed_pool_pairs_each_token_with_its_complement():
    pool = data.complement_closed_pool(8, 20, 0)
    assert pool.shape == (40, 8) and (pool[1::2] == 1 - pool[0::2]).all()
    assert len({tuple(t) for t in pool}) == 40


@pytest.mark.parametrize("name", ["uniform", "gap1", "gap2"])
def test_shared_pool_train_and_test_share_no_sequence(name):
    pool = token_pool(10, 120, 4)
    d = data.shared_pool_split(pool, 2000, 300, {"uniform": 0.5, name: 0.5}, (name, "uniform"),
                               seed=2)
    train_pool, train_idx = d["train"]
    train = _codes(train_idx, 120)
    for test_name, (test_pool, idx) in d["evals"].items():
        if not test_name.startswith("test/"):
            continue
        assert test_pool is train_pool
        codes = data.multiset_codes(idx, 120)
        assert train.isdisjoint(codes.tolist()), test_name
        assert len(set(codes.tolist())) == len(codes)  # distinct test sequences
        assert idx.min() >= 0 and idx.max() < 120
    assert train_idx.shape == (2000, 3) and d["pool_test"] == 120


def test_held_out_is_a_function_of_the_multiset_with_the_right_rate():
    codes = np.arange(200_000)
    side = data.unit_hash(codes, 5) < 0.3  # shared_pool_split's held-out rule
    assert abs(side.mean() - 0.3) < 0.01
    np.testing.assert_array_equal(side, data.unit_hash(codes, 5) < 0.3)
    assert (side != (data.unit_hash(codes, 6) < 0.3)).any()


def test_complement_closed_disjoint_pools():
    d = data.disjoint_pool_split(10, 400, 0.7, 500, 200, {"uniform": 1.0},
                                 ("uniform", "witness"), seed=1)
    tr = {tuple(t) for t in d["train"][0]}
    te = {tuple(t) for t in d["evals"]["test/uniform"][0]}
    assert tr.isdisjoint(te) and len(tr) + len(te) == 400
    assert {tuple(1 - np.array(t)) for t in tr} == tr  # closed under complement
    assert {tuple(1 - np.array(t)) for t in te} == te
    assert {k for k in d["evals"] if k.startswith("train/")} == {"train/uniform",
                                                                 "train/witness"}


def test_token_pools_are_disjoint_and_sequences_stay_in_their_pool():
    d = data.disjoint_pool_split(10, 300, 0.7, 200, 150, {"uniform": 0.5, "near_tie": 0.5},
                                 data.TEST_DISTRIBUTIONS, seed=3, pools="tokens")
    (train_pool, train_idx), ev = d["train"], d["evals"]
    test_pool = ev["test/uniform"][0]
    train = {tuple(t) for t in train_pool}
    test = {tuple(t) for t in test_pool}
    assert len(train) == len(train_pool) == 210 and len(test) == len(test_pool) == 90
    assert train.isdisjoint(test)
    assert train_idx.shape == (200, 3) and train_idx.max() < len(train_pool)
    assert [len(ev[f"fit/{k}"][1]) for k in ("uniform", "near_tie")] == [100, 100]
    assert (data.query_gaps(train_pool[ev["fit/near_tie"][1]]) == 1).any(axis=1).all()
    for name in data.TEST_DISTRIBUTIONS:
        idx = ev[f"test/{name}"][1]
        assert idx.shape == (150, 3) and idx.min() >= 0 and idx.max() < len(test_pool)


def test_token_pool_uniform_triples_are_seeded_uniform_draws():
    """The stored protocols' uniform triples: rng(seed).integers over the pool, as drawn by
    the generator the stored runs used (their files record pool sizes, not draws)."""
    d = data.disjoint_pool_split(8, 128, 0.5, 60, 40, {"uniform": 1.0, "near_tie": 0.0},
                                 ("uniform",), seed=1, pools="tokens")
    ss = np.random.SeedSequence([1, 8, 128]).spawn(6)
    want = np.random.default_rng(int(ss[2].generate_state(1)[0])).integers(0, 64, (60, 3))
    pool, idx = d["train"]
    np.testing.assert_array_equal(idx, want)
    t = min_ip_targets(pool[idx])
    for s, seq in enumerate(idx[:10]):  # targets as a brute-force loop computes them
        toks = [pool[j] for j in seq]
        for i in range(3):
            assert t[s, i] == min(int(toks[i] @ toks[j]) for j in range(3))


def test_query_gaps_checks_its_input():
    with pytest.raises(ValueError, match="seqs"):
        data.query_gaps(np.zeros((4, 2, 5), dtype=np.int64))


def test_pool_inputs_rows_line_up_with_targets():
    idx = np.array([[0, 1, 2], [3, 3, 1]])
    rows, pool = data.pool_inputs(np.eye(4, dtype=np.int64), idx)
    assert rows.tolist() == [[0, 0, 1, 2], [1, 0, 1, 2], [2, 0, 1, 2],
                             [3, 3, 3, 1], [3, 3, 3, 1], [1, 3, 3, 1]]
    assert pool.bits.shape == (4, 4) and pool.bits.dtype == torch.float32


# --------------------------------------------------------------------------- the study's splits


def _token_codes(tokens):
    return {int("".join(map(str, t)), 2) for t in tokens}


@pytest.mark.parametrize("m", [6, 10])
def test_arm_a_splits_the_cube_by_complementary_pairs(m):
    d = data.study_split("A", m, 0, n_train=300, n_eval=200)
    pools = [d["train"][0], d["val"]["uniform"][0], d["evals"]["test/uniform"][0]]
    sides = [_token_codes(p) for p in pools]
    full = 2**m - 1
    assert sum(map(len, sides)) == 2**m and set().union(*sides) == set(range(2**m))
    for side in sides:  # a token and its complement always on the same side
        assert {full ^ c for c in side} == side
    if m == 10:  # 60 / 20 / 20 of the cube, whatever m: coverage does not shrink with m
        assert [round(len(s) / 2**m, 1) for s in sides] == [0.6, 0.2, 0.2]
    # near-tie triples: some query's two competitors differ in overlap by exactly 1
    pool, idx = d["evals"]["test/witness"]
    assert (data.query_gaps(pool[idx]) == 1).any(axis=1).all() and idx.shape == (200, 3)
    other = data.study_split("A", m, 1, n_train=300, n_eval=200)
    assert _token_codes(other["train"][0]) != sides[0]  # another split, other tokens
    again = data.study_split("A", m, 0, n_train=300, n_eval=200)
    assert np.array_equal(again["train"][1], d["train"][1])  # seeded


def test_arm_b_sylvester_pool_and_multiset_split():
    import itertools

    for n in (8, 16, 32):
        pool = data.sylvester_code(n)
        gram = pool @ pool.T
        p = 2 * n - 2
        assert pool.shape == (p, n) and len(_token_codes(pool)) == p
        assert set(np.unique(gram)) == {0, n // 4, n // 2}
        assert (gram[np.arange(p // 2), np.arange(p // 2) + p // 2] == 0).all()
    d = data.study_split("B", 8, 2, 1, 1)
    pool = d["train"][0]
    sets = [d["train"][1], d["val"]["uniform"][1], d["evals"]["test/uniform"][1]]
    every = list(itertools.combinations_with_replacement(range(14), 3))
    seen = [tuple(r) for s in sets for r in np.sort(s, axis=1)]
    assert sorted(seen) == every  # each multiset once, on exactly one side
    wit = d["evals"]["test/witness"][1]
    assert set(map(tuple, wit)) <= set(map(tuple, sets[2]))
    assert all(any(a % 7 == b % 7 and a != b for a, b in itertools.combinations(r, 2))
               for r in wit)  # each holds a word and its complement
    # on these sequences the targets are 0 (a complementary pair), n/4 or n/2
    assert set(np.unique(min_ip_targets(pool[sets[0]]))) <= {0, 2, 4}


# --------------------------------------------------------------------------- explicit heads


def test_complement_power_heads_have_the_stated_rank_and_nonnegative_weights():
    from companion.core.task import all_tokens

    cube = all_tokens(6)
    for k in range(4):
        weight = (2 * (cube @ (1 - cube).T) + 1) ** k
        assert (weight > 0).all()
        assert np.linalg.matrix_rank(weight.astype(np.float64)) == data.complement_power_rank(
            6, k)


def test_complement_power_heads_climb_with_degree_and_are_exact_counts():
    from fractions import Fraction

    pool = data.complement_closed_pool(8, 40, 0)
    idx = data.draw_triples("witness", pool, 300, np.random.default_rng(0), None)
    acc = [data.complement_power_head_accuracy(pool, idx, k) for k in range(1, 5)]
    assert all(isinstance(a, Fraction) and (a * 300).denominator == 1 for a in acc)
    assert acc[0] < Fraction(1, 2) < acc[-1] and acc == sorted(acc)
    # a solved sequence, checked by hand in exact arithmetic
    tokens = pool[idx[0]]
    outs = []
    for i in range(3):
        w = [Fraction((2 * int(tokens[i] @ (1 - tokens[j])) + 1) ** 4) for j in range(3)]
        f = [int(tokens[i] @ tokens[j]) for j in range(3)]
        outs.append(sum(a * b for a, b in zip(w, f)) / sum(w))
    t = min_ip_targets(tokens[None])[0]
    solved = all(abs(o - int(ti)) < Fraction(1, 2) for o, ti in zip(outs, t))
    assert data.complement_power_head_accuracy(pool, idx[:1], 4) == int(solved)
    with pytest.raises(ValueError, match="idx"):
        data.complement_power_head_accuracy(pool, idx[:, :2], 2)


def test_complement_triples_defeat_every_query_independent_overlap_mixing():
    """The decisive study's test (book/e2_preregistration.md, issue 40): (x, x̄, y) with y
    meeting both; targets 0 at x and x̄, >= 1 at y. Mixing the tokens with weights that do not
    depend on the query (a rank-1 head) and reading out the overlap fails every triple."""
    d = data.study_split("A", 8, 1, n_train=50, n_eval=300, complement=True)
    plain = data.study_split("A", 8, 1, n_train=50, n_eval=300)
    for name in ("uniform", "witness"):  # the study's own draws are unchanged
        assert np.array_equal(d["val"][name][1], plain["val"][name][1])
        assert np.array_equal(d["evals"][f"test/{name}"][1], plain["evals"][f"test/{name}"][1])
    for pool, idx in (d["val"]["complement"], d["evals"]["test/complement"]):
        seqs = pool[idx]
        comp = (seqs[:, :, None, :] + seqs[:, None, :, :] == 1).all(-1)  # (S, 3, 3)
        assert idx.shape == (300, 3) and (comp.sum((1, 2)) == 2).all()  # one complement pair
        targets = min_ip_targets(seqs)
        assert (np.sort(targets, axis=1)[:, :2] == 0).all() and (targets.max(1) >= 1).all()
        rng = np.random.default_rng(0)
        for weights in (np.ones(len(pool)), rng.random(len(pool)) + 1e-3,
                        np.exp(5 * rng.standard_normal(len(pool)))):
            w = weights[idx] / weights[idx].sum(1, keepdims=True)  # the same for every query
            out = np.einsum("sim,sp,spm->si", seqs, w, seqs)  # <q, sum_p w_p z_p>
            assert not (np.abs(out - targets) < 0.5).all(1).any()
    assert data.study_split("A", 8, 1, 50, 300, True)["val"]["complement"][1].tolist() == \
        d["val"]["complement"][1].tolist()  # seeded
