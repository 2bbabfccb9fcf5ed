"""Chapter 9: the feature maps of linear attention held against the exact minimum feature rank
of the three witness families (``cor-narrowed-sandwich``, ``cor-nonnegative-rank``).

The maps, written here from their papers' formulas (fla-core's reference versions import triton,
which the CPU lock cannot install): elu + 1 and ReLU (Katharopoulos et al. 2020), Hedgehog
[softmax(u), softmax(-u)] (Zhang et al. 2024), FAVOR+ positive random features (Choromanski et
al. 2021) and Based's second-order Taylor map (Arora et al. 2024). The first three are trained on
learned table projections (:data:`companion.experiments.heads.MAP_FEATURES`) with E1's protocol;
the two fixed maps are decided by the exact LP: with fixed features every query's outputs are
linear in its values, so whether *any* values and readout make the head exact is a feasibility
question, answered with a verified point or a verified Farkas certificate.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from companion.book import Table
from companion.bounds.codes import paley_subset
from companion.bounds.witness import witness_family
from companion.checks import (
    check_array,
    check_choice,
    check_device,
    check_instance,
    check_int_sequence,
)
from companion.core.lp import FarkasCertificate, feasible_point
from companion.experiments.e1 import TrainingConfig, model_records, train_on_family
from companion.experiments.heads import MAP_FEATURES, table_kernel_heads
from companion.experiments.sweep import (
    COUNTS,
    RUN_FIELDS,
    Unit,
    load_sweep,
    records,
    run_sweep,
    sweep_records,
)
from companion.sandwich.windows import FAMILIES, sandwich_windows
from companion.softmax import threshold_closed_form

__all__ = ["elu1", "relu", "hedgehog", "favor", "taylor", "MapsConfig", "MAPS_FULL",
           "MAPS_QUICK", "MAPS_SMOKE", "run_maps_sweep", "summarise_maps", "first_solving",
           "load_maps_results"]

MAPS = (*MAP_FEATURES, "favor", "taylor")
#: A nonnegative map is held against the nonnegative window, Taylor's signed one the real one.
CLASS = {"elu1": "nonnegative", "relu": "nonnegative", "hedgehog": "nonnegative",
         "favor": "nonnegative", "taylor": "real"}
#: FAVOR+ features are rounded to this many bits below each token's largest feature, so that
#: the LP's kernel is an exact integer matrix of rank <= R (a relative change < 2**-32).
FAVOR_BITS = 32


# ------------------------------------------------------------------ the maps (float64, rows)

def elu1(u):
    """elu(u) + 1 = u + 1 (u > 0), e^u (u <= 0): positive everywhere."""
    u = check_array(u, "u").astype(np.float64)
    return np.where(u > 0, u + 1.0, np.exp(np.minimum(u, 0.0)))


def relu(u):
    """max(u, 0)."""
    return np.maximum(check_array(u, "u").astype(np.float64), 0.0)


def _check_vectors(u):
    """u as float64 with a non-empty last axis of features (ValueError naming u)."""
    u = check_array(u, "u").astype(np.float64)
    if u.ndim < 1 or u.shape[-1] < 1:
        raise ValueError(f"u must have a non-empty last axis of features, got shape {u.shape}")
    return u


def _softmax(u):
    e = np.exp(u - u.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def hedgehog(u):
    """[softmax(u), softmax(-u)] over the last axis: 2 k features, each half summing to 1."""
    u = _check_vectors(u)
    return np.concatenate([_softmax(u), _softmax(-u)], -1)


def favor(u, omega):
    """FAVOR+: exp(<omega_i, u> - |u|^2 / 2) / sqrt(R) for the R rows of omega; with omega_i ~
    N(0, I), E <favor(q), favor(k)> = exp(<q, k>) (the softmax kernel, unbiased)."""
    u, omega = _check_vectors(u), check_array(omega, "omega", 2).astype(np.float64)
    if u.shape[-1] != omega.shape[1] or omega.shape[0] < 1:
        raise ValueError(f"u (..., k) and omega (R >= 1, k) must share k, got {u.shape} and "
                         f"{omega.shape}")
    return np.exp(u @ omega.T - (u * u).sum(-1, keepdims=True) / 2) / math.sqrt(len(omega))


def taylor(u):
    """Based's [1, u, vec(u u^T) / sqrt 2]: <taylor(q), taylor(k)> = 1 + <q,k> + <q,k>^2 / 2."""
    u = _check_vectors(u)
    outer = (u[..., :, None] * u[..., None, :]).reshape(*u.shape[:-1], -1) / math.sqrt(2)
    return np.concatenate([np.ones(u.shape[:-1] + (1,)), u, outer], -1)


# ------------------------------------------------------------------ configuration

