"""E2's one pipeline: the configuration and its presets (protocols, readings, the study's
arms), the data of each design, the one unit function (checkpoint on training error or on
validation, the training subsets it may also score), the runner and loader (resume, sense
checks of stored files), the path rule, the committed files and the hash migration, and
the CLI."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from companion.book import seed_everything
from companion.cli import main
from companion.experiments.e2 import data as e2data
from companion.experiments.e2 import pipeline as pl
from companion.experiments.e2.data import TEST_DISTRIBUTIONS
from companion.experiments.e2.rule import curve_rule
from companion.experiments.sweep import ResultFileError, config_dict, config_hash
from companion.files import atomic_write_json

RESULTS = Path(__file__).resolve().parents[3] / "results"


@pytest.fixture(autouse=True)
def _one_thread():
    seed_everything(0, threads=1)


TINY = pl.protocol(widths=(5,), pool_sizes=(32,), n_train=40, n_test=30, ranks=(1, 4),
                   rank_groups=((1,), (4,)), seeds=(0, 1), hidden=(8,), value_dim=4, steps=15)
STUDY_TINY = pl.study_config("A", "mlp", (6,), ranks=(2, 8), rank_groups=((2, 8),),
                             seeds=(0, 1), splits=(0,), n_train=300, n_test=100, steps=40,
                             eval_every=10, hidden=(8,), lr=0.03)


# --------------------------------------------------------------------------- configurations


@pytest.mark.parametrize("change, exc, name", [
    ({"design": "Y"}, ValueError, "design"),
    ({"design": "S-code", "sizes": ((12, 24),)}, ValueError, "P = 2"),
    ({"sizes": (12, 22)}, TypeError, "sizes"),
    ({"sizes": ((5, 40),)}, ValueError, "sizes"),  # more than 2**5 tokens of width 5
    ({"sizes": ((5, 6),)}, ValueError, "sizes"),  # a side of fewer than 3 tokens
    ({"ranks": (1, 2), "rank_groups": ((1,),)}, ValueError, "rank_groups"),
    ({"ranks": (0, 1), "rank_groups": ((0, 1),)}, ValueError, "ranks"),
    ({"tests": ("nearly",)}, ValueError, "tests"),
    ({"train_fraction": 1.2}, ValueError, "train_fraction"),
    ({"train_fraction": "0.5"}, TypeError, "train_fraction"),
    ({"threshold": 0.0}, ValueError, "threshold"),
    ({"train_mix": (("uniform", 1.5),)}, ValueError, "train_mix"),
    ({"readouts": ("learned", "overlap")}, ValueError, "readouts"),  # a protocol: one
    ({"dense_lr": (("learned", 0.1),)}, ValueError, "dense_lr"),  # trained with the heads
    ({"eval_every": 10}, ValueError, "eval_every"),  # no validation sets outside the study
    ({"splits": (0, 1)}, ValueError, "splits"),
    ({"fit_subsets": ("witness",)}, ValueError, "fit_subsets"),
    ({"skip": 1}, TypeError, "skip"),
])
def test_the_configuration_refuses_bad_values_naming_them(change, exc, name):
    with pytest.raises(exc, match=name):
        dataclasses.replace(TINY, **change)


def test_the_study_arms_are_presets_with_their_own_rules():
    with pytest.raises(ValueError, match="kind"):
        pl.study_config("B", "mlp")
    with pytest.raises(ValueError, match="arm"):
        pl.study_config("C", "mlp")
    with pytest.raises(ValueError, match="sizes"):
        pl.study_config("B", "overlap", (12,))  # not a power of two
    with pytest.raises(ValueError, match="sizes"):
        pl.study_config("A", "mlp", (18,))  # the cube of 2**18 tokens is too big
    with pytest.raises(ValueError, match="sizes"):
        pl.study_config("A", "mlp", (5,))
    with pytest.raises(ValueError, match="tests"):  # the complement test is arm A's
        pl.study_config("B", "overlap", tests=("uniform", "witness", "complement"))
    with pytest.raises(ValueError, match="eval_every"):
        dataclasses.replace(STUDY_TINY, eval_every=None)
    with pytest.raises(ValueError, match="tests"):
        dataclasses.replace(STUDY_TINY, tests=("uniform",))
    assert [c.kind for c in pl.STUDY.values()] == ["overlap", "learned", "exp-affine", "mlp"]
    b = pl.STUDY["B", "overlap"]
    assert b.sizes == ((8, 14), (16, 30), (32, 62)) and b.dense_lr == (("overlap", 0.01),)
    assert pl.STUDY["A", "exp-affine"].hidden == () and pl.STUDY["A", "mlp"].affine_values


def test_the_presets_are_the_registered_ones():
    for cfg in pl.READINGS_FULL.values():  # the pre-registered full readings
        assert len(cfg.seeds) == 5 and cfg.readouts == ("learned", "overlap")
        assert cfg.n_test == 1000 and len(cfg.sizes) == 3 and cfg.threshold == 0.9
        assert {1, 2, 4, 8, 16, 32, 64, 128} <= set(cfg.ranks)
    assert pl.READINGS_FULL["S-code"].dense_lr == (("learned", 0.1),)
    q = pl.E2_QUICK  # the stored protocols' terms
    assert (q.widths, q.pool_sizes, q.near_tie_fraction, q.kind) == (
        (8, 10, 12), (256, 256, 256), 0.5, "mlp")
    assert pl.protocol(**pl.E2_PROTOCOLS["H_widths_8_10_12"]) == q
    assert pl.protocol(near_tie_fraction=0.0).train_mix == (("uniform", 1.0),)
    cfgs = pl.pilot_configs("A", "mlp")
    assert len(cfgs) == 6 and all(c.pilot and c.ranks == (16, 256) and c.seeds == (0, 1)
                                  and c.splits == (0,) and c.sizes == ((8, 256), (10, 1024))
                                  and c.surrogate_steps == 2000 for c in cfgs)
    assert {(c.lr, c.steps) for c in cfgs} == {(lr, s) for lr in (3e-3, 1e-2, 3e-2)
                                               for s in (2000, 5000)}


# --------------------------------------------------------------------------- data


@pytest.mark.parametrize("name", ["X", "S-code", "S-random"])
def test_reading_data_keeps_train_and_test_apart(name):
    cfg = pl.READINGS_SMOKE[name]
    m, p = cfg.sizes[0]
    data = pl.e2_data(cfg, m, p)
    pool, idx = data["train"]
    assert len(idx) == cfg.n_train and data["val"] == {}
    for key, (epool, eidx) in data["evals"].items():
        assert eidx.min() >= 0 and eidx.max() < len(epool)
        if key.startswith("test/") and name != "X":  # shared pool: no test multiset trained on
            train = set(e2data.multiset_codes(idx, p).tolist())
            assert train.isdisjoint(e2data.multiset_codes(eidx, p).tolist()), key
    if name == "X":  # disjoint tokens
        test_pool = data["evals"]["test/uniform"][0]
        assert {tuple(t) for t in pool}.isdisjoint({tuple(t) for t in test_pool})
    else:
        assert (e2data.complement_index(pool) >= 0).all()  # closed: witness triples exist


def test_the_protocols_data_are_disjoint_token_pools_with_their_tests():
    d = pl.e2_data(TINY, 5, 32)
    pool, idx = d["train"]
    test_pool = d["evals"]["test/uniform"][0]
    assert {tuple(t) for t in pool}.isdisjoint({tuple(t) for t in test_pool})
    assert (d["pool_train"], d["pool_test"]) == (22, 10) and len(idx) == 40
    assert set(d["evals"]) == {"test/uniform", "test/near_tie", "fit/uniform", "fit/near_tie",
                               "fit/all"}
    with pytest.raises(ValueError, match="sizes"):
        pl.e2_data(TINY, 6, 32)
    with pytest.raises(ValueError, match="split"):
        pl.e2_data(TINY, 5, 32, split=3)


# --------------------------------------------------------------------------- the unit


def test_a_protocol_unit_is_the_pipeline_unit_of_its_configuration():
    """A protocol's unit trains heads and dense heads of a width together; each model trains
    as it would alone, so its record equals the per-part units of a reading."""
    g = TINY.rank_groups
    got = pl.train_e2_unit(TINY, 5, 32, 0, "learned", g, True)
    reading = dataclasses.replace(TINY, design="X", sizes=((5, 32),), readouts=("learned",),
                                  train_mix=(("uniform", 1.0),))
    assert got["ranks"] == [1, 4] and np.shape(got["accuracy"]["near_tie"]) == (2, 2)
    assert set(got["transition_r"]) == {"uniform", "near_tie"}
    assert [u.key for u in pl._units(TINY, "cpu")] == ["m5"]  # the stored format
    heads = pl.train_e2_unit(TINY, 5, 32, 0, "learned", g, False)
    dense = pl.train_e2_unit(TINY, 5, 32, 0, "learned", (), True)
    assert got["accuracy"]["uniform"] == heads["accuracy"]["test/uniform"]
    assert got["train_accuracy"] == heads["accuracy"]["fit/all"]
    assert got["dense"]["near_tie"] == dense["accuracy"]["test/near_tie"]
    assert [u.key for u in pl._units(reading, "cpu")] == ["m5-P32/learned/heads",
                                                          "m5-P32/learned/dense"]


def test_a_rank_one_overlap_head_cannot_solve_witness_triples():
    # rank 1 weights depend on the key only, so on (x, x-bar, y) sequences the three
    # queries cannot all pick their own minimum: the low regime the rule needs exists
    cfg = dataclasses.replace(pl.READINGS_FULL["S-code"], sizes=((12, 22),), ranks=(1,),
                              rank_groups=((1,),), seeds=(0,), readouts=("overlap",),
                              dense_lr=(), n_train=300, n_test=200, steps=150)
    out = pl.train_e2_unit(cfg, 12, 22, 0, "overlap", ((1,),), False)
    assert out["accuracy"]["test/witness"][0][0] < 0.5


def test_a_study_unit_keeps_the_best_validation_step_and_reads_test_there():
    out = pl.train_e2_unit(STUDY_TINY, 6, 64, 0, "learned", ((2, 8),), False)
    assert out["eval_steps"] == [0, 10, 20, 30, 40]
    assert [(r["rank"], r["seed"]) for r in out["models"]] == [(2, 0), (2, 1), (8, 0), (8, 1)]
    for rec in out["models"]:
        hist = rec["val_history"]
        best = int(np.argmax(hist))  # earliest maximum
        assert rec["best_step"] == out["eval_steps"][best] and rec["val"] == hist[best]
        assert rec["fit"] == rec["train_history"][best]
        assert set(rec["test"]) == {"uniform", "witness"} and "fit_subsets" not in rec
    assert out["sizes"]["train"] == 300 and out["sizes"]["test/witness"] == 100
    pilot = pl.train_e2_unit(dataclasses.replace(STUDY_TINY, pilot=True), 6, 64, 0, "learned",
                             (), True)
    assert all(rec["test"] == {} and rec["kind"] == "dense" for rec in pilot["models"])


def test_the_study_unit_scores_a_training_subset_when_asked(monkeypatch):
    """Off by default (the stored hashes keep their configurations); "witness" is arm B's
    training multisets holding a complementary pair, scored at the kept checkpoint like the
    held-out witness test (arm A: its near-tie training triples)."""
    from companion.core.task import min_ip_targets

    cfg = pl.study_config("B", "overlap", (8,), ranks=(2,), rank_groups=((2,),), seeds=(0,),
                          splits=(0,), steps=20, eval_every=5)
    assert config_hash(cfg) == config_hash(dataclasses.replace(cfg, fit_subsets=()))
    trained, fit = [], pl.fit_batched
    monkeypatch.setattr(pl, "fit_batched", lambda *a, **k: trained.append(fit(*a, **k))
                        or trained[-1])
    (rec,) = pl.train_e2_unit(cfg, 8, 14, 0, "overlap", ((2,),), False)["models"]
    asked = dataclasses.replace(cfg, fit_subsets=("witness",))
    (again,) = pl.train_e2_unit(asked, 8, 14, 0, "overlap", ((2,),), False)["models"]
    assert {k: v for k, v in again.items() if k != "fit_subsets"} == rec  # nothing else moves
    pool, idx = e2data.study_split("B", 8, 0, 1, 1)["train"]
    pair = idx[[any(a % 7 == b % 7 and a != b for a in r for b in r) for r in idx]]
    with torch.no_grad():
        pred = trained[-1].model(e2data.pool_inputs(pool, pair)).view(-1, len(pair), 3)
    want = (pred - torch.as_tensor(min_ip_targets(pool[pair]))).abs().lt(0.5).all(-1)
    assert 0 < len(pair) < len(idx)
    assert again["fit_subsets"] == {"witness": round(want.double().mean().item(), 6)}
    a = pl.train_e2_unit(dataclasses.replace(STUDY_TINY, fit_subsets=("witness",)), 6, 64, 0,
                         "learned", (), True)
    assert all(0 <= r["fit_subsets"]["witness"] <= 1 for r in a["models"])


def test_exact_sequence_accuracy_needs_all_three_positions():
    targets = torch.tensor([[1, 2, 0], [0, 0, 0]], dtype=torch.float32)
    pred = torch.tensor([[1.4, 2.0, -0.4, 0.0, 0.0, 0.6],  # 2nd sequence: one position off
                         [1.0, 2.0, 0.0, 0.0, 0.0, 0.0]])
    assert pl._accuracy(pred, targets).tolist() == [0.5, 1.0]


# --------------------------------------------------------------------------- runs and files


def test_a_run_is_stored_per_unit_resumed_and_loaded(tmp_path, monkeypatch):
    cfg = pl.READINGS_SMOKE["S-code"]
    path = pl.e2_path(tmp_path, cfg, "smoke")
    assert path == tmp_path / "e2_S-code_smoke.json"
    res = pl.run_e2(cfg, out=path)
    assert len(res["units"]) == 2 * 2 * len(cfg.sizes)  # readouts x (heads, dense) x sizes
    e = res["sizes"]["m8-P14"]["overlap"]
    assert np.shape(e["heads"]["accuracy"]["test/uniform"]) == (3, 2)
    assert np.shape(e["dense"]["accuracy"]["test/witness"]) == (2,)
    assert set(e["heads"]["n_eval"]) == set(e["heads"]["accuracy"])
    assert pl.load_e2(path) == res

    def boom(*args, **kwargs):
        raise AssertionError("a stored unit must not be recomputed")

    monkeypatch.setattr(pl, "train_e2_unit", boom)
    assert pl.run_e2(cfg, out=path) == res  # resumed from the file, nothing recomputed
    with pytest.raises(ValueError, match="configuration"):  # same file, other settings
        pl.run_e2(dataclasses.replace(cfg, steps=61), out=path)


def test_a_protocol_run_is_deterministic_and_summarised_by_the_rule():
    first = pl.run_e2(TINY)
    assert first["widths"] == pl.run_e2(TINY)["widths"]  # deterministic
    entry = first["widths"]["5"]
    for name in TEST_DISTRIBUTIONS:
        acc = np.asarray(entry["accuracy"][name])
        assert acc.shape == (2, 2) and ((0 <= acc) & (acc <= 1)).all()
        assert entry["transition_r"][name] == curve_rule(entry["ranks"], acc)["r_star"]
    longer = pl.run_e2(dataclasses.replace(TINY, steps=150))["widths"]["5"]
    assert np.median(longer["train_max_error"]) < np.median(entry["train_max_error"])


def test_the_path_rule():
    assert pl.e2_path("r", pl.E2_QUICK, "quick") == Path("r/e2_quick.json")
    assert pl.e2_path("r", pl.E2_QUICK, "H_widths_8_10_12") == Path(
        "r/e2_protocols/H_widths_8_10_12.json")
    assert pl.e2_path("r", pl.READINGS_FULL["X"]) == Path("r/e2_X_full.json")
    assert pl.e2_path("r", pl.STUDY["A", "mlp"]) == Path("r/e2_study/e2_study_A_mlp.json")
    assert pl.e2_path("r", pl.pilot_configs("B", "learned")[0]) == Path(
        "r/e2_study/e2_pilot_B_learned_lr0.003_steps2000.json")
    with pytest.raises(ValueError, match="mode"):
        pl.e2_path("r", pl.E2_QUICK, "../escape")


def _stored(tmp_path, change):
    """A committed study file, copied with `change` applied to its data."""
    data = json.loads((RESULTS / "e2_study" / "e2_pilot_B_overlap_lr0.01_steps2000.json")
                      .read_text())
    change(data)
    path = tmp_path / "f.json"
    atomic_write_json(path, data)
    return path


def _unit(data):
    return next(iter(data["units"].values()))


@pytest.mark.parametrize("change, words", [
    (lambda d: _unit(d)["models"][0].update(val=1.5), "field 'val' is 1.5, not a number"),
    (lambda d: _unit(d)["models"][0].update(best_max_error=-0.1), "'best_max_error' is -0.1"),
    (lambda d: _unit(d)["models"][0].update(rank=True), "'rank' is a bool, not an int"),
    (lambda d: _unit(d).update(models=[]), "not a non-empty list of model records"),
    (lambda d: _unit(d)["models"].append(dict(_unit(d)["models"][0])), "the same model"),
    (lambda d: d["units"].update(extra=_unit(d)), "unit 'extra' is not one its configuration"),
    (lambda d: d["config"].update(steps=3000), "does not hash to its config_hash"),
    (lambda d: d["config"].update(design="C"), "not an E2Config"),
    (lambda d: _unit(d)["models"][0]["val_history"].__setitem__(0, "x"), "'val_history' is"),
])
def test_the_loader_checks_every_record_for_sense(tmp_path, change, words):
    path = _stored(tmp_path, change)
    with pytest.raises(ResultFileError, match=words) as info:
        pl.load_e2(path)
    assert "\n" not in str(info.value) and str(path) in str(info.value)


def test_a_resumed_file_is_checked_the_same_way(tmp_path, capsys):
    cfg = pl.E2_SMOKE
    out = tmp_path / "e2_smoke.json"
    pl.run_e2(dataclasses.replace(cfg, steps=2), out=out)
    data = json.loads(out.read_text())
    _unit(data)["accuracy"]["uniform"][0][0] = 2.0
    atomic_write_json(out, data)
    with pytest.raises(ResultFileError, match="'accuracy' is 2.0"):
        pl.run_e2(dataclasses.replace(cfg, steps=2), out=out)


def test_committed_files_load_as_their_presets():
    """Every committed E2 file is one of the registered configurations."""
    quick = pl.load_e2(RESULTS / "e2_quick.json")
    assert quick["config"] == config_dict(pl.E2_QUICK) and "widths" in quick
    for name, cfg in pl.READINGS_FULL.items():
        assert pl.load_e2(pl.e2_path(RESULTS, cfg))["config"] == config_dict(cfg), name
    stored = pl.load_e2_protocols(RESULTS / "e2_protocols")
    assert set(stored) == set(pl.E2_PROTOCOLS)
    for name, changes in pl.E2_PROTOCOLS.items():
        assert stored[name]["config"] == config_dict(pl.protocol(**changes)), name
    files = pl.study_files(RESULTS / "e2_study")
    for key, cfg in pl.STUDY.items():
        assert files["study"][key]["config"] == config_dict(cfg)
        assert [r["config"] for r in files["pilot"][key]] == sorted(
            (config_dict(c) for c in pl.pilot_configs(*key)),
            key=lambda c: pl.e2_path("", pl.E2Config(**c)).name)


def test_older_protocol_files_are_read_with_the_rules_transition_rank():
    """Files written before the rule stored the first rank whose median reached 0.9 (in one
    "sweep" unit); the reader gives the rule's stay-above r* (protocol A at m = 8 dips
    below 0.9 after 32)."""
    path = RESULTS / "e2_protocols" / "A_uniform_training.json"
    raw = json.loads(path.read_text())
    stored_r = raw["units"]["sweep"]["widths"]["8"]["transition_r"]["uniform"]
    e = pl.load_e2(path)["widths"]["8"]
    med = np.median(e["accuracy"]["uniform"], axis=1)
    assert stored_r == e["ranks"][int(np.argmax(med >= 0.9))]  # the old first crossing
    assert e["transition_r"]["uniform"] == curve_rule(e["ranks"], e["accuracy"]["uniform"])[
        "r_star"] != stored_r


def test_rerun_of_a_stored_protocol_subset_matches():
    """Re-train two heads (r = 1, 2) and the dense head of one seed at m = 8 of the stored
    quick-mode protocol: each model trains as it did inside the full stack, so the accuracies
    match the committed file."""
    stored = pl.load_e2_protocols(RESULTS / "e2_protocols")["H_widths_8_10_12"]
    quick = pl.E2Config(**stored["config"])
    assert quick == pl.E2_QUICK  # the book's quick mode is this protocol
    seed, ranks = 1, (1, 2)
    sub = dataclasses.replace(quick, sizes=((8, 256),), ranks=ranks, rank_groups=(ranks,),
                              seeds=(seed,))
    got, want = pl.run_e2(sub)["widths"]["8"], stored["widths"]["8"]
    s = quick.seeds.index(seed)
    for name in TEST_DISTRIBUTIONS:
        for i, r in enumerate(ranks):
            j = quick.ranks.index(r)
            assert got["accuracy"][name][i][0] == pytest.approx(want["accuracy"][name][j][s],
                                                                abs=2e-3)
        assert got["dense"][name][0] == pytest.approx(want["dense"][name][s], abs=2e-3)


#: The one migration of the committed E2 files' configurations (issue 37): their earlier
#: hash (ReadingConfig, the protocols' E2Config, StudyConfig) -> the one E2Config's.
MIGRATED = json.loads((Path(__file__).parent / "e2_hash_migration.json").read_text())


def _earlier(c: dict) -> dict:
    """A configuration in the form its file was first written in (the three classes)."""
    if c["design"] == "tokens":
        return {"data_seed": c["splits"][0], "near_tie_fraction": dict(c["train_mix"]).get(
                    "near_tie", 0.0), "pool_sizes": [p for _, p in c["sizes"]],
                "readout": c["readouts"][0], "widths": [m for m, _ in c["sizes"]],
                **{k: c[k] for k in ("encoding", "feature", "final_lr_fraction", "hidden", "lr",
                                     "n_test", "n_train", "rank_groups", "ranks", "seeds",
                                     "skip", "steps", "threshold", "train_fraction",
                                     "value_dim")}}
    if c["design"] in pl.READINGS:
        return {"data_seed": c["splits"][0], "reading": c["design"],
                "dense_learned_lr": dict(c["dense_lr"]).get("learned"),
                **{k: c[k] for k in ("final_lr_fraction", "lr", "n_test", "n_train",
                                     "rank_groups", "ranks", "readouts", "seeds", "sizes",
                                     "steps", "tests", "threshold", "train_fraction",
                                     "train_mix", "value_dim")}}
    kind = pl.E2Config(**c).kind
    return {"arm": c["design"], "kind": kind, "sizes": [m for m, _ in c["sizes"]],
            "dense_lr": c["dense_lr"][0][1] if c["dense_lr"] else None, "n_eval": c["n_test"],
            "hidden": c["hidden"] if kind == "mlp" else [64],
            **{k: c[k] for k in ("eval_every", "final_lr_fraction", "lr", "n_train", "pilot",
                                 "rank_groups", "ranks", "seeds", "splits", "steps",
                                 "surrogate_steps", "value_dim")}}


def test_the_hash_migration_maps_old_and_new_hashes_one_to_one():
    files = [p for p in sorted(RESULTS.glob("**/e2_*.json")) + sorted(
        (RESULTS / "e2_protocols").glob("*.json"))
        if "summary" not in p.name and "decisive" not in p.name]  # decisive: born migrated
    assert len(files) == 38 and len(set(MIGRATED.values())) == len(MIGRATED) == 37
    seen = set()
    for path in files:
        data = json.loads(path.read_text())
        old = config_hash(_earlier(data["config"]))
        assert MIGRATED[old] == data["config_hash"] == config_hash(data["config"]), path
        seen.add(old)
    assert seen == set(MIGRATED)  # every entry is a committed file's
    summary = json.loads((RESULTS / "e2_study" / "e2_study_summary.json").read_text())
    hashes = {f["config_hash"] for k in summary["arms"].values() for t in k.values()
              for f in t.values()}
    assert hashes <= set(MIGRATED.values())


# --------------------------------------------------------------------------- the CLI


def _records(path):
    units = json.loads(path.read_text())["units"]
    return {k: {f: v for f, v in u.items() if f != "wall_time"} for k, u in units.items()}


def test_cli_runs_into_a_folder_and_refuses_what_it_cannot_do(tmp_path, capsys):
    assert main(["e2", "--smoke", "--reading", "S-code", "--out", str(tmp_path),
                 "--no-progress"]) == 0
    assert (tmp_path / "e2_S-code_smoke.json").exists()
    assert main(["e2", "--quick", "--reading", "X", "--out", str(tmp_path),
                 "--no-progress"]) == 2
    assert "S-code only" in capsys.readouterr().err
    afile = tmp_path / "a.json"
    afile.write_text("{}")
    for mode in ("--smoke", "--study"):
        assert main(["e2", mode, "--out", str(afile), "--no-progress"]) == 2
        assert "folder" in capsys.readouterr().err


def test_cli_protocol_mode_writes_hashed_results_and_does_not_rerun(tmp_path, monkeypatch,
                                                                     capsys):
    tiny = pl.protocol(widths=(6,), pool_sizes=(40,), n_train=30, n_test=12, ranks=(1, 2),
                       rank_groups=((1, 2),), seeds=(0,), hidden=(8,), steps=3)
    monkeypatch.setattr(pl, "E2_QUICK", tiny)
    assert main(["e2", "--quick", "--out", str(tmp_path), "--no-progress"]) == 0
    data = json.loads((tmp_path / "e2_quick.json").read_text())
    assert data["config_hash"] == config_hash(tiny) and "m6" in data["units"]
    assert "m=6: transition rank" in capsys.readouterr().out

    def boom(*args, **kwargs):
        raise AssertionError("a finished E2 sweep was run again")

    monkeypatch.setattr(pl, "train_e2_unit", boom)
    assert main(["e2", "--quick", "--out", str(tmp_path), "--no-progress"]) == 0


def test_smoke_reading_records_are_identical_in_process_and_on_local_2(tmp_path):
    pytest.importorskip("dask.distributed")
    here, there = tmp_path / "here", tmp_path / "there"
    assert main(["e2", "--smoke", "--reading", "S-code", "--out", str(here),
                 "--no-progress"]) == 0
    assert main(["e2", "--smoke", "--reading", "S-code", "--out", str(there),
                 "--scheduler", "local:2", "--no-progress"]) == 0
    name = "e2_S-code_smoke.json"
    assert _records(here / name) == _records(there / name)
    assert len(_records(here / name)) == 4


def test_cli_study_waits_for_a_committed_pilot_choice(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(pl, "STUDY", {})
    assert main(["e2", "--study", "--out", str(tmp_path)]) == 0
    assert capsys.readouterr().out.count("waiting for its pilot's choice") == 4
    assert not (tmp_path / "e2_study" / "e2_study_summary.json").exists()


def test_cli_decisive_mode_runs_its_preset_and_judges_it_once_complete(tmp_path, capsys,
                                                                       monkeypatch):
    tiny = pl.study_config("A", "exp-affine", (6, 7), ranks=(1, 2), rank_groups=((1, 2),),
                           seeds=(0,), splits=(0, 1), n_train=60, n_test=30, steps=3,
                           eval_every=1, tests=("uniform", "witness", "complement"))
    monkeypatch.setattr(pl, "DECISIVE", {("A", "exp-affine"): tiny})
    assert main(["e2", "--decisive", "--out", str(tmp_path), "--no-progress"]) == 0
    summary = json.loads((tmp_path / "e2_study" / "e2_decisive_summary.json").read_text())
    assert set(summary["tests"]) == {"uniform", "witness", "complement"}
    assert "decisive exp-affine complement: inconclusive" in capsys.readouterr().out
    assert (tmp_path / "e2_study" / "e2_decisive_A_exp-affine.json").exists()


def test_cli_full_study_and_pilot_modes_judge_the_committed_files_as_committed(tmp_path,
                                                                              monkeypatch,
                                                                              capsys):
    """Every mode's runs are complete in a copy of results/: nothing trains, and each mode
    judges its files into the committed summaries (and the committed pilot choices)."""
    import shutil

    def boom(*args, **kwargs):
        raise AssertionError("a committed unit was trained again")

    monkeypatch.setattr(pl, "train_e2_unit", boom)
    for name in ("e2_X_full.json", "e2_S-code_full.json", "e2_S-random_full.json"):
        shutil.copy(RESULTS / name, tmp_path / name)
    shutil.copytree(RESULTS / "e2_protocols", tmp_path / "e2_protocols")
    shutil.copytree(RESULTS / "e2_study", tmp_path / "e2_study")
    (tmp_path / "e2_study" / "e2_study_summary.json").unlink()
    for mode in ("--full", "--study"):
        assert main(["e2", mode, "--out", str(tmp_path), "--no-progress"]) == 0
    for name in ("e2_summary.json", "e2_study/e2_study_summary.json"):
        assert json.loads((tmp_path / name).read_text()) == json.loads(
            (RESULTS / name).read_text()), name
    capsys.readouterr()
    assert main(["e2", "--pilot", "--arm", "B", "--out", str(tmp_path), "--no-progress"]) == 0
    out = capsys.readouterr().out
    for kind in pl.ARMS["B"]:
        choice = json.dumps(pl.PILOT_CHOICE["B", kind])
        assert f"pilot B {kind}: {choice}" in out


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
def test_a_study_unit_runs_on_cuda_as_on_the_cpu():
    cpu = pl.train_e2_unit(STUDY_TINY, 6, 64, 0, "learned", ((2, 8),), False)
    gpu = pl.train_e2_unit(STUDY_TINY, 6, 64, 0, "learned", ((2, 8),), False, device="cuda")
    for a, b in zip(cpu["models"], gpu["models"]):
        assert abs(a["val_history"][0] - b["val_history"][0]) < 0.05  # same init, same data
        assert set(a["test"]) == set(b["test"])
