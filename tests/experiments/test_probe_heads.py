"""Stacked signed and multi-head table heads (companion.probe_heads) and the exact verifier."""

from fractions import Fraction

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from companion.book import seed_everything  # noqa: E402
from companion.core.exact import (  # noqa: E402
    HeadTables,
    exact_table_max_error,
    exact_table_outputs,
)
from companion.core.task import query_target, token_pool  # noqa: E402
from companion.experiments.engine import ModelStack, train_batched  # noqa: E402
from companion.experiments.probe_heads import TableMultiHeads, TableSignedHeads  # noqa: E402
from companion.experiments.table_heads import TableKernelHeads  # noqa: E402


@pytest.fixture(autouse=True)
def _one_thread():
    seed_everything(0, threads=1)


def problem(num_tokens=12, count=200, m=6, seed=0):
    tokens = token_pool(m, num_tokens, seed)
    ids = np.random.default_rng(seed).integers(0, num_tokens, size=(count, 3))
    return torch.tensor(ids), torch.tensor(query_target(tokens[ids]), dtype=torch.float32)


# ------------------------------------------------------------------ shapes and init


@pytest.mark.parametrize("parametrisation", ["gexp", "raw"])
def test_signed_heads_start_as_the_nka_heads_of_the_same_seed(parametrisation):
    ids, _ = problem()
    nka = TableKernelHeads([3, 5], [0, 7], 12)
    signed = TableSignedHeads([3, 5], [0, 7], 12, parametrisation=parametrisation)
    with torch.no_grad():
        assert signed(ids).shape == (2, len(ids))
        assert torch.allclose(nka(ids), signed(ids), atol=1e-5)


def test_one_head_multihead_is_the_nka_head():
    ids, _ = problem()
    nka = TableKernelHeads([3, 5], [0, 7], 12)
    multi = TableMultiHeads([1, 1], [3, 5], [0, 7], 12)
    with torch.no_grad():
        assert torch.allclose(nka(ids), multi(ids), atol=1e-6)


def test_multihead_output_is_the_sum_of_head_outputs_plus_bias():
    ids, _ = problem()
    multi = TableMultiHeads([3, 2], [2, 4], [0, 1], 12)
    with torch.no_grad():
        multi.b.normal_()
        heads = multi.head_outputs(ids)
        assert heads.shape == (2, 3, len(ids))
        assert torch.all(heads[1, 2] == 0)  # model 1 has 2 heads: the third is padding
        expect = heads.sum(1) + multi.b[:, ids[:, 0]]
        assert torch.allclose(multi(ids), expect, atol=1e-6)


# ------------------------------------------------------------------ padding masks


@pytest.mark.parametrize("cls", ["signed", "multi"])
def test_padding_changes_nothing_but_rounding(cls):
    ids, _ = problem()
    if cls == "signed":
        alone = TableSignedHeads([3], [4], 12)
        padded = TableSignedHeads([3, 6], [4, 5], 12, pad_to=8)
    else:
        alone = TableMultiHeads([2], [3], [4], 12)
        padded = TableMultiHeads([2, 4], [3, 6], [4, 5], 12, pad_to=8, pad_heads=5)
    with torch.no_grad():
        assert torch.allclose(alone(ids)[0], padded(ids)[0], atol=1e-5)


@pytest.mark.parametrize("cls", ["signed", "multi"])
def test_padded_columns_and_heads_get_no_gradient(cls):
    ids, y = problem()
    if cls == "signed":
        model = TableSignedHeads([2, 5], [0, 1], 12, pad_to=6, parametrisation="raw")
    else:
        model = TableMultiHeads([1, 3], [2, 5], [0, 1], 12, pad_to=6)
    ((model(ids) - y) ** 2).sum().backward()
    if cls == "signed":
        assert torch.all(model.q.grad[0, :, 2:] == 0) and torch.all(model.k.grad[0, ..., 2:] == 0)
        assert model.q.grad[0, :, :2].abs().sum() > 0
    else:
        assert torch.all(model.q.grad[0, :, :, 2:] == 0)
        assert torch.all(model.q.grad[0, 1:] == 0) and torch.all(model.v.grad[0, 1:] == 0)
        assert torch.all(model.a.grad[0, 1:] == 0)
        assert model.a.grad[1, 2].abs().sum() > 0


@pytest.mark.parametrize("cls", ["signed", "multi"])
def test_stacked_training_equals_training_alone(cls):
    ids, y = problem()

    def make(ranks, seeds):
        if cls == "signed":
            return TableSignedHeads(ranks, seeds, 12, pad_to=6)
        return TableMultiHeads([2] * len(ranks), ranks, seeds, 12, pad_to=6)

    res = train_batched(ModelStack([make([3, 6], [0, 1])]), ids, y, steps=40, lr=3e-2,
                        surrogate_steps=20)
    alone = train_batched(make([6], [1]), ids, y, steps=40, lr=3e-2, surrogate_steps=20)
    assert torch.allclose(res.best_max_error[1], alone.best_max_error[0], atol=1e-4)


