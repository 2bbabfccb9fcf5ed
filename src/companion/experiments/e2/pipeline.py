"""E2, out-of-distribution scaling (chapter 7), as one pipeline on the sweep: one
configuration, :class:`E2Config`, whose presets are the stored protocols (:func:`protocol`,
:data:`E2_PROTOCOLS`), the three readings (:data:`READINGS_FULL`) and the converged study's
two arms (:data:`STUDY`, :func:`pilot_configs`); one unit function, :func:`train_e2_unit`
(checkpoint on validation where the design has validation sets); one path rule
(:func:`e2_path`), one runner (:func:`run_e2`) and one loader (:func:`load_e2`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import torch

from companion.bounds.codes import paley_hadamard_code
from companion.checks import (
    check_choice,
    check_device,
    check_float,
    check_instance,
    check_int,
    check_int_sequence,
    check_path,
)
from companion.experiments import heads
from companion.experiments.e2 import data as e2data
from companion.experiments.e2.data import DISTRIBUTIONS, MAX_POOL, MAX_SEQUENCES
from companion.experiments.e2.rule import curve_rule
from companion.experiments.engine import MAX_STEPS, ModelStack, fit_batched
from companion.experiments.sweep import (
    COUNTS,
    ERRORS,
    RECORD_FIELDS,
    RUN_FIELDS,
    SHARES,
    FrozenConfig,
    ResultFileError,
    Unit,
    check_units,
    config_dict,
    config_hash,
    numbers,
    records,
    run_sweep,
)
from companion.files import read_json_file

__all__ = ["DESIGNS", "READINGS", "ARMS", "E2Config", "protocol", "study_config", "E2_QUICK",
           "E2_SMOKE", "E2_PROTOCOLS", "E2_LIVE", "READINGS_FULL", "READINGS_SMOKE",
           "READING_QUICK", "HEADLINE", "HEADLINES", "SIZES", "PILOT_GRID", "PILOT_CHOICE",
           "STUDY", "DECISIVE", "pilot_configs", "e2_data", "run_e2", "e2_path",
           "load_e2", "load_e2_protocols", "study_files", "study_complete", "complete_sizes",
           "e2_live_result"]

#: The data designs: name -> (maps, pool, what the problem size is). "tokens": the stored
#: protocols; X, S-code, S-random: the readings; A, B: the converged study's arms.
DESIGNS = {"tokens": ("mlp", "disjoint random tokens", "m"),
           "X": ("mlp", "disjoint closed random", "m"),
           "S-code": ("table", "shared Paley code", "P"),
           "S-random": ("table", "shared closed random", "P"),
           "A": ("mlp", "the cube, split by complementary pairs", "m"),
           "B": ("table", "Sylvester-Hadamard rows and complements", "P")}
READINGS = {name: DESIGNS[name] for name in ("X", "S-code", "S-random")}
#: The study's arms and their model kinds.
ARMS = {"A": ("exp-affine", "mlp"), "B": ("overlap", "learned")}
STUDY_TESTS = ("uniform", "witness")


def _check_tuple(value, name: str, *checks, empty: bool = False) -> tuple:
    """A list or tuple (non-empty unless `empty`) as a tuple of entries checked by the one
    check (named name[i]), or of pairs checked by the two (name[i][0], name[i][1]); a check
    is a function (value, name) or the values allowed."""
    pairs = len(checks) == 2
    checks = [c if callable(c) else partial(check_choice, choices=c) for c in checks]
    if not isinstance(value, (list, tuple)) or not (value or empty) or pairs and not all(
            isinstance(v, (list, tuple)) and len(v) == 2 for v in value):
        raise TypeError(f"{name} must be a non-empty tuple{' of pairs' * pairs}, got "
                        f"{value!r:.80}")
    return tuple((checks[0](v[0], f"{name}[{i}][0]"), checks[1](v[1], f"{name}[{i}][1]"))
                 if pairs else checks[0](v, f"{name}[{i}]") for i, v in enumerate(value))


@dataclass(frozen=True)
class E2Config(FrozenConfig):
    """One E2 sweep (defaults: the stored protocols' quick mode). ``design``: the data
    (:data:`DESIGNS`), ``sizes`` its (m, P) per problem size, ``splits`` its data seeds (the
    study: the replicate splits); maps: MLPs of the m bits (``hidden``, ``feature``,
    ``encoding``, ``skip``, ``affine_values``: v, a, b affine in the bits) or tables over the
    pool; per readout the kernel heads of every rank group and the dense heads, one model per
    seed; ``dense_lr``: the dense heads' rate per readout where they train alone (else
    ``lr``); ``eval_every``: the study's validation monitor (None: the checkpoint is the
    smallest training max error); ``pilot``: no test set is read; ``fit_subsets``: the
    study's training subsets also scored (off by default; "witness": the training sequences
    of its witness test's kind, arm B's multisets holding a complementary pair)."""

    design: str = "tokens"
    sizes: tuple[tuple[int, int], ...] = ((8, 256), (10, 256), (12, 256))
    hidden: tuple[int, ...] = (32,)
    feature: str = "exp"
    encoding: str = "01"
    skip: bool = False
    affine_values: bool = False
    readouts: tuple[str, ...] = ("learned",)
    n_train: int = 3000
    n_test: int = 1000
    train_mix: tuple[tuple[str, float], ...] = (("uniform", 0.5), ("near_tie", 0.5))
    tests: tuple[str, ...] = ("uniform", "near_tie")
    train_fraction: float = 0.7
    splits: tuple[int, ...] = (0,)
    ranks: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128)
    rank_groups: tuple[tuple[int, ...], ...] | None = ((1, 2, 4, 8, 16), (32, 64, 128))
    seeds: tuple[int, ...] = (0, 1, 2)
    value_dim: int = 16
    steps: int = 1500
    lr: float = 0.01
    dense_lr: tuple[tuple[str, float], ...] = ()
    final_lr_fraction: float = 0.02
    surrogate_steps: int = 0
    eval_every: int | None = None
    threshold: float = 0.9
    pilot: bool = False
    fit_subsets: tuple[str, ...] = ()

    def __post_init__(self):
        put, study = self._put, check_choice(self.design, "design", tuple(DESIGNS)) in ARMS
        put("sizes", _check_tuple(self.sizes, "sizes", partial(check_int, low=2, high=64),
                                  partial(check_int, low=1, high=2**16)))
        for name, low, high, empty in (("hidden", 1, 4096, True), ("splits", 0, 2**32 - 1, False),
                                       ("ranks", 1, 4096, False), ("seeds", 0, 2**32 - 1, False)):
            put(name, tuple(check_int_sequence(getattr(self, name), name, low, high, empty)))
        check_choice(self.feature, "feature", heads.FEATURES)
        check_choice(self.encoding, "encoding", heads.ENCODINGS)
        self._check_flags("skip", "affine_values", "pilot")
        put("readouts", _check_tuple(self.readouts, "readouts", heads.READOUTS))
        for name in ("n_train", "n_test"):
            put(name, check_int(getattr(self, name), name, 1, MAX_SEQUENCES))
        put("train_mix", _check_tuple(self.train_mix, "train_mix", DISTRIBUTIONS, partial(
            check_float, low=0, high=1, low_open=True)))
        put("tests", _check_tuple(self.tests, "tests", DISTRIBUTIONS))
        put("train_fraction", check_float(self.train_fraction, "train_fraction", 0, 1,
                                          low_open=True, high_open=True))
        if list(self.ranks) != sorted(set(self.ranks)):
            raise ValueError(f"ranks must be strictly increasing, got {self.ranks}")
        groups = (self.ranks,) if self.rank_groups is None else self.rank_groups
        groups = _check_tuple(groups, "rank_groups",
                              lambda g, name: tuple(check_int_sequence(g, name, 1)))
        if sorted(r for g in groups for r in g) != list(self.ranks):
            raise ValueError("rank_groups must partition ranks (every rank exactly once)")
        put("rank_groups", groups)
        put("value_dim", check_int(self.value_dim, "value_dim", 1, 1024))
        put("steps", check_int(self.steps, "steps", 1, MAX_STEPS))
        put("surrogate_steps", check_int(self.surrogate_steps, "surrogate_steps", 0, MAX_STEPS))
        put("dense_lr", _check_tuple(self.dense_lr, "dense_lr", self.readouts, partial(
            check_float, low=0, high=10, low_open=True), empty=True))
        if self.eval_every is not None:
            put("eval_every", check_int(self.eval_every, "eval_every", 1, MAX_STEPS))
        put("threshold", check_float(self.threshold, "threshold", 0, 1, low_open=True))
        self._check_schedule()
        if study != (self.eval_every is not None) or (self.pilot and not study):
            raise ValueError("eval_every, pilot: the study's arms (designs A, B) select their "
                             "checkpoint on validation (eval_every) and have pilots; the other "
                             "designs have no validation sets (eval_every None)")
        if (study or self.design == "tokens") and len(self.readouts) != 1 or \
                self.design == "A" and self.readouts != ("learned",):
            raise ValueError(f"readouts: design {self.design} has one readout (arm A: learned)")
        if not study and len(self.splits) != 1:
            raise ValueError("splits: only the study's arms (designs A, B) have replicate splits")
        if self.design == "tokens" and (self.dense_lr or not set(dict(self.train_mix)) <= {
                "uniform", "near_tie"}):
            raise ValueError("dense_lr, train_mix: a stored protocol trains its dense heads with "
                             "the kernel heads, on uniform and near-tie triples")
        if study and self.tests not in (STUDY_TESTS, (*STUDY_TESTS, "complement")
                                        if self.design == "A" else STUDY_TESTS):
            raise ValueError(f"tests: the study's held-out sets are {STUDY_TESTS} (arm A: and "
                             "the decisive study's complement triples)")
        put("fit_subsets", _check_tuple(self.fit_subsets, "fit_subsets",
                                        ("witness",) if study else (), empty=True))
        for m, p in self.sizes:
            self._check_size(m, p)

    def _check_size(self, m: int, p: int) -> None:
        d, why = self.design, None
        if d == "A" and not (6 <= m <= 16 and p == 2**m):
            why = "arm A's pool is the whole cube, P = 2**m with 6 <= m <= 16"
        elif d == "B" and (m & (m - 1) or m < 8 or p != 2 * m - 2):
            why = "arm B's Sylvester order m is a power of two >= 8, P = 2m - 2"
        elif d == "S-code" and p != 2 * m - 2:
            why = "S-code's Paley pool has P = 2(m - 1)"
        elif d in ("tokens", "X", "S-random") and (m > 62 or p > min(2**m, MAX_POOL)):
            why = f"P must be at most min(2**m, {MAX_POOL})"
        elif d in ("X", "S-random") and p % 2:
            why = "a pool closed under complement has an even P"
        elif d == "tokens" and min(k := round(self.train_fraction * p), p - k) < 3:
            why = "train_fraction must split the pool into >= 3 tokens each"
        if why:
            raise ValueError(f"sizes: {why}; got (m, P) = ({m}, {p})")

    @property
    def kind(self) -> str:
        """The model family: mlp or table maps (the study: exp-affine, mlp, overlap, learned)."""
        if self.design == "A":
            return "mlp" if self.hidden else "exp-affine"
        return self.readouts[0] if self.design == "B" else DESIGNS[self.design][0]

    # the stored protocols' own terms (chapter 7's table of the quick mode)
    widths = property(lambda self: tuple(m for m, _ in self.sizes))
    pool_sizes = property(lambda self: tuple(p for _, p in self.sizes))
    near_tie_fraction = property(lambda self: dict(self.train_mix).get("near_tie", 0.0))


# --------------------------------------------------------------------------- presets


def protocol(widths=(8, 10, 12), pool_sizes=(256, 256, 256), near_tie_fraction: float = 0.5,
             readout: str = "learned", **fields) -> E2Config:
    """A stored protocol (design "tokens") in the terms it was registered in: per width a pool
    of ``pool_sizes[i]`` random tokens, the near-tie share of the training triples, one
    readout; other fields as :class:`E2Config`'s."""
    widths = check_int_sequence(widths, "widths", 2, 64)
    pool_sizes = check_int_sequence(pool_sizes, "pool_sizes", 1, MAX_POOL)
    if len(widths) != len(pool_sizes):
        raise ValueError("widths, pool_sizes must hold one pool size per width")
    f = check_float(near_tie_fraction, "near_tie_fraction", 0, 1)
    mix = tuple((d, w) for d, w in (("uniform", 1 - f), ("near_tie", f)) if w > 0)
    try:
        return E2Config(design="tokens", sizes=tuple(zip(widths, pool_sizes)), train_mix=mix,
                        readouts=(check_choice(readout, "readout", heads.READOUTS),), **fields)
    except ValueError as exc:  # name the arguments the sizes came from
        if str(exc).startswith("sizes"):
            raise ValueError(f"widths, pool_sizes: {exc}") from None
        raise


