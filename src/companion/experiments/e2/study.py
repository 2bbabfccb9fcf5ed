"""The converged E2 study's analysis (chapter 7), as pre-registered in
book/e2_preregistration.md: the pilot's choice of optimiser, r* per size with bootstrap
intervals and two sharpness rules, the registered verdict of each curve family
(:func:`study_summary`), the decisive study's step from the rank-1 floor and its verdict
(:func:`decisive_summary`), and the chapter's tables and figure. The studies'
configurations, units and files are :mod:`~.pipeline`'s (designs A and B).
"""

from __future__ import annotations

import numpy as np

from companion.book import BOOK_COLORS, BOOK_MARKERS, Table
from companion.experiments.e2.pipeline import (
    ARMS,
    EXTENDED,
    HEADLINES,
    PILOT_CHOICE,
    PILOT_GRID,
    E2Config,
    complete_sizes,
    extension_units,
    pilot_configs,
    study_config,
    unit_plan,
)
from companion.experiments.e2.rule import (
    PAPER_TRANSITIONS,
    RULE_DENSE_EXACT,
    checkpoint_convergence,
    curve_rule,
)
from companion.experiments.sweep import config_dict

__all__ = ["TAUS", "pilot_choice", "study_summary", "decisive_summary", "status_table",
           "pilot_table", "plot_study", "size_table", "decisive_table", "gap_table"]

TAUS = (0.85, 0.9, 0.95)
#: Held-out distributions: A's uniform and near-tie ("witness": a query's competitors differ
#: in overlap by 1) triples; B's held-out multisets, all and those with a complementary pair.
TESTS = ("uniform", "witness")


# ----------------------------------------------------------------------------- the pilot


def _best_val(unit: dict, model: dict, until: int | None) -> float:
    """A model's best validation accuracy at evaluations up to step `until` (None: all)."""
    return max(v for s, v in zip(unit["eval_steps"], model["val_history"])
               if until is None or s <= until)


#: Medians of validation accuracy this close count as a tie (then fewer steps, no surrogate).
PILOT_TIE = 0.005


def pilot_choice(runs) -> dict:
    """The registered choice from a (arm, kind)'s pilot runs (stored files, loaded): for the
    heads and for the dense heads the (lr, steps, surrogate) with the highest median best
    validation accuracy, ties (within PILOT_TIE) to fewer steps, then no surrogate phase; the
    dense heads keep the heads' steps and surrogate and choose their own lr. Every option's
    median is listed."""
    options = []
    for run in runs:
        cfg = run["config"]
        for surrogate in (False, True):
            until = None if surrogate else cfg["steps"]
            val = {"nka": [], "dense": []}
            for unit in run["units"].values():
                for model in unit["models"]:
                    val["dense" if model["kind"] == "dense" else "nka"].append(
                        _best_val(unit, model, until))
            options.append({"lr": cfg["lr"], "steps": cfg["steps"], "surrogate": surrogate,
                            "median_val": float(np.median(val["nka"])),
                            "median_val_dense": float(np.median(val["dense"]))})
    if not options:
        raise ValueError("runs must hold at least one pilot run")

    def pick(pool, key):
        top = max(o[key] for o in pool)
        tied = [o for o in pool if o[key] >= top - PILOT_TIE]
        return min(tied, key=lambda o: (o["steps"], o["surrogate"], -o[key]))

    heads_pick = pick(options, "median_val")
    same = [o for o in options if (o["steps"], o["surrogate"]) ==
            (heads_pick["steps"], heads_pick["surrogate"])]
    dense_pick = pick(same, "median_val_dense")
    return {"lr": heads_pick["lr"], "steps": heads_pick["steps"],
            "surrogate_steps": PILOT_GRID["surrogate_steps"] if heads_pick["surrogate"] else 0,
            "dense_lr": dense_pick["lr"], "options": options}


# ----------------------------------------------------------------------------- the analysis


