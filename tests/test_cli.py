"""Sweeps through the CLI: configuration hashes, the store, resuming, one-line failures, and a
re-run of a random subset of the committed full E1 results (files: tests/test_files.py;
E2's modes: tests/experiments/e2/test_pipeline.py)."""

import json
import os
import subprocess
import sys
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from companion.cli import main
from companion.experiments.sweep import ResultFileError, ResultStore

torch = pytest.importorskip("torch")

import companion.experiments.e1 as e1  # noqa: E402
from companion.book import seed_everything  # noqa: E402
from companion.bounds.codes import paley_subset  # noqa: E402
from companion.bounds.witness import witness_family  # noqa: E402
from companion.experiments.sweep import config_hash, environment  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FULL = ROOT / "results" / "e1_full.json"


@pytest.fixture(autouse=True)
def _one_thread():
    seed_everything(0, threads=1)


def small_family():
    """A real witness family F(S), small enough to train on in a second: 14 queries of the
    Paley code at q = 11 (rows 11..13 of the code, width 12), length 3, eps = 1/2."""
    return witness_family(paley_subset(11, 3, 11), 3, Fraction(1, 2))


TINY = replace(e1.E1_FULL, ranks=[1, 2, 4], rank_groups=[[1, 2], [4]], seeds=[0, 1],
               dense_seeds=[0], steps=20, surrogate_steps=5)


# ---------------------------------------------------------------- hashing and atomic writes


def test_config_hash_is_order_independent_and_sensitive():
    assert config_hash({"a": 1, "b": [1, 2]}) == config_hash({"b": [1, 2], "a": 1})
    assert config_hash({"a": 1}) != config_hash({"a": 2})
    with pytest.raises(TypeError, match="config"):
        config_hash([1])
    with pytest.raises(ValueError, match="config"):
        config_hash({"a": float("nan")})


def test_store_refuses_results_of_another_configuration(tmp_path):
    path = tmp_path / "r.json"
    ResultStore(path, {"a": 1}).put("u", {"x": 1})
    assert ResultStore(path, {"a": 1}).units["u"] == {"x": 1}
    with pytest.raises(ValueError, match="restart"):
        ResultStore(path, {"a": 2})
    assert "u" not in ResultStore(path, {"a": 2}, restart=True).units


# ---------------------------------------------------------------- resume


def test_resume_does_not_redo_finished_units(tmp_path, monkeypatch):
    fam = small_family()
    out = tmp_path / "e1.json"
    reference = e1.run_e1_sweep(TINY, family=fam)  # uninterrupted, in memory
    trained = []
    real = e1.train_unit

    def interrupted(cfg, family, group, *args, **kwargs):
        if len(trained) == 1:
            raise KeyboardInterrupt  # the sweep dies while training its second unit
        trained.append(group)
        return real(cfg, family, group, *args, **kwargs)

    monkeypatch.setattr(e1, "train_unit", interrupted)
    with pytest.raises(KeyboardInterrupt):
        e1.run_e1_sweep(TINY, family=fam, out=out)
    saved = json.loads(out.read_text())
    assert list(saved["units"]) == ["nka_r1-2"]  # the finished unit was kept

    resumed = []

    def counting(cfg, family, group, *args, **kwargs):
        resumed.append(group)
        return real(cfg, family, group, *args, **kwargs)

    monkeypatch.setattr(e1, "train_unit", counting)
    res = e1.run_e1_sweep(TINY, family=fam, out=out)
    assert resumed == [(4,), None]  # only the unfinished units ran
    assert res["units"]["nka_r1-2"] == saved["units"]["nka_r1-2"]
    strip = {
        k: [{kk: vv for kk, vv in m.items()} for m in u["models"]] for k, u in res["units"].items()
    }
    ref = {k: u["models"] for k, u in reference["units"].items()}
    assert strip == ref  # resuming gives exactly the uninterrupted results

    resumed.clear()
    e1.run_e1_sweep(TINY, family=fam, out=out)  # everything finished: nothing retrains
    assert resumed == []


