"""check_against_reference: live re-runs against committed results (chapters 6 and 7)."""

import pytest

from companion.experiments.reference import ReferenceCheck, check_against_reference

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
    with pytest.raises(TypeError, match="mappings"):
        check_against_reference([1.0], {"a": 1.0}, quantity="q", tolerance=0.1)
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
