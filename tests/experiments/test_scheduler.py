"""Sweeps on Dask: the same records in-process and on a LocalCluster, a worker killed
mid-sweep, bad scheduler values."""

import json
import os
import signal
import sys
import threading
import time

import pytest

from companion.cli import main
from companion.experiments.scheduler import Unit, environment, parse_scheduler, run_units
from companion.experiments.store import ResultStore


def records(path):
    """The per-unit results without what legitimately differs between runs (timings)."""
    units = json.loads(path.read_text())["units"]
    return {k: {f: v for f, v in u.items() if f != "wall_time"} for k, u in units.items()}


@pytest.mark.parametrize(
    "value, parsed",
    [(None, None), ("local:2", ("local", 2)), ("tcp://127.0.0.1:8786", ("address",
                                                                         "tcp://127.0.0.1:8786"))],
)
def test_scheduler_values_parse(value, parsed):
    assert parse_scheduler(value) == parsed


@pytest.mark.parametrize("bad", ["local", "local:0", "local:x", "127.0.0.1:8786", "http://h:1",
                                 "tcp://", ""])
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


def test_units_with_equal_keys_are_refused():
    with pytest.raises(ValueError, match="distinct"):
        run_units([Unit("a", dict), Unit("a", dict)], ResultStore(None, {}))


def test_in_process_run_skips_stored_units():
    calls = []

    def unit(i):
        calls.append(i)
        return {"i": i}

    store = ResultStore(None, {"c": 1})
    store.put("u0", {"i": 0})
    run_units([Unit(f"u{i}", unit, (i,)) for i in range(3)], store)
    assert calls == [1, 2] and store.get("u2")["i"] == 2


def test_environment_without_torch(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import now raises ImportError
    assert environment("cpu") == {"torch": None, "cpu_capability": None, "threads": None,
                                  "device": "cpu"}


dask = pytest.importorskip("dask.distributed")


@pytest.mark.parametrize("experiment", ["e1", "e2", "probes"])
def test_smoke_records_are_identical_in_process_and_on_local_2(experiment, tmp_path):
    pytest.importorskip("torch")
    here, there = tmp_path / "here.json", tmp_path / "there.json"
    assert main([experiment, "--smoke", "--no-progress", "--out", str(here)]) == 0
    assert main([experiment, "--smoke", "--no-progress", "--scheduler", "local:2",
                 "--out", str(there)]) == 0
    assert records(here) == records(there)
    assert len(records(here)) >= 2


def _slow_unit(i):
    time.sleep(1.0)
    return {"i": i, "pid": os.getpid()}


def test_a_killed_worker_loses_nothing_and_duplicates_nothing(tmp_path):
    from dask.distributed import Client, LocalCluster

    store = ResultStore(tmp_path / "r.json", {"kill": 1})
    units = [Unit(f"u{i}", _slow_unit, (i,)) for i in range(8)]
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster, Client(cluster) as client:
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
