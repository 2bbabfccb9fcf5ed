"""The pre-registered rule applied to E2's readings and stored protocols (chapter 7): the
content of results/e2_summary.json, the chapter's tables and figures, and the one
:func:`verdict_table` of both registered rules (this one's and the converged study's)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import contextmanager

import numpy as np

from companion.book import Table
from companion.checks import check_choice, check_instance, check_int_sequence, check_mapping
from companion.experiments.e2.data import DISTRIBUTIONS, TEST_DISTRIBUTIONS
from companion.experiments.e2.pipeline import HEADLINE, READINGS
from companion.experiments.e2.rule import (
    PAPER_TRANSITIONS,
    RULE_DENSE_EXACT,
    RULE_LOW,
    RULE_THRESHOLD,
    curve_rule,
    dense_exact,
    verdict,
)
from companion.experiments.e2.study import star

__all__ = ["e2_summary", "verdict_table", "decomposition_table", "gaps_by_rank_table",
           "curve_table", "summary_line", "plot_reading", "code_facts", "summarise_e2",
           "accuracy_table", "e2_model_values"]


@contextmanager
def _check_reading(what: str):
    """A record's missing parts (KeyError, TypeError, ...) as one ValueError: `what` it must be."""
    try:
        yield
    except (KeyError, TypeError, IndexError, AttributeError, ValueError) as exc:
        raise ValueError(f"{what}; reading it failed: {exc!r:.160}") from exc


def _check_result(result, readout, test) -> dict:
    """A reading's result (:func:`~.pipeline.load_e2`) holding `readout` and `test`."""
    cfg = check_mapping(result, "result").get("config")
    if not (isinstance(cfg, dict) and cfg.get("design") in READINGS
            and isinstance(result.get("sizes"), dict)):
        raise ValueError("result must be a reading's complete result (load_e2): 'config', "
                         "'sizes'")
    check_choice(readout, "readout", tuple(cfg["readouts"]))
    check_choice(test, "test", tuple(cfg["tests"]))
    return result


def _sizes(result: dict, readout: str):
    """Per size of a reading: m, P, the problem size (m or P), its label, the readout's units."""
    cfg = result["config"]
    what = READINGS[cfg["design"]][2]
    for (m, p), e in zip(cfg["sizes"], result["sizes"].values(), strict=True):
        size = m if what == "m" else p
        yield m, p, size, f"{what} = {size}", e[readout]


def _fit_curve(acc: dict, test: str) -> np.ndarray:
    """Accuracy on the heads' own training sequences of `test` (all of them if none)."""
    return np.asarray(acc[f"fit/{test}" if f"fit/{test}" in acc else "fit/all"])


def _judged(curves, ranks, threshold) -> dict:
    """A curve under the rule from (m, P, size, test, fit, dense) per size: verdict, lines."""
    lines = []
    for m, p, size, test, fit, dense in curves:
        r, d = curve_rule(ranks, test, fit, threshold=threshold), dense_exact(dense)
        lines.append({
            "m": m, "P": p, "size": size, "r_star": r["r_star"],
            "r_star_refined": r["r_star_refined"], "r_first": r["r_first"], "r50": r["r50"],
            "width_doublings": r["width"], "sharp": r["sharp"], "J": r["J"],
            "capacity_share": r.get("capacity_share"), "limit": r.get("limit"),
            "median": r["median"], "fit_median": r.get("train_median"),
            "dense_exact_seeds": d["exact"], "dense_perfect_seeds": d["perfect"],
            "seeds": d["seeds"]})
    return {**verdict(lines), "per_size": lines}


def _reading_lines(result: dict, readout: str, test: str) -> dict:
    return _judged([(m, p, size, e["heads"]["accuracy"][f"test/{test}"],
                     _fit_curve(e["heads"]["accuracy"], test),
                     e["dense"]["accuracy"][f"test/{test}"])
                    for m, p, size, _, e in _sizes(result, readout)],
                   result["config"]["ranks"], result["config"]["threshold"])


