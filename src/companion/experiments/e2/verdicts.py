"""The pre-registered rule applied to E2's readings and stored protocols (chapter 7): per
curve the transition, its sharpness, the capacity share below it and dense exactness; the
verdict over sizes; the content of results/e2_summary.json; the chapter's HTML tables.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from companion.book import Table
from companion.checks import check_choice, check_mapping
from companion.experiments.e2.data import HARD_DISTRIBUTIONS
from companion.experiments.e2.readings import HEADLINE, READINGS
from companion.experiments.e2.rule import (
    PAPER_TRANSITIONS,
    RULE_THRESHOLD,
    curve_rule,
    dense_exact,
    verdict,
)

__all__ = ["e2_summary", "verdict_table", "decomposition_table",
           "gaps_by_rank_table", "curve_table", "summary_line", "plot_reading", "code_facts"]


# --------------------------------------------------------------------------- the rule


_CONFIG_KEYS = ("reading", "sizes", "readouts", "tests", "ranks", "seeds", "threshold")


def _check_result(result, name: str = "result") -> dict:
    """A reading result (:func:`~.readings.load_reading`), else an error naming `name`."""
    check_mapping(result, name)
    cfg, sizes = result.get("config"), result.get("sizes")
    if not (isinstance(cfg, dict) and isinstance(sizes, dict) and all(
            k in cfg for k in _CONFIG_KEYS) and cfg["reading"] in READINGS
            and len(sizes) == len(cfg["sizes"])):
        raise ValueError(f"{name} must be a reading result (load_reading): 'config' (with "
                         f"{', '.join(_CONFIG_KEYS)}) and one entry of 'sizes' per size")
    return result


def _check_summary(summary) -> dict:
    check_mapping(summary, "summary")
    if not (isinstance(summary.get("readings"), dict)
            and isinstance(summary.get("stored_protocols"), dict)):
        raise ValueError("summary must be an E2 summary (e2_summary): a dict with dicts "
                         "'readings' and 'stored_protocols'")
    return summary


def _fit_curve(acc: dict, test: str) -> np.ndarray:
    """The capacity curve for a test distribution: accuracy on the heads' own training
    sequences of it, or on all of them if they trained on none of it."""
    return np.asarray(acc[f"fit/{test}" if f"fit/{test}" in acc else "fit/all"])


def _judged(m, p, size, ranks, test, fit, dense, threshold) -> dict:
    """One size of one curve under the rule: its test and fit curves, its dense seeds."""
    return {"m": m, "P": p, "size": size,
            "rule": curve_rule(ranks, test, fit, threshold=threshold), "dense": dense_exact(dense)}


def _judge_reading(result: dict) -> dict:
    """The rule applied to a reading: per readout and test distribution, per size the
    judged curve, and the verdict over the sizes."""
    cfg = result["config"]
    out = {}
    for readout in cfg["readouts"]:
        out[readout] = {}
        for test in cfg["tests"]:
            per_size = []
            for (m, p), key in zip(cfg["sizes"], result["sizes"], strict=True):
                e = result["sizes"][key][readout]
                acc = e["heads"]["accuracy"]
                per_size.append(_judged(m, p, m if cfg["reading"] == "X" else p, cfg["ranks"],
                                        acc[f"test/{test}"], _fit_curve(acc, test),
                                        e["dense"]["accuracy"][f"test/{test}"],
                                        cfg["threshold"]))
            out[readout][test] = {"sizes": per_size, **verdict(per_size)}
    return out


def _size_line(s: dict) -> dict:
    r = s["rule"]
    return {"m": s["m"], "P": s["P"], "size": s["size"], "r_star": r["r_star"],
            "r_star_refined": r["r_star_refined"], "r_first": r["r_first"], "r50": r["r50"],
            "width_doublings": r["width"], "sharp": r["sharp"], "J": r["J"],
            "capacity_share": r.get("capacity_share"), "limit": r.get("limit"),
            "median": r["median"], "fit_median": r.get("train_median"),
            "dense_exact_seeds": s["dense"]["exact"], "dense_perfect_seeds":
            s["dense"]["perfect"], "seeds": s["dense"]["seeds"]}


def e2_summary(readings: dict, stored: dict | None = None) -> dict:
    """The content of results/e2_summary.json: the rule's constants, the paper's reported
    transitions, the headline, and per reading (and per stored protocol, judged by the same
    rule on its uniform test and training curves) the sizes, r* per size (or None), the
    threshold, the sharpness and dense exact seeds / seeds, with each verdict."""
    check_mapping(readings, "readings")
    for name, res in readings.items():
        if _check_result(res, f"readings[{name!r:.40}]")["config"]["reading"] != name:
            raise ValueError(f"readings: the result under {name!r:.40} is reading "
                             f"{res['config']['reading']!r}")
    for name, res in check_mapping(stored or {}, "stored").items():
        if not (isinstance(res, dict) and isinstance(res.get("widths"), dict)
                and isinstance(res.get("config"), dict) and all(k in res["config"] for k in (
                    "ranks", "threshold", "pool_sizes", "widths", "readout", "seeds"))):
            raise ValueError(f"stored[{name!r:.40}] must be a stored E2 protocol result "
                             f"(load_e2_protocols): 'config' and 'widths'")
    out = {"threshold": 0.9, "low": 0.5, "dense_exact_level": 0.99,
           "rule_commits": ["525fc89", "2d367f7"], "paper_transitions": list(PAPER_TRANSITIONS),
           "headline": dict(HEADLINE), "readings": {}, "stored_protocols": {}}
    for name, res in readings.items():
        cfg = res["config"]
        out["readings"][name] = {
            "problem_size": READINGS[name][2], "sizes": [list(s) for s in cfg["sizes"]],
            "ranks": cfg["ranks"], "seeds": len(cfg["seeds"]), "threshold": cfg["threshold"],
            "by_readout": {ro: {t: {"verdict": v["verdict"], "reason": v["reason"],
                                    "per_size": [_size_line(s) for s in v["sizes"]]}
                                for t, v in tests.items()}
                           for ro, tests in _judge_reading(res).items()}}
    for name, res in (stored or {}).items():
        cfg = res["config"]
        per_size = [_judged(int(m), cfg["pool_sizes"][cfg["widths"].index(int(m))], int(m),
                            cfg["ranks"], e["accuracy"]["uniform"], e["train_accuracy"],
                            e["dense"]["uniform"], cfg["threshold"])
                    for m, e in res["widths"].items()]
        v = verdict(per_size)
        out["stored_protocols"][name] = {
            "problem_size": "m", "readout": cfg["readout"], "test": "uniform",
            "seeds": len(cfg["seeds"]), "verdict": v["verdict"], "reason": v["reason"],
            "per_size": [_size_line(s) for s in per_size]}
    return out


# --------------------------------------------------------------------------- tables


def _dash(value) -> str:
    return "—" if value is None else str(value)


def _protocol_rows(summary: dict, test: str):
    """(protocol, readout, problem size, per-size lines, verdict, reason) per judged curve."""
    for name, r in summary["readings"].items():
        for readout, tests in r["by_readout"].items():
            if test in tests:
                v = tests[test]
                yield name, readout, r["problem_size"], v["per_size"], v["verdict"], v["reason"]
    for name, r in summary["stored_protocols"].items():
        if test == "uniform":
            yield (name.split("_")[0] + " (stored)", r["readout"], r["problem_size"],
                   r["per_size"], r["verdict"], r["reason"])


def verdict_table(summary: dict, test: str = "uniform", caption: str | None = None):
    """One row per protocol and readout: sizes, r* per size, the width of each transition
    in doublings, dense exact seeds per size, and the rule's verdict."""
    _check_summary(summary)
    check_choice(test, "test", HARD_DISTRIBUTIONS)
    rows = []
    for name, readout, what, sizes, v, reason in _protocol_rows(summary, test):
        rows.append({
            "protocol": name, "readout": readout,
            "sizes": f"{what} = " + ", ".join(str(s["size"]) for s in sizes),
            "r* per size": " → ".join(_dash(s["r_star_refined"] or s["r_star"]) for s in sizes),
            "width (doublings)": ", ".join(
                "—" if s["width_doublings"] is None else f"{s['width_doublings']:.1f}"
                for s in sizes),
            "dense exact": ", ".join(f"{s['dense_exact_seeds']}/{s['seeds']}" for s in sizes),
            "verdict": v, "first failing condition": "—" if v != "differs" else reason})
    return Table(rows, caption=caption)