def test_summary_and_consistency_check_on_records():
    fake = {
        "units": {
            "u": {
                "models": [
                    {
                        "kind": "nka",
                        "rank": 2,
                        "seed": 0,
                        "best_max_error": 0.9,
                        "fraction_within_half": 0.5,
                    },
                    {
                        "kind": "nka",
                        "rank": 2,
                        "seed": 1,
                        "best_max_error": 0.4,
                        "fraction_within_half": 1.0,
                    },
                    {
                        "kind": "nka",
                        "rank": 8,
                        "seed": 0,
                        "best_max_error": 0.1,
                        "fraction_within_half": 1.0,
                    },
                    {
                        "kind": "dense",
                        "rank": 0,
                        "seed": 0,
                        "best_max_error": 0.2,
                        "fraction_within_half": 1.0,
                    },
                ]
            }
        }
    }
    rows = e1.summarise_e1(fake)
    assert [r["r"] for r in rows] == [2, 8, "dense"]
    assert (
        rows[0]["solved"] == 1
        and rows[0]["min_max_error"] == 0.4
        and rows[0]["max_max_error"] == 0.9
    )
    assert [v["seed"] for v in e1.consistency_violations(fake, r_star=4)] == [1]
    assert e1.consistency_violations(fake, r_star=2) == []


@pytest.mark.parametrize(
    "bad, exc, word",
    [
        ({"ranks": [0]}, ValueError, "ranks"),
        ({"rank_groups": [[1, 2]]}, ValueError, "rank_groups"),
        ({"feature": "relu"}, ValueError, "feature"),
        ({"lr": 0}, ValueError, "lr"),
        ({"steps": "many"}, TypeError, "steps"),
        ({"family": "mystery"}, ValueError, "family"),
        ({"colour": "red"}, TypeError, "colour"),
    ],
)
def test_bad_e1_configs(bad, exc, word):
    with pytest.raises(exc, match=word):
        e1.E1Config(**bad)
    with pytest.raises(exc, match=word):
        replace(e1.E1_QUICK, **bad)
    with pytest.raises(TypeError, match="config"):
        e1.run_e1_sweep({"steps": 1})


# ---------------------------------------------------------------- CLI


def test_cli_e1_writes_hashed_results_and_resumes(tmp_path, monkeypatch, capsys):
    tiny = replace(e1.E1_QUICK, ranks=[1, 2], rank_groups=[[1, 2]], seeds=[0], dense_seeds=[],
                   steps=3, surrogate_steps=0)
    monkeypatch.setattr(e1, "E1_QUICK", tiny)
    out = tmp_path / "q.json"
    assert main(["e1", "--quick", "--out", str(out), "--no-progress"]) == 0
    data = json.loads(out.read_text())
    assert (
        data["config_hash"] == config_hash(data["config"]) == config_hash(tiny)
    )
    assert [m["rank"] for m in data["units"]["nka_r1-2"]["models"]] == [1, 2]

    def boom(*args, **kwargs):
        raise AssertionError("a finished unit was trained again")

    monkeypatch.setattr(e1, "train_unit", boom)
    assert main(["e1", "--quick", "--out", str(out), "--no-progress"]) == 0
    # the summary printed is the stored sweep's table (a row per rank)
    assert str(e1.summary_table(e1.summarise_e1(data))) in capsys.readouterr().out


def test_cli_maps_writes_hashed_results_resumes_and_refuses_bad_options(tmp_path, monkeypatch,
                                                                        capsys):
    import companion.experiments.maps as maps

    tiny = replace(maps.MAPS_SMOKE, steps=3, surrogate_steps=1)
    monkeypatch.setattr(maps, "MAPS_QUICK", tiny)
    out = tmp_path / "maps.json"
    assert main(["maps", "--quick", "--out", str(out), "--no-progress"]) == 0
    data = json.loads(out.read_text())
    assert data["config_hash"] == config_hash(data["config"]) == config_hash(tiny)
    assert data["units"]["taylor_paley_rows_23_k2_s0"]["models"][0]["verdict"] == "infeasible"

    def boom(*args, **kwargs):
        raise AssertionError("a finished unit was run again")

    monkeypatch.setattr(maps, "_exact_head", boom)
    monkeypatch.setattr(maps, "train_on_family", boom)
    assert main(["maps", "--quick", "--out", str(out), "--no-progress"]) == 0
    assert "taylor paley_rows_23 R=7: solved 0/1" in capsys.readouterr().out
    for argv, option in ((["maps", "--threads", "0"], "--threads"),
                         (["maps", "--smoke", "--scheduler", "nonsense"], "--scheduler")):
        assert main(argv) == 2
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and option in lines[0] and "Traceback" not in err, err


