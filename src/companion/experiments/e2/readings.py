"""The E2 pipeline (chapter 7): configuration -> units -> one unit function -> one reader, for
the three readings of "larger, disjoint train/test pools" (:data:`READINGS`) and the stored
protocols (:class:`E2Config`); heads scored by exact-sequence accuracy (:func:`reading_data`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from fractions import Fraction
from functools import partial

import numpy as np
import torch

from companion.bounds.codes import paley_hadamard_code
from companion.checks import (
    check_bool,
    check_choice,
    check_device,
    check_float,
    check_instance,
    check_int,
    check_path,
    check_tokens,
    read_json_file,
)
from companion.core.task import min_ip_targets
from companion.experiments import heads
from companion.experiments.e2 import data as e2data
from companion.experiments.e2.data import HARD_DISTRIBUTIONS, MAX_POOL, TEST_DISTRIBUTIONS
from companion.experiments.e2.rule import curve_rule
from companion.experiments.engine import ModelStack, train_batched
from companion.experiments.sweep import FrozenConfig, Unit, check_writable, run_sweep

__all__ = ["READINGS", "ReadingConfig", "E2Config", "READINGS_FULL", "READINGS_SMOKE",
           "READING_QUICK", "HEADLINE", "reading_data", "unit_models", "run_reading",
           "reading_path", "load_reading", "complement_power_rank",
           "complement_power_head_accuracy"]

#: The three readings: name -> (head kind, pool, what the problem size is).
READINGS = {"X": ("mlp", "disjoint closed random", "m"),
            "S-code": ("table", "shared Paley code", "P"),
            "S-random": ("table", "shared closed random", "P")}

#: Fixed from the paper's words before any result: OOD means unseen tokens (exp-affine maps,
#: affine readout as the paper's model), a held-out pool's sequences are uniform triples.
HEADLINE = {"reading": "X", "readout": "learned", "test": "uniform"}

#: What every stored E2 unit holds (checked when a sweep resumes): field -> type.
UNIT_FIELDS = {"accuracy": dict, "wall_time": (int, float), "environment": dict}


def _seq(item, empty: bool = False):
    """A check of a list or tuple (non-empty unless `empty`) of `item`s, giving a tuple."""
    def check(value, name):
        if not isinstance(value, (list, tuple)) or not (value or empty):
            raise TypeError(f"{name} must be a non-empty tuple, got {value!r:.80}")
        return tuple(item(v, f"{name}[{i}]") for i, v in enumerate(value))
    return check


def _ints(low, high=None, empty=False):
    return _seq(partial(check_int, low=low, high=high), empty)


def _pair(first, second):
    def check(value, name):
        if not (isinstance(value, (list, tuple)) and len(value) == 2):
            raise TypeError(f"{name} must be a pair, got {value!r:.80}")
        return first(value[0], f"{name}[0]"), second(value[1], f"{name}[1]")
    return _seq(check)


_COUNT = partial(check_int, low=1, high=e2data.MAX_SEQUENCES)  # training or test sequences
#: How each configuration field is checked and normalised (for the fields a class has).
_FIELDS = {
    "reading": partial(check_choice, choices=tuple(READINGS)),
    "sizes": _pair(partial(check_int, low=2, high=62), partial(check_int, low=4)),
    "widths": _ints(1, 62), "pool_sizes": _ints(1), "ranks": _ints(1, 4096), "seeds": _ints(0),
    "hidden": _ints(1, empty=True), "n_train": _COUNT, "n_test": _COUNT,
    "steps": partial(check_int, low=1), "value_dim": partial(check_int, low=1),
    "data_seed": partial(check_int, low=0),
    "train_fraction": partial(check_float, low=0, high=1, low_open=True, high_open=True),
    "threshold": partial(check_float, low=0, high=1, low_open=True),
    "near_tie_fraction": partial(check_float, low=0, high=1),
    "train_mix": _pair(partial(check_choice, choices=HARD_DISTRIBUTIONS),
                       partial(check_float, low=0, high=1, low_open=True)),
    "tests": _seq(partial(check_choice, choices=HARD_DISTRIBUTIONS)),
    "readouts": _seq(partial(check_choice, choices=heads.READOUTS)),
    "dense_learned_lr": lambda v, name: v if v is None else check_float(v, name, 0, 10,
                                                                        low_open=True),
    "feature": partial(check_choice, choices=heads.FEATURES),
    "encoding": partial(check_choice, choices=heads.ENCODINGS),
    "readout": partial(check_choice, choices=heads.READOUTS), "skip": check_bool,
}


class _Checked(FrozenConfig):
    """Checks and normalises every field (:data:`_FIELDS`), the rank groups and the sizes."""

    def __post_init__(self):
        for field in dataclasses.fields(self):
            if field.name in _FIELDS:
                self._put(field.name, _FIELDS[field.name](getattr(self, field.name), field.name))
        if list(self.ranks) != sorted(set(self.ranks)):
            raise ValueError(f"ranks must be strictly increasing, got {self.ranks}")
        groups = (self.ranks,) if self.rank_groups is None else self.rank_groups
        groups = _seq(_ints(1))(groups, "rank_groups")
        if sorted(r for g in groups for r in g) != sorted(self.ranks):
            raise ValueError("rank_groups must partition ranks (every rank exactly once)")
        self._put("rank_groups", groups)
        self._check_schedule()
        self._check_sizes()


@dataclass(frozen=True)
class ReadingConfig(_Checked):
    """One reading's sweep; ``dense_learned_lr`` (None: ``lr``): the dense learned-readout rate."""

    reading: str = "S-code"
    sizes: tuple[tuple[int, int], ...] = ((12, 22), (24, 46), (32, 62))
    n_train: int = 3000
    n_test: int = 1000
    train_mix: tuple[tuple[str, float], ...] = (("uniform", 0.5), ("witness", 0.5))
    tests: tuple[str, ...] = ("uniform", "witness")
    readouts: tuple[str, ...] = ("learned", "overlap")
    ranks: tuple[int, ...] = (1, 2, 4, 8, 12, 16, 20, 24, 28, 32, 40, 48, 64, 128)
    rank_groups: tuple[tuple[int, ...], ...] = ((1, 2, 4, 8, 12, 16), (20, 24, 28, 32),
                                               (40, 48, 64), (128,))
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    steps: int = 3000
    lr: float = 0.03
    dense_learned_lr: float | None = 0.1
    final_lr_fraction: float = 0.02
    value_dim: int = 16
    train_fraction: float = 0.7
    threshold: float = 0.9
    data_seed: int = 0

    # reading X's maps: exp-affine, no hidden layer (class attributes, not fields, so the
    # stored runs' configuration hashes stay what they were)
    hidden = ()
    feature, encoding, skip = "exp", "01", False

    def _check_sizes(self):
        for m, p in self.sizes:
            if p % 2 or p > min(2**m, MAX_POOL) or (self.reading == "S-code" and p != 2 * m - 2):
                raise ValueError(f"sizes: P must be even, at most min(2**m, {MAX_POOL}) and, for "
                                 f"S-code's Paley pool, P = 2(m - 1); got (m, P) = ({m}, {p})")

    @property
    def kind(self) -> str:
        return READINGS[self.reading][0]


