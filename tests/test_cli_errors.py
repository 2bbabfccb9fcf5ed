"""CLI failures a user can fix print one line, exit with status 2 and leave files alone
(issue 16): corrupted or foreign results file, unwritable output path, bad device, bad or
unreachable scheduler, missing optional dependency, bad thread count."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from companion.__main__ import main
from companion.experiments.store import (
    ResultFileError,
    ResultStore,
    UnwritablePathError,
    check_writable,
)

ROOT = Path(__file__).resolve().parents[1]


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
    assert_one_line(code, lines, str(truncated), "not a complete JSON", "--restart")
    assert truncated.read_bytes() == before


def test_foreign_results_file(tmp_path, capsys):
    needs_torch()
    path = tmp_path / "e1.json"
    path.write_text(json.dumps({"config": {"x": 1}, "config_hash": "0123456789abcdef",
                                "units": {"u": {"models": []}}}))
    before = path.read_bytes()
    code, lines = run_main(["e2", "--smoke", "--out", str(path), "--no-progress"], capsys)
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


def test_unreachable_scheduler(tmp_path, capsys):
    needs_torch()
    dask = pytest.importorskip("dask")
    pytest.importorskip("dask.distributed")
    out = tmp_path / "e1.json"
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
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
    with pytest.raises(ResultFileError, match="not a complete JSON"):
        ResultStore(truncated, {"a": 1})
    assert truncated.read_bytes() == before
    store = ResultStore(truncated, {"a": 1}, restart=True)  # restart: overwritten on put
    store.put("u", {"x": 1})
    assert json.loads(truncated.read_text())["units"] == {"u": {"x": 1}}


def test_check_writable(tmp_path):
    assert check_writable(tmp_path / "new" / "f.json") == tmp_path / "new" / "f.json"
    assert list((tmp_path / "new").iterdir()) == []  # the probe file is removed
    with pytest.raises(OSError):
        check_writable("/proc/companion-test/f.json")
    # an unwritable place is both the file system's OSError and a ValueError naming the
    # argument (the fuzz suite's contract for bad input)
    with pytest.raises(UnwritablePathError, match=r"^out '/proc/companion-test/f\.json'"):
        check_writable("/proc/companion-test/f.json", "out")
    with pytest.raises(ValueError, match="path .*folder"):
        check_writable(tmp_path)
    with pytest.raises(TypeError, match="path"):
        check_writable(3)
