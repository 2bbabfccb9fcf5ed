"""The sweep protocol: units, the store, the output lock, Ctrl-C, kill-anywhere resume, and the
Dask paths (the same records in-process and on a LocalCluster, a killed worker, a unit that
keeps killing workers, a scheduler that does not answer or has no worker, bad addresses)."""

import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

import pytest

from companion.cli import main
from companion.experiments import sweep
from companion.experiments.sweep import (
    ResultStore,
    SweepInterrupted,
    Unit,
    UnitFailedError,
    environment,
    parse_scheduler,
    run_sweep,
    run_units,
    seed_units,
    sweep_records,
)
from companion.files import atomic_write_json

ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}


def _cmd(out: Path) -> list[str]:
    return [sys.executable, "-m", "companion", "e1", "--smoke", "--out", str(out),
            "--no-progress"]


def _models(path: Path) -> dict:
    """unit key -> its per-model records (numbers and labels; not wall time or environment)."""
    return {key: unit["models"] for key, unit in json.loads(path.read_text())["units"].items()}


def records(path):
    """The per-unit results without what legitimately differs between runs (timings)."""
    units = json.loads(path.read_text())["units"]
    return {k: {f: v for f, v in u.items() if f != "wall_time"} for k, u in units.items()}


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


# --------------------------------------------------------------------------- scheduler values


@pytest.mark.parametrize("value, parsed", [
    (None, None), ("local:2", ("local", 2)),
    ("tcp://127.0.0.1:8786", ("address", "tcp://127.0.0.1:8786")),
    ("tcp://[::1]:8786", ("address", "tcp://[::1]:8786")),
    ("tls://scheduler.example.org:1", ("address", "tls://scheduler.example.org:1")),
    ("tcp://h:65535", ("address", "tcp://h:65535"))])
def test_scheduler_values_parse(value, parsed):
    assert parse_scheduler(value) == parsed


@pytest.mark.parametrize("bad", ["local", "local:0", "local:x", "127.0.0.1:8786", "http://h:1",
                                 "tcp://", "", "tcp://h", "tcp://h:0", "tcp://h:99999",
                                 "tcp://:8786", "tcp://::1:8786", "tcp://h:8786/x"])
