"""One resumable sweep protocol (chapters 6-8): :func:`run_sweep` runs the :class:`Unit` s its
:class:`ResultStore` lacks, here or on Dask (``scheduler`` None, ``"local:N"`` or
``"tcp://HOST:PORT"``), each result written atomically into one locked JSON file
``{"config", "config_hash", "units"}`` with its :func:`environment`."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from companion.book import MAX_THREADS, progress_bar, seed_everything
from companion.checks import (
    check_bool,
    check_float,
    check_int,
    read_json_file,
)

__all__ = ["FrozenConfig", "config_dict", "config_hash", "canonical_json", "atomic_write_json",
           "check_writable", "ResultStore", "Unit", "environment",
           "parse_scheduler", "sweep_records", "out_lock",
           "ResultFileError", "UnwritablePathError", "OutputInUseError", "DaskMissingError",
           "SchedulerUnreachableError", "UnitFailedError", "SweepInterrupted"]

#: Seconds to reach a Dask scheduler, and to wait for its first worker.
CONNECT_TIMEOUT_S = 30
WORKERS_TIMEOUT_S = 120


# --------------------------------------------------------------------------- errors


class ResultFileError(ValueError):
    """A results file that cannot be resumed (not one, another configuration, a damaged unit)."""


class UnwritablePathError(OSError, ValueError):
    """A path where no file can be written; its message names the argument."""


class OutputInUseError(RuntimeError):
    """Another live run holds the output's lock file; the message names it (pid, command)."""


class DaskMissingError(ImportError):
    """dask.distributed is needed for --scheduler but is not installed."""


class SchedulerUnreachableError(ConnectionError):
    """No Dask scheduler answered at the address, or none of its workers joined, in time."""


