"""E2 -- out-of-distribution scaling: does a rank-r head generalise Min-IP to unseen tokens?
(chapter 7; the experiment the paper reports beside Theorem E, ``thm-exponential-rank``).

Per token width m: disjoint train and test pools (:mod:`companion.experiments.e2.data`),
every (rank, seed) MLP head and every dense head (:mod:`companion.experiments.mlp_heads`)
trained as one tensor program (:func:`companion.experiments.engine.train_batched`), then
*exact-sequence accuracy* on unseen tokens: a sequence counts as solved when all three
rounded outputs equal their targets. The configuration is the frozen dataclass
:class:`E2Config` (variants by ``dataclasses.replace``; its hash is taken from ``asdict``);
every protocol we ran is kept in :data:`E2_PROTOCOLS` and stored under results/e2_protocols.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from companion.book import Table
from companion.checks import (
    check_array,
    check_bool,
    check_choice,
    check_device,
    check_float,
    check_instance,
    check_int,
    check_int_sequence,
    check_mapping,
    check_path,
)
from companion.experiments.e2.data import TEST_DISTRIBUTIONS, make_e2_data, pool_inputs
from companion.experiments.engine import ModelStack, train_batched
from companion.experiments.heads import (
    ENCODINGS,
    FEATURES,
    READOUTS,
    mlp_kernel_heads,
    mlp_softmax_heads,
)
from companion.experiments.scheduler import Unit, run_units
from companion.experiments.store import FrozenConfig, ResultStore, check_writable, read_json_file


def _tuple(value):
    """Nested lists as nested tuples (frozen configs hold tuples; JSON writes both as arrays)."""
    return tuple(_tuple(v) for v in value) if isinstance(value, (list, tuple)) else value


@dataclass(frozen=True)
class E2Config(FrozenConfig):
    """One E2 sweep. Defaults are the book's quick mode (protocol H of :data:`E2_PROTOCOLS`:
    three widths, r = 1..128, 3 seeds, sized for <= 3 min on 2 cores; the threshold 0.9 was
    fixed before any sweep was run). Validated and normalised on construction."""

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
        for name in ("n_train", "n_test", "steps", "value_dim"):
            put(name, check_int(getattr(self, name), name, 1))
        put("data_seed", check_int(self.data_seed, "data_seed", 0))
        put("train_fraction", check_float(self.train_fraction, "train_fraction", 0, 1,
                                          low_open=True, high_open=True))
        put("near_tie_fraction", check_float(self.near_tie_fraction, "near_tie_fraction", 0, 1))
        self._check_schedule()
        put("threshold", check_float(self.threshold, "threshold", 0, 1, low_open=True))
        check_choice(self.feature, "feature", FEATURES)
        check_choice(self.encoding, "encoding", ENCODINGS)
        check_choice(self.readout, "readout", READOUTS)
        put("skip", check_bool(self.skip, "skip"))


#: Book quick mode (the defaults).
E2_QUICK = E2Config()

#: Full size (CLI `python -m companion e2`): the widths of the protocol table, bigger pools,
#: more sequences and seeds, wider MLPs, longer training.
E2_FULL = dataclasses.replace(E2_QUICK, widths=(8, 12, 16), pool_sizes=(256, 1024, 2048),
                              n_train=8000, n_test=2000, hidden=(64,), seeds=(0, 1, 2, 3, 4),
                              steps=3000)

#: Installation / cluster check (CLI ``--smoke``, the tests): two small widths (two units),
#: three ranks in two groups, two seeds, short training; seconds on one core.
E2_SMOKE = dataclasses.replace(E2_QUICK, widths=(6, 8), pool_sizes=(40, 48), n_train=200,
                               n_test=100, ranks=(1, 4, 16), rank_groups=((1, 4), (16,)),
                               seeds=(0, 1), hidden=(8,), steps=60)


# --------------------------------------------------------------------------- evaluation


def exact_sequence_accuracy(predictions, targets) -> np.ndarray:
    """Fraction of sequences whose three outputs all lie within 1/2 of their integer targets.

    predictions (M, 3S) or (M, S, 3); targets (S, 3) -> (M,) accuracies.
    """
    if isinstance(predictions, torch.Tensor):
        predictions = predictions.detach().cpu().numpy()
    pred = check_array(predictions, "predictions").astype(np.float64)
    tgt = check_array(targets, "targets").astype(np.float64)
    if tgt.ndim != 2 or tgt.shape[1] != 3:
        raise ValueError(f"targets must have shape (S, 3), got {tgt.shape}")
    if pred.ndim not in (2, 3) or pred.size != pred.shape[0] * tgt.size:
        raise ValueError(f"predictions must have shape (M, 3S) or (M, S, 3) with S = "
                         f"{tgt.shape[0]}, got {pred.shape}")
    pred = pred.reshape(pred.shape[0], tgt.shape[0], 3)
    return (np.abs(pred - tgt[None]) < 0.5).all(axis=-1).mean(axis=-1)


def transition_rank(ranks: Sequence[int], accuracy, threshold: float):
    """First rank whose median accuracy over seeds reaches `threshold`, or None.

    accuracy: (len(ranks), seeds) array-like.
    """
    threshold = check_float(threshold, "threshold", 0, 1, low_open=True)
    ranks = check_int_sequence(ranks, "ranks", allow_empty=True)
    acc = check_array(accuracy, "accuracy").astype(np.float64)
    if acc.ndim != 2 or acc.shape[0] != len(ranks):
        raise ValueError(f"accuracy must have shape (len(ranks), seeds), got {acc.shape}")
    for r, row in zip(ranks, acc, strict=False):
        if np.median(row) >= threshold:
            return int(r)
    return None


# --------------------------------------------------------------------------- sweep


def build_e2_models(m: int, cfg: E2Config):
    """The stacked models for one width: one `mlp_kernel_heads` per rank group (every rank of the
    group x every seed, padded to the group's largest rank) and one `mlp_softmax_heads` (every
    seed), concatenated with :class:`ModelStack`. Also returns the (rank or "dense", seed) key
    of every model row."""
    check_instance(cfg, "cfg", E2Config)
    seeds = list(cfg.seeds)
    parts, keys = [], []
    for group in cfg.rank_groups:
        parts.append(mlp_kernel_heads(m, [r for r in group for _ in seeds], seeds * len(group),
                                    cfg.hidden, cfg.value_dim, cfg.feature, cfg.encoding,
                                    cfg.skip, cfg.readout))
        keys += [(r, s) for r in group for s in seeds]
    parts.append(mlp_softmax_heads(m, seeds, cfg.hidden, cfg.value_dim, encoding=cfg.encoding,
                                 skip=cfg.skip, readout=cfg.readout))
    keys += [("dense", s) for s in seeds]
    return ModelStack(parts), keys


def e2_width_result(cfg: E2Config, m: int, pool_size: int, device="cpu") -> dict:
    """One E2 unit: train every (rank, seed) NKA head and every dense head of width m as one
    tensor program and evaluate them on the unseen tokens. A pure function of its arguments
    (data and models are seeded by the configuration), so it may run anywhere."""
    check_instance(cfg, "cfg", E2Config)
    check_device(device)
    seeds, ranks = list(cfg.seeds), list(cfg.ranks)
    data = make_e2_data(m, pool_size, cfg.train_fraction, cfg.n_train, cfg.n_test,
                        cfg.near_tie_fraction, cfg.data_seed)
    train_in = pool_inputs(data.train_pool, data.train_idx, device)
    y_train = data.train_targets()
    targets = torch.as_tensor(y_train.reshape(-1), dtype=torch.float32, device=device)
    model, keys = build_e2_models(m, cfg)
    res = train_batched(model, train_in, targets, steps=cfg.steps, lr=cfg.lr,
                        final_lr_fraction=cfg.final_lr_fraction, seed=cfg.data_seed,
                        device=device, progress=False)
    model = res.model
    with torch.no_grad():
        tr = exact_sequence_accuracy(model(train_in), y_train)
        te = {name: exact_sequence_accuracy(
                  model(pool_inputs(data.test_pool, data.test_idx[name], device)),
                  data.test_targets(name)) for name in TEST_DISTRIBUTIONS}
    row = {key: i for i, key in enumerate(keys)}

    def table(values):
        return [[float(values[row[(r, s)]]) for s in seeds] for r in ranks]

    acc = {name: table(te[name]) for name in TEST_DISTRIBUTIONS}
    return {
        "pool_train": len(data.train_pool), "pool_test": len(data.test_pool),
        "ranks": ranks,
        "accuracy": acc,
        "train_accuracy": table(tr),
        "train_max_error": table(res.best_max_error.numpy()),
        "dense": {name: [float(te[name][row[("dense", s)]]) for s in seeds]
                  for name in TEST_DISTRIBUTIONS},
        "dense_train_accuracy": [float(tr[row[("dense", s)]]) for s in seeds],
        "transition_r": {name: transition_rank(ranks, acc[name], cfg.threshold)
                         for name in TEST_DISTRIBUTIONS},
    }


def e2_units(cfg: E2Config, device="cpu") -> list[Unit]:
    """The sweep's independent units: one per width, key 'm<width>'."""
    check_instance(cfg, "cfg", E2Config)
    check_device(device)
    return [Unit(f"m{m}", e2_width_result, (cfg, m, pool, str(device)), device=str(device))
            for m, pool in zip(cfg.widths, cfg.pool_sizes, strict=True)]


