"""The converged E2 study's analysis (companion.experiments.e2.study): the pilot's choice,
the bootstrap, both sharpness rules and the registered verdict, the committed summary and
ledger, and the chapter's readers on a tiny complete study (its data and units:
test_data.py, test_pipeline.py)."""

import json
from pathlib import Path

import numpy as np
import pytest

from companion.book import seed_everything
from companion.experiments.e2 import pipeline as pl
from companion.experiments.e2 import study as st
from companion.experiments.e2.verdicts import verdict_table
from companion.experiments.sweep import config_dict

RESULTS = Path(__file__).resolve().parents[3] / "results" / "e2_study"


@pytest.fixture(autouse=True)
def _one_thread():
    seed_everything(0, threads=1)


# --------------------------------------------------------------------------- the pilot


def _pilot_run(lr, steps, nka, dense):
    """A stored pilot run whose models' validation histories are given, evaluated at steps
    0, steps, steps + 2000 (nka, dense: per model the three validation accuracies)."""
    unit = {"eval_steps": [0, steps, steps + 2000], "models": [
        {"kind": "nka", "val_history": h} for h in nka] + [
        {"kind": "dense", "val_history": h} for h in dense]}
    return {"config": {"lr": lr, "steps": steps}, "units": {"u": unit}}


def test_pilot_choice_maximises_validation_with_the_registered_ties():
    runs = [_pilot_run(0.01, 2000, [[0, 0.80, 0.80]], [[0, 0.5, 0.5]]),
            _pilot_run(0.01, 5000, [[0, 0.804, 0.95]], [[0, 0.9, 0.9]]),
            _pilot_run(0.03, 2000, [[0, 0.70, 0.70]], [[0, 0.99, 0.99]])]
    choice = st.pilot_choice(runs)
    # 5000 steps with the surrogate phase wins (0.95); dense keeps those steps, its own lr
    assert (choice["lr"], choice["steps"], choice["surrogate_steps"]) == (0.01, 5000, 2000)
    assert choice["dense_lr"] == 0.01 and len(choice["options"]) == 6
    runs[1] = _pilot_run(0.01, 5000, [[0, 0.804, 0.804]], [[0, 0.9, 0.9]])
    choice = st.pilot_choice(runs)  # 0.804 ties 0.80 (within 0.005): fewer steps, no surrogate
    assert (choice["steps"], choice["surrogate_steps"]) == (2000, 0)
    assert choice["dense_lr"] == 0.03  # dense: the best lr at 2000 steps, no surrogate


def test_the_committed_choices_are_what_the_rule_makes_of_the_committed_pilots():
    files = pl.study_files(RESULTS)
    for key, choice in pl.PILOT_CHOICE.items():
        runs = files["pilot"][key]
        assert len(runs) == len(pl.pilot_configs(*key)) and all(map(pl.study_complete, runs))
        assert {k: v for k, v in st.pilot_choice(runs).items() if k != "options"} == choice
        cfg = pl.STUDY[key]
        assert (cfg.lr, cfg.steps, cfg.surrogate_steps, cfg.dense_lr[0][1]) == (
            choice["lr"], choice["steps"], choice["surrogate_steps"], choice["dense_lr"])
    assert st.planned_units("A", "mlp") == 4 * 3 * 7 and st.planned_units("B", "learned") == 63


def test_the_committed_study_summary_is_what_the_rule_makes_of_the_committed_study():
    runs = pl.study_files(RESULTS)["study"]
    assert set(runs) == set(pl.STUDY)  # every (arm, kind), each the registered configuration
    for key, run in runs.items():
        assert run["config"] == config_dict(pl.STUDY[key])
        assert pl.study_complete(run), key
    stored = json.loads((RESULTS / "e2_study_summary.json").read_text())
    again = st.study_summary({f"{a}_{k}": run for (a, k), run in runs.items()})
    assert json.loads(json.dumps(again)) == stored
    # what the issue asks of it: both arms at all their sizes, ranks up to >= 512, >= 9
    # replicates per point, a convergence flag per rank and an interval per threshold
    for arm, kinds in stored["arms"].items():
        assert set(kinds) == set(pl.ARMS[arm])
        for tests in kinds.values():
            for fam in tests.values():
                assert max(fam["ranks"]) >= 512
                assert [line["size"] for line in fam["per_size"]] == list(pl.SIZES[arm])
                for line in fam["per_size"]:
                    assert line["replicates"] >= 9
                    assert len(line["converged"]) == len(fam["ranks"])
                    assert set(line["interval_log2"]) == {str(t) for t in stored["taus"]}