class UnitFailedError(RuntimeError):
    """A unit killed every Dask worker that ran it; the finished units are stored."""


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C during a sweep; ``stored`` units are in the store (a rerun resumes)."""

    def __init__(self, stored: int):
        super().__init__(f"interrupted; {stored} units stored; rerun to resume")
        self.stored = stored


def _unwritable(name: str, path, reason: str) -> UnwritablePathError:
    err = UnwritablePathError(f"{name} {str(path)!r}: cannot write a file there ({reason})")
    err.strerror = reason  # what the CLI prints after the path it already names
    return err


# --------------------------------------------------------------------------- configurations


def canonical_json(obj) -> str:
    """Deterministic JSON text (sorted keys, no whitespace) used for hashing."""
    return _json_text(obj, separators=(",", ":"))


def _json_text(obj, **options) -> str:
    try:
        return json.dumps(obj, sort_keys=True, allow_nan=False, **options)
    except (TypeError, ValueError) as exc:
        kind = TypeError if isinstance(exc, TypeError) else ValueError
        raise kind(f"obj must be JSON data (dicts with str keys, lists, str, finite numbers, "
                   f"bool, None): {exc}") from exc


class FrozenConfig:
    """Base of the frozen configurations: ``__post_init__`` stores checked fields with `_put`."""

    def _put(self, name: str, value) -> None:
        object.__setattr__(self, name, value)  # the dataclass is frozen once constructed

    def _check_training(self, ints=(), stds=()) -> None:
        """E1's and the probes' shared fields: ``ints`` >= 1, ``stds`` in (0, 100], the schedule."""
        for name in ints:
            self._put(name, check_int(getattr(self, name), name, 1))
        for name in stds:
            self._put(name, check_float(getattr(self, name), name, 0.0, 100.0, low_open=True))
        self._put("steps", check_int(self.steps, "steps", 1, 100_000))
        self._put("surrogate_steps", check_int(self.surrogate_steps, "surrogate_steps", 0,
                                               100_000))
        self._put("surrogate_power", check_int(self.surrogate_power, "surrogate_power", 2, 1024))
        if self.seed_block is not None:
            self._put("seed_block", check_int(self.seed_block, "seed_block", 1, 2**32 - 1))
        self._check_schedule()

    def _check_schedule(self) -> None:
        self._put("lr", check_float(self.lr, "lr", 0, 10, low_open=True))
        self._put("final_lr_fraction", check_float(self.final_lr_fraction, "final_lr_fraction",
                                                   0, 1, low_open=True))


def config_dict(config) -> dict:
    """A configuration (a dataclass or a dict) as the plain dict JSON stores."""
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return json.loads(canonical_json(dataclasses.asdict(config)))
    if not isinstance(config, dict):
        raise TypeError(f"config must be a dataclass or a dict, got {type(config).__name__}")
    return config


def config_hash(config) -> str:
    """First 16 hex digits of SHA-256(canonical JSON of the configuration)."""
    config = config_dict(config)
    try:
        text = canonical_json(config)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"config must be JSON-serialisable with finite numbers: {exc}") from exc
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# --------------------------------------------------------------------------- files


def _writable_target(path, name: str) -> Path:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{name} must be a str or os.PathLike, got {type(path).__name__}")
    path = Path(path)
    if str(path) in ("", ".") or path.is_dir():
        raise _unwritable(name, path, "it is a folder, not a file")
    if path.exists() and not path.is_file():  # replacing /dev/null would break the machine
        raise _unwritable(name, path, "it is a device, pipe or socket, not a regular file")
    return path


def _open_temporary(path: Path, name: str) -> tuple[int, Path]:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")  # a dead run's: see out_lock
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), tmp
    except OSError as exc:
        raise _unwritable(name, path, exc.strerror or str(exc)) from exc


def atomic_write_json(path, obj) -> Path:
    """Write ``obj`` as JSON to ``path`` atomically: readers see the old file or the new one."""
    path = _writable_target(path, "path")
    text = _json_text(obj, indent=1)
    fd, tmp = _open_temporary(path, "path")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def check_writable(path, name: str = "path") -> Path:
    """`path` as a Path once a file could be created beside it (its folder made if needed);
    otherwise :class:`UnwritablePathError` naming `name`. An existing file is not touched."""
    path = _writable_target(path, name)
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
    """Hold ``<path>.lock`` (O_EXCL; this pid and `command`) while the block runs; a dead
    run's lock and temporaries are taken over. Re-entrant; None: no lock. A live holder
    raises :class:`OutputInUseError`."""
    if path is None:
        yield
        return
    path = Path(path)
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


# --------------------------------------------------------------------------- the store


#: What every unit of :func:`run_sweep` holds, and each of its model records: field -> type.
UNIT_FIELDS = {"models": list, "wall_time": (int, float), "environment": dict}
RECORD_FIELDS = {"kind": str, "rank": int, "seed": int, "best_max_error": (int, float),
                 "fraction_within_half": (int, float)}


class ResultStore:
    """Per-unit results of one configuration, written atomically (path None: in memory);
    ``fields``: the unit schema a resumed file must hold (:data:`UNIT_FIELDS`: with records)."""

    def __init__(self, path, config, restart: bool = False, fields: dict | None = None):
        self.config = config_dict(config)
        self.hash = config_hash(self.config)
        self.path = None if path is None else check_writable(path, "path")
        self.fields = fields or {}
        self.units: dict[str, dict] = {}
        if self.path is not None and self.path.exists() and not restart:
            self.units = self._read_units()

    def _read_units(self) -> dict:
        fix = "pass restart=True (CLI: --restart) to overwrite it, or another output path"
        try:
            data = read_json_file(self.path, "results file")
        except ValueError as exc:
            raise ResultFileError(f"{exc}; {fix}") from None
        if isinstance(data, dict) and isinstance(data.get("units"), dict) and \
                data.get("config_hash") != self.hash:
            raise ResultFileError(f"{self.path} holds results for configuration "
                                  f"{data.get('config_hash')}, not {self.hash}; {fix}")
        return dict(_check_units(str(self.path), data, self.fields, "; " + fix)["units"])

    def put(self, key: str, result: dict) -> None:
        """Store one unit: in the file first, so that `units` never holds more than it."""
        units = {**self.units, key: result}
        if self.path is not None:
            atomic_write_json(self.path, {**self.as_dict(), "units": units})
        self.units = units

    def as_dict(self) -> dict:
        return {"config": self.config, "config_hash": self.hash, "units": self.units}


# --------------------------------------------------------------------------- units


def _check_units(where: str, data, fields: dict, fix: str = "") -> dict:
    """`data` if every unit (and model record) holds `fields`; else a ResultFileError."""
    if not (isinstance(data, dict) and isinstance(data.get("units"), dict)):
        raise ResultFileError(f"{where} is JSON but not a results file (no 'units' mapping){fix}")
    for key, unit in data["units"].items():
        items = [(f"unit {key!r}", unit, fields)]
        if "models" in fields and isinstance(unit, dict) and isinstance(unit.get("models"), list):
            items += [(f"unit {key!r} record {i}", rec, RECORD_FIELDS)
                      for i, rec in enumerate(unit["models"])]
        for name, item, need in items:
            bad = "it is not a mapping" if not isinstance(item, dict) else next((
                f"field {f!r} " + ("is missing" if f not in item else
                                   f"is a {type(item[f]).__name__}, not {_names(t)}")
                for f, t in need.items() if not isinstance(item.get(f), t)), None)
            if bad:
                raise ResultFileError(f"{where}: {name} is damaged ({bad}){fix}")
    return data


def load_sweep(path, what: str = "results file") -> dict:
    """A stored sweep (the JSON :func:`run_sweep` writes), every unit's schema checked."""
    return _check_units(f"path {str(path)!r}", read_json_file(path, what), UNIT_FIELDS)


