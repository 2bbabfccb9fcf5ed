"""Chapter 9's maps: each map's defining property, the table heads that train them, the exact
LP of the fixed maps (both verdicts, on a small witness family) and the sweep."""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np
import pytest
import torch

from companion.bounds.codes import paley_subset
from companion.bounds.witness import witness_family
from companion.core.attention import softmax_attention
from companion.core.constructions import softmax_min_ip_head
from companion.experiments import maps as M
from companion.experiments.heads import table_kernel_heads
from companion.experiments.sweep import sweep_records
from companion.sandwich.windows import Window

U = np.random.default_rng(0).normal(size=(7, 5)) * 2


@pytest.fixture(scope="module")
def small():
    """A witness family small enough for the exact LP in a second (11-bit Paley words)."""
    return witness_family(paley_subset(11, 3, 11), 3, Fraction(1, 2))


def test_elu1_is_u_plus_one_above_zero_and_exp_below():
    u = np.array([-3.0, -0.5, 0.0, 0.25, 4.0])
    assert np.array_equal(M.elu1(u), [math.exp(-3), math.exp(-0.5), 1.0, 1.25, 5.0])
    assert (M.elu1(U) > 0).all()
    assert np.allclose(M.elu1(U), torch.nn.functional.elu(torch.tensor(U)).numpy() + 1)


def test_relu_is_the_positive_part():
    assert np.array_equal(M.relu(np.array([-2.0, 0.0, 3.5])), [0.0, 0.0, 3.5])
    assert np.array_equal(M.relu(U) - M.relu(-U), U)


def test_hedgehog_halves_are_distributions_and_negation_swaps_them():
    h = M.hedgehog(U)
    assert h.shape == (7, 10) and (h > 0).all()
    assert np.allclose(h[:, :5].sum(1), 1) and np.allclose(h[:, 5:].sum(1), 1)
    assert np.allclose(M.hedgehog(-U), np.concatenate([h[:, 5:], h[:, :5]], 1))
    assert np.allclose(M.hedgehog(U + 3.0), h)  # softmax ignores a shift


def test_favor_is_an_unbiased_estimate_of_the_softmax_kernel():
    rng = np.random.default_rng(1)
    q, k = np.array([0.3, -0.2, 0.4]), np.array([-0.1, 0.5, 0.2])
    draws = 200_000
    omega = rng.standard_normal((draws, 3))
    # R <favor_i(q), favor_i(k)>: one sample of the estimator per feature
    samples = draws * M.favor(q, omega) * M.favor(k, omega)
    mean, sd = samples.mean(), samples.std() / math.sqrt(draws)
    assert abs(mean - math.exp(q @ k)) < 4 * sd
    assert (M.favor(U[:, :3], omega[:8]) > 0).all()
    with pytest.raises(ValueError, match="omega"):
        M.favor(U, omega)  # k = 5 against 3


def test_taylor_kernel_identity_float_and_exact():
    t = M.taylor(U)
    assert t.shape == (7, 1 + 5 + 25)
    ip = U @ U.T
    assert np.allclose(t @ t.T, 1 + ip + ip**2 / 2)
    # exactly, on the monomials [1, u, vec(u u^T)] with weight 1/2 on the quadratic block
    q, k = [Fraction(1, 3), Fraction(-2), Fraction(5, 7)], [Fraction(3), Fraction(1, 2), 0]
    mono = [lambda u: [Fraction(1)] + u + [a * b for a in u for b in u]][0]
    weights = [1] * 4 + [Fraction(1, 2)] * 9
    lhs = sum(w * a * b for w, a, b in zip(weights, mono(q), mono(k)))
    o = sum(a * b for a, b in zip(q, k))
    assert lhs == 1 + o + o * o / 2
    assert 1 + o + o * o / 2 > 0  # 1 + s + s^2/2 has no real root: inside the paper's class