def decomposition_table(summary: dict, test: str = "uniform", caption: str | None = None):
    """Rank against generalisation below the transition, per protocol, readout and size:
    the capacity share of the missing test accuracy and the call the rule makes."""
    _check_summary(summary)
    check_choice(test, "test", HARD_DISTRIBUTIONS)
    rows = []
    for name, readout, what, sizes, _, _ in _protocol_rows(summary, test):
        for s in sizes:
            share = s["capacity_share"]
            rows.append({"protocol": name, "readout": readout, "size": f"{what} = {s['size']}",
                         "capacity share": "—" if share is None else f"{share:.2f}",
                         "limited by": _dash(s["limit"]),
                         "test at r = 128": f"{s['median'][-1]:.2f}",
                         "fit at r = 128": ("—" if s["fit_median"] is None
                                            else f"{s['fit_median'][-1]:.2f}")})
    return Table(rows, caption=caption)


def gaps_by_rank_table(result: dict, readout: str, test: str = "uniform",
                       caption: str | None = None):
    """The decomposition rank by rank, per size of one reading: 'capacity / generalisation'
    with capacity 1 - a_fit and generalisation a_fit - a_test (medians over seeds, on the
    doubling grid); a * marks the ranks where generalisation is at least capacity."""
    _check_result(result)
    cfg = result["config"]
    check_choice(readout, "readout", tuple(cfg["readouts"]))
    check_choice(test, "test", tuple(cfg["tests"]))
    columns = {}
    for (m, p), key in zip(cfg["sizes"], result["sizes"], strict=True):
        acc = result["sizes"][key][readout]["heads"]["accuracy"]
        fit = np.median(_fit_curve(acc, test), axis=1)
        held = np.median(np.asarray(acc[f"test/{test}"]), axis=1)
        columns[m if READINGS[cfg["reading"]][2] == "m" else p] = (1 - fit, fit - held)
    what = READINGS[cfg["reading"]][2]
    rows = [[r] + [f"{cap[i]:.2f} / {gen[i]:.2f}" + (" *" if gen[i] >= cap[i] else "")
                   for cap, gen in columns.values()]
            for i, r in enumerate(cfg["ranks"]) if r & (r - 1) == 0]
    return Table(rows, columns=["r", *(f"{what} = {size}" for size in columns)],
                 caption=caption)


