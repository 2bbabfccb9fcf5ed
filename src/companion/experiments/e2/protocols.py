"""The protocols stored before the readings (chapter 7): MLP maps on disjoint random token
pools (:class:`~.readings.E2Config`), their files under results/, tables and live subset.
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
from companion.experiments.e2.readings import E2Config, load_reading, run_reading, train_unit
from companion.experiments.e2.verdicts import rank_table

__all__ = ["E2_QUICK", "E2_FULL", "E2_SMOKE", "E2_PROTOCOLS", "E2_LIVE", "run_e2_sweep",
           "summarise_e2", "accuracy_table", "run_e2_protocol", "load_e2_result",
           "stored_config_hash", "load_e2_protocols", "e2_live_result", "e2_model_values"]

#: Book quick mode (the defaults).
E2_QUICK = E2Config()

#: Full size (CLI `python -m companion e2`): bigger pools, more data, seeds, width, steps.
E2_FULL = dataclasses.replace(E2_QUICK, widths=(8, 12, 16), pool_sizes=(256, 1024, 2048),
                              n_train=8000, n_test=2000, hidden=(64,), seeds=(0, 1, 2, 3, 4),
                              steps=3000)

#: Installation / cluster check (CLI ``--smoke``, the tests): seconds on one core.
E2_SMOKE = dataclasses.replace(E2_QUICK, widths=(6, 8), pool_sizes=(40, 48), n_train=200,
                               n_test=100, ranks=(1, 4, 16), rank_groups=((1, 4), (16,)),
                               seeds=(0, 1), hidden=(8,), steps=60)


#: Run (or resume) a protocol's sweep, each width stored in ``out`` as it finishes:
#: ``{"config", "widths"}`` (per width accuracies, the rule's r* and the dense heads').
run_e2_sweep = run_reading


def load_e2_result(path) -> dict | None:
    """A stored protocol's file as :func:`run_e2_sweep` returns it (None while incomplete)."""
    res = load_reading(path)
    if res is not None and "widths" not in res:
        raise ValueError(f"path {str(path)!r} holds a reading, not a stored protocol")
    return res


def stored_config_hash(path) -> str | None:
    """The configuration hash a stored result file (E1 or E2) was written for."""
    data = read_json_file(path)
    if not isinstance(data, dict):
        raise ValueError(f"path {str(path)!r} is not a results file (a JSON object)")
    return data.get("config_hash")


def _summary_row(m: str, e: dict) -> dict:
    row = {"m": int(m), "ranks": e["ranks"]}
    for name in TEST_DISTRIBUTIONS:
        row[f"median_{name}"] = [float(np.median(a)) for a in np.asarray(e["accuracy"][name])]
        row[f"transition_{name}"] = e["transition_r"][name]
        row[f"dense_min_{name}"] = float(min(e["dense"][name]))
    row["median_train"] = [float(np.median(a)) for a in np.asarray(e["train_accuracy"])]
    return row


def summarise_e2(result: dict) -> list[dict]:
    """Per width: median accuracy per rank (tests, train), the rule's r*, the dense worst seed."""
    check_mapping(result, "result")
    try:
        return [_summary_row(m, e)
                for m, e in sorted(result["widths"].items(), key=lambda kv: int(kv[0]))]
    except (KeyError, TypeError, IndexError, AttributeError, ValueError) as exc:
        raise ValueError(f"result must be a run_e2_sweep result (config, widths with ranks, "
                         f"accuracy, dense, ...); reading it failed: {exc!r:.120}") from exc


def accuracy_table(result: dict, distribution: str, caption: str | None = None) -> Table:
    """Accuracy by rank and width, 'median [min, max]' over seeds (the median alone on "train")."""
    check_choice(distribution, "distribution", (*TEST_DISTRIBUTIONS, "train"))
    train = distribution == "train"
    return rank_table(result["config"]["ranks"], {
        f"m = {m}": ((e["train_accuracy"], e["dense_train_accuracy"]) if train
                     else (e["accuracy"][distribution], e["dense"][distribution]))
        for m, e in result["widths"].items()}, spread=not train, caption=caption)


_SHARED = {"pool_sizes": (256, 256, 256), "n_train": 3000, "hidden": (32,), "lr": 0.01,
           "steps": 1500, "near_tie_fraction": 0.5}

