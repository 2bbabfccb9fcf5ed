"""The pre-registered decision rule of E2 (chapter 7), fixed before any full-size run (commits
525fc89, 2d367f7). The curve a(r) is the median over seeds at each run rank; tau = 0.9.

* r* — the smallest doubling-grid rank from which a(r) >= tau at every larger grid rank
  (refined over the run ranks in (r*/2, r*]); the first-crossing rank beside it.
* sharp — r50, the largest run rank below r* whose running maximum of a is still <= 1/2,
  exists and log2(r* / r50) <= 1: one doubling from solving at most half to at least 90 %.
* dense exact — test accuracy >= 0.99 on every seed.
* rank- or generalisation-limited — below r*, the missing accuracy 1 - a_test splits into
  capacity 1 - a_fit (the heads do not fit their own training sequences) and generalisation
  a_fit - a_test; rank-limited when capacity is at least half of it.

Added after the converged study's results (issue 35), outside its registered rule and inside
the decisive study's (issue 40): :func:`checkpoint_convergence` judges convergence at the
validation checkpoint, where test accuracy is read, instead of at the last step.
"""

from __future__ import annotations

import numpy as np

from companion.checks import check_array, check_float, check_int_sequence, check_mapping

__all__ = ["RULE_THRESHOLD", "RULE_LOW", "RULE_DENSE_EXACT", "PAPER_TRANSITIONS",
           "curve_rule", "checkpoint_convergence"]

RULE_THRESHOLD = 0.9
RULE_LOW = 0.5
RULE_DENSE_EXACT = 0.99
#: The transition ranks the paper reports (reported: second-hand, see book/reading.md).
PAPER_TRANSITIONS = (8, 16, 64)


def _check_accuracy(values, name: str, rows: int) -> np.ndarray:
    """Accuracies (rank, seed): a 2-d array of numbers in [0, 1], one row per rank."""
    a = check_array(values, name, 2).astype(np.float64)
    if a.size == 0 or not (np.isfinite(a).all() and (a >= 0).all() and (a <= 1).all()):
        raise ValueError(f"{name} must hold accuracies in [0, 1], at least one per row")
    if len(a) != rows:
        raise ValueError(f"{name} must have one row per rank ({rows}), got {len(a)}")
    return a