def test_bad_scheduler_values_give_a_clear_error(bad, capsys, tmp_path):
    with pytest.raises(ValueError, match="local:N"):
        parse_scheduler(bad)
    assert main(["e1", "--smoke", "--scheduler", bad, "--out", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert "--scheduler" in err and "local:N" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r.json").exists()


def test_a_missing_dask_gives_a_one_line_error(monkeypatch, capsys, tmp_path):
    pytest.importorskip("torch")  # the CLI checks the device (torch) first
    monkeypatch.setitem(sys.modules, "dask.distributed", None)  # import now raises ImportError
    out = tmp_path / "r.json"
    args = ["e1", "--smoke", "--no-progress", "--scheduler", "local:2", "--out", str(out)]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "dask" in err and len(err.splitlines()) == 1
    assert not out.exists() or not json.loads(out.read_text())["units"]


# --------------------------------------------------------------------------- units and store


def _record(i):
    return {"i": i}


MALLOC = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_MAX_", "MALLOC_ARENA_MAX")


def _malloc_settings(_):
    import os
    return {k: os.environ.get(k) for k in MALLOC}


def test_local_workers_keep_freed_blocks_for_the_next_step(monkeypatch):
    # Dask's MALLOC_TRIM_THRESHOLD_=65536 (and, at m = 14, glibc's own 32 MiB mmap ceiling
    # and per-thread arenas) made E2's workers fault in every tensor of every step
    pytest.importorskip("dask.distributed")
    for k in MALLOC:
        monkeypatch.delenv(k, raising=False)
    store = ResultStore(None, {"c": 1})
    run_units([Unit("u0", _malloc_settings, (0,))], store, scheduler="local:1")
    assert [store.units["u0"][k] for k in MALLOC] == [str(2**40), "0", "1"]


def test_in_process_run_skips_stored_units():
    calls = []

    def unit(i):
        calls.append(i)
        return {"i": i}, f"model {i}"

    store = ResultStore(None, {"c": 1})
    store.put("u0", {"i": 0})
    models = run_units([Unit(f"u{i}", unit, (i,)) for i in range(3)], store, keep_models=True)
    assert calls == [1, 2] and store.units["u2"]["i"] == 2
    assert models == {"u1": "model 1", "u2": "model 2"}  # what the unit trained, kept
    assert {"wall_time", "environment"} <= set(store.units["u1"])


def test_run_sweep_returns_the_store_and_refuses_models_from_elsewhere(tmp_path):
    res = run_sweep({"c": 2}, [Unit(f"u{i}", _record, (i,)) for i in range(2)],
                    out=tmp_path / "r.json")
    assert set(res) == {"config", "config_hash", "units", "models"} and res["models"] == {}
    assert json.loads((tmp_path / "r.json").read_text())["units"] == res["units"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]  # no lock, no temporary
    with pytest.raises(ValueError, match="keep_models"):
        run_sweep({"c": 2}, [], keep_models=True, scheduler="local:1")


@pytest.mark.parametrize("damage, word", [
    (lambda d, u: u.pop("wall_time"),
     "unit 'nka_r1-4_s0' is damaged (field 'wall_time' is missing)"),
    (lambda d, u: u["models"][0].update(rank="4"),
     "unit 'nka_r1-4_s0' is damaged (field 'models' record 0: field 'rank' is a str, not an "
     "int in [0, inf])"),
    (lambda d, u: u["models"][0].update(fraction_within_half=1.5), "is 1.5, not a number in"),
    (lambda d, u: u["models"][0].update(best_max_error=False), "is a bool, not a number"),
    (lambda d, u: u.update(models=[]), "not a non-empty list of model records"),
    (lambda d, u: u["models"].append(dict(u["models"][0])), "records 0 and 1 are the same"),
    (lambda d, u: d["units"].update(nka_r1=u), "unit 'nka_r1' is not one its configuration "
     "plans"),
    (lambda d, u: d["config"].update(steps=61), "does not hash to its config_hash"),
])
def test_a_resumed_file_is_checked_for_sense_in_one_line(tmp_path, capsys, damage, word):
    """Issue 41: types, ranges, the planned units, no duplicates, the hash recomputed from
    the stored configuration; the same for the CLI (one line, exit 2) and the reader."""
    from companion.experiments.e1 import E1_SMOKE, run_e1_sweep

    rec = {"kind": "nka", "rank": 1, "seed": 0, "best_max_error": 0.1,
           "fraction_within_half": 1.0}
    unit = {"models": [rec], "wall_time": 1.0, "environment": {}}
    data = {"config": sweep.config_dict(E1_SMOKE), "units": {"nka_r1-4_s0": unit},
            "config_hash": sweep.config_hash(E1_SMOKE)}
    damage(data, unit)
    out = tmp_path / "e1.json"
    atomic_write_json(out, data)
    with pytest.raises(sweep.ResultFileError, match=re.escape(f"{out}: ")) as info:
        run_e1_sweep(E1_SMOKE, out=out)
    assert word in str(info.value) and "\n" not in str(info.value)
    if "plans" not in word:  # the reader does not know the plan
        with pytest.raises(sweep.ResultFileError, match=re.escape(word)):
            sweep.load_sweep(out)
    assert main(["e1", "--smoke", "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and word in err[0]


def test_seed_blocks_and_records():
    cfg = types.SimpleNamespace(seed_block=None)
    assert [u.key for u in seed_units([("k", 0, (0, 1, 2))], dict, cfg, None, "cpu")] == ["k"]
    cfg.seed_block = 2
    units = seed_units([("k", 0, (0, 1, 2))], dict, cfg, None, "cpu")
    assert [(u.key, u.args[3]) for u in units] == [("k_s0-1", (0, 1)), ("k_s2", (2,))]
    assert sweep_records({"units": {"a": {"models": [{"x": 1}]}, "b": {"models": []}}}) == [
        {"x": 1}]
    with pytest.raises(ValueError, match="results"):
        sweep_records({"units": [1]})


def test_environment_without_torch(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import now raises ImportError
    assert environment("cpu") == {"torch": None, "cpu_capability": None, "threads": None,
                                  "device": "cpu"}


def test_ctrl_c_in_a_sweep_keeps_what_finished(tmp_path):
    def unit(i):
        if i == 2:
            raise KeyboardInterrupt
        return {"i": i}

    out = tmp_path / "r.json"
    with pytest.raises(SweepInterrupted, match="interrupted; 2 units stored; rerun to resume"):
        run_sweep({"c": 3}, [Unit(f"u{i}", unit, (i,)) for i in range(4)], out=out)
    assert sorted(json.loads(out.read_text())["units"]) == ["u0", "u1"]
    assert not (tmp_path / "r.json.lock").exists()


# --------------------------------------------------------------------------- real processes

# the sweeps train (torch); the Python 3.13 check runs where no CPU torch can be installed
torch = pytest.importorskip("torch")


def test_two_runs_on_one_out_one_waits_out(tmp_path):
    """Started together on the same --out: one writes it, the other exits 2 naming it."""
    out = tmp_path / "q.json"
    procs = [subprocess.Popen(_cmd(out), env=_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    done = [(p.pid, p.wait(timeout=300), p.stderr.read()) for p in procs]
    codes = sorted(code for _, code, _ in done)
    assert codes == [0, 2], done
    (winner, _, _), = [d for d in done if d[1] == 0]
    (_, _, err), = [d for d in done if d[1] == 2]
    lines = err.strip().splitlines()
    assert len(lines) == 1 and f"pid {winner}" in lines[0] and "in use" in lines[0], err
    assert len(_models(out)) == 6  # the winner's complete sweep
    assert sorted(p.name for p in tmp_path.iterdir()) == ["q.json"]


def test_ctrl_c_prints_one_line_and_exits_130(tmp_path):
    out = tmp_path / "c.json"
    proc = subprocess.Popen(_cmd(out), env=_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None:
        if out.exists() and json.loads(out.read_text())["units"]:
            break  # the first unit is stored
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    err = proc.communicate(timeout=120)[1]
    stored = len(_models(out))
    if proc.returncode == 0:
        pytest.skip("the sweep finished before the signal arrived")
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == [
        f"python -m companion: interrupted; {stored} units stored; rerun to resume"], err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.json"]


KILLS = 3
SEED = 16


def test_sweep_killed_anywhere_resumes_to_the_same_records(tmp_path):
    """Kill-anywhere (issue 16): an E1 smoke sweep killed with SIGKILL at seeded random
    moments, then rerun until it finishes, ends with the same per-model records as an
    uninterrupted run, and its results file parses as complete JSON after every kill (the
    lock a kill leaves behind is stale and taken over)."""
    reference = tmp_path / "reference.json"
    start = time.perf_counter()
    subprocess.run(_cmd(reference), env=_env(), check=True, capture_output=True, timeout=300)
    full_time = time.perf_counter() - start

    out = tmp_path / "killed.json"
    rng = random.Random(SEED)
    seen_units = []
    for _ in range(KILLS):
        proc = subprocess.Popen(_cmd(out), env=_env(), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        # anywhere from interpreter start-up to past the end of a full run
        time.sleep(rng.uniform(0.2, 1.1) * full_time)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        if out.exists():
            units = _models(out)  # parses: never a truncated file
            assert all(units.values())
            seen_units.append(len(units))
        else:
            seen_units.append(0)
    assert seen_units == sorted(seen_units)  # finished units are never lost
    for _ in range(3):
        done = subprocess.run(_cmd(out), env=_env(), capture_output=True, timeout=300)
        if done.returncode == 0:
            break
    assert done.returncode == 0, done.stderr[-2000:]
    assert _models(out) == _models(reference)
    assert json.loads(out.read_text())["config_hash"] == \
        json.loads(reference.read_text())["config_hash"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["killed.json", "reference.json"]


# --------------------------------------------------------------------------- Dask

pytest.importorskip("dask.distributed")
import dask  # noqa: E402


@pytest.fixture
def by_value():
    """Workers unpickle this module's unit functions by value (they cannot import it)."""
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def _cluster(workers=2):
    from dask.distributed import LocalCluster

    return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                        host="127.0.0.1", dashboard_address=None)


@pytest.mark.parametrize("experiment", ["e1", "e2", "probes"])
def test_smoke_records_are_identical_in_process_and_on_local_2(experiment, tmp_path):
    here, there = tmp_path / "here.json", tmp_path / "there.json"
    if experiment == "e2":  # e2 writes into a folder
        here, there = here.with_suffix(""), there.with_suffix("")
    assert main([experiment, "--smoke", "--no-progress", "--out", str(here)]) == 0
    assert main([experiment, "--smoke", "--no-progress", "--scheduler", "local:2",
                 "--out", str(there)]) == 0
    if experiment == "e2":
        here, there = here / "e2_smoke.json", there / "e2_smoke.json"
    assert records(here) == records(there)
    assert len(records(here)) >= 2


def _slow_unit(i):
    time.sleep(1.0)
    return {"i": i, "pid": os.getpid()}


def test_a_killed_worker_loses_nothing_and_duplicates_nothing(tmp_path, by_value):
    from dask.distributed import Client

    store = ResultStore(tmp_path / "r.json", {"kill": 1})
    units = [Unit(f"u{i}", _slow_unit, (i,)) for i in range(8)]
    with _cluster() as cluster, Client(cluster) as client:
        pids = client.run(os.getpid)
        victim = sorted(pids.values())[0]

        def kill_soon():
            deadline = time.time() + 60
            while not store.units and time.time() < deadline:  # after the first result
                time.sleep(0.05)
            os.kill(victim, signal.SIGKILL)

        killer = threading.Thread(target=kill_soon)
        killer.start()
        run_units(units, store, client=client)
        killer.join()
    saved = json.loads((tmp_path / "r.json").read_text())["units"]
    assert sorted(saved) == sorted(u.key for u in units)
    assert [saved[f"u{i}"]["i"] for i in range(8)] == list(range(8))
    assert any(u["pid"] != victim for u in saved.values())
    # the victim really died mid-sweep: units after the kill ran elsewhere
    assert sum(u["pid"] == victim for u in saved.values()) < 8


def _deadly_unit(i):
    if i == 1:
        os._exit(1)  # takes its worker down, every time
    time.sleep(0.5)
    return {"i": i}


def test_a_unit_that_keeps_killing_workers_is_named_and_the_rest_stored(tmp_path, by_value):
    from dask.distributed import Client

    out = tmp_path / "r.json"
    units = [Unit(f"u{i}", _deadly_unit, (i,)) for i in range(4)]
    # one task at a time per worker: a death then counts against the unit that caused it only
    settings = {"distributed.scheduler.allowed-failures": 1,
                "distributed.scheduler.worker-saturation": 1.0}
    with dask.config.set(settings), _cluster() as cluster, Client(cluster) as client:
        with pytest.raises(UnitFailedError, match=r"unit .*'u1'.* killed every Dask worker") \
                as failure:
            run_sweep({"deadly": 1}, units, out=out, client=client)
    stored = sorted(json.loads(out.read_text())["units"])
    # every unit not named is stored (on a loaded machine a worker that misses its heartbeats
    # can take another unit down with it: that one is then named too)
    assert stored == [u.key for u in units if repr(u.key) not in str(failure.value)]
    assert stored and f"{len(stored)} units are stored" in str(failure.value)


def test_the_cli_names_the_failing_unit_and_the_command_that_resumes(tmp_path, monkeypatch,
                                                                      capsys):
    import companion.experiments.e1 as e1

    def failing(*args, **kwargs):
        raise UnitFailedError("unit 'dense' killed every Dask worker that ran it; 5 units "
                              "are stored")

    monkeypatch.setattr(e1, "run_e1_sweep", failing)
    out = tmp_path / "e1.json"
    assert main(["e1", "--smoke", "--no-progress", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unit 'dense'" in err[0], err
    assert err[0].endswith(f"resume with: python -m companion e1 --smoke --no-progress "
                           f"--out {out}"), err


def test_a_server_that_is_not_a_scheduler_times_out_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sweep, "CONNECT_TIMEOUT_S", 1)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    held = []
    threading.Thread(target=lambda: held.append(server.accept()), daemon=True).start()
    address = f"tcp://127.0.0.1:{server.getsockname()[1]}"
    start = time.monotonic()
    try:
        code = main(["e1", "--smoke", "--no-progress", "--scheduler", address,
                     "--out", str(tmp_path / "e1.json")])
    finally:
        server.close()
    assert time.monotonic() - start < 60
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and address in err[0] and "within 1 s" in err[0], err


def test_a_scheduler_without_workers_times_out_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sweep, "WORKERS_TIMEOUT_S", 1)
    with _cluster(workers=0) as cluster:
        code = main(["e1", "--smoke", "--no-progress", "--scheduler", cluster.scheduler_address,
                     "--out", str(tmp_path / "e1.json")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "no worker after 1 s" in err[0], err
    assert "dask worker" in err[0]
