"""The pre-registered rule of E2: the stay-above transition, sharpness on the running
maximum, the capacity share, dense exactness, and the verdict in the rule's order."""

import numpy as np
import pytest

from companion.experiments.e2 import rule


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


def test_the_transition_is_the_median_over_seeds_staying_above():
    acc = [[0.5, 0.5, 0.95], [0.9, 0.95, 0.1], [1.0, 1.0, 1.0]]
    assert rule.curve_rule([1, 2, 4], acc)["r_star"] == 2
    assert rule.curve_rule([1, 2, 4], acc, threshold=0.99)["r_star"] == 4
    assert rule.curve_rule([1, 2, 4], [[0.1] * 3] * 3)["r_star"] is None


def test_verdicts():
    def size(r_star, sharp=True, dense=True):
        return {"r_star": r_star, "sharp": sharp, "dense_exact_seeds": 3 if dense else 2,
                "seeds": 3}

    assert rule.verdict([size(8), size(16), size(64)])["verdict"] == "reproduced"
    assert rule.verdict([size(4), size(8), size(32)])["verdict"] == "reproduced with our sizes"
    assert rule.verdict([size(8), size(8), size(16)])["verdict"] == "differs"
    assert "sharp" in rule.verdict([size(8, False), size(16), size(64)])["reason"]
    assert "dense" in rule.verdict([size(8), size(16, dense=False), size(64)])["reason"]
    assert "only 2" in rule.verdict([size(None), size(16), size(64)])["reason"]
    # the rule's order: a sharp ladder that does not move fails on movement, before dense
    assert "move" in rule.verdict([size(8, dense=False), size(8), size(8)])["reason"]
    assert "dense" in rule.verdict([size(4, dense=False), size(8), size(32)])["reason"]
    assert rule.dense_exact([1.0, 0.995, 0.98]) == {"exact": 2, "perfect": 1, "seeds": 3,
                                                    "all_exact": False}


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="ranks"):
        rule.curve_rule([2, 1], [[0.5], [0.6]])
    with pytest.raises(ValueError, match="one row per rank"):
        rule.curve_rule([1, 2], [[0.5]])
    with pytest.raises(ValueError, match="acc"):
        rule.curve_rule([1, 2], [[0.5], [1.5]])