def test_the_ledger_carries_the_study_verdict_of_each_arm():
    import sys

    sys.path.insert(0, str(RESULTS.parents[1] / "book" / "_ext"))
    import claims_ledger

    stored = json.loads((RESULTS / "e2_study_summary.json").read_text())
    row = next(r for r in claims_ledger.load_claims(RESULTS.parents[1])
               if r["id"] == "e2-transition")
    verdicts = set()
    for arm, (kind, test) in stored["headlines"].items():
        fam = stored["arms"][arm][kind][test]
        verdicts.add(fam["verdict"])
        stars = " → ".join("none" if s["r_star"]["0.9"] is None else str(s["r_star"]["0.9"])
                           for s in fam["per_size"])
        assert f"arm {arm}" in row["ours"] and stars in row["ours"], (arm, stars)
        assert fam["verdict"] in row["ours"]
    # the ledger has no "refuted" or "inconclusive": those are our protocol's labels, and
    # either leaves the reported transition not reproduced (book/claims.yml's vocabulary)
    expected = ("reproduced" if verdicts == {"reproduced"} else "reproduced on our family"
                if verdicts <= {"reproduced", "reproduced with our sizes"} else "not reproduced")
    assert row["verdict"] == expected
    # the decisive study's registered verdict, in the row beside the converged study's
    decisive = json.loads((RESULTS / "e2_decisive_summary.json").read_text())
    fam = decisive["tests"][decisive["headline"]]
    top = [line["median"][-1] for line in fam["per_size"] if line["size"] in (12, 14)]
    ours = " ".join(row["ours"].split())
    assert f"reads {{rule-label}}`{fam['verdict']}`" in ours and fam["verdict"] != "reproduced"
    assert "at m = 12 and 14 ({:.2f}, {:.2f})".format(*top) in ours


def test_the_committed_decisive_summary_is_what_the_rule_makes_of_the_committed_run():
    run = pl.load_e2(RESULTS / "e2_decisive_A_exp-affine.json")
    stored = json.loads((RESULTS / "e2_decisive_summary.json").read_text())
    assert json.loads(json.dumps(st.decisive_summary(run))) == stored


# --------------------------------------------------------------------------- the analysis


RANKS = [1, 2, 4, 8, 16, 32]


def test_bootstrap_interval_collapses_on_identical_replicates():
    acc = np.tile(np.array([[0.1], [0.2], [0.3], [0.95], [0.97], [0.99]]), (1, 9))
    assert st.bootstrap_interval(RANKS, acc, 0.9) == (3.0, 3.0)
    assert st.bootstrap_interval(RANKS, acc, 0.999) == (6.0, 6.0)  # above the grid: log2 32 + 1
    # one replicate in nine solves at rank 2 already: the interval widens downwards only
    acc2 = acc.copy()
    acc2[1:3, 0] = 0.95
    lo, hi = st.bootstrap_interval(RANKS, acc2, 0.9)
    assert lo <= 3.0 and hi == 3.0


def test_bootstrap_interval_matches_a_plain_loop():
    rng = np.random.default_rng(3)
    acc = np.clip(np.linspace(0, 1, 6)[:, None] + rng.normal(0, 0.15, (6, 9)), 0, 1)
    pick = np.random.default_rng(0).integers(0, 9, size=(2000, 9))
    stars = []
    for row in pick:
        med = np.median(acc[:, row], axis=1)
        below = [i for i, a in enumerate(med) if a < 0.5]
        k = below[-1] + 1 if below else 0
        stars.append(np.log2(RANKS[k]) if k < len(RANKS) else np.log2(RANKS[-1]) + 1)
    expect = (np.quantile(stars, 0.025, method="lower"),
              np.quantile(stars, 0.975, method="higher"))
    assert st.bootstrap_interval(RANKS, acc, 0.5) == expect