#: Book quick mode (the defaults).
E2_QUICK = protocol()
#: Installation / cluster check (CLI ``--smoke``, the tests): seconds on one core.
E2_SMOKE = protocol(widths=(6, 8), pool_sizes=(40, 48), n_train=200, n_test=100,
                    ranks=(1, 4, 16), rank_groups=((1, 4), (16,)), seeds=(0, 1), hidden=(8,),
                    steps=60)

_SHARED = {"pool_sizes": (256, 256, 256), "n_train": 3000, "hidden": (32,), "lr": 0.01,
           "steps": 1500, "near_tie_fraction": 0.5}
#: Every E2 protocol we ran and stored (results/e2_protocols/<name>.json), as arguments of
#: :func:`protocol`; the chapter tabulates all of them, kept or not.
E2_PROTOCOLS: dict = {
    "A_uniform_training": {**_SHARED, "widths": (8, 12, 16), "near_tie_fraction": 0.0},
    "E_mlp_skip_pm1": {"widths": (8, 12, 16), "pool_sizes": (256, 512, 512), "n_train": 3000,
                       "hidden": (64,), "lr": 0.03, "steps": 1000, "encoding": "pm1",
                       "skip": True, "near_tie_fraction": 0.5},
    "F_mlp_1500steps": {**_SHARED, "widths": (8, 12, 16)},
    "G_overlap_readout": {**_SHARED, "widths": (8, 12, 16), "readout": "overlap"},
    "H_widths_8_10_12": {**_SHARED, "widths": (8, 10, 12)},
    "I_pools_512": {**_SHARED, "widths": (8, 10, 12), "pool_sizes": (256, 512, 512)},
}
#: What chapter 7 re-trains live and checks against the committed quick sweep: the width that
#: moves least between CPU code paths (results/cross_path_spread.json), two ranks, a seed.
E2_LIVE = {"width": 8, "ranks": (4, 16), "seeds": (0,)}

