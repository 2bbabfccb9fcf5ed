"""E2 pipeline (readings): configurations, the data each reading trains and tests on, one
unit trained and resumed, the heads a unit builds, the CLI, and the explicit heads."""

import json
from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest
import torch

from companion.book import seed_everything
from companion.core.task import min_ip_targets, token_pool
from companion.experiments import heads as mlp_heads
from companion.experiments.e2 import data as e2data
from companion.experiments.e2 import readings as er
from companion.experiments.e2.data import pool_inputs
from companion.experiments.heads import pool_kernel_heads, pool_softmax_heads
from companion.experiments.sweep import config_dict


@pytest.fixture(autouse=True)
def _one_thread():
    seed_everything(0, threads=1)


def _gram_of(pool, idx):
    s = pool[idx]
    return np.einsum("sim,sjm->sij", s, s)


def _uniform(size, count, seed):
    return np.random.default_rng(seed).integers(0, size, (count, 3))


# --------------------------------------------------------------------------- configurations


def test_reading_configs_refuse_bad_values():
    with pytest.raises(ValueError, match="reading"):
        er.ReadingConfig(reading="Y")
    with pytest.raises(ValueError, match="P = 2"):
        er.ReadingConfig(sizes=((12, 24),))
    with pytest.raises(ValueError, match="rank_groups"):
        er.ReadingConfig(ranks=(1, 2), rank_groups=((1,),))
    with pytest.raises(ValueError, match="tests"):
        er.ReadingConfig(tests=("nearly",))
    with pytest.raises(TypeError, match="sizes"):
        er.ReadingConfig(sizes=(12, 22))
    # the full runs are the pre-registered ones: 5 seeds, both readouts, 1000 test sequences
    for cfg in er.READINGS_FULL.values():
        assert len(cfg.seeds) == 5 and cfg.readouts == ("learned", "overlap")
        assert cfg.n_test == 1000 and len(cfg.sizes) == 3 and cfg.threshold == 0.9
        assert {1, 2, 4, 8, 16, 32, 64, 128} <= set(cfg.ranks)


E2_TINY = er.E2Config(widths=(5,), pool_sizes=(32,), n_train=40, n_test=30, ranks=(1, 4),
                      rank_groups=((1,), (4,)), seeds=(0, 1), hidden=(8,), value_dim=4,
                      steps=15)


@pytest.mark.parametrize("change, name", [
    ({"widths": [0]}, "m"),
    ({"ranks": [0, 1], "rank_groups": [[0, 1]]}, "r"),
    ({"rank_groups": [[1]]}, "rank_groups"),
    ({"train_fraction": 1.2}, "train_fraction"),
    ({"threshold": 0.0}, "threshold"),
    ({"pool_sizes": [32, 64]}, "pool_sizes"),
    ({"pool_sizes": [40]}, "pool_sizes"),  # more than 2**5 tokens of width 5
    ({"pool_sizes": [6]}, "pool_sizes"),  # a side of fewer than 3 tokens
    ({"near_tie_fraction": 1.5}, "near_tie_fraction"),
])
def test_protocol_config_rejects_bad_input(change, name):
    with pytest.raises(ValueError, match=name):
        replace(E2_TINY, **change)


def test_protocol_config_types_and_what_the_pipeline_reads_of_it():
    with pytest.raises(TypeError, match="train_fraction"):
        replace(E2_TINY, train_fraction="0.5")
    with pytest.raises(TypeError, match="widths"):
        replace(E2_TINY, widths="5")
    assert E2_TINY.sizes == ((5, 32),) and E2_TINY.readouts == ("learned",)
    assert dict(E2_TINY.train_mix) == {"uniform": 0.5, "near_tie": 0.5}
    assert "reading" not in config_dict(E2_TINY)  # pipeline attributes are not stored


# --------------------------------------------------------------------------- data


@pytest.mark.parametrize("name", ["X", "S-code", "S-random"])
def test_reading_data_keeps_train_and_test_apart(name):
    cfg = er.READINGS_SMOKE[name]
    m, p = cfg.sizes[0]
    data = er.reading_data(cfg, m, p)
    pool, idx = data["train"]
    assert len(idx) == cfg.n_train
    for key, (epool, eidx) in data["evals"].items():
        assert eidx.min() >= 0 and eidx.max() < len(epool)
        if key.startswith("test/") and name != "X":  # shared pool: no test multiset trained on
            train = set(e2data.multiset_codes(idx, p).tolist())
            assert train.isdisjoint(e2data.multiset_codes(eidx, p).tolist()), key
    if name == "X":  # disjoint tokens
        test_pool = data["evals"]["test/uniform"][0]
        assert {tuple(t) for t in pool}.isdisjoint({tuple(t) for t in test_pool})
    else:
        comp = e2data._complement_index(pool)
        assert (comp >= 0).all()  # closed under complement: witness triples exist


