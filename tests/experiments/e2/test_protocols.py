"""E2's stored protocols: the presets, the sweep over widths (deterministic, resumable, in
the stored format), its readers (the rule's r* for older files too), and the committed
protocols re-read and re-trained in part."""

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from companion.book import seed_everything
from companion.experiments.e2 import protocols as ood_scaling
from companion.experiments.e2 import readings
from companion.experiments.e2.data import TEST_DISTRIBUTIONS
from companion.experiments.e2.readings import E2Config
from companion.experiments.e2.rule import curve_rule
from companion.experiments.sweep import config_hash


@pytest.fixture(autouse=True)
def _one_thread():
    seed_everything(0, threads=1)


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
    for name in TEST_DISTRIBUTIONS:
        acc = np.asarray(entry["accuracy"][name])
        assert ((0 <= acc) & (acc <= 1)).all()
    json.dumps(first)  # JSON-serialisable


def test_sweep_trains_the_models_it_reports():
    """Training improves the training max error over a barely-trained run."""
    short = ood_scaling.run_e2_sweep(replace(TINY, steps=1))["widths"]["5"]["train_max_error"]
    longer = ood_scaling.run_e2_sweep(replace(TINY, steps=150))["widths"]["5"]["train_max_error"]
    assert np.median(longer) < np.median(short)


def test_protocol_store_round_trip_and_resume(tmp_path, monkeypatch):
    first = ood_scaling.run_e2_protocol("tiny", {"steps": 3}, out_dir=tmp_path, base=TINY)
    assert (tmp_path / "tiny.json").exists()
    assert ood_scaling.load_e2_protocols(tmp_path) == {"tiny": first}

    def boom(*args, **kwargs):
        raise AssertionError("a stored protocol must not be recomputed")

    monkeypatch.setattr(readings, "train_unit", boom)
    assert ood_scaling.run_e2_protocol("tiny", {"steps": 3}, out_dir=tmp_path, base=TINY) == first
    with pytest.raises(ValueError, match="configuration"):  # same file, other settings
        ood_scaling.run_e2_protocol("tiny", {"steps": 4}, out_dir=tmp_path, base=TINY)
    with pytest.raises(ValueError, match="name"):
        ood_scaling.run_e2_protocol("../escape", {}, out_dir=tmp_path, base=TINY)


def test_summary_matches_the_raw_result():
    res = ood_scaling.run_e2_sweep(replace(TINY, steps=2))
    (row,) = ood_scaling.summarise_e2(res)
    e = res["widths"]["5"]
    assert row["m"] == 5
    assert row["median_uniform"] == [float(np.median(a)) for a in e["accuracy"]["uniform"]]
    assert row["dense_min_near_tie"] == min(e["dense"]["near_tie"])
    assert row["transition_uniform"] == e["transition_r"]["uniform"] == curve_rule(
        e["ranks"], e["accuracy"]["uniform"])["r_star"]


RESULTS = Path(__file__).resolve().parents[3] / "results" / "e2_protocols"


def test_stored_protocols_match_the_registry():
    """Every registered protocol has a stored result made with exactly its configuration."""
    stored = ood_scaling.load_e2_protocols(RESULTS)
    assert set(stored) == set(ood_scaling.E2_PROTOCOLS)
    for name, changes in ood_scaling.E2_PROTOCOLS.items():
        config = replace(ood_scaling.E2_QUICK, **changes)
        assert E2Config(**stored[name]["config"]) == config, name
        assert config_hash(stored[name]["config"]) == config_hash(config), name


def test_rerun_of_a_stored_protocol_subset_matches():
    """Re-train two heads (r = 1, 2) and the dense head of one seed at m = 8 of the stored
    quick-mode protocol: each model trains as it did inside the full stack, so the accuracies
    must match the committed file."""
    name = "H_widths_8_10_12"
    stored = ood_scaling.load_e2_protocols(RESULTS)[name]
    cfg = stored["config"]
    quick = E2Config(**cfg)
    assert quick == ood_scaling.E2_QUICK  # the book's quick mode is this protocol
    seed, ranks = 1, [1, 2]
    sub = replace(quick, widths=[8], pool_sizes=[cfg["pool_sizes"][cfg["widths"].index(8)]],
                  ranks=ranks, rank_groups=[ranks], seeds=[seed])
    got = ood_scaling.run_e2_sweep(sub)["widths"]["8"]
    want = stored["widths"]["8"]
    s = cfg["seeds"].index(seed)
    for name in TEST_DISTRIBUTIONS:
        for i, r in enumerate(ranks):
            j = cfg["ranks"].index(r)
            assert got["accuracy"][name][i][0] == pytest.approx(want["accuracy"][name][j][s],
                                                                abs=2e-3)
        assert got["dense"][name][0] == pytest.approx(want["dense"][name][s], abs=2e-3)


def test_run_e2_sweep_refuses_what_is_not_a_configuration():
    with pytest.raises(TypeError, match="config"):
        ood_scaling.run_e2_sweep([("widths", [8])])


def test_older_files_are_read_with_the_rules_transition_rank():
    """Files written before the rule stored the first rank whose median reached 0.9; the
    reader gives the rule's stay-above r* (protocol A at m = 8 dips below 0.9 after 32)."""
    path = RESULTS / "A_uniform_training.json"
    raw = json.loads(path.read_text())
    stored_r = raw["units"]["sweep"]["widths"]["8"]["transition_r"]["uniform"]
    e = ood_scaling.load_e2_result(path)["widths"]["8"]
    med = np.median(e["accuracy"]["uniform"], axis=1)
    assert stored_r == e["ranks"][int(np.argmax(med >= 0.9))]  # the old first crossing
    assert e["transition_r"]["uniform"] == curve_rule(e["ranks"], e["accuracy"]["uniform"])[
        "r_star"] != stored_r
