"""The package's JSON files (results, head files, certificates): :func:`read_json_file`, the one
loader; :func:`atomic_write_json`, the one writer (readers see the old file or the new one);
:func:`writable_path`, the one check of an output path; and :func:`out_lock`, the lock of an
output file and the temporaries of runs that died. A symlinked output is written through to
its target (the link stays); a path that names a folder is refused."""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import sys
import time
from pathlib import Path

import numpy as np

from companion.checks import check_instance, check_path

__all__ = ["read_json_file", "atomic_write_json", "writable_path", "out_lock",
           "UnwritablePathError", "OutputInUseError"]

#: Largest JSON file read (the largest committed one has a few MB), and its deepest nesting
#: (the committed files nest at most 9 deep; Python's parser recurses once per level).
MAX_JSON_BYTES = 64 * 2**20
MAX_JSON_DEPTH = 64


class UnwritablePathError(OSError, ValueError):
    """A path where no file can be written; its message names the argument."""


class OutputInUseError(RuntimeError):
    """Another live run holds the output's lock file; the message names it (pid, command)."""


def _unwritable(name: str, path, reason: str) -> UnwritablePathError:
    err = UnwritablePathError(f"{name} {str(path)!r}: cannot write a file there ({reason})")
    err.strerror = reason  # what the CLI prints after the path it already names
    return err


# --------------------------------------------------------------------------- reading


def _refuse_constant(word: str):
    raise ValueError(f"holds {word}, which JSON files here never contain")


def _finite(text: str) -> float:
    value = float(text)
    if not np.isfinite(value):
        raise ValueError(f"holds the number {text:.40}, which overflows to infinity")
    return value


def _no_repeats(pairs: list) -> dict:
    out = dict(pairs)
    if len(out) != len(pairs):
        key = next(k for i, (k, _) in enumerate(pairs) if k in dict(pairs[:i]))
        raise ValueError(f"holds the key {key!r:.60} twice in one object")
    return out


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_EXPONENT = re.compile(r"[eE]\+?0*[1-9]\d{2}")  # 1e100 and above


def _scan(shell: str) -> tuple[int, int]:
    """The deepest nesting of [ and { and the longest run of digits in JSON text without its
    strings: a float overflows only with a 3-digit exponent or 309 digits."""
    b = np.frombuffer(shell.encode("utf-8", "replace"), dtype=np.uint8)
    step = ((b == 91) | (b == 123)).astype(np.int8) - ((b == 93) | (b == 125))
    digit = np.diff(np.concatenate(([0], ((b >= 48) & (b <= 57)).view(np.int8), [0])))
    edges = np.flatnonzero(digit)
    return (int(np.cumsum(step, dtype=np.int64).max(initial=0)),
            int((edges[1::2] - edges[::2]).max(initial=0)))


def read_json_file(path, what: str = "results file"):
    """The JSON of a regular file of at most MAX_JSON_BYTES, nested at most MAX_JSON_DEPTH
    deep, without NaN, infinity (written or overflowing) or a key twice in one object; else a
    one-line ValueError naming the file."""
    path, shown = check_path(path, "path"), f"{str(path)!r:.200}"
    try:
        info = path.stat()
    except FileNotFoundError:
        raise ValueError(f"path must be an existing {what}, got {shown}") from None
    except OSError as exc:
        raise ValueError(f"path {shown} cannot be read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"path must be a regular file ({what}), got {shown}, which is a "
                         "folder, device, pipe or socket")
    if info.st_size > MAX_JSON_BYTES:
        raise ValueError(f"path {shown} has {info.st_size} bytes, above the {what} cap "
                         f"MAX_JSON_BYTES = {MAX_JSON_BYTES}")
    try:
        text = path.read_text()
        shell = _STRING.sub("", text)
        depth, digits = _scan(shell)
        if depth > MAX_JSON_DEPTH:
            raise ValueError(f"nests {depth} deep, above MAX_JSON_DEPTH = {MAX_JSON_DEPTH}")
        huge = digits >= 300 or _EXPONENT.search(shell)
        return json.loads(text, parse_constant=_refuse_constant, object_pairs_hook=_no_repeats,
                          parse_float=_finite if huge else None)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"path {shown} is not a JSON {what}: "
                         f"{str(exc).splitlines()[0]:.200}") from None
    except OSError as exc:
        raise ValueError(f"path {shown} cannot be read ({exc.strerror or exc})") from None


# --------------------------------------------------------------------------- writing


def json_text(obj, **options) -> str:
    """``json.dumps`` with sorted keys and no NaN; a TypeError / ValueError naming ``obj``."""
    try:
        return json.dumps(obj, sort_keys=True, allow_nan=False, **options)
    except (TypeError, ValueError) as exc:
        kind = TypeError if isinstance(exc, TypeError) else ValueError
        raise kind(f"obj must be JSON data (dicts with str keys, lists, str, finite numbers, "
                   f"bool, None): {exc}") from exc


