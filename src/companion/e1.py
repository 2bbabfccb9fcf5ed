"""E1 — the witness suite: train table-parameterised heads of every rank on the witness family.

One sweep = the distinct ranks grouped into padded rank groups
(:func:`companion.heads.group_ranks`),
each group × all seeds trained as one batched program, plus the dense softmax baseline (all its
seeds) as one more unit. :func:`run_e1_sweep` stores each unit's per-model results as soon as
it finishes (:class:`companion.sweeps.ResultStore`), so an interrupted CLI run resumes where
it stopped. Every model is initialised from its own seed and trained full-batch, so its result
does not depend on which other models share its program (up to float rounding).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence

import numpy as np

from .sweeps import ResultStore, config_hash

__all__ = [
    "E1_QUICK",
    "E1_FULL",
    "check_e1_config",
    "e1_family",
    "run_e1_sweep",
    "summarise_e1",
    "consistency_violations",
    "unit_key",
    "train_e1_unit",
    "log_pure_totals",
]

#: The issue's grid r in {1, 2, 4, ..., 64}, plus ranks between 16 and 32 where the certified
#: bound (20), the exact rank-|S| construction (28) and the trained threshold meet.
E1_RANKS = [1, 2, 4, 8, 16, 20, 24, 27, 28, 32, 64]

#: Full size (CLI ``python -m companion e1 --full``): 11 ranks x 5 seeds, dense x 5 seeds.
E1_FULL: dict = {
    "family": "experiment_witness_24",
    "ranks": E1_RANKS,
    "rank_groups": None,  # None: companion.heads.group_ranks decides
    "seeds": [0, 1, 2, 3, 4],
    "dense_seeds": [0, 1, 2, 3, 4],
    "feature": "exp",
    "positional": True,
    "d": 16,
    "score_dim": 24,
    "phi_std": 1.0,
    "qk_std": 0.2,
    "lr": 0.03,
    "final_lr_fraction": 0.02,
    "steps": 3000,
    "surrogate_steps": 2000,
    "surrogate_power": 16,
}

#: Book quick mode: same protocol, 3 seeds and shorter schedules (fits the build budget).
E1_QUICK: dict = {
    **E1_FULL,
    "seeds": [0, 1, 2],
    "dense_seeds": [0, 1, 2],
    "steps": 1200,
    "surrogate_steps": 800,
}

FAMILIES = ("experiment_witness_24",)


def check_e1_config(config: dict) -> dict:
    """Validate an E1 configuration (missing keys default to E1_FULL); returns a normalised copy."""
    from .heads import FEATURES, _check_seq_of_ints, group_ranks
    from .train import _check_float, _check_int

    if not isinstance(config, dict):
        raise TypeError(f"config must be a dict, got {type(config).__name__}")
    unknown = set(config) - set(E1_FULL)
    if unknown:
        raise ValueError(f"config has unknown keys {sorted(unknown)}; known: {sorted(E1_FULL)}")
    cfg = copy.deepcopy({**E1_FULL, **config})
    if cfg["family"] not in FAMILIES and not str(cfg["family"]).startswith("custom:"):
        raise ValueError(
            f"family must be one of {FAMILIES} (or 'custom:<digest>'), got {cfg['family']!r}"
        )
    cfg["ranks"] = sorted(set(_check_seq_of_ints(cfg["ranks"], "ranks", 1)))
    cfg["seeds"] = _check_seq_of_ints(cfg["seeds"], "seeds", 0)
    cfg["dense_seeds"] = (
        _check_seq_of_ints(cfg["dense_seeds"], "dense_seeds", 0) if cfg["dense_seeds"] else []
    )
    if cfg["rank_groups"] is None:
        cfg["rank_groups"] = group_ranks(cfg["ranks"])
    groups = [sorted(_check_seq_of_ints(g, "rank_groups[i]", 1)) for g in cfg["rank_groups"]]
    if sorted(r for g in groups for r in g) != cfg["ranks"]:
        raise ValueError(f"rank_groups must partition ranks {cfg['ranks']}, got {groups}")
    cfg["rank_groups"] = groups
    if cfg["feature"] not in FEATURES:
        raise ValueError(f"feature must be one of {FEATURES}, got {cfg['feature']!r}")
    if not isinstance(cfg["positional"], bool):
        raise TypeError("positional must be a bool")
    for key in ("d", "score_dim", "steps"):
        cfg[key] = _check_int(cfg[key], key, 1)
    cfg["surrogate_steps"] = _check_int(cfg["surrogate_steps"], "surrogate_steps", 0)
    cfg["surrogate_power"] = _check_int(cfg["surrogate_power"], "surrogate_power", 2, 1024)
    for key in ("phi_std", "qk_std"):
        cfg[key] = _check_float(cfg[key], key, 0.0, 100.0)
    cfg["lr"] = _check_float(cfg["lr"], "lr", 0.0, 10.0)
    cfg["final_lr_fraction"] = _check_float(cfg["final_lr_fraction"], "final_lr_fraction", 0.0, 1.0)
    return cfg


def e1_family(config: dict):
    """The witness family a configuration names (built by :mod:`companion.witness`)."""
    name = config["family"]
    if name == "experiment_witness_24":
        from .witness import experiment_witness_24

        return experiment_witness_24()
    raise ValueError(f"family {name!r} cannot be rebuilt by name; pass family= explicitly")


def family_digest(family) -> str:
    """A short digest of a family's training problem (token ids, targets, query position)."""
    import hashlib

    h = hashlib.sha256()
    h.update(np.ascontiguousarray(np.asarray(family.token_ids, dtype=np.int64)).tobytes())
    h.update(np.ascontiguousarray(np.asarray(family.targets, dtype=np.int64)).tobytes())
    h.update(str(int(family.query_position)).encode())
    return h.hexdigest()[:16]


