"""E1, the witness suite (chapter 6; ``thm-exponential-rank``, ``lem-gap-domination``): table
heads of every rank trained on F(S), one sweep of padded rank groups x seed blocks plus the
dense softmax baseline; each model has its own seed. Chapter 8's probes reuse the training."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import torch

from companion.book import Table
from companion.bounds.codes import paley_subset
from companion.bounds.gap_domination import LinkCheck, total_weights
from companion.bounds.witness import WitnessFamily, witness_family
from companion.checks import (
    check_choice,
    check_device,
    check_instance,
    check_int,
    check_int_sequence,
)
from companion.core.attention import kernel_attention
from companion.experiments.engine import fit_batched
from companion.experiments.heads import (
    FEATURES,
    group_ranks,
    table_kernel_heads,
    table_softmax_heads,
)
from companion.experiments.sweep import (
    FrozenConfig,
    load_sweep,
    run_sweep,
    seed_units,
    sweep_records,
)

__all__ = ["experiment_witness_24", "E1Config", "E1_FULL", "E1_QUICK", "E1_SMOKE", "e1_family",
           "build_unit", "train_e1_unit", "run_e1_sweep", "summarise_e1", "summary_table",
           "consistency_violations", "dense_init_statistics", "link_checks", "load_e1_results",
           "E1_LIVE_RANKS", "E1_LIVE_SEEDS", "train_e1_live", "model_values"]

#: (a, b): the first a Paley rows and the complements of the first b; the largest certified
#: bound among subsets with 1,000-2,500 sequences (tests/experiments/test_e1.py re-searches).
EXPERIMENT_PALEY_SUBSET = (23, 5)


def experiment_witness_24(convention: str = "bidirectional") -> WitnessFamily:
    """The witness family the experiments train on (n = 3, eps = 1/2): the 24-bit query set
    :data:`EXPERIMENT_PALEY_SUBSET` of Paley q = 23."""
    return witness_family(paley_subset(*EXPERIMENT_PALEY_SUBSET), 3, Fraction(1, 2), convention)


#: Powers of two to 64, the bound (20), the rank-|S| construction (28), the trained threshold.
E1_RANKS = (1, 2, 4, 8, 16, 20, 24, 27, 28, 32, 64)

FAMILIES = ("experiment_witness_24",)


@dataclass(frozen=True)
class TrainingConfig(FrozenConfig):
    """The training fields E1, chapter 8's probes and chapter 9's maps share (defaults: their
    full runs; field order is free: a configuration's hash is over its sorted fields)."""

    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    d: int = 16
    phi_std: float = 1.0
    lr: float = 0.03
    final_lr_fraction: float = 0.02
    steps: int = 3000
    surrogate_steps: int = 2000
    surrogate_power: int = 16
    seed_block: int | None = None  # seeds per unit (None: all seeds in one unit)


@dataclass(frozen=True)
class E1Config(TrainingConfig):
    """One E1 sweep (defaults: full size); ranks sorted, rank_groups None: :func:`group_ranks`."""

    family: str = "experiment_witness_24"
    ranks: tuple[int, ...] = E1_RANKS
    rank_groups: tuple[tuple[int, ...], ...] | None = None
    dense_seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    feature: str = "exp"
    positional: bool = True
    score_dim: int = 24
    qk_std: float = 0.2

    def __post_init__(self):
        put = self._put
        if not isinstance(self.family, str) or (self.family not in FAMILIES
                                                and not self.family.startswith("custom:")):
            raise ValueError(
                f"family must be one of {FAMILIES} (or 'custom:<digest>'), got {self.family!r}")
        put("ranks", tuple(sorted(set(check_int_sequence(self.ranks, "ranks", 1)))))
        put("seeds", tuple(check_int_sequence(self.seeds, "seeds", 0)))
        put("dense_seeds", tuple(check_int_sequence(self.dense_seeds, "dense_seeds", 0,
                                                    allow_empty=True)))
        groups = group_ranks(self.ranks) if self.rank_groups is None else self.rank_groups
        groups = tuple(tuple(sorted(check_int_sequence(g, "rank_groups[i]", 1))) for g in groups)
        if sorted(r for g in groups for r in g) != list(self.ranks):
            raise ValueError(f"rank_groups must partition ranks {list(self.ranks)}, got {groups}")
        put("rank_groups", groups)
        check_choice(self.feature, "feature", FEATURES)
        self._check_flags("positional")
        self._check_training(("d", "score_dim"), ("phi_std", "qk_std"))


#: Full size (the defaults).
E1_FULL = E1Config()

#: Book quick mode: same protocol, 3 seeds and shorter schedules (fits the build budget).
E1_QUICK = dataclasses.replace(E1_FULL, seeds=(0, 1, 2), dense_seeds=(0, 1, 2), steps=1200,
                               surrogate_steps=800)

#: Installation / cluster check (``--smoke``, the tests): 6 units, seconds on one core.
E1_SMOKE = dataclasses.replace(E1_FULL, ranks=(1, 4, 16, 28), rank_groups=((1, 4), (16, 28)),
                               seeds=(0, 1), dense_seeds=(0, 1), steps=60, surrogate_steps=40,
                               seed_block=1)


def e1_family(config: E1Config) -> WitnessFamily:
    """The witness family a configuration names."""
    if check_instance(config, "config", E1Config).family == "experiment_witness_24":
        return experiment_witness_24()
    raise ValueError(f"family {config.family!r} cannot be rebuilt by name; pass family= explicitly")


def family_digest(family) -> str:
    """A short digest of a family's training problem (token ids, targets, query position)."""
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(np.asarray(family.token_ids, dtype=np.int64)).tobytes())
    h.update(np.ascontiguousarray(np.asarray(family.targets, dtype=np.int64)).tobytes())
    h.update(str(int(family.query_position)).encode())
    return h.hexdigest()[:16]