#: The readings, fixed from the paper's words before any result: OOD means unseen tokens
#: (exp-affine maps, affine readout as the paper's model), held-out triples are uniform.
HEADLINE = {"reading": "X", "readout": "learned", "test": "uniform"}
_S_CODE = E2Config(
    design="S-code", sizes=((12, 22), (24, 46), (32, 62)), hidden=(),
    readouts=("learned", "overlap"), train_mix=(("uniform", 0.5), ("witness", 0.5)),
    tests=("uniform", "witness"), ranks=(1, 2, 4, 8, 12, 16, 20, 24, 28, 32, 40, 48, 64, 128),
    rank_groups=((1, 2, 4, 8, 12, 16), (20, 24, 28, 32), (40, 48, 64), (128,)),
    seeds=(0, 1, 2, 3, 4), steps=3000, lr=0.03, dense_lr=(("learned", 0.1),))
_WIDE = {"n_train": 4000, "tests": ("uniform", "gap2", "witness"),
         "ranks": (1, 2, 4, 8, 16, 32, 64, 128), "dense_lr": ()}
#: The full-size runs (``python -m companion e2 --full``), as pre-registered with the rule.
READINGS_FULL = {
    "X": dataclasses.replace(_S_CODE, design="X", sizes=((8, 256), (10, 512), (12, 512)),
                             rank_groups=((1, 2, 4, 8, 16), (32,), (64,), (128,)), steps=1500,
                             **_WIDE),
    "S-code": _S_CODE,
    "S-random": dataclasses.replace(_S_CODE, design="S-random",
                                    sizes=((12, 32), (12, 64), (12, 128)),
                                    rank_groups=((1, 2, 4, 8, 16), (32, 64), (128,)), **_WIDE),
}
#: The book's live run (chapter 7, seconds), checked against the committed full run.
READING_QUICK = dataclasses.replace(
    _S_CODE, sizes=((12, 22),), n_train=1500, n_test=500, readouts=("overlap",),
    ranks=(4, 8, 16, 24, 32, 64), rank_groups=((4, 8, 16, 24, 32, 64),), seeds=(0, 1),
    steps=2000, dense_lr=())
