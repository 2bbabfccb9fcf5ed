"""One resumable sweep protocol (chapters 6-8): :func:`run_sweep` runs the :class:`Unit` s its
:class:`ResultStore` lacks, here or on Dask (``scheduler`` None, ``"local:N"`` or
``"tcp://HOST:PORT"``), each result written atomically into one locked JSON file
``{"config", "config_hash", "units"}`` with its :func:`environment` (files:
:mod:`companion.files`). A resumed or loaded file is checked for sense: its hash is its
configuration's, every unit is one the configuration plans and holds its fields."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from companion.book import MAX_THREADS, progress_bar, seed_everything
from companion.checks import check_bool, check_float, check_instance, check_int
from companion.files import json_text, out_lock, read_json_file, writable_path, write_json

__all__ = ["FrozenConfig", "config_dict", "config_hash", "canonical_json", "Unit", "run_sweep",
           "environment", "parse_scheduler", "sweep_records", "load_sweep",
           "ResultFileError", "DaskMissingError", "SchedulerUnreachableError",
           "UnitFailedError", "SweepInterrupted"]

#: Seconds to reach a Dask scheduler, and to wait for its first worker.
CONNECT_TIMEOUT_S = 30
WORKERS_TIMEOUT_S = 120


# --------------------------------------------------------------------------- errors


class ResultFileError(ValueError):
    """A results file that cannot be resumed (not one, another configuration, a damaged unit)."""


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


# --------------------------------------------------------------------------- configurations


def canonical_json(obj) -> str:
    """Deterministic JSON text (sorted keys, no whitespace) used for hashing."""
    return json_text(obj, separators=(",", ":"))


class FrozenConfig:
    """Base of the frozen configurations: ``__post_init__`` stores checked fields with `_put`."""

    def _put(self, name: str, value) -> None:
        object.__setattr__(self, name, value)  # the dataclass is frozen once constructed

    def _check_flags(self, *names: str) -> None:
        for name in names:
            self._put(name, check_bool(getattr(self, name), name))

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
    try:
        text = canonical_json(config_dict(config))
    except ValueError as exc:
        raise ValueError(f"config must be JSON-serialisable with finite numbers: {exc}") from exc
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# --------------------------------------------------------------------------- what a unit holds


def numbers(low: float = 0, high: float = math.inf, integer: bool = False,
            empty: bool = False) -> Callable:
    """A field check: a finite number (an int if `integer`; bool refused) in [low, high], or
    lists and dicts (non-empty unless `empty`) of them; it returns what is wrong, or None."""
    kind = f"{'an int' if integer else 'a number'} in [{low}, {high}]"

    def check(value, empty=empty):
        if isinstance(value, (list, dict)):
            items = value.values() if isinstance(value, dict) else value
            if not (items or empty):
                return f"is empty, not {kind} or a list of them"
            return next(filter(None, (check(v, False) for v in items)), None)
        if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
            return f"is a {type(value).__name__}, not {kind}"
        if not (math.isfinite(value) and low <= value <= high):
            return f"is {value!r:.40}, not {kind}"
        return None
    return check


def records(fields: dict) -> Callable:
    """A field check: a non-empty list of model records, each holding `fields`, no two of one
    model (the same str labels, heads, rank and seed)."""
    def check(value):
        if not isinstance(value, list) or not value:
            return "is not a non-empty list of model records"
        seen = {}
        for i, rec in enumerate(value):
            if bad := damage(rec, fields):
                return f"record {i}: {bad}"
            label = tuple(sorted((k, v) for k, v in rec.items() if isinstance(v, str)
                                 or k in ("heads", "rank", "seed")))
            if label in seen:
                return f"records {seen[label]} and {i} are the same model {label}"
            seen[label] = i
        return None
    return check


def damage(item, fields: dict) -> str | None:
    """What is wrong with `item` against `fields` (field -> a type, a tuple of types or a
    check), or None."""
    if not isinstance(item, dict):
        return "it is not a mapping"
    for name, need in fields.items():
        if name not in item:
            return f"field {name!r} is missing"
        if isinstance(need, (type, tuple)):
            types = need if isinstance(need, tuple) else (need,)
            if not isinstance(item[name], need) or (isinstance(item[name], bool)
                                                    and bool not in types):
                return (f"field {name!r} is a {type(item[name]).__name__}, not "
                        + " or ".join(t.__name__ for t in types))
        elif bad := need(item[name]):
            return f"field {name!r} {bad}"
    return None


SHARES, ERRORS, COUNTS = numbers(0, 1), numbers(), numbers(integer=True)
#: What a model record holds, and every unit of :func:`run_sweep` (by default).
RECORD_FIELDS = {"kind": str, "rank": COUNTS, "seed": COUNTS, "best_max_error": ERRORS,
                 "fraction_within_half": SHARES}
RUN_FIELDS = {"wall_time": ERRORS, "environment": dict}
UNIT_FIELDS = {"models": records(RECORD_FIELDS), **RUN_FIELDS}


def check_units(where: str, data, fields: dict, planned=None, fix: str = "") -> dict:
    """`data` if it is a results file whose hash is its configuration's and whose every unit
    (one of `planned`, when given) holds `fields`; else a ResultFileError naming `where`."""
    if not (isinstance(data, dict) and isinstance(data.get("units"), dict)
            and isinstance(data.get("config"), dict)):
        raise ResultFileError(f"{where} is JSON but not a results file (no 'config' and "
                              f"'units' mappings){fix}")
    try:
        same = config_hash(data["config"]) == data.get("config_hash")
    except ValueError:
        same = False
    if not same:
        raise ResultFileError(f"{where}: its configuration does not hash to its config_hash "
                              f"{str(data.get('config_hash'))!r:.24} (edited?){fix}")
    for key, unit in data["units"].items():
        if planned is not None and key not in planned:
            raise ResultFileError(f"{where}: unit {key!r:.60} is not one its configuration "
                                  f"plans{fix}")
        if bad := damage(unit, fields):
            raise ResultFileError(f"{where}: unit {key!r:.60} is damaged ({bad}){fix}")
    return data


def load_sweep(path, what: str = "results file", fields: dict = UNIT_FIELDS) -> dict:
    """A stored sweep (the JSON :func:`run_sweep` writes), checked for sense: its hash and
    every unit's `fields`."""
    return check_units(f"path {str(path)!r}", read_json_file(path, what), fields)