#: Every E2 protocol we ran and stored (results/e2_protocols/<name>.json), as changes to
#: `E2_QUICK`; the chapter tabulates all of them, kept or not.
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


def run_e2_protocol(name: str, changes: dict, out_dir="results/e2_protocols",
                    base: E2Config | None = None, device="cpu", progress=False,
                    restart=False, scheduler: str | None = None, threads: int = 1) -> dict:
    """Run one protocol (`changes` to `base`, default `E2_QUICK`) into `out_dir/<name>.json`."""
    if not isinstance(name, str) or not name.replace("_", "").isalnum():
        raise ValueError(f"name must be a non-empty identifier (letters, digits, _), got {name!r}")
    check_instance(changes, "changes", dict)
    config = dataclasses.replace(E2_QUICK if base is None else base, **changes)
    return run_e2_sweep(config, device=device, progress=progress, restart=restart,
                        out=check_path(out_dir, "out_dir") / f"{name}.json",
                        scheduler=scheduler, threads=threads)


def load_e2_protocols(out_dir="results/e2_protocols") -> dict:
    """Every complete stored protocol under `out_dir`: {name: run_e2_sweep result}, by name."""
    return {path.stem: res for path in sorted(check_path(out_dir, "out_dir").glob("*.json"))
            if (res := load_e2_result(path)) is not None}


#: What chapter 7 re-trains live and checks against the committed quick sweep: the width that
#: moves least between CPU code paths (results/cross_path_spread.json), two ranks, a seed.
E2_LIVE = {"width": 8, "ranks": (4, 16), "seeds": (0,)}


def e2_live_result(config: E2Config, width: int = E2_LIVE["width"],
                   ranks: Sequence[int] = E2_LIVE["ranks"],
                   seeds: Sequence[int] = E2_LIVE["seeds"], device="cpu") -> dict:
    """Train ``ranks`` x ``seeds`` (of one rank group of ``config``, with its largest: the
    sweep's padding) and the dense heads of ``seeds`` at one width: the width's record."""
    cfg = check_instance(config, "config", E2Config)
    ranks = tuple(check_int_sequence(ranks, "ranks", 1))
    check_device(device)
    groups = [g for g in cfg.rank_groups if set(ranks) <= set(g)]
    if check_int(width, "width") not in cfg.widths or not groups:
        raise ValueError(f"width, ranks: the width must be one of {cfg.widths} and the ranks "
                         f"lie in one rank group of {[list(g) for g in cfg.rank_groups]}; got "
                         f"{width}, {list(ranks)}")
    if max(ranks) != max(groups[0]):
        raise ValueError(f"ranks must include their group's largest rank {max(groups[0])} "
                         f"(the sweep's padding), got {list(ranks)}")
    pool = cfg.pool_sizes[cfg.widths.index(width)]
    live = dataclasses.replace(cfg, widths=(width,), pool_sizes=(pool,), ranks=ranks,
                               rank_groups=(ranks,),
                               seeds=tuple(check_int_sequence(seeds, "seeds", 0)))
    return train_unit(live, width, pool, live.readout, "both", device)


def e2_model_values(width_result: dict, distribution: str = "uniform",
                    seeds: Sequence[int] | None = None, width=None) -> dict:
    """{(width, rank or "dense", seed): test accuracy} of one width's record."""
    check_choice(distribution, "distribution", TEST_DISTRIBUTIONS)
    check_instance(width, "width", (int, np.integer, str, type(None)))  # a key of the result
    try:
        heads, dense = width_result["accuracy"][distribution], width_result["dense"][distribution]
        ranks = width_result["ranks"]
    except (KeyError, TypeError, IndexError) as exc:
        raise ValueError(f"width_result must be a width's result with 'ranks', 'dense' and "
                         f"'accuracy' per distribution ({exc!r:.80})") from exc
    seeds = list(range(len(dense))) if seeds is None else check_int_sequence(seeds, "seeds", 0)
    if len(seeds) != len(dense):
        raise ValueError(f"seeds must name the result's {len(dense)} seeds, got {len(seeds)}")
    out = {(width, r, s): float(heads[i][j]) for i, r in enumerate(ranks)
           for j, s in enumerate(seeds)}
    out.update({(width, "dense", s): float(dense[j]) for j, s in enumerate(seeds)})
    return out