def e2_summary(readings: dict, stored: dict | None = None) -> dict:
    """The content of results/e2_summary.json: the rule's constants and per reading (and per
    stored protocol, on its uniform test and training curves) each curve judged by size."""
    check_mapping(readings, "readings")
    out = {"threshold": RULE_THRESHOLD, "low": RULE_LOW, "dense_exact_level": RULE_DENSE_EXACT,
           "rule_commits": ["525fc89", "2d367f7"], "paper_transitions": list(PAPER_TRANSITIONS),
           "headline": dict(HEADLINE), "readings": {}, "stored_protocols": {}}
    with _check_reading("readings, stored: the readings' results (load_e2) and stored "
                        "protocols (load_e2_protocols) by name"):
        for name, res in readings.items():
            cfg = res["config"]
            if cfg["design"] != name:
                raise ValueError(f"the result under {name!r:.40} is reading {cfg['design']!r}")
            out["readings"][name] = {
                "problem_size": READINGS[name][2], "sizes": [list(s) for s in cfg["sizes"]],
                "ranks": cfg["ranks"], "seeds": len(cfg["seeds"]),
                "threshold": cfg["threshold"],
                "by_readout": {ro: {t: _reading_lines(res, ro, t) for t in cfg["tests"]}
                               for ro in cfg["readouts"]}}
        for name, res in check_mapping(stored or {}, "stored").items():
            cfg = res["config"]
            pools = dict(map(tuple, cfg["sizes"]))
            out["stored_protocols"][name] = {
                "problem_size": "m", "readout": cfg["readouts"][0], "test": "uniform",
                "seeds": len(cfg["seeds"]), **_judged([
                    (int(m), pools[int(m)], int(m), e["accuracy"]["uniform"],
                     e["train_accuracy"], e["dense"]["uniform"])
                    for m, e in res["widths"].items()], cfg["ranks"], cfg["threshold"])}
    return out


def _dash(value, form: str = "") -> str:
    return "—" if value is None else format(value, form)


def _stars(per_size, none: str) -> str:
    """r* per size (refined where run), `none` where there is no transition."""
    return " → ".join(none if s["r_star"] is None else str(s["r_star_refined"] or s["r_star"])
                      for s in per_size)


def _dense(per_size) -> str:
    return ", ".join(f"{s['dense_exact_seeds']}/{s['seeds']}" for s in per_size)


def _check_summary(summary, test: str) -> str:
    """`test`, a distribution, once `summary` is an E2 summary (:func:`e2_summary`)."""
    if not (isinstance(check_mapping(summary, "summary").get("readings"), dict)
            and isinstance(summary.get("stored_protocols"), dict)):
        raise ValueError("summary must be an E2 summary (e2_summary): a dict with dicts "
                         "'readings' and 'stored_protocols'")
    return check_choice(test, "test", DISTRIBUTIONS)


def _protocol_rows(summary, test: str) -> list:
    """(protocol, readout, problem size, judged curve) per curve of `test` in an E2 summary."""
    return [(name, readout, r["problem_size"], tests[test])
            for name, r in summary["readings"].items()
            for readout, tests in r["by_readout"].items() if test in tests] + [
        (name.split("_")[0] + " (stored)", r["readout"], r["problem_size"], r)
        for name, r in summary["stored_protocols"].items() if test == "uniform"]


def verdict_table(summary: dict, test: str | None = None, caption: str | None = None):
    """The verdicts of a summary, one row per curve: of the study's (:func:`~.study.
    study_summary`; every test, or `test`) per arm, kind and test, r* at tau = 0.9 per size
    with its 95 % interval, the verdict and its reason, the arm's headline family marked; of
    E2's readings and stored protocols (:func:`e2_summary`; `test` default uniform) per
    protocol and readout: sizes, r* and transition width per size, dense exact, verdict."""
    if "arms" not in check_mapping(summary, "summary"):
        return Table([{
            "protocol": name, "readout": readout,
            "sizes": f"{what} = " + ", ".join(str(s["size"]) for s in v["per_size"]),
            "r* per size": _stars(v["per_size"], "—"),
            "width (doublings)": ", ".join(_dash(s["width_doublings"], ".1f")
                                           for s in v["per_size"]),
            "dense exact": _dense(v["per_size"]), "verdict": v["verdict"],
            "first failing condition": "—" if v["verdict"] != "differs" else v["reason"]}
            for name, readout, what, v in _protocol_rows(
                summary, _check_summary(summary, test or "uniform"))],
            caption=caption)
    return Table([{
        "arm": arm + (" (headline)" if (kind, t) == tuple(summary["headlines"][arm]) else ""),
        "kind, test": f"{kind}, {t}",
        "r* at 0.9 [95 % interval]": "; ".join(star(s, 0.9) for s in fam["per_size"]),
        "verdict": f"{fam['verdict']} ({fam['reason']})"}
        for arm, kinds in summary["arms"].items() for kind, tests in kinds.items()
        for t, fam in tests.items() if test in (None, t)], caption=caption)


