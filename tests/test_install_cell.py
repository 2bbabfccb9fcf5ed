"""The notebooks' install cell (scripts/update_install_cell.py): what it installs where the
package is missing (Colab, a bare kernel), that it does nothing where it is importable, and
that every chapter carries the current cell."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import io
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import update_install_cell as cell  # noqa: E402

LOCK = (ROOT / "constraints.txt").read_text(encoding="utf-8")


def run_cell(monkeypatch, *, importable: bool, torch: str | None, python=None):
    """Execute the generated cell with pip, the network and the environment faked."""
    calls = []

    def fake_run(args, check):
        assert check is True
        constraints_file = Path(args[args.index("--constraint") + 1])
        constraints = constraints_file.read_text()
        constraints_file.unlink()
        calls.append((args, constraints))

    def fake_urlopen(url):
        calls.append(("GET", url))
        return io.BytesIO(LOCK.encode())

    def fake_version(name):
        if name == "torch" and torch is not None:
            return torch
        raise importlib.metadata.PackageNotFoundError(name)

    def fake_find_spec(name, *args):
        return object() if importable else None

    monkeypatch.setattr(subprocess, "run", fake_run)
    monkeypatch.setattr(urllib.request, "urlopen", fake_urlopen)
    monkeypatch.setattr(importlib.metadata, "version", fake_version)
    monkeypatch.setattr(importlib.util, "find_spec", fake_find_spec)
    code = compile(cell.cell_body(), "<install cell>", "exec")
    with monkeypatch.context() as m:
        if python is not None:
            m.setattr(sys, "version_info", python)
        exec(code, {})
    return calls


def test_no_op_where_the_package_is_importable(monkeypatch):
    assert run_cell(monkeypatch, importable=True, torch="2.13.0") == []


@pytest.mark.parametrize("torch", [None, "2.12.1+cu126", "2.15.0"])
def test_installs_with_the_full_lock_when_torch_is_missing_or_out_of_range(monkeypatch, torch):
    repo, branch = cell.repository()
    calls = run_cell(monkeypatch, importable=False, torch=torch)
    assert calls[0] == ("GET", f"{repo}/raw/{branch}/constraints.txt")
    args, constraints = calls[1]
    assert args[:4] == [sys.executable, "-m", "pip", "install"]
    assert args[-1] == f"companion @ git+{repo}@{branch}"
    assert constraints.split() == LOCK.split()
    assert "torch==" in constraints


@pytest.mark.parametrize("torch", ["2.13.0", "2.14.1+cu128"])
def test_keeps_a_preinstalled_torch_in_range_and_pins_everything_else(monkeypatch, torch):
    calls = run_cell(monkeypatch, importable=False, torch=torch)
    _, constraints = calls[1]
    want = [line for line in LOCK.split() if not line.startswith("torch==")]
    assert constraints.split() == want


def test_on_the_locks_python_requires_python_is_honoured(monkeypatch):
    args, _ = run_cell(monkeypatch, importable=False, torch=None, python=(3, 11, 7))[1]
    assert "--ignore-requires-python" not in args


def test_on_another_python_the_pins_stay_and_the_runtime_is_named(monkeypatch, capsys):
    args, constraints = run_cell(monkeypatch, importable=False, torch=None,
                                 python=(3, 12, 1))[1]
    assert "--ignore-requires-python" in args
    assert constraints.split() == LOCK.split()
    assert "tested on Python 3.11" in capsys.readouterr().out


def test_torch_range_comes_from_pyproject():
    low, high = cell.torch_range()
    assert f"keep_torch = {low} <= (major, minor) < {high}" in cell.cell_body()
    assert low == (2, 13) and high == (2, 15)


def test_rewrite_replaces_only_the_first_code_cell():
    source = (
        "# ---\n# jupyter: {}\n# ---\n\n# %% [markdown]\n# # Title\n\n"
        "# %%\nprint('old install')\n\n# %%\nx = 1\n\n# %% [markdown]\n# end\n"
    )
    new = cell.rewrite(source, "print('new')\n")
    assert new.count("# %%") == source.count("# %%")
    assert "print('old install')" not in new
    header = '# %% tags=["hide-input", "remove-output"]'
    assert new.index(header + "\nprint('new')") > new.index("# # Title")
    assert "# %%\nx = 1\n" in new
    assert cell.rewrite(new, "print('new')\n") == new


def test_every_chapter_carries_the_current_install_cell():
    expected = cell.HEADER + "\n" + cell.cell_body()
    stale = [
        p.name for p in sorted((ROOT / "notebooks").glob("[0-9]*.py"))
        if cell.first_code_cell(p.read_text(encoding="utf-8")) != expected.rstrip() + "\n"
    ]
    assert not stale, (
        f"install cell out of date in {stale}: run python scripts/update_install_cell.py, "
        "then bash scripts/execute_notebooks.sh"
    )
