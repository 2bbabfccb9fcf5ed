"""The argument checks added to close the fuzz suite's open findings (issue 16).

Each bad input below once ended in an AttributeError, KeyError, IndexError, OSError or a
numpy/torch error naming nothing; now it is a TypeError/ValueError naming the argument. The
valid-input cases pin that the checks changed no result.
"""

from __future__ import annotations

import json
import math
import os
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch
from fuzz_harness import exception_kind

from companion.checks import (
    check_array,
    check_device,
    check_exact_array,
    check_mapping,
    check_path,
)
from companion.core.task import token_pool
from companion.experiments.e2.data import pool_inputs
from companion.experiments.engine import lr_at
from companion.experiments.sweep import (
    ResultFileError,
    UnwritablePathError,
    atomic_write_json,
    canonical_json,
)


def test_check_array_accepts_real_arrays_and_exact_tables():
    assert check_array([[1, 2], [3, 4]], "a", 2).shape == (2, 2)
    exact = np.array([Fraction(1, 3), 2], dtype=object)
    assert check_exact_array(exact, "a").tolist() == [Fraction(1, 3), 2]
    assert check_array(np.float32(0.5), "a").ndim == 0


@pytest.mark.parametrize("bad, kind", [
    ([[0, 1], [1]], TypeError),                      # ragged
    (np.array([None, 1], dtype=object), TypeError),  # object arrays: check_exact_array
    (np.array(["a", "b"]), TypeError),               # strings
    (np.ones(2, dtype=complex), TypeError),
    (None, TypeError), ("0101", TypeError), ({}, TypeError),
    (np.zeros(3), ValueError),                       # ndim 1, 2 wanted
])
def test_check_array_refuses_with_the_name(bad, kind):
    with pytest.raises(kind, match="table"):
        check_array(bad, "table", 2)


def test_check_device_mapping_path():
    assert check_device("cpu") == "cpu"
    assert check_device(torch.device("cpu")) == torch.device("cpu")
    with pytest.raises(ValueError, match="device"):
        check_device("tpu")
    with pytest.raises(ValueError, match="device"):
        check_device("")
    with pytest.raises(TypeError, match="device"):
        check_device(3)
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    with pytest.raises(ValueError, match=f"has {count} CUDA device"):
        check_device(f"cuda:{count}")
    with pytest.raises(TypeError, match="counts"):
        check_mapping([], "counts")
    with pytest.raises(TypeError, match="out_dir"):
        check_path(None, "out_dir")
    assert str(check_path("results", "out_dir")) == "results"


def test_unwritable_path_is_an_oserror_and_a_valueerror(tmp_path):
    with pytest.raises(UnwritablePathError) as info:
        atomic_write_json("/proc/companion-test/x.json", {"a": 1})
    assert isinstance(info.value, OSError) and isinstance(info.value, ValueError)
    assert str(info.value).startswith("path '/proc/companion-test/x.json'")
    with pytest.raises(ValueError, match="path .*folder"):
        atomic_write_json(tmp_path, {"a": 1})


def test_atomic_write_json_refuses_non_json_before_touching_the_file(tmp_path):
    path = tmp_path / "r.json"
    atomic_write_json(path, {"b": [1, 2.5], "a": None})
    # same bytes as the json.dump it replaced: indent 1, sorted keys, one final newline
    assert path.read_text() == json.dumps({"a": None, "b": [1, 2.5]}, indent=1,
                                          sort_keys=True) + "\n"
    before = path.read_bytes()
    with pytest.raises(TypeError, match="obj must be JSON"):
        atomic_write_json(path, {"a": np.zeros(2)})
    with pytest.raises(ValueError, match="obj must be JSON"):
        atomic_write_json(path, {"a": math.nan})
    assert path.read_bytes() == before
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind
    with pytest.raises(TypeError, match="obj"):
        canonical_json(np.zeros(3))


def test_harness_reports_subclasses_by_their_base():
    assert exception_kind(ValueError("x")) == "ValueError"
    assert exception_kind(ResultFileError("x")) == "ValueError (ResultFileError)"
    assert exception_kind(UnwritablePathError("x")) == "ValueError (UnwritablePathError)"
    assert exception_kind(KeyError("x")) == "KeyError"


def test_engine_checks_keep_the_schedule():
    assert lr_at(0, 10, 0.1, 0.5) == pytest.approx(0.1)
    assert lr_at(9, 10, 0.1, 0.5) == pytest.approx(0.05)
    with pytest.raises(TypeError, match="step"):
        lr_at(math.inf, 10, 0.1, 0.5)


def test_pool_inputs_checks_indices():
    pool = token_pool(6, 16, 0)
    rows, bits = pool_inputs(pool, np.array([[0, 1, 2]]))
    assert rows.shape == (3, 4) and bits.bits.shape == (16, 6)
    with pytest.raises(ValueError, match="idx"):
        pool_inputs(pool, np.array([[0, 1, 16]]))
    with pytest.raises(TypeError, match="pool"):
        pool_inputs(None, np.array([[0, 1, 2]]))
    with pytest.raises(ValueError, match="device"):
        pool_inputs(pool, np.array([[0, 1, 2]]), device="nonsense")


@pytest.mark.parametrize("kind", ["folder", "fifo", "device", "nan", "infinity", "huge",
                                  "missing", "truncated", "binary"])
def test_read_json_file_refuses_every_damaged_kind_in_one_line(tmp_path, kind):
    """The one loader: only a regular file of bounded size holding finite JSON is read;
    everything else is one ValueError line naming the file, and the file is left as it was."""
    from companion.checks import MAX_JSON_BYTES, read_json_file

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
    before = path.read_bytes() if path.is_file() else None
    with pytest.raises(ValueError) as info:
        read_json_file(path, "results file")
    message = str(info.value)
    assert "\n" not in message and str(path)[:60] in message
    if before is not None:
        assert path.read_bytes() == before


def test_read_json_file_reads_a_committed_results_file():
    from companion.checks import read_json_file

    data = read_json_file(Path(__file__).resolve().parents[1] / "results" / "e2_quick.json")
    assert isinstance(data["units"], dict) and data["units"]
