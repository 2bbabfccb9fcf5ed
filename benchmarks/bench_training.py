"""Batched training engine vs a Python loop over the same models, in the same run.

    python benchmarks/bench_training.py [--steps 100] [--repeats 3] [--threads 1] [--skip-e2]

E1: every (rank, seed) table head of the witness sweep (r = 1..64) plus the dense heads,
trained (a) batched as the sweep does it (ranks grouped by
companion.experiments.table_heads.group_ranks, one program per group), (b) batched with all
ranks padded to 64 in one program, (c) one group per rank, and (d) as a Python loop, one model
at a time. E2 (if companion.experiments.ood_scaling is present): one width's rank groups and
dense heads, batched vs looped. Prints wall times, the ratios, and the achieved model FLOP/s
against the machine's measured float32 matmul rate. Prints, never asserts: wall times on a
shared machine are noisy (compare ratios measured in one run).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import torch

from companion.experiments.engine import ModelStack, train_batched
from companion.experiments.table_heads import TableKernelHeads, TableSoftmaxHeads
from companion.experiments.witness_suite import E1_FULL, build_unit, e1_family
from companion.reproducibility import seed_everything


def matmul_rate(n: int = 512, repeats: int = 20) -> float:
    """Measured float32 matmul FLOP/s (n x n x n products) with the current thread setting."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    t = time.perf_counter()
    for _ in range(repeats):
        a @ b
    return 2 * n**3 * repeats / (time.perf_counter() - t)