def _names(types) -> str:
    return " or ".join(t.__name__ for t in (types if isinstance(types, tuple) else (types,)))


@dataclass(frozen=True)
class Unit:
    """One piece of a sweep: ``fn(*args)`` (a module-level function) returns its JSON result,
    or ``(result, trained module)``; ``device`` is where its tensors live."""

    key: str
    fn: Callable
    args: tuple = ()
    device: str = "cpu"


def environment(device="cpu") -> dict:
    """What a unit's floats depend on beyond its configuration: torch, CPU, threads, device."""
    try:
        import torch
    except ImportError:
        return {"torch": None, "cpu_capability": None, "threads": None, "device": str(device)}
    return {"torch": torch.__version__.split("+")[0],
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "threads": torch.get_num_threads(), "device": str(device)}


def _train(unit: Unit, threads: int) -> tuple[dict, object]:
    """(result + wall_time + environment, trained module or None) of one unit, run here."""
    seed_everything(0, threads=threads)
    start = time.perf_counter()
    out = unit.fn(*unit.args)
    result, model = out if isinstance(out, tuple) else (out, None)
    return {**result, "wall_time": round(time.perf_counter() - start, 2),
            "environment": environment(unit.device)}, model


def _run_unit(unit: Unit, threads: int) -> dict:
    """What a Dask worker sends back: the result, not the module."""
    return _train(unit, threads)[0]


_LOCAL = re.compile(r"^local:(\d+)$")
_ADDRESS = re.compile(r"^(tcp|tls|ucx)://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9][A-Za-z0-9._-]*):"
                      r"(\d{1,5})/?$")


def parse_scheduler(scheduler: str | None):
    """None -> None (in-process); 'local:N' -> ('local', N); PROTOCOL://HOST:PORT ->
    ('address', it); anything else a ValueError naming the accepted forms."""
    if scheduler is None:
        return None
    if not isinstance(scheduler, str):
        raise TypeError(f"scheduler must be a str or None, got {type(scheduler).__name__}")
    if match := _LOCAL.match(scheduler):
        if not 1 <= int(match.group(1)) <= 512:
            raise ValueError(f"scheduler 'local:N' needs 1 <= N <= 512 workers, got "
                             f"{scheduler!r}")
        return ("local", int(match.group(1)))
    if (match := _ADDRESS.match(scheduler)) and 1 <= int(match.group(3)) <= 65535:
        return ("address", scheduler)
    raise ValueError(
        f"scheduler must be 'local:N' (N worker processes on this machine) or a Dask scheduler "
        f"address PROTOCOL://HOST:PORT with a port in 1..65535, such as 'tcp://10.0.0.5:8786' "
        f"or 'tcp://[::1]:8786', got {scheduler!r:.80}")


def _identity(address: str, timeout: float) -> dict:
    """What the server at tcp:// `address` says it is within `timeout` s (a Client waits
    forever on a silent one); own event loop in a thread, as notebooks run one."""
    import asyncio
    import threading

    from distributed.core import rpc

    async def ask():
        remote = rpc(address)
        try:
            return await remote.identity()
        finally:
            await remote.close_rpc()

    box: dict = {}

    def run():
        try:
            box["info"] = asyncio.run(asyncio.wait_for(ask(), timeout))
        except Exception as exc:  # reported by the caller
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout + 5)
    if "info" not in box:
        raise box.get("error") or TimeoutError()
    return box["info"]


def _client(parsed):
    """(client, cluster or None) for a parsed scheduler value, its first worker joined."""
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError as exc:
        raise DaskMissingError("--scheduler needs dask.distributed: install the 'dask' extra "
                               "(pip install -e '.[dask]')") from exc
    if parsed[0] == "local":
        cluster = LocalCluster(n_workers=parsed[1], threads_per_worker=1, processes=True,
                               host="127.0.0.1", dashboard_address=None)
        return Client(cluster), cluster
    address = parsed[1]
    try:
        if address.startswith("tcp://"):
            info = _identity(address, CONNECT_TIMEOUT_S)
            if not isinstance(info, dict) or info.get("type") != "Scheduler":
                raise SchedulerUnreachableError(
                    f"the server at {address} is not a Dask scheduler (it says it is "
                    f"{str(info.get('type') if isinstance(info, dict) else info)[:40]!r})")
        client = Client(address, timeout=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError) as exc:
        if isinstance(exc, SchedulerUnreachableError):
            raise
        raise SchedulerUnreachableError(
            f"no Dask scheduler answered at {address} within {CONNECT_TIMEOUT_S} s "
            f"({type(exc).__name__}); start one there with `dask scheduler` or check the "
            "address") from exc
    try:
        client.wait_for_workers(1, timeout=WORKERS_TIMEOUT_S)
    except (OSError, TimeoutError) as exc:
        client.close()
        raise SchedulerUnreachableError(
            f"the Dask scheduler at {address} has no worker after {WORKERS_TIMEOUT_S} s; "
            f"start some with `dask worker {address} --nthreads 1`") from exc
    return client, None