def e2_result(store: ResultStore) -> dict | None:
    """The sweep result ``{"config", "widths"}`` a store holds (widths in the configuration's
    order), or None while a width is missing. Reads the per-width units and the single
    "sweep" unit of files written before the units were split."""
    check_instance(store, "store", ResultStore)
    config = store.config
    if store.done("sweep"):
        res = dict(store.get("sweep"))
        res["widths"] = {str(m): res["widths"][str(m)] for m in res["config"]["widths"]}
        return res
    keys = [f"m{m}" for m in config["widths"]]
    if not all(store.done(k) for k in keys):
        return None
    run_info = ("wall_time", "environment")  # where and how long a unit ran: kept in the file
    return {"config": config,
            "widths": {str(m): {f: v for f, v in store.get(k).items() if f not in run_info}
                       for m, k in zip(config["widths"], keys, strict=True)}}


def run_e2_sweep(config: E2Config, device="cpu", progress=False, out=None, restart=False,
                 scheduler: str | None = None, threads: int = 1) -> dict:
    """Run (or resume) an E2 sweep, one unit per width (:func:`e2_width_result`), each stored
    in ``out`` (a :class:`ResultStore` JSON file; None: in memory) as it finishes, and return
    ``{"config", "widths"}``: per width the test exact-sequence accuracies per distribution,
    train accuracies, transition ranks and dense accuracies per seed. ``scheduler``: where the
    units run (see :mod:`companion.experiments.scheduler`); ``threads``: torch threads."""
    cfg = check_instance(config, "config", E2Config)
    check_device(device)
    if out is not None:
        check_writable(out, "out")
    store = ResultStore(out, cfg, restart=restart)
    if e2_result(store) is None:
        run_units(e2_units(cfg, device), store, scheduler=scheduler, threads=threads,
                  progress=progress)
    return e2_result(store)