def curve_rule(ranks, acc, train_acc=None, threshold: float = RULE_THRESHOLD) -> dict:
    """The rule (this module's docstring) on one curve, acc (len(ranks), seeds): r_star,
    r_star_refined, r_first, r50, the width in doublings, `sharp`, J = a(r*) - a(r*/2) and,
    with train_acc (the fit curve), the capacity share and `limit` below r*."""
    ranks = check_int_sequence(ranks, "ranks", 1, 2**40)
    if ranks != sorted(set(ranks)):
        raise ValueError(f"ranks must be strictly increasing, got {ranks}")
    threshold = check_float(threshold, "threshold", RULE_LOW, 1, low_open=True)
    acc = _check_accuracy(acc, "acc", len(ranks))
    if train_acc is not None:
        train_acc = _check_accuracy(train_acc, "train_acc", len(ranks))
    med = np.median(acc, axis=1)
    grid = [i for i, r in enumerate(ranks) if r & (r - 1) == 0]

    def stay_above(idx):  # the first index after the last one below the threshold
        k = max((k + 1 for k, i in enumerate(idx) if not med[i] >= threshold), default=0)
        return idx[k] if k < len(idx) else None

    i_grid = stay_above(grid)
    out = {"threshold": threshold, "median": med.tolist(), "ranks": ranks,
           "r_star": None if i_grid is None else ranks[i_grid],
           "r_first": next((r for r, a in zip(ranks, med) if a >= threshold), None),
           "r_star_refined": None, "r50": None, "width": None, "sharp": False, "J": None}
    if i_grid is not None:
        r_star = ranks[i_grid]
        i_ref = stay_above(list(range(len(ranks))))
        out["r_star_refined"] = (ranks[i_ref] if i_ref is not None and ranks[i_ref] > r_star // 2
                                 else r_star)
        # the running maximum: a rank-r class contains every smaller rank, so a dip below an
        # earlier rank's accuracy is an optimisation failure and must not make a curve sharp
        env = np.maximum.accumulate(med)
        lows = [i for i in range(len(ranks)) if ranks[i] < out["r_star_refined"]
                and env[i] <= RULE_LOW]
        if lows:
            out["r50"] = ranks[lows[-1]]
            out["width"] = float(np.log2(out["r_star_refined"] / out["r50"]))
            out["sharp"] = out["width"] <= 1.0
        if r_star > 1 and (r_star // 2) in ranks:
            out["J"] = float(med[i_grid] - med[ranks.index(r_star // 2)])
    if train_acc is not None:
        tr = np.median(train_acc, axis=1)
        out["train_median"] = tr.tolist()
        below = [i for i in grid if out["r_star"] is None or ranks[i] < out["r_star"]]
        if below:
            out["r_minus"] = ranks[below[-1]]
            # what is missing from a perfect test score below the transition, split into
            # capacity (1 - train) and generalisation (train - test), summed over those ranks
            cap = float(sum(max(0.0, 1.0 - tr[j]) for j in below))
            gen = float(sum(max(0.0, tr[j] - med[j]) for j in below))
            out["capacity_share"] = cap / (cap + gen) if cap + gen > 0 else None
            out["limit"] = "rank" if cap >= gen else "generalisation"
    return out


def dense_exact(dense_acc) -> dict:
    """Dense seeds counted exact (test accuracy >= RULE_DENSE_EXACT) and at exactly 1.0."""
    a = np.asarray(dense_acc, dtype=np.float64)
    return {"exact": int((a >= RULE_DENSE_EXACT).sum()), "perfect": int((a == 1.0).sum()),
            "seeds": int(a.size), "all_exact": bool((a >= RULE_DENSE_EXACT).all())}


def verdict(sizes: list[dict]) -> dict:
    """The rule's verdict from per-size lines (increasing size) with "r_star", "sharp"
    (:func:`curve_rule`), "dense_exact_seeds" and "seeds" (:func:`dense_exact`)."""
    exact = [s for s in sizes if s["sharp"] and s["dense_exact_seeds"] == s["seeds"]]
    exact_stars = [s["r_star"] for s in exact]
    for i in range(len(exact) - 2):
        if exact_stars[i:i + 3] == list(PAPER_TRANSITIONS):
            return {"verdict": "reproduced", "reason": "sharp at 8, 16, 64; dense exact"}
    # the failing conditions in the order the rule states them: transitions, sharpness,
    # movement of the sharp transitions, dense exactness where they are sharp
    with_t = [s for s in sizes if s["r_star"] is not None]
    stars = [s["r_star"] for s in with_t if s["sharp"]]
    if len(with_t) < 3:
        reason = f"a transition at only {len(with_t)} of {len(sizes)} sizes"
    elif len(stars) < 3:
        reason = "transitions not sharp (width > 1 doubling or no low regime)"
    elif any(b < a for a, b in zip(stars, stars[1:])) or stars[-1] < 4 * stars[0]:
        reason = f"transition does not move by >= 4x: {stars}"
    elif len(exact) < len(stars):
        reason = "dense not exact on every seed where the transition is sharp"
    else:
        return {"verdict": "reproduced with our sizes", "reason": f"sharp at {stars}"}
    return {"verdict": "differs", "reason": reason}


def checkpoint_convergence(run, tolerance: float = 0.005) -> dict:
    """Convergence of every point of one study record (a committed
    ``results/e2_study/e2_study_<arm>_<kind>.json``), judged at the checkpoint its test
    accuracy is read at. Added after the results; the registered flag is kept beside it.

    In medians over a point's replicates (training exact-sequence accuracy, as stored at every
    evaluation): *converged at the checkpoint* when the checkpoint fits within ``tolerance``
    of the best fit the run reaches, and that best fit rose by less than ``tolerance`` over
    the last fifth of the steps. The registered flag (*converged at the last step*) compares
    the last step with the first evaluation at or after 80 % of the steps.
    The decisive study also asks that validation has *settled*: the best validation accuracy
    rose by less than ``tolerance`` over that window. Returns {size: {rank or "dense":
    {"replicates", "checkpoint", "best", "best_before", "last", "late", "val_best",
    "val_best_before", "converged", "converged_last", "settled"}}}.
    """
    run = check_mapping(run, "run")
    tolerance = check_float(tolerance, "tolerance", 0, 1, low_open=True)
    if not isinstance(run.get("units"), dict):
        raise ValueError("run must be a study record with its 'units'")
    points: dict = {}
    for key, unit in sorted(run["units"].items()):
        size = int(key.split("/")[0][1:])  # "A12/split0/r1-2-4-8-16": size 12
        steps = np.asarray(unit["eval_steps"])
        late = int(np.searchsorted(steps, 0.8 * steps[-1]))  # the last fifth starts
        for model in unit["models"]:
            train = np.asarray(model["train_history"], dtype=np.float64)
            val = np.asarray(model["val_history"], dtype=np.float64)
            group = model["rank"] if model["kind"] == "nka" else "dense"
            points.setdefault(size, {}).setdefault(group, []).append((
                train[int(np.searchsorted(steps, model["best_step"]))], train.max(),
                train[:late + 1].max(), train[-1], train[late], val.max(), val[:late + 1].max()))
    out: dict = {}
    for size, groups in sorted(points.items()):
        for group in sorted(groups, key=lambda g: (g == "dense", g if g != "dense" else 0)):
            checkpoint, best, before, last, late, vbest, vbefore = np.median(groups[group], 0)
            out.setdefault(size, {})[group] = {
                "replicates": len(groups[group]), "checkpoint": round(float(checkpoint), 6),
                "best": round(float(best), 6), "best_before": round(float(before), 6),
                "last": round(float(last), 6), "late": round(float(late), 6),
                "val_best": round(float(vbest), 6), "val_best_before": round(float(vbefore), 6),
                "converged": bool(best - checkpoint < tolerance and best - before < tolerance),
                "converged_last": bool(abs(last - late) < tolerance),
                "settled": bool(vbest - vbefore < tolerance)}
    return out