def test_the_protocols_data_are_disjoint_token_pools_with_their_tests():
    d = er.reading_data(E2_TINY, 5, 32)
    pool, idx = d["train"]
    test_pool = d["evals"]["test/uniform"][0]
    assert {tuple(t) for t in pool}.isdisjoint({tuple(t) for t in test_pool})
    assert (d["pool_train"], d["pool_test"]) == (22, 10) and len(idx) == 40
    assert set(d["evals"]) == {"test/uniform", "test/near_tie", "fit/uniform", "fit/near_tie",
                               "fit/all"}
    with pytest.raises(ValueError, match="sizes"):
        er.reading_data(E2_TINY, 6, 32)


# --------------------------------------------------------------------------- one unit


def test_a_smoke_reading_runs_and_is_stored_per_unit(tmp_path):
    cfg = er.READINGS_SMOKE["S-code"]
    path = er.reading_path(tmp_path, "S-code", "smoke")
    res = er.run_reading(cfg, out=path)
    units = {u.key for u in er._units(cfg, "cpu")}
    assert len(units) == 2 * 2 * len(cfg.sizes)  # readouts x (heads, dense) x sizes
    again = er.load_reading(path)
    assert again == res  # resumed from the file, nothing recomputed
    e = res["sizes"]["m8-P14"]["overlap"]
    assert np.shape(e["heads"]["accuracy"]["test/uniform"]) == (3, 2)
    assert np.shape(e["dense"]["accuracy"]["test/witness"]) == (2,)
    assert set(e["heads"]["n_eval"]) == set(e["heads"]["accuracy"])


def test_a_rank_one_overlap_head_cannot_solve_witness_triples():
    # rank 1 weights depend on the key only, so on (x, x-bar, y) sequences the three
    # queries cannot all pick their own minimum: the low regime the rule needs exists
    cfg = er.ReadingConfig(sizes=((12, 22),), ranks=(1,), rank_groups=((1,),), seeds=(0,),
                           readouts=("overlap",), n_train=300, n_test=200, steps=150)
    out = er.train_unit(cfg, 12, 22, "overlap", "heads")
    assert out["accuracy"]["test/witness"][0][0] < 0.5


def test_a_protocol_unit_is_the_pipeline_unit_of_its_configuration():
    """A protocol's unit trains heads and dense heads of a width together; each model trains
    as it would alone, so its record equals the pipeline's per-part units."""
    got = er.train_unit(E2_TINY, 5, 32, "learned", "both")
    heads = er.train_unit(E2_TINY, 5, 32, "learned", "heads")
    dense = er.train_unit(E2_TINY, 5, 32, "learned", "dense")
    assert got["accuracy"]["uniform"] == heads["accuracy"]["test/uniform"]
    assert got["train_accuracy"] == heads["accuracy"]["fit/all"]
    assert got["dense"]["near_tie"] == dense["accuracy"]["test/near_tie"]
    assert np.shape(got["accuracy"]["near_tie"]) == (2, 2) and got["ranks"] == [1, 4]
    assert set(got["transition_r"]) == {"uniform", "near_tie"}
    assert [u.key for u in er._units(E2_TINY, "cpu")] == ["m5"]  # the stored format


def test_exact_sequence_accuracy_needs_all_three_positions():
    targets = np.array([[1, 2, 0], [0, 0, 0]])
    pred = np.array([[1.4, 2.0, -0.4, 0.0, 0.0, 0.6],  # 2nd sequence: one position off
                     [1.0, 2.0, 0.0, 0.0, 0.0, 0.0]])
    got = er._exact_sequence_accuracy(torch.as_tensor(pred), targets)
    np.testing.assert_allclose(got, [0.5, 1.0])


# --------------------------------------------------------------------------- the heads


def test_pool_table_heads_shapes_masking_and_nonnegative_kernel():
    pool = token_pool(8, 40, 0)
    idx = _uniform(40, 30, 0)
    inputs = pool_inputs(pool, idx)
    for readout in ("overlap", "learned"):
        heads = pool_kernel_heads(40, [1, 3, 8], [0, 0, 1], readout)
        out = heads(inputs)
        assert out.shape == (3, 90) and torch.isfinite(out).all()
        k = heads.kernel()
        assert k.shape == (3, 40, 40) and (k >= 0).all()
        # rank-1 head: the kernel matrix has rank 1; padded feature columns stay exactly 0
        sv = [torch.linalg.svdvals(k[i].detach().double()) for i in range(2)]
        assert sv[0][1] < 1e-5 * sv[0][0] and sv[1][2] > 1e-3 * sv[1][0]
        assert sv[1][3] < 1e-5 * sv[1][0]
        dense = pool_softmax_heads(40, [0, 1], score_dim=8, readout=readout)
        assert dense(inputs).shape == (2, 90)


def test_overlap_readout_outputs_are_convex_combinations_of_overlaps():
    pool = token_pool(8, 40, 0)
    idx = _uniform(40, 50, 1)
    heads = pool_kernel_heads(40, [4, 4], [0, 1], "overlap")
    out = heads(pool_inputs(pool, idx)).detach().numpy().reshape(2, -1, 3)
    g = _gram_of(pool, idx)
    assert (out >= g.min(-1)[None] - 1e-4).all() and (out <= g.max(-1)[None] + 1e-4).all()


