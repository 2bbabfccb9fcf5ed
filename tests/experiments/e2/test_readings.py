"""E2 readings (chapter 7): pools and hard test triples (disjointness, defining properties),
pool-table heads, the pre-registered rule and its verdicts, and the readings' runner."""

import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch

from companion.book import seed_everything
from companion.bounds.codes import paley_hadamard_code
from companion.core.task import min_ip_targets, token_pool
from companion.experiments.e2 import pools as dev
from companion.experiments.e2 import readings as er
from companion.experiments.e2 import rule, splits
from companion.experiments.e2 import verdicts as rv
from companion.experiments.e2.data import pool_inputs
from companion.experiments.heads import pool_kernel_heads, pool_softmax_heads


@pytest.fixture(autouse=True)
def _one_thread():
    seed_everything(0, threads=1)


def _gram_of(pool, idx):
    s = pool[idx]
    return np.einsum("sim,sjm->sij", s, s)


def test_multiset_codes_ignore_order_and_separate_different_multisets():
    idx = np.array([[0, 1, 2], [2, 0, 1], [1, 1, 2], [1, 2, 2]])
    codes = dev.multiset_codes(idx, 5)
    assert codes[0] == codes[1] and len(set(codes.tolist())) == 3


@pytest.mark.parametrize("name", ["uniform", "gap1", "gap2", "tight", "partner"])
def test_shared_pool_train_and_test_share_no_sequence(name):
    d = splits.shared_pool_split(10, 120, 2000, 300, train_mix={"uniform": 0.5, name: 0.5},
                              test_distributions=(name, "uniform"), seed=2)
    train = set(dev.multiset_codes(d.train_idx, 120).tolist())
    for test_name, idx in d.test_idx.items():
        codes = dev.multiset_codes(idx, 120)
        assert train.isdisjoint(codes.tolist()), test_name
        assert len(set(codes.tolist())) == len(codes)  # distinct test sequences
        assert idx.min() >= 0 and idx.max() < 120
    assert d.train_idx.shape == (2000, 3)


def test_held_out_is_a_function_of_the_multiset_with_the_right_rate():
    codes = np.arange(200_000)
    side = splits.held_out(codes, 0.3, seed=5)
    assert abs(side.mean() - 0.3) < 0.01
    np.testing.assert_array_equal(side, splits.held_out(codes, 0.3, seed=5))
    assert (side != splits.held_out(codes, 0.3, seed=6)).any()


def test_gap_and_tight_triples_have_their_defining_property():
    pool = token_pool(12, 300, 1)
    gram = dev.pool_gram(pool)
    rng = np.random.default_rng(0)
    for gap in (1, 2, 3):
        idx = dev.gap_triples(gram, 400, rng, gap)
        gaps = dev.query_gaps(pool[idx])
        assert (gaps == gap).any(axis=1).all()
        assert (idx[:, 0] != idx[:, 1]).all() and (idx[:, 1] != idx[:, 2]).all()
    idx = dev.tight_triples(gram, 400, rng)
    g = _gram_of(pool, idx)
    cross = np.stack([g[:, 0, 1], g[:, 0, 2], g[:, 1, 2]], 1)
    assert (cross.max(1) - cross.min(1) == 1).all()
    assert ((dev.query_gaps(pool[idx]) == 1).sum(1) >= 2).all()
    # uniform triples are a different distribution: many queries face a gap >= 2
    u = dev.query_gaps(pool[dev.uniform_triples(300, 400, rng)])
    assert (u >= 2).mean() > 0.2


def test_partner_triples_put_a_low_overlap_partner_against_a_worse_key():
    pool = token_pool(12, 400, 3)
    gram = dev.pool_gram(pool)
    part = dev.partners(gram, 4)
    idx = dev.partner_triples(gram, 300, np.random.default_rng(1), k=4, min_gap=2)
    for row in idx:
        ok = False
        for q in range(3):
            x = row[q]
            others = [row[j] for j in range(3) if j != q]
            for z, w in (others, others[::-1]):
                if z in part[x] and gram[x, w] - gram[x, z] >= 2:
                    ok = True
        assert ok


def test_witness_triples_hold_a_query_its_complement_and_a_worse_key():
    pool = paley_hadamard_code(11)
    comp = dev.complement_index(pool)
    assert (comp >= 0).all() and (comp[comp] == np.arange(len(pool))).all()
    idx = dev.witness_triples(pool, 500, np.random.default_rng(0), pure_fraction=0.2)
    mixed = 0
    for row in idx:
        a, b, c = sorted(row.tolist())
        if len({a, b, c}) == 3:
            assert any(comp[u] == v for u in row for v in row if u != v)
            mixed += 1
        else:
            assert len({a, b, c}) == 2  # pure sequences (x, y, y)
    assert mixed == 400
    t = min_ip_targets(pool[idx])
    assert (t >= 0).all()


