"""Chapter 8's sweep: configuration, units, resumable store, sign structure, consistency."""

import dataclasses
import json

import numpy as np
import pytest

pytest.importorskip("torch")

from companion.exact_tables import HeadTables  # noqa: E402
from companion.experiments.probes import (  # noqa: E402
    PROBES_FULL,
    PROBES_QUICK,
    PROBES_SMOKE,
    denominator_structure,
    probe_unit_keys,
    run_probe_sweep,
    signed_bound_violations,
    summarise_probes,
)
from companion.experiments.witness_suite import experiment_witness_24  # noqa: E402
from companion.reproducibility import seed_everything  # noqa: E402


@pytest.fixture(scope="module")
def family():
    return experiment_witness_24()


def test_configs_validate_and_split_into_units():
    assert probe_unit_keys(PROBES_FULL) == ["signed_pos", "signed_shared", "signed_columns",
                                            "multi_H2", "multi_H4", "multi_H8"]
    assert probe_unit_keys(PROBES_QUICK) == ["multi_H4"]
    assert PROBES_FULL.steps + PROBES_FULL.surrogate_steps == 2000
    with pytest.raises(ValueError, match="lr"):
        dataclasses.replace(PROBES_FULL, lr=0)
    with pytest.raises(TypeError, match="signed_ranks"):
        dataclasses.replace(PROBES_FULL, signed_ranks=8)
    with pytest.raises(ValueError, match="multi_heads"):
        dataclasses.replace(PROBES_FULL, multi_heads=(1,))
    with pytest.raises(ValueError, match="seeds"):
        dataclasses.replace(PROBES_FULL, seeds=(0, 0))


def test_tiny_sweep_runs_stores_and_resumes(tmp_path, family):
    seed_everything(0)
    cfg = dataclasses.replace(PROBES_SMOKE, shared_ranks=(), columns_ranks=(),
                              multi_totals=(2,), steps=3, surrogate_steps=2)
    out = tmp_path / "probes.json"
    res = run_probe_sweep(cfg, out=out)
    assert set(res["units"]) == {"signed_pos", "multi_H2"}
    rec = res["units"]["signed_pos"]["models"][0]
    assert {"best_max_error", "sign_consistent", "arrangement_flips"} <= set(rec)
    rows = summarise_probes(res)
    assert [(r["kind"], r["heads"], r["total_rank"]) for r in rows] == [
        ("multi", 2, 2), ("signed_pos", 1, 2)]
    stored = json.loads(out.read_text())
    again = run_probe_sweep(cfg, out=out)  # resumes: nothing retrained, same records
    assert again["units"] == stored["units"]
    with pytest.raises(ValueError, match="restart"):
        run_probe_sweep(dataclasses.replace(cfg, steps=4), out=out)


def test_denominator_structure_sees_sign_changes(family):
    T = len(family.tokens)
    fq = np.ones((T, 1))
    fk = np.ones((3, T, 1))
    v, a = np.zeros((3, T, 1)), np.zeros((T, 1))
    positive = HeadTables(((fq, fk, v, a),), np.zeros(T), True, 0)
    s = denominator_structure(positive, family)
    assert s["sign_consistent"] and s["arrangement_flips"] == 0 and s["negative_rows"] == 0
    fk2 = fk.copy()
    link = family.links[0]
    fk2[1, link.better] = 5.0
    fk2[2, link.better] = -4.0  # arrangements (x, better, worse) and (x, worse, better) differ
    s2 = denominator_structure(HeadTables(((fq, fk2, v, a),), np.zeros(T), True, 0), family)
    assert not s2["sign_consistent"] and s2["arrangement_flips"] >= 1


def test_signed_bound_violations_flags_only_what_the_proposition_forbids(family):
    bound = family.certificate.bound  # 20; signed: 19 (positive), 13 (shared keys)

    def rec(kind, rank, consistent):
        return {"kind": kind, "heads": 1, "rank": rank, "total_rank": rank, "seed": 0,
                "best_max_error": 0.4, "exact_solved": True, "sign_consistent": consistent}

    results = {"units": {"u": {"models": [
        rec("signed_pos", 18, True),      # forbidden by (a)
        rec("signed_pos", 19, True),      # allowed
        rec("signed_pos", 10, False),     # open case: no bound
        rec("signed_shared", 12, False),  # forbidden by (b)
        rec("signed_shared", 13, False),  # allowed
    ]}}}
    bad = signed_bound_violations(results, bound)
    assert [(r["kind"], r["rank"]) for r in bad] == [("signed_pos", 18), ("signed_shared", 12)]