def test_taylor_kernel_matrix_is_exact_and_the_maps_kernel():
    tokens = np.random.default_rng(2).integers(0, 2, (6, 9))
    K = M._taylor_kernel(tokens, 4, 3)
    assert all(isinstance(v, int) for v in K.ravel())
    P = np.random.default_rng([3, 4, 9]).choice([-1, 1], size=(4, 9))
    t = M.taylor(tokens @ P.T / 2.0)  # u = P x / sqrt(k)
    assert np.allclose(K.astype(float), 2 * 16 * (t @ t.T))
    assert (K > 0).all()


def test_favor_kernel_is_the_exact_kernel_of_the_rounded_features(small):
    tokens = np.asarray(small.tokens)
    fq, fk = M._favor_features(tokens, 16, 0, 1.0)
    (nq, eq), (nk, ek) = M._as_ints(fq), M._as_ints(fk)
    for f, n, e in ((fq, nq, eq), (fk, nk, ek)):  # within half a unit of FAVOR_BITS bits
        step = np.exp2(e)[:, None]
        assert (np.abs(n.astype(float) * step - f) <= step / 2).all()
        assert (n.max(1) >= 2**M.FAVOR_BITS).all() and (n.max(1) < 2**(M.FAVOR_BITS + 1)).all()
    K = M._favor_kernel(tokens, 16, 0, 1.0)
    x, z = 3, 5
    exact = sum(Fraction(int(a)) * int(b) for a, b in zip(nq[x], nk[z])) * 2 ** int(
        ek[z] - ek.min())
    assert K[x, z] == exact
    ref = fq @ fk.T  # the float kernel, up to the rounding (relative ~1e-5 here)
    assert np.allclose(K[x].astype(float) / K[x, 0], ref[x] / ref[x, 0], rtol=1e-4)


