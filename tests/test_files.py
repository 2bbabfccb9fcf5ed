"""The package's JSON files (companion.files): the one loader refuses damaged, deep, infinite
and repeated-key files in one line; atomic writes; where a file may be written (a path that
names a folder is refused, a symlink written through to its target); the output lock and
the temporaries of dead runs; the same cases through the CLI (one line, exit 2)."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from companion import files
from companion.cli import main
from companion.files import (
    MAX_JSON_BYTES,
    OutputInUseError,
    UnwritablePathError,
    atomic_write_json,
    out_lock,
    read_json_file,
    writable_path,
)


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


# --------------------------------------------------------------------------- reading


@pytest.mark.parametrize("kind", ["folder", "fifo", "device", "nan", "infinity", "huge",
                                  "missing", "truncated", "binary", "deep", "overflow",
                                  "long overflow", "repeated key"])
def test_read_json_file_refuses_every_damaged_kind_in_one_line(tmp_path, kind):
    """The one loader: only a regular file of bounded size holding finite JSON is read;
    everything else is one ValueError line naming the file, and the file is left as it was."""
    path = tmp_path / "f.json"
    if kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path = Path("/dev/zero")
    elif kind == "nan":
        path.write_text('{"units": {"a": {"acc": NaN}}}')
    elif kind == "infinity":
        path.write_text('[1, -Infinity]')
    elif kind == "huge":
        with open(path, "wb") as fh:
            fh.truncate(MAX_JSON_BYTES + 1)
    elif kind == "truncated":
        path.write_text('{"units": {"a": ')
    elif kind == "binary":
        path.write_bytes(b"\xff\xfe\x00")
    elif kind == "deep":  # Python's parser would recurse once per level
        path.write_text("[" * 100_000 + "]" * 100_000)
    elif kind == "overflow":  # a number that overflows to infinity, refused like Infinity
        path.write_text('{"units": {"a": {"acc": 1e400}}}')
    elif kind == "long overflow":
        path.write_text('[1' + "0" * 400 + '.5]')
    elif kind == "repeated key":  # json.loads would keep the last one silently
        path.write_text('{"units": {"a": 1, "a": 2}}')
    before = path.read_bytes() if path.is_file() else None
    with pytest.raises(ValueError) as info:
        read_json_file(path, "results file")
    message = str(info.value)
    assert "\n" not in message and str(path)[:60] in message
    if before is not None:
        assert path.read_bytes() == before


def test_read_json_file_reads_a_committed_results_file():
    data = read_json_file(Path(__file__).resolve().parents[1] / "results" / "e2_quick.json")
    assert isinstance(data["units"], dict) and data["units"]


def test_numbers_inside_strings_and_ordinary_floats_are_read():
    path = Path(__file__).resolve().parents[1] / "results" / "e2_summary.json"
    assert read_json_file(path)["threshold"] == 0.9


def test_a_deep_head_file_gives_verify_head_one_line(tmp_path, capsys):
    path = tmp_path / "head.json"
    path.write_text('{"format": ' + "[" * 50_000 + "]" * 50_000 + "}")
    code = main(["verify-head", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and "RecursionError" not in err


# --------------------------------------------------------------------------- writing


def test_atomic_write_leaves_the_old_file_when_writing_fails(tmp_path):
    path = tmp_path / "r.json"
    atomic_write_json(path, {"ok": 1})
    with pytest.raises(ValueError):
        atomic_write_json(path, {"bad": float("nan")})  # not serialisable: nothing replaced
    assert json.loads(path.read_text()) == {"ok": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temporary left behind
    with pytest.raises(TypeError, match="path"):
        atomic_write_json(3, {})


def test_writable_path(tmp_path):
    assert writable_path(tmp_path / "new" / "f.json") == tmp_path / "new" / "f.json"
    assert list((tmp_path / "new").iterdir()) == []  # the probe file is removed
    # an unwritable place is both the file system's OSError and a ValueError naming the
    # argument (the fuzz suite's contract for bad input)
    with pytest.raises(UnwritablePathError, match=r"^out '/proc/companion-test/f\.json'"):
        writable_path("/proc/companion-test/f.json", "out")
    for folder in (tmp_path, f"{tmp_path}/new/", "some/dir/", ".", "..", "", "a/.."):
        with pytest.raises(ValueError, match="out .*folder"):
            writable_path(folder, "out")
    with pytest.raises(TypeError, match="path"):
        writable_path(3)


def test_a_symlinked_output_is_written_through_to_its_target(tmp_path):
    target = tmp_path / "data" / "r.json"
    target.parent.mkdir()
    target.write_text("{}")
    link = tmp_path / "r.json"
    link.symlink_to(target)
    assert writable_path(link) == target
    atomic_write_json(link, {"ok": 2})
    assert link.is_symlink() and json.loads(target.read_text()) == {"ok": 2}
    dangling = tmp_path / "d.json"
    dangling.symlink_to(tmp_path / "elsewhere" / "d.json")
    atomic_write_json(dangling, {"ok": 3})
    assert dangling.is_symlink() and json.loads(dangling.read_text()) == {"ok": 3}
    with out_lock(link):  # the lock sits beside the target, which is what is written
        assert (target.parent / "r.json.lock").exists()


# --------------------------------------------------------------------------- through the CLI


def test_cli_refuses_an_out_that_names_a_folder_in_one_line(tmp_path, capsys):
    pytest.importorskip("torch")  # the CLI checks the device (torch) first
    for out in (f"{tmp_path}/some/dir/", str(tmp_path), "."):
        assert main(["e1", "--smoke", "--out", out, "--no-progress"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--out" in err[0] and "folder" in err[0], err
    assert list(tmp_path.iterdir()) == []


def test_cli_writes_through_a_symlinked_out(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    from dataclasses import replace

    import companion.experiments.e1 as e1

    tiny = replace(e1.E1_SMOKE, ranks=[1], rank_groups=[[1]], seeds=[0], dense_seeds=[],
                   steps=2, surrogate_steps=0)
    monkeypatch.setattr(e1, "E1_SMOKE", tiny)
    target = tmp_path / "store" / "e1.json"
    target.parent.mkdir()
    link = tmp_path / "e1.json"
    link.symlink_to(target)
    assert main(["e1", "--smoke", "--out", str(link), "--no-progress"]) == 0
    assert link.is_symlink() and json.loads(target.read_text())["units"]
    assert sorted(p.name for p in target.parent.iterdir()) == ["e1.json"]


# --------------------------------------------------------------------------- the output lock


def test_a_live_lock_is_refused_naming_its_run(tmp_path, capsys):
    pytest.importorskip("torch")  # the CLI checks the device (torch) first
    out = tmp_path / "r.json"
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / "r.json.lock").write_text(f"{other.pid}\n\npython -m companion e1 --quick\n")
        with pytest.raises(OutputInUseError, match=rf"pid {other.pid}: python -m companion e1"):
            with out_lock(out):
                pass
        # the CLI: one line, exit 2, before any work; the other run's lock is left alone
        assert main(["e1", "--smoke", "--out", str(out), "--no-progress"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"pid {other.pid}" in err[0] and "--out" in err[0], err
        assert (tmp_path / "r.json.lock").exists() and not out.exists()
    finally:
        other.kill()
        other.wait()


def test_a_stale_lock_and_stale_temporaries_are_taken_over(tmp_path):
    out = tmp_path / "r.json"
    dead = dead_pid()
    (tmp_path / "r.json.lock").write_text(f"{dead}\n\npython -m companion e1\n")
    (tmp_path / f".r.json.tmp-{dead}").write_text("half a file")
    live = tmp_path / f".r.json.tmp-{os.getppid()}"  # a live run's: kept
    live.write_text("being written")
    with out_lock(out, "this run"):
        assert (tmp_path / "r.json.lock").read_text().split("\n")[0] == str(os.getpid())
        assert (tmp_path / "r.json.lock").read_text().split("\n")[2] == "this run"
        with out_lock(out):  # re-entrant in one process
            pass
        assert (tmp_path / "r.json.lock").exists()
        assert not (tmp_path / f".r.json.tmp-{dead}").exists() and live.exists()
    assert not (tmp_path / "r.json.lock").exists()
    # a lock of garbage (a run killed while writing it) is stale once it is old
    (tmp_path / "r.json.lock").write_text("")
    os.utime(tmp_path / "r.json.lock", (time.time() - 60, time.time() - 60))
    with out_lock(out):
        pass


def test_temporary_files_have_a_fixed_name_and_go(tmp_path):
    path = tmp_path / "r.json"
    fd, tmp = files._open_temporary(path, "path")
    os.close(fd)
    assert tmp.name == f".r.json.tmp-{os.getpid()}"
    tmp.unlink()
    atomic_write_json(path, {"ok": 1})
    with pytest.raises(ValueError):
        atomic_write_json(path, {"bad": float("nan")})
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]
    assert json.loads(path.read_text()) == {"ok": 1}


def test_devices_and_pipes_are_never_replaced(tmp_path, capsys):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for path in ("/dev/null", fifo):
        with pytest.raises(UnwritablePathError, match="not a regular file"):
            writable_path(path, "out")
        with pytest.raises(UnwritablePathError, match="not a regular file"):
            atomic_write_json(path, {})
    assert Path("/dev/null").is_char_device() and fifo.is_fifo()
    pytest.importorskip("torch")  # the CLI checks the device (torch) first
    assert main(["e1", "--smoke", "--no-progress", "--out", "/dev/null"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "/dev/null" in err[0] and "regular file" in err[0], err
