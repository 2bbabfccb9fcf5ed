"""Chapter 8's experiments: signed heads and several heads against the certified bound.

Two sweeps, both resumable (each finished unit is stored at once, see
:class:`companion.sweeps.ResultStore`):

* **Witness sweep** (:func:`run_probe_sweep`) on E1's witness family, E1's protocol (lr,
  schedule, surrogate, d = 16, seeds): signed heads (:class:`TableSignedHeads`) at ranks
  around and below the certified bound, with position-dependent keys and with shared keys;
  several NKA heads (:class:`TableMultiHeads`) H in {1, 2, 4, 8} at matched total rank H r.
  Units: ``signed_pos``, ``signed_shared``, ``multi_H<H>``.
* **All-inputs sweep** (:func:`run_all_inputs_probe`): every length-3 input in {0,1}^m at
  small m, NKA vs signed vs two heads, to find the smallest rank that trains to error < 1/2.

Every model reported as solving (max error < 1/2) with total rank below the NKA certificate
is re-verified in exact rational arithmetic (:func:`companion.probe_heads.exact_table_outputs`)
and stored with its exact max error; signed models also store the sign structure of their
denominators, which decides which of the chapter's signed bounds applies to them.

CLI: ``python -m companion.probes [--full|--quick] [--out PATH]``.
"""

from __future__ import annotations

import copy
import time
from fractions import Fraction

import numpy as np

__all__ = [
    "PROBES_FULL",
    "PROBES_QUICK",
    "ALL_INPUTS_QUICK",
    "check_probe_config",
    "probe_units",
    "run_probe_sweep",
    "summarise_probes",
    "signed_bound_violations",
    "denominator_structure",
    "run_all_inputs_probe",
    "all_inputs_family",
    "e1_rows",
    "probe_figure",
    "main",
]

#: Full size (``python -m companion.probes --full``): E1's full protocol and seeds. One head
#: (H = 1) is E1 itself: the chapter reads it from results/e1_full.json instead of retraining.
PROBES_FULL: dict = {
    "family": "experiment_witness_24",
    "signed_ranks": [8, 12, 16, 19, 20, 24, 28, 32],
    "shared_ranks": [8, 12, 16, 19, 20],
    "signed_positional": [True, False],
    "signed_parametrisation": "gexp",
    "gain_scale": 0.1,
    "sign_init": "positive",
    "multi_heads": [2, 4, 8],
    "multi_totals": [2, 4, 8, 16, 24],
    "seeds": [0, 1, 2, 3, 4],
    "d": 16,
    "phi_std": 1.0,
    "lr": 0.03,
    "final_lr_fraction": 0.02,
    "steps": 3000,
    "surrogate_steps": 2000,
    "surrogate_power": 16,
    "verify_below": 20,
}

#: The book's quick mode: E1's quick schedule, 3 seeds, the smallest informative grid.
PROBES_QUICK: dict = {
    **PROBES_FULL,
    "signed_ranks": [16, 32],
    "shared_ranks": [],
    "signed_positional": [True],
    "multi_heads": [4],
    "multi_totals": [4, 8],
    "seeds": [0, 1, 2],
    "steps": 1200,
    "surrogate_steps": 800,
}


def _check_int(value, name, low, high=None):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < low or (high is not None and value > high):
        rng = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be an int in {rng}, got {value}")
    return int(value)


def _check_ints(values, name, low):
    if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple)):
        raise TypeError(f"{name} must be a list of ints")
    return [_check_int(v, f"{name}[{i}]", low) for i, v in enumerate(values)]