@pytest.mark.parametrize("feature", ["elu1", "relu", "hedgehog"])
def test_table_heads_compute_the_maps_and_mask_padding(feature):
    heads = table_kernel_heads([4, 6], [0, 1], 9, feature=feature, pad_to=6)
    fq, fk = heads.features()
    q = heads.q.detach().double().numpy()
    for j, r in enumerate([4, 6]):
        if feature == "hedgehog":
            want = M.hedgehog(q[j, :, :r // 2])
        else:
            want = getattr(M, feature)(q[j, :, :r])
        assert np.allclose(fq[j, :, :r].detach().double().numpy(), want, atol=1e-6)
        assert torch.all(fq[j, :, r:] == 0) and torch.all(fk[j, ..., r:] == 0)
    ids = torch.as_tensor(np.random.default_rng(0).integers(0, 9, (20, 3)))
    assert torch.isfinite(heads(ids)).all()


def test_map_features_are_for_single_table_kernel_heads():
    from companion.experiments.heads import mlp_kernel_heads
    with pytest.raises(ValueError, match="feature"):
        mlp_kernel_heads(4, [2], [0], feature="relu")


def test_exact_lp_finds_the_softmax_head_and_refuses_rank_one(small):
    tokens = np.asarray(small.tokens).astype(object)
    o = tokens @ tokens.T
    K = np.vectorize(lambda v: 4 ** (11 - v), otypes=[object])(o)  # exp(-ln4 <x, z>), scaled
    verdict, decided = M._exact_head(K, small)
    assert verdict == "feasible" and decided == len(set(np.asarray(small.token_ids)[:, 0]))
    ones = np.ones_like(o)  # a constant kernel: rank one, plain averaging
    assert M._exact_head(ones, small)[0] == "infeasible"
    ok, err = M._reproduces_softmax(K, small)
    ref = softmax_attention(softmax_min_ip_head(math.log(4)), small.sequences, small.convention)
    assert ok and err == pytest.approx(np.abs(ref - small.targets).max(), rel=1e-9)
    assert not M._reproduces_softmax(ones, small)[0]


def test_config_checks():
    with pytest.raises(ValueError, match="families"):
        M.MapsConfig(families=("nope",))
    with pytest.raises(ValueError, match="families"):
        M.MapsConfig(families=())
    with pytest.raises(TypeError, match="trained"):
        M.MapsConfig(trained="relu")
    with pytest.raises(ValueError, match="dims"):
        M.MapsConfig(dims=(1,))
    with pytest.raises(ValueError, match="taylor_widths"):
        M.MapsConfig(taylor_widths=(25,))


WINDOWS = [Window("paley_rows_23", "rows", f, 19 if f == "real" else 23, "", "",
                  19 if f == "real" else 30, "", "") for f in ("real", "nonnegative")]


def test_first_solving_gives_intervals_when_seeds_disagree():
    rows = [{"map": "relu", "family": "paley_rows_23", "rank": r, "seeds": 5, "solved": s,
             "undecided": 0} for r, s in ((8, 0), (32, 2), (64, 5))]
    rows += [{"map": "taylor", "family": "paley_rows_23", "rank": 7, "seeds": 5, "solved": 0,
              "undecided": 0}]
    table = M.first_solving(rows, WINDOWS)
    cells = [dict(zip(table.columns, v)) for v in table.values]
    assert cells[0]["first solving dimension"] == "[32, 64]"
    assert cells[0]["ratio (first some-seed dim / minimum)"] == "[1.1, 1.4]"
    assert cells[1]["first solving dimension"] == "none <= 7"
    with pytest.raises(ValueError, match="rows"):
        M.first_solving([{"map": "x"}], WINDOWS)


def test_smoke_sweep_resumes_and_summarises(tmp_path):
    cfg = dataclasses.replace(M.MAPS_SMOKE, steps=5, surrogate_steps=2)
    out = tmp_path / "maps.json"
    res = M.run_maps_sweep(cfg, out=out)
    assert set(res["units"]) == {"elu1_paley_rows_23_r4", "favor_paley_rows_23_r8_s0",
                                 "taylor_paley_rows_23_k2_s0"}
    again = M.run_maps_sweep(cfg, out=out)  # resumed: nothing re-run
    assert again["units"] == res["units"] == M.load_maps_results(out)["units"]
    rows = {r["map"]: r for r in M.summarise_maps(res)}
    assert rows["taylor"]["rank"] == 7 and rows["favor"]["softmax"] in (0, 1)
    assert rows["elu1"]["solved"] == 0 and "median_max_error" in rows["elu1"]


@pytest.fixture(scope="module")
def committed():
    from pathlib import Path

    from companion.experiments.sweep import config_hash
    from companion.sandwich.windows import sandwich_windows

    root = Path(__file__).resolve().parents[2]
    res = M.load_maps_results(root / "results" / "maps_full.json")
    assert res["config_hash"] == config_hash(M.MAPS_FULL)
    return res, sandwich_windows(root / "results" / "heads")


def test_committed_run_never_solves_below_the_certified_minimum(committed):
    """A map of a feature class that solves below that class's certified lower bound would
    refute Chapter 3's certificates (or the code): this check can fail."""
    res, windows = committed
    lower = {(w.family, w.features): w.lower for w in windows}
    recs = sweep_records(res)
    assert {r["family"] for r in recs} == set(M.FAMILY_ORDER)
    for r in recs:
        if r["verdict"] in ("solved", "feasible"):
            assert r["rank"] >= lower[(r["family"], M.CLASS[r["map"]])], r


def test_committed_fixed_map_verdicts_reproduce_exactly(committed):
    res, _ = committed
    for key in ("taylor_paley_rows_23_k4_s1", "favor_paley_rows_23_r8_s1"):
        stored = res["units"][key]["models"][0]
        kind, dim = stored["map"], int(key.split("_")[-2][1:])
        live = M._exact_unit(M.MAPS_FULL, "paley_rows_23", kind, dim, stored["seed"])
        assert live["models"][0] == stored