_X = ReadingConfig(
    reading="X", sizes=((8, 256), (10, 512), (12, 512)), n_train=4000,
    tests=("uniform", "gap2", "witness"), ranks=(1, 2, 4, 8, 16, 32, 64, 128),
    rank_groups=((1, 2, 4, 8, 16), (32,), (64,), (128,)), steps=1500,
    dense_learned_lr=None)

#: The full-size runs (``python -m companion e2 --full``), as pre-registered with the rule.
READINGS_FULL = {
    "X": _X,
    "S-code": ReadingConfig(),
    "S-random": ReadingConfig(
        reading="S-random", sizes=((12, 32), (12, 64), (12, 128)), n_train=4000,
        tests=("uniform", "gap2", "witness"), ranks=(1, 2, 4, 8, 16, 32, 64, 128),
        rank_groups=((1, 2, 4, 8, 16), (32, 64), (128,)), dense_learned_lr=None),
}

#: The book's live run (chapter 7, seconds), checked against the committed full run.
READING_QUICK = dataclasses.replace(
    READINGS_FULL["S-code"], sizes=((12, 22),), n_train=1500, n_test=500,
    readouts=("overlap",), ranks=(4, 8, 16, 24, 32, 64), rank_groups=((4, 8, 16, 24, 32, 64),),
    seeds=(0, 1), steps=2000)