def test_cli_rejects_bad_arguments(capsys):
    # argparse's own errors (unknown experiment, exclusive modes) exit with status 2
    with pytest.raises(SystemExit) as exc:
        main(["e3"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        main(["e1", "--quick", "--full"])
    assert exc.value.code == 2
    capsys.readouterr()
    # the CLI's checks return 2 after one line on stderr naming the option (issue 16)
    for argv, option in ((["e1", "--device", "tpu"], "--device"),
                         (["e1", "--threads", "0"], "--threads")):
        assert main(argv) == 2
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and option in lines[0] and "Traceback" not in err, err


def test_cli_e2_fails_clearly_without_the_ood_module(monkeypatch, capsys):
    # the import now raises ImportError
    monkeypatch.setitem(sys.modules, "companion.experiments.e2.pipeline", None)
    assert main(["e2", "--quick", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "companion.experiments.e2.pipeline could not be imported" in err
    assert len(err.strip().splitlines()) == 1


# ---------------------------------------------------------------- committed full results


#: Ranks at the edge between failing and solving, where a seed's verdict depends on the CPU
#: code path (the full sweep's r = 28: 2/5 solved with AVX2 kernels, 4/5 with the default
#: ones; the quick sweep's r = 27 moved 0.146 between them, results/cross_path_spread.json):
#: compared only in the environment that produced them.
CHAOTIC_E1_RANKS = (27, 28)


def test_committed_full_e1_results_reproduce_on_a_random_subset():
    """Re-train one random unit of the committed full sweep (a rank group x all seeds, or the
    dense heads: the batched program exactly as the CLI ran it) and compare every stored model.

    Training is chaotic in float rounding (the max-error surrogate amplifies it), so numbers
    repeat to 1e-4 only in the environment that produced them (torch version, CPU vector
    capability, threads; stored per unit) and only for the same stacked program — a model
    re-trained alone can drift by ulps (see companion.experiments.engine). In another
    environment — e.g. a CI runner with AVX2 instead of AVX-512 kernels — we measured max-error
    differences up to 0.07, and demand agreement to 0.25 and the same solved verdict unless the
    stored error lies within 0.25 of 1/2: loose, but a wrong model, schedule or configuration
    misses by far more.
    """
    if not FULL.exists():
        pytest.skip("results/e1_full.json not committed yet (python -m companion e1 --full)")
    data = json.loads(FULL.read_text())
    cfg = e1.E1_FULL
    assert data["config_hash"] == config_hash(cfg), "committed results are for another config"
    keys = ["nka_r" + "-".join(map(str, g)) for g in cfg.rank_groups] + ["dense"]
    assert sorted(data["units"]) == sorted(keys), "the committed sweep is incomplete"
    family = e1.e1_family(cfg)
    groups = list(cfg.rank_groups) + [None]
    pick = int(np.random.default_rng().integers(len(groups)))  # differs every run
    group, unit = groups[pick], data["units"][keys[pick]]
    records, _ = e1.train_e1_unit(cfg, family, group)
    same_env = unit["environment"] == environment("cpu")
    for got, stored in zip(records, unit["models"], strict=True):
        where = (keys[pick], got["rank"], got["seed"])
        assert (got["rank"], got["seed"]) == (stored["rank"], stored["seed"]), where
        if same_env:
            for field in ("best_max_error", "fraction_within_half", "final_max_error"):
                assert got[field] == pytest.approx(stored[field], abs=1e-4), (*where, field)
        elif got["rank"] not in CHAOTIC_E1_RANKS:
            assert got["best_max_error"] == pytest.approx(stored["best_max_error"], abs=0.25), where
            if abs(stored["best_max_error"] - 0.5) > 0.25:
                assert (got["best_max_error"] < 0.5) == (stored["best_max_error"] < 0.5), where


# ---------------------------------------------------------------- sandwich and live certificate


@pytest.fixture(scope="module")
def witness():
    return e1.experiment_witness_24()


def test_query_indicator_head_solves_the_witness_exactly_with_rank_S(witness):
    from fractions import Fraction

    from companion.bounds.witness import max_error_exact
    from companion.sandwich.heads import query_indicator_head

    head = query_indicator_head(witness)
    assert head.rank == len(witness.S) < len(witness.tokens)
    assert max_error_exact(head, witness) < Fraction(1, 2)


def test_lemma_b_check_holds_for_an_exact_head_and_flags_a_doctored_ratio(witness):
    from companion.sandwich.heads import query_indicator_head

    checks = e1.link_checks(query_indicator_head(witness), witness)
    assert len(checks) == len(witness.links) and all(c.eps < 0.5 for c in checks)
    assert all(c.holds for c in checks)
    doctored = replace(checks[0], ratio=1.0)  # c(g) > 1 for every gap >= 3 at eps < 1/2
    assert checks[0].gap >= 3 and not doctored.holds


# ----
# CLI failures a user can fix print one line, exit with status 2 and leave files alone
# (issue 16): corrupted or foreign results file, unwritable output path, bad device, bad or
# unreachable scheduler, missing optional dependency, bad thread count.
def needs_torch():
    """The sweeps import torch before they read the results file; the Python 3.13 check
    (scripts/run_py313.sh) runs this module where no CPU torch can be installed."""
    pytest.importorskip("torch")


def run_main(argv, capsys) -> tuple[int, list[str]]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, [line for line in err.splitlines() if line.strip()]


def assert_one_line(code, lines, *words):
    assert code == 2, (code, lines)
    assert len(lines) == 1, lines
    assert lines[0].startswith("python -m companion: error: "), lines
    for word in words:
        assert word in lines[0], (word, lines)


@pytest.fixture
def truncated(tmp_path):
    path = tmp_path / "e1.json"
    path.write_text('{"config": {"family": "experiment_witness_24"}, "config_hash": "ab')
    return path


def test_truncated_results_file(truncated, capsys):
    needs_torch()
    before = truncated.read_bytes()
    code, lines = run_main(["e1", "--smoke", "--out", str(truncated), "--no-progress"], capsys)
    assert_one_line(code, lines, str(truncated), "not a JSON results file", "--restart")
    assert truncated.read_bytes() == before


def test_foreign_results_file(tmp_path, capsys):
    needs_torch()
    path = tmp_path / "e1.json"
    path.write_text(json.dumps({"config": {"x": 1}, "config_hash": "0123456789abcdef",
                                "units": {"u": {"models": []}}}))
    before = path.read_bytes()
    code, lines = run_main(["e1", "--smoke", "--out", str(path), "--no-progress"], capsys)
    assert_one_line(code, lines, "0123456789abcdef", "--restart")
    assert path.read_bytes() == before


@pytest.mark.parametrize("text", ["[1, 2]", '{"units": [1]}', "\x00\xff garbage"])
def test_json_that_is_not_a_results_file(tmp_path, capsys, text):
    needs_torch()
    path = tmp_path / "e1.json"
    path.write_bytes(text.encode("latin-1"))
    code, lines = run_main(["e1", "--smoke", "--out", str(path), "--no-progress"], capsys)
    assert_one_line(code, lines, str(path))
    assert path.read_bytes() == text.encode("latin-1")


def test_unwritable_output_path(tmp_path, capsys):
    needs_torch()
    # /proc refuses new folders even to root; a folder as --out is refused too
    for out in ("/proc/companion-test/e1.json", str(tmp_path)):
        code, lines = run_main(["e1", "--smoke", "--out", out, "--no-progress"], capsys)
        assert_one_line(code, lines, "--out", "cannot write")
    assert list(tmp_path.iterdir()) == []


def test_read_only_folder(tmp_path, capsys):
    if os.geteuid() == 0:
        pytest.skip("root writes into read-only folders")
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        code, lines = run_main(["e1", "--smoke", "--out", str(folder / "e1.json")], capsys)
    finally:
        folder.chmod(0o700)
    assert_one_line(code, lines, "cannot write")


@pytest.mark.parametrize("device", ["tpu", "cuda:x", "cuda:99"])
def test_bad_device(tmp_path, capsys, device):
    if device == "cuda:99":  # a well-formed name: torch decides
        needs_torch()
    out = tmp_path / "e1.json"
    code, lines = run_main(["e1", "--smoke", "--device", device, "--out", str(out)], capsys)
    assert_one_line(code, lines, "--device")
    assert not out.exists()


@pytest.mark.parametrize("threads", ["0", "-3", "100000"])
def test_bad_threads(tmp_path, capsys, threads):
    code, lines = run_main(["e1", "--smoke", "--threads", threads,
                            "--out", str(tmp_path / "e1.json")], capsys)
    assert_one_line(code, lines, "--threads")


@pytest.mark.parametrize("scheduler", ["local:0", "nonsense", "tcp://", "http://x:1"])
def test_bad_scheduler_syntax(tmp_path, capsys, scheduler):
    code, lines = run_main(["e2", "--smoke", "--scheduler", scheduler,
                            "--out", str(tmp_path / "e2.json")], capsys)
    assert_one_line(code, lines, "--scheduler")


def test_unreachable_scheduler(tmp_path, capsys, monkeypatch):
    needs_torch()
    pytest.importorskip("dask.distributed")
    from companion.experiments import sweep

    monkeypatch.setattr(sweep, "CONNECT_TIMEOUT_S", 1)
    out = tmp_path / "e1.json"
    code, lines = run_main(["e1", "--smoke", "--scheduler", "tcp://127.0.0.1:9",
                            "--out", str(out), "--no-progress"], capsys)
    assert_one_line(code, lines, "tcp://127.0.0.1:9", "dask scheduler")
    # the store was created (nothing computed): the file holds no unit
    assert not out.exists() or json.loads(out.read_text())["units"] == {}


def test_missing_dask(tmp_path, capsys, monkeypatch):
    needs_torch()
    # None in sys.modules makes `import dask.distributed` raise ImportError
    monkeypatch.setitem(sys.modules, "dask.distributed", None)
    code, lines = run_main(["e1", "--smoke", "--scheduler", "local:1",
                            "--out", str(tmp_path / "e1.json"), "--no-progress"], capsys)
    assert_one_line(code, lines, "dask", "pip install")


def test_missing_torch(tmp_path, capsys, monkeypatch):
    # None in sys.modules makes `import torch` raise ImportError
    monkeypatch.setitem(sys.modules, "torch", None)
    out = tmp_path / "e1.json"
    code, lines = run_main(["e1", "--smoke", "--out", str(out), "--no-progress"], capsys)
    assert_one_line(code, lines, "torch", "pip install")
    assert not out.exists()


def test_real_process_truncated_file(truncated):
    """The same through a real interpreter: exit status 2, one stderr line, file untouched."""
    needs_torch()
    before = truncated.read_bytes()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "companion", "e1", "--smoke", "--out",
                           str(truncated), "--no-progress"], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert truncated.read_bytes() == before


# --------------------------------------------------------------------------- the store itself


def test_store_refuses_truncated_file_untouched(truncated):
    before = truncated.read_bytes()
    with pytest.raises(ResultFileError, match="not a JSON results file"):
        ResultStore(truncated, {"a": 1})
    assert truncated.read_bytes() == before
    store = ResultStore(truncated, {"a": 1}, restart=True)  # restart: overwritten on put
    store.put("u", {"x": 1})
    assert json.loads(truncated.read_text())["units"] == {"u": {"x": 1}}