DIMS = (8, 32, 64, 128)
#: Smallest family first (the plan runs the last one's exact LPs, the costliest, last).
FAMILY_ORDER = ("paley_rows_23", "e1_28", "paley_code_46")


@dataclass(frozen=True)
class MapsConfig(TrainingConfig):
    """One maps sweep. Trained maps (``trained``) at ``dims`` and each family's window ends,
    E1's schedule and table heads; FAVOR+ at ``favor_dims`` (and the window ends), Taylor on
    fixed sign projections of widths ``taylor_widths`` (1 + k + k^2 features), each draw
    (``exact_seeds``) decided by the exact LP; FAVOR+ at temperature beta*(3, 24)."""

    families: tuple[str, ...] = FAMILY_ORDER
    trained: tuple[str, ...] = MAP_FEATURES
    dims: tuple[int, ...] = DIMS
    favor_dims: tuple[int, ...] = (8, 32, 128, 512, 1024)
    taylor_widths: tuple[int, ...] = (2, 4, 5, 8, 16)
    exact_seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    window_dims: bool = True

    def __post_init__(self):
        put = self._put
        for name, choices in (("families", tuple(FAMILIES)), ("trained", MAP_FEATURES)):
            values = getattr(self, name)
            if isinstance(values, str) or not isinstance(values, (tuple, list)):
                raise TypeError(f"{name} must be a tuple of names, got {type(values).__name__}")
            if name == "families" and not values:
                raise ValueError("families must name at least one family")
            put(name, tuple(check_choice(v, f"{name}[i]", choices) for v in values))
        for name, low, high in (("dims", 2, 4096), ("favor_dims", 1, 4096),
                                ("taylor_widths", 1, 24)):
            put(name, tuple(sorted(set(check_int_sequence(getattr(self, name), name, low, high,
                                                          allow_empty=True)))))
        for name in ("seeds", "exact_seeds"):
            put(name, tuple(check_int_sequence(getattr(self, name), name, 0, 2**32 - 1,
                                               allow_empty=True)))
        self._check_flags("window_dims")
        self._check_training(("d",), ("phi_std",))


MAPS_FULL = MapsConfig()
#: The book's live run: the smallest family, exact LPs that end at the first query and a short
#: schedule (seconds).
MAPS_QUICK = MapsConfig(families=("paley_rows_23",), dims=(8, 64), seeds=(0, 1),
                        favor_dims=(8,), taylor_widths=(2,), exact_seeds=(0,),
                        window_dims=False, steps=300, surrogate_steps=200)
MAPS_SMOKE = dataclasses.replace(MAPS_QUICK, trained=("elu1",), dims=(4,), seeds=(0,),
                                 steps=20, surrogate_steps=10)


def _family(name: str):
    s = FAMILIES[name]
    return witness_family(paley_subset(s["a"], s["b"]), s["n"], Fraction(s["eps"]),
                          s["convention"])


# ------------------------------------------------------------------ the exact LP of a fixed map

def _taylor_kernel(tokens, k: int, seed: int):
    """2 k^2 (1 + o + o^2 / 2), o = <P x, P z> / k, P a seeded k x m sign matrix: Python ints."""
    rng = np.random.default_rng([seed, k, 9])
    P = rng.choice([-1, 1], size=(k, tokens.shape[1])).astype(object)
    pu = tokens.astype(object) @ P.T
    o = pu @ pu.T
    return 2 * k * k + 2 * k * o + o * o


def _favor_features(tokens, R: int, seed: int, beta: float):
    omega = np.random.default_rng([seed, R, 7]).standard_normal((R, tokens.shape[1]))
    x = tokens.astype(np.float64) * math.sqrt(beta)
    return favor(-x, omega), favor(x, omega)  # scores <-beta x, z>, Chapter 4's head


def _as_ints(f):
    """Rows of positive floats as (ints n, exponents e): f ~ n 2^e, FAVOR_BITS bits per row."""
    e = np.floor(np.log2(f.max(1))).astype(np.int64) - FAVOR_BITS
    return np.rint(f / np.exp2(e)[:, None]).astype(np.int64).astype(object), e


def _favor_kernel(tokens, R: int, seed: int, beta: float):
    """The rounded FAVOR+ kernel, exact: K[x, z] = nq[x] . nk[z] 2^(ek[z] - min ek) (a
    positive factor per query row dropped)."""
    (nq, _), (nk, ek) = (_as_ints(f) for f in _favor_features(tokens, R, seed, beta))
    shift = [1 << int(v) for v in ek - ek.min()]
    return (nq @ nk.T) * np.array(shift, dtype=object)[None, :]