def _target(path, name: str) -> Path:
    """Where a file named `path` is written: a symlink's target; refused: a folder, a device."""
    raw = os.fspath(check_instance(path, name, (str, os.PathLike)))
    if not isinstance(raw, str) or not raw.strip() or raw.endswith(("/", os.sep)) \
            or os.path.basename(raw) in (".", ".."):
        raise _unwritable(name, raw, "it names a folder, not a file")
    target = Path(os.path.realpath(raw)) if os.path.islink(raw) else Path(raw)
    if target.is_dir():
        raise _unwritable(name, raw, "it is a folder, not a file")
    if target.exists() and not target.is_file():  # replacing /dev/null would break the machine
        raise _unwritable(name, raw, "it is a device, pipe or socket, not a regular file")
    return target


def _open_temporary(path: Path, name: str) -> tuple[int, Path]:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")  # a dead run's: see out_lock
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), tmp
    except OSError as exc:
        raise _unwritable(name, path, exc.strerror or str(exc)) from exc


def write_json(path: Path, obj) -> Path:
    """:func:`atomic_write_json` on a path :func:`writable_path` returned (no checks)."""
    return write_text(path, json_text(obj, indent=1) + "\n")


def write_text(path: Path, text: str) -> Path:
    """`text` written atomically at a path :func:`writable_path` returned (no checks)."""
    fd, tmp = _open_temporary(path, "path")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def atomic_write_json(path, obj) -> Path:
    """Write ``obj`` as JSON to ``path`` atomically (through a symlink, to its target)."""
    return write_json(_target(path, "path"), obj)


def writable_path(path, name: str = "path") -> Path:
    """Where `path` is written (a symlink's target), once a file could be created there (its
    folder made if needed); else :class:`UnwritablePathError` naming `name`. An existing file
    is not touched."""
    name = check_instance(name, "name (the argument's name)", str)
    path = _target(path, name)
    fd, tmp = _open_temporary(path, name)
    os.close(fd)
    tmp.unlink()
    return path


# --------------------------------------------------------------------------- the output lock

_HELD: dict[str, int] = {}  # lock files this process holds -> nesting depth


def _start_time(pid: int) -> str:
    """A process's start time (field 22 of /proc/PID/stat; '' where unknown): tells a live
    lock holder from a later process that reuses its pid."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[19]
    except (OSError, IndexError):
        return ""


def _alive(pid: int, started: str = "") -> bool:
    if pid == os.getpid():
        return False  # not held by this process (see _HELD): left by an earlier one
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, run by another user
    return not started or not _start_time(pid) or _start_time(pid) == started


def _lock_owner(lock: Path) -> tuple[int | None, str, str]:
    """(pid, start time, command) written in a lock file; pid None if unreadable."""
    try:
        pid, started, command = lock.read_text().split("\n", 2)
        return int(pid), started, command.strip()
    except (OSError, ValueError):
        return None, "", ""


def _clean_temporaries(path: Path) -> None:
    """Remove temporary files of `path` left by runs that died (their pid is gone)."""
    for tmp in path.parent.glob(f".{path.name}.tmp-*"):
        pid = tmp.name.rpartition("-")[2]
        if pid.isdigit() and not _alive(int(pid)):
            tmp.unlink(missing_ok=True)


def _acquire(path: Path, lock: Path, command: str) -> None:
    me = f"{os.getpid()}\n{_start_time(os.getpid())}\n{command}\n"
    for _ in range(5):
        try:
            lock.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            pid, started, other = _lock_owner(lock)
            if pid is None:  # being written this instant, or garbage: old garbage is stale
                with contextlib.suppress(OSError):
                    if time.time() - lock.stat().st_mtime > 10:
                        lock.unlink()
                time.sleep(0.1)
                continue
            if _alive(pid, started):
                raise OutputInUseError(
                    f"{path} is in use by another run (pid {pid}: {other}); wait for it to "
                    f"finish or choose another output") from None
            lock.unlink(missing_ok=True)  # stale: its run died without removing it
            continue
        except OSError as exc:
            raise _unwritable("path", path, exc.strerror or str(exc)) from exc
        with os.fdopen(fd, "w") as fh:
            fh.write(me)
        return
    raise OutputInUseError(f"{path}: its lock {lock} could not be taken; remove it if no run "
                           "is using the file")


@contextlib.contextmanager
def out_lock(path, command: str | None = None):
    """Hold ``<path>.lock`` (O_EXCL; this pid and `command`) beside the file `path` is written
    at while the block runs; a dead run's lock and temporaries are taken over. Re-entrant;
    None: no lock. A live holder raises :class:`OutputInUseError`."""
    if path is None:
        yield
        return
    path = _target(path, "path")
    lock = path.with_name(path.name + ".lock")
    key = os.path.abspath(lock)
    if key not in _HELD:
        _acquire(path, lock, command or " ".join(["python"] + sys.argv))
        _clean_temporaries(path)
    _HELD[key] = _HELD.get(key, 0) + 1
    try:
        yield
    finally:
        _HELD[key] -= 1
        if not _HELD[key]:
            del _HELD[key]
            if _lock_owner(lock)[0] == os.getpid():
                lock.unlink(missing_ok=True)