# --------------------------------------------------------------------------- the store


class ResultStore:
    """Per-unit results of one configuration, written atomically at `path`, a Path that
    :func:`~companion.files.writable_path` returned (None: in memory). A resumed file is
    checked (:func:`check_units`) against `fields` and the `planned` keys."""

    def __init__(self, path: Path | None, config, restart: bool = False,
                 fields: dict | None = None, planned=None):
        self.config = config_dict(config)
        self.hash = config_hash(self.config)
        self.path = path
        resume = path is not None and path.exists() and not restart
        self.units: dict[str, dict] = self._read_units(fields or {}, planned) if resume else {}

    def _read_units(self, fields: dict, planned) -> dict:
        fix = "; pass restart=True (CLI: --restart) to overwrite it, or another output path"
        try:
            data = read_json_file(self.path, "results file")
        except ValueError as exc:
            raise ResultFileError(f"{exc}{fix}") from None
        if isinstance(data, dict) and isinstance(data.get("units"), dict) and \
                data.get("config_hash") != self.hash:
            raise ResultFileError(f"{self.path} holds results for configuration "
                                  f"{str(data.get('config_hash'))[:40]}, not {self.hash}{fix}")
        return dict(check_units(str(self.path), data, fields, planned, fix)["units"])

    def put(self, key: str, result: dict) -> None:
        """Store one unit: in the file first, so that `units` never holds more than it."""
        units = {**self.units, key: result}
        if self.path is not None:
            write_json(self.path, {**self.as_dict(), "units": units})
        self.units = units

    def as_dict(self) -> dict:
        return {"config": self.config, "config_hash": self.hash, "units": self.units}