def test_relative_width():
    assert st.relative_width(RANKS, [0.1, 0.1, 0.1, 0.9, 0.9, 0.9]) == 1.0  # a step
    assert st.relative_width(RANKS, [0.1, 0.26, 0.42, 0.58, 0.74, 0.9]) == 5.0  # a ramp
    assert st.relative_width(RANKS, [0.5] * 6) is None  # no range
    # the running maximum: a dip after a rise does not make a curve sharp
    assert st.relative_width(RANKS, [0.1, 0.5, 0.1, 0.1, 0.9, 0.9]) == 4.0


def _line(size, star, ci, sharp=True, width=1.0, top=1.0, dense=True):
    return {"size": size, "train_last": [0.5, top], "r_star": {"0.9": star},
            "interval_log2": {"0.9": ci}, "sharp_absolute": sharp, "relative_width": width,
            "dense_exact": dense}


def test_the_verdict_in_its_registered_order():
    moving = [_line(6, 8, (3, 3)), _line(8, 16, (4, 4)), _line(10, 64, (6, 6))]
    assert st._verdict(moving)[0] == "reproduced"
    rel = [dict(s, sharp_absolute=False) for s in moving]
    assert st._verdict(rel)[0] == "reproduced with our sizes"
    unfit = [dict(s, train_last=[0.5, 0.9]) for s in moving[:2]] + moving[2:]
    assert st._verdict(unfit)[0] == "inconclusive"  # before anything else
    flat = [_line(6, 8, (2, 4)), _line(8, 8, (3, 4)), _line(10, 16, (3, 5))]
    assert st._verdict(flat) == ("refuted at convergence", "the r* intervals of all sizes "
                                 "overlap: it does not move")
    ramps = [dict(s, sharp_absolute=False, relative_width=3.0) for s in moving]
    assert st._verdict(ramps)[0] == "refuted at convergence"
    dense = [dict(s, dense_exact=False) for s in moving]
    assert st._verdict(dense)[1] == "dense attention is not exact at every size"