def bootstrap_interval(ranks, acc, tau: float, resamples: int = 2000, seed: int = 0,
                       level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of log2 r*_tau (the stay-above rank of the median curve) over
    bootstrap resamples of whole replicates (the columns of acc (R, n)); a resample with no
    r* counts as log2(max rank) + 1, "above the grid"."""
    a = np.asarray(acc, dtype=np.float64)
    logs = np.log2(np.asarray(ranks, dtype=np.float64))
    pick = np.random.default_rng(seed).integers(0, a.shape[1], size=(resamples, a.shape[1]))
    med = np.median(a[:, pick], axis=-1)  # (R, resamples)
    below = med < tau
    # the first rank after the last one below tau; len(ranks) when the top rank is below
    last = np.where(below.any(0), len(ranks) - 1 - np.argmax(below[::-1], axis=0), -1)
    star = np.append(logs, logs[-1] + 1)[last + 1]
    tail = (1 - level) / 2
    return (float(np.quantile(star, tail, method="lower")),
            float(np.quantile(star, 1 - tail, method="higher")))


def _rise(ranks, curve, bottom: float, top: float) -> tuple:
    """(r10, r90): the last rank whose running maximum is at most 10 % of the way from
    `bottom` to `top`, the first at least 90 % (None where there is none)."""
    env = np.maximum.accumulate(np.asarray(curve, dtype=np.float64))
    low = np.flatnonzero(env <= bottom + 0.1 * (top - bottom))
    high = np.flatnonzero(env >= bottom + 0.9 * (top - bottom))
    return (ranks[low[-1]] if len(low) else None), (ranks[high[0]] if len(high) else None)


def relative_width(ranks, curve) -> float | None:
    """Doublings the running maximum of a curve takes from 10 % to 90 % of its own range
    (min to max): log2(r90 / r10); None when the range is 0 or no rank lies at or below
    10 %."""
    lo, hi = float(np.min(curve)), float(np.max(curve))
    r10, r90 = _rise(ranks, curve, lo, hi) if hi > lo else (None, None)
    return float(np.log2(r90 / r10)) if r10 else None


def _replicates(run: dict, size: int):
    """Per rank (and dense) of one size, the models' records in (split, seed) order."""
    out: dict = {}
    units = extended_run(run)["units"]  # an extended unit's longer run counts, not both
    for key in sorted(units):
        if key.split("/")[0][1:] == str(size):
            for rec in units[key]["models"]:
                out.setdefault(rec["rank"] if rec["kind"] == "nka" else "dense",
                               []).append((key.split("/")[1], rec["seed"], rec,
                                           units[key]["eval_steps"]))
    return {k: [r[2:] for r in sorted(v, key=lambda r: r[:2])] for k, v in out.items()}


def _size_line(run: dict, size: int, test: str) -> dict:
    cfg = run["config"]
    ranks = cfg["ranks"]
    reps = _replicates(run, size)
    acc = np.array([[rec["test"][test] for rec, _ in reps[r]] for r in ranks])
    fit = np.median([[rec["fit"] for rec, _ in reps[r]] for r in ranks], axis=1)
    def train_at(rec, steps, fraction):  # training accuracy at the first evaluation >= f total
        return rec["train_history"][int(np.searchsorted(steps, fraction * steps[-1]))]

    last = np.median([[train_at(rec, s, 1.0) for rec, s in reps[r]] for r in ranks], axis=1)
    late = np.median([[train_at(rec, s, 0.8) for rec, s in reps[r]] for r in ranks], axis=1)
    med = np.median(acc, axis=1)
    rule = curve_rule(ranks, acc, threshold=0.9)
    dense = [rec["test"][test] for rec, _ in reps["dense"]]
    return {
        "size": size, "replicates": int(acc.shape[1]), "median": med.round(6).tolist(),
        "fit_median": fit.round(6).tolist(), "train_last": last.round(6).tolist(),
        "converged": (np.abs(last - late) < 0.005).tolist(),
        "capacity": (1 - fit).round(6).tolist(), "generalisation": (fit - med).round(6).tolist(),
        "r_star": {str(t): curve_rule(ranks, acc, threshold=t)["r_star"] for t in TAUS},
        "interval_log2": {str(t): bootstrap_interval(ranks, acc, t) for t in TAUS},
        "sharp_absolute": rule["sharp"], "r50": rule["r50"],
        "relative_width": relative_width(ranks, med),
        "dense": dense, "dense_exact": bool(min(dense) >= RULE_DENSE_EXACT)}


def _verdict(lines: list[dict]) -> tuple[str, str]:
    """The registered verdict of one curve family (its lines by increasing size)."""
    unfit = [s["size"] for s in lines if s["train_last"][-1] < 0.99]
    if len(unfit) >= 2:
        return "inconclusive", f"the top rank does not fit its training set at sizes {unfit}"
    ci = [s["interval_log2"]["0.9"] for s in lines]
    stars = all(s["r_star"]["0.9"] is not None for s in lines)
    moves = ci[0][1] < ci[-1][0]
    dense = all(s["dense_exact"] for s in lines)
    rel = [s["relative_width"] is not None and s["relative_width"] <= 1 for s in lines]
    if stars and moves and dense and all(s["sharp_absolute"] for s in lines):
        return "reproduced", "r* at every size, sharp, moving, dense exact"
    if stars and moves and dense and all(rel):
        return "reproduced with our sizes", "r* at every size, sharp by the relative rule, moving"
    if len(rel) - sum(rel) >= 2:
        return "refuted at convergence", "no sharp transition (relative rule) at " \
            f"{len(rel) - sum(rel)} sizes"
    if max(c[0] for c in ci) <= min(c[1] for c in ci):
        return "refuted at convergence", "the r* intervals of all sizes overlap: it does not move"
    if not dense:
        return "refuted at convergence", "dense attention is not exact at every size"
    return "inconclusive", ("no r* at every size" if not stars else
                            "r* intervals neither separate nor all overlap")


def study_summary(runs: dict) -> dict:
    """results/e2_study_summary.json from the complete study files {"A_exp-affine": run,
    ...}: per arm, kind and test the per-size lines, the verdict and the reason; the headline
    family of each arm (:data:`HEADLINES`) named; the paper's reported steps beside them."""
    out = {"taus": list(TAUS), "dense_exact_level": RULE_DENSE_EXACT,
           "paper_transitions": list(PAPER_TRANSITIONS),
           "headlines": {a: list(h) for a, h in HEADLINES.items()}, "arms": {}}
    for run in runs.values():
        cfg = run["config"]
        fam = out["arms"].setdefault(cfg["design"], {}).setdefault(_kind(cfg), {})
        tests = {t for u in run["units"].values() for m in u["models"] for t in m["test"]}
        for test in [t for t in TESTS if t in tests]:
            lines = [_size_line(run, size, test) for size, _ in cfg["sizes"]]
            verdict, reason = _verdict(lines)
            fam[test] = {"ranks": cfg["ranks"], "per_size": lines, "verdict": verdict,
                         "reason": reason, "config_hash": run["config_hash"]}
    return out


# ----------------------------------------------------------------------------- decisive study


def floor_step(ranks, curve) -> dict:
    """The step from the floor f = a(1) to solving (the decisive study's sharpness): r_lo,
    r_hi 10 % and 90 % of the way from f to 1 (:func:`_rise`); the width log2(r_hi / r_lo)."""
    f = float(curve[0])
    r_lo, r_hi = _rise(ranks, curve, f, 1.0) if f < 1 else (ranks[-1], None)
    return {"floor": f, "r_lo": r_lo, "r_hi": r_hi,
            "width": None if r_hi is None else float(np.log2(r_hi / r_lo))}


def _decisive_line(run: dict, size: int, test: str, points: dict) -> dict:
    """A size's line (:func:`_size_line`), its step from the floor, and what keeps the width
    from being judged: the control (dense exact), the floor (<= 1/2), the top rank converged
    and fitting (>= 0.99 at the checkpoint), the step's two points converged."""
    line = _size_line(run, size, test)
    ranks = run["config"]["ranks"]
    step = floor_step(ranks, line["median"])

    def ok(r):  # converged at the checkpoint, validation settled
        return points[r]["converged"] and points[r]["settled"]

    checks = {"dense not exact": line["dense_exact"], "floor above 1/2": step["floor"] <= 0.5,
              "top rank not converged or not fitting": ok(ranks[-1])
              and points[ranks[-1]]["checkpoint"] >= 0.99,
              "step not converged": all(ok(r) for r in (step["r_lo"], step["r_hi"]) if r)}
    return {**line, **step, "point_converged": [ok(r) for r in ranks],
            "dense_converged": ok("dense"), "fails": [k for k, v in checks.items() if not v]}


def _decisive_verdict(lines: list[dict]) -> tuple[str, str]:
    """The decisive study's registered verdict of one family (its lines by increasing size);
    a width whose control is missing is left out of the evidence, never counted against."""
    judged = [s for s in lines if not s["fails"]]
    if len(judged) < 3:
        return "inconclusive", f"{len(judged)} of {len(lines)} widths judged, 3 needed; " + \
            "; ".join(f"m = {s['size']}: {', '.join(s['fails'])}" for s in lines if s["fails"])
    stars = [s["r_star"]["0.9"] is not None for s in judged]
    sharp = [s["width"] is not None and s["width"] <= 1 for s in judged]
    ci = [s["interval_log2"]["0.9"] for s in judged]
    if all(stars) and all(sharp) and ci[0][1] < ci[-1][0]:
        return "reproduced", "a sharp step from the floor at every judged width, moving"
    blunt = [s["size"] for s, a, b in zip(judged, stars, sharp) if a and not b]
    if len(blunt) >= 2:
        return "refuted at convergence", f"no sharp step from the floor at m = {blunt}"
    if all(stars) and all(sharp) and max(c[0] for c in ci) <= min(c[1] for c in ci):
        return "refuted at convergence", "sharp steps whose r* intervals all overlap"
    if len(stars) - sum(stars) >= 2:
        return "inconclusive", "no r* on the grid at two or more judged widths"
    return "inconclusive", "r* intervals neither separate nor all overlap, or r* missing"


def extended_run(run: dict) -> dict:
    """The run as the extension rule reads it: each extended unit's longer run in place of its
    first pass (which stays in the file beside it)."""
    units = run["units"]
    return {**run, "units": {key: units.get(key + EXTENDED, unit) for key, unit in
                             units.items() if not key.endswith(EXTENDED)}}


def decisive_summary(run: dict) -> dict:
    """results/e2_study/e2_decisive_summary.json from the decisive study's file (load_e2):
    per test its complete widths' lines (r*, intervals, floor, step, convergence at the
    checkpoint, what keeps a width from being judged) and the registered verdict; the units
    the extension rule flags."""
    cfg, flagged, sizes = run["config"], extension_units(run), complete_sizes(run)
    done = [key for key in flagged if key + EXTENDED in run["units"]]
    run = extended_run(run)
    points = checkpoint_convergence(run)
    tests = {}
    for test in cfg["tests"]:
        lines = [_decisive_line(run, size, test, points[size]) for size in sizes]
        verdict, reason = _decisive_verdict(lines)
        tests[test] = {"per_size": lines, "verdict": verdict, "reason": reason}
    return {"taus": list(TAUS), "dense_exact_level": RULE_DENSE_EXACT,
            "paper_transitions": list(PAPER_TRANSITIONS), "kind": _kind(cfg),
            "headline": "complement", "ranks": cfg["ranks"], "config_hash": run["config_hash"],
            "extend": flagged, "extended": done, "tests": tests}


# ----------------------------------------------------------------------------- the chapter


def _kind(config: dict) -> str:
    return E2Config(**config).kind


def planned_units(arm: str, kind: str) -> int:
    """How many units the study of (arm, kind) has (the optimiser does not change it)."""
    return len(unit_plan(config_dict(study_config(arm, kind))))


def status_table(files: dict, caption: str | None = None) -> Table:
    """Units stored of units planned, per (arm, kind), for the pilot and the study, and what
    they cost: the stored units' wall time in CPU-hours (one core per unit)."""
    def hours(runs) -> str:
        return f"{sum(u['wall_time'] for r in runs for u in r['units'].values()) / 3600:.2f}"

    rows = []
    for arm, kinds in ARMS.items():
        for kind in kinds:
            pilot = files["pilot"].get((arm, kind), [])
            planned = sum(len(unit_plan(config_dict(c))) for c in pilot_configs(arm, kind))
            run = files["study"].get((arm, kind))
            rows.append({"arm": arm, "kind": kind,
                         "pilot units": f"{sum(len(r['units']) for r in pilot)} / {planned}",
                         "optimiser": _optimiser(PILOT_CHOICE.get((arm, kind))),
                         "study units": f"{len(run['units']) if run else 0} / "
                                        f"{planned_units(arm, kind)}",
                         "CPU-h (pilot, study)": f"{hours(pilot)}, {hours([run] if run else [])}"})
    return Table(rows, caption=caption)


def _optimiser(choice) -> str:
    if choice is None:
        return "pilot pending"
    return (f"lr {choice['lr']:g} (dense {choice['dense_lr']:g}), {choice['steps']} steps"
            + (f" + {choice['surrogate_steps']} surrogate" if choice["surrogate_steps"] else ""))


def pilot_table(runs, caption: str | None = None) -> Table:
    """A complete pilot's options (median best validation accuracy of the heads and of the
    dense heads) and the registered choice, marked."""
    choice = pilot_choice(runs)
    rows = [{"lr": o["lr"], "MSE steps": o["steps"],
             "surrogate phase": "on" if o["surrogate"] else "off",
             "heads: median validation": f"{o['median_val']:.3f}",
             "dense: median validation": f"{o['median_val_dense']:.3f}",
             "chosen": ("heads" if (o["lr"], o["steps"], o["surrogate"]) ==
                        (choice["lr"], choice["steps"], bool(choice["surrogate_steps"]))
                        else "") + (" dense" if (o["lr"], o["steps"], o["surrogate"]) ==
                                    (choice["dense_lr"], choice["steps"],
                                     bool(choice["surrogate_steps"])) else "")}
            for o in sorted(choice["options"], key=lambda o: (o["lr"], o["steps"],
                                                              o["surrogate"]))]
    for r in rows:
        r["chosen"] = r["chosen"].strip() or "—"
    return Table(rows, caption=caption)


def plot_study(ax, run: dict, test: str, title: str | None = None) -> None:
    """Median test accuracy against rank per complete size (band: min-max over replicates;
    dashed: dense median; star: r* at tau = 0.9 with its bootstrap interval as a bar)."""
    ranks = run["config"]["ranks"]
    for i, size in enumerate(complete_sizes(run)):
        line = _size_line(run, size, test)
        acc = np.array([[rec["test"][test] for rec, _ in reps]
                        for r, reps in sorted(_replicates(run, size).items(),
                                              key=lambda kv: (kv[0] == "dense", kv[0]))
                        if r != "dense"])
        color = BOOK_COLORS[i % len(BOOK_COLORS)]
        ax.plot(ranks, line["median"], marker=BOOK_MARKERS[i], ms=3, color=color,
                label=f"${_size_label(run['config']['design'], size)}$")
        ax.fill_between(ranks, acc.min(1), acc.max(1), color=color, alpha=0.15)
        ax.axhline(np.median(line["dense"]), color=color, ls="--", lw=1)
        star = line["r_star"]["0.9"]
        if star is not None:
            lo, hi = line["interval_log2"]["0.9"]
            y = line["median"][ranks.index(star)]
            ax.plot([2**lo, min(2**hi, 2 * ranks[-1])], [y, y], color=color, lw=3, alpha=0.5)
            ax.plot([star], [y], marker="*", ms=12, color="white", mec=color, mew=1.5, zorder=5)
    ax.axhline(0.9, color="grey", ls=":", lw=1)
    ax.set_xscale("log", base=2)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("feature rank $r$")
    ax.set_title(title or f"arm {run['config']['design']}, {_kind(run['config'])}, {test} test",
                 fontsize=10)


def _size_label(arm: str, size: int) -> str:
    return f"m = {size}" if arm == "A" else f"P = {2 * size - 2}"


def star(line: dict, tau: float) -> str:
    """r* at tau of a size line and its 95 % interval, e.g. '64 [32, 256]'."""
    lo, hi = ("above 1024" if v > 10 else f"{2**v:g}" for v in line["interval_log2"][str(tau)])
    return f"{line['r_star'][str(tau)] or '—'} [{lo}, {hi}]"


def size_table(run: dict, test: str, caption: str | None = None) -> Table:
    """Per complete size: r* at each tau with its 95 % interval, both sharpness rules, the
    top rank's training accuracy, dense exactness (9 replicates each)."""
    rows = []
    for size in complete_sizes(run):
        s = _size_line(run, size, test)
        row = {"size": _size_label(run["config"]["design"], size)}
        for t in TAUS:
            row[f"r* at {t}"] = star(s, t)
        row["sharp (abs / rel)"] = (f"{'yes' if s['sharp_absolute'] else 'no'} / "
                                    + ("—" if s["relative_width"] is None else
                                       f"{s['relative_width']:.0f} doublings"))
        row["top-rank training acc."] = f"{s['train_last'][-1]:.3f}"
        row["dense exact"] = f"{sum(d >= RULE_DENSE_EXACT for d in s['dense'])}/{len(s['dense'])}"
        rows.append(row)
    return Table(rows, caption=caption)


def decisive_table(summary: dict, test: str = "complement", caption: str | None = None) -> Table:
    """Per complete width of the decisive study: the floor a(1), the step from it (r_lo to
    r_hi, in doublings), r* at 0.9 with its interval, dense exactness, what keeps the width
    from being judged."""
    rows = [[f"m = {s['size']}", f"{s['floor']:.3f}", "—" if s["r_hi"] is None else
             f"{s['r_lo']} → {s['r_hi']} ({s['width']:g} doublings)",
             star(s, 0.9) if s["r_star"]["0.9"] else "none on the grid",
             f"{sum(d >= RULE_DENSE_EXACT for d in s['dense'])}/{len(s['dense'])}",
             "yes" if not s["fails"] else "no: " + ", ".join(s["fails"])]
            for s in summary["tests"][test]["per_size"]]
    return Table(rows, columns=["width", "floor a(1)", "step from the floor",
                                "r* at 0.9 [95 %]", "dense exact", "judged?"], caption=caption)


def gap_table(run: dict, test: str, caption: str | None = None) -> Table:
    """Per rank and complete size, 'capacity / generalisation': 1 - a_fit and a_fit - a_test
    (medians over the replicates), * where generalisation is at least capacity."""
    sizes = complete_sizes(run)
    lines = [_size_line(run, s, test) for s in sizes]
    rows = [[r] + [f"{ln['capacity'][i]:.2f} / {ln['generalisation'][i]:.2f}"
                   + (" *" if ln["generalisation"][i] >= ln["capacity"][i] else "")
                   for ln in lines] for i, r in enumerate(run["config"]["ranks"])]
    return Table(rows, columns=["r", *(_size_label(run["config"]["design"], n) for n in sizes)],
                 caption=caption)
