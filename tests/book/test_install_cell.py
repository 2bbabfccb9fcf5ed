"""The install cell (first code cell of every chapter, scripts/update_install_cell.py): one
`%pip install` of the repository named in _config.yml, only where the companion is not
importable. The `%pip` magic is faked here; tests/book/test_colab.py runs the real cell
against real pip."""

from __future__ import annotations

import builtins
import sys
from pathlib import Path
from types import SimpleNamespace

import jupytext
import pytest
from IPython.core.inputtransformer2 import TransformerManager

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import update_install_cell as cell  # noqa: E402

CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9]*.py"))


def run_cell(monkeypatch, importable: bool) -> list[str]:
    """Execute the cell with `import companion` succeeding or not (until `%pip` installs it);
    returns the `%pip` lines run."""
    magics = []
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "companion" and not (importable or magics):
            raise ModuleNotFoundError("No module named 'companion'", name="companion")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    code = TransformerManager().transform_cell(cell.cell_source())
    shell = SimpleNamespace(run_line_magic=lambda name, line: magics.append(f"{name} {line}"))
    exec(compile(code, "<install cell>", "exec"), {"get_ipython": lambda: shell})
    return magics


def test_no_op_where_the_package_is_importable(monkeypatch):
    assert run_cell(monkeypatch, importable=True) == []


def test_one_pip_install_of_the_repository_without_the_lock(monkeypatch):
    url, branch = cell.repository()
    assert run_cell(monkeypatch, importable=False) == [
        f'pip install --quiet "companion @ git+{url}@{branch}"']


@pytest.mark.parametrize("source", CHAPTERS, ids=lambda p: p.stem)
def test_every_chapter_carries_the_current_install_cell(source):
    text = source.read_text(encoding="utf-8")
    assert cell.rewrite(text) == text, "run python scripts/update_install_cell.py"
    nb = jupytext.read(source)
    first = next(c for c in nb.cells if c.cell_type == "code")
    assert first.source == cell.cell_source().rstrip("\n")
    assert first.metadata["tags"] == ["remove-cell"]
    twin = jupytext.read(source.with_suffix(".ipynb"))
    assert next(c for c in twin.cells if c.cell_type == "code").source == first.source


def test_check_mode_reports_a_stale_cell(tmp_path, capsys):
    stale = tmp_path / "01_x.py"
    stale.write_text(CHAPTERS[0].read_text().replace("--quiet", "--verbose"))
    assert cell.main(["--check", str(stale)]) == 1
    assert "stale install cell" in capsys.readouterr().out
    assert cell.main([str(stale)]) == 0 and cell.main(["--check", str(stale)]) == 0