# --------------------------------------------------------------------------- units


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
    if match := _LOCAL.match(check_instance(scheduler, "scheduler (or None)", str)):
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
    forever on a silent one); own event loop in a daemon thread, as notebooks run one."""
    import asyncio
    import threading
    from concurrent.futures import Future

    from distributed.core import rpc

    async def ask():
        async with rpc(address) as remote:
            return await remote.identity()

    answer: Future = Future()

    def run():
        try:
            answer.set_result(asyncio.run(asyncio.wait_for(ask(), timeout)))
        except Exception as exc:  # raised to the caller by answer.result
            answer.set_exception(exc)

    threading.Thread(target=run, daemon=True).start()
    return answer.result(timeout + 5)


# glibc's settings for local workers (see _client); the README gives them for remote ones
WORKER_MALLOC = {"MALLOC_TRIM_THRESHOLD_": str(2**40), "MALLOC_MMAP_MAX_": "0",
                 "MALLOC_ARENA_MAX": "1"}


def _client(parsed) -> tuple:
    """What to close, the client first, for a parsed scheduler value, its first worker joined:
    (client, cluster) for 'local', (client,) for an address."""
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError as exc:
        raise DaskMissingError("--scheduler needs dask.distributed: install the 'dask' extra "
                               "(pip install -e '.[dask]')") from exc
    if parsed[0] == "local":
        import dask

        # glibc maps every block above its mmap threshold (Dask's nanny pins it at 128 KiB
        # through MALLOC_TRIM_THRESHOLD_=65536; it never exceeds 32 MiB, and a worker's task
        # thread maps large blocks of its own arena anyway), so each full-batch step faulted
        # its tensors in page by page: E2's units spent half their CPU time in the kernel
        # (book/e2_preregistration.md, status). One arena that never maps and never trims
        # keeps the freed blocks for the next step.
        with dask.config.set({f"distributed.nanny.pre-spawn-environ.{k}": v
                              for k, v in WORKER_MALLOC.items()}):
            cluster = LocalCluster(n_workers=parsed[1], threads_per_worker=1, processes=True,
                                   host="127.0.0.1", dashboard_address=None)
        return Client(cluster), cluster
    address, said = parsed[1], "Scheduler"
    try:
        if address.startswith("tcp://"):
            info = _identity(address, CONNECT_TIMEOUT_S)
            said = info.get("type") if isinstance(info, dict) else info
        client = Client(address, timeout=CONNECT_TIMEOUT_S) if said == "Scheduler" else None
    except (OSError, TimeoutError) as exc:
        raise SchedulerUnreachableError(
            f"no Dask scheduler answered at {address} within {CONNECT_TIMEOUT_S} s "
            f"({type(exc).__name__}); start one there with `dask scheduler` or check the "
            "address") from exc
    if client is None:
        raise SchedulerUnreachableError(f"the server at {address} is not a Dask scheduler (it "
                                        f"says it is {str(said)[:40]!r})")
    try:
        client.wait_for_workers(1, timeout=WORKERS_TIMEOUT_S)
    except (OSError, TimeoutError) as exc:
        client.close()
        raise SchedulerUnreachableError(
            f"the Dask scheduler at {address} has no worker after {WORKERS_TIMEOUT_S} s; "
            f"start some with `dask worker {address} --nthreads 1`") from exc
    return (client,)


def run_units(units: Sequence[Unit], store: ResultStore, scheduler: str | None = None,
              threads: int = 1, progress: bool = False, client=None,
              keep_models: bool = False) -> dict:
    """Run and ``store.put`` every unit ``store`` lacks; {key: trained module} if
    ``keep_models``. ``client``: a Dask Client instead of ``scheduler``."""
    todo = [u for u in units if u.key not in store.units]
    models: dict = {}
    owned: tuple = ()  # what this call starts and must close
    bar = progress_bar(progress, total=len(units), initial=len(units) - len(todo),
                       desc="units")
    try:
        if client is None and scheduler is not None and todo:
            owned = _client(parse_scheduler(scheduler))
            client = owned[0]
        if client is not None and todo:
            _run_on_dask(todo, store, client, threads, bar)
        for unit in todo if client is None else ():
            result, model = _train(unit, threads)
            store.put(unit.key, result)
            if keep_models:
                models[unit.key] = model
            bar.update(1)
    except KeyboardInterrupt:
        raise SweepInterrupted(len(store.units)) from None
    finally:
        bar.close()
        for thing in owned:
            thing.close()
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
    "wall_time", "environment"}}, "models"}``; ``out``: the locked JSON file (None: memory;
    a symlink: its target); ``fields``: what every unit holds (a resumed file is checked
    against them and against the keys of `units`)."""
    if not isinstance(units, Sequence) or not all(isinstance(u, Unit) for u in units):
        raise TypeError(f"units must be a sequence of Unit, got {type(units).__name__}")
    out = None if out is None else writable_path(out, "out")
    restart, progress = check_bool(restart, "restart"), check_bool(progress, "progress")
    threads = check_int(threads, "threads", 1, MAX_THREADS)
    parse_scheduler(scheduler)
    if check_bool(keep_models, "keep_models") and (scheduler is not None or client is not None):
        raise ValueError("keep_models needs the units to run here: pass scheduler=None")
    with out_lock(out):
        store = ResultStore(out, config, restart, fields, {u.key for u in units})
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