def run_units(units: Sequence[Unit], store: ResultStore, scheduler: str | None = None,
              threads: int = 1, progress: bool = False, client=None,
              keep_models: bool = False) -> dict:
    """Run and ``store.put`` every unit ``store`` lacks; {key: trained module} if
    ``keep_models``. ``client``: a Dask Client instead of ``scheduler``."""
    todo = [u for u in units if u.key not in store.units]
    models: dict = {}
    owned = None  # (client, cluster) this call starts and must close
    bar = progress_bar(progress, total=len(units), initial=len(units) - len(todo),
                       desc="units")
    try:
        if client is None and scheduler is not None and todo:
            owned = _client(parse_scheduler(scheduler))
            client = owned[0]
        if client is None:
            for unit in todo:
                result, model = _train(unit, threads)
                store.put(unit.key, result)
                if keep_models:
                    models[unit.key] = model
                bar.update(1)
        elif todo:
            _run_on_dask(todo, store, client, threads, bar)
    except KeyboardInterrupt:
        raise SweepInterrupted(len(store.units)) from None
    finally:
        bar.close()
        if owned is not None:
            owned[0].close()
            if owned[1] is not None:
                owned[1].close()
    return models


def _run_on_dask(todo, store, client, threads, bar) -> None:
    from dask.distributed import KilledWorker, as_completed

    # pure=False: every run resubmits; the store, not Dask's cache, says what is done
    futures = {client.submit(_run_unit, unit, threads, pure=False,
                             key=f"companion-{store.hash}-{unit.key}"): unit for unit in todo}
    failed = []
    for future in as_completed(futures):
        unit = futures.pop(future)
        if future.status == "error":  # keep collecting: every other unit is stored
            failed.append((unit, future.exception()))
        else:
            store.put(unit.key, future.result())
            bar.update(1)
        future.release()  # stored: a worker that dies later need not recompute it
    killers = [(unit, exc) for unit, exc in failed if isinstance(exc, KilledWorker)]
    if killers:
        raise UnitFailedError(
            f"unit {', '.join(repr(u.key) for u, _ in killers)} killed every Dask worker that "
            f"ran it (KilledWorker; out of memory?); {len(store.units)} units are stored"
        ) from killers[0][1]
    if failed:
        raise failed[0][1]


def run_sweep(config, units: Sequence[Unit], out=None, restart: bool = False,
              scheduler: str | None = None, threads: int = 1, progress: bool = False,
              keep_models: bool = False, client=None, fields: dict = UNIT_FIELDS) -> dict:
    """Run (or resume) `units`: ``{"config", "config_hash", "units": {key: {"models",
    "wall_time", "environment"}}, "models"}``; ``out``: the locked JSON file (None: memory);
    ``fields``: the unit schema a resumed file is checked against."""
    out = None if out is None else check_writable(out, "out")
    restart, progress = check_bool(restart, "restart"), check_bool(progress, "progress")
    threads = check_int(threads, "threads", 1, MAX_THREADS)
    parse_scheduler(scheduler)
    if check_bool(keep_models, "keep_models") and (scheduler is not None or client is not None):
        raise ValueError("keep_models needs the units to run here: pass scheduler=None")
    with out_lock(out):
        store = ResultStore(out, config, restart=restart, fields=fields)
        models = run_units(units, store, scheduler, threads, progress, client, keep_models)
    return {**store.as_dict(), "models": models}


def seed_units(plan, fn: Callable, config, family, device: str) -> list[Unit]:
    """The units of a plan [(key, what, seeds)], each x a block of ``config.seed_block``
    seeds (key suffix '_s0-1' when there are several blocks); a unit runs
    ``fn(config, family, what, block, device)``."""
    units = []
    for key, what, seeds in plan:
        size = config.seed_block or len(seeds)
        blocks = [tuple(seeds[i:i + size]) for i in range(0, len(seeds), size)]
        units += [Unit(key + ("" if len(blocks) == 1 else "_s" + "-".join(map(str, b))), fn,
                       (config, family, what, b, device), device) for b in blocks]
    return units


def sweep_records(results) -> list[dict]:
    """Every per-model record of a sweep result ``{"units": {key: {"models": [...]}}}``."""
    try:
        recs = [rec for unit in results["units"].values() for rec in unit["models"]]
    except (KeyError, TypeError, AttributeError, IndexError) as exc:
        raise ValueError(f"results must be a sweep result {{'units': {{key: {{'models': "
                         f"[...]}}}}}}, got {type(results).__name__}") from exc
    if not all(isinstance(rec, dict) for rec in recs):
        raise ValueError("results: every model record must be a dict")
    return recs