def _exact_head(K, family) -> tuple[str, int]:
    """Whether values and a readout make the head of kernel K (ints, positive) exact on the
    family: per query, the strict system |sum_p K_p g_p - S t| < S / 2 (S = sum_p K_p) in its
    values g(p, z), homogenised (g, s): rows <= -1, s >= 1. ('feasible' | 'infeasible' |
    'beyond the exact LP', queries decided)."""
    ids, targets = np.asarray(family.token_ids), np.asarray(family.targets)
    queries = ids[:, family.query_position]
    for i, x in enumerate(dict.fromkeys(queries.tolist())):
        rows, tg = ids[queries == x], targets[queries == x]
        cols = {key: c for c, key in enumerate(dict.fromkeys(
            (p, int(z)) for row in rows for p, z in enumerate(row)))}
        n, A = len(cols), []
        for row, t in zip(rows, tg):
            a = [K[x, z] for z in row]
            s = sum(a)
            line = [0] * (n + 1)
            for p, (z, v) in enumerate(zip(row, a)):
                line[cols[(p, int(z))]] += 2 * v
            A.append(line[:n] + [-s * (2 * int(t) + 1)])
            A.append([-v for v in line[:n]] + [s * (2 * int(t) - 1)])
        A.append([0] * n + [-1])
        try:
            out = feasible_point(A, [-1] * len(A))
        except ValueError:  # MAX_LP_WORK: stated, never replaced by a float verdict
            return "beyond the exact LP", i
        if isinstance(out, FarkasCertificate):
            return "infeasible", i + 1
    return "feasible", i + 1


def _reproduces_softmax(K, family) -> tuple[bool, float]:
    """Chapter 4's head with FAVOR+ weights (values z, readout <x, .>): error < 1/2 on every
    sequence (exact in the kernel's ints), and its max error (float)."""
    seqs, ids = np.asarray(family.sequences).astype(np.int64), np.asarray(family.token_ids)
    q = family.query_position
    o = (seqs * seqs[:, q:q + 1]).sum(-1)
    worst, ok = Fraction(0), True
    for row, ov, t in zip(ids, o, np.asarray(family.targets)):
        a = [K[row[q], z] for z in row]
        s = sum(a)
        num = sum(v * (int(w) - int(t)) for v, w in zip(a, ov))
        ok = ok and 2 * abs(num) < s
        worst = max(worst, Fraction(abs(num), s))
    return ok, float(worst)


# ------------------------------------------------------------------ units and the sweep

def _trained_unit(cfg: MapsConfig, name: str, feature: str, rank: int, seeds, device):
    family = _family(name)
    model = table_kernel_heads([rank] * len(seeds), list(seeds), len(family.tokens),
                               np.asarray(family.token_ids).shape[1],
                               query_position=int(family.query_position), d=cfg.d,
                               feature=feature, positional=True, phi_std=cfg.phi_std)
    res = train_on_family(cfg, family, model, device)
    recs = model_records(res, [(feature, rank, s) for s in seeds], ("map", "rank", "seed"))
    return {"models": [{**r, "family": name, "verdict": "solved" if r["best_max_error"] < 0.5
                        else "unsolved"} for r in recs]}


def _exact_unit(cfg: MapsConfig, name: str, kind: str, dim: int, seed: int):
    family = _family(name)
    tokens = np.asarray(family.tokens)
    if kind == "taylor":
        K, rank = _taylor_kernel(tokens, dim, seed), 1 + dim + dim * dim
    else:
        K, rank = _favor_kernel(tokens, dim, seed, threshold_closed_form(3, tokens.shape[1])), dim
    verdict, decided = _exact_head(K, family)
    rec = {"map": kind, "family": name, "rank": rank, "seed": seed, "verdict": verdict,
           "queries_decided": decided}
    if kind == "favor":
        ok, err = _reproduces_softmax(K, family)
        rec.update(softmax="reproduced" if ok else "not reproduced",
                   softmax_max_error=round(err, 6))
    return {"models": [rec]}


MAP_RECORD = {"map": str, "family": str, "rank": COUNTS, "seed": COUNTS, "verdict": str}
MAP_FIELDS = {"models": records(MAP_RECORD), **RUN_FIELDS}


