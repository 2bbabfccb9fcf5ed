"""sandwich/windows: the table of windows every page quotes, read and re-verified from the
committed files."""

import json
import shutil
from pathlib import Path

import pytest

from companion.sandwich.windows import FAMILIES, sandwich_windows

ROOT = Path(__file__).resolve().parents[2]
HEADS = ROOT / "results" / "heads"


@pytest.fixture(scope="module")
def windows():
    return {(w.family, w.features): w for w in sandwich_windows(HEADS)}


def test_the_six_windows(windows):
    assert {k: (w.lower, w.upper) for k, w in windows.items()} == {
        ("e1_28", "real"): (22, 22), ("e1_28", "nonnegative"): (26, 26),
        ("paley_rows_23", "real"): (19, 19), ("paley_rows_23", "nonnegative"): (23, 23),
        ("paley_code_46", "real"): (30, 31), ("paley_code_46", "nonnegative"): (30, 35)}
    assert windows[("e1_28", "nonnegative")].text == "exactly 26"
    assert windows[("paley_code_46", "real")].text == "[30, 31]"


def test_each_end_names_its_file_and_how_it_is_known(windows):
    for (family, _features), w in windows.items():
        assert (HEADS / w.lower_file).exists() and (HEADS / w.upper_file).exists()
        assert w.lower_file.startswith(family) and w.upper_file.startswith(family)
    assert "Lemma N" in windows[("e1_28", "nonnegative")].lower_how
    assert "trace" in windows[("paley_code_46", "nonnegative")].lower_how
    # a nonnegative head is a real-features head too: it can be the real window's upper end
    assert windows[("paley_rows_23", "real")].upper_file == "paley_rows_23_signed.json"
    row = windows[("e1_28", "real")].row()
    assert set(row) == {"family", "features", "window", "lower end", "upper end"}
    assert row["lower end"] == "sharper trace lemma" and row["upper end"] == "exact signed head"


def test_a_file_that_fails_stops_the_table(tmp_path):
    folder = tmp_path / "heads"
    shutil.copytree(HEADS, folder)
    path = folder / "e1_28_signed.json"
    data = json.loads(path.read_text())
    data["max_error"] = "1/3"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="does not verify"):
        sandwich_windows(folder)
    assert set(FAMILIES) == {"e1_28", "paley_rows_23", "paley_code_46"}
