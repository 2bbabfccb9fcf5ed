"""The protocols stored before the readings (chapter 7, issue 10): MLP maps of the token bits
on disjoint random token pools, as configurations (:class:`~.readings.E2Config`, reading
"tokens") of the E2 pipeline in :mod:`companion.experiments.e2.readings`.

Their file format (results/e2_quick.json, results/e2_protocols/<name>.json) has one unit per
width, ``"m<width>"``, holding every head and dense head of that width
(:func:`~.readings.e2_width_result`). Here: the presets (the book's quick mode is protocol H),
every protocol we ran (:data:`E2_PROTOCOLS`), the sweep over widths and its readers, the
chapter's tables, and the live subset the chapter re-trains.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from companion.book import Table
from companion.checks import (
    check_choice,
    check_device,
    check_instance,
    check_int,
    check_int_sequence,
    check_mapping,
    check_path,
    read_json_file,
)
from companion.experiments.e2.data import TEST_DISTRIBUTIONS
from companion.experiments.e2.readings import E2Config, e2_width_result
from companion.experiments.e2.rule import curve_rule
from companion.experiments.sweep import ResultStore, Unit, check_writable, run_units

__all__ = ["E2_QUICK", "E2_FULL", "E2_SMOKE", "E2_PROTOCOLS", "E2_LIVE", "e2_units",
           "e2_result", "run_e2_sweep", "summarise_e2", "accuracy_table", "protocol_path",
           "run_e2_protocol", "load_e2_result", "stored_config_hash", "load_e2_protocols",
           "e2_live_result", "e2_model_values"]

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


# --------------------------------------------------------------------------- sweep


def e2_units(cfg: E2Config, device="cpu") -> list[Unit]:
    """The sweep's independent units: one per width, key 'm<width>'."""
    check_instance(cfg, "cfg", E2Config)
    check_device(device)
    return [Unit(f"m{m}", e2_width_result, (cfg, m, pool, str(device)), device=str(device))
            for m, pool in zip(cfg.widths, cfg.pool_sizes, strict=True)]


def e2_result(store: ResultStore) -> dict | None:
    """The sweep result ``{"config", "widths"}`` a store holds (widths in the configuration's
    order), or None while a width is missing. Reads the per-width units and the single
    "sweep" unit of files written before the units were split; the transition ranks are the
    rule's r* (:func:`~.rule.curve_rule`), recomputed from the accuracies."""
    check_instance(store, "store", ResultStore)
    config = store.config
    if store.done("sweep"):
        res = dict(store.get("sweep"))
        res["widths"] = {str(m): dict(res["widths"][str(m)]) for m in res["config"]["widths"]}
    else:
        keys = [f"m{m}" for m in config["widths"]]
        if not all(store.done(k) for k in keys):
            return None
        run_info = ("wall_time", "environment")  # where and how long a unit ran: in the file
        res = {"config": config,
               "widths": {str(m): {f: v for f, v in store.get(k).items() if f not in run_info}
                          for m, k in zip(config["widths"], keys, strict=True)}}
    for e in res["widths"].values():  # one definition: the rule's r*, also for older files
        e["transition_r"] = {name: curve_rule(e["ranks"], e["accuracy"][name],
                                              threshold=config["threshold"])["r_star"]
                             for name in TEST_DISTRIBUTIONS}
    return res


def run_e2_sweep(config: E2Config, device="cpu", progress=False, out=None, restart=False,
                 scheduler: str | None = None, threads: int = 1) -> dict:
    """Run (or resume) an E2 sweep, one unit per width (:func:`e2_width_result`), each stored
    in ``out`` (a :class:`ResultStore` JSON file; None: in memory) as it finishes, and return
    ``{"config", "widths"}``: per width the test exact-sequence accuracies per distribution,
    train accuracies, the rule's transition ranks r* and dense accuracies per seed.
    ``scheduler``: where the units run (see :mod:`companion.experiments.sweep`);
    ``threads``: torch threads."""
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
    rule's transition rank r*, train accuracy and the train-test gap at the largest rank,
    and the dense heads' accuracy (min over seeds) — what the chapter's tables print."""
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
            row[f"transition_{name}"] = curve_rule(ranks, acc, threshold=result["config"][
                "threshold"])["r_star"]
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