_SMOKE = {"n_train": 200, "n_test": 100, "ranks": (1, 4, 16), "rank_groups": ((1, 4), (16,)),
          "seeds": (0, 1), "steps": 60}
#: Installation / cluster check (``--smoke``): tiny sizes, three ranks, two seeds.
READINGS_SMOKE = {
    "X": dataclasses.replace(READINGS_FULL["X"], sizes=((6, 32), (8, 48)), **_SMOKE),
    "S-code": dataclasses.replace(_S_CODE, sizes=((8, 14),), **_SMOKE),
    "S-random": dataclasses.replace(READINGS_FULL["S-random"], sizes=((8, 16),), **_SMOKE),
}

#: The study, as pre-registered in book/e2_preregistration.md: sizes per arm (A: widths m,
#: B: Sylvester orders, P = 2m - 2); decided before any run, the curve family each arm's
#: verdict is read from (kind, test).
SIZES = {"A": (6, 8, 10, 12), "B": (8, 16, 32)}
HEADLINES = {"A": ("exp-affine", "uniform"), "B": ("overlap", "witness")}


def study_config(arm: str, kind: str, sizes=None, **fields) -> E2Config:
    """One (arm, kind) of the converged study with its registered defaults (``sizes``: the
    arm's m, default :data:`SIZES`): ranks 1 ... 1024 in six groups, 3 seeds x 3 splits,
    20,000 training and 4,000 validation and test triples, validation every 100 steps."""
    check_choice(arm, "arm", tuple(ARMS))
    check_choice(kind, "kind", ARMS[arm])
    sizes = SIZES[arm] if sizes is None else check_int_sequence(sizes, "sizes", 2, 64)
    sizes = tuple((m, 2**m if arm == "A" else 2 * m - 2) for m in sizes)
    return E2Config(**{
        "design": arm, "sizes": sizes, "hidden": (64,) if kind == "mlp" else (),
        "affine_values": kind == "mlp", "readouts": ("learned",) if arm == "A" else (kind,),
        "n_train": 20000, "n_test": 4000, "train_mix": (("uniform", 1.0),),
        "tests": STUDY_TESTS, "splits": (0, 1, 2), "ranks": tuple(2**k for k in range(11)),
        "rank_groups": ((1, 2, 4, 8, 16), (32, 64), (128,), (256,), (512,), (1024,)),
        "steps": 2000, "eval_every": 100, **fields})


#: The pilot's grid (the pre-registration): learning rates x MSE steps; each run ends in
#: E1's surrogate phase, and "surrogate off" is read from its validation history up to the
#: end of the MSE phase (the same trajectory as a run without it).
PILOT_GRID = {"lr": (3e-3, 1e-2, 3e-2), "steps": (2000, 5000), "surrogate_steps": 2000}
_PILOT_SIZES = {"A": (8, 10), "B": (16, 32)}
#: The pilot's registered choices, (arm, kind) -> optimiser, committed with the "Pilot
#: outcome" of book/e2_preregistration.md before any full run of that (arm, kind).
PILOT_CHOICE: dict = {
    ("B", "overlap"): {"lr": 0.03, "steps": 2000, "surrogate_steps": 0, "dense_lr": 0.01},
    ("B", "learned"): {"lr": 0.03, "steps": 2000, "surrogate_steps": 2000, "dense_lr": 0.01},
    ("A", "exp-affine"): {"lr": 0.01, "steps": 2000, "surrogate_steps": 2000,
                          "dense_lr": 0.003},
    ("A", "mlp"): {"lr": 0.003, "steps": 2000, "surrogate_steps": 2000, "dense_lr": 0.003},
}
#: The study: one configuration per (arm, kind) whose pilot choice is committed.
STUDY = {(arm, kind): study_config(arm, kind, **{**c, "dense_lr": (
    ("learned" if arm == "A" else kind, c["dense_lr"]),)}) for (arm, kind), c in
    PILOT_CHOICE.items()}


#: The decisive study (issue 40, book/e2_preregistration.md, registered in d36b0157): arm A's
#: exp-affine study again with the complement test (also a third validation set) and m = 14;
#: seed 2 cut at every width by the registered budget rule (measured: 16.6 CPU-hours).
DECISIVE = {("A", "exp-affine"): dataclasses.replace(
    STUDY["A", "exp-affine"], sizes=tuple((m, 2**m) for m in (6, 8, 10, 12, 14)),
    tests=(*STUDY_TESTS, "complement"), seeds=(0, 1))}


def pilot_configs(arm: str, kind: str) -> list[E2Config]:
    """The pilot's runs of one (arm, kind): the middle sizes (B: the two larger pools),
    ranks 16 and 256 and the dense heads, two seeds, one split; each grid point a config."""
    check_choice(arm, "arm", tuple(ARMS))
    return [study_config(arm, kind, _PILOT_SIZES[arm], ranks=(16, 256),
                         rank_groups=((16,), (256,)), seeds=(0, 1), splits=(0,), steps=steps,
                         lr=lr, surrogate_steps=PILOT_GRID["surrogate_steps"], pilot=True)
            for lr in PILOT_GRID["lr"] for steps in PILOT_GRID["steps"]]


# --------------------------------------------------------------------------- data and models


