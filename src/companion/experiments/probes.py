"""Chapter 8's sweep on E1's F(S) and training: signed heads (``signed_pos`` NKA start,
``signed_shared`` shared keys, ``signed_columns`` half the columns negated) and ``multi_H<H>``
(H NKA heads) against the certified bounds (``prf:prop-signed-certificate``,
``prf:prop-two-heads``). Solving models below ``verify_below`` are re-verified exactly."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from companion.book import Table
from companion.bounds.rank_bounds import RankLowerBound
from companion.bounds.witness import WitnessFamily
from companion.checks import check_device, check_instance, check_int, check_int_sequence
from companion.core.exact import HeadTables, exact_table_max_error
from companion.experiments.e1 import (
    TrainingConfig,
    experiment_witness_24,
    family_digest,
    model_records,
    train_on_family,
)
from companion.experiments.heads import multi_heads, signed_heads
from companion.experiments.sweep import run_sweep, seed_units, sweep_records
from companion.open.signed import signed_rank_lower_bound

__all__ = ["ProbeConfig", "run_probe_sweep", "summarise_probes", "probe_table",
           "signed_bound_violations", "e1_probe_rows", "probe_figure", "PROBES_FULL",
           "PROBES_QUICK", "PROBES_SMOKE"]
#: family_digest(experiment_witness_24()): a family passed to run_probe_sweep must match it.
EXPERIMENT_FAMILY_DIGEST = "52421ecaca8ff2c9"


@dataclass(frozen=True)
class ProbeConfig(TrainingConfig):
    """One chapter-8 sweep; an empty grid skips its unit. Defaults: :data:`PROBES_FULL`."""

    family: str = "experiment_witness_24"
    signed_ranks: tuple[int, ...] = (16, 20, 24, 28, 32)
    shared_ranks: tuple[int, ...] = (12, 20)
    columns_ranks: tuple[int, ...] = (16, 32)
    multi_heads: tuple[int, ...] = (2, 4, 8)
    multi_totals: tuple[int, ...] = (2, 4, 8, 16)
    gain_scale: float = 0.1
    verify_below: int = 20
    seed_block: int | None = 3

    def __post_init__(self):
        put = self._put
        if not isinstance(self.family, str) or self.family != "experiment_witness_24":
            raise ValueError(f"family must be 'experiment_witness_24', got {self.family!r}")
        for name in ("signed_ranks", "shared_ranks", "columns_ranks", "multi_totals"):
            put(name, tuple(sorted(set(check_int_sequence(getattr(self, name), name, 1,
                                                          4096, allow_empty=True)))))
        put("multi_heads", tuple(sorted(set(check_int_sequence(
            self.multi_heads, "multi_heads", 2, 64, allow_empty=True)))))
        put("seeds", tuple(check_int_sequence(self.seeds, "seeds", 0, 2**32 - 1)))
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds must be distinct and not empty, got {self.seeds}")
        self._check_training(("d",), ("phi_std", "gain_scale"))
        put("verify_below", check_int(self.verify_below, "verify_below", 0, 4096))


#: The committed full run (``probes --full``, results/probes_full.json): E1's full schedule
#: and seeds 0-4 in blocks of 3 (12 units, so ``--scheduler local:2`` stays busy).
PROBES_FULL = ProbeConfig()

#: What the chapter re-trains live (seconds), checked against results/probes_quick.json.
PROBES_QUICK = dataclasses.replace(PROBES_FULL, signed_ranks=(), shared_ranks=(),
                                   columns_ranks=(), multi_heads=(4,), multi_totals=(4,),
                                   seeds=(0, 1), steps=200, surrogate_steps=100,
                                   seed_block=None)

#: Installation / cluster check (``--smoke``, the tests): every unit kind, tiny grids, 30 steps.
PROBES_SMOKE = dataclasses.replace(PROBES_FULL, signed_ranks=(2,), shared_ranks=(2,),
                                   columns_ranks=(2,), multi_heads=(2,), multi_totals=(4,),
                                   seeds=(0,), steps=20, surrogate_steps=10, seed_block=None)


#: The signed kinds and their rank grids.
_SIGNED = {"signed_pos": "signed_ranks", "signed_shared": "shared_ranks",
           "signed_columns": "columns_ranks"}


def _plan(cfg: ProbeConfig) -> list[tuple[str, str, tuple[int, ...]]]:
    """(unit key, model kind, seeds) of every model kind, in run order."""
    kinds = [k for k, grid in _SIGNED.items() if getattr(cfg, grid)]
    kinds += [f"multi_H{h}" for h in cfg.multi_heads
              if any(t % h == 0 for t in cfg.multi_totals)]
    return [(kind, kind, cfg.seeds) for kind in kinds]


def _build(cfg: ProbeConfig, family, kind: str, seeds: tuple[int, ...]):
    """One unit's stacked models and their labels (kind, heads, rank, total rank, seed)."""
    num_tokens, n = len(family.tokens), np.asarray(family.token_ids).shape[1]
    signed, seeds = kind.startswith("signed"), list(seeds)
    h = 1 if signed else int(kind.removeprefix("multi_H"))
    grid = getattr(cfg, _SIGNED[kind]) if signed else [t // h for t in cfg.multi_totals
                                                        if t % h == 0]
    ranks, ss = [r for r in grid for _ in seeds], [s for _ in grid for s in seeds]
    common = {"query_position": int(family.query_position), "d": cfg.d, "phi_std": cfg.phi_std}
    model = (signed_heads(ranks, ss, num_tokens, n, positional=kind != "signed_shared",
                          gain_scale=cfg.gain_scale, **common,
                          sign_init="columns" if kind == "signed_columns" else "positive")
             if signed else multi_heads([h] * len(ranks), ranks, ss, num_tokens, n, **common))
    return model, [(kind if signed else "multi", h, r, h * r, s) for r, s in zip(ranks, ss)]