# --------------------------------------------------------------------------- summaries, protocols


def summarise_e2(result: dict) -> list[dict]:
    """One row per width: median test accuracy per rank (each test distribution), the
    transition rank, train accuracy and the train-test gap at the largest rank, and the dense
    heads' accuracy (min over seeds) — what the chapter's tables print."""
    check_mapping(result, "result")
    try:
        return _summary_rows(result)
    except (KeyError, TypeError, IndexError, AttributeError, ValueError) as exc:
        raise ValueError(f"result must be a run_e2_sweep result (config, widths with ranks, "
                         f"accuracy, dense, ...); reading it failed: {exc!r:.120}") from exc


def _summary_rows(result: dict) -> list[dict]:
    rows = []
    for m, e in sorted(result["widths"].items(), key=lambda kv: int(kv[0])):
        ranks = e["ranks"]
        row = {"m": int(m), "ranks": ranks, "pool_train": e["pool_train"],
               "pool_test": e["pool_test"]}
        for name in TEST_DISTRIBUTIONS:
            acc = np.asarray(e["accuracy"][name])
            row[f"median_{name}"] = [float(np.median(a)) for a in acc]
            row[f"transition_{name}"] = e["transition_r"][name]
            row[f"dense_min_{name}"] = float(min(e["dense"][name]))
            med = np.asarray(row[f"median_{name}"])
            row[f"largest_step_{name}"] = float(np.max(np.diff(med))) if len(med) > 1 else 0.0
        train = np.asarray(e["train_accuracy"])
        row["median_train"] = [float(np.median(a)) for a in train]
        row["dense_min_train"] = float(min(e["dense_train_accuracy"]))
        row["dense_exact_seeds"] = {name: sum(a == 1.0 for a in e["dense"][name])
                                    for name in TEST_DISTRIBUTIONS}
        rows.append(row)
    return rows