def test_complement_closed_disjoint_pools():
    d = splits.disjoint_pool_split(10, 400, 0.7, 500, 200,
                                   test_distributions=("uniform", "witness"), seed=1)
    tr = {tuple(t) for t in d.train_pool}
    te = {tuple(t) for t in d.test_pool}
    assert tr.isdisjoint(te) and len(tr) + len(te) == 400
    assert {tuple(1 - np.array(t)) for t in tr} == tr  # closed under complement
    assert {tuple(1 - np.array(t)) for t in te} == te


def test_pool_table_heads_shapes_masking_and_nonnegative_kernel():
    pool = token_pool(8, 40, 0)
    idx = dev.uniform_triples(40, 30, np.random.default_rng(0))
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
    idx = dev.uniform_triples(40, 50, np.random.default_rng(1))
    heads = pool_kernel_heads(40, [4, 4], [0, 1], "overlap")
    out = heads(pool_inputs(pool, idx)).detach().numpy().reshape(2, -1, 3)
    g = _gram_of(pool, idx)
    assert (out >= g.min(-1)[None] - 1e-4).all() and (out <= g.max(-1)[None] + 1e-4).all()


def test_model_in_a_stack_equals_the_model_alone():
    pool = token_pool(8, 30, 0)
    inputs = pool_inputs(pool, dev.uniform_triples(30, 20, np.random.default_rng(0)))
    alone = pool_kernel_heads(30, [4], [7], "learned")(inputs)
    stacked = pool_kernel_heads(30, [2, 4, 16], [0, 7, 1], "learned")(inputs)
    torch.testing.assert_close(stacked[1], alone[0], rtol=1e-5, atol=1e-5)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="readout"):
        pool_kernel_heads(10, [1], [0], "free")
    with pytest.raises(ValueError, match="distribution"):
        splits.shared_pool_split(8, 50, 10, 10, train_mix={"hard": 1.0})
    with pytest.raises(ValueError, match="name"):
        dev.draw_triples("hard", token_pool(6, 10, 0), 5, np.random.default_rng(0))
    with pytest.raises(ValueError, match="train_fraction"):
        splits.disjoint_pool_split(8, 50, 1.5, 10, 10)
    with pytest.raises(ValueError, match="ranks"):
        rule.curve_rule([2, 1], [[0.5], [0.6]])
    with pytest.raises(ValueError, match="one row per rank"):
        rule.curve_rule([1, 2], [[0.5]])
    with pytest.raises(ValueError, match="test_fraction"):
        splits.shared_pool_split(8, 50, 10, 10, test_fraction=1.0)


def test_curve_rule_stay_above_width_and_limit():
    ranks = [1, 2, 4, 8, 12, 16, 32]
    acc = [[0.0, 0.0], [0.1, 0.1], [0.3, 0.3], [0.45, 0.4], [0.92, 0.9], [0.95, 0.97],
           [1.0, 1.0]]
    train = [[0.1, 0.1], [0.2, 0.2], [0.4, 0.4], [0.5, 0.5], [0.95, 0.95], [1, 1], [1, 1]]
    out = rule.curve_rule(ranks, acc, train)
    assert out["r_star"] == 16 and out["r_star_refined"] == 12 and out["r50"] == 8
    assert out["width"] == pytest.approx(np.log2(12 / 8)) and out["sharp"]
    assert out["limit"] == "rank" and out["r_minus"] == 8 and out["capacity_share"] > 0.5
    # a dip after the first crossing moves r_star up (stay-above), r_first keeps the crossing
    dip = [[0.1]] * 2 + [[0.95], [0.6], [0.7], [0.95], [0.96]]
    out = rule.curve_rule(ranks, dip)
    assert out["r_first"] == 4 and out["r_star"] == 16 and not out["sharp"]
    # a dip below the low level does not manufacture sharpness (running maximum)
    dip = [[0.1], [0.2], [0.7], [0.2], [0.3], [0.95], [1.0]]
    out = rule.curve_rule(ranks, dip)
    assert out["r_star"] == 16 and out["r50"] == 2 and not out["sharp"]
    # no low regime: not sharp
    assert not rule.curve_rule([1, 2, 4], [[0.7], [0.8], [0.95]])["sharp"]
    # generalisation-limited: fits training, fails the test
    out = rule.curve_rule([1, 2], [[0.5], [0.6]], [[0.95], [0.99]])
    assert out["r_star"] is None and out["limit"] == "generalisation"


def test_verdicts():
    def size(r_star, sharp=True, dense=True):
        return {"rule": {"r_star": r_star, "sharp": sharp},
                "dense": {"all_exact": dense}}

    assert rule.verdict([size(8), size(16), size(64)])["verdict"] == "reproduced"
    assert rule.verdict([size(4), size(8), size(32)])["verdict"] == "reproduced with our sizes"
    assert rule.verdict([size(8), size(8), size(16)])["verdict"] == "differs"
    assert "sharp" in rule.verdict([size(8, False), size(16), size(64)])["reason"]
    assert "dense" in rule.verdict([size(8), size(16, dense=False), size(64)])["reason"]
    assert "only 2" in rule.verdict([size(None), size(16), size(64)])["reason"]
    assert rule.dense_exact([1.0, 0.995, 0.98]) == {"exact": 2, "perfect": 1, "seeds": 3,
                                                    "all_exact": False}