def denominator_structure(tables: HeadTables, family: WitnessFamily) -> dict:
    """Signs of a single head's denominators on the family (float64): sign_consistent (each
    query's share one sign: part (a) of the signed certificate applies), arrangement_flips
    (mixed links whose arrangements' signs differ) and the shares of negative values."""
    (fq, fk, _, _), = tables.heads
    ids = np.asarray(family.token_ids)
    n = ids.shape[1]
    pos = np.arange(n) if tables.positional else np.zeros(n, dtype=np.int64)
    x = ids[:, family.query_position]
    alpha = np.stack([(fq[x] * fk[pos[p], ids[:, p]]).sum(-1) for p in range(n)], -1)
    den = alpha.sum(-1)
    qid = np.asarray(family.query_ids)
    consistent = all(bool(np.all(den[qid == i] > 0) or np.all(den[qid == i] < 0))
                     for i in np.unique(qid))
    flips = sum(int(np.sign(den[lk.mixed_rows[0]]) != np.sign(den[lk.mixed_rows[-1]]))
                for lk in family.links)
    return {"sign_consistent": consistent, "arrangement_flips": flips,
            "negative_rows": int((den < 0).sum()),
            "negative_weights": round(float((alpha < 0).mean()), 6),
            "negative_features": round(float(((fq < 0).mean() + (fk < 0).mean()) / 2), 6)}


def _verify(tables: HeadTables, family) -> dict:
    try:
        err = exact_table_max_error(tables, family.token_ids, np.asarray(family.targets))
    except ValueError as exc:  # a vanishing denominator: no output there, not a solution
        return {"exact_max_error": None, "exact_solved": False, "exact_note": str(exc)}
    return {"exact_max_error": str(err), "exact_solved": bool(err < Fraction(1, 2))}