def decomposition_table(summary: dict, test: str = "uniform", caption: str | None = None):
    """Per protocol, readout and size: the capacity share below the transition, the call."""
    return Table([{
        "protocol": name, "readout": readout, "size": f"{what} = {s['size']}",
        "capacity share": _dash(s["capacity_share"], ".2f"), "limited by": _dash(s["limit"]),
        "test at r = 128": f"{s['median'][-1]:.2f}",
        "fit at r = 128": _dash(s["fit_median"] and s["fit_median"][-1], ".2f")}
        for name, readout, what, v in _protocol_rows(summary, _check_summary(summary, test))
        for s in v["per_size"]],
        caption=caption)


def gaps_by_rank_table(result: dict, readout: str, test: str = "uniform",
                       caption: str | None = None):
    """Per grid rank and size of one reading, 'capacity / generalisation' = 1 - a_fit /
    a_fit - a_test (medians over seeds); * where generalisation is at least capacity."""
    columns = {}
    for *_, label, e in _sizes(_check_result(result, readout, test), readout):
        acc = e["heads"]["accuracy"]
        fit = np.median(_fit_curve(acc, test), axis=1)
        columns[label] = (1 - fit, fit - np.median(np.asarray(acc[f"test/{test}"]), axis=1))
    rows = [[r] + [f"{cap[i]:.2f} / {gen[i]:.2f}" + (" *" if gen[i] >= cap[i] else "")
                   for cap, gen in columns.values()]
            for i, r in enumerate(result["config"]["ranks"]) if r & (r - 1) == 0]
    return Table(rows, columns=["r", *columns], caption=caption)


def _cell(values, spread: bool = True) -> str:
    a = np.asarray(values, dtype=np.float64)
    return f"{np.median(a):.2f}" + (f" [{a.min():.2f}, {a.max():.2f}]" if spread else "")


def rank_table(ranks, columns: dict, spread: bool = True, caption: str | None = None) -> Table:
    """Accuracy by rank (rows, then dense) and size, ``columns`` {label: (per rank the seeds'
    accuracies, the dense seeds')}: 'median [min, max]' over seeds, or the median alone."""
    rows = [[r] + [_cell(h[i], spread) for h, _ in columns.values()] for i, r in enumerate(ranks)]
    rows.append(["dense"] + [_cell(d, spread) for _, d in columns.values()])
    return Table(rows, columns=["r", *columns], caption=caption)


def curve_table(result: dict, readout: str, test: str = "uniform",
                caption: str | None = None):
    """Held-out accuracy on ``test`` by rank and size of one reading, 'median [min, max]'."""
    _check_result(result, readout, test)
    return rank_table(result["config"]["ranks"], {
        label: (e["heads"]["accuracy"][f"test/{test}"], e["dense"]["accuracy"][f"test/{test}"])
        for *_, label, e in _sizes(result, readout)}, caption=caption)


def summary_line(summary: Mapping, name: str, readout: str, test: str) -> dict:
    """One judged curve of `e2_summary.json` in words (chapter 7's tables)."""
    entry = summary["readings"][name]["by_readout"][readout][test]
    per, size = entry["per_size"], summary["readings"][name]["problem_size"]
    return {
        "problem sizes": ", ".join(f"{size} = {s['size']}" for s in per),
        "transition r*": _stars(per, "none"),
        "sharp?": ", ".join("sharp" if s["sharp"] else "not sharp" for s in per),
        "dense exact seeds": _dense(per),
        "verdict": entry["verdict"], "reason": entry["reason"], "per_size": per}