def check_probe_config(config: dict) -> dict:
    """Validate a probe configuration (missing keys default to PROBES_FULL); normalised copy."""
    if not isinstance(config, dict):
        raise TypeError(f"config must be a dict, got {type(config).__name__}")
    unknown = set(config) - set(PROBES_FULL)
    if unknown:
        raise ValueError(f"config has unknown keys {sorted(unknown)}; known: {sorted(PROBES_FULL)}")
    cfg = copy.deepcopy({**PROBES_FULL, **config})
    if cfg["family"] != "experiment_witness_24":
        raise ValueError(f"family must be 'experiment_witness_24', got {cfg['family']!r}")
    cfg["signed_ranks"] = sorted(set(_check_ints(cfg["signed_ranks"], "signed_ranks", 1)))
    cfg["shared_ranks"] = sorted(set(_check_ints(cfg["shared_ranks"], "shared_ranks", 1)))
    if not isinstance(cfg["signed_positional"], (list, tuple)) or not all(
            isinstance(v, bool) for v in cfg["signed_positional"]):
        raise TypeError("signed_positional must be a list of bools")
    cfg["signed_positional"] = sorted(set(cfg["signed_positional"]), reverse=True)
    cfg["multi_heads"] = sorted(set(_check_ints(cfg["multi_heads"], "multi_heads", 1)))
    cfg["multi_totals"] = sorted(set(_check_ints(cfg["multi_totals"], "multi_totals", 1)))
    cfg["seeds"] = _check_ints(cfg["seeds"], "seeds", 0)
    if not cfg["seeds"]:
        raise ValueError("seeds must not be empty")
    for key in ("d", "steps"):
        cfg[key] = _check_int(cfg[key], key, 1)
    cfg["surrogate_steps"] = _check_int(cfg["surrogate_steps"], "surrogate_steps", 0)
    cfg["surrogate_power"] = _check_int(cfg["surrogate_power"], "surrogate_power", 2, 1024)
    cfg["verify_below"] = _check_int(cfg["verify_below"], "verify_below", 0)
    if cfg["sign_init"] not in ("positive", "columns", "symmetric"):
        raise ValueError(f"sign_init must be 'positive', 'columns' or 'symmetric', got "
                         f"{cfg['sign_init']!r}")
    if cfg["signed_parametrisation"] not in ("gexp", "raw"):
        raise ValueError("signed_parametrisation must be 'gexp' or 'raw', got "
                         f"{cfg['signed_parametrisation']!r}")
    for key, hi in (("phi_std", 100.0), ("lr", 10.0), ("final_lr_fraction", 1.0),
                    ("gain_scale", 100.0)):
        v = cfg[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < float(v) <= hi:
            raise ValueError(f"{key} must be a number in (0, {hi}], got {v!r}")
        cfg[key] = float(v)
    return cfg


def probe_units(cfg: dict) -> list[tuple]:
    """The sweep's units: ('signed', positional) and ('multi', H, [(r, total), ...])."""
    units: list[tuple] = [("signed", p) for p in cfg["signed_positional"]
                          if cfg["signed_ranks" if p else "shared_ranks"]]
    for h in cfg["multi_heads"]:
        totals = [t for t in cfg["multi_totals"] if t % h == 0]
        if totals:
            units.append(("multi", h, tuple((t // h, t) for t in totals)))
    return units


def unit_key(unit: tuple) -> str:
    if unit[0] == "signed":
        return "signed_pos" if unit[1] else "signed_shared"
    return f"multi_H{unit[1]}"


def _family_tensors(family):
    import torch

    ids = torch.as_tensor(np.asarray(family.token_ids, dtype=np.int64))
    y = torch.as_tensor(np.asarray(family.targets, dtype=np.float64), dtype=torch.float32)
    return ids, y


def build_probe_unit(cfg: dict, family, unit: tuple):
    """The stacked models of one unit and their labels (kind, heads, rank, seed)."""
    from .probe_heads import TableMultiHeads, TableSignedHeads

    T = len(family.tokens)
    n = np.asarray(family.token_ids).shape[1]
    qpos = int(family.query_position)
    seeds = cfg["seeds"]
    if unit[0] == "signed":
        grid = cfg["signed_ranks"] if unit[1] else cfg["shared_ranks"]
        ranks = [r for r in grid for _ in seeds]
        ss = [s for _ in grid for s in seeds]
        model = TableSignedHeads(ranks, ss, T, n, query_position=qpos, d=cfg["d"],
                                 positional=unit[1], phi_std=cfg["phi_std"],
                                 parametrisation=cfg["signed_parametrisation"],
                                 gain_scale=cfg["gain_scale"], sign_init=cfg["sign_init"])
        kind = "signed_pos" if unit[1] else "signed_shared"
        return model, [(kind, 1, r, s) for r, s in zip(ranks, ss)]
    h, pairs = unit[1], unit[2]
    ranks = [r for r, _ in pairs for _ in seeds]
    ss = [s for _ in pairs for s in seeds]
    model = TableMultiHeads([h] * len(ranks), ranks, ss, T, n, query_position=qpos, d=cfg["d"],
                            phi_std=cfg["phi_std"])
    return model, [("multi", h, r, s) for r, s in zip(ranks, ss)]


def denominator_structure(tables, family) -> dict:
    """Signs of a single head's denominators on the family (float64 evaluation):
    min_abs_relative = min over rows of |D| / max over the query's rows of |D|;
    sign_consistent = every query's rows share one sign (then flipping phi_Q(x) makes every
    denominator positive: the 'positive' convention, Proposition S(a));
    arrangement_flips = mixed links whose two arrangements have opposite signs;
    negative_weights = fraction of the family's alpha_p(x, x_p) that are negative;
    negative_features = fraction of negative feature entries (query and key tables)."""
    (fq, fk, _, _), = tables.heads
    ids = np.asarray(family.token_ids)
    n = ids.shape[1]
    pos = np.arange(n) if tables.positional else np.zeros(n, dtype=np.int64)
    x = ids[:, family.query_position]
    alpha = np.stack([(fq[x] * fk[pos[p], ids[:, p]]).sum(-1) for p in range(n)], -1)
    den = alpha.sum(-1)
    qid = np.asarray(family.query_ids)
    consistent, rel = True, np.inf
    for i in np.unique(qid):
        d = den[qid == i]
        consistent &= bool(np.all(d > 0) or np.all(d < 0))
        rel = min(rel, float(np.abs(d).min() / np.abs(d).max()))
    flips = sum(int(np.sign(den[lk.mixed_rows[0]]) != np.sign(den[lk.mixed_rows[-1]]))
                for lk in family.links)
    return {"sign_consistent": consistent, "min_abs_relative": rel,
            "arrangement_flips": flips, "negative_rows": int((den < 0).sum()),
            "negative_weights": round(float((alpha < 0).mean()), 6),
            "negative_features": round(float(((fq < 0).mean() + (fk < 0).mean()) / 2), 6)}


def _verify(tables, family) -> dict:
    from .probe_heads import exact_table_outputs

    try:
        out, _ = exact_table_outputs(tables, family.token_ids)
    except ValueError as exc:  # a vanishing denominator: not a solution
        return {"exact_max_error": None, "exact_solved": False, "exact_note": str(exc)}
    err = max(abs(y - Fraction(int(t))) for y, t in zip(out, np.asarray(family.targets).tolist()))
    return {"exact_max_error": str(err), "exact_max_error_float": float(err),
            "exact_solved": bool(err < Fraction(1, 2))}


def train_probe_unit(cfg: dict, family, unit: tuple, device="cpu", progress=False):
    """Train one unit; returns (records, TrainResult)."""
    from .train import train_batched

    model, labels = build_probe_unit(cfg, family, unit)
    ids, y = _family_tensors(family)
    res = train_batched(model, ids, y, steps=cfg["steps"], lr=cfg["lr"],
                        final_lr_fraction=cfg["final_lr_fraction"],
                        surrogate_steps=cfg["surrogate_steps"],
                        surrogate_power=cfg["surrogate_power"], seed=0, device=device,
                        progress=progress)
    records = []
    for i, (kind, h, r, s) in enumerate(labels):
        rec = {"kind": kind, "heads": h, "rank": r, "total_rank": h * r, "seed": s,
               "best_max_error": round(float(res.best_max_error[i]), 6),
               "fraction_within_half": round(float(res.fraction_within_half[i]), 6),
               "final_max_error": round(float(res.final_max_error[i]), 6),
               "best_step": int(res.best_step[i])}
        tables = res.model.export(i)
        if kind.startswith("signed"):
            rec.update(denominator_structure(tables, family))
        if rec["best_max_error"] < 0.5 and h * r < cfg["verify_below"]:
            rec.update(_verify(tables, family))
        records.append(rec)
    return records, res


def _environment(device="cpu") -> dict:
    import torch

    return {"torch": torch.__version__.split("+")[0],
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "threads": torch.get_num_threads(), "device": str(device)}


def run_probe_sweep(config: dict, device="cpu", progress: bool = False, out=None,
                    restart: bool = False, keep_models: bool = False) -> dict:
    """Run (or resume) the witness sweep. Returns {"config", "config_hash", "units",
    "models"}; units maps a unit key to {"models": [records], "wall_time", "environment"}."""
    from .sweeps import ResultStore
    from .witness import experiment_witness_24

    cfg = check_probe_config(config)
    family = experiment_witness_24()
    store = ResultStore(out, cfg, restart=restart)
    models = {}
    units = probe_units(cfg)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(units), desc="probe units")
    for unit in units:
        key = unit_key(unit)
        if not store.done(key):
            start = time.perf_counter()
            records, res = train_probe_unit(cfg, family, unit, device, progress)
            store.put(key, {"models": records, "wall_time": round(time.perf_counter() - start, 2),
                            "environment": _environment(device)})
            if keep_models:
                models[key] = res.model
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    result = store.as_dict()
    result["models"] = models
    return result


def _records(results: dict) -> list[dict]:
    return [rec for unit in results["units"].values() for rec in unit["models"]]


def summarise_probes(results: dict) -> list[dict]:
    """Per (kind, heads, total rank): max error median / min / max over seeds, median
    fraction within 1/2, solved seeds, and exactly verified solved seeds."""
    groups: dict = {}
    for rec in _records(results):
        groups.setdefault((rec["kind"], rec["heads"], rec["total_rank"]), []).append(rec)
    rows = []
    for (kind, h, total), recs in sorted(groups.items()):
        err = np.array([r["best_max_error"] for r in recs])
        frac = np.array([r["fraction_within_half"] for r in recs])
        verified = [r for r in recs if "exact_solved" in r]
        rows.append({"kind": kind, "heads": h, "rank": total // h, "total_rank": total,
                     "median_max_error": float(np.median(err)), "min_max_error": float(err.min()),
                     "max_max_error": float(err.max()),
                     "median_fraction_within_half": float(np.median(frac)),
                     "solved": int((err < 0.5).sum()), "seeds": len(recs),
                     "verified": sum(bool(r["exact_solved"]) for r in verified)
                     if verified else None})
    return rows


def signed_bound_violations(results: dict, bound) -> list[dict]:
    """Signed records that contradict Proposition S: exactly solved with rank below
    rank(M)-bound - 1 where the proposition applies — sign-consistent denominators (bound from
    Lemma D') or shared keys with nonzero denominators (bound from the trace, Lemma D)."""
    from .signed_heads import signed_rank_lower_bound

    bad = []
    for rec in _records(results):
        if not rec["kind"].startswith("signed") or not rec.get("exact_solved"):
            continue
        if rec["sign_consistent"]:
            need = signed_rank_lower_bound(bound, "positive")
        elif rec["kind"] == "signed_shared":
            need = signed_rank_lower_bound(bound, "nonzero_shared_keys")
        else:
            continue  # position-dependent keys with sign changes: no bound is known
        if rec["rank"] < need:
            bad.append(rec)
    return bad


# ------------------------------------------------------------ all length-3 inputs, small m


class AllInputsFamily:
    """Every length-3 input (x, z, z') in {0,1}^m: tokens (2^m, m), token_ids (8^m, 3),
    targets (8^m,), query_position 0."""

    def __init__(self, m: int):
        self.m = _check_int(m, "m", 1, 6)
        self.tokens = ((np.arange(2 ** m)[:, None] >> np.arange(m)) & 1).astype(np.int64)
        t = np.arange(2 ** m)
        ids = np.stack(np.meshgrid(t, t, t, indexing="ij"), -1).reshape(-1, 3)
        ov = self.tokens @ self.tokens.T
        self.token_ids = ids
        self.targets = np.minimum(ov[ids[:, 0], ids[:, 1]], ov[ids[:, 0], ids[:, 2]])
        self.query_position = 0


def all_inputs_family(m: int) -> AllInputsFamily:
    return AllInputsFamily(m)


#: All-inputs probe (quick): m = 3, 4, every rank up to 2^m / 2 + 2, three seeds.
ALL_INPUTS_QUICK: dict = {
    "m": [3, 4],
    "classes": ["nka", "signed", "multi2"],
    "ranks": {3: [1, 2, 3, 4, 5, 6], 4: [2, 3, 4, 5, 6, 8, 10, 12]},
    "seeds": [0, 1, 2],
    "d": 16,
    "lr": 0.03,
    "steps": 1200,
    "surrogate_steps": 800,
}


def _nka_tables(model, i: int):
    """Model i of a TableKernelHeads (exp features) as HeadTables: features exp(raw - max)
    in float64 (the constant shift cancels in the normalisation)."""
    import torch

    from .probe_heads import HeadTables

    r = model.ranks[i]
    with torch.no_grad():
        qr, kr = model.q[i, :, :r].double(), model.k[i, :, :, :r].double()
        return HeadTables(
            heads=((torch.exp(qr - qr.max()).numpy(), torch.exp(kr - kr.max()).numpy(),
                    model.v[i].double().numpy(), model.a[i].double().numpy()),),
            bias=model.b[i].double().numpy(), positional=model.positional,
            query_position=model.query_position)


def run_all_inputs_probe(m: int, kind: str, ranks, seeds, *, d: int = 16, lr: float = 0.03,
                         steps: int = 1200, surrogate_steps: int = 800, verify: bool = True):
    """Train one class on every length-3 input in {0,1}^m; returns per-model records.
    kind: 'nka' (TableKernelHeads), 'signed' (TableSignedHeads), 'multi<H>' (H NKA heads of
    rank r each; total rank H r). Solved models are re-verified exactly (``verify``)."""
    import torch

    from .heads import TableKernelHeads
    from .probe_heads import TableMultiHeads, TableSignedHeads, exact_table_outputs
    from .train import train_batched

    fam = all_inputs_family(m)
    T = len(fam.tokens)
    ranks, seeds = list(ranks), list(seeds)
    rr = [r for r in ranks for _ in seeds]
    ss = [s for _ in ranks for s in seeds]
    heads = 1
    if kind == "nka":
        model = TableKernelHeads(rr, ss, T, d=d)
    elif kind == "signed":
        model = TableSignedHeads(rr, ss, T, d=d)
    elif kind.startswith("multi") and kind[5:].isdigit() and int(kind[5:]) >= 1:
        heads = int(kind[5:])
        model = TableMultiHeads([heads] * len(rr), rr, ss, T, d=d)
    else:
        raise ValueError(f"kind must be 'nka', 'signed' or 'multi<H>', got {kind!r}")
    ids = torch.as_tensor(fam.token_ids)
    y = torch.as_tensor(fam.targets, dtype=torch.float32)
    start = time.perf_counter()
    res = train_batched(model, ids, y, steps=steps, lr=lr, surrogate_steps=surrogate_steps,
                        seed=0)
    wall = time.perf_counter() - start
    records = []
    for i, (r, s) in enumerate(zip(rr, ss)):
        rec = {"m": m, "kind": kind, "heads": heads, "rank": r, "total_rank": heads * r,
               "seed": s, "best_max_error": round(float(res.best_max_error[i]), 6),
               "fraction_within_half": round(float(res.fraction_within_half[i]), 6)}
        if verify and rec["best_max_error"] < 0.5:
            if kind == "nka":
                tables = _nka_tables(res.model, i)
            else:
                tables = res.model.export(i)
            try:
                out, _ = exact_table_outputs(tables, fam.token_ids)
                err = max(abs(v - int(t)) for v, t in zip(out, fam.targets.tolist()))
                rec["exact_max_error"] = str(err)
                rec["exact_solved"] = bool(err < Fraction(1, 2))
            except ValueError as exc:
                rec["exact_solved"] = False
                rec["exact_note"] = str(exc)
        records.append(rec)
    return records, wall


def main(argv=None) -> int:
    """``python -m companion.probes [--full|--quick] [--out PATH] [--restart]``."""
    import argparse

    from .reproducibility import seed_everything

    p = argparse.ArgumentParser(prog="python -m companion.probes",
                                description="Chapter 8's witness sweep (signed and multi-head)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--full", dest="mode", action="store_const", const="full")
    mode.add_argument("--quick", dest="mode", action="store_const", const="quick")
    p.set_defaults(mode="full")
    p.add_argument("--out", default=None)
    p.add_argument("--restart", action="store_true")
    p.add_argument("--no-progress", dest="progress", action="store_false")
    args = p.parse_args(argv)
    seed_everything(0, threads=1)
    out = args.out or f"results/probes_{args.mode}.json"
    cfg = PROBES_FULL if args.mode == "full" else PROBES_QUICK
    res = run_probe_sweep(cfg, progress=args.progress, out=out, restart=args.restart)
    for row in summarise_probes(res):
        print(f"{row['kind']:>13} H={row['heads']} r={row['rank']:>2} Hr={row['total_rank']:>2}: "
              f"max error median {row['median_max_error']:.3f} "
              f"[{row['min_max_error']:.3f}, {row['max_max_error']:.3f}] "
              f"solved {row['solved']}/{row['seeds']} verified {row['verified']}")
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


def e1_rows(e1_results: dict) -> list[dict]:
    """E1's committed NKA records as probe rows (kind 'nka', H = 1), for the figure."""
    rows = []
    for unit in e1_results["units"].values():
        for rec in unit["models"]:
            if rec["kind"] == "nka":
                rows.append({**rec, "kind": "nka", "heads": 1, "total_rank": rec["rank"]})
    return summarise_probes({"units": {"e1": {"models": rows}}})


def probe_figure(rows: list[dict], bound=None, ax=None):
    """Best max error against total feature rank H r, one curve per model class (median over
    seeds, bars from min to max), the exactness line 1/2 and the certified bounds: the NKA
    certificate and, for signed heads, Proposition S's r* - 1 and ceil(T) - 1."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 4.5))
    styles = {"nka": ("NKA, one head", "k", "o"),
              "signed_pos": ("signed, position-dependent keys", "tab:red", "s"),
              "signed_shared": ("signed, shared keys", "tab:orange", "D"),
              2: ("2 NKA heads", "tab:blue", "^"), 4: ("4 NKA heads", "tab:green", "v"),
              8: ("8 NKA heads", "tab:purple", "P")}
    floor = 1e-5  # plotted floor for (near-)zero errors
    groups: dict = {}
    for row in rows:
        key = row["heads"] if row["kind"] == "multi" and row["heads"] > 1 else (
            "nka" if row["kind"] == "multi" else row["kind"])
        groups.setdefault(key, []).append(row)
    for key, rs in groups.items():
        label, color, marker = styles.get(key, (str(key), "gray", "x"))
        rs = sorted(rs, key=lambda r: r["total_rank"])
        x = [r["total_rank"] for r in rs]
        med = [max(r["median_max_error"], floor) for r in rs]
        lo = [max(r["min_max_error"], floor) for r in rs]
        hi = [max(r["max_max_error"], floor) for r in rs]
        ax.errorbar(x, med, yerr=[np.subtract(med, lo), np.subtract(hi, med)], color=color,
                    marker=marker, capsize=3, label=label)
    ax.axhline(0.5, color="gray", ls=":", lw=1)
    ax.text(0.01, 0.5, "error 1/2", color="gray", va="bottom", fontsize=8,
            transform=ax.get_yaxis_transform())
    if bound is not None:
        ax.axvline(bound.rank, color="k", ls="--", lw=1)
        ax.text(bound.rank, 0.98, f" NKA certificate r* = {bound.rank}", fontsize=8,
                va="top", transform=ax.get_xaxis_transform())
        from .signed_heads import signed_rank_lower_bound

        for setting, ls in (("positive", "-."), ("nonzero_shared_keys", ":")):
            ax.axvline(signed_rank_lower_bound(bound, setting), color="tab:red", ls=ls, lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("total feature rank H r")
    ax.set_ylabel("best max error on F(S)")
    ax.legend(fontsize=8, loc="lower left")
    return ax