_SMOKE = {"n_train": 200, "n_test": 100, "ranks": (1, 4, 16), "rank_groups": ((1, 4), (16,)),
          "seeds": (0, 1), "steps": 60}
#: Installation / cluster check (``--smoke``): tiny sizes, three ranks, two seeds.
READINGS_SMOKE = {
    "X": dataclasses.replace(_X, sizes=((6, 32), (8, 48)), **_SMOKE),
    "S-code": dataclasses.replace(READINGS_FULL["S-code"], sizes=((8, 14),), **_SMOKE),
    "S-random": dataclasses.replace(READINGS_FULL["S-random"], sizes=((8, 16),), **_SMOKE),
}


@dataclass(frozen=True)
class E2Config(_Checked):
    """One stored protocol's sweep (presets in :mod:`~.protocols`): per width a pool of
    ``pool_sizes[i]`` random tokens split ``train_fraction`` / rest; the stored files' fields."""

    widths: tuple[int, ...] = (8, 10, 12)
    pool_sizes: tuple[int, ...] = (256, 256, 256)
    train_fraction: float = 0.7
    n_train: int = 3000
    n_test: int = 1000
    near_tie_fraction: float = 0.5
    ranks: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128)
    rank_groups: tuple[tuple[int, ...], ...] | None = ((1, 2, 4, 8, 16), (32, 64, 128))
    seeds: tuple[int, ...] = (0, 1, 2)
    hidden: tuple[int, ...] = (32,)
    value_dim: int = 16
    feature: str = "exp"
    encoding: str = "01"
    skip: bool = False
    readout: str = "learned"
    steps: int = 1500
    lr: float = 1e-2
    final_lr_fraction: float = 0.02
    threshold: float = 0.9
    data_seed: int = 0

    # what the pipeline reads of a configuration (class attributes: not stored, not hashed)
    reading, kind, dense_learned_lr, tests = "tokens", "mlp", None, TEST_DISTRIBUTIONS

    def _check_sizes(self):
        if len(self.pool_sizes) != len(self.widths):
            raise ValueError("pool_sizes must have one entry per width")
        for m, p in self.sizes:
            k = int(round(self.train_fraction * p))
            if p > min(2**m, MAX_POOL) or min(k, p - k) < 3:
                raise ValueError(f"pool_sizes: width {m} needs at most min(2**m, {MAX_POOL}) "
                                 f"tokens, split by train_fraction into >= 3 each, got {p}")

    @property
    def sizes(self) -> tuple:
        return tuple(zip(self.widths, self.pool_sizes, strict=True))

    @property
    def readouts(self) -> tuple:
        return (self.readout,)

    @property
    def train_mix(self) -> tuple:
        return (("uniform", 1 - self.near_tie_fraction), ("near_tie", self.near_tie_fraction))