def curve_table(result: dict, readout: str, test: str = "uniform",
                caption: str | None = None):
    """Exact-sequence accuracy by rank (rows, then dense) and size (columns) of one reading:
    'median [min, max]' over seeds on the held-out sequences of distribution ``test``."""
    _check_result(result)
    cfg = result["config"]
    check_choice(readout, "readout", tuple(cfg["readouts"]))
    check_choice(test, "test", tuple(cfg["tests"]))

    def cell(values) -> str:
        a = np.asarray(values, dtype=np.float64)
        return f"{np.median(a):.2f} [{a.min():.2f}, {a.max():.2f}]"

    sizes = list(result["sizes"])
    rows = [[r] + [cell(result["sizes"][k][readout]["heads"]["accuracy"][f"test/{test}"][i])
                   for k in sizes] for i, r in enumerate(cfg["ranks"])]
    rows.append(["dense"] + [cell(result["sizes"][k][readout]["dense"]["accuracy"][
        f"test/{test}"]) for k in sizes])
    what = READINGS[cfg["reading"]][2]
    cols = [f"{what} = {m if what == 'm' else p}" for m, p in cfg["sizes"]]
    return Table(rows, columns=["r", *cols], caption=caption)


def summary_line(summary: Mapping, name: str, readout: str, test: str) -> dict:
    """One judged curve of `e2_summary.json` in words (chapter 7's tables beside the reported
    picture): problem sizes, r* per size (refined where run), sharpness, dense-exact seeds and
    the verdict with its reason."""
    entry = summary["readings"][name]["by_readout"][readout][test]
    per, size = entry["per_size"], summary["readings"][name]["problem_size"]
    return {
        "problem sizes": ", ".join(f"{size} = {s['size']}" for s in per),
        "transition r*": " → ".join("none" if s["r_star"] is None
                                    else str(s["r_star_refined"] or s["r_star"]) for s in per),
        "sharp?": ", ".join("sharp" if s["sharp"] else "not sharp" for s in per),
        "dense exact seeds": ", ".join(f"{s['dense_exact_seeds']}/{s['seeds']}" for s in per),
        "verdict": entry["verdict"], "reason": entry["reason"], "per_size": per}