def _unit(cfg: ProbeConfig, family, kind: str, seeds: tuple[int, ...], device: str):
    model, labels = _build(cfg, family, kind, seeds)
    res = train_on_family(cfg, family, model, device)
    records = model_records(res, labels, ("kind", "heads", "rank", "total_rank", "seed"))
    for i, rec in enumerate(records):
        tables = res.model.cpu().export(i)
        if rec["kind"].startswith("signed"):
            rec.update(denominator_structure(tables, family))
        if rec["best_max_error"] < 0.5 and rec["total_rank"] < cfg.verify_below:
            rec.update(_verify(tables, family))
    return {"models": records}, res.model


def run_probe_sweep(config: ProbeConfig, device: str = "cpu", progress: bool = False,
                    out=None, restart: bool = False, keep_models: bool = False,
                    family: WitnessFamily | None = None, scheduler: str | None = None,
                    threads: int = 1) -> dict:
    """Run (or resume) the sweep: each kind of :func:`_plan` x a seed block, on E1's family."""
    cfg = check_instance(config, "config", ProbeConfig)
    device = str(check_device(device))
    if family is None:
        family = experiment_witness_24()
    elif family_digest(check_instance(family, "family", WitnessFamily)) \
            != EXPERIMENT_FAMILY_DIGEST:
        raise ValueError("family must be experiment_witness_24() (the configuration's family)")
    return run_sweep(cfg, seed_units(_plan(cfg), _unit, cfg, family, device), out, restart,
                     scheduler, threads, progress, keep_models)


_ROW_KEYS = ("kind", "heads", "total_rank", "median_max_error", "min_max_error",
             "max_max_error", "solved", "seeds", "exact", "checked")


def _check_rows(rows) -> list[dict]:
    if not isinstance(rows, (list, tuple)) or not all(
            isinstance(r, dict) and all(k in r for k in _ROW_KEYS) for r in rows):
        raise ValueError(f"rows must be a list of summarise_probes rows (keys {_ROW_KEYS})")
    return list(rows)