def reading_data(cfg: ReadingConfig | E2Config, m: int, pool_size: int) -> dict:
    """The sequences of one size: {"train": (pool, idx), "evals": {name: (pool, idx)},
    "pool_train", "pool_test"}; evaluation sets "test/<d>" (held out), "fit/<d>", "fit/all"
    (the training sequences) and, for X, "train/<d>" (fresh draws on the training pool)."""
    check_instance(cfg, "cfg", (ReadingConfig, E2Config))
    if (check_int(m, "m"), pool_size) not in cfg.sizes:
        raise ValueError(f"m, pool_size must be one of the configuration's sizes "
                         f"{[list(s) for s in cfg.sizes]}, got ({m}, {pool_size!r:.40})")
    mix = dict(cfg.train_mix)
    if cfg.reading in ("X", "tokens"):
        return e2data.disjoint_pool_split(m, pool_size, cfg.train_fraction, cfg.n_train,
                                          cfg.n_test, mix, cfg.tests, cfg.data_seed,
                                          pools="pairs" if cfg.reading == "X" else "tokens")
    pool = (paley_hadamard_code(m - 1) if cfg.reading == "S-code"
            else e2data.complement_closed_pool(m, pool_size // 2, cfg.data_seed))
    return e2data.shared_pool_split(np.asarray(pool, dtype=np.int64), cfg.n_train, cfg.n_test,
                                    mix, cfg.tests, cfg.data_seed, 1 - cfg.train_fraction)


def _exact_sequence_accuracy(predictions: torch.Tensor, targets: np.ndarray) -> np.ndarray:
    """Share of sequences whose three outputs lie within 1/2 of their targets: (M, 3S) -> (M,)."""
    pred = predictions.detach().cpu().numpy().astype(np.float64)
    pred = pred.reshape(pred.shape[0], targets.shape[0], 3)
    return (np.abs(pred - targets[None]) < 0.5).all(axis=-1).mean(axis=-1)


def unit_models(cfg, m: int, pool_size: int, readout: str, which: str):
    """A unit's stacked models and the (rank or "dense", seed) key of each row: one kernel-head
    family per rank group (padded to its largest rank), then the dense heads of every seed."""
    seeds, table = list(cfg.seeds), cfg.kind == "table"
    parts, keys = [], []
    for group in cfg.rank_groups if which != "dense" else ():
        ranks, sd = [r for r in group for _ in seeds], seeds * len(group)
        parts.append(heads.pool_kernel_heads(pool_size, ranks, sd, readout, cfg.value_dim)
                     if table else heads.mlp_kernel_heads(m, ranks, sd, cfg.hidden, cfg.value_dim,
                                                          cfg.feature, cfg.encoding, cfg.skip,
                                                          readout))
        keys += list(zip(ranks, sd, strict=True))
    if which != "heads":
        parts.append(heads.pool_softmax_heads(pool_size, seeds, m, readout, cfg.value_dim)
                     if table else heads.mlp_softmax_heads(m, seeds, cfg.hidden, cfg.value_dim,
                                                           encoding=cfg.encoding, skip=cfg.skip,
                                                           readout=readout))
        keys += [("dense", s) for s in seeds]
    return (parts[0] if which == "dense" else ModelStack(parts)), keys


def train_unit(cfg, m: int, pool_size: int, readout: str, which: str, device="cpu") -> dict:
    """The one unit function: train a unit's models together, score them on every evaluation
    set; the record of a reading's part ("heads", "dense") or of a protocol's width ("both")."""
    data = reading_data(cfg, m, pool_size)
    model, keys = unit_models(cfg, m, pool_size, readout, which)
    pool, idx = data["train"]
    lr = (cfg.dense_learned_lr if which == "dense" and readout == "learned"
          and cfg.dense_learned_lr is not None else cfg.lr)
    targets = torch.as_tensor(min_ip_targets(pool[idx]).reshape(-1), dtype=torch.float32,
                              device=device)
    res = train_batched(model, e2data.pool_inputs(pool, idx, device), targets,
                        steps=cfg.steps, lr=lr, final_lr_fraction=cfg.final_lr_fraction,
                        device=device)
    with torch.no_grad():
        acc = {name: _exact_sequence_accuracy(
                   res.model(e2data.pool_inputs(epool, eidx, device)), min_ip_targets(epool[eidx]))
               for name, (epool, eidx) in data["evals"].items()}
    best = res.best_max_error.numpy()
    at = {key: i for i, key in enumerate(keys)}
    out = {}
    for part in (("heads", "dense") if which == "both" else (which,)):
        order = [at[k] for k in ([(r, s) for r in cfg.ranks for s in cfg.seeds]
                                 if part == "heads" else [("dense", s) for s in cfg.seeds])]
        shape = (len(cfg.ranks), len(cfg.seeds)) if part == "heads" else (len(cfg.seeds),)
        out[part] = {
            "m": m, "pool_size": pool_size, "readout": readout, "which": part,
            "ranks": list(cfg.ranks) if part == "heads" else None, "seeds": list(cfg.seeds),
            "pool_train": data["pool_train"], "pool_test": data["pool_test"],
            "n_eval": {k: len(v[1]) for k, v in data["evals"].items()},
            "accuracy": {k: a[order].reshape(shape).tolist() for k, a in acc.items()},
            "train_max_error": best[order].reshape(shape).tolist()}
    if which != "both":
        return out[which]
    h, d = out["heads"], out["dense"]
    test = {name: h["accuracy"][f"test/{name}"] for name in TEST_DISTRIBUTIONS}
    return {
        "pool_train": h["pool_train"], "pool_test": h["pool_test"], "ranks": list(cfg.ranks),
        "accuracy": test, "train_accuracy": h["accuracy"]["fit/all"],
        "train_max_error": h["train_max_error"],
        "dense": {name: d["accuracy"][f"test/{name}"] for name in TEST_DISTRIBUTIONS},
        "dense_train_accuracy": d["accuracy"]["fit/all"],
        "transition_r": _transitions(cfg.ranks, test, cfg.threshold)}


def _transitions(ranks, accuracy: dict, threshold: float) -> dict:
    """The rule's r* of a protocol's width per test distribution."""
    return {name: curve_rule(list(ranks), accuracy[name], threshold=threshold)["r_star"]
            for name in TEST_DISTRIBUTIONS}


def _key(m: int, pool_size: int, readout: str, which: str) -> str:
    return f"m{m}-P{pool_size}/{readout}/{which}"


def _units(cfg, device) -> list[Unit]:
    """One unit per width "m<width>" (a protocol) or per (size, readout, heads | dense), the
    slow heads first (a reading)."""
    dev = str(device)
    if cfg.reading == "tokens":
        return [Unit(f"m{m}", train_unit, (cfg, m, p, cfg.readout, "both", dev), device=dev)
                for m, p in cfg.sizes]
    return [Unit(_key(m, p, readout, which), train_unit, (cfg, m, p, readout, which, dev),
                 device=dev)
            for which in ("heads", "dense") for m, p in cfg.sizes for readout in cfg.readouts]


_RUN_INFO = ("wall_time", "environment", "cpu_seconds")  # where and how long a unit ran


def _result(config: dict, units: dict) -> dict | None:
    """What the stored units make (None while one is missing): ``{"config", "widths"}`` (a
    protocol; older files: one "sweep" unit) or ``{"config", "sizes"}`` (a reading)."""
    def unit(key):
        return {k: v for k, v in units[key].items() if k not in _RUN_INFO}

    if "widths" in config:
        if "sweep" in units:
            widths = {str(m): dict(units["sweep"]["widths"][str(m)]) for m in config["widths"]}
        elif all(f"m{m}" in units for m in config["widths"]):
            widths = {str(m): unit(f"m{m}") for m in config["widths"]}
        else:
            return None
        for e in widths.values():  # one definition: the rule's r*, also for older files
            e["transition_r"] = _transitions(e["ranks"], e["accuracy"], config["threshold"])
        return {"config": config, "widths": widths}
    keys = [_key(m, p, ro, w) for m, p in config["sizes"] for ro in config["readouts"]
            for w in ("heads", "dense")]
    if not all(k in units for k in keys):
        return None
    return {"config": config, "sizes": {
        f"m{m}-P{p}": {ro: {w: unit(_key(m, p, ro, w)) for w in ("heads", "dense")}
                       for ro in config["readouts"]} for m, p in config["sizes"]}}


def reading_path(out_dir, reading: str, mode: str = "full"):
    """Where a reading's results live: ``out_dir/e2_<reading>_<mode>.json``."""
    check_choice(reading, "reading", tuple(READINGS))
    check_choice(mode, "mode", ("full", "quick", "smoke"))
    return check_path(out_dir, "out_dir") / f"e2_{reading}_{mode}.json"


def run_reading(config: ReadingConfig | E2Config, out=None, device="cpu", progress=False,
                restart=False, scheduler: str | None = None, threads: int = 1) -> dict:
    """Run (or resume) a reading or a protocol, each unit stored in ``out`` as it finishes."""
    cfg = check_instance(config, "config", (ReadingConfig, E2Config))
    check_device(device)
    if out is not None:
        check_writable(out, "out")
    done = run_sweep(cfg, _units(cfg, device), out=out, restart=restart, scheduler=scheduler,
                     threads=threads, progress=progress, fields=UNIT_FIELDS)
    return _result(done["config"], done["units"])


def load_reading(path) -> dict | None:
    """A stored E2 results file as :func:`run_reading` returns it (None while incomplete)."""
    data = read_json_file(path, "E2 results file")
    units = data.get("units") if isinstance(data, dict) else None
    if not (isinstance(units, dict) and isinstance(data.get("config"), dict)
            and all(isinstance(u, dict) for u in units.values())):
        raise ValueError(f"path {str(path)!r} is not an E2 results file (config, units)")
    return _result(data["config"], data["units"])


def complement_power_rank(m: int, k: int) -> int:
    """Feature rank of the complement-power kernel of degree k on width-m tokens:
    sum_{j <= k} C(m, j) (its multilinear monomials of degree <= k)."""
    m, k = check_int(m, "m", 1, 62), check_int(k, "k", 0, 62)
    return sum(math.comb(m, j) for j in range(min(k, m) + 1))


def complement_power_head_accuracy(pool, idx, k: int) -> Fraction:
    """Exact-sequence accuracy, in integers, of the head alpha(x, z) = (2<x, 1 - z> + 1)^k
    (overlap readout, rank :func:`complement_power_rank`) on the triples ``idx`` of ``pool``."""
    tokens = check_tokens(pool, "pool", 2)
    k = check_int(k, "k", 0, 6)
    if tokens.ndim != 2 or len(tokens) > MAX_POOL:
        raise ValueError(f"pool must be a (P, m) array of 0/1 tokens with P <= {MAX_POOL}, got "
                         f"shape {tokens.shape}")
    rows = e2data.index_rows(idx, len(tokens))
    m = tokens.shape[1]
    if len(tokens) * (2 * m + 1) ** k * 3 * m >= 2**62:
        raise ValueError("k and the width make the integer weights too large for int64")
    gram = tokens @ tokens.T
    weight = (2 * (tokens @ (1 - tokens).T) + 1) ** k
    target = min_ip_targets(tokens[rows])
    solved = np.ones(len(rows), dtype=bool)
    for i in range(3):  # |num/den - t| < 1/2  <=>  |2 num - 2 t den| < den, in integers
        q = rows[:, i]
        a, f = weight[q[:, None], rows], gram[q[:, None], rows]
        num, den = (a * f).sum(1), a.sum(1)
        solved &= np.abs(2 * num - 2 * target[:, i] * den) < den
    return Fraction(int(solved.sum()), len(rows))
