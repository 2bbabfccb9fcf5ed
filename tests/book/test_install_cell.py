"""The notebooks' install cell (scripts/update_install_cell.py): it does nothing where the
package is importable; elsewhere one `%pip install` from repository.url, then a plain
restart message exactly when pip changed a package the runtime had already imported, and a
note when the runtime's torch is not the one CI tests. Here `%pip` and the installed
distributions are faked; tests/book/test_colab.py runs the real cell against real pip."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import jupytext
import pytest
from IPython.core.inputtransformer2 import TransformerManager

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import update_install_cell as cell  # noqa: E402

COLAB = {"numpy": "2.1.3", "pillow": "11.3.0", "torch": "2.11.0+cu126", "tqdm": "4.67.1"}
OWNERS = {"fake_numpy": ["numpy"], "fake_PIL": ["pillow"], "fake_torch": ["torch"],
          "fake_tqdm": ["tqdm"], "fake_companion": ["companion"]}


def run_cell(monkeypatch, *, importable=False, installed=None, pip_changes=None,
             imported=("fake_numpy", "fake_PIL")):
    """Execute the generated cell with `%pip`, the distributions and the imports faked.
    Returns the arguments `%pip` was called with (one string per call)."""
    dists = dict(COLAB if installed is None else installed)
    magics = []

    def run_line_magic(name, line):
        assert name == "pip"
        magics.append(line)
        dists.update({"companion": "0.1.0", **(pip_changes or {})})

    def fake_distributions():
        return [SimpleNamespace(name=n, version=v) for n, v in dists.items()]

    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: object() if importable else None)
    monkeypatch.setattr(importlib.metadata, "distributions", fake_distributions)
    monkeypatch.setattr(importlib.metadata, "packages_distributions", lambda: OWNERS)
    monkeypatch.setattr(importlib.metadata, "version", lambda name: dists[name])
    for module in imported:
        monkeypatch.setitem(sys.modules, module, SimpleNamespace())
    code = TransformerManager().transform_cell(cell.cell_source())
    shell = SimpleNamespace(run_line_magic=run_line_magic)
    exec(compile(code, "<install cell>", "exec"), {"get_ipython": lambda: shell})
    return magics


def test_no_op_where_the_package_is_importable(monkeypatch, capsys):
    assert run_cell(monkeypatch, importable=True) == []
    assert capsys.readouterr().out == ""


def test_one_pip_install_of_the_repository_without_the_lock(monkeypatch):
    repo, branch = cell.repository()
    magics = run_cell(monkeypatch, installed={**COLAB, "torch": "2.13.0"})
    assert magics == [f'install --quiet "companion @ git+{repo}@{branch}"']


def test_colabs_stack_kept_means_no_restart(monkeypatch, capsys):
    run_cell(monkeypatch, installed={**COLAB, "torch": "2.13.0+cu128"})
    assert capsys.readouterr().out == ""


def test_a_changed_package_that_was_imported_demands_a_restart(monkeypatch, capsys):
    run_cell(monkeypatch, pip_changes={"numpy": "2.4.6", "tqdm": "4.70.1"},
             imported=("fake_numpy", "fake_PIL"))
    out = capsys.readouterr().out
    assert out.startswith("Restart the runtime now (Runtime > Restart session), then run the "
                          "notebook from the top")
    assert "changed numpy, already imported" in out  # tqdm changed too, but was not imported


def test_a_changed_package_not_yet_imported_needs_no_restart(monkeypatch, capsys):
    run_cell(monkeypatch, pip_changes={"tqdm": "4.70.1"}, imported=("fake_numpy",))
    assert "Restart" not in capsys.readouterr().out


def test_a_kept_torch_other_than_the_tested_one_gets_a_one_line_note(monkeypatch, capsys):
    run_cell(monkeypatch)
    out = capsys.readouterr().out
    tested = cell.tested_torch()
    assert out == f"Note: kept this runtime's torch 2.11.0+cu126; CI tests torch {tested}.\n"


def test_tested_torch_is_the_locks():
    lock = (ROOT / "constraints.txt").read_text(encoding="utf-8")
    assert f"\ntorch=={cell.tested_torch()}." in "\n" + lock


def test_the_cell_is_short_and_installs_nothing_else():
    source = cell.cell_source()
    code = [line for line in source.splitlines() if line.strip() and not
            line.lstrip().startswith("#")]
    assert len(code) <= 16, "the install cell must stay a few readable lines"
    pips = [line for line in code if line.lstrip().startswith("%pip")]
    assert len(pips) == 1 and pips[0].lstrip().startswith('%pip install --quiet "companion @ ')
    for forbidden in ("--constraint", "--ignore-requires-python", "subprocess", "urlopen"):
        assert forbidden not in source


def test_the_percent_source_reads_back_as_the_notebook_cell():
    """jupytext comments the %pip magic out in the .py file and restores it in the .ipynb."""
    text = "# %% [markdown]\n# # T\n\n" + cell.HEADER + "\n" + cell.as_percent_source(
        cell.cell_source())
    assert "    # %pip install" in text
    notebook = jupytext.reads(text, fmt="py:percent")
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert code[0].source == cell.cell_source().rstrip("\n")


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


def test_check_mode_reports_a_stale_cell(tmp_path, capsys):
    stale = tmp_path / "01_x.py"
    stale.write_text("# %% [markdown]\n# # T\n\n# %%\nprint('old')\n", encoding="utf-8")
    assert cell.main(["--check", str(stale)]) == 1
    assert "install cell out of date" in capsys.readouterr().err
    assert cell.main([str(stale)]) == 0
    assert cell.main(["--check", str(stale)]) == 0


CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9]*.py"))


@pytest.mark.parametrize("source", CHAPTERS, ids=lambda p: p.name)
def test_every_chapter_carries_the_current_install_cell(source):
    expected = cell.HEADER + "\n" + cell.as_percent_source(cell.cell_source())
    assert cell.first_code_cell(source.read_text(encoding="utf-8")) == expected.rstrip() + "\n", (
        f"install cell out of date in {source.name}: run python scripts/update_install_cell.py, "
        "then bash scripts/execute_notebooks.sh"
    )
    twin = json.loads(source.with_suffix(".ipynb").read_text(encoding="utf-8"))
    first = next(c for c in twin["cells"] if c["cell_type"] == "code")
    assert "".join(first["source"]) == cell.cell_source().rstrip("\n"), (
        f"{source.with_suffix('.ipynb').name}: re-execute it (bash scripts/execute_notebooks.sh)"
    )
    assert first["metadata"]["tags"] == ["hide-input", "remove-output"]
