"""Run calls into the companion package in a child process under a memory and a time cap.

The fuzz suite (``tests/test_fuzz.py``) sends each call as a picklable description to one
persistent child (spawned once, restarted only after a hang, a crash or a MemoryError), which
builds the arguments, makes the call under ``RLIMIT_AS`` and reports how it ended. A hang
(no answer within the time cap) or a crash (the child died: OOM kill, segfault) is seen from
the parent, which kills and replaces the child; nothing a call does can take the test run or
the machine down with it.

Outcome kinds: ``ok`` (returned), ``raised`` (any exception, with its type and message),
``memory`` (MemoryError: the call asked for more than the cap), ``hang``, ``crash``, and
``unbuildable`` (the *arguments* could not be built under the cap: not the call's fault).
"""

from __future__ import annotations

import importlib
import inspect
import math
import multiprocessing as mp
import os
import resource
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

# glibc gives every thread its own 64 MB malloc arena (address space, not memory): with a
# few torch threads that alone would reach the address-space cap. Set before the forkserver
# starts, so every child inherits it.
os.environ.setdefault("MALLOC_ARENA_MAX", "2")

#: Address-space cap of the child. Importing torch + the package maps ~0.65 GB; the rest is
#: what one call may use.
MEMORY_CAP = int(os.environ.get("COMPANION_FUZZ_MEMORY_CAP", 2 * 1024**3))
#: Cap of one call (seconds of the child's CPU time where /proc gives it, else of wall time):
#: CPU time, so that a call that waits for a core on a loaded machine is not called a hang.
TIME_CAP = float(os.environ.get("COMPANION_FUZZ_TIME_CAP", 10.0))
#: Wall-clock cap of one call: a call that neither answers nor computes (a deadlock, a sleep)
#: is a hang after this long.
WALL_CAP_FACTOR = 6
#: Items a returned generator is drawn for (a lazy generator is only a hang once iterated).
GENERATOR_ITEMS = 1000


@dataclass(frozen=True)
class Lazy:
    """An argument the child builds: ``target(*args, **kwargs)``, target ``"module:attr"``
    (a big array, a head, a witness family: built where it is used, never pickled)."""

    target: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    call: bool = True  # False: the attribute itself (a module constant such as E1_SMOKE)
    cache: bool = False  # True: built once per child (immutable, costly: a witness family)

    def __repr__(self) -> str:
        inner = ", ".join([repr(a) for a in self.args]
                          + [f"{k}={v!r}" for k, v in self.kwargs.items()])
        return f"{self.target.split(':')[-1]}({inner})"


def resolve(target: str):
    module, _, attr = target.partition(":")
    obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


_BUILT: dict[str, object] = {}


def build(value):
    if isinstance(value, Lazy):
        if not value.call:
            return resolve(value.target)
        if value.cache:
            key = value.target + repr(value)
            if key not in _BUILT:
                _BUILT[key] = build(Lazy(value.target, value.args, value.kwargs))
            return _BUILT[key]
        args = [build(a) for a in value.args]
        kwargs = {k: build(v) for k, v in value.kwargs.items()}
        return resolve(value.target)(*args, **kwargs)
    if isinstance(value, tuple):
        return tuple(build(v) for v in value)
    if isinstance(value, list):
        return [build(v) for v in value]
    return value


def _child(conn, memory_cap: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory_cap, memory_cap))
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import numpy as np  # noqa: F401  (warm imports: the first call should not pay for them)
    import torch

    torch.set_num_threads(1)
    import companion.experiments.e1  # noqa: F401

    while True:
        try:
            request = conn.recv()
        except EOFError:
            return
        if request is None:
            return
        target, kwargs, *want = request  # want: [True] for the result's digest
        try:
            fn = resolve(target)
            built = {k: build(v) for k, v in kwargs.items()}
        except MemoryError:
            conn.send(("unbuildable", "MemoryError", "building the arguments"))
            continue
        except Exception as exc:  # a bad Lazy in the suite itself: report it loudly
            conn.send(("unbuildable", type(exc).__name__, str(exc)[:300]))
            continue
        try:
            result = fn(**built)
            if inspect.isgenerator(result):
                for _ in zip(range(GENERATOR_ITEMS), result):
                    pass
            outcome = ("ok", "", digest_hash(result) if want else "")
        except MemoryError as exc:
            outcome = ("memory", "MemoryError", str(exc)[:300])
        except RecursionError as exc:
            outcome = ("raised", "RecursionError", str(exc)[:300])
        except BaseException as exc:  # noqa: BLE001 - every other ending is reported
            outcome = ("raised", exception_kind(exc), str(exc)[:500])
        del built
        conn.send(outcome)


def exception_kind(exc: BaseException) -> str:
    """The exception's type name; a subclass of ValueError/TypeError (a ResultFileError, an
    UnwritablePathError) as 'ValueError (ResultFileError)', so the verdict accepts it as what
    it is, still judged by its message."""
    name = type(exc).__name__
    for base in (ValueError, TypeError):
        if isinstance(exc, base) and type(exc) is not base:
            return f"{base.__name__} ({name})"
    return name