def _plan(cfg: MapsConfig, device: str, windows) -> list[Unit]:
    """The exact units (seed-major) and then the trained units of every family but the last;
    then the last (the costliest): its first draw at every dimension, its trained units (the
    smallest dimension, those above its windows, then inside), its other draws."""
    ends = {}  # {family: the ends of its two windows} (the exact minima and their brackets)
    for w in windows:
        ends.setdefault(w.family, set()).update((w.lower, w.upper))
    exact, trained = {}, {}
    for name in cfg.families:
        extra = sorted(ends.get(name, ()))
        exact[name] = [Unit(f"{kind}_{name}_{'k' if kind == 'taylor' else 'r'}{dim}_s{s}",
                            _exact_unit, (cfg, name, kind, dim, s))
                       for s in cfg.exact_seeds
                       for kind, dims in (("taylor", cfg.taylor_widths),
                                          ("favor", sorted({*cfg.favor_dims, *extra})))
                       for dim in dims]
        size = cfg.seed_block or max(len(cfg.seeds), 1)
        blocks = [cfg.seeds[i:i + size] for i in range(0, len(cfg.seeds), size)]
        trained[name] = [
            Unit(f"{feature}_{name}_r{r}" + ("" if len(blocks) == 1 else
                                             "_s" + "-".join(map(str, b))),
                 _trained_unit, (cfg, name, feature, r, b, device), device)
            for feature in cfg.trained
            for r in sorted({d + (feature == "hedgehog") * (d % 2) for d in (*cfg.dims, *extra)})
            for b in blocks]
    *first, last = cfg.families
    head = len(exact[last]) // max(len(cfg.exact_seeds), 1)  # the last family's first draws
    top = max(ends.get(last, ()), default=0)  # its smallest dimension, those above, the rest
    return ([u for name in first for u in exact[name]] + [u for name in first for u in
                                                          trained[name]]
            + exact[last][:head] + sorted(trained[last], key=lambda u: (
                u.args[3] > min(cfg.dims, default=0), u.args[3] < top, u.args[3]))
            + exact[last][head:])


def run_maps_sweep(config: MapsConfig, device="cpu", progress: bool = False, out=None,
                   restart: bool = False, scheduler: str | None = None,
                   threads: int = 1) -> dict:
    """Run (or resume) a maps sweep: trained units '<map>_<family>_r<R>' (all seeds), exact
    units 'taylor_<family>_k<k>_s<seed>' and 'favor_<family>_r<R>_s<seed>'."""
    cfg = check_instance(config, "config", MapsConfig)
    device = str(check_device(device))
    windows = sandwich_windows() if cfg.window_dims else []
    return run_sweep(cfg, _plan(cfg, device, windows), out, restart, scheduler, threads,
                     progress, fields=MAP_FIELDS)


def load_maps_results(path) -> dict:
    """A stored maps sweep (the JSON :func:`run_maps_sweep` writes)."""
    return load_sweep(path, "maps results file", MAP_FIELDS)


def summarise_maps(results: dict) -> list[dict]:
    """Per (map, family, rank): seeds, solved (trained) or feasible (exact LP) count, undecided
    count, median best max error (trained), FAVOR+'s softmax reproductions."""
    try:
        recs = sweep_records(results)
        groups = {}
        for r in recs:
            groups.setdefault((r["map"], r["family"], r["rank"]), []).append(r)
        rows = []
        for (m, fam, rank), sel in sorted(groups.items()):
            row = {"map": m, "family": fam, "rank": rank, "seeds": len(sel),
                   "solved": sum(r["verdict"] in ("solved", "feasible") for r in sel),
                   "undecided": sum(r["verdict"] == "beyond the exact LP" for r in sel)}
            if "best_max_error" in sel[0]:
                row["median_max_error"] = float(np.median([r["best_max_error"] for r in sel]))
            if m == "favor":
                row["softmax"] = sum(r["softmax"] == "reproduced" for r in sel)
            rows.append(row)
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"results must be a maps sweep ({exc!r:.80})") from exc
    return rows


def first_solving(rows: list[dict], windows, key: str = "solved",
                  caption: str | None = None) -> Table:
    """Map x family: the first rank at which some seed solves and at which every seed does
    (one number when they agree, an interval otherwise) and its ratio to the exact minimum of
    the map's feature class (``key='softmax'``: FAVOR+'s softmax reproductions)."""
    try:
        win = {(w.family, w.features): w for w in windows}
        cells = []
        for m in dict.fromkeys(r["map"] for r in rows if key in r):
            for fam in dict.fromkeys(r["family"] for r in rows):
                sel = [r for r in rows if r["map"] == m and r["family"] == fam]
                if not sel:
                    continue
                some = [r["rank"] for r in sel if r[key] > 0]
                every = [r["rank"] for r in sel if r[key] == r["seeds"] and not r["undecided"]]
                lo, hi = min(some, default=None), min(every, default=None)
                w = win[(fam, CLASS[m])]
                top = max(r["rank"] for r in sel)
                text = (f"none <= {top}" if lo is None else str(lo) if lo == hi
                        else f"[{lo}, {hi if hi is not None else f'> {top}'}]")
                ratio = "" if lo is None else (f"{lo / w.upper:.2g}" if w.closed else
                                               f"[{lo / w.upper:.2g}, {lo / w.lower:.2g}]")
                cells.append({"map": m, "family": fam, "first solving dimension": text,
                              "exact minimum": f"{w.text} ({CLASS[m]})",
                              "ratio (first some-seed dim / minimum)": ratio})
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise ValueError(f"rows must be the rows of summarise_maps and windows the "
                         f"sandwich's ({exc!r:.80})") from exc
    return Table(cells, caption=caption)
