"""Where a sweep's units run: in this process, or as tasks on a Dask cluster.

A sweep is a list of independent :class:`Unit` s (an E1 rank group x seed block, an E2 width of
a protocol). :func:`run_units` runs the units a :class:`~companion.experiments.store.ResultStore`
does not hold yet and writes each finished unit's result into it — always from this process
(the client), one atomic write per unit — so an interrupted sweep or a worker that dies loses
at most the units in flight, a rerun computes only what is missing, and no unit is stored
twice.

Scheduler values (CLI ``--scheduler``): ``None`` runs the units here, one after the other;
``"local:N"`` starts a ``dask.distributed.LocalCluster`` of N single-threaded worker processes
on 127.0.0.1; ``"tcp://HOST:PORT"`` (or ``tls://``, ``ucx://``) connects to a running scheduler.
A unit's result does not depend on where it ran: every unit is a pure function of its
arguments (its models are seeded by their own seeds, its data by the configuration), run after
the same seeding and with the same torch thread count; :func:`environment` is stored beside it.

Serves chapters 6 and 7 (how their full-size sweeps are regenerated).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from companion.book import MAX_THREADS, seed_everything
from companion.checks import check_instance, check_int

__all__ = ["Unit", "parse_scheduler", "run_units", "run_unit", "environment",
           "DaskMissingError", "SchedulerUnreachableError"]

_ADDRESS = re.compile(r"^(tcp|tls|ucx)://[^\s/:]+(:\d{1,5})?/?$")
_LOCAL = re.compile(r"^local:(\d+)$")


class DaskMissingError(ImportError):
    """dask.distributed is needed for --scheduler but is not installed."""


class SchedulerUnreachableError(ConnectionError):
    """No Dask scheduler answered at the given address (within Dask's connect timeout,
    ``distributed.comm.timeouts.connect``)."""


@dataclass(frozen=True)
class Unit:
    """One independent piece of a sweep: ``fn(*args)`` returns its JSON-serialisable result
    (a dict). ``fn`` must be importable by name (a module-level function) so that it can run
    in another process; ``device`` is where its tensors live."""

    key: str
    fn: Callable[..., dict]
    args: tuple = ()
    device: str = "cpu"


def environment(device="cpu") -> dict:
    """What a unit's float results depend on beyond its configuration: training is chaotic in
    rounding (the max-error surrogate amplifies it), so bit-for-bit reruns need the same torch
    version, CPU vector capability (AVX2 / AVX512 kernels round differently), thread count and
    device. Stored beside every unit's results (torch None: a unit that needs no torch, run
    where torch is not installed)."""
    try:
        import torch
    except ImportError:
        return {"torch": None, "cpu_capability": None, "threads": None, "device": str(device)}
    return {
        "torch": torch.__version__.split("+")[0],
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
        "device": str(device),
    }


def parse_scheduler(scheduler: str | None):
    """None -> None (in-process); 'local:N' -> ('local', N); an address -> ('address', it).
    Anything else raises ValueError naming the accepted forms."""
    value = scheduler
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"scheduler must be a str or None, got {type(value).__name__}")
    match = _LOCAL.match(value)
    if match:
        workers = int(match.group(1))
        if not 1 <= workers <= 512:
            raise ValueError(f"scheduler 'local:N' needs 1 <= N <= 512 workers, got {value!r}")
        return ("local", workers)
    if _ADDRESS.match(value):
        return ("address", value)
    raise ValueError(
        f"scheduler must be 'local:N' (N worker processes on this machine) or a Dask scheduler "
        f"address such as 'tcp://10.0.0.5:8786', got {value!r}"
    )


def run_unit(unit: Unit, threads: int = 1) -> dict:
    """Run one unit where this is called (here or on a worker): seed everything, fix the torch
    thread count, time it. Returns the unit's result plus ``wall_time`` (seconds) and
    ``environment`` (see :func:`environment`)."""
    check_instance(unit, "unit", Unit)
    seed_everything(0, threads=threads)
    start = time.perf_counter()
    result = unit.fn(*unit.args)
    if not isinstance(result, dict):
        raise TypeError(f"unit {unit.key!r} must return a dict, got {type(result).__name__}")
    return {**result, "wall_time": round(time.perf_counter() - start, 2),
            "environment": environment(unit.device)}


def _client(parsed):
    """(client, cluster or None) for a parsed scheduler value."""
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError as exc:
        raise DaskMissingError(
            "--scheduler needs dask.distributed: install the 'dask' extra "
            "(pip install -e '.[dask]')"
        ) from exc
    if parsed[0] == "local":
        cluster = LocalCluster(
            n_workers=parsed[1], threads_per_worker=1, processes=True, host="127.0.0.1",
            dashboard_address=None,
        )
        return Client(cluster), cluster
    try:
        return Client(parsed[1]), None
    except (OSError, TimeoutError) as exc:
        raise SchedulerUnreachableError(
            f"no Dask scheduler answered at {parsed[1]} ({exc}); start one there with "
            "`dask scheduler` or check the address") from exc


def run_units(
    units: Sequence[Unit],
    store,
    scheduler: str | None = None,
    threads: int = 1,
    progress: bool = False,
    client=None,
) -> None:
    """Run every unit ``store`` does not hold yet and ``store.put`` each result as it arrives.

    ``client``: an existing ``dask.distributed.Client`` to use instead of ``scheduler``.
    """
    keys = [u.key for u in units]
    if len(set(keys)) != len(keys):
        raise ValueError(f"units must have distinct keys, got {keys}")
    threads = check_int(threads, "threads", 1, MAX_THREADS)
    todo = [u for u in units if not store.done(u.key)]
    parsed = parse_scheduler(scheduler) if client is None else None
    owned = None  # (client, cluster) this call starts and must close
    if parsed is not None and todo:
        owned = _client(parsed)
        client = owned[0]
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(units), initial=len(units) - len(todo), desc="units")
    try:
        if client is None:
            for unit in todo:
                store.put(unit.key, run_unit(unit, threads))
                if bar is not None:
                    bar.update(1)
        elif todo:
            _run_on_dask(todo, store, client, threads, bar)
    finally:
        if bar is not None:
            bar.close()
        if owned is not None:
            owned[0].close()
            if owned[1] is not None:
                owned[1].close()


def _run_on_dask(todo, store, client, threads, bar) -> None:
    from dask.distributed import as_completed

    # pure=False: every run resubmits; the store, not Dask's cache, says what is done
    futures = {
        client.submit(run_unit, unit, threads, key=f"companion-{store.hash}-{unit.key}",
                      pure=False): unit
        for unit in todo
    }
    for future in as_completed(futures):
        unit = futures[future]
        store.put(unit.key, future.result())  # raises the task's error, if any
        if bar is not None:
            bar.update(1)