def e2_data(cfg: E2Config, m: int, pool_size: int, split: int | None = None) -> dict:
    """The sequences of one size and split (default the first): {"train": (pool, idx),
    "val": {name: (pool, idx)} (the study's validation sets), "evals": {name: (pool, idx)},
    "pool_train", "pool_test"}; evaluation sets "test/<d>" (held out) and, outside the study,
    "fit/<d>", "fit/all" (the training sequences) and, for X, "train/<d>" (fresh draws on the
    training pool)."""
    check_instance(cfg, "cfg", E2Config)
    if (check_int(m, "m"), pool_size) not in cfg.sizes:
        raise ValueError(f"m, pool_size must be one of the configuration's sizes "
                         f"{[list(s) for s in cfg.sizes]}, got ({m}, {pool_size!r:.40})")
    split = cfg.splits[0] if split is None else check_choice(split, "split", cfg.splits)
    return unit_data(cfg, m, pool_size, split)


def unit_data(cfg: E2Config, m: int, p: int, split: int) -> dict:
    """:func:`e2_data` without the checks (the units')."""
    if cfg.design in ARMS:
        return e2data.study_split(cfg.design, m, split, cfg.n_train, cfg.n_test,
                                  "complement" in cfg.tests)
    mix = dict(cfg.train_mix)
    if cfg.design in ("tokens", "X"):
        return e2data.disjoint_pool_split(m, p, cfg.train_fraction, cfg.n_train, cfg.n_test,
                                          mix, cfg.tests, split,
                                          pools="pairs" if cfg.design == "X" else "tokens")
    pool = (paley_hadamard_code(m - 1) if cfg.design == "S-code"
            else e2data.complement_closed_pool(m, p // 2, split))
    return e2data.shared_pool_split(np.asarray(pool, dtype=np.int64), cfg.n_train, cfg.n_test,
                                    mix, cfg.tests, split, 1 - cfg.train_fraction)


def unit_models(cfg: E2Config, m: int, p: int, readout: str, groups, dense: bool):
    """A unit's stacked models and the (rank or "dense", seed) key of each row: one kernel-head
    family per rank group (padded to its largest rank), then the dense heads of every seed."""
    seeds, table = list(cfg.seeds), DESIGNS[cfg.design][0] == "table"
    d = max(cfg.value_dim, p) if cfg.design == "B" else cfg.value_dim  # B: values >= P wide
    parts, keys = [], []
    for group in groups:
        ranks, sd = [r for r in group for _ in seeds], seeds * len(group)
        parts.append(heads.pool_kernel_heads(p, ranks, sd, readout, d) if table else
                     heads.mlp_kernel_heads(m, ranks, sd, cfg.hidden, d, cfg.feature,
                                            cfg.encoding, cfg.skip, readout, cfg.affine_values))
        keys += list(zip(ranks, sd, strict=True))
    if dense:
        parts.append(heads.pool_softmax_heads(p, seeds, m, readout, d) if table else
                     heads.mlp_softmax_heads(m, seeds, cfg.hidden, d, encoding=cfg.encoding,
                                             skip=cfg.skip, readout=readout,
                                             affine_values=cfg.affine_values))
        keys += [("dense", s) for s in seeds]
    return (parts[0] if len(parts) == 1 else ModelStack(parts)), keys


def _inputs(pool, idx, device):
    """Model inputs and (S, 3) float targets of one set of sequences."""
    return (e2data.pool_rows(pool, idx, device), torch.as_tensor(
        e2data.sequence_targets(pool, idx), dtype=torch.float32, device=device))


def _accuracy(pred: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Exact-sequence accuracy per model (M,): all three outputs within 1/2 of the targets."""
    pred = pred.view(-1, *targets.shape)
    return ((pred - targets).abs() < 0.5).all(-1).double().mean(-1)


def _validation_monitor(val: dict, train, device):
    """Scores (M, 2) of a model: accuracy over every validation sequence, training accuracy."""
    sets = [_inputs(*v, device) for v in val.values()]
    weights = [len(t) for _, t in sets]

    def monitor(model):
        v = sum(w * _accuracy(model(i), t) for w, (i, t) in zip(weights, sets)) / sum(weights)
        return torch.stack([v, _accuracy(model(train[0]), train[1])], 1)
    return monitor


# --------------------------------------------------------------------------- the unit


def train_e2_unit(cfg: E2Config, m: int, p: int, split: int, readout: str, groups,
                  dense: bool, device="cpu") -> dict:
    """The one unit function of E2: train the kernel heads of the rank `groups` and/or the
    dense heads, every seed together, on one size and split; keep each model's step with
    the best validation accuracy (``cfg.eval_every``) or the smallest training max error;
    score it on every evaluation set (none in a pilot) and the ``cfg.fit_subsets``. The
    record: per model (the study), per part (a reading), per width (a protocol)."""
    data = unit_data(cfg, m, p, split)
    model, keys = unit_models(cfg, m, p, readout, groups, dense)
    train = _inputs(*data["train"], device)
    monitor = (None if cfg.eval_every is None
               else _validation_monitor(data["val"], train, device))
    lr = cfg.lr if groups else dict(cfg.dense_lr).get(readout, cfg.lr)
    res = fit_batched(model, train[0], train[1].reshape(-1), cfg.steps, lr,
                      cfg.final_lr_fraction, cfg.surrogate_steps, 16, torch.device(device),
                      monitor=monitor, eval_every=cfg.eval_every)
    evals = {**({} if cfg.pilot else data["evals"]),
             **{f"fit/{name}": _subset(cfg.design, data["train"]) for name in cfg.fit_subsets}}
    with torch.no_grad():
        acc = {name: _accuracy(res.model(x), t).numpy()
               for name, (x, t) in ((n, _inputs(*v, device)) for n, v in evals.items())}
    if cfg.design in ARMS:
        return _study_record(data, keys, res, acc)
    parts = {"heads": [(r, s) for r in cfg.ranks for s in cfg.seeds] if groups else None,
             "dense": [("dense", s) for s in cfg.seeds] if dense else None}
    at = {key: i for i, key in enumerate(keys)}
    best = res.best_max_error.numpy()
    out = {}
    for part, order in ((k, [at[key] for key in v]) for k, v in parts.items() if v):
        shape = (len(cfg.ranks), len(cfg.seeds)) if part == "heads" else (len(cfg.seeds),)
        out[part] = {
            "m": m, "pool_size": p, "readout": readout, "which": part,
            "ranks": list(cfg.ranks) if part == "heads" else None, "seeds": list(cfg.seeds),
            "pool_train": data["pool_train"], "pool_test": data["pool_test"],
            "n_eval": {k: len(v[1]) for k, v in evals.items()},
            "accuracy": {k: a[order].reshape(shape).tolist() for k, a in acc.items()},
            "train_max_error": best[order].reshape(shape).tolist()}
    return _width_record(cfg, **out) if len(out) == 2 else next(iter(out.values()))


def _subset(design: str, train) -> tuple:
    """The study's training sequences of its witness test's kind: B, the multisets holding a
    word and its complement; A, the near-ties (some query's competitors 1 apart)."""
    pool, idx = train
    if design == "B":
        comp = e2data.complement_index(pool)
        return pool, idx[(comp[idx][:, :, None] == idx[:, None, :]).any(axis=(1, 2))]
    return pool, idx[(e2data.gaps(pool[idx]) == 1).any(axis=1)]


def _study_record(data, keys, res, acc) -> dict:
    """A study unit: per model its checkpoint, validation and training-accuracy histories and
    the accuracies read there (test/<d> as <d>; other sets under their own names)."""
    hist, steps = res.monitor_history.numpy(), res.monitor_steps.tolist()
    at = np.searchsorted(steps, res.best_step.numpy())
    fits = {k: a for k, a in acc.items() if k[:4] == "fit/"}
    models = [{
        "kind": "dense" if r == "dense" else "nka", "rank": 0 if r == "dense" else r,
        "seed": s, "best_step": int(steps[at[i]]),
        "best_max_error": round(float(res.best_max_error[i]), 6),
        "fraction_within_half": round(float(res.fraction_within_half[i]), 6),
        "val": round(float(hist[at[i], i, 0]), 6), "fit": round(float(hist[at[i], i, 1]), 6),
        "val_history": np.round(hist[:, i, 0], 6).tolist(),
        "train_history": np.round(hist[:, i, 1], 6).tolist(),
        "test": {k[5:]: round(float(a[i]), 6) for k, a in acc.items() if k[:5] == "test/"},
        **({"fit_subsets": {k[4:]: round(float(a[i]), 6) for k, a in fits.items()}}
           if fits else {})}
        for i, (r, s) in enumerate(keys)]
    sizes = {"train": len(data["train"][1]), **{f"val/{k}": len(v[1]) for k, v in
                                                data["val"].items()},
             **{k: len(v[1]) for k, v in data["evals"].items()}}
    return {"models": models, "eval_steps": steps, "sizes": sizes}


def _width_record(cfg: E2Config, heads: dict, dense: dict) -> dict:
    """A stored protocol's unit: one width's heads and dense heads, on the held-out tests."""
    h, d = heads, dense
    test = {name: h["accuracy"][f"test/{name}"] for name in cfg.tests}
    return {
        "pool_train": h["pool_train"], "pool_test": h["pool_test"], "ranks": list(cfg.ranks),
        "accuracy": test, "train_accuracy": h["accuracy"]["fit/all"],
        "train_max_error": h["train_max_error"],
        "dense": {name: d["accuracy"][f"test/{name}"] for name in cfg.tests},
        "dense_train_accuracy": d["accuracy"]["fit/all"],
        "transition_r": _transitions(cfg.ranks, test, cfg.threshold, cfg.tests)}


def _transitions(ranks, accuracy: dict, threshold: float, tests) -> dict:
    """The rule's r* of a protocol's width per test distribution."""
    return {name: curve_rule(list(ranks), accuracy[name], threshold=threshold)["r_star"]
            for name in tests}


# --------------------------------------------------------------------------- plan, files


#: The key suffix of a unit run again by the decisive study's extension rule.
EXTENDED = "/x2"


def extension_units(run: dict) -> list[str]:
    """The decisive study's registered extension rule: the first-pass units whose best
    validation step is the last evaluation for at least half of their models."""
    return [key for key, unit in sorted(run["units"].items()) if not key.endswith(EXTENDED)
            and 2 * sum(m["best_step"] == unit["eval_steps"][-1] for m in unit["models"])
            >= len(unit["models"])]


def extended(cfg: E2Config) -> E2Config:
    """An extended unit's configuration: both phases doubled, the same schedule stretched."""
    return dataclasses.replace(cfg, steps=2 * cfg.steps, surrogate_steps=2 * cfg.surrogate_steps)


def unit_plan(cfg: dict, units: dict | None = None) -> list[tuple]:
    """(key, m, P, split, readout, rank groups, dense) of every unit of a configuration (its
    stored dict): a protocol one unit per width; a reading per (part, size, readout), the
    slow heads first; the study per (size, split, group), the dense heads last (run width by
    width, the largest ranks first), and in the decisive study the extension of every stored
    unit the rule flags (key + "/x2")."""
    design, sizes, (ro, *_) = cfg["design"], [tuple(s) for s in cfg["sizes"]], cfg["readouts"]
    groups, split = tuple(map(tuple, cfg["rank_groups"])), cfg["splits"][0]
    if design == "tokens":
        return [(f"m{m}", m, p, split, ro, groups, True) for m, p in sizes]
    if design in ARMS:
        plan = [(f"{design}{m}/split{s}/" + ("dense" if g is None else "r" + "-".join(map(
            str, g))), m, p, s, ro, () if g is None else (g,), g is None)
            for m, p in sizes for s in cfg["splits"] for g in (*groups, None)]
        flagged = set(extension_units({"units": units})) if units and "complement" in \
            cfg["tests"] else set()
        return plan + [(key + EXTENDED, *unit) for key, *unit in plan if key in flagged]
    return [(f"m{m}-P{p}/{r}/{which}", m, p, split, r, groups if which == "heads" else (),
             which == "dense")
            for which in ("heads", "dense") for m, p in sizes for r in cfg["readouts"]]


_STUDY_FIELDS = {"models": records({
    **RECORD_FIELDS, "best_step": COUNTS, "val": SHARES, "fit": SHARES, "val_history": SHARES,
    "train_history": SHARES, "test": numbers(0, 1, empty=True)}), "eval_steps": COUNTS,
    "sizes": COUNTS, **RUN_FIELDS}
_PART_FIELDS = {"accuracy": SHARES, "train_max_error": ERRORS, "seeds": COUNTS,
                "n_eval": COUNTS, **RUN_FIELDS}
_WIDTH_FIELDS = {"accuracy": SHARES, "train_accuracy": SHARES, "dense": SHARES,
                 "dense_train_accuracy": SHARES, "train_max_error": ERRORS, "ranks": COUNTS,
                 **RUN_FIELDS}


def _fields(design: str) -> dict:
    """What every unit of a design holds (checked when its file is resumed or loaded)."""
    return (_STUDY_FIELDS if design in ARMS else _WIDTH_FIELDS if design == "tokens"
            else _PART_FIELDS)


def _units(cfg: E2Config, device: str, stored: dict | None = None) -> list[Unit]:
    return [Unit(key, train_e2_unit, (extended(cfg) if key.endswith(EXTENDED) else cfg, *unit,
                                      device), device=device)
            for key, *unit in unit_plan(config_dict(cfg), stored)]


def _stored(cfg: E2Config, out, restart: bool) -> dict:
    """The units `out` already stores for `cfg` (the plan's extensions are read from them)."""
    if out is None or restart or not Path(out).is_file():
        return {}
    run = load_e2(out)
    return run["units"] if run["config_hash"] == config_hash(config_dict(cfg)) else {}


def _with_result(run: dict) -> dict:
    """A stored run and, once complete, what its units make: a protocol's "widths" (its
    older files: one "sweep" unit), a reading's "sizes"; the rule's r* recomputed."""
    cfg, units = run["config"], run["units"]
    plan = unit_plan(cfg)

    def unit(key):
        return {k: v for k, v in units[key].items() if k not in ("wall_time", "environment",
                                                                  "cpu_seconds")}

    if cfg["design"] == "tokens" and ("sweep" in units or all(k in units for k, *_ in plan)):
        widths = ({m: dict(e) for m, e in units["sweep"]["widths"].items()} if "sweep" in units
                  else {str(m): unit(key) for key, m, *_ in plan})
        for e in widths.values():  # one definition: the rule's r*, also for older files
            e["transition_r"] = _transitions(e["ranks"], e["accuracy"], cfg["threshold"],
                                             cfg["tests"])
        return {**run, "widths": {str(m): widths[str(m)] for m, _ in cfg["sizes"]}}
    if cfg["design"] in READINGS and all(k in units for k, *_ in plan):
        return {**run, "sizes": {f"m{m}-P{p}": {ro: {w: unit(f"m{m}-P{p}/{ro}/{w}")
                                                     for w in ("heads", "dense")}
                                                for ro in cfg["readouts"]}
                                 for m, p in cfg["sizes"]}}
    return run


def run_e2(cfg: E2Config, out=None, device="cpu", progress=False, restart=False,
           scheduler: str | None = None, threads: int = 1) -> dict:
    """Run (or resume) a configuration, each unit stored in ``out`` as it finishes: the sweep
    ``{"config", "config_hash", "units"}`` and, once complete, its result ("widths": a stored
    protocol's per width; "sizes": a reading's per size, readout and part)."""
    cfg = check_instance(cfg, "cfg", E2Config)
    device = str(check_device(device))
    run = partial(run_sweep, cfg, out=out, scheduler=scheduler, threads=threads,
                  progress=progress, fields=_fields(cfg.design))
    stored, first = _stored(cfg, out, restart), True
    # an arm's study runs width by width, each width's extensions right after the pass that
    # flags them: a stopped run leaves whole widths behind, the ones a chapter can show. The
    # largest ranks start first (the order changes no result): the pass ends on short units
    for width in [m for m, _ in cfg.sizes] if cfg.design in ARMS else [None]:
        for _ in ("first pass", "the units it flagged for the extension rule"):
            units = sorted((u for u in _units(cfg, device, stored)
                            if width is None or u.args[1] <= width or u.key in stored),
                           key=lambda u: -max(u.args[5][0]) if u.args[5] else 0)
            done = run(units if out is not None else [u for u in units if u.key not in stored],
                       restart=restart and first)
            stored, first = {**stored, **done["units"]}, False
    return _with_result({"config": done["config"], "config_hash": done["config_hash"],
                         "units": stored})


def load_e2(path) -> dict:
    """A stored E2 results file as :func:`run_e2` returns it, checked for sense: its
    configuration an E2 one, its hash that configuration's, every unit planned by it and
    holding its fields."""
    data = read_json_file(path, "E2 results file")
    where = f"path {str(path)!r}"
    try:
        ok = config_dict(E2Config(**data["config"])) == data["config"]
    except (KeyError, TypeError, ValueError) as exc:
        raise ResultFileError(f"{where} is not an E2 results file: its configuration is not "
                              f"an E2Config ({str(exc):.120})") from None
    if not ok:
        raise ResultFileError(f"{where}: its configuration is not in normal form")
    if data["config"]["design"] == "tokens" and set(data.get("units", ())) == {"sweep"}:
        return _with_result(check_units(where, data, {"widths": dict}))
    fields = _fields(data["config"]["design"])
    check_units(where, data, fields)  # every unit sound before the plan reads them
    return _with_result(check_units(where, data, fields,
                                    {k for k, *_ in unit_plan(data["config"], data["units"])}))


def e2_path(folder, cfg: E2Config, mode: str = "full") -> Path:
    """Where a configuration's results live under `folder` (results/): a stored protocol's
    e2_protocols/<mode>.json (mode: its name; the modes quick, smoke, full: e2_<mode>.json),
    a reading's e2_<design>_<mode>.json, the study's e2_study/e2_study_<arm>_<kind>.json (the
    decisive study's e2_study/e2_decisive_<arm>_<kind>.json) and a pilot run's
    e2_study/e2_pilot_<arm>_<kind>_lr<lr>_steps<steps>.json."""
    folder, cfg = check_path(folder, "folder"), check_instance(cfg, "cfg", E2Config)
    if not isinstance(mode, str) or not mode.replace("_", "").isalnum():
        raise ValueError(f"mode must be a non-empty identifier (letters, digits, _), got "
                         f"{mode!r:.40}")
    if cfg.design in ARMS:
        return folder / "e2_study" / (
            f"e2_pilot_{cfg.design}_{cfg.kind}_lr{cfg.lr:g}_steps{cfg.steps}.json" if cfg.pilot
            else f"e2_{'decisive' if 'complement' in cfg.tests else 'study'}_{cfg.design}_"
            f"{cfg.kind}.json")
    if cfg.design == "tokens":
        return folder / (f"e2_{mode}.json" if mode in ("quick", "smoke", "full")
                         else f"e2_protocols/{mode}.json")
    return folder / f"e2_{cfg.design}_{mode}.json"


def load_e2_protocols(folder="results/e2_protocols") -> dict:
    """Every complete stored protocol under `folder`: {name: its load_e2 result}, by name."""
    return {path.stem: res for path in sorted(check_path(folder, "folder").glob("*.json"))
            if "widths" in (res := load_e2(path))}


def study_files(folder) -> dict:
    """Every stored study and pilot file under `folder`: {"study": {(arm, kind): run},
    "pilot": {(arm, kind): [runs]}} (chapter 7 reads the committed results/e2_study)."""
    out: dict = {"study": {}, "pilot": {}}
    for path in sorted(check_path(folder, "folder").glob("e2_*_*.json")):
        if path.name.startswith(("e2_study_", "e2_pilot_")) and "summary" not in path.name:
            run = load_e2(path)
            key = (run["config"]["design"], E2Config(**run["config"]).kind)
            if run["config"]["pilot"]:
                out["pilot"].setdefault(key, []).append(run)
            else:
                out["study"][key] = run
    return out


def study_complete(run: dict) -> bool:
    """Whether a stored study file holds every unit of its configuration."""
    return all(key in run["units"] for key, *_ in unit_plan(run["config"], run["units"]))


def complete_sizes(run: dict) -> list[int]:
    """The sizes m of a (possibly partial) study file whose every unit is stored."""
    plan = unit_plan(run["config"], run["units"])
    return [m for m, _ in run["config"]["sizes"]
            if all(key in run["units"] for key, s, *_ in plan if s == m)]


def e2_live_result(config: E2Config, width: int = E2_LIVE["width"], ranks=E2_LIVE["ranks"],
                   seeds=E2_LIVE["seeds"], device="cpu") -> dict:
    """Train ``ranks`` x ``seeds`` (of one rank group of a stored protocol, with its largest:
    the sweep's padding) and the dense heads of ``seeds`` at one width: the width's record."""
    cfg = check_instance(config, "config", E2Config)
    ranks = check_int_sequence(ranks, "ranks", 1)
    groups = [g for g in cfg.rank_groups if set(ranks) <= set(g)]
    if cfg.design != "tokens" or check_int(width, "width") not in cfg.widths or not groups:
        raise ValueError(f"width, ranks: the width must be one of {cfg.widths} of a stored "
                         f"protocol and the ranks lie in one rank group of "
                         f"{[list(g) for g in cfg.rank_groups]}; got {width}, {list(ranks)}")
    if max(ranks) != max(groups[0]):
        raise ValueError(f"ranks must include their group's largest rank {max(groups[0])} "
                         f"(the sweep's padding), got {list(ranks)}")
    pool = cfg.pool_sizes[cfg.widths.index(width)]
    live = dataclasses.replace(cfg, sizes=((width, pool),), ranks=ranks, rank_groups=(ranks,),
                               seeds=check_int_sequence(seeds, "seeds", 0))
    return train_e2_unit(live, width, pool, live.splits[0], live.readouts[0], live.rank_groups,
                         True, str(check_device(device)))