def unit_key(group: Sequence[int] | None) -> str:
    """Store key of a unit: 'nka_r1-2-4' for a rank group, 'dense' for the baseline."""
    return "dense" if group is None else "nka_r" + "-".join(str(r) for r in group)


def _family_tensors(family, device):
    import torch

    ids = torch.as_tensor(np.asarray(family.token_ids, dtype=np.int64), device=device)
    y = torch.as_tensor(
        np.asarray(family.targets, dtype=np.float64), dtype=torch.float32, device=device
    )
    return ids, y


def build_unit(
    cfg: dict,
    family,
    group: Sequence[int] | None,
    seeds: Sequence[int] | None = None,
    only_rank: int | None = None,
):
    """The stacked models of one unit (a rank group × seeds, or the dense heads) and labels.
    ``only_rank``: just that rank of the group, still padded to the group's largest rank
    (same maths as inside the unit; floats agree only to rounding, see companion.train)."""
    from .heads import TableKernelHeads, TableSoftmaxHeads

    num_tokens = len(family.tokens)
    n = np.asarray(family.token_ids).shape[1]
    qpos = int(family.query_position)
    if group is None:
        seeds = cfg["dense_seeds"] if seeds is None else list(seeds)
        model = TableSoftmaxHeads(
            seeds,
            num_tokens,
            n,
            score_dim=cfg["score_dim"],
            query_position=qpos,
            d=cfg["d"],
            qk_std=cfg["qk_std"],
        )
        return model, [("dense", 0, s) for s in seeds]
    seeds = cfg["seeds"] if seeds is None else list(seeds)
    pad = max(group)
    if only_rank is not None:
        if only_rank not in group:
            raise ValueError(
                f"only_rank must be one of the group's ranks {list(group)}, got {only_rank}"
            )
        group = [only_rank]
    ranks = [r for r in group for _ in seeds]
    ss = [s for _ in group for s in seeds]
    model = TableKernelHeads(
        ranks,
        ss,
        num_tokens,
        n,
        query_position=qpos,
        d=cfg["d"],
        feature=cfg["feature"],
        positional=cfg["positional"],
        pad_to=pad,
        phi_std=cfg["phi_std"],
    )
    return model, [("nka", r, s) for r, s in zip(ranks, ss)]