def summarise_probes(results: dict) -> list[dict]:
    """Per (kind, heads, total rank): best max error median / min / max, solved, exactly solved."""
    groups: dict = {}
    for rec in sweep_records(results):
        try:
            key = (str(rec["kind"]), int(rec["heads"]), int(rec["total_rank"]))
            float(rec["best_max_error"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"results: a record lacks kind/heads/total_rank/best_max_error "
                             f"({exc!r:.80})") from exc
        groups.setdefault(key, []).append(rec)
    rows = []
    for (kind, h, total), recs in sorted(groups.items()):
        err = np.array([r["best_max_error"] for r in recs], dtype=float)
        checked = [r for r in recs if "exact_solved" in r]
        rows.append({"kind": kind, "heads": h, "rank": total // h, "total_rank": total,
                     "median_max_error": float(np.median(err)), "min_max_error": float(err.min()),
                     "max_max_error": float(err.max()), "solved": int((err < 0.5).sum()),
                     "seeds": len(recs), "checked": len(checked),
                     "exact": sum(bool(r["exact_solved"]) for r in checked)})
    return rows


def probe_table(rows: list[dict], caption: str | None = None) -> Table:
    """Rows of :func:`summarise_probes` as a table (max error median [min, max], solved)."""
    rows = _check_rows(rows)
    return Table([{"model": row["kind"] if row["kind"] != "multi" else f"{row['heads']} heads",
                   "H r": row["total_rank"], "max error": row["median_max_error"],
                   "[min, max]": f"[{row['min_max_error']:.3f}, {row['max_max_error']:.3f}]",
                   "solved": f"{row['solved']}/{row['seeds']}",
                   "exact": f"{row['exact']}/{row['checked']}" if row["checked"] else "-"}
                  for row in rows], caption=caption, formats={"max error": ".3f"})


def signed_bound_violations(results: dict, bound: RankLowerBound) -> list[dict]:
    """Signed records exactly solved below the signed certificate's part (a) bound (one sign
    per query) or part (b) bound (shared keys); other signed heads have no known bound."""
    check_instance(bound, "bound", RankLowerBound)
    bad = []
    for rec in sweep_records(results):
        if not str(rec.get("kind", "")).startswith("signed") or not rec.get("exact_solved"):
            continue
        if rec.get("sign_consistent"):
            need = signed_rank_lower_bound(bound, "positive")
        elif rec["kind"] == "signed_shared":
            need = signed_rank_lower_bound(bound, "shared_keys")
        else:
            continue
        if not isinstance(rec.get("rank"), int):
            raise ValueError("results: a signed record lacks its int rank")
        if rec["rank"] < need:
            bad.append(rec)
    return bad


def e1_probe_rows(e1_results: dict) -> list[dict]:
    """E1's committed NKA records as rows of :func:`summarise_probes` (kind 'nka', H = 1)."""
    try:
        recs = [{**r, "heads": 1, "total_rank": r["rank"]}
                for r in sweep_records(e1_results) if r.get("kind") == "nka"]
    except (KeyError, ValueError) as exc:
        raise ValueError(f"e1_results: {exc}") from exc
    return summarise_probes({"units": {"e1": {"models": recs}}})


_STYLES = {"nka": ("NKA, one head (E1)", "k", "o"),
           "signed_pos": ("signed, NKA start", "tab:red", "s"),
           "signed_shared": ("signed, shared keys", "tab:orange", "D"),
           "signed_columns": ("signed, signed start", "tab:brown", "X"),
           2: ("2 NKA heads", "tab:blue", "^"), 4: ("4 NKA heads", "tab:green", "v"),
           8: ("8 NKA heads", "tab:purple", "P")}


def probe_figure(rows: list[dict], bound: RankLowerBound, ax=None):
    """Best max error against total feature rank H r per model class, with 1/2 and the bounds."""
    import matplotlib.pyplot as plt

    check_instance(bound, "bound", RankLowerBound)
    rows = _check_rows(rows)
    if ax is None:
        _, ax = plt.subplots(figsize=(7.0, 4.4))
    floor = 1e-5  # plotted floor of (near-)zero errors
    groups: dict = {}
    for row in rows:
        key = row["heads"] if row["kind"] == "multi" else row["kind"]
        groups.setdefault(key, []).append(row)
    for key, rs in groups.items():
        label, color, marker = _STYLES.get(key, (str(key), "gray", "x"))
        rs = sorted(rs, key=lambda r: r["total_rank"])
        med = np.maximum([r["median_max_error"] for r in rs], floor)
        lo = np.maximum([r["min_max_error"] for r in rs], floor)
        hi = np.maximum([r["max_max_error"] for r in rs], floor)
        ax.errorbar([r["total_rank"] for r in rs], med, yerr=[med - lo, hi - med], color=color,
                    marker=marker, capsize=3, label=label, lw=1.2, ms=5)
    ax.axhline(0.5, color="gray", ls=":", lw=1)
    ax.text(0.01, 0.5, " error 1/2", color="gray", va="bottom", fontsize=9,
            transform=ax.get_yaxis_transform())
    ax.axvspan(bound.rank, 128, color="0.93", zorder=0)
    ax.axvline(bound.rank, color="k", ls="--", lw=1)
    ax.text(bound.rank, 0.02, f" NKA certificate $r \\geq {bound.rank}$", fontsize=9,
            transform=ax.get_xaxis_transform())
    for setting, ls, y in (("positive", "-.", 0.9), ("shared_keys", ":", 0.97)):
        rank = signed_rank_lower_bound(bound, setting)
        ax.axvline(rank, color="tab:red", ls=ls, lw=0.8)
        ax.text(rank, y, f"signed {'(a)' if setting == 'positive' else '(b)'}: {rank} ",
                color="tab:red", fontsize=9, ha="right", va="top",
                transform=ax.get_xaxis_transform())
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("total feature rank $H r$")
    ax.set_ylabel("best max error on $F(S)$")
    ax.legend(fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3)
    return ax