def table_flops(model, n_inputs: int) -> float:
    """Matmul FLOPs of one training step (forward + backward ~ 3x forward) of table heads:
    the pair tables cost 2·M·P·T·T·(R + d); gathers and elementwise work are not counted."""
    num_models, p, t = model.num_models, model.num_positions, model.num_tokens
    r = model.pad if isinstance(model, TableKernelHeads) else model.score_dim
    return 3 * 2 * num_models * p * t * t * (r + model.d)


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def bench_e1(steps: int, seeds: list[int], repeats: int = 3) -> None:
    cfg = replace(E1_FULL, seeds=seeds, dense_seeds=seeds, steps=steps,
                  surrogate_steps=steps // 2)
    fam = e1_family(cfg)
    ids = torch.as_tensor(fam.token_ids)
    y = torch.as_tensor(fam.targets, dtype=torch.float32)
    kw = dict(
        steps=cfg.steps,
        lr=cfg.lr,
        final_lr_fraction=cfg.final_lr_fraction,
        surrogate_steps=cfg.surrogate_steps,
        surrogate_power=cfg.surrogate_power,
    )
    total = cfg.steps + cfg.surrogate_steps
    ranks = cfg.ranks

    def run_groups(groups):
        flops, wall = 0.0, 0.0
        for g in groups:
            model, _ = build_unit(cfg, fam, g)
            dt, _ = timed(lambda model=model: train_batched(model, ids, y, **kw))
            wall += dt
            flops += table_flops(model, len(ids)) * total
        model, _ = build_unit(cfg, fam, None)
        dt, _ = timed(lambda model=model: train_batched(model, ids, y, **kw))
        return wall + dt, flops + table_flops(model, len(ids)) * total

    def run_stacked(groups):
        """All groups and the dense heads in ONE program (engine.ModelStack)."""
        parts = [build_unit(cfg, fam, g)[0] for g in groups] + [build_unit(cfg, fam, None)[0]]
        model = ModelStack(parts)
        wall, _ = timed(lambda: train_batched(model, ids, y, **kw))
        return wall, sum(table_flops(m, len(ids)) for m in parts) * total

    def run_loop():
        flops, wall = 0.0, 0.0
        for r in ranks:
            for s in seeds:
                model = TableKernelHeads(
                    [r],
                    [s],
                    len(fam.tokens),
                    query_position=0,
                    d=cfg.d,
                    feature=cfg.feature,
                    phi_std=cfg.phi_std,
                )
                dt, _ = timed(lambda model=model: train_batched(model, ids, y, **kw))
                wall += dt
                flops += table_flops(model, len(ids)) * total
        for s in seeds:
            model = TableSoftmaxHeads(
                [s], len(fam.tokens), score_dim=cfg.score_dim, d=cfg.d, qk_std=cfg.qk_std
            )
            dt, _ = timed(lambda model=model: train_batched(model, ids, y, **kw))
            wall += dt
            flops += table_flops(model, len(ids)) * total
        return wall, flops

    n_models = len(ranks) * len(seeds) + len(seeds)
    print(
        f"E1: witness family N={len(ids)} inputs, T={len(fam.tokens)} tokens; "
        f"{n_models} models (r in {ranks} x seeds {seeds} + dense x {len(seeds)}), "
        f"{total} steps each; torch threads={torch.get_num_threads()}; "
        f"best of {repeats} interleaved repeats"
    )
    variants = {
        "python loop, one model at a time": run_loop,
        f"batched, sweep grouping {cfg.rank_groups}": lambda: run_groups(cfg.rank_groups),
        "batched, all ranks padded to max": lambda: run_groups([ranks]),
        "batched, one program per rank": lambda: run_groups([[r] for r in ranks]),
        "batched, sweep grouping + dense in one ModelStack program": lambda: run_stacked(
            cfg.rank_groups
        ),
    }
    best = {name: (float("inf"), 0.0) for name in variants}
    rate = 0.0
    for _ in range(repeats):  # interleaved, so load changes on a shared machine hit all alike
        rate = max(rate, matmul_rate())
        for name, fn in variants.items():
            wall, flops = fn()
            best[name] = min(best[name], (wall, flops))
    print(f"machine float32 matmul rate (512^3, best): {rate / 1e9:.1f} GFLOP/s")
    loop_wall = best["python loop, one model at a time"][0]
    for name, (wall, flops) in best.items():
        print(
            f"  {name:<58s} {wall:7.2f} s  x{loop_wall / wall:4.2f} vs loop  "
            f"{flops / wall / 1e9:6.2f} GFLOP/s ({100 * flops / wall / rate:4.1f}% of matmul rate)"
        )


def bench_e2(steps: int, seeds: list[int]) -> None:
    try:
        from companion.experiments import mlp_heads, ood_data, ood_scaling
    except ImportError as exc:
        print(f"E2: skipped (companion.experiments.ood_scaling not importable: {exc})")
        return
    cfg = replace(ood_scaling.E2_QUICK, seeds=seeds, steps=steps)
    m, pool = cfg.widths[0], cfg.pool_sizes[0]
    data = ood_data.make_e2_data(
        m,
        pool,
        cfg.train_fraction,
        cfg.n_train,
        cfg.n_test,
        cfg.near_tie_fraction,
        cfg.data_seed,
    )
    inputs = ood_data.pool_inputs(data.train_pool, data.train_idx)
    y = torch.as_tensor(data.train_targets().reshape(-1), dtype=torch.float32)
    kw = dict(steps=steps, lr=cfg.lr, final_lr_fraction=cfg.final_lr_fraction)
    model, keys = ood_scaling.build_e2_models(m, cfg)
    batched, _ = timed(lambda model=model: train_batched(model, inputs, y, **kw))
    loop = 0.0
    for key in keys:
        r, s = key
        if r == "dense":
            single = mlp_heads.MLPSoftmaxHeads(m, [s], cfg.hidden, cfg.value_dim)
        else:
            single = mlp_heads.MLPKernelHeads(
                m, [r], [s], cfg.hidden, cfg.value_dim, cfg.feature
            )
        dt, _ = timed(lambda single=single: train_batched(single, inputs, y, **kw))
        loop += dt
    print(
        f"E2: m={m}, {len(y)} training inputs, {len(keys)} models (ranks {cfg.ranks} in "
        f"groups {cfg.rank_groups} x seeds {seeds} + dense), {steps} steps each"
    )
    print(f"  python loop {loop:7.2f} s   batched {batched:7.2f} s   ratio x{loop / batched:4.2f}")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--skip-e2", action="store_true")
    args = p.parse_args(argv)
    seed_everything(0, threads=args.threads)
    seeds = list(range(args.seeds))
    bench_e1(args.steps, seeds, args.repeats)
    if not args.skip_e2:
        bench_e2(args.steps, seeds)


if __name__ == "__main__":
    main()
