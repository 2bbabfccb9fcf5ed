"""E2 (OOD scaling): data, stacked models, accuracy, transition rank, sweep determinism."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from companion.book import seed_everything
from companion.core.task import min_ip_targets, sample_sequences
from companion.experiments import heads as mlp_heads
from companion.experiments.e2 import data as ood_data
from companion.experiments.e2 import protocols as ood_scaling
from companion.experiments.store import config_hash


@pytest.fixture(autouse=True)
def _one_thread():
    seed_everything(0, threads=1)


def test_pools_are_disjoint_and_sequences_stay_in_their_pool():
    data = ood_data.make_e2_data(10, 300, 0.7, n_train=200, n_test=150, near_tie_fraction=0.5,
                                 seed=3)
    train = {tuple(t) for t in data.train_pool}
    test = {tuple(t) for t in data.test_pool}
    assert len(train) == len(data.train_pool) == 210 and len(test) == len(data.test_pool) == 90
    assert train.isdisjoint(test)
    assert data.train_idx.shape == (200, 3) and data.train_idx.max() < len(data.train_pool)
    for name in ood_data.TEST_DISTRIBUTIONS:
        idx = data.test_idx[name]
        assert idx.shape == (150, 3) and idx.min() >= 0 and idx.max() < len(data.test_pool)


def test_targets_equal_a_brute_force_loop():
    data = ood_data.make_e2_data(8, 128, 0.5, n_train=60, n_test=40, near_tie_fraction=0.5,
                                 seed=1)
    cases = [(data.train_pool, data.train_idx, data.train_targets())] + [
        (data.test_pool, data.test_idx[n], data.test_targets(n))
        for n in ood_data.TEST_DISTRIBUTIONS]
    for pool, idx, got in cases:
        for s, seq in enumerate(idx):
            toks = [pool[j] for j in seq]
            for i in range(3):
                want = min(sum(int(a) * int(b) for a, b in zip(toks[i], toks[j], strict=True))
                           for j in range(3))
                assert got[s, i] == want


def test_index_triples_match_sample_sequences():
    pool = np.eye(6, dtype=np.int64)
    idx = ood_data.sample_index_triples(len(pool), 50, seed=7)
    np.testing.assert_array_equal(pool[idx], sample_sequences(pool, 3, 50, seed=7))


def test_near_tie_generator_produces_near_ties():
    data = ood_data.make_e2_data(12, 400, 0.7, n_train=10, n_test=10, seed=0)
    pool = data.test_pool
    idx, qpos = ood_data.near_tie_triples(pool, 300, seed=5)
    gram = pool @ pool.T
    for seq, q in zip(idx, qpos, strict=False):
        others = [j for p, j in enumerate(seq) if p != q]
        assert abs(gram[seq[q], others[0]] - gram[seq[q], others[1]]) == 1
        assert len(set(seq.tolist())) == 3
    assert set(qpos.tolist()) == {0, 1, 2}  # the query is not always in one place
    # uniform triples are rarely that tight: the generator really changes the distribution
    uni = ood_data.sample_index_triples(len(pool), 300, seed=5)
    tight = [abs(gram[s[0], s[1]] - gram[s[0], s[2]]) == 1 for s in uni]
    assert np.mean(tight) < 0.6


def test_pool_inputs_rows_line_up_with_targets():
    idx = np.array([[0, 1, 2], [3, 3, 1]])
    rows, pool = ood_data.pool_inputs(np.eye(4, dtype=np.int64), idx)
    assert rows.tolist() == [[0, 0, 1, 2], [1, 0, 1, 2], [2, 0, 1, 2],
                             [3, 3, 3, 1], [3, 3, 3, 1], [1, 3, 3, 1]]
    assert pool.bits.shape == (4, 4) and pool.bits.dtype == torch.float32


@pytest.mark.parametrize("feature", mlp_heads.FEATURES)
def test_kernel_heads_shapes_nonnegativity_and_rank_mask(feature):
    ranks, seeds = [1, 3, 8], [0, 1, 2]
    model = mlp_heads.mlp_kernel_heads(6, ranks, seeds, hidden=(8,), value_dim=4, feature=feature)
    bits = torch.as_tensor(np.random.default_rng(0).integers(0, 2, (20, 6)), dtype=torch.float32)
    phi_q, phi_k, v, a, b = model.token_maps(bits)
    assert phi_q.shape == phi_k.shape == (3, 20, 8) and v.shape == a.shape == (3, 20, 4)
    assert b.shape == (3, 20)
    assert (phi_q >= 0).all() and (phi_k >= 0).all()
    for i, r in enumerate(ranks):  # columns beyond a head's rank are exactly zero
        assert (phi_q[i, :, r:] == 0).all() and (phi_k[i, :, r:] == 0).all()
        assert (phi_q[i, :, :r] > 0).all()
    rows, pool = ood_data.pool_inputs(bits.long().numpy(), np.array([[0, 1, 2], [4, 5, 5]]))
    assert model((rows, pool)).shape == (3, 6)


def test_rank_mask_makes_padding_irrelevant():
    """A head of rank r stacked with bigger ranks computes what it computes alone."""
    bits = np.random.default_rng(1).integers(0, 2, (15, 7))
    rows = ood_data.pool_inputs(bits, np.random.default_rng(2).integers(0, 15, (10, 3)))
    alone = mlp_heads.mlp_kernel_heads(7, [2], [5], hidden=(8,), value_dim=3)
    stacked = mlp_heads.mlp_kernel_heads(7, [2, 16], [5, 0], hidden=(8,), value_dim=3)
    with torch.no_grad():
        torch.testing.assert_close(stacked(rows)[0], alone(rows)[0])
        stacked.weights[-1][0, :, 2:16] += 5.0  # change the masked feature columns of head 0
        torch.testing.assert_close(stacked(rows)[0], alone(rows)[0])


def test_rank_one_kernel_head_ignores_the_query_in_its_weights():
    """Rank 1: alpha(x, z) = phi_Q(x) phi_K(z), so the normalised weights depend on keys only."""
    model = mlp_heads.mlp_kernel_heads(5, [1], [0], hidden=(4,), value_dim=2)
    bits = torch.as_tensor(np.random.default_rng(3).integers(0, 2, (9, 5)), dtype=torch.float32)
    phi_q, phi_k, *_ = model.token_maps(bits)
    kernel = phi_q[0] @ phi_k[0].T
    weights = kernel / kernel.sum(1, keepdim=True)
    torch.testing.assert_close(weights, weights[:1].expand_as(weights))


def test_softmax_heads_shape():
    model = mlp_heads.mlp_softmax_heads(6, [0, 1], hidden=(8,), value_dim=4)
    rows = ood_data.pool_inputs(np.eye(6, dtype=np.int64), np.array([[0, 1, 2], [3, 4, 5]]))
    assert model(rows).shape == (2, 6)


def test_exact_sequence_accuracy_needs_all_three_positions():
    targets = np.array([[1, 2, 0], [0, 0, 0]])
    pred = np.array([[1.4, 2.0, -0.4, 0.0, 0.0, 0.6],  # 2nd sequence: one position off
                     [1.0, 2.0, 0.0, 0.0, 0.0, 0.0]])
    np.testing.assert_allclose(ood_scaling.exact_sequence_accuracy(pred, targets), [0.5, 1.0])


def test_transition_rank_uses_the_median_over_seeds():
    acc = [[0.5, 0.5, 0.95], [0.9, 0.95, 0.1], [1.0, 1.0, 1.0]]
    assert ood_scaling.transition_rank([1, 2, 4], acc, 0.9) == 2
    assert ood_scaling.transition_rank([1, 2, 4], acc, 0.99) == 4
    assert ood_scaling.transition_rank([1, 2, 4], [[0.1] * 3] * 3, 0.9) is None


TINY = replace(ood_scaling.E2_QUICK, widths=[5], pool_sizes=[32], n_train=40, n_test=30,
               ranks=[1, 4], rank_groups=[[1], [4]], seeds=[0, 1], hidden=[8], value_dim=4,
               steps=15)


def test_tiny_sweep_is_deterministic_and_well_formed():
    first = ood_scaling.run_e2_sweep(TINY)
    second = ood_scaling.run_e2_sweep(TINY)
    assert first == second
    entry = first["widths"]["5"]
    assert np.asarray(entry["accuracy"]["near_tie"]).shape == (2, 2)
    assert len(entry["dense"]["uniform"]) == 2
    for name in ood_data.TEST_DISTRIBUTIONS:
        acc = np.asarray(entry["accuracy"][name])
        assert ((0 <= acc) & (acc <= 1)).all()
    import json

    json.dumps(first)  # JSON-serialisable


def test_sweep_trains_the_models_it_reports():
    """Training improves the training max error over a barely-trained run."""
    short = ood_scaling.run_e2_sweep(replace(TINY, steps=1))["widths"]["5"]["train_max_error"]
    longer = ood_scaling.run_e2_sweep(replace(TINY, steps=150))["widths"]["5"]["train_max_error"]
    assert np.median(longer) < np.median(short)


@pytest.mark.parametrize("kwargs, name", [
    ({"m": 0}, "m"),
    ({"pool_size": 5}, "pool_size"),
    ({"pool_size": 300, "m": 8}, "pool_size"),
    ({"train_fraction": 1.0}, "train_fraction"),
    ({"train_fraction": 0.0}, "train_fraction"),
    ({"near_tie_fraction": 1.5}, "near_tie_fraction"),
])
def test_make_e2_data_rejects_bad_input(kwargs, name):
    args = {"m": 8, "pool_size": 64, "train_fraction": 0.7} | kwargs
    with pytest.raises(ValueError, match=name):
        ood_data.make_e2_data(**args)


def test_bad_types_raise_type_error():
    with pytest.raises(TypeError, match="train_fraction"):
        ood_data.make_e2_data(8, 64, train_fraction="0.5")
    with pytest.raises(TypeError, match="m"):
        ood_data.make_e2_data(8.0, 64)
    with pytest.raises(TypeError, match="config"):
        ood_scaling.run_e2_sweep([("widths", [8])])


@pytest.mark.parametrize("make, name", [
    (lambda: mlp_heads.mlp_kernel_heads(0, [1], [0]), "m"),
    (lambda: mlp_heads.mlp_kernel_heads(4, [0], [0]), "r"),
    (lambda: mlp_heads.mlp_kernel_heads(4, [1, 2], [0]), "seeds"),
    (lambda: mlp_heads.mlp_kernel_heads(4, [1], [0], feature="relu"), "feature"),
    (lambda: mlp_heads.mlp_softmax_heads(4, [-1]), "seeds"),
])
def test_models_reject_bad_input(make, name):
    with pytest.raises(ValueError, match=name):
        make()


@pytest.mark.parametrize("change, name", [
    ({"widths": [0]}, "m"),
    ({"ranks": [0, 1], "rank_groups": [[0, 1]]}, "r"),
    ({"rank_groups": [[1]]}, "rank_groups"),
    ({"train_fraction": 1.2}, "train_fraction"),
    ({"threshold": 0.0}, "threshold"),
    ({"pool_sizes": [32, 64]}, "pool_sizes"),
])
def test_sweep_config_rejects_bad_input(change, name):
    with pytest.raises(ValueError, match=name):
        replace(TINY, **change)


def test_near_tie_generator_rejects_pools_without_near_ties():
    pool = np.array([[0, 1], [1, 1]])  # two tokens: too few for a triple of distinct ones
    with pytest.raises(ValueError, match="pool"):
        ood_data.near_tie_triples(pool, 5, seed=0)
    with pytest.raises(ValueError, match="gap"):
        # one-hot tokens: every overlap between distinct tokens is 0, so no pair has gap 1
        ood_data.near_tie_triples(np.eye(4, dtype=np.int64), 5, seed=0)


def test_dense_head_with_proposition_f_weights_solves_min_ip():
    """Affine maps set to Proposition F (q = -beta x, k = z, overlap readout) are exact, and the
    forward pass agrees with the numpy reference head of companion.core.constructions."""
    from companion.core.attention import softmax_attention
    from companion.core.constructions import softmax_min_ip_head

    m, beta = 8, 4.0
    model = mlp_heads.mlp_softmax_heads(m, [0], hidden=(), value_dim=2, readout="overlap")
    with torch.no_grad():
        model.weights[0].zero_()
        model.biases[0].zero_()
        model.weights[0][0, :, :m] = -beta * torch.eye(m)
        model.weights[0][0, :, m:2 * m] = torch.eye(m)
    pool = np.random.default_rng(0).integers(0, 2, (40, m))
    idx = ood_data.sample_index_triples(40, 200, seed=1)
    with torch.no_grad():
        pred = model(ood_data.pool_inputs(pool, idx)).numpy().reshape(200, 3)
    seqs = pool[idx]
    targets = min_ip_targets(seqs)
    assert np.abs(pred - targets).max() < 0.5
    for i in range(3):  # position i as the query: rotate it to the front
        ref = softmax_attention(softmax_min_ip_head(beta), np.roll(seqs, -i, axis=1))
        np.testing.assert_allclose(pred[:, i], ref, rtol=1e-4, atol=1e-4)


def test_protocol_store_round_trip_and_resume(tmp_path, monkeypatch):
    first = ood_scaling.run_e2_protocol("tiny", {"steps": 3}, out_dir=tmp_path, base=TINY)
    assert (tmp_path / "tiny.json").exists()
    assert ood_scaling.load_e2_protocols(tmp_path) == {"tiny": first}

    def boom(*args, **kwargs):
        raise AssertionError("a stored protocol must not be recomputed")

    monkeypatch.setattr(ood_scaling, "e2_width_result", boom)
    assert ood_scaling.run_e2_protocol("tiny", {"steps": 3}, out_dir=tmp_path, base=TINY) == first
    with pytest.raises(ValueError, match="configuration"):  # same file, other settings
        ood_scaling.run_e2_protocol("tiny", {"steps": 4}, out_dir=tmp_path, base=TINY)
    with pytest.raises(ValueError, match="name"):
        ood_scaling.protocol_path(tmp_path, "../escape")


def test_summary_matches_the_raw_result():
    res = ood_scaling.run_e2_sweep(replace(TINY, steps=2))
    (row,) = ood_scaling.summarise_e2(res)
    e = res["widths"]["5"]
    assert row["m"] == 5
    assert row["median_uniform"] == [float(np.median(a)) for a in e["accuracy"]["uniform"]]
    assert row["dense_min_near_tie"] == min(e["dense"]["near_tie"])
    assert row["transition_uniform"] == e["transition_r"]["uniform"]


RESULTS = Path(__file__).resolve().parents[3] / "results" / "e2_protocols"


def test_stored_protocols_match_the_registry():
    """Every registered protocol has a stored result made with exactly its configuration."""
    stored = ood_scaling.load_e2_protocols(RESULTS)
    assert set(stored) == set(ood_scaling.E2_PROTOCOLS)
    for name, changes in ood_scaling.E2_PROTOCOLS.items():
        config = replace(ood_scaling.E2_QUICK, **changes)
        assert ood_scaling.E2Config(**stored[name]["config"]) == config, name
        assert config_hash(stored[name]["config"]) == config_hash(config), name


def test_rerun_of_a_stored_protocol_subset_matches():
    """Re-train two heads (r = 1, 2) and the dense head of one seed at m = 8 of the stored
    quick-mode protocol: each model trains as it did inside the full stack, so the accuracies
    must match the committed file."""
    name = "H_widths_8_10_12"
    stored = ood_scaling.load_e2_protocols(RESULTS)[name]
    cfg = stored["config"]
    quick = ood_scaling.E2Config(**cfg)
    assert quick == ood_scaling.E2_QUICK  # the book's quick mode is this protocol
    seed, ranks = 1, [1, 2]
    sub = replace(quick, widths=[8], pool_sizes=[cfg["pool_sizes"][cfg["widths"].index(8)]],
                  ranks=ranks, rank_groups=[ranks], seeds=[seed])
    got = ood_scaling.run_e2_sweep(sub)["widths"]["8"]
    want = stored["widths"]["8"]
    s = cfg["seeds"].index(seed)
    for name in ood_data.TEST_DISTRIBUTIONS:
        for i, r in enumerate(ranks):
            j = cfg["ranks"].index(r)
            assert got["accuracy"][name][i][0] == pytest.approx(want["accuracy"][name][j][s],
                                                                abs=2e-3)
        assert got["dense"][name][0] == pytest.approx(want["dense"][name][s], abs=2e-3)