# ------------------------------------------------------------------ bad input


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="same length"):
        TableSignedHeads([2, 3], [0], 12)
    with pytest.raises(ValueError, match="parametrisation"):
        TableSignedHeads([2], [0], 12, parametrisation="tanh")
    with pytest.raises(ValueError, match="gain_scale"):
        TableSignedHeads([2], [0], 12, gain_scale=0)
    with pytest.raises(ValueError, match="same length"):
        TableMultiHeads([2], [3, 4], [0, 1], 12)
    with pytest.raises(ValueError, match="pad_heads"):
        TableMultiHeads([3], [2], [0], 12, pad_heads=2)
    model = TableSignedHeads([2], [0], 12)
    with pytest.raises(TypeError, match="int64"):
        model(torch.zeros(4, 3))
    with pytest.raises(ValueError, match=r"\(N, 3\)"):
        model(torch.zeros(4, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="lie in"):
        model(torch.full((4, 3), 12, dtype=torch.long))
    with pytest.raises(ValueError, match="j must"):
        model.export(1)


# ------------------------------------------------------------------ exact verifier


def dyadic_min_ip_tables(m=2):
    """An exact NKA head on every length-3 input in {0,1}^m with dyadic tables: one-hot
    query features, key weights 4^-<x,z> (0 at the query position), values z, readout x."""
    T = 2 ** m
    toks = (np.arange(T)[:, None] >> np.arange(m)) & 1
    fq = np.eye(T)
    fk = np.zeros((3, T, T))
    fk[1:] = (4.0 ** -(toks @ toks.T)).T  # fk[p, z, x] = 4^-<x, z>
    v = np.broadcast_to(toks.astype(float), (3, T, m)).copy()
    tables = HeadTables(heads=((fq, fk, v, toks.astype(float)),), bias=np.zeros(T),
                        positional=True, query_position=0)
    ids = np.stack(np.meshgrid(*[np.arange(T)] * 3, indexing="ij"), -1).reshape(-1, 3)
    ov = toks @ toks.T
    targets = np.minimum(ov[ids[:, 0], ids[:, 1]], ov[ids[:, 0], ids[:, 2]])
    return tables, ids, targets, toks


def test_exact_verifier_matches_hand_computation():
    tables, ids, targets, toks = dyadic_min_ip_tables()
    out, dens = exact_table_outputs(tables, ids)
    # query 11, keys 00 (overlap 0) and 11 (overlap 2): (0 * 1 + 2 / 16) / (1 + 1/16) = 2/17
    row = int(np.flatnonzero((ids == [3, 0, 3]).all(1))[0])
    assert out[row] == Fraction(2, 17)
    assert dens[row] == (Fraction(17, 16),)
    err = exact_table_max_error(tables, ids, targets)
    assert err == max(Fraction(g, 4 ** g + 1) for g in (1, 2)) == Fraction(1, 5)


def test_exact_verifier_rejects_a_doctored_head():
    tables, ids, targets, _ = dyadic_min_ip_tables()
    fq, fk, v, a = tables.heads[0]
    fk = fk.copy()
    fk[1:, 3, 3] = 1.0  # query 11 now weighs key 11 like key 00: no gap domination there
    bad = HeadTables(heads=((fq, fk, v, a),), bias=tables.bias, positional=True,
                     query_position=0)
    assert exact_table_max_error(bad, ids, targets) == 1  # (11, 00, 11): (0 + 2) / 2 vs 0
    zero = HeadTables(heads=((np.zeros_like(fq), fk, v, a),), bias=tables.bias,
                      positional=True, query_position=0)
    with pytest.raises(ValueError, match="vanishing denominator"):
        exact_table_outputs(zero, ids)


def test_exact_verifier_agrees_with_a_float_forward_pass():
    ids, y = problem()
    model = TableMultiHeads([2], [3], [5], 12)
    res = train_batched(model, ids, y, steps=30, lr=3e-2)
    out, _ = exact_table_outputs(res.model.export(0), ids.numpy())
    with torch.no_grad():
        ref = res.model.double()(ids)[0].numpy()
    assert np.allclose([float(v) for v in out], ref, atol=1e-9)
    signed = TableSignedHeads([4], [3], 12)
    out, _ = exact_table_outputs(signed.export(0), ids.numpy())
    with torch.no_grad():
        ref = signed.double()(ids)[0].numpy()
    assert np.allclose([float(v) for v in out], ref, atol=1e-9)


def test_head_tables_reject_mismatched_shapes():
    tables, *_ = dyadic_min_ip_tables()
    fq, fk, v, a = tables.heads[0]
    with pytest.raises(ValueError, match="fit together"):
        HeadTables(heads=((fq, fk, v, a[:, :1]),), bias=tables.bias, positional=True,
                   query_position=0)
    with pytest.raises(TypeError, match="heads must be a non-empty"):
        HeadTables(heads=(), bias=tables.bias, positional=True, query_position=0)
    with pytest.raises(ValueError, match="finite"):
        HeadTables(heads=((fq * np.nan, fk, v, a),), bias=tables.bias, positional=True,
                   query_position=0)


def test_sign_inits_start_with_negative_weights():
    cols = TableSignedHeads([4, 3], [0, 1], 12, sign_init="columns")
    fq, fk = cols.features()
    assert torch.all(fq[0, :, :2] > 0) and torch.all(fq[0, :, 2:4] < 0)  # K_plus - K_minus
    assert torch.all(fq[1, :, :2] > 0) and torch.all(fq[1, :, 2] < 0) and torch.all(fk > 0 - 1e-9)
    sym = TableSignedHeads([4], [0], 12, parametrisation="raw", sign_init="symmetric")
    fq, _ = sym.features()
    assert (fq < 0).any() and (fq > 0).any()
    with pytest.raises(ValueError, match="needs parametrisation"):
        TableSignedHeads([4], [0], 12, sign_init="symmetric")
    with pytest.raises(ValueError, match="sign_init"):
        TableSignedHeads([4], [0], 12, sign_init="negative")
