"""Sweep bookkeeping: configuration hashes, atomic JSON results, resumable stores.

A sweep is a list of *units* (e.g. one rank group × all seeds, trained as one batched
program). :class:`ResultStore` keeps a JSON file ``{"config", "config_hash", "units": {key:
result}}`` and rewrites it atomically (temporary file in the same folder + ``os.replace``)
after every finished unit, so an interrupted sweep loses at most the unit in flight and a
resumed one never redoes a finished unit. A file written for a different configuration is
refused rather than mixed with new results.

Serves chapters 6 and 7 (their committed result files).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from pathlib import Path

from companion.checks import check_float

__all__ = ["FrozenConfig", "config_dict", "config_hash", "atomic_write_json", "ResultStore",
           "canonical_json", "ResultFileError", "UnwritablePathError", "check_writable",
           "read_json_file"]


class ResultFileError(ValueError):
    """An existing results file that cannot be resumed: truncated or not JSON, not a results
    file, or written for another configuration. The file is left as it is."""


class UnwritablePathError(OSError, ValueError):
    """A path where no file can be written (a folder, a folder that cannot be made, no
    permission). Both an OSError (the file system said no) and a ValueError (the argument
    names a bad place), like ``io.UnsupportedOperation``; its message names the argument."""


def _unwritable(name: str, path, reason: str) -> UnwritablePathError:
    err = UnwritablePathError(f"{name} {str(path)!r}: cannot write a file there ({reason})")
    err.strerror = reason  # what the CLI prints after the path it already names
    return err


def canonical_json(obj) -> str:
    """Deterministic JSON text (sorted keys, no whitespace) used for hashing."""
    return _json_text(obj, separators=(",", ":"))


def _json_text(obj, **options) -> str:
    """``json.dumps(obj, sort_keys=True, allow_nan=False, **options)``; data that is not JSON
    raises TypeError/ValueError naming obj."""
    try:
        return json.dumps(obj, sort_keys=True, allow_nan=False, **options)
    except (TypeError, ValueError) as exc:
        kind = TypeError if isinstance(exc, TypeError) else ValueError
        raise kind(f"obj must be JSON data (dicts with str keys, lists, str, finite numbers, "
                   f"bool, None): {exc}") from exc


class FrozenConfig:
    """Base of the experiments' frozen configuration dataclasses (E1Config, E2Config): their
    ``__post_init__`` validates every field and stores it in canonical form with `_put`."""

    def _put(self, name: str, value) -> None:
        object.__setattr__(self, name, value)  # the dataclass is frozen once constructed

    def _check_schedule(self) -> None:
        """The Adam schedule both experiments share: lr in (0, 10], final fraction in (0, 1]."""
        self._put("lr", check_float(self.lr, "lr", 0, 10, low_open=True))
        self._put("final_lr_fraction", check_float(self.final_lr_fraction, "final_lr_fraction",
                                                   0, 1, low_open=True))


def _as_lists(value):
    if isinstance(value, (list, tuple)):
        return [_as_lists(v) for v in value]
    if isinstance(value, dict):
        return {k: _as_lists(v) for k, v in value.items()}
    return value


def config_dict(config) -> dict:
    """A configuration as a plain dict, as JSON stores it: a dataclass (E1Config, E2Config)
    via ``asdict``, its tuples as lists."""
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return _as_lists(dataclasses.asdict(config))
    if not isinstance(config, dict):
        raise TypeError(f"config must be a dataclass or a dict, got {type(config).__name__}")
    return config


def config_hash(config) -> str:
    """First 16 hex digits of the SHA-256 of the configuration's canonical JSON (a dataclass
    is hashed through ``asdict``; tuples and lists give the same JSON)."""
    config = config_dict(config)
    try:
        text = canonical_json(config)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"config must be JSON-serialisable with finite numbers: {exc}") from exc
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def atomic_write_json(path, obj) -> Path:
    """Write ``obj`` as JSON to ``path`` atomically: readers see the old file or the new one.
    A path where no file can be made raises :class:`UnwritablePathError` (naming path), data
    that is not JSON a TypeError/ValueError naming obj; the old file is then untouched."""
    path = _writable_target(path, "path")
    text = _json_text(obj, indent=1)
    fd, tmp = _make_temp(path, "path")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def read_json_file(path, what: str = "results file"):
    """The JSON content of an existing file at `path`; ValueError/TypeError naming path
    when it is missing, unreadable or not JSON."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"path must be an existing {what}, got {str(path)!r}")
    try:
        return json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"path {str(path)!r} is not a JSON {what}: {exc}") from exc
    except OSError as exc:
        raise ValueError(f"path {str(path)!r} cannot be read ({exc.strerror or exc})") from exc


