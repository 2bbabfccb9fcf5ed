"""The converged E2 study (chapter 7), as pre-registered in book/e2_preregistration.md.

Arm A, unseen tokens: the whole cube {0,1}^m, complementary pairs hashed to train /
validation / test (60 / 20 / 20), exp-affine or one-hidden-layer MLP features. Arm B, code
pools: the 2(n - 1) non-constant Sylvester-Hadamard rows of order n and their complements,
the multisets of three words hashed to train / validation / test (70 / 10 / 20), table maps
with the overlap or a learned readout. One results file per (arm, kind); every checkpoint is
the step with the best validation accuracy; replicates are seeds x data splits; r* comes with
bootstrap intervals and two sharpness rules, and each curve family gets the registered verdict.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from companion.book import BOOK_COLORS, BOOK_MARKERS, Table
from companion.checks import (
    check_choice,
    check_device,
    check_float,
    check_instance,
    check_int,
    check_path,
)
from companion.core.task import all_tokens, min_ip_targets
from companion.experiments import heads
from companion.experiments.e2.data import (
    draw_triples,
    multiset_codes,
    pool_inputs,
    unit_hash,
)
from companion.experiments.e2.rule import PAPER_TRANSITIONS, RULE_DENSE_EXACT, curve_rule
from companion.experiments.engine import train_batched
from companion.experiments.sweep import FrozenConfig, Unit, load_sweep, run_sweep

__all__ = ["ARMS", "TAUS", "HEADLINES", "StudyConfig", "STUDY", "PILOT_GRID", "PILOT_CHOICE",
           "SIZES", "planned_units", "pilot_configs",
           "run_study", "study_path", "load_study", "study_complete", "pilot_choice",
           "study_summary", "study_files", "status_table", "pilot_table", "complete_sizes",
           "plot_study", "size_table", "gap_table", "verdict_table"]

#: Each arm's model kinds and what its problem size is.
ARMS = {"A": ("exp-affine", "mlp"), "B": ("overlap", "learned")}
TAUS = (0.85, 0.9, 0.95)
#: Decided before any run: the curve family each arm's verdict is read from (kind, test).
HEADLINES = {"A": ("exp-affine", "uniform"), "B": ("overlap", "witness")}
#: Held-out distributions: A's uniform and near-tie ("witness": a query's competitors differ
#: in overlap by 1) triples; B's held-out multisets, all and those with a complementary pair.
TESTS = ("uniform", "witness")
_SHARES = {"A": (0.6, 0.8), "B": (0.7, 0.8)}  # cumulative train, validation shares
_RANKS = tuple(2**k for k in range(11))
_GROUPS = ((1, 2, 4, 8, 16), (32, 64), (128,), (256,), (512,), (1024,))


@dataclass(frozen=True)
class StudyConfig(FrozenConfig):
    """One (arm, kind) of the study: sizes (A: widths m; B: Sylvester orders n, P = 2n - 2),
    ranks in groups (one unit each), seeds x splits, the optimiser the pilot fixed
    (``dense_lr`` None: ``lr``), validation every ``eval_every`` steps; ``pilot`` reads no test."""

    arm: str = "A"
    kind: str = "exp-affine"
    sizes: tuple[int, ...] = (6, 8, 10, 12)
    ranks: tuple[int, ...] = _RANKS
    rank_groups: tuple[tuple[int, ...], ...] = _GROUPS
    seeds: tuple[int, ...] = (0, 1, 2)
    splits: tuple[int, ...] = (0, 1, 2)
    n_train: int = 20000
    n_eval: int = 4000
    steps: int = 2000
    lr: float = 0.01
    surrogate_steps: int = 0
    dense_lr: float | None = None
    final_lr_fraction: float = 0.02
    eval_every: int = 100
    hidden: tuple[int, ...] = (64,)
    value_dim: int = 16
    pilot: bool = False

    def __post_init__(self):
        check_choice(self.arm, "arm", tuple(ARMS))
        check_choice(self.kind, "kind", ARMS[self.arm])
        top = 12 if self.arm == "A" else 64
        for name, low, high in (("sizes", 2, top), ("ranks", 1, 4096), ("seeds", 0, 2**32 - 1),
                                ("splits", 0, 2**32 - 1), ("hidden", 1, 4096)):
            value = getattr(self, name)
            if not isinstance(value, (list, tuple)) or not (value or name == "hidden"):
                raise TypeError(f"{name} must be a non-empty tuple of ints, got {value!r:.80}")
            self._put(name, tuple(check_int(v, f"{name}[{i}]", low, high)
                                  for i, v in enumerate(value)))
        if self.arm == "B" and any(n & (n - 1) or n < 8 for n in self.sizes):
            raise ValueError(f"sizes: arm B's Sylvester orders are powers of two >= 8, got "
                             f"{self.sizes}")
        if list(self.ranks) != sorted(set(self.ranks)):
            raise ValueError(f"ranks must be strictly increasing, got {self.ranks}")
        if not (isinstance(self.rank_groups, (list, tuple))
                and all(isinstance(g, (list, tuple)) for g in self.rank_groups)):
            raise TypeError(f"rank_groups must be a tuple of tuples of ranks, got "
                            f"{self.rank_groups!r:.80}")
        groups = tuple(tuple(check_int(r, "rank_groups", 1) for r in g) for g in
                       self.rank_groups)
        if sorted(r for g in groups for r in g) != list(self.ranks) or not all(groups):
            raise ValueError("rank_groups must partition ranks (every rank exactly once)")
        self._put("rank_groups", groups)
        for name, high in (("n_train", 10**5), ("n_eval", 10**5), ("value_dim", 1024)):
            self._put(name, check_int(getattr(self, name), name, 1, high))
        self._put("steps", check_int(self.steps, "steps", 1, 100_000))
        self._put("surrogate_steps", check_int(self.surrogate_steps, "surrogate_steps", 0,
                                               100_000))
        self._put("eval_every", check_int(self.eval_every, "eval_every", 1, 100_000))
        if self.dense_lr is not None:
            self._put("dense_lr", check_float(self.dense_lr, "dense_lr", 0, 10, low_open=True))
        if not isinstance(self.pilot, bool):
            raise TypeError(f"pilot must be a bool, got {type(self.pilot).__name__}")
        self._check_schedule()


# ----------------------------------------------------------------------------- data


def _sylvester_code(n: int) -> np.ndarray:
    """The n - 1 non-constant rows of the order-n Sylvester-Hadamard matrix as 0/1 words,
    then their complements: (2n - 2, n); distinct words overlap in n/4, complements in 0."""
    h = np.ones((1, 1), dtype=np.int64)
    while len(h) < n:
        h = np.block([[h, h], [h, -h]])
    rows = (h[1:] > 0).astype(np.int64)
    return np.concatenate([rows, 1 - rows])


def _sides(keys: np.ndarray, arm: str, split: int, salt: int) -> np.ndarray:
    """0 train, 1 validation, 2 test for each key, by a seeded hash of the key."""
    u = unit_hash(keys, int(np.random.SeedSequence([split, salt, 27]).generate_state(1)[0]))
    first, second = _SHARES[arm]
    return (u >= first).astype(np.int64) + (u >= second)


def study_data(arm: str, size: int, split: int, n_train: int = 20000,
               n_eval: int = 4000) -> dict:
    """One size and split: {"train": (pool, idx), "val": {name: (pool, idx)}, "test": {...}}
    with idx (S, 3) indices into pool. A: one pool per side, uniform and near-tie triples;
    B: the Sylvester pool, every multiset of three words once (held out: all, with a pair)."""
    check_choice(arm, "arm", tuple(ARMS))
    size = check_int(size, "size", 2, 12 if arm == "A" else 64)
    split = check_int(split, "split", 0, 2**32 - 1)
    n_train, n_eval = check_int(n_train, "n_train", 1, 10**5), check_int(n_eval, "n_eval", 1,
                                                                           10**5)
    if arm == "A":
        tokens = all_tokens(size)
        codes = np.arange(2**size, dtype=np.int64)
        side = _sides(np.minimum(codes, codes ^ (2**size - 1)), arm, split, size)
        pools = [tokens[side == k] for k in range(3)]
        if min(len(p) for p in pools) < 4:
            raise ValueError(f"size: width {size} leaves a side with fewer than 4 tokens")
        rngs = [np.random.default_rng(s) for s in np.random.SeedSequence([split, size, 1]).spawn(5)]
        grams = [p @ p.T for p in pools]
        draw = [(pools[k], draw_triples(name, pools[k], count, rngs[i], grams[k]))
                for i, (k, name, count) in enumerate(
                    [(0, "uniform", n_train), (1, "uniform", n_eval), (1, "gap1", n_eval),
                     (2, "uniform", n_eval), (2, "gap1", n_eval)])]
        return {"train": draw[0], "val": dict(zip(TESTS, draw[1:3])),
                "test": dict(zip(TESTS, draw[3:5]))}
    if size & (size - 1) or size < 8:
        raise ValueError(f"size: arm B's Sylvester order is a power of two >= 8, got {size}")
    pool = _sylvester_code(size)
    p = len(pool)
    idx = np.array(list(itertools.combinations_with_replacement(range(p), 3)), dtype=np.int64)
    side = _sides(multiset_codes(idx, p), arm, split, size)
    comp = (idx[:, :, None] % (p // 2) == idx[:, None, :] % (p // 2)) & (
        idx[:, :, None] != idx[:, None, :])  # word i's complement is word i + P/2
    pair = comp.any(axis=(1, 2))
    return {"train": (pool, idx[side == 0]), "val": {"uniform": (pool, idx[side == 1])},
            "test": {"uniform": (pool, idx[side == 2]), "witness": (pool, idx[(side == 2) & pair])}}


# ----------------------------------------------------------------------------- units


def _models(cfg: StudyConfig, size: int, group):
    """The stacked models of one unit and a (kind, rank, seed) label per model."""
    seeds = list(cfg.seeds)
    if cfg.arm == "A":
        hidden = () if cfg.kind == "exp-affine" else cfg.hidden
        if group == "dense":
            return (heads.mlp_softmax_heads(size, seeds, hidden, cfg.value_dim,
                                            affine_values=bool(hidden)),
                    [("dense", 0, s) for s in seeds])
        labels = [("nka", r, s) for r in group for s in seeds]
        return (heads.mlp_kernel_heads(size, [r for _, r, _ in labels], seeds * len(group),
                                       hidden, cfg.value_dim, affine_values=bool(hidden)),
                labels)
    p, d = 2 * size - 2, max(cfg.value_dim, 2 * size - 2)  # values at least P wide
    if group == "dense":
        return (heads.pool_softmax_heads(p, seeds, size, cfg.kind, d),
                [("dense", 0, s) for s in seeds])
    labels = [("nka", r, s) for r in group for s in seeds]
    return (heads.pool_kernel_heads(p, [r for _, r, _ in labels], seeds * len(group), cfg.kind,
                                    d), labels)


def _inputs(pool, idx, device):
    """Model inputs and (S, 3) float targets of one set of sequences."""
    return (pool_inputs(pool, idx, device),
            torch.as_tensor(min_ip_targets(pool[idx]), dtype=torch.float32, device=device))


def _accuracy(model, inputs, targets) -> torch.Tensor:
    """Exact-sequence accuracy per model (M,): all three outputs within 1/2 of the targets."""
    pred = model(inputs).view(-1, *targets.shape)
    return ((pred - targets).abs() < 0.5).all(-1).double().mean(-1)


def train_study_unit(cfg: StudyConfig, size: int, split: int, group, device="cpu") -> dict:
    """Train one unit's models (a rank group or "dense", all seeds) on one size and split,
    the checkpoint chosen on validation; per model the validation and training-accuracy
    histories, and (not in a pilot) test accuracy read once, at the checkpoint."""
    data = study_data(cfg.arm, size, split, cfg.n_train, cfg.n_eval)
    model, labels = _models(cfg, size, group)
    train_in, train_t = _inputs(*data["train"], device)
    val = [_inputs(*v, device) for v in data["val"].values()]
    weights = [len(t) for _, t in val]

    def monitor(m):  # validation accuracy over every validation sequence, training accuracy
        v = sum(w * _accuracy(m, i, t) for w, (i, t) in zip(weights, val)) / sum(weights)
        return torch.stack([v, _accuracy(m, train_in, train_t)], 1)

    lr = cfg.dense_lr if group == "dense" and cfg.dense_lr is not None else cfg.lr
    res = train_batched(model, train_in, train_t.reshape(-1), steps=cfg.steps, lr=lr,
                        final_lr_fraction=cfg.final_lr_fraction,
                        surrogate_steps=cfg.surrogate_steps, device=device, monitor=monitor,
                        eval_every=cfg.eval_every)
    hist = res.monitor_history.numpy()
    steps = res.monitor_steps.tolist()
    with torch.no_grad():
        tests = {} if cfg.pilot else {
            name: _accuracy(res.model, *_inputs(*v, device)).tolist()
            for name, v in data["test"].items()}
    at = np.searchsorted(steps, res.best_step.numpy())
    models = []
    for i, (kind, rank, seed) in enumerate(labels):
        models.append({
            "kind": kind, "rank": rank, "seed": seed, "best_step": int(steps[at[i]]),
            "best_max_error": round(float(res.best_max_error[i]), 6),
            "fraction_within_half": round(float(res.fraction_within_half[i]), 6),
            "val": round(float(hist[at[i], i, 0]), 6), "fit": round(float(hist[at[i], i, 1]), 6),
            "val_history": np.round(hist[:, i, 0], 6).tolist(),
            "train_history": np.round(hist[:, i, 1], 6).tolist(),
            "test": {name: round(acc[i], 6) for name, acc in tests.items()}})
    return {"models": models, "eval_steps": steps,
            "sizes": {name: len(idx) for name, (_, idx) in
                      [("train", data["train"]), *[(f"val/{k}", v) for k, v in data["val"].items()],
                       *[(f"test/{k}", v) for k, v in data["test"].items()]]}}


def _plan(cfg: dict) -> list[tuple]:
    """(key, size, split, group) of every unit: per size (the cheap small ones first), split
    and group of ranks, the dense heads last."""
    return [(f"{cfg['arm']}{size}/split{split}/" + ("dense" if g == "dense" else
                                                    "r" + "-".join(map(str, g))), size, split, g)
            for size in cfg["sizes"] for split in cfg["splits"]
            for g in (*map(tuple, cfg["rank_groups"]), "dense")]


def _units(cfg: StudyConfig, device: str) -> list[Unit]:
    return [Unit(key, train_study_unit, (cfg, size, split, g, device), device=device)
            for key, size, split, g in _plan(dataclasses.asdict(cfg))]


def study_complete(run: dict) -> bool:
    """Whether a stored study file holds every unit of its configuration."""
    return all(key in run["units"] for key, *_ in _plan(run["config"]))


def study_path(out_dir, cfg: StudyConfig) -> Path:
    """A configuration's results file: out_dir/e2_study_<arm>_<kind>.json, or for a pilot
    e2_pilot_<arm>_<kind>_lr<lr>_steps<steps>.json."""
    cfg = check_instance(cfg, "cfg", StudyConfig)
    out_dir = check_path(out_dir, "out_dir")
    name = (f"e2_pilot_{cfg.arm}_{cfg.kind}_lr{cfg.lr:g}_steps{cfg.steps}" if cfg.pilot
            else f"e2_study_{cfg.arm}_{cfg.kind}")
    return out_dir / f"{name}.json"


def run_study(cfg: StudyConfig, out=None, device="cpu", progress=False, restart=False,
              scheduler: str | None = None, threads: int = 1) -> dict:
    """Run (or resume) one (arm, kind) of the study or of its pilot; each unit is stored in
    ``out`` as it finishes. Returns the sweep ``{"config", "config_hash", "units"}``."""
    cfg = check_instance(cfg, "cfg", StudyConfig)
    device = check_device(device)
    done = run_sweep(cfg, _units(cfg, str(device)), out=out, restart=restart,
                     scheduler=scheduler, threads=threads, progress=progress)
    return {k: done[k] for k in ("config", "config_hash", "units")}


def load_study(path) -> dict:
    """A stored study or pilot file (every unit's schema checked)."""
    data = load_sweep(path, "E2 study file")
    if not isinstance(data.get("config"), dict) or data["config"].get("arm") not in ARMS:
        raise ValueError(f"path {str(path)!r} is not an E2 study file (its config has no arm)")
    return data


# ----------------------------------------------------------------------------- the pilot

#: The pilot's grid (the pre-registration): learning rates x MSE steps; each run ends in
#: E1's surrogate phase, and "surrogate off" is read from its validation history up to the
#: end of the MSE phase (the same trajectory as a run without it).
PILOT_GRID = {"lr": (3e-3, 1e-2, 3e-2), "steps": (2000, 5000), "surrogate_steps": 2000}
_PILOT_SIZES = {"A": (8, 10), "B": (16, 32)}


def pilot_configs(arm: str, kind: str) -> list[StudyConfig]:
    """The pilot's runs of one (arm, kind): the middle sizes (B: the two larger pools),
    ranks 16 and 256 and the dense heads, two seeds, one split; each grid point a config."""
    check_choice(arm, "arm", tuple(ARMS))
    check_choice(kind, "kind", ARMS[arm])
    return [StudyConfig(arm=arm, kind=kind, sizes=_PILOT_SIZES[arm], ranks=(16, 256),
                        rank_groups=((16,), (256,)), seeds=(0, 1), splits=(0,), steps=steps,
                        lr=lr, surrogate_steps=PILOT_GRID["surrogate_steps"], pilot=True)
            for lr in PILOT_GRID["lr"] for steps in PILOT_GRID["steps"]]


def _best_val(unit: dict, model: dict, until: int | None) -> float:
    """A model's best validation accuracy at evaluations up to step `until` (None: all)."""
    return max(v for s, v in zip(unit["eval_steps"], model["val_history"])
               if until is None or s <= until)


#: Medians of validation accuracy this close count as a tie (then fewer steps, no surrogate).
PILOT_TIE = 0.005


def pilot_choice(runs) -> dict:
    """The registered choice from a (arm, kind)'s pilot runs (stored files, loaded): for the
    heads and for the dense heads the (lr, steps, surrogate) with the highest median best
    validation accuracy, ties (within PILOT_TIE) to fewer steps, then no surrogate phase; the
    dense heads keep the heads' steps and surrogate and choose their own lr. Every option's
    median is listed."""
    options = []
    for run in runs:
        cfg = run["config"]
        for surrogate in (False, True):
            until = None if surrogate else cfg["steps"]
            val = {"nka": [], "dense": []}
            for unit in run["units"].values():
                for model in unit["models"]:
                    val["dense" if model["kind"] == "dense" else "nka"].append(
                        _best_val(unit, model, until))
            options.append({"lr": cfg["lr"], "steps": cfg["steps"], "surrogate": surrogate,
                            "median_val": float(np.median(val["nka"])),
                            "median_val_dense": float(np.median(val["dense"]))})
    if not options:
        raise ValueError("runs must hold at least one pilot run")

    def pick(pool, key):
        top = max(o[key] for o in pool)
        tied = [o for o in pool if o[key] >= top - PILOT_TIE]
        return min(tied, key=lambda o: (o["steps"], o["surrogate"], -o[key]))

    heads_pick = pick(options, "median_val")
    same = [o for o in options if (o["steps"], o["surrogate"]) ==
            (heads_pick["steps"], heads_pick["surrogate"])]
    dense_pick = pick(same, "median_val_dense")
    return {"lr": heads_pick["lr"], "steps": heads_pick["steps"],
            "surrogate_steps": PILOT_GRID["surrogate_steps"] if heads_pick["surrogate"] else 0,
            "dense_lr": dense_pick["lr"], "options": options}


# ----------------------------------------------------------------------------- the analysis


def bootstrap_interval(ranks, acc, tau: float, resamples: int = 2000, seed: int = 0,
                       level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of log2 r*_tau (the stay-above rank of the median curve) over
    bootstrap resamples of whole replicates (the columns of acc (R, n)); a resample with no
    r* counts as log2(max rank) + 1, "above the grid"."""
    a = np.asarray(acc, dtype=np.float64)
    logs = np.log2(np.asarray(ranks, dtype=np.float64))
    pick = np.random.default_rng(seed).integers(0, a.shape[1], size=(resamples, a.shape[1]))
    med = np.median(a[:, pick], axis=-1)  # (R, resamples)
    below = med < tau
    # the first rank after the last one below tau; len(ranks) when the top rank is below
    last = np.where(below.any(0), len(ranks) - 1 - np.argmax(below[::-1], axis=0), -1)
    star = np.append(logs, logs[-1] + 1)[last + 1]
    tail = (1 - level) / 2
    return (float(np.quantile(star, tail, method="lower")),
            float(np.quantile(star, 1 - tail, method="higher")))


def relative_width(ranks, curve) -> float | None:
    """Doublings the running maximum of a curve takes from 10 % to 90 % of its own range
    (min to max): log2(r90 / r10), r10 the last rank at most 10 %, r90 the first at least
    90 %; None when the range is 0 or no rank lies at or below 10 %."""
    env = np.maximum.accumulate(np.asarray(curve, dtype=np.float64))
    lo, hi = float(np.min(curve)), float(np.max(curve))
    if hi <= lo:
        return None
    low = np.flatnonzero(env <= lo + 0.1 * (hi - lo))
    high = np.flatnonzero(env >= lo + 0.9 * (hi - lo))
    return float(np.log2(ranks[high[0]] / ranks[low[-1]])) if len(low) else None


def _replicates(run: dict, size: int):
    """Per rank (and dense) of one size, the models' records in (split, seed) order."""
    out: dict = {}
    for key in sorted(run["units"]):
        if key.split("/")[0][1:] == str(size):
            for rec in run["units"][key]["models"]:
                out.setdefault(rec["rank"] if rec["kind"] == "nka" else "dense",
                               []).append((key.split("/")[1], rec["seed"], rec,
                                           run["units"][key]["eval_steps"]))
    return {k: [r[2:] for r in sorted(v, key=lambda r: r[:2])] for k, v in out.items()}


def _size_line(run: dict, size: int, test: str) -> dict:
    cfg = run["config"]
    ranks = cfg["ranks"]
    reps = _replicates(run, size)
    acc = np.array([[rec["test"][test] for rec, _ in reps[r]] for r in ranks])
    fit = np.median([[rec["fit"] for rec, _ in reps[r]] for r in ranks], axis=1)
    total = cfg["steps"] + cfg["surrogate_steps"]

    def train_at(rec, steps, fraction):  # training accuracy at the first evaluation >= f total
        return rec["train_history"][int(np.searchsorted(steps, fraction * total))]

    last = np.median([[train_at(rec, s, 1.0) for rec, s in reps[r]] for r in ranks], axis=1)
    late = np.median([[train_at(rec, s, 0.8) for rec, s in reps[r]] for r in ranks], axis=1)
    med = np.median(acc, axis=1)
    rule = curve_rule(ranks, acc, threshold=0.9)
    dense = [rec["test"][test] for rec, _ in reps["dense"]]
    return {
        "size": size, "replicates": int(acc.shape[1]), "median": med.round(6).tolist(),
        "fit_median": fit.round(6).tolist(), "train_last": last.round(6).tolist(),
        "converged": (np.abs(last - late) < 0.005).tolist(),
        "capacity": (1 - fit).round(6).tolist(), "generalisation": (fit - med).round(6).tolist(),
        "r_star": {str(t): curve_rule(ranks, acc, threshold=t)["r_star"] for t in TAUS},
        "interval_log2": {str(t): bootstrap_interval(ranks, acc, t) for t in TAUS},
        "sharp_absolute": rule["sharp"], "r50": rule["r50"],
        "relative_width": relative_width(ranks, med),
        "dense": dense, "dense_exact": bool(min(dense) >= RULE_DENSE_EXACT)}


def _verdict(lines: list[dict]) -> tuple[str, str]:
    """The registered verdict of one curve family (its lines by increasing size)."""
    unfit = [s["size"] for s in lines if s["train_last"][-1] < 0.99]
    if len(unfit) >= 2:
        return "inconclusive", f"the top rank does not fit its training set at sizes {unfit}"
    ci = [s["interval_log2"]["0.9"] for s in lines]
    stars = all(s["r_star"]["0.9"] is not None for s in lines)
    moves = ci[0][1] < ci[-1][0]
    dense = all(s["dense_exact"] for s in lines)
    rel = [s["relative_width"] is not None and s["relative_width"] <= 1 for s in lines]
    if stars and moves and dense and all(s["sharp_absolute"] for s in lines):
        return "reproduced", "r* at every size, sharp, moving, dense exact"
    if stars and moves and dense and all(rel):
        return "reproduced with our sizes", "r* at every size, sharp by the relative rule, moving"
    if len(rel) - sum(rel) >= 2:
        return "refuted at convergence", "no sharp transition (relative rule) at " \
            f"{len(rel) - sum(rel)} sizes"
    if max(c[0] for c in ci) <= min(c[1] for c in ci):
        return "refuted at convergence", "the r* intervals of all sizes overlap: it does not move"
    if not dense:
        return "refuted at convergence", "dense attention is not exact at every size"
    return "inconclusive", ("no r* at every size" if not stars else
                            "r* intervals neither separate nor all overlap")


def study_summary(runs: dict) -> dict:
    """results/e2_study_summary.json from the complete study files {"A_exp-affine": run,
    ...}: per arm, kind and test the per-size lines, the verdict and the reason; the headline
    family of each arm (:data:`HEADLINES`) named; the paper's reported steps beside them."""
    out = {"taus": list(TAUS), "dense_exact_level": RULE_DENSE_EXACT,
           "paper_transitions": list(PAPER_TRANSITIONS),
           "headlines": {a: list(h) for a, h in HEADLINES.items()}, "arms": {}}
    for run in runs.values():
        cfg = run["config"]
        fam = out["arms"].setdefault(cfg["arm"], {}).setdefault(cfg["kind"], {})
        tests = {t for u in run["units"].values() for m in u["models"] for t in m["test"]}
        for test in [t for t in TESTS if t in tests]:
            lines = [_size_line(run, size, test) for size in cfg["sizes"]]
            verdict, reason = _verdict(lines)
            fam[test] = {"ranks": cfg["ranks"], "per_size": lines, "verdict": verdict,
                         "reason": reason, "config_hash": run["config_hash"]}
    return out


#: The pilot's registered choices, (arm, kind) -> optimiser, committed with the "Pilot
#: outcome" of book/e2_preregistration.md before any full run of that (arm, kind).
PILOT_CHOICE: dict = {
    ("B", "overlap"): {"lr": 0.03, "steps": 2000, "surrogate_steps": 0, "dense_lr": 0.01},
    ("B", "learned"): {"lr": 0.03, "steps": 2000, "surrogate_steps": 2000, "dense_lr": 0.01},
    ("A", "exp-affine"): {"lr": 0.01, "steps": 2000, "surrogate_steps": 2000,
                          "dense_lr": 0.003},
    ("A", "mlp"): {"lr": 0.003, "steps": 2000, "surrogate_steps": 2000, "dense_lr": 0.003},
}
SIZES = {"A": (6, 8, 10, 12), "B": (8, 16, 32)}
#: The study: one configuration per (arm, kind) whose pilot choice is committed.
STUDY = {(arm, kind): StudyConfig(arm=arm, kind=kind, sizes=SIZES[arm], **choice)
         for (arm, kind), choice in PILOT_CHOICE.items()}


def planned_units(arm: str, kind: str) -> int:
    """How many units the study of (arm, kind) has (the optimiser does not change it)."""
    arm = check_choice(arm, "arm", tuple(ARMS))
    return len(_plan(dataclasses.asdict(StudyConfig(arm=arm, kind=kind, sizes=SIZES[arm]))))


# ----------------------------------------------------------------------------- the chapter


def study_files(folder) -> dict:
    """Every stored study and pilot file under `folder`: {"study": {(arm, kind): run},
    "pilot": {(arm, kind): [runs]}} (chapter 7 reads the committed results/e2_study)."""
    out: dict = {"study": {}, "pilot": {}}
    for path in sorted(check_path(folder, "folder").glob("e2_*_*.json")):
        if path.name.startswith(("e2_study_", "e2_pilot_")) and "summary" not in path.name:
            run = load_study(path)
            key = (run["config"]["arm"], run["config"]["kind"])
            if run["config"]["pilot"]:
                out["pilot"].setdefault(key, []).append(run)
            else:
                out["study"][key] = run
    return out


def status_table(files: dict, caption: str | None = None) -> Table:
    """Units stored of units planned, per (arm, kind), for the pilot and the study, and what
    they cost: the stored units' wall time in CPU-hours (one core per unit)."""
    def hours(runs) -> str:
        return f"{sum(u['wall_time'] for r in runs for u in r['units'].values()) / 3600:.2f}"

    rows = []
    for arm, kinds in ARMS.items():
        for kind in kinds:
            pilot = files["pilot"].get((arm, kind), [])
            planned = sum(len(_plan(dataclasses.asdict(c))) for c in pilot_configs(arm, kind))
            run = files["study"].get((arm, kind))
            rows.append({"arm": arm, "kind": kind,
                         "pilot units": f"{sum(len(r['units']) for r in pilot)} / {planned}",
                         "optimiser": _optimiser(PILOT_CHOICE.get((arm, kind))),
                         "study units": f"{len(run['units']) if run else 0} / "
                                        f"{planned_units(arm, kind)}",
                         "CPU-h (pilot, study)": f"{hours(pilot)}, {hours([run] if run else [])}"})
    return Table(rows, caption=caption)


def _optimiser(choice) -> str:
    if choice is None:
        return "pilot pending"
    return (f"lr {choice['lr']:g} (dense {choice['dense_lr']:g}), {choice['steps']} steps"
            + (f" + {choice['surrogate_steps']} surrogate" if choice["surrogate_steps"] else ""))


def pilot_table(runs, caption: str | None = None) -> Table:
    """A complete pilot's options (median best validation accuracy of the heads and of the
    dense heads) and the registered choice, marked."""
    choice = pilot_choice(runs)
    rows = [{"lr": o["lr"], "MSE steps": o["steps"],
             "surrogate phase": "on" if o["surrogate"] else "off",
             "heads: median validation": f"{o['median_val']:.3f}",
             "dense: median validation": f"{o['median_val_dense']:.3f}",
             "chosen": ("heads" if (o["lr"], o["steps"], o["surrogate"]) ==
                        (choice["lr"], choice["steps"], bool(choice["surrogate_steps"]))
                        else "") + (" dense" if (o["lr"], o["steps"], o["surrogate"]) ==
                                    (choice["dense_lr"], choice["steps"],
                                     bool(choice["surrogate_steps"])) else "")}
            for o in sorted(choice["options"], key=lambda o: (o["lr"], o["steps"],
                                                              o["surrogate"]))]
    for r in rows:
        r["chosen"] = r["chosen"].strip() or "—"
    return Table(rows, caption=caption)


def complete_sizes(run: dict) -> list[int]:
    """The sizes of a (possibly partial) study file whose every unit is stored."""
    plan = _plan(run["config"])
    return [size for size in run["config"]["sizes"]
            if all(key in run["units"] for key, s, *_ in plan if s == size)]


def plot_study(ax, run: dict, test: str, title: str | None = None) -> None:
    """Median test accuracy against rank per complete size (band: min-max over replicates;
    dashed: dense median; star: r* at tau = 0.9 with its bootstrap interval as a bar)."""
    ranks = run["config"]["ranks"]
    for i, size in enumerate(complete_sizes(run)):
        line = _size_line(run, size, test)
        acc = np.array([[rec["test"][test] for rec, _ in reps]
                        for r, reps in sorted(_replicates(run, size).items(),
                                              key=lambda kv: (kv[0] == "dense", kv[0]))
                        if r != "dense"])
        color = BOOK_COLORS[i % len(BOOK_COLORS)]
        what = "m" if run["config"]["arm"] == "A" else "P"
        label = f"${what} = {size if what == 'm' else 2 * size - 2}$"
        ax.plot(ranks, line["median"], marker=BOOK_MARKERS[i], ms=3, color=color, label=label)
        ax.fill_between(ranks, acc.min(1), acc.max(1), color=color, alpha=0.15)
        ax.axhline(np.median(line["dense"]), color=color, ls="--", lw=1)
        star = line["r_star"]["0.9"]
        if star is not None:
            lo, hi = line["interval_log2"]["0.9"]
            y = line["median"][ranks.index(star)]
            ax.plot([2**lo, min(2**hi, 2 * ranks[-1])], [y, y], color=color, lw=3, alpha=0.5)
            ax.plot([star], [y], marker="*", ms=12, color="white", mec=color, mew=1.5, zorder=5)
    ax.axhline(0.9, color="grey", ls=":", lw=1)
    ax.set_xscale("log", base=2)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("feature rank $r$")
    ax.set_title(title or f"arm {run['config']['arm']}, {run['config']['kind']}, {test} test",
                 fontsize=10)


def _size_label(arm: str, size: int) -> str:
    return f"m = {size}" if arm == "A" else f"P = {2 * size - 2}"


def _star(line: dict, tau: float) -> str:
    """r* at tau of a size line and its 95 % interval, e.g. '64 [32, 256]'."""
    lo, hi = ("above 1024" if v > 10 else f"{2**v:g}" for v in line["interval_log2"][str(tau)])
    return f"{line['r_star'][str(tau)] or '—'} [{lo}, {hi}]"


def size_table(run: dict, test: str, caption: str | None = None) -> Table:
    """Per complete size: r* at each tau with its 95 % interval, both sharpness rules, the
    top rank's training accuracy, dense exactness (9 replicates each)."""
    rows = []
    for size in complete_sizes(run):
        s = _size_line(run, size, test)
        row = {"size": _size_label(run["config"]["arm"], size)}
        for t in TAUS:
            row[f"r* at {t}"] = _star(s, t)
        row["sharp (abs / rel)"] = (f"{'yes' if s['sharp_absolute'] else 'no'} / "
                                    + ("—" if s["relative_width"] is None else
                                       f"{s['relative_width']:.0f} doublings"))
        row["top-rank training acc."] = f"{s['train_last'][-1]:.3f}"
        row["dense exact"] = f"{sum(d >= RULE_DENSE_EXACT for d in s['dense'])}/{len(s['dense'])}"
        rows.append(row)
    return Table(rows, caption=caption)


def gap_table(run: dict, test: str, caption: str | None = None) -> Table:
    """Per rank and complete size, 'capacity / generalisation': 1 - a_fit and a_fit - a_test
    (medians over the replicates), * where generalisation is at least capacity."""
    sizes = complete_sizes(run)
    lines = [_size_line(run, s, test) for s in sizes]
    rows = [[r] + [f"{ln['capacity'][i]:.2f} / {ln['generalisation'][i]:.2f}"
                   + (" *" if ln["generalisation"][i] >= ln["capacity"][i] else "")
                   for ln in lines] for i, r in enumerate(run["config"]["ranks"])]
    return Table(rows, columns=["r", *(_size_label(run["config"]["arm"], n) for n in sizes)],
                 caption=caption)


def verdict_table(summary: dict, caption: str | None = None) -> Table:
    """One row per arm, kind and test set of a study summary: r* at tau = 0.9 per size (in
    increasing size) with its 95 % interval, the verdict and its reason; the arm's headline
    family marked."""
    rows = []
    for arm, kinds in summary["arms"].items():
        for kind, tests in kinds.items():
            for test, fam in tests.items():
                rows.append({
                    "arm": arm + (" (headline)" if (kind, test) == tuple(summary["headlines"][arm])
                                  else ""),
                    "kind, test": f"{kind}, {test}",
                    "r* at 0.9 [95 % interval]": "; ".join(_star(s, 0.9)
                                                           for s in fam["per_size"]),
                    "verdict": f"{fam['verdict']} ({fam['reason']})"})
    return Table(rows, caption=caption)