def plot_reading(ax, result: Mapping, summary: Mapping, name: str, readout: str, test: str,
                 title: str | None = None) -> None:
    """Chapter 7's figures: median test accuracy by rank per size, seed bands, dense, r*, tau."""
    entry = summary["readings"][name]["by_readout"][readout][test]
    ranks = list(result["config"]["ranks"])
    for i, ((*_, label, e), line) in enumerate(zip(_sizes(result, readout), entry["per_size"],
                                                   strict=True)):
        color = f"C{i}"
        acc = np.asarray(e["heads"]["accuracy"][f"test/{test}"])
        ax.plot(ranks, np.median(acc, axis=1), "o-", ms=3, color=color, label=f"${label}$")
        ax.fill_between(ranks, acc.min(axis=1), acc.max(axis=1), color=color, alpha=0.15)
        ax.axhline(np.median(e["dense"]["accuracy"][f"test/{test}"]), color=color, ls="--", lw=1)
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
    """Chapter 7's three facts of an S-code overlap run: rank 4 does not fit the witness
    triples (median < 0.9), rank 64 fits them on every seed (>= 0.95), dense is exact."""
    ranks = list(ranks)
    fit = np.asarray(run["heads"]["accuracy"]["fit/witness"])
    dense = run["dense"]["accuracy"]["test/witness"]
    return {"low regime at r = 4": bool(np.median(fit[ranks.index(4)]) < 0.9),
            "r = 64 fits on every seed": bool((fit[ranks.index(64)] >= 0.95).all()),
            "dense exact on every seed": dense_exact(dense)["all_exact"]}


# --------------------------------------------------------------------------- stored protocols


def _summary_row(m: str, e: dict) -> dict:
    row = {"m": int(m), "ranks": e["ranks"]}
    for name in TEST_DISTRIBUTIONS:
        row[f"median_{name}"] = [float(np.median(a)) for a in np.asarray(e["accuracy"][name])]
        row[f"transition_{name}"] = e["transition_r"][name]
        row[f"dense_min_{name}"] = float(min(e["dense"][name]))
    row["median_train"] = [float(np.median(a)) for a in np.asarray(e["train_accuracy"])]
    return row


def summarise_e2(result: dict) -> list[dict]:
    """Per width of a stored protocol: median accuracy per rank (tests, train), the rule's r*,
    the dense worst seed."""
    check_mapping(result, "result")
    with _check_reading("result must be a stored protocol's result (load_e2: config, widths "
                        "with ranks, accuracy, dense, ...)"):
        return [_summary_row(m, e)
                for m, e in sorted(result["widths"].items(), key=lambda kv: int(kv[0]))]


def accuracy_table(result: dict, distribution: str, caption: str | None = None) -> Table:
    """Accuracy by rank and width, 'median [min, max]' over seeds (the median alone on "train")."""
    check_choice(distribution, "distribution", (*TEST_DISTRIBUTIONS, "train"))
    train = distribution == "train"
    return rank_table(result["config"]["ranks"], {
        f"m = {m}": ((e["train_accuracy"], e["dense_train_accuracy"]) if train
                     else (e["accuracy"][distribution], e["dense"][distribution]))
        for m, e in result["widths"].items()}, spread=not train, caption=caption)


def e2_model_values(width_result: dict, distribution: str = "uniform", seeds=None,
                    width=None) -> dict:
    """{(width, rank or "dense", seed): test accuracy} of one width's record."""
    check_choice(distribution, "distribution", TEST_DISTRIBUTIONS)
    check_instance(width, "width", (int, np.integer, str, type(None)))  # a key of the result
    with _check_reading("width_result must be a width's result with 'ranks', 'dense' and "
                        "'accuracy' per distribution"):
        heads, dense = width_result["accuracy"][distribution], width_result["dense"][distribution]
        ranks = width_result["ranks"]
    seeds = list(range(len(dense))) if seeds is None else check_int_sequence(seeds, "seeds", 0)
    if len(seeds) != len(dense):
        raise ValueError(f"seeds must name the result's {len(dense)} seeds, got {len(seeds)}")
    return {(width, r, s): float(acc[j]) for r, acc in zip([*ranks, "dense"], [*heads, dense],
                                                          strict=True)
            for j, s in enumerate(seeds)}