# --------------------------------------------------------------------------- the readings


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
            train = set(dev.multiset_codes(idx, p).tolist())
            assert train.isdisjoint(dev.multiset_codes(eidx, p).tolist()), key
    if name == "X":  # disjoint tokens
        test_pool = data["evals"]["test/uniform"][0]
        assert {tuple(t) for t in pool}.isdisjoint({tuple(t) for t in test_pool})
    else:
        comp = dev.complement_index(pool)
        assert (comp >= 0).all()  # closed under complement: witness triples exist


def test_a_smoke_reading_runs_resumes_and_is_judged(tmp_path):
    cfg = er.READINGS_SMOKE["S-code"]
    path = er.reading_path(tmp_path, "S-code", "smoke")
    res = er.run_reading(cfg, out=path)
    units = {u.key for u in er.reading_units(cfg)}
    assert len(units) == 2 * 2 * len(cfg.sizes)  # readouts x (heads, dense) x sizes
    again = er.load_reading(path)
    assert again == res  # resumed from the file, nothing recomputed
    e = res["sizes"]["m8-P14"]["overlap"]
    assert np.shape(e["heads"]["accuracy"]["test/uniform"]) == (3, 2)
    assert np.shape(e["dense"]["accuracy"]["test/witness"]) == (2,)
    judged = rv.judge_reading(res)
    assert set(judged) == {"learned", "overlap"}
    summary = rv.e2_summary({"S-code": res})
    line = summary["readings"]["S-code"]["by_readout"]["overlap"]["uniform"]
    assert line["verdict"] in ("reproduced", "reproduced with our sizes", "differs")
    assert line["per_size"][0]["seeds"] == 2 and summary["paper_transitions"] == [8, 16, 64]


def test_a_rank_one_overlap_head_cannot_solve_witness_triples():
    # rank 1 weights depend on the key only, so on (x, x-bar, y) sequences the three
    # queries cannot all pick their own minimum: the low regime the rule needs exists
    cfg = er.ReadingConfig(sizes=((12, 22),), ranks=(1,), rank_groups=((1,),), seeds=(0,),
                           readouts=("overlap",), n_train=300, n_test=200, steps=150)
    out = er.reading_unit(cfg, 0, "overlap", "heads")
    assert out["accuracy"]["test/witness"][0][0] < 0.5


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


# --------------------------------------------------------------------------- committed runs

RESULTS = Path(__file__).resolve().parents[3] / "results"


def test_the_committed_summary_is_what_the_rule_makes_of_the_committed_runs():
    from companion.experiments.e2.protocols import load_e2_protocols

    readings = {name: er.load_reading(er.reading_path(RESULTS, name, "full"))
                for name in er.READINGS}
    assert all(r is not None for r in readings.values()), "a full reading is incomplete"
    for name, res in readings.items():  # the stored runs are the pre-registered configs
        assert res["config"] == er.config_dict(er.READINGS_FULL[name]), name
    again = rv.e2_summary(readings, load_e2_protocols(RESULTS / "e2_protocols"))
    stored = json.loads((RESULTS / "e2_summary.json").read_text())
    assert json.loads(json.dumps(again)) == stored
    # what the issue asks of it: >= 2 new protocols x >= 3 sizes, each size with its r*,
    # the threshold, the sharpness, and dense exact seeds / seeds
    assert len(stored["readings"]) >= 2
    for r in stored["readings"].values():
        assert len(r["sizes"]) >= 3 and r["threshold"] == 0.9
        for tests in r["by_readout"].values():
            for line in tests["uniform"]["per_size"]:
                assert {"r_star", "sharp", "width_doublings", "dense_exact_seeds",
                        "seeds"} <= set(line) and line["seeds"] == 5


def test_the_ledger_carries_the_headline_verdict():
    import sys

    sys.path.insert(0, str(RESULTS.parent / "book" / "_ext"))
    import claims_ledger

    stored = json.loads((RESULTS / "e2_summary.json").read_text())
    h = stored["headline"]
    verdict = stored["readings"][h["reading"]]["by_readout"][h["readout"]][h["test"]]
    rows = claims_ledger.load_claims(RESULTS.parent)
    row = next(r for r in rows if r["id"] == "e2-transition")
    assert row["verdict"] == verdict["verdict"]
    stars = " → ".join("none" if s["r_star"] is None else str(s["r_star"])
                       for s in verdict["per_size"])
    assert stars in row["ours"], (stars, row["ours"])


def test_complement_power_heads_have_the_stated_rank_and_nonnegative_weights():
    from companion.core.task import all_tokens

    cube = all_tokens(6)
    for k in range(4):
        weight = (2 * (cube @ (1 - cube).T) + 1) ** k
        assert (weight > 0).all()
        assert np.linalg.matrix_rank(weight.astype(np.float64)) == er.complement_power_rank(6, k)


def test_complement_power_heads_climb_with_degree_and_are_exact_counts():
    pool = dev.complement_closed_pool(8, 40, 0)
    idx = dev.witness_triples(pool, 300, np.random.default_rng(0))
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
