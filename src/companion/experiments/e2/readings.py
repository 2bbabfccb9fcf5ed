"""The E2 pipeline (chapter 7): a configuration -> units -> one function that trains a
unit -> records, for the three readings of the paper's "larger, disjoint train/test pools"
and for the protocols stored before them (issue 10).

* **X** — exp-affine maps phi(x) = exp(Wx + c) (:func:`~.heads.mlp_kernel_heads` with no
  hidden layer: the class of positive random features of the softmax kernel) on disjoint,
  complement-closed token pools; problem size = token width m.
* **S-code** — lookup tables over one Paley-Hadamard code pool with complements (every
  query has one private best key, its complement: Lemma D's identity structure); train and
  test are disjoint sets of *sequences*; problem size = pool size P = 2(m - 1).
* **S-random** — as S-code over a random complement-closed pool at m = 12; size = P.
* **the stored protocols A–I** (:class:`E2Config`, reading "tokens"; presets and stored
  format in :mod:`companion.experiments.e2.protocols`) — MLP maps of the bits on disjoint
  random token pools, the heads and dense heads of one width trained as one unit.

Data come from :mod:`companion.experiments.e2.data`; every head of a unit is trained as one
tensor program (:func:`companion.experiments.engine.train_batched`) and scored by
*exact-sequence accuracy* (a sequence is solved when all three rounded outputs equal their
targets) on every evaluation set of :func:`reading_data`. One stored unit per (size,
readout, heads or dense), so an interrupted sweep resumes per unit
(:class:`~.store.ResultStore`, :func:`~.scheduler.run_units`). The rule that judges the
curves (:mod:`companion.experiments.e2.rule`) was fixed before any full run.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import torch

from companion.bounds.codes import paley_hadamard_code
from companion.checks import (
    check_array,
    check_bool,
    check_choice,
    check_device,
    check_float,
    check_instance,
    check_int,
    check_int_sequence,
    check_path,
    check_tokens,
    read_json_file,
)
from companion.core.task import min_ip_targets
from companion.experiments.e2.data import (
    HARD_DISTRIBUTIONS,
    MAX_POOL,
    MAX_SEQUENCES,
    TEST_DISTRIBUTIONS,
    complement_closed_pool,
    disjoint_pool_split,
    pool_inputs,
    shared_pool_split,
)
from companion.experiments.e2.rule import curve_rule
from companion.experiments.engine import ModelStack, train_batched
from companion.experiments.heads import (
    ENCODINGS,
    FEATURES,
    READOUTS,
    mlp_kernel_heads,
    mlp_softmax_heads,
    pool_kernel_heads,
    pool_softmax_heads,
)
from companion.experiments.sweep import (
    FrozenConfig,
    ResultStore,
    Unit,
    check_writable,
    config_dict,
    run_units,
)

__all__ = ["READINGS", "ReadingConfig", "E2Config", "READINGS_FULL", "READINGS_SMOKE",
           "READING_QUICK", "reading_data", "unit_models", "reading_unit", "e2_width_result",
           "reading_units", "reading_result", "run_reading", "reading_path", "load_reading",
           "HEADLINE", "config_dict", "complement_power_rank", "complement_power_head_accuracy"]

#: The three readings: name -> (head kind, pool, what the problem size is).
READINGS = {"X": ("mlp", "disjoint closed random", "m"),
            "S-code": ("table", "shared Paley code", "P"),
            "S-random": ("table", "shared closed random", "P")}

#: Fixed from the paper's words before any result (the rule's pre-registration): OOD means
#: unseen tokens, the exp-affine class cannot be blamed for a low-rank failure, the paper's
#: model has an affine readout, and a held-out pool's sequences are uniform triples.
HEADLINE = {"reading": "X", "readout": "learned", "test": "uniform"}


def _tuple(value):
    """Nested lists as nested tuples (frozen configs hold tuples; JSON writes both as arrays)."""
    return tuple(_tuple(v) for v in value) if isinstance(value, (list, tuple)) else value


def _tuple_of(value, name: str) -> tuple:
    """`value` (a list or tuple, nested ones too) as nested tuples, or TypeError naming it."""
    out = _tuple(value)
    if not isinstance(out, tuple):
        raise TypeError(f"{name} must be a tuple, got {value!r:.80}")
    return out


# --------------------------------------------------------------------------- configurations


@dataclass(frozen=True)
class ReadingConfig(FrozenConfig):
    """One reading's sweep: sizes (m, P), data, ranks (grid plus refinement), seeds,
    training. ``train_fraction``: X, the share of complementary pairs in the train pool;
    S-*, the share of multisets on the train side. ``dense_learned_lr``: the dense heads'
    rate with the learned readout (None: ``lr``)."""

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

    # reading X's maps: exp-affine, no hidden layer. Class attributes, not fields, so the
    # stored runs' configuration hashes stay what they were.
    hidden = ()
    feature, encoding, skip = "exp", "01", False

    def __post_init__(self):
        put = self._put
        check_choice(self.reading, "reading", tuple(READINGS))
        sizes = _tuple(self.sizes)
        if not isinstance(sizes, tuple) or not sizes or not all(
                isinstance(s, tuple) and len(s) == 2 for s in sizes):
            raise TypeError(f"sizes must be a non-empty sequence of (m, P) pairs, got "
                            f"{self.sizes!r:.80}")
        put("sizes", tuple((check_int(m, "sizes[i][0] (m)", 2, 62),
                            check_int(p, "sizes[i][1] (P)", 4)) for m, p in sizes))
        if self.reading == "S-code":
            for m, p in self.sizes:
                if p != 2 * (m - 1):
                    raise ValueError(f"sizes: a Paley code pool of width m has P = 2(m - 1) "
                                     f"tokens, got (m, P) = ({m}, {p})")
        for m, p in self.sizes:
            if p > min(2 ** m, MAX_POOL) or p % 2:
                raise ValueError(f"sizes: P must be even (complementary pairs) and at most "
                                 f"2**m and {MAX_POOL}, got (m, P) = ({m}, {p})")
        for name in ("n_train", "n_test"):
            put(name, check_int(getattr(self, name), name, 1, MAX_SEQUENCES))
        for name in ("steps", "value_dim"):
            put(name, check_int(getattr(self, name), name, 1))
        mix = _tuple(self.train_mix)
        if not isinstance(mix, tuple) or not mix or not all(
                isinstance(c, tuple) and len(c) == 2 for c in mix):
            raise TypeError("train_mix must be a non-empty sequence of (distribution, weight)")
        put("train_mix", tuple((check_choice(d, "train_mix[i][0]", HARD_DISTRIBUTIONS),
                                check_float(w, "train_mix[i][1]", 0, 1, low_open=True))
                               for d, w in mix))
        put("tests", tuple(check_choice(t, "tests[i]", HARD_DISTRIBUTIONS)
                           for t in _tuple_of(self.tests, "tests")))
        put("readouts", tuple(check_choice(r, "readouts[i]", READOUTS)
                              for r in _tuple_of(self.readouts, "readouts")))
        if not self.tests or not self.readouts:
            raise ValueError("tests and readouts must be non-empty")
        put("ranks", tuple(check_int_sequence(_tuple(self.ranks), "ranks", 1, 4096)))
        if list(self.ranks) != sorted(set(self.ranks)):
            raise ValueError(f"ranks must be strictly increasing, got {self.ranks}")
        groups = tuple(tuple(check_int_sequence(g, "rank_groups[i]", 1))
                       for g in _tuple_of(self.rank_groups, "rank_groups"))
        if sorted(r for g in groups for r in g) != sorted(self.ranks):
            raise ValueError("rank_groups must partition ranks (every rank exactly once)")
        put("rank_groups", groups)
        put("seeds", tuple(check_int_sequence(_tuple(self.seeds), "seeds", 0)))
        self._check_schedule()
        if self.dense_learned_lr is not None:
            put("dense_learned_lr", check_float(self.dense_learned_lr, "dense_learned_lr", 0,
                                                10, low_open=True))
        put("train_fraction", check_float(self.train_fraction, "train_fraction", 0, 1,
                                          low_open=True, high_open=True))
        put("threshold", check_float(self.threshold, "threshold", 0, 1, low_open=True))
        put("data_seed", check_int(self.data_seed, "data_seed", 0))

    @property
    def kind(self) -> str:
        return READINGS[self.reading][0]


_X = ReadingConfig(
    reading="X", sizes=((8, 256), (10, 512), (12, 512)), n_train=4000,
    tests=("uniform", "gap2", "witness"), ranks=(1, 2, 4, 8, 16, 32, 64, 128),
    rank_groups=((1, 2, 4, 8, 16), (32,), (64,), (128,)), steps=1500,
    dense_learned_lr=None)

#: The full-size runs (``python -m companion e2 --full``), as fixed in the rule's
#: pre-registration: 5 seeds, both readouts, dense per seed, 1000 test sequences per set.
READINGS_FULL = {
    "X": _X,
    "S-code": ReadingConfig(),
    "S-random": ReadingConfig(
        reading="S-random", sizes=((12, 32), (12, 64), (12, 128)), n_train=4000,
        tests=("uniform", "gap2", "witness"), ranks=(1, 2, 4, 8, 16, 32, 64, 128),
        rank_groups=((1, 2, 4, 8, 16), (32, 64), (128,)), dense_learned_lr=None),
}

#: The book's live run (chapter 7, seconds): S-code at P = 22, overlap readout, a few ranks,
#: two seeds, shorter training; checked against the committed full run, never printed.
READING_QUICK = dataclasses.replace(
    READINGS_FULL["S-code"], sizes=((12, 22),), n_train=1500, n_test=500,
    readouts=("overlap",), ranks=(4, 8, 16, 24, 32, 64), rank_groups=((4, 8, 16, 24, 32, 64),),
    seeds=(0, 1), steps=2000)

#: Installation / cluster check (``--smoke``): tiny sizes, three ranks, two seeds.
READINGS_SMOKE = {
    "X": dataclasses.replace(_X, sizes=((6, 32), (8, 48)), n_train=200, n_test=100,
                             ranks=(1, 4, 16), rank_groups=((1, 4), (16,)), seeds=(0, 1),
                             steps=60),
    "S-code": dataclasses.replace(READINGS_FULL["S-code"], sizes=((8, 14),), n_train=200,
                                  n_test=100, ranks=(1, 4, 16), rank_groups=((1, 4), (16,)),
                                  seeds=(0, 1), steps=60),
    "S-random": dataclasses.replace(READINGS_FULL["S-random"], sizes=((8, 16),), n_train=200,
                                    n_test=100, ranks=(1, 4, 16), rank_groups=((1, 4), (16,)),
                                    seeds=(0, 1), steps=60),
}


@dataclass(frozen=True)
class E2Config(FrozenConfig):
    """One stored protocol's sweep (reading "tokens": disjoint random token pools, MLP maps;
    presets in :mod:`companion.experiments.e2.protocols`). Per width: a pool of
    ``pool_sizes[i]`` distinct tokens split ``train_fraction`` / rest, ``n_train`` training
    sequences (a ``near_tie_fraction`` of them near-ties), ``n_test`` per test distribution;
    the heads of every rank x seed and the dense heads of every seed trained together.
    Validated and normalised on construction; its fields are those of the stored files."""

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

    def __post_init__(self):
        put = self._put
        for name in ("widths", "pool_sizes", "ranks", "seeds", "hidden"):
            if isinstance(getattr(self, name), (str, bytes)):
                raise TypeError(f"{name} must be a sequence of ints, got a string")
        put("widths", tuple(check_int_sequence(_tuple(self.widths), "widths", 1, 62)))
        put("pool_sizes", tuple(check_int_sequence(_tuple(self.pool_sizes), "pool_sizes", 1)))
        if len(self.pool_sizes) != len(self.widths):
            raise ValueError("pool_sizes must have one entry per width")
        put("ranks", tuple(check_int_sequence(_tuple(self.ranks), "ranks", 1)))
        if not (self.rank_groups is None or isinstance(self.rank_groups, (list, tuple))):
            raise TypeError(f"rank_groups must be a tuple of rank tuples or None, got "
                            f"{type(self.rank_groups).__name__}")
        groups = self.rank_groups or (self.ranks,)
        groups = tuple(tuple(check_int_sequence(_tuple(g), "rank_groups[i]", 1)) for g in groups)
        if sorted(r for g in groups for r in g) != sorted(self.ranks):
            raise ValueError("rank_groups must partition ranks (every rank exactly once)")
        put("rank_groups", groups)
        put("seeds", tuple(check_int_sequence(_tuple(self.seeds), "seeds", 0)))
        put("hidden", tuple(check_int_sequence(_tuple(self.hidden), "hidden", 1,
                                               allow_empty=True)))
        for name, upper in (("n_train", MAX_SEQUENCES), ("n_test", MAX_SEQUENCES),
                            ("steps", None), ("value_dim", None)):
            put(name, check_int(getattr(self, name), name, 1, upper))
        put("data_seed", check_int(self.data_seed, "data_seed", 0))
        put("train_fraction", check_float(self.train_fraction, "train_fraction", 0, 1,
                                          low_open=True, high_open=True))
        put("near_tie_fraction", check_float(self.near_tie_fraction, "near_tie_fraction", 0, 1))
        for m, p in zip(self.widths, self.pool_sizes, strict=True):
            k = int(round(self.train_fraction * p))
            if p > min(2**m, MAX_POOL) or min(k, p - k) < 3:
                raise ValueError(f"pool_sizes: width {m} needs a pool of at most "
                                 f"min(2**m, {MAX_POOL}) tokens that train_fraction splits "
                                 f"into two pools of at least 3, got {p}")
        self._check_schedule()
        put("threshold", check_float(self.threshold, "threshold", 0, 1, low_open=True))
        check_choice(self.feature, "feature", FEATURES)
        check_choice(self.encoding, "encoding", ENCODINGS)
        check_choice(self.readout, "readout", READOUTS)
        put("skip", check_bool(self.skip, "skip"))

    @property
    def sizes(self) -> tuple:
        return tuple(zip(self.widths, self.pool_sizes, strict=True))

    @property
    def readouts(self) -> tuple:
        return (self.readout,)

    @property
    def train_mix(self) -> tuple:
        return (("uniform", 1 - self.near_tie_fraction), ("near_tie", self.near_tie_fraction))


# --------------------------------------------------------------------------- data


def reading_data(cfg: ReadingConfig | E2Config, m: int, pool_size: int) -> dict:
    """The sequences of one size: {"train": (pool, idx), "evals": {name: (pool, idx)},
    "pool_train", "pool_test"} with evaluation sets "test/<d>" (held out), "fit/<d>" and
    "fit/all" (the training sequences of each mixture component, and all of them) and, for
    X, "train/<d>" (fresh draws from the training pool)."""
    check_instance(cfg, "cfg", (ReadingConfig, E2Config))
    m = check_int(m, "m", 2, 62)
    if (m, pool_size) not in cfg.sizes:
        raise ValueError(f"m, pool_size must be one of the configuration's sizes "
                         f"{[list(s) for s in cfg.sizes]}, got ({m}, {pool_size!r:.40})")
    return _reading_data(cfg, m, pool_size)


def _reading_data(cfg, m: int, pool_size: int) -> dict:
    mix = dict(cfg.train_mix)
    if cfg.reading in ("X", "tokens"):
        d = disjoint_pool_split(m, pool_size, cfg.train_fraction, cfg.n_train, cfg.n_test,
                                mix, cfg.tests, cfg.data_seed,
                                pools="pairs" if cfg.reading == "X" else "tokens")
    else:
        pool = (paley_hadamard_code(m - 1) if cfg.reading == "S-code"
                else complement_closed_pool(m, pool_size // 2, cfg.data_seed))
        d = shared_pool_split(np.asarray(pool, dtype=np.int64), cfg.n_train, cfg.n_test, mix,
                              cfg.tests, cfg.data_seed, test_fraction=1 - cfg.train_fraction)
    evals = {f"test/{k}": (d.test_pool, v) for k, v in d.test_idx.items()}
    evals.update({f"fit/{k}": (d.train_pool, v) for k, v in d.train_parts.items()})
    evals["fit/all"] = (d.train_pool, d.train_idx)
    evals.update({f"train/{k}": (d.train_pool, v) for k, v in d.train_eval_idx.items()})
    return {"train": (d.train_pool, d.train_idx), "evals": evals,
            "pool_train": len(d.train_pool), "pool_test": len(d.test_pool)}


# --------------------------------------------------------------------------- one unit


def _exact_sequence_accuracy(predictions: torch.Tensor, targets: np.ndarray) -> np.ndarray:
    """Fraction of sequences whose three outputs all lie within 1/2 of their integer targets:
    predictions (M, 3S), targets (S, 3) -> (M,)."""
    pred = predictions.detach().cpu().numpy().astype(np.float64)
    pred = pred.reshape(pred.shape[0], targets.shape[0], 3)
    return (np.abs(pred - targets[None]) < 0.5).all(axis=-1).mean(axis=-1)


def unit_models(cfg, m: int, pool_size: int, readout: str, which: str):
    """The stacked models of a unit and the (rank or "dense", seed) key of each row: one
    kernel-head family per rank group (every rank of the group x every seed, padded to the
    group's largest rank) unless which == "dense", and the dense heads (every seed) unless
    which == "heads". Used by the trainer and by benchmarks/bench_training.py; no checks
    (a validated configuration feeds it)."""
    seeds = list(cfg.seeds)
    parts, keys = [], []
    if which != "dense":
        for group in cfg.rank_groups:
            ranks, sd = [r for r in group for _ in seeds], seeds * len(group)
            if cfg.kind == "table":
                parts.append(pool_kernel_heads(pool_size, ranks, sd, readout, cfg.value_dim))
            else:
                parts.append(mlp_kernel_heads(m, ranks, sd, cfg.hidden, cfg.value_dim,
                                            cfg.feature, cfg.encoding, cfg.skip, readout))
            keys += list(zip(ranks, sd, strict=True))
    if which != "heads":
        if cfg.kind == "table":
            parts.append(pool_softmax_heads(pool_size, seeds, m, readout, cfg.value_dim))
        else:
            parts.append(mlp_softmax_heads(m, seeds, cfg.hidden, cfg.value_dim,
                                         encoding=cfg.encoding, skip=cfg.skip,
                                         readout=readout))
        keys += [("dense", s) for s in seeds]
    return (parts[0] if which == "dense" else ModelStack(parts)), keys


def _train_unit(cfg, m: int, pool_size: int, readout: str, which: str, device) -> dict:
    """Train the models of one unit (:func:`unit_models`) as one tensor program and score them on
    every evaluation set: {"heads": record, "dense": record} (the parts trained)."""
    data = _reading_data(cfg, m, pool_size)
    model, keys = unit_models(cfg, m, pool_size, readout, which)
    pool, idx = data["train"]
    lr = cfg.lr
    if which == "dense" and readout == "learned" and cfg.dense_learned_lr is not None:
        lr = cfg.dense_learned_lr
    targets = torch.as_tensor(min_ip_targets(pool[idx]).reshape(-1), dtype=torch.float32,
                              device=device)
    res = train_batched(model, pool_inputs(pool, idx, device), targets, steps=cfg.steps,
                        lr=lr, final_lr_fraction=cfg.final_lr_fraction, seed=cfg.data_seed,
                        device=device)
    with torch.no_grad():
        acc = {name: _exact_sequence_accuracy(res.model(pool_inputs(epool, eidx, device)),
                                              min_ip_targets(epool[eidx]))
               for name, (epool, eidx) in data["evals"].items()}
    best = res.best_max_error.numpy()
    at = {key: i for i, key in enumerate(keys)}
    out = {}
    for part in ("heads", "dense"):
        if part != which and which != "both":
            continue
        rows = ([(r, s) for r in cfg.ranks for s in cfg.seeds] if part == "heads"
                else [("dense", s) for s in cfg.seeds])
        order = [at[k] for k in rows]
        shape = (len(cfg.ranks), len(cfg.seeds)) if part == "heads" else (len(cfg.seeds),)
        out[part] = {
            "m": m, "pool_size": pool_size, "readout": readout, "which": part,
            "ranks": list(cfg.ranks) if part == "heads" else None, "seeds": list(cfg.seeds),
            "pool_train": data["pool_train"], "pool_test": data["pool_test"],
            "n_eval": {k: len(v[1]) for k, v in data["evals"].items()},
            "accuracy": {k: a[order].reshape(shape).tolist() for k, a in acc.items()},
            "train_max_error": best[order].reshape(shape).tolist()}
    return out


def reading_unit(cfg: ReadingConfig, size: int, readout: str, which: str,
                 device="cpu") -> dict:
    """Train the heads (every rank x seed, ``which="heads"``) or the dense heads (every seed,
    ``"dense"``) of one size (index into ``cfg.sizes``) and readout as one tensor program;
    return exact-sequence accuracies on every evaluation set of :func:`reading_data`.
    A pure function of its arguments, so it may run anywhere."""
    check_instance(cfg, "cfg", ReadingConfig)
    size = check_int(size, "size", 0, len(cfg.sizes) - 1)
    check_choice(readout, "readout", cfg.readouts)
    check_choice(which, "which", ("heads", "dense"))
    check_device(device)
    m, pool_size = cfg.sizes[size]
    return _train_unit(cfg, m, pool_size, readout, which, device)[which]


def e2_width_result(cfg: E2Config, m: int, pool_size: int, device="cpu") -> dict:
    """One stored protocol's unit: train every (rank, seed) head and every dense head of width
    m together and score them on the unseen tokens, in the stored protocols' record (test
    accuracy per distribution, train accuracy, best max error, dense per seed, and the
    rule's transition rank r* per distribution). A pure function of its arguments."""
    check_instance(cfg, "cfg", E2Config)
    check_device(device)
    if (m, pool_size) not in cfg.sizes:
        raise ValueError(f"m, pool_size must be one of the configuration's (width, pool size) "
                         f"pairs {[list(s) for s in cfg.sizes]}, got ({m!r:.20}, "
                         f"{pool_size!r:.20})")
    trained = _train_unit(cfg, m, pool_size, cfg.readout, "both", device)
    heads, dense = trained["heads"], trained["dense"]
    ranks = list(cfg.ranks)
    acc = {name: heads["accuracy"][f"test/{name}"] for name in TEST_DISTRIBUTIONS}
    return {
        "pool_train": heads["pool_train"], "pool_test": heads["pool_test"], "ranks": ranks,
        "accuracy": acc, "train_accuracy": heads["accuracy"]["fit/all"],
        "train_max_error": heads["train_max_error"],
        "dense": {name: dense["accuracy"][f"test/{name}"] for name in TEST_DISTRIBUTIONS},
        "dense_train_accuracy": dense["accuracy"]["fit/all"],
        "transition_r": {name: curve_rule(ranks, acc[name], threshold=cfg.threshold)["r_star"]
                         for name in TEST_DISTRIBUTIONS}}


def _key(m: int, pool_size: int, readout: str, which: str) -> str:
    return f"m{m}-P{pool_size}/{readout}/{which}"


def reading_units(cfg: ReadingConfig, device="cpu") -> list[Unit]:
    """The reading's independent units, one per (size, readout, heads | dense); the slow
    heads units first so that a cluster starts them early."""
    check_instance(cfg, "cfg", ReadingConfig)
    check_device(device)
    units = []
    for which in ("heads", "dense"):
        for i, (m, p) in enumerate(cfg.sizes):
            for readout in cfg.readouts:
                units.append(Unit(_key(m, p, readout, which), reading_unit,
                                  (cfg, i, readout, which, str(device)), device=str(device)))
    return units


def reading_result(store: ResultStore) -> dict | None:
    """``{"config", "sizes": {"m<m>-P<P>": {readout: {"heads", "dense"}}}}`` from a store,
    or None while a unit is missing."""
    check_instance(store, "store", ResultStore)
    cfg = store.config
    out = {}
    for m, p in cfg["sizes"]:
        out[f"m{m}-P{p}"] = {}
        for readout in cfg["readouts"]:
            got = {}
            for which in ("heads", "dense"):
                key = _key(m, p, readout, which)
                if not store.done(key):
                    return None
                got[which] = {k: v for k, v in store.get(key).items()
                              if k not in ("wall_time", "environment", "cpu_seconds")}
            out[f"m{m}-P{p}"][readout] = got
    return {"config": cfg, "sizes": out}


def reading_path(out_dir, reading: str, mode: str = "full"):
    """Where a reading's results live: ``out_dir/e2_<reading>_<mode>.json``."""
    check_choice(reading, "reading", tuple(READINGS))
    check_choice(mode, "mode", ("full", "quick", "smoke"))
    return check_path(out_dir, "out_dir") / f"e2_{reading}_{mode}.json"


def run_reading(config: ReadingConfig, out=None, device="cpu", progress=False,
                restart=False, scheduler: str | None = None, threads: int = 1) -> dict:
    """Run (or resume) one reading, every unit stored in ``out`` as it finishes (None: in
    memory); returns :func:`reading_result`. ``scheduler``: see
    :mod:`companion.experiments.sweep`."""
    cfg = check_instance(config, "config", ReadingConfig)
    check_device(device)
    if out is not None:
        check_writable(out, "out")
    store = ResultStore(out, cfg, restart=restart)
    if reading_result(store) is None:
        run_units(reading_units(cfg, device), store, scheduler=scheduler, threads=threads,
                  progress=progress)
    return reading_result(store)


def load_reading(path) -> dict | None:
    """A stored reading (the file :func:`run_reading` writes) as :func:`reading_result`
    returns it, or None while a unit is missing."""
    data = read_json_file(path, "E2 reading results file")
    if not isinstance(data, dict) or not isinstance(data.get("units"), dict) or \
            not isinstance(data.get("config"), dict):
        raise ValueError(f"path {str(path)!r} is not an E2 reading results file")
    store = ResultStore(None, data["config"])
    store.units = data["units"]
    return reading_result(store)


# --------------------------------------------------------------------------- explicit heads


def complement_power_rank(m: int, k: int) -> int:
    """Feature rank of the complement-power kernel of degree k on width-m tokens:
    sum_{j <= k} C(m, j) (its multilinear monomials of degree <= k)."""
    m, k = check_int(m, "m", 1, 62), check_int(k, "k", 0, 62)
    return sum(math.comb(m, j) for j in range(min(k, m) + 1))


def complement_power_head_accuracy(pool, idx, k: int) -> Fraction:
    """Exact-sequence accuracy of the explicit NKA head alpha(x, z) = (2<x, 1 - z> + 1)^k with
    the overlap readout on the triples ``idx`` of ``pool``: exact, in integers.

    For each query the weight falls as <x, z> grows, so the head prefers low-overlap keys
    more sharply as k grows; its features (monomials of x times monomials of 1 - z, positive
    coefficients) are nonnegative, and its rank is :func:`complement_power_rank`. A
    token-generic head of known rank: it needs no training and sees no pool."""
    tokens = check_tokens(pool, "pool", 2)
    if tokens.ndim != 2 or not 1 <= len(tokens) <= MAX_POOL:
        raise ValueError(f"pool must be a (P, m) array of 0/1 tokens with P <= {MAX_POOL}, got "
                         f"shape {tokens.shape}")
    rows = check_array(idx, "idx")
    if rows.ndim != 2 or rows.shape[1] != 3 or not len(rows):
        raise ValueError(f"idx must have shape (S, 3) with S >= 1, got {rows.shape}")
    if rows.dtype.kind not in "biu" or rows.min() < 0 or rows.max() >= len(tokens):
        raise ValueError(f"idx must hold integer pool indices in [0, {len(tokens) - 1}]")
    rows = rows.astype(np.int64)
    k = check_int(k, "k", 0, 6)
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