def train_e1_unit(
    cfg: dict,
    family,
    group: Sequence[int] | None,
    seeds: Sequence[int] | None = None,
    device="cpu",
    progress: bool = False,
    only_rank: int | None = None,
):
    """Train one unit (or, with ``only_rank``, one rank of it); returns (records, TrainResult)."""
    from .train import train_batched

    model, labels = build_unit(cfg, family, group, seeds, only_rank)
    ids, y = _family_tensors(family, device)
    res = train_batched(
        model,
        ids,
        y,
        steps=cfg["steps"],
        lr=cfg["lr"],
        final_lr_fraction=cfg["final_lr_fraction"],
        surrogate_steps=cfg["surrogate_steps"],
        surrogate_power=cfg["surrogate_power"],
        seed=0,
        device=device,
        progress=progress,
    )
    records = [
        {
            "kind": k,
            "rank": r,
            "seed": s,
            "best_max_error": round(float(res.best_max_error[i]), 6),
            "fraction_within_half": round(float(res.fraction_within_half[i]), 6),
            "final_max_error": round(float(res.final_max_error[i]), 6),
            "best_step": int(res.best_step[i]),
        }
        for i, (k, r, s) in enumerate(labels)
    ]
    return records, res


def environment(device="cpu") -> dict:
    """What a unit's float results depend on beyond its configuration: training is chaotic in
    rounding (the max-error surrogate amplifies it), so bit-for-bit reruns need the same torch
    version, CPU vector capability (AVX2 / AVX512 kernels round differently), thread count and
    device. Stored beside every unit's results."""
    import torch

    return {
        "torch": torch.__version__.split("+")[0],
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
        "device": str(device),
    }


def run_e1_sweep(
    config: dict,
    device="cpu",
    progress: bool = False,
    out=None,
    restart: bool = False,
    family=None,
    keep_models: bool = False,
) -> dict:
    """Run (or resume) an E1 sweep. Returns ``{"config", "config_hash", "units", "models"}``
    where units maps :func:`unit_key` to ``{"models": [records], "wall_time", "environment"}``
    (see :func:`environment`) and models
    (only with ``keep_models``, and only for units trained in this call) maps the unit key to
    the trained stacked module. ``out``: JSON path written atomically after every unit."""
    cfg = check_e1_config(config)
    if family is None:
        family = e1_family(cfg)
    elif cfg["family"] in FAMILIES:
        cfg["family"] = "custom:" + family_digest(family)
    store = ResultStore(out, cfg, restart=restart)
    units = [tuple(g) for g in cfg["rank_groups"]] + ([None] if cfg["dense_seeds"] else [])
    models = {}
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(units), desc="E1 units")
    for group in units:
        key = unit_key(group)
        if not store.done(key):
            start = time.perf_counter()
            records, res = train_e1_unit(cfg, family, group, device=device, progress=progress)
            store.put(
                key,
                {
                    "models": records,
                    "wall_time": round(time.perf_counter() - start, 2),
                    "environment": environment(device),
                },
            )
            if keep_models:
                models[key] = res.model
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    result = store.as_dict()
    result["models"] = models
    return result


def all_records(results: dict) -> list[dict]:
    return [rec for unit in results["units"].values() for rec in unit["models"]]