def test_model_in_a_stack_equals_the_model_alone():
    pool = token_pool(8, 30, 0)
    inputs = pool_inputs(pool, _uniform(30, 20, 0))
    alone = pool_kernel_heads(30, [4], [7], "learned")(inputs)
    stacked = pool_kernel_heads(30, [2, 4, 16], [0, 7, 1], "learned")(inputs)
    torch.testing.assert_close(stacked[1], alone[0], rtol=1e-5, atol=1e-5)


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
    rows, pool = pool_inputs(bits.long().numpy(), np.array([[0, 1, 2], [4, 5, 5]]))
    assert model((rows, pool)).shape == (3, 6)


def test_rank_mask_makes_padding_irrelevant():
    """A head of rank r stacked with bigger ranks computes what it computes alone."""
    bits = np.random.default_rng(1).integers(0, 2, (15, 7))
    rows = pool_inputs(bits, np.random.default_rng(2).integers(0, 15, (10, 3)))
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
    rows = pool_inputs(np.eye(6, dtype=np.int64), np.array([[0, 1, 2], [3, 4, 5]]))
    assert model(rows).shape == (2, 6)


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
    idx = _uniform(40, 200, 1)
    with torch.no_grad():
        pred = model(pool_inputs(pool, idx)).numpy().reshape(200, 3)
    seqs = pool[idx]
    targets = min_ip_targets(seqs)
    assert np.abs(pred - targets).max() < 0.5
    for i in range(3):  # position i as the query: rotate it to the front
        ref = softmax_attention(softmax_min_ip_head(beta), np.roll(seqs, -i, axis=1))
        np.testing.assert_allclose(pred[:, i], ref, rtol=1e-4, atol=1e-4)


def test_heads_refuse_a_bad_readout():
    with pytest.raises(ValueError, match="readout"):
        pool_kernel_heads(10, [1], [0], "free")


# --------------------------------------------------------------------------- the CLI


def _records(path):
    units = json.loads(path.read_text())["units"]
    return {k: {f: v for f, v in u.items() if f != "wall_time"} for k, u in units.items()}


def test_cli_runs_a_reading_into_a_folder_and_refuses_what_it_cannot_do(tmp_path, capsys):
    from companion.cli import main

    assert main(["e2", "--smoke", "--reading", "S-code", "--out", str(tmp_path),
                 "--no-progress"]) == 0
    assert (tmp_path / "e2_S-code_smoke.json").exists()
    assert main(["e2", "--quick", "--reading", "X", "--out", str(tmp_path),
                 "--no-progress"]) == 2
    assert "S-code only" in capsys.readouterr().err
    afile = tmp_path / "a.json"
    afile.write_text("{}")
    assert main(["e2", "--smoke", "--reading", "X", "--out", str(afile), "--no-progress"]) == 2
    assert "folder" in capsys.readouterr().err


def test_smoke_reading_records_are_identical_in_process_and_on_local_2(tmp_path):
    pytest.importorskip("dask.distributed")
    from companion.cli import main

    here, there = tmp_path / "here", tmp_path / "there"
    assert main(["e2", "--smoke", "--reading", "S-code", "--out", str(here),
                 "--no-progress"]) == 0
    assert main(["e2", "--smoke", "--reading", "S-code", "--out", str(there),
                 "--scheduler", "local:2", "--no-progress"]) == 0
    name = "e2_S-code_smoke.json"
    assert _records(here / name) == _records(there / name)
    assert len(_records(here / name)) == 4


# --------------------------------------------------------------------------- explicit heads


def test_complement_power_heads_have_the_stated_rank_and_nonnegative_weights():
    from companion.core.task import all_tokens

    cube = all_tokens(6)
    for k in range(4):
        weight = (2 * (cube @ (1 - cube).T) + 1) ** k
        assert (weight > 0).all()
        assert np.linalg.matrix_rank(weight.astype(np.float64)) == er.complement_power_rank(6, k)


def test_complement_power_heads_climb_with_degree_and_are_exact_counts():
    pool = e2data.complement_closed_pool(8, 40, 0)
    idx = e2data._witness_triples(pool, 300, np.random.default_rng(0))
    acc = [er.complement_power_head_accuracy(pool, idx, k) for k in range(1, 5)]
    assert all(isinstance(a, Fraction) and (a * 300).denominator == 1 for a in acc)
    assert acc[0] < Fraction(1, 2) < acc[-1] and acc == sorted(acc)
    # a solved sequence, checked by hand in exact arithmetic
    seq = idx[0]
    tokens = pool[seq]
    outs = []
    for i in range(3):
        w = [Fraction((2 * int(tokens[i] @ (1 - tokens[j])) + 1) ** 4) for j in range(3)]
        f = [int(tokens[i] @ tokens[j]) for j in range(3)]
        outs.append(sum(a * b for a, b in zip(w, f)) / sum(w))
    t = min_ip_targets(tokens[None])[0]
    solved = all(abs(o - int(ti)) < Fraction(1, 2) for o, ti in zip(outs, t))
    assert er.complement_power_head_accuracy(pool, idx[:1], 4) == int(solved)
    with pytest.raises(ValueError, match="idx"):
        er.complement_power_head_accuracy(pool, idx[:, :2], 2)