def train_on_family(cfg, family, model, device="cpu"):
    """Train stacked models on the whole family with the configuration's schedule (E1, probes;
    the engine's unchecked core: the caller's configuration is checked)."""
    ids = torch.as_tensor(np.asarray(family.token_ids, dtype=np.int64), device=device)
    y = torch.as_tensor(np.asarray(family.targets, dtype=np.float64), dtype=torch.float32,
                        device=device)
    return fit_batched(model, ids, y, cfg.steps, cfg.lr, cfg.final_lr_fraction,
                       cfg.surrogate_steps, cfg.surrogate_power, torch.device(device))


def model_records(res, labels, keys=("kind", "rank", "seed"), full: bool = True) -> list[dict]:
    """Per model: its label, best max error, share within 1/2 (``full``: final error, best step)."""
    records = []
    for i, label in enumerate(labels):
        rec = {**dict(zip(keys, label)), "best_max_error": round(float(res.best_max_error[i]), 6),
               "fraction_within_half": round(float(res.fraction_within_half[i]), 6)}
        if full:
            rec.update(final_max_error=round(float(res.final_max_error[i]), 6),
                       best_step=int(res.best_step[i]))
        records.append(rec)
    return records


def _nka_heads(cfg: E1Config, family, ranks, seeds, pad: int):
    labels = [("nka", r, s) for r in ranks for s in seeds]
    model = table_kernel_heads([r for _, r, _ in labels], [s for *_, s in labels],
                               len(family.tokens), np.asarray(family.token_ids).shape[1],
                               query_position=int(family.query_position), d=cfg.d,
                               feature=cfg.feature, positional=cfg.positional, pad_to=pad,
                               phi_std=cfg.phi_std)
    return model, labels


def build_unit(cfg: E1Config, family, group: Sequence[int] | None,
               seeds: Sequence[int] | None = None):
    """One unit's stacked models and labels: a rank group x seeds, or (group None) dense heads."""
    cfg = check_instance(cfg, "cfg", E1Config)
    family = check_instance(family, "family", WitnessFamily)
    group = None if group is None else check_int_sequence(group, "group", 1)
    seeds = None if seeds is None else check_int_sequence(seeds, "seeds", 0)
    if group is None and not (cfg.dense_seeds if seeds is None else seeds):
        raise ValueError("seeds must not be empty: the configuration has no dense seeds")
    return unit_models(cfg, family, group, seeds)