def summarise_e1(results: dict) -> list[dict]:
    """Per rank (then 'dense'): max error median / min / max over seeds, median fraction of
    inputs within 1/2, and solved seeds (max error < 1/2)."""
    recs = all_records(results)
    rows = []
    keys = sorted({r["rank"] for r in recs if r["kind"] == "nka"}) + (
        ["dense"] if any(r["kind"] == "dense" for r in recs) else []
    )
    for key in keys:
        sel = [
            r
            for r in recs
            if (
                r["kind"] == "dense"
                if key == "dense"
                else (r["kind"] == "nka" and r["rank"] == key)
            )
        ]
        err = np.array([r["best_max_error"] for r in sel])
        frac = np.array([r["fraction_within_half"] for r in sel])
        rows.append(
            {
                "r": key,
                "median_max_error": float(np.median(err)),
                "min_max_error": float(err.min()),
                "max_max_error": float(err.max()),
                "median_fraction_within_half": float(np.median(frac)),
                "solved": int((err < 0.5).sum()),
                "seeds": len(sel),
            }
        )
    return rows


def consistency_violations(results: dict, r_star: int) -> list[dict]:
    """Records of NKA heads with rank < r_star and max error < 1/2 — which the certified bound
    says cannot exist. An empty list means the check passed."""
    return [
        r
        for r in all_records(results)
        if r["kind"] == "nka" and r["rank"] < r_star and r["best_max_error"] < 0.5
    ]


def log_pure_totals(model, query_position: int = 0):
    """log D(x; z) for every model, query token x and key token z, as (M, T, T):
    D(x; z) = alpha_q(x, x) + sum over the other positions p of alpha_p(x, z) — the total
    weight on the pure sequence with query x and every other token z — up to an additive
    constant per (model, x), which cancels in every ratio D(x; z) / D(x; z')."""
    import torch

    with torch.no_grad():
        la, _ = model.pair_tables()
        m, p, t, _ = la.shape
        n = model.length
        qp = query_position if p > 1 else 0
        own = la[:, qp].diagonal(dim1=-2, dim2=-1)  # (M, T): alpha at the query's own position
        others = [la[:, pp if p > 1 else 0] for pp in range(n) if pp != query_position]
        keys = torch.logsumexp(torch.stack(others), dim=0)  # (M, T, T)
        return torch.logaddexp(own[:, :, None], keys)


def config_digest(config: dict) -> str:
    return config_hash(check_e1_config(config))


def link_weight_ratios(head, family):
    """Lemma B, live: for every chain link of the family, the head's ratio D(x; z) / D(x; z')
    of total weights on the pure sequences (z the better key, z' the worse), the gap g, and
    eps_link = the head's max error on the link's rows (its two pure sequences and every
    arrangement of its mixed one). Where eps_link < 1/2 the lemma forces
    ratio >= c_{n, eps_link}(g). Float64. Returns a dict of arrays over the links."""
    from .attention import kernel_attention
    from .witness import total_weights

    D = total_weights(head, family)
    y = kernel_attention(head, family.sequences, family.convention)
    err = np.abs(y - family.targets)
    ratio, gap, eps = [], [], []
    for link in family.links:
        zb, zw = link.pure_rows
        ratio.append(D[zb] / D[zw])
        gap.append(link.gap)
        eps.append(err[list(link.pure_rows) + list(link.mixed_rows)].max())
    return {
        "ratio": np.array(ratio),
        "gap": np.array(gap),
        "eps": np.array(eps),
        "max_error": float(err.max()),
    }


def lemma_b_violations(ratios: dict, n: int = 3, rel_tol: float = 1e-9) -> int:
    """Links where the head is within eps_link < 1/2 yet ratio < c_{n,eps_link}(g) — which
    Lemma B says cannot happen (up to float rounding ``rel_tol``)."""
    from .gap_domination import gap_domination_factor

    bad = 0
    for r, g, e in zip(ratios["ratio"], ratios["gap"], ratios["eps"]):
        if 0 < e < 0.5:
            c = float(gap_domination_factor(int(g), n, float(e)))
            bad += bool(r < c * (1 - rel_tol))
    return bad