def plot_reading(ax, result: Mapping, summary: Mapping, name: str, readout: str, test: str,
                 title: str | None = None) -> None:
    """Median test accuracy against rank, one curve per size (band: seeds), dense dashed in
    the curve's colour, r* starred, the rule's threshold dotted (chapter 7's figures)."""
    entry = summary["readings"][name]["by_readout"][readout][test]
    ranks = list(result["config"]["ranks"])
    for i, (key, line) in enumerate(zip(result["sizes"], entry["per_size"], strict=True)):
        color = f"C{i}"
        acc = np.asarray(result["sizes"][key][readout]["heads"]["accuracy"][f"test/{test}"])
        label = f"${summary['readings'][name]['problem_size']} = {line['size']}$"
        ax.plot(ranks, np.median(acc, axis=1), "o-", ms=3, color=color, label=label)
        ax.fill_between(ranks, acc.min(axis=1), acc.max(axis=1), color=color, alpha=0.15)
        dense = result["sizes"][key][readout]["dense"]["accuracy"][f"test/{test}"]
        ax.axhline(np.median(dense), color=color, ls="--", lw=1)
        star = line["r_star_refined"] or line["r_star"]
        if star is not None:
            ax.plot([star], [np.median(acc, axis=1)[ranks.index(star)]], marker="*", ms=13,
                    color="white", mec=color, mew=1.5, zorder=5)
    ax.axhline(RULE_THRESHOLD, color="grey", ls=":", lw=1)
    ax.set_xscale("log", base=2)
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(title or f"{name}, {readout} readout, {test} test", fontsize=10)
    ax.set_xlabel("feature rank $r$")


def code_facts(run: Mapping, ranks: Sequence[int]) -> dict:
    """The three facts chapter 7 checks on an S-code overlap run (committed or live): heads
    of rank 4 do not fit the witness triples (median < 0.9), rank 64 fits them on every seed
    (>= 0.95), and dense attention is exact on every seed."""
    ranks = list(ranks)
    fit = np.asarray(run["heads"]["accuracy"]["fit/witness"])
    dense = run["dense"]["accuracy"]["test/witness"]
    return {"low regime at r = 4": bool(np.median(fit[ranks.index(4)]) < 0.9),
            "r = 64 fits on every seed": bool((fit[ranks.index(64)] >= 0.95).all()),
            "dense exact on every seed": dense_exact(dense)["all_exact"]}