def unit_models(cfg: E1Config, family, group, seeds):
    """:func:`build_unit` without the checks (the units')."""
    if group is None:
        seeds = list(cfg.dense_seeds if seeds is None else seeds)
        model = table_softmax_heads(seeds, len(family.tokens),
                                    np.asarray(family.token_ids).shape[1],
                                    score_dim=cfg.score_dim,
                                    query_position=int(family.query_position), d=cfg.d,
                                    qk_std=cfg.qk_std)
        return model, [("dense", 0, s) for s in seeds]
    return _nka_heads(cfg, family, group, list(cfg.seeds if seeds is None else seeds),
                      max(group))


def train_e1_unit(cfg: E1Config, family, group: Sequence[int] | None,
                  seeds: Sequence[int] | None = None, device="cpu"):
    """Train one unit of :func:`build_unit`; returns (per-model records, TrainResult)."""
    model, labels = build_unit(cfg, family, group, seeds)
    res = train_on_family(cfg, family, model, check_device(device))
    return model_records(res, labels), res


def train_unit(cfg: E1Config, family, group, seeds, device) -> tuple[dict, object]:
    """One sweep unit, :func:`train_e1_unit` without the checks: ({"models": records}, the
    trained module)."""
    model, labels = unit_models(cfg, family, group, seeds)
    res = train_on_family(cfg, family, model, device)
    return {"models": model_records(res, labels)}, res.model


def run_e1_sweep(config: E1Config, device="cpu", progress: bool = False, out=None,
                 restart: bool = False, family=None, keep_models: bool = False,
                 scheduler: str | None = None, threads: int = 1) -> dict:
    """Run (or resume) an E1 sweep: 'nka_r<group>' units, then 'dense' (x seed blocks)."""
    cfg = check_instance(config, "config", E1Config)
    device = str(check_device(device))
    if family is None:
        family = e1_family(cfg)
    elif cfg.family in FAMILIES:
        family = check_instance(family, "family", WitnessFamily)
        cfg = dataclasses.replace(cfg, family="custom:" + family_digest(family))
    plan = [("nka_r" + "-".join(map(str, g)), g, cfg.seeds) for g in cfg.rank_groups]
    plan += [("dense", None, cfg.dense_seeds)] if cfg.dense_seeds else []
    return run_sweep(cfg, seed_units(plan, train_unit, cfg, family, device), out, restart,
                     scheduler, threads, progress, keep_models)


def summarise_e1(results: dict) -> list[dict]:
    """Per rank (then 'dense'): max error median / min / max, median share within 1/2, solved."""
    recs = sweep_records(results)
    keys = sorted({r["rank"] for r in recs if r["kind"] == "nka"}) + (
        ["dense"] if any(r["kind"] == "dense" for r in recs) else [])
    rows = []
    for key in keys:
        sel = [r for r in recs if (r["kind"] == "dense" if key == "dense"
                                   else (r["kind"] == "nka" and r["rank"] == key))]
        err = np.array([r["best_max_error"] for r in sel])
        frac = np.array([r["fraction_within_half"] for r in sel])
        rows.append({"r": key, "median_max_error": float(np.median(err)),
                     "min_max_error": float(err.min()), "max_max_error": float(err.max()),
                     "median_fraction_within_half": float(np.median(frac)),
                     "solved": int((err < 0.5).sum()), "seeds": len(sel)})
    return rows


def summary_table(rows: list[dict], caption: str | None = None) -> Table:
    """The rows of :func:`summarise_e1` as a table (max error median [min, max], solved)."""
    try:
        cells = [{"r": row["r"], "max error: median": row["median_max_error"],
                  "[min, max]": f"[{row['min_max_error']:.3f}, {row['max_max_error']:.3f}]",
                  "within 1/2": row["median_fraction_within_half"],
                  "solved": f"{row['solved']}/{row['seeds']}"} for row in rows]
    except (KeyError, TypeError, IndexError, ValueError) as exc:
        raise ValueError(f"rows must be the rows of summarise_e1 ({exc!r:.80})") from exc
    return Table(cells, caption=caption, formats={"max error: median": ".3f", "within 1/2": ".3f"})