def accuracy_table(result: dict, distribution: str, caption: str | None = None) -> Table:
    """Exact-sequence accuracy by rank (rows, then the dense heads) and width (columns):
    'median [min, max]' over seeds on a test distribution, or the median on "train"."""
    check_choice(distribution, "distribution", (*TEST_DISTRIBUTIONS, "train"))

    def cell(values) -> str:
        a = np.asarray(values)
        if distribution == "train":
            return f"{np.median(a):.2f}"
        return f"{np.median(a):.2f} [{a.min():.2f}, {a.max():.2f}]"

    widths = result["widths"]
    key, dense = (("train_accuracy", "dense_train_accuracy") if distribution == "train"
                  else ("accuracy", "dense"))
    rows = [[r] + [cell(e[key][i] if distribution == "train" else e[key][distribution][i])
                   for e in widths.values()]
            for i, r in enumerate(result["config"]["ranks"])]
    rows.append(["dense"] + [cell(e[dense] if distribution == "train" else e[dense][distribution])
                             for e in widths.values()])
    return Table(rows, columns=["r"] + [f"m = {m}" for m in widths], caption=caption)


_SHARED = {"pool_sizes": (256, 256, 256), "n_train": 3000, "hidden": (32,), "lr": 0.01,
           "steps": 1500, "near_tie_fraction": 0.5}

#: Every E2 protocol we ran and stored (results/e2_protocols/<name>.json), as changes to
#: `E2_QUICK` (each protocol is `dataclasses.replace(E2_QUICK, **changes)`); the chapter
#: tabulates all of them, kept or not.
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


def protocol_path(out_dir, name: str):
    """File of one protocol's results: `out_dir/<name>.json`."""
    if not isinstance(name, str) or not name.replace("_", "").isalnum():
        raise ValueError(f"name must be a non-empty identifier (letters, digits, _), got {name!r}")
    return check_path(out_dir, "out_dir") / f"{name}.json"


def run_e2_protocol(name: str, changes: dict, out_dir="results/e2_protocols",
                    base: E2Config | None = None, device="cpu", progress=False,
                    restart=False, scheduler: str | None = None, threads: int = 1) -> dict:
    """Run one protocol (`changes` to `base`, default `E2_QUICK`) as an E2 sweep stored at
    `out_dir/<name>.json` in the CLI's format (one unit per width). Finished widths of an
    existing file for the same configuration are reused, not recomputed."""
    check_instance(changes, "changes", dict)
    config = dataclasses.replace(E2_QUICK if base is None else base, **changes)
    return run_e2_sweep(config, device=device, progress=progress, restart=restart,
                        out=protocol_path(out_dir, name), scheduler=scheduler, threads=threads)


def load_e2_result(path) -> dict | None:
    """A stored E2 sweep (the JSON :func:`run_e2_sweep` writes, e.g. results/e2_quick.json)
    as :func:`run_e2_sweep` returns it, ``{"config", "widths"}``, or None while a width is
    missing. (The file's ``config_hash`` is :func:`stored_config_hash`.)"""
    data = read_json_file(path, "E2 results file")
    if not isinstance(data, dict) or not isinstance(data.get("units"), dict) or not isinstance(
            data.get("config"), dict):
        raise ValueError(f"path {str(path)!r} is not an E2 results file (needs config, units)")
    store = ResultStore(None, data["config"])
    store.units = data["units"]
    return e2_result(store)


def stored_config_hash(path) -> str | None:
    """The configuration hash a stored result file (E1 or E2) was written for."""
    data = read_json_file(path)
    if not isinstance(data, dict):
        raise ValueError(f"path {str(path)!r} is not a results file (a JSON object)")
    return data.get("config_hash")