class Runner:
    """One persistent capped child; :meth:`call` returns (kind, exception type, message)."""

    def __init__(self, memory_cap: int = MEMORY_CAP, time_cap: float = TIME_CAP):
        self.memory_cap, self.time_cap = memory_cap, time_cap
        # forkserver with the package preloaded: a replacement child (after a hang, a crash or
        # a MemoryError) is a fork of an interpreter that has torch imported already (~0.1 s
        # instead of ~2-10 s), and no child inherits the test process's threads or state
        self.ctx = mp.get_context("forkserver")
        self.ctx.set_forkserver_preload(["fuzz_harness", "companion.experiments.e1",
                                         "companion.experiments.e2.pipeline"])
        self.proc = None
        self.conn = None
        self.starts = 0

    def _start(self) -> None:
        parent, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=_child, args=(child, self.memory_cap), daemon=True)
        self.proc.start()
        child.close()
        self.conn = parent
        self.starts += 1

    def _kill(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            os.kill(self.proc.pid, signal.SIGKILL)
        if self.proc is not None:
            self.proc.join(5)
        self.proc = None

    def close(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            try:
                self.conn.send(None)
                self.proc.join(5)
            except OSError:
                pass
        self._kill()

    def call(self, target: str, kwargs: dict, digest: bool = False) -> tuple[str, str, str]:
        """(kind, exception type, message); with `digest`, an "ok" carries the result's
        :func:`digest_hash` as its message."""
        if self.proc is None or not self.proc.is_alive():
            self._start()
            # the first answer includes the imports: allow for them outside the call's cap
            self.conn.send(("companion.book:seed_everything", {}))
            if not self.conn.poll(120):
                raise RuntimeError("the fuzz child did not start within 120 s")
            self.conn.recv()
        start = time.perf_counter()
        try:
            self.conn.send((target, kwargs, True) if digest else (target, kwargs))
        except (BrokenPipeError, OSError):
            self._kill()
            return ("crash", "", "child died before the call")
        cpu_start = child_cpu_seconds(self.proc.pid)
        try:
            ready = self.conn.poll(self.time_cap)
            while not ready and cpu_start is not None:
                cpu = child_cpu_seconds(self.proc.pid)
                if (cpu is None or cpu - cpu_start >= self.time_cap
                        or time.perf_counter() - start >= WALL_CAP_FACTOR * self.time_cap):
                    break
                ready = self.conn.poll(min(1.0, self.time_cap))
        except (EOFError, OSError):
            ready = True
        if not ready:
            self._kill()
            return ("hang", "", f"no answer after {self.time_cap:g} s of computing")
        try:
            outcome = self.conn.recv()
        except (EOFError, OSError):
            code = self.proc.exitcode if self.proc is not None else None
            self._kill()
            return ("crash", "", f"child died (exit code {code}) after "
                                 f"{time.perf_counter() - start:.1f} s")
        if outcome[0] == "memory":
            self._kill()  # a MemoryError can leave the interpreter in a poor state
        return outcome


def busy_loop(seconds: float, idle: bool = False) -> None:
    """A target for the harness's own test: compute (or, idle, sleep) for `seconds`."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        if idle:
            time.sleep(0.05)


def child_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process `pid` so far (Linux /proc), or None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def names_argument(message: str, names) -> bool:
    """Whether `message` names one of `names` as a word (``G`` in "G (total gap) must ...",
    ``head`` in "head.rank must ...", not the ``n`` inside "integer")."""
    import re

    return any(re.search(rf"(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z0-9_])", message)
               for n in names if isinstance(n, str) and n)


def is_finite_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def cli_one_line_error(argv) -> None:
    """Run ``python -m companion *argv`` in this process; raise AssertionError unless it
    exits with status 2 after printing exactly one line to stderr (no traceback)."""
    import contextlib
    import io

    from companion.cli import main

    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            code = main(list(argv))
        except SystemExit as exc:
            code = exc.code
    lines = [line for line in err.getvalue().splitlines() if line.strip()]
    if isinstance(code, str):  # SystemExit("message"): Python prints it and exits 1
        lines, code = lines + [code], 1
    if argv and lines and lines[0].startswith("usage:"):
        lines = lines[-1:]  # argparse's usage line + one error line
    if code != 2 or len(lines) != 1 or "Traceback" in err.getvalue():
        raise AssertionError(f"argv {argv}: exit {code}, stderr {err.getvalue()[-600:]!r}")


def digest(obj):
    """A comparable picture of a result: types kept (a numpy scalar is not an int), floats by
    repr, arrays by dtype and entries, dataclasses and objects by their fields, no callables."""
    import dataclasses
    from collections.abc import Mapping
    from fractions import Fraction

    import numpy as np

    if isinstance(obj, float):
        return ("float", repr(obj))
    if isinstance(obj, (bool, int, Fraction, str, type(None))):
        return (type(obj).__name__, obj)
    if isinstance(obj, np.generic):
        return ("numpy", obj.dtype.str, repr(obj))
    if isinstance(obj, np.ndarray):
        return ("array", obj.dtype.str, obj.shape, digest(obj.tolist()))
    if isinstance(obj, Mapping):
        return ("dict", sorted((repr(digest(k)), digest(v)) for k, v in obj.items()))
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, [digest(v) for v in obj])
    if callable(obj) and not dataclasses.is_dataclass(obj):
        return "<callable>"
    fields = ({f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
              if dataclasses.is_dataclass(obj) else getattr(obj, "__dict__", {}))
    return (type(obj).__name__, digest({k: v for k, v in fields.items() if not callable(v)}))


def digest_hash(obj) -> str:
    """A short hash of :func:`digest` (what crosses the pipe from the child)."""
    import hashlib

    return hashlib.sha1(repr(digest(obj)).encode()).hexdigest()[:16]