def test_summary_and_chapter_readers_on_a_tiny_complete_study(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = {}
    for arm, kind, sizes in (("A", "exp-affine", (6, 7)), ("B", "overlap", (8, 16))):
        cfg = pl.study_config(arm, kind, sizes, ranks=(1, 2), rank_groups=((1, 2),),
                              seeds=(0,), splits=(0, 1), n_train=60, n_test=30, steps=3,
                              eval_every=1)
        runs[f"{arm}_{kind}"] = pl.run_e2(cfg, out=pl.e2_path(tmp_path, cfg))
    summary = st.study_summary(runs)
    fam = summary["arms"]["A"]["exp-affine"]["uniform"]
    assert [s["size"] for s in fam["per_size"]] == [6, 7]
    line = fam["per_size"][0]
    assert line["replicates"] == 2 and len(line["median"]) == 2 == len(line["converged"])
    assert set(line["interval_log2"]) == {"0.85", "0.9", "0.95"}
    assert fam["verdict"] in ("reproduced", "reproduced with our sizes",
                              "refuted at convergence", "inconclusive")
    assert set(summary["arms"]["B"]["overlap"]) == {"uniform", "witness"}
    table = verdict_table(summary)
    assert len(table.values) == 4 and sum("(headline)" in r[0] for r in table.values) == 2
    assert len(verdict_table(summary, "witness").values) == 2
    files = pl.study_files(tmp_path / "e2_study")
    assert set(files["study"]) == {("A", "exp-affine"), ("B", "overlap")}
    run = files["study"]["A", "exp-affine"]
    assert pl.complete_sizes(run) == [6, 7] and pl.study_complete(run)
    partial = {**run, "units": {k: u for k, u in run["units"].items() if k[:2] != "A7"}}
    assert pl.complete_sizes(partial) == [6] and not pl.study_complete(partial)
    assert len(st.size_table(run, "uniform").values) == 2
    assert len(st.gap_table(run, "witness").values) == 2
    assert "A" in str(st.status_table(files))
    fig, ax = plt.subplots()
    st.plot_study(ax, run, "uniform")
    assert len(ax.lines) >= 2
    plt.close(fig)


def test_the_sizing_script_times_a_unit():
    import importlib.util

    path = Path(__file__).resolve().parents[3] / "scripts" / "size_e2_study.py"
    spec = importlib.util.spec_from_file_location("size_e2_study", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tiny = pl.study_config("A", "mlp", (6,), ranks=(2, 8), rank_groups=((2, 8),),
                           seeds=(0, 1), splits=(0,), n_train=300, n_test=100, hidden=(8,))
    seconds = module.step_seconds(tiny, (6, 64), (2, 8), probe=2)
    assert 0 <= seconds < 5
    assert st.planned_units("A", "mlp") == 4 * 3 * 7 and st.planned_units("B", "learned") == 63


# --------------------------------------------------------------------------- decisive study


def test_the_step_is_measured_from_the_rank_one_floor():
    ranks = [1, 2, 4, 8, 16, 32]
    step = st.floor_step(ranks, [0.0, 0.05, 0.08, 0.95, 0.97, 1.0])
    assert (step["floor"], step["r_lo"], step["r_hi"], step["width"]) == (0.0, 4, 8, 1.0)
    # the same rise from a floor of 0.6 is measured against 0.64 and 0.96: r_lo is 4, and
    # 0.95 is not solving yet, so the step ends at 32 and is not sharp
    step = st.floor_step(ranks, [0.6, 0.6, 0.62, 0.95, 0.955, 0.97])
    assert (step["r_lo"], step["r_hi"], step["width"]) == (4, 32, 3.0)
    # a dip is read through the running maximum; a curve that never solves has no r_hi
    assert st.floor_step(ranks, [0.0, 0.5, 0.05, 0.6, 0.7, 0.8])["r_lo"] == 1
    assert st.floor_step(ranks, [0.0, 0.5, 0.05, 0.6, 0.7, 0.8])["r_hi"] is None


def _width(size, star=8, width=1.0, ci=(2.0, 3.0), fails=()):
    return {"size": size, "r_star": {"0.9": star}, "width": width,
            "interval_log2": {"0.9": ci}, "fails": list(fails)}


def test_the_decisive_verdict_never_refutes_without_the_papers_control():
    moving = [_width(6, ci=(2, 3)), _width(8, ci=(3, 4)), _width(10, ci=(4, 5))]
    assert st._decisive_verdict(moving)[0] == "reproduced"
    flat = [_width(6, width=3.0), _width(8, width=2.0), _width(10)]
    assert st._decisive_verdict(flat) == ("refuted at convergence",
                                          "no sharp step from the floor at m = [6, 8]")
    assert st._decisive_verdict([_width(6), _width(8), _width(10)])[0] == "refuted at convergence"
    # the same blunt curves where dense softmax is not exact: those widths are no evidence
    missing = [_width(6, width=3.0, fails=["dense not exact"]),
               _width(8, width=2.0, fails=["dense not exact"]), _width(10), _width(12)]
    verdict, reason = st._decisive_verdict(missing)
    assert verdict == "inconclusive" and "m = 6: dense not exact" in reason
    no_star = [_width(6, star=None, width=None), _width(8, star=None, width=None), _width(10)]
    assert st._decisive_verdict(no_star) == (
        "inconclusive", "no r* on the grid at two or more judged widths")


def test_the_decisive_study_runs_on_the_one_pipeline_and_is_judged(tmp_path):
    cfg = pl.DECISIVE["A", "exp-affine"]
    assert [m for m, _ in cfg.sizes] == [6, 8, 10, 12, 14] and cfg.tests[-1] == "complement"
    assert (cfg.lr, cfg.steps, cfg.surrogate_steps, cfg.eval_every) == (0.01, 2000, 2000, 100)
    assert (cfg.seeds, cfg.splits) == ((0, 1), (0, 1, 2))  # the registered budget cut
    assert pl.e2_path(tmp_path, cfg).name == "e2_decisive_A_exp-affine.json"
    tiny = pl.study_config("A", "exp-affine", (6, 7), ranks=(1, 2), rank_groups=((1, 2),),
                           seeds=(0,), splits=(0, 1), n_train=60, n_test=30, steps=3,
                           eval_every=1, tests=cfg.tests)
    run = pl.run_e2(tiny, out=pl.e2_path(tmp_path, tiny))
    model = run["units"]["A6/split0/r1-2"]["models"][0]
    assert set(model["test"]) == {"uniform", "witness", "complement"}
    assert run["units"]["A6/split0/r1-2"]["sizes"]["val/complement"] == 30
    summary = json.loads(json.dumps(st.decisive_summary(pl.load_e2(pl.e2_path(tmp_path, tiny)))))
    fam = summary["tests"]["complement"]
    assert [s["size"] for s in fam["per_size"]] == [6, 7] and summary["headline"] == "complement"
    assert fam["verdict"] == "inconclusive"  # three steps train nothing: no width is judged
    assert all(s["fails"] and 0 <= s["floor"] <= 1 for s in fam["per_size"])
    assert pl.study_files(tmp_path / "e2_study") == {"study": {}, "pilot": {}}  # kept apart
    flagged = pl.extension_units(run)  # this pass's flagged units ran longer, in the same call
    assert sorted(k for k in run["units"] if k.endswith("/x2")) == [k + "/x2" for k in flagged]
    # width by width: width 6's extension ran before any unit of width 7
    keys = list(run["units"])
    assert [k[:2] for k in keys] == sorted(k[:2] for k in keys) and any(
        k.startswith("A6") and k.endswith("/x2") for k in keys)
    assert keys[:2] == ["A6/split0/r1-2", "A6/split1/r1-2"]  # the largest ranks start first
    assert list(pl.run_e2(tiny)["units"]) == keys  # and in memory, the same units in that order
    for key in flagged:
        assert run["units"][key + "/x2"]["eval_steps"][-1] == 6
    assert summary["extend"] == summary["extended"] == flagged
    table = st.decisive_table(summary, caption="tiny")._repr_html_()
    assert table.count("<tr>") == 3 and "m = 7" in table and "no: " in table


def test_the_extension_rule_flags_units_whose_checkpoint_is_the_last_evaluation():
    def unit(*best):
        return {"eval_steps": [0, 100, 200], "models": [{"best_step": b} for b in best]}

    run = {"units": {"a": unit(200, 100), "b": unit(200, 100, 100), "c": unit(200, 200, 0)}}
    assert st.extension_units(run) == ["a", "c"]


def test_extended_units_are_planned_run_longer_and_read_in_place_of_their_first_pass():
    """The rule's extensions: planned (decisive study only) for the flagged stored units, with
    both phases doubled, and read in place of the first pass, which stays in the file."""
    cfg = pl.DECISIVE["A", "exp-affine"]
    first = {key for key, *_ in pl.unit_plan(config_dict(cfg))}

    def unit(last_best):
        return {"eval_steps": [0, 100, 200], "models": [{"best_step": 200 if last_best else 0}]}

    stored = {"A6/split0/dense": unit(True), "A6/split1/dense": unit(False)}
    plan = pl.unit_plan(config_dict(cfg), stored)
    assert {key for key, *_ in plan} - first == {"A6/split0/dense/x2"}
    assert plan[-1][1:] == next(u for u in plan if u[0] == "A6/split0/dense")[1:]
    units = {u.key: u for u in pl._units(cfg, "cpu", stored)}
    longer = units["A6/split0/dense/x2"].args[0]
    assert (longer.steps, longer.surrogate_steps) == (4000, 4000)
    assert units["A6/split0/dense"].args[0] is cfg
    study = pl.STUDY["A", "exp-affine"]  # the converged study has no extension rule
    assert {k for k, *_ in pl.unit_plan(config_dict(study), stored)} == {
        k for k, *_ in pl.unit_plan(config_dict(study))}
    run = {"units": {**stored, "A6/split0/dense/x2": unit(False)}}
    assert st.extended_run(run)["units"] == {"A6/split0/dense": unit(False),
                                             "A6/split1/dense": unit(False)}
    assert st.extension_units(run) == ["A6/split0/dense"]  # first passes only


def test_chapter_7_states_the_committed_decisive_verdict():
    """The chapter's paragraph on the decisive study says what the committed file makes of
    it (floor, the climb from it, where it ends, r*, why a width is not judged, the verdict and
    its reason, the largest one-doubling rise), and the summary's bullet the same numbers."""
    run = pl.load_e2(RESULTS / "e2_decisive_A_exp-affine.json")
    summary = st.decisive_summary(run)
    family = summary["tests"]["complement"]
    lines = {s["size"]: s for s in family["per_size"]}
    text = " ".join((RESULTS.parents[1] / "notebooks" / "07_ood_scaling.py").read_text().replace(
        "# ", "").split())
    ranks = run["config"]["ranks"]
    assert pl.study_complete(run) and sorted(lines) == [6, 8, 10, 12, 14]
    assert set(summary["extend"]) == set(summary["extended"])
    assert (family["verdict"], family["reason"]) == (
        "inconclusive", "no r* on the grid at two or more judged widths")
    assert "**The verdict: {rule-label}`inconclusive`.** Every unit is in" in text
    six, eight, ten, twelve, fourteen = (lines[m] for m in (6, 8, 10, 12, 14))
    n = {u["sizes"]["test/complement"] for u in run["units"].values()}
    assert n == {4000} and "rank 1 solves a median of {:g}, {:g}, {:g} and {:g} of the 4,000 " \
        "complement test triples".format(*(round(line["floor"] * 4000, 1)
                                           for line in (eight, ten, twelve, fourteen))) in text
    assert all(line["dense_exact"] for line in (eight, ten, twelve, fourteen))
    assert [m for m, line in lines.items() if not line["fails"]] == [10, 12, 14]
    assert "Three widths are judged" in text
    assert (ten["r_lo"], ten["r_hi"], ten["width"]) == (2, 128, 6)
    assert f"climbs from {ten['median'][1]:.2f} at rank 2 to {ten['median'][7]:.2f} at rank " \
           f"128: a step of 6 doublings" in text
    assert ten["r_star"]["0.9"] == 128 and ten["interval_log2"]["0.9"] == (7, 11)  # 11: above
    top12, top14 = twelve["median"], fourteen["median"]
    assert max(top12) < 0.9 > max(top14) and twelve["r_star"]["0.9"] is fourteen["r_star"][
        "0.9"] is None and twelve["r_lo"] == fourteen["r_lo"] == 4
    assert f"the median is {top12[2]:.2f} and {top14[2]:.2f} at rank 4, and creeps up to " \
           f"{top12[-1]:.2f} and {top14[-1]:.2f} at rank 1,024" in text
    assert top12[-1] == max(top12) and top14[-1] == max(top14)
    assert f"at $m = 6$ the floor is {six['floor']:.2f}" in text
    assert six["fails"] == ["floor above 1/2", "step not converged"]
    assert eight["fails"] == ["step not converged"] and not eight["point_converged"][0]
    # the key result and the summary's bullet: the same numbers, and the floor bound
    assert max(line["floor"] for line in (eight, ten, twelve, fourteen)) <= 0.07
    assert "rank 1 solves at most 0.07 of the complement triples from $m = 8$ on" in text
    assert "from a floor of at most 0.07 the median takes 6 doublings to reach 0.9 at $m = 10$" \
        in text
    assert f"at $m = 10$, {ten['median'][1]:.2f} at rank 2 to {ten['median'][7]:.2f} at rank " \
           f"128; at $m = 12$ and 14, {top12[-1]:.2f} and {top14[-1]:.2f} at rank 1,024" in text
    said = {8: "ranks 2 → 4 at $m = 8$ (+{:.2f})", 10: "ranks 4 → 8 at $m = 10$ (+{:.2f})",
            12: "and $m = 12$ (+{:.2f})", 14: "ranks 8 → 16 at $m = 14$ (+{:.2f})"}
    steps = {8: (2, 4), 10: (4, 8), 12: (4, 8), 14: (8, 16)}
    for m, line in ((8, eight), (10, ten), (12, twelve), (14, fourteen)):  # largest rise
        rise = [b - a for a, b in zip(line["median"], line["median"][1:])]
        i = rise.index(max(rise))
        assert (ranks[i], ranks[i + 1]) == steps[m]
        assert said[m].format(rise[i]) in text


def test_the_registrations_status_counts_the_committed_decisive_units():
    run = pl.load_e2(RESULTS / "e2_decisive_A_exp-affine.json")
    first = [k for k in run["units"] if not k.endswith("/x2")]
    planned = len(pl.unit_plan(config_dict(pl.DECISIVE["A", "exp-affine"])))
    text = " ".join((RESULTS.parents[1] / "book" / "e2_preregistration.md").read_text().split())
    status = text[text.index("### Status of the decisive runs"):]
    assert f"**{len(first)} of the {planned} first-pass units**" in status
    assert f"the **{len(run['units']) - len(first)} extensions**" in status

    def hours(keys):
        return sum(run["units"][k]["wall_time"] for k in keys) / 3600

    small = [k for k in run["units"] if int(k.split("/")[0][1:]) <= 10]
    done = [k for k in small if k in first]
    assert f"$m \\le 10$ add up to {hours(small):.1f} CPU-hours: {hours(done):.1f} for the " \
           f"first passes and {hours(small) - hours(done):.1f} for the " \
           f"{len(small) - len(done)} extensions" in status
    assert f"$m = 10$ alone took {hours(k for k in done if k.startswith('A10')):.2f}" in status
    study = pl.load_e2(RESULTS / "e2_study_A_exp-affine.json")["units"]

    def slower(k):  # per seed: 2 seeds here, 3 in the converged study
        return run["units"][k]["wall_time"] / study[k]["wall_time"] * 3 / 2

    before = ("A12/split0/r1024", "A12/split1/r1024")  # the m = 12 units run before the fix
    assert "ran {:.1f} and {:.1f} times slower".format(*map(slower, before)) in status
    after = [slower(k) for k in first if k.startswith("A12/") and k not in before]
    assert "and {:.1f} times after it (split 2)".format(slower("A12/split2/r1024")) in status
    assert f"are {min(after):.1f} to {max(after):.1f} times slower" in status
    twelve = [k for k in run["units"] if k.startswith("A12/")]
    assert "All of $m = 12$ took {:.1f} CPU-hours, {:.1f} of them for its {} extensions.".format(
        hours(twelve), hours(k for k in twelve if k not in first),
        sum(k not in first for k in twelve)) in status
    # m = 14's rank-1,024 units against m = 12's run after the first change
    after_fix = run["units"]["A12/split2/r1024"]["wall_time"]
    fourteen = [run["units"][f"A14/split{i}/r1024"]["wall_time"] for i in (0, 1)]
    assert "then took {:,.0f} and {:,.0f} s: {:.1f} and {:.1f} times the rank-1,024 unit of " \
           "$m = 12$ run after the first change (split 2, {:,.0f} s), within the 2.1 to 2.6" \
           .format(*fourteen, *(t / after_fix for t in fourteen), after_fix) in status
    assert all(2.1 <= t / after_fix <= 2.6 for t in fourteen)
    # m = 14's first pass against the sizing's 8 CPU-hours, its extensions, the whole study
    words = dict(enumerate(("no", "one", "two", "three", "four", "five", "six")))
    first14 = [k for k in first if k.startswith("A14/")]
    ext14 = [k for k in run["units"] if k.startswith("A14/") and k not in first]
    assert len(first14) == 21 and hours(first14) < 8
    assert f"The whole first pass of $m = 14$ took {hours(first14):.1f} CPU-hours, under the " \
           f"sizing's 8, and its {words[len(ext14)]} extensions {hours(ext14):.1f}; the whole " \
           f"study took {hours(run['units']):.1f}, against the 12 registered." in status
    # complete: every unit the rule flags has its extension, so the verdict could be read
    assert len(first) == planned
    assert not [k for k in pl.extension_units(run) if k + "/x2" not in run["units"]]
    assert "Every unit is in" in status
    readme = " ".join((RESULTS.parents[1] / "README.md").read_text().split())
    assert f"It is complete: its {len(run['units'])} units ({len(first)} first passes and the " \
           f"{len(run['units']) - len(first)} extensions its rule flags) took " \
           f"{hours(run['units']):.1f} CPU-hours" in readme
    # the two studies' processors, as the status names them
    assert {u["environment"]["cpu_capability"] for u in study.values()} == {"AVX512"}
    assert {u["environment"]["cpu_capability"] for u in run["units"].values()} == {"AVX2"}
    assert "converged study records AVX-512, every decisive unit AVX2" in status
    for splits, said in (((1, 2), "ran {:.0f} to {:.1f} times slower per seed"),
                         ((0,), "run earlier, {:.1f} to {:.1f} times")):
        ten = [slower(k) for k in done if k.startswith(tuple(f"A10/split{s}/" for s in splits))]
        assert said.format(min(ten), max(ten)) in status