def consistency_violations(results: dict, r_star: int) -> list[dict]:
    """NKA records with rank < r_star and max error < 1/2, which the certified bound forbids."""
    r_star = check_int(r_star, "r_star", 0)
    return [r for r in sweep_records(results)
            if r["kind"] == "nka" and r["rank"] < r_star and r["best_max_error"] < 0.5]


def dense_init_statistics(family: WitnessFamily, seeds: Sequence[int], qk_std: float,
                          score_dim: int = 24) -> dict:
    """At initialisation, the dense heads' logit std, mean largest weight, share above 0.99
    (seeds, qk_std and score_dim checked by :class:`HeadConfig`, the heads' boundary)."""
    family = check_instance(family, "family", WitnessFamily)
    ids = torch.as_tensor(family.token_ids)
    q = family.query_position
    heads = table_softmax_heads(seeds, len(family.tokens), score_dim=score_dim, qk_std=qk_std,
                                query_position=q)
    with torch.no_grad():
        la, _ = heads.pair_tables()
        x = ids[:, q]
        logits = torch.stack([la[:, 0, x, ids[:, p]] for p in range(ids.shape[1])], dim=-1)
        w = torch.softmax(logits, dim=-1)
    return {"logit_std": logits.std().item(), "mean_largest_weight": w.amax(-1).mean().item(),
            "saturated_share": (w.amax(-1) > 0.99).float().mean().item()}


def link_checks(head, family: WitnessFamily) -> list[LinkCheck]:
    """Lemma B, live, per chain link: errors on its pure and mixed rows, D(x;z)/D(x;z'), float64."""
    check_instance(family, "family", WitnessFamily)
    err = np.abs(kernel_attention(head, family.sequences, family.convention) - family.targets)
    D = total_weights(head, family.sequences, family.convention)  # the head checked above
    n = family.n
    return [LinkCheck.from_errors(link.gap, 1, n - 2, err[list(link.pure_rows)],
                                  err[list(link.mixed_rows)].max(),
                                  D[link.pure_rows[0]] / D[link.pure_rows[1]])
            for link in family.links]


def load_e1_results(path) -> dict:
    """A stored E1 sweep (the JSON :func:`run_e1_sweep` writes)."""
    return load_sweep(path, "E1 results file")


#: What chapter 6 re-trains live (seconds): a failing and a solving rank of the quick mode's
#: large rank group (padded to 32), seed 0; checked against results/e1_quick.json.
E1_LIVE_RANKS = (16, 32)
E1_LIVE_SEEDS = (0,)


def train_e1_live(config: E1Config, family: WitnessFamily, ranks: Sequence[int] = E1_LIVE_RANKS,
                  seeds: Sequence[int] = E1_LIVE_SEEDS, device="cpu"):
    """Train ``ranks`` x ``seeds`` padded to their rank group's largest rank, as in the sweep."""
    cfg = check_instance(config, "config", E1Config)
    ranks = tuple(sorted(set(check_int_sequence(ranks, "ranks", 1))))
    groups = [g for g in cfg.rank_groups if set(ranks) <= set(g)]
    if not groups:
        raise ValueError(f"ranks must lie in one rank group of the configuration "
                         f"{[list(g) for g in cfg.rank_groups]}, got {list(ranks)}")
    seeds = tuple(check_int_sequence(seeds, "seeds", 0))
    model, labels = _nka_heads(cfg, family, ranks, seeds, max(groups[0]))
    res = train_on_family(cfg, family, model, device)
    return model_records(res, labels, full=False), res.model


def model_values(records, quantity: str = "best_max_error") -> dict:
    """{(kind, rank, seed): value} of E1 records (a list, or a sweep result's units)."""
    if isinstance(records, dict):
        try:
            records = sweep_records(records)
        except ValueError as exc:  # name the argument
            raise ValueError(f"records: {exc}") from exc
    try:
        return {(r["kind"], r["rank"], r["seed"]): float(r[quantity]) for r in records}
    except (KeyError, TypeError, IndexError, ValueError) as exc:
        raise ValueError(f"records must be E1 model records holding kind, rank, seed and the "
                         f"quantity {quantity!r:.60} ({exc!r:.80})") from exc