def load_e2_protocols(out_dir="results/e2_protocols") -> dict:
    """Every stored protocol result under `out_dir`: {name: run_e2_sweep result}, by name."""
    found = {}
    for path in sorted(check_path(out_dir, "out_dir").glob("*.json")):
        res = load_e2_result(path)
        if res is not None:  # complete protocols only
            found[path.stem] = res
    return found


# --------------------------------------------------------------------------- the live subset

#: What chapter 7 re-trains live (seconds): the smallest width (whose heads move least between
#: CPU code paths: results/cross_path_spread.json), ranks 4 and 16 of the quick mode's first
#: rank group (padded, as there, to 16), seed 0, and the dense head of seed 0 —
#: the same data and per-model initialisation as inside the quick sweep. Checked against the
#: committed quick sweep, results/e2_quick.json (:mod:`companion.experiments.reference`),
#: never printed.
E2_LIVE = {"width": 8, "ranks": (4, 16), "seeds": (0,)}


def e2_live_result(config: E2Config, width: int = E2_LIVE["width"],
                   ranks: Sequence[int] = E2_LIVE["ranks"],
                   seeds: Sequence[int] = E2_LIVE["seeds"], device="cpu") -> dict:
    """Train ``ranks`` x ``seeds`` (ranks of one rank group of ``config``, including its
    largest, so that the padding is the sweep's) and the dense heads of ``seeds`` at one width
    of ``config``; returns :func:`e2_width_result`'s dict."""
    cfg = check_instance(config, "config", E2Config)
    width = check_int(width, "width", 1)
    if width not in cfg.widths:
        raise ValueError(f"width must be one of the configuration's widths {cfg.widths}, "
                         f"got {width}")
    ranks = tuple(check_int_sequence(ranks, "ranks", 1))
    if not set(ranks) <= set(cfg.ranks):
        raise ValueError(f"ranks must be among the configuration's ranks {cfg.ranks}, "
                         f"got {ranks}")
    groups = [g for g in cfg.rank_groups if set(ranks) <= set(g)]
    if not groups:
        raise ValueError(f"ranks must lie in one rank group of the configuration "
                         f"{[list(g) for g in cfg.rank_groups]}, got {list(ranks)}")
    if max(ranks) != max(groups[0]):  # pad as inside the sweep: include the group's largest
        raise ValueError(f"ranks must include their group's largest rank {max(groups[0])} "
                         f"(the padding of the sweep), got {list(ranks)}")
    live = dataclasses.replace(cfg, widths=(width,),
                               pool_sizes=(cfg.pool_sizes[cfg.widths.index(width)],),
                               ranks=ranks, rank_groups=(ranks,),
                               seeds=tuple(check_int_sequence(seeds, "seeds", 0)))
    return e2_width_result(live, width, live.pool_sizes[0], device=device)


def e2_model_values(width_result: dict, distribution: str = "uniform",
                    seeds: Sequence[int] | None = None, width=None) -> dict:
    """{(m, rank or "dense", seed): test accuracy} of one width's result (the dict of
    :func:`e2_width_result`, or of a sweep's ``widths[m]``)."""
    check_choice(distribution, "distribution", TEST_DISTRIBUTIONS)
    if not (width is None or isinstance(width, (int, np.integer, str))):
        raise TypeError(f"width must be an int, a str or None (a key of the result), got "
                        f"{type(width).__name__}")
    try:
        n_seeds = len(width_result["dense"][distribution])
    except (KeyError, TypeError, IndexError) as exc:
        raise ValueError(f"width_result must be a width's result with 'dense' and 'accuracy' "
                         f"per distribution ({exc!r:.80})") from exc
    seeds = (list(range(n_seeds)) if seeds is None
             else check_int_sequence(seeds, "seeds", 0))
    if len(seeds) != n_seeds:
        raise ValueError(f"seeds must name the result's {n_seeds} seeds, got {len(seeds)}")
    out = {}
    for i, r in enumerate(width_result["ranks"]):
        for j, s in enumerate(seeds):
            out[(width, r, s)] = float(width_result["accuracy"][distribution][i][j])
    for j, s in enumerate(seeds):
        out[(width, "dense", s)] = float(width_result["dense"][distribution][j])
    return out