def _writable_target(path, name: str) -> Path:
    """`path` as a Path after checking its type and that it is not a folder."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{name} must be a str or os.PathLike, got {type(path).__name__}")
    path = Path(path)
    if str(path) in ("", ".") or path.is_dir():
        raise _unwritable(name, path, "it is a folder, not a file")
    return path


def _make_temp(path: Path, name: str) -> tuple[int, str]:
    """A new temporary file beside `path` (its folder made if needed): (fd, its path)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise _unwritable(name, path, exc.strerror or str(exc)) from exc


def check_writable(path, name: str = "path") -> Path:
    """`path` as a Path after checking that a results file can be written there (its folder
    exists or can be made, and a file can be created in it), before any work is done; raises
    :class:`UnwritablePathError` (an OSError and a ValueError naming `name` and the path)
    otherwise. An existing file is not touched."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a str (the argument's name), got {type(name).__name__}")
    path = _writable_target(path, name)
    fd, tmp = _make_temp(path, name)
    os.close(fd)
    os.unlink(tmp)
    return path


class ResultStore:
    """Per-unit results of one configuration, persisted atomically (or in memory if path None).

    ``restart=True`` discards an existing file (even one for another configuration).
    """

    def __init__(self, path, config, restart: bool = False):
        self.config = config_dict(config)
        self.hash = config_hash(self.config)
        self.path = None if path is None else check_writable(path, "path")
        self.units: dict[str, dict] = {}
        # (checked writable above: before any unit is computed, not after the first)
        if self.path is not None and self.path.exists() and not restart:
            self.units = self._read_units()

    def _read_units(self) -> dict:
        """The finished units of the existing file; ResultFileError if it cannot be resumed."""
        fix = "pass restart=True (CLI: --restart) to overwrite it, or another output path"
        try:
            with open(self.path, encoding="utf-8") as fh:
                data = json.load(fh)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ResultFileError(
                f"{self.path} is not a complete JSON results file ({exc}); {fix}") from exc
        except OSError as exc:
            raise ResultFileError(f"{self.path} cannot be read ({exc.strerror}); {fix}") from exc
        if not (isinstance(data, dict) and isinstance(data.get("units"), dict)
                and all(isinstance(v, dict) for v in data["units"].values())):
            raise ResultFileError(f"{self.path} is JSON but not a results file (no 'units' "
                                  f"mapping); {fix}")
        if data.get("config_hash") != self.hash:
            raise ResultFileError(
                f"{self.path} holds results for configuration {data.get('config_hash')}, not "
                f"{self.hash}; {fix}"
            )
        return dict(data["units"])

    def done(self, key: str) -> bool:
        return key in self.units

    def get(self, key: str) -> dict:
        return self.units[key]

    def put(self, key: str, result: dict) -> None:
        if not isinstance(key, str):
            raise TypeError(f"key must be a str, got {type(key).__name__}")
        self.units[key] = result
        self.save()

    def as_dict(self) -> dict:
        return {"config": self.config, "config_hash": self.hash, "units": self.units}

    def save(self) -> None:
        if self.path is not None:
            atomic_write_json(self.path, self.as_dict())
