"""check_against_reference: live re-runs against committed results (chapters 6 and 7)."""

import json
from pathlib import Path

import pytest

from companion.experiments.e1 import (
    E1_LIVE_RANKS,
    E1_QUICK,
    E1_SMOKE,
    experiment_witness_24,
    load_e1_results,
    model_values,
    run_e1_sweep,
    train_e1_live,
)
from companion.experiments.e2.pipeline import (
    E2_LIVE,
    E2_QUICK,
    E2_SMOKE,
    e2_live_result,
    load_e2,
    run_e2,
)
from companion.experiments.e2.verdicts import e2_model_values
from companion.experiments.reference import ReferenceCheck, check_against_reference
from companion.experiments.sweep import config_hash

STORED = {("nka", 16, 0): 1.40, ("nka", 32, 0): 0.20, ("nka", 28, 0): 0.55}


def test_passes_within_tolerance_and_summary_is_machine_independent():
    a = check_against_reference({k: v + 0.2 for k, v in STORED.items()}, STORED,
                                quantity="best max error", tolerance=0.25, threshold=0.5)
    b = check_against_reference({k: v - 0.01 for k, v in STORED.items()}, STORED,
                                quantity="best max error", tolerance=0.25, threshold=0.5)
    assert a.passed and b.passed
    assert a.summary() == b.summary()  # depends only on the stored values and the tolerance
    assert "3/3" in a.summary() and "2/2" in a.summary()  # 28 sits within the band: undecided
    assert a.largest_deviation == pytest.approx(0.2)


def test_fails_beyond_tolerance():
    live = dict(STORED)
    live[("nka", 16, 0)] = 1.40 + 0.26
    check = check_against_reference(live, STORED, quantity="best max error", tolerance=0.25)
    assert not check.passed
    assert check.beyond_tolerance == (("nka", 16, 0),)
    assert "2/3" in check.summary()
    assert "0.2600" in check.failure_message() and "nka" in check.failure_message()


def test_fails_on_a_changed_verdict_away_from_the_threshold():
    # a tolerance wider than the move, but the verdict of a decided model flips
    stored = {"a": 0.30, "b": 1.0}
    live = {"a": 0.52, "b": 1.0}
    check = check_against_reference(live, stored, quantity="err", tolerance=0.15 + 0.1,
                                     threshold=0.5)
    assert check.beyond_tolerance == ()
    # 0.30 is 0.20 from the threshold: within the band of 0.25, so not decided
    assert check.passed and check.decided == 1
    check = check_against_reference(live, stored, quantity="err", tolerance=0.19999,
                                     threshold=0.5)
    assert not check.passed
    assert check.beyond_tolerance == ("a",) and check.verdicts_changed == ("a",)
    # a changed verdict of a decided model always moves it beyond the tolerance too (the
    # committed value is farther than the tolerance from the threshold), so both are reported
    check = check_against_reference({"a": 0.501}, {"a": 0.25}, quantity="err",
                                    tolerance=0.2, threshold=0.5)
    assert check.decided == 1 and check.verdicts_changed == ("a",) and not check.passed
    assert "0/1 models" in check.summary()


def test_ignores_verdicts_within_the_band():
    check = check_against_reference({"x": 0.45}, {"x": 0.55}, quantity="err", tolerance=0.25,
                                    threshold=0.5)
    assert check.passed and check.decided == 0 and check.verdicts_changed == ()
    assert "0/0" in check.summary()


def test_key_mismatch_and_bad_input_rejected():
    with pytest.raises(ValueError, match="same model keys"):
        check_against_reference({"a": 1.0}, {"b": 1.0}, quantity="q", tolerance=0.1)
    with pytest.raises(ValueError, match="at least one"):
        check_against_reference({}, {}, quantity="q", tolerance=0.1)
    with pytest.raises(TypeError, match="live must be a dict"):
        check_against_reference([1.0], {"a": 1.0}, quantity="q", tolerance=0.1)
    with pytest.raises(TypeError, match="stored must be a dict"):
        check_against_reference({"a": 1.0}, [1.0], quantity="q", tolerance=0.1)
    with pytest.raises(TypeError, match="quantity"):
        check_against_reference({"a": 1.0}, {"a": 1.0}, quantity="", tolerance=0.1)
    with pytest.raises(ValueError, match="tolerance"):
        check_against_reference({"a": 1.0}, {"a": 1.0}, quantity="q", tolerance=0.0)
    with pytest.raises(TypeError, match="tolerance"):
        check_against_reference({"a": 1.0}, {"a": 1.0}, quantity="q", tolerance="0.1")
    with pytest.raises(ValueError, match="threshold"):
        check_against_reference({"a": 1.0}, {"a": 1.0}, quantity="q", tolerance=0.1,
                                threshold=float("inf"))
    with pytest.raises(ValueError, match="non-finite"):
        check_against_reference({"a": float("nan")}, {"a": 1.0}, quantity="q", tolerance=0.1)


def test_result_type():
    check = check_against_reference({"a": 1.0}, {"a": 1.0}, quantity="q", tolerance=0.1)
    assert isinstance(check, ReferenceCheck) and check.threshold is None
    assert "verdict" not in check.summary()


# ----
# The chapters' live subsets (chapters 6 and 7) and the committed results they are checked
# against: a live subset trains the same models as inside the sweep, and the committed files
# belong to the configurations the chapters name.
RESULTS = Path(__file__).resolve().parents[2] / "results"


@pytest.fixture(scope="module")
def family():
    return experiment_witness_24()


def test_e1_live_subset_trains_the_sweeps_models(family):
    sweep = model_values(run_e1_sweep(E1_SMOKE, family=family))
    records, model = train_e1_live(E1_SMOKE, family, ranks=(16, 28), seeds=(1,))
    live = model_values(records)
    assert set(live) == {("nka", 16, 1), ("nka", 28, 1)}
    assert model.num_models == 2
    # same initialisation, data and padding as inside the sweep: equal up to rounding
    for key, value in live.items():
        assert value == pytest.approx(sweep[key], abs=1e-3)


def test_e1_live_subset_rejects_ranks_outside_one_group(family):
    with pytest.raises(ValueError, match="one rank group"):
        train_e1_live(E1_SMOKE, family, ranks=(4, 16))
    with pytest.raises(TypeError, match="config"):
        train_e1_live("quick", family)


def test_e2_live_subset_trains_the_sweeps_models(tmp_path):
    sweep = run_e2(E2_SMOKE, out=tmp_path / "e2.json")
    assert load_e2(tmp_path / "e2.json")["widths"] == sweep["widths"]
    live = e2_live_result(E2_SMOKE, width=8, ranks=(1, 4), seeds=(0,))
    got = e2_model_values(live, "uniform", seeds=(0,), width=8)
    ref = e2_model_values(sweep["widths"]["8"], "uniform", seeds=E2_SMOKE.seeds, width=8)
    assert set(got) == {(8, 1, 0), (8, 4, 0), (8, "dense", 0)}
    for key, value in got.items():
        assert value == pytest.approx(ref[key], abs=0.02)


def test_e2_live_subset_rejects_bad_arguments():
    with pytest.raises(ValueError, match="width"):
        e2_live_result(E2_SMOKE, width=7)
    with pytest.raises(ValueError, match="ranks"):
        e2_live_result(E2_SMOKE, width=8, ranks=(3,))
    with pytest.raises(ValueError, match="largest rank 4"):
        e2_live_result(E2_SMOKE, width=8, ranks=(1,))
    with pytest.raises(ValueError, match="distribution"):
        e2_model_values({"ranks": [], "accuracy": {}, "dense": {}}, "train")


def test_committed_references_belong_to_the_chapters_configurations():
    assert load_e1_results(RESULTS / "e1_quick.json")["config_hash"] == config_hash(E1_QUICK)
    quick = load_e2(RESULTS / "e2_quick.json")
    assert quick["config_hash"] == config_hash(E2_QUICK)
    assert set(quick["widths"]) == {str(m) for m in E2_QUICK.widths}


def test_tolerances_are_at_least_three_times_the_measured_spread():
    spread = json.loads((RESULTS / "cross_path_spread.json").read_text())
    assert spread["paths"]["default"]["cpu_capability"] == "DEFAULT"
    # what the chapters' live checks must absorb: their models' moves between code paths,
    # and the live subset against the sweep it is compared with (chapters 6 and 7 assert it)
    e1 = ([spread["e1_quick_best_max_error_by_rank"][str(r)] for r in E1_LIVE_RANKS]
          + [spread["e1_live"], *spread["e1_live_against_sweep"].values()])
    e2 = ([spread["e2_quick_test_accuracy_uniform_by_width"][str(E2_LIVE["width"])]]
          + [spread["e2_live"], *spread["e2_live_against_sweep"].values()])
    for moves in (e1, e2):
        assert all(move["models"] > 0 for move in moves)
        assert 3 * max(move["max_abs_difference"] for move in moves) <= 0.25
