"""Batched training engine vs a Python loop over the same models, in the same run, on a roofline.

    python benchmarks/bench_training.py [--steps 100] [--repeats 3] [--seeds 3] [--threads 1]
                                        [--device cpu|cuda] [--skip-e2] [--out benchmarks/out]

E1: every (rank, seed) table head of the witness sweep plus the dense heads, trained (a) as a
Python loop, one model at a time, and (b) batched as the sweep does it (one program per unit);
also all units stacked into one program, for reference. E2: one width (m = 8) of the quick
protocol, its rank groups and dense heads as one program vs a loop. The speed-up is the loop's
time over the batched time, the best of ``--repeats`` interleaved repeats. On the CPU with one
torch thread (the default, and what the sweeps use) times are the process's CPU time (robust to
other load on a shared machine; wall times are printed beside them); with ``--threads`` > 1,
wall time (CPU time would add up the threads); on a GPU, synchronised wall time.

Roofline. These models are gather- and memory-bound: per step they move far more bytes through
elementwise, gather and scatter kernels than their matmuls need. The benchmark measures the
machine's two ceilings — the float32 matmul rate (FLOP/s) and the streaming bandwidth of a
large elementwise add (bytes/s, at a DRAM-sized and a cache-sized array) — and counts, for one
training step of every program, its matmul FLOPs (``torch.utils.flop_counter``) and the bytes
its kernels read and write (a dispatch mode summing every non-view op's input and output
tensor sizes). The roofline time of a run is max(FLOPs / matmul rate, bytes / bandwidth); the
fraction of roofline achieved is that time over the measured time (the best cache bandwidth is
used, the stricter ceiling). A third ceiling is printed beside it: ops dispatched per step times
the measured cost of dispatching one tiny op — these programs run ~100-500 small kernels per
step, and what the two classic ceilings leave unexplained is per-op framework time (autograd,
allocation, Python), which a tiny op underestimates. A figure ``roofline_<device>.png`` in
``--out`` places every run on the roofline. Prints, never asserts: compare ratios measured in
one run. The last line is the summary.

Ceiling of the speed-up (CPU). Stacking models shares dispatch, autograd and Python work; it
does not share the work of the kernels themselves: the matmuls and the gathers and scatters
(:data:`WORK_OPS`) cost the same per element whether a model runs alone or in a stack (or
more in a stack: larger arrays fall out of cache). A profiled short run gives the CPU time the
loop spends inside those kernels; the loop's measured time over that is the largest
batched/loop ratio any stacking of the same kernels can reach, with zero overhead left. On
this machine kind (AMD EPYC, AVX2, 34 GFLOP/s float32 matmul on one core) E2's loop spends a
quarter to a third of its time in table matmuls (179 x 179 pair tables per model) and pair
gathers/scatters. Ratio and ceiling both move with the shared machine's state and with
``--steps`` (the per-model set-up, which stacking shares, weighs more in short runs).
Measured 2026-12-01, E2: x1.99-2.16 at 100 steps in three benchmark runs (ceilings x2.80 and
x3.13), x2.35 at 100 steps alone, x2.42-2.57 at 400 steps (ceiling x4.2), x2.32 at 20 steps
(ceiling x4.0); E1: x4.12-4.56 (ceiling x6.4-6.7). x3 on E2 needs the batched step's time
outside the work kernels, 40-45 % of it now, to shrink to 4-29 % (by the run's ceiling).
But most of that time is compute too: the ceiling line also prints the batched program's share
of time in compute kernels of any kind (elementwise and reductions included, which cost the
same per element stacked or not, or more once stacked arrays fall out of cache), and what a
pair readout that cost nothing (a perfectly fused readout kernel, in both programs) would give.
Measured 2026-12-01 on a quiet machine (100 steps, 3 repeats, two runs): E2 batched x2.26 and
x2.32, with 57-62 % of its time in work kernels and 85-93 % in compute kernels, so even with no
framework time left it would reach only x2.5-2.7; a free readout gives x2.53 (the loop spends
as large a share in the readout as the batched program). E1 x4.35-4.44 (ceiling x5.8-6.1).
With ``--threads 2`` (wall time, both cores): E1 x5.03, E2 x2.78 (the loop's small kernels
gain nothing from a second thread, the stacked ones some). So x3 on E2 on this processor needs
less kernel work per model in the batched program than in the loop, which stacking the same
models cannot give.

Where E2's batched step goes (issue 11; torch.profiler and per-step CPU time, m = 8 quick
protocol, 27 models as three stacked parts, one core of a heavily loaded 2-core machine):
~440 ops and ~220 MB per step. The MLP trunks and features take about a quarter of the step;
loss, max-error tracking and the (fused) Adam step under a sixth; the rest is the pair readout,
and there the gathers and scatters rather than the matmuls: per part and per rank run the
table -> distinct-pair gather (and its zero-fill + scatter backward), the distinct-pair ->
(input, position) gather (and its scatter), and the split/cat copies of the per-run products.
Python overhead per step is small (pair plans are cached). Also seen: ~700 minor page faults
per step (glibc returning large freed blocks and re-faulting them; a few % of the step) and
padding of the trunk's output layer within a rank group (ranks 32, 64 computed at width 128).
In isolation a table read that walks the table row by row is ~3x faster than a read in input
order (1.1 vs 0.4 ms gather, 1.35 vs 0.57 ms scatter-add; 15 x 32041 table, 27000 reads). Tried
(commit 18e3921, reverted): one autograd node reading the full tables directly in query-row
order (no distinct-pair table, no per-run copies). It cut bytes per step by 12 % (220 -> 195
MB) but the step was not faster (same-run minimum step time 32-34 ms vs 30-31 ms before):
full-table zero-fills, more page faults and the reordering ate the gain.

Tried on E2's readout (same machine kind, one core, the m = 8 shapes: 13,859 distinct pairs,
27,000 (input, position) reads; M stacked models), none faster than the current kernels:
- fewer page faults (glibc ``MALLOC_MMAP_THRESHOLD_`` = 32 MB): faults per step 200-500 -> ~1,
  step time unchanged (4.2-4.4 s per 100 steps either way);
- padding removed (one rank group per rank of 32, 64, 128): 4.5 s vs 4.3 s (the extra
  programs cost more than the padded columns; one group for all ranks: 5.3 s);
- the backward scatter in row chunks that fit in cache (1, 2 or 4 models at a time): 1.7-1.9
  ms vs 1.6 ms at M = 15;
- model-last layout (pairs x models) with the scatter as a CSR sparse product: the scatter
  itself 2.3x faster at M = 15, but the transposes into and out of that layout cost the gain;
- the whole kernel-mode readout as two CSR products (sum over positions = a sparse matrix with
  three ones per row): 8.6 ms vs 7.6 ms forward + backward at M = 15, 5.5 vs 5.1 at M = 9.
Tried 2026-12-01 (M = 15; random pairs in a 179 x 179 table, 9000 inputs x 3 positions, unless
said): ``embedding_bag`` on a model-last table, 12-13 ms vs 7.6 ms (its backward sorts); its
forward with an ``index_add_`` backward, 7.9-8.9 vs 7.4-8.2 ms; products summed at the distinct
pairs before the gather (no (M, 3, N) temporaries), 6.9-7.6 vs 7.4-8.0 ms, within noise; the
scatter split into "k-th read of each pair" levels (bit-identical to ``index_add_``), x1.76 on
random reads but no gain on E2's real plan, whose self-pairs are read ~50 times each; one
preallocated table for all rank blocks, 0.6 ms faster for ranks 32-128, 0.7 ms slower for 1-16.
Kept: the step's own errors feed the max-error tracking (one pass over the outputs fewer).
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from companion.book import seed_everything
from companion.experiments.e1 import E1_FULL, build_unit, e1_family
from companion.experiments.engine import ModelStack, train_batched
from companion.experiments.table_heads import TableKernelHeads, TableSoftmaxHeads

# ops that return views or allocate without touching memory
_NO_TRAFFIC = {
    "view", "_unsafe_view", "reshape", "expand", "permute", "transpose", "t", "unsqueeze",
    "squeeze", "select", "slice", "split", "split_with_sizes", "narrow", "as_strided", "alias",
    "detach", "unbind", "_reshape_alias", "lift_fresh", "empty", "empty_like", "new_empty",
    "empty_strided", "set_", "resize_", "_local_scalar_dense", "sparse_csr_tensor",
    "_sparse_csr_tensor_unsafe", "values", "crow_indices", "col_indices",
}


class ByteCounter(TorchDispatchMode):
    """Sum of the sizes of every non-view op's distinct input and output tensors: the bytes
    its kernels read and write (exact for streaming ops, a lower bound for gathers)."""

    def __init__(self):
        super().__init__()
        self.bytes = 0
        self.ops = 0  # every dispatched op, views included: each costs a dispatch

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self.ops += 1
        if func.__name__.split(".")[0] in _NO_TRAFFIC:
            return out
        seen = set()

        def count(t):
            if isinstance(t, torch.Tensor) and t.layout == torch.strided:
                key = (t.data_ptr(), tuple(t.shape), tuple(t.stride()))
                if key not in seen:
                    seen.add(key)
                    self.bytes += t.numel() * t.element_size()

        for a in [*args, *kwargs.values()]:
            for t in a if isinstance(a, (list, tuple)) else [a]:
                count(t)
        for t in out if isinstance(out, (list, tuple)) else [out]:
            count(t)
        return out


class Clock:
    """CPU time of this process on a CPU with one torch thread (robust to a shared machine);
    wall time with more threads (CPU time would add up every thread's time, spinning included)
    and synchronised wall time on a GPU. Wall time is kept beside it."""

    def __init__(self, device: torch.device):
        self.device = device
        self.wall = device.type != "cpu" or torch.get_num_threads() > 1

    def __call__(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        w = time.perf_counter()
        return (w if self.wall else time.process_time()), w


def matmul_rate(device, n: int = 1024, repeats: int = 10) -> float:
    """Measured float32 matmul FLOP/s (n x n x n products)."""
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    clock = Clock(device)
    a @ b
    t0, _ = clock()
    for _ in range(repeats):
        a @ b
    t1, _ = clock()
    return 2 * n**3 * repeats / (t1 - t0)


def bandwidth(device, numel: int, repeats: int = 10) -> float:
    """Streaming bandwidth (bytes/s) of c = a + b on float32 arrays of ``numel`` elements."""
    a, b = torch.rand(numel, device=device), torch.rand(numel, device=device)
    c = torch.empty_like(a)
    clock = Clock(device)
    inner = max(1, 2 * 10**7 // numel)
    torch.add(a, b, out=c)
    t0, _ = clock()
    for _ in range(repeats * inner):
        torch.add(a, b, out=c)
    t1, _ = clock()
    return 3 * 4 * numel * repeats * inner / (t1 - t0)


def dispatch_time(device, repeats: int = 20000) -> float:
    """Seconds per dispatched op on tiny tensors: the fixed cost every kernel launch pays."""
    x = torch.ones(1, device=device)
    out = torch.empty_like(x)
    clock = Clock(device)
    t0, _ = clock()
    for _ in range(repeats):
        torch.add(x, x, out=out)
    t1, _ = clock()
    return (t1 - t0) / repeats


#: Kernels whose cost is the work itself (FLOPs, elements gathered or scattered): stacking
#: models shares their dispatch, not this work.
WORK_OPS = ("aten::bmm", "aten::baddbmm", "aten::mm", "aten::addmm", "aten::index_select",
            "aten::scatter_add_", "aten::index_add_", "aten::gather", "aten::scatter_")


#: Ops that only make views, allocate or read metadata: what remains of a profile after every
#: other ``aten::`` op's self time is framework time (Python, dispatch, autograd bookkeeping).
BOOKKEEPING_OPS = frozenset(f"aten::{name}" for name in (
    "empty", "empty_strided", "empty_like", "as_strided", "view", "_unsafe_view", "reshape",
    "_reshape_alias", "transpose", "t", "permute", "slice", "select", "narrow", "unsqueeze",
    "squeeze", "unsqueeze_", "squeeze_", "expand", "expand_as", "view_as", "alias", "detach",
    "split", "split_with_sizes", "chunk", "unbind", "resize_", "lift_fresh", "result_type",
    "numel", "item", "_local_scalar_dense", "is_nonzero", "to", "contiguous", "zeros",
    "zeros_like", "new_zeros", "new_empty"))


#: The pair readout's autograd nodes (normalise and read out, forward and backward): their total
#: time is what a fused readout kernel could at best remove.
READOUT_NODES = ("_PairReadout", "_PairReadoutBackward")


def work_seconds(build, inputs, targets, kw, device, steps: int = 20) -> tuple[float, ...]:
    """CPU seconds per training step that a variant's models spend inside WORK_OPS kernels,
    inside compute kernels of any kind (every ``aten::`` op but :data:`BOOKKEEPING_OPS`:
    elementwise and reductions too) and inside the pair readout (:data:`READOUT_NODES`, with
    everything they call), from a short profiled training. The profiler adds a microsecond or
    two to every op it records, so all three are approximate (about +-10 % on E2)."""
    from torch.profiler import ProfilerActivity, profile

    short = dict(kw, steps=steps)
    if short.get("surrogate_steps"):
        short["surrogate_steps"] = steps // 2
    models = build()
    for model in models:  # warm-up: pair plans, allocator
        train_batched(model, inputs, targets, device=device, **dict(short, steps=2,
                                                                     surrogate_steps=0))
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for model in models:
            train_batched(model, inputs, targets, device=device, **short)
    events = prof.key_averages()
    work = sum(e.self_cpu_time_total for e in events if e.key in WORK_OPS) / 1e6
    compute = sum(e.self_cpu_time_total for e in events
                  if e.key.startswith("aten::") and e.key not in BOOKKEEPING_OPS) / 1e6
    readout = sum(e.cpu_time_total for e in events if e.key in READOUT_NODES) / 1e6
    total = short["steps"] + short.get("surrogate_steps", 0)
    return work / total, compute / total, readout / total


def step_counts(model, inputs, targets) -> tuple[float, float, int]:
    """(matmul FLOPs, bytes moved, ops dispatched) of one training step: forward, loss,
    backward, Adam."""
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=1e-3, fused=params[0].device.type in ("cpu", "cuda"))

    def step():
        pred = model(inputs)
        ((pred - targets) ** 2).mean(-1).sum().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    step()  # builds the pair plans once, as training does
    flops = FlopCounterMode(display=False)
    traffic = ByteCounter()
    with flops, traffic:
        step()
    return float(flops.get_total_flops()), float(traffic.bytes), traffic.ops


def e1_variants(cfg, fam, seeds):
    """name -> function building the list of stacked programs of that variant."""

    def loop():
        singles = [TableKernelHeads([r], [s], len(fam.tokens), query_position=0, d=cfg.d,
                                    feature=cfg.feature, phi_std=cfg.phi_std)
                   for r in cfg.ranks for s in seeds]
        singles += [TableSoftmaxHeads([s], len(fam.tokens), score_dim=cfg.score_dim, d=cfg.d,
                                      qk_std=cfg.qk_std) for s in seeds]
        return singles

    def sweep():
        return [build_unit(cfg, fam, g)[0] for g in cfg.rank_groups] + [
            build_unit(cfg, fam, None)[0]]

    return {"loop": loop, "batched": sweep, "one program": lambda: [ModelStack(sweep())]}


def e2_variants(m, cfg):
    from companion.experiments.e2.readings import unit_models
    from companion.experiments.mlp_heads import MLPKernelHeads, MLPSoftmaxHeads

    def loop():
        out = []
        for r, s in unit_models(cfg, m, None, cfg.readout, "both")[1]:
            if r == "dense":
                out.append(MLPSoftmaxHeads(m, [s], cfg.hidden, cfg.value_dim))
            else:
                out.append(MLPKernelHeads(m, [r], [s], cfg.hidden, cfg.value_dim, cfg.feature))
        return out

    return {"loop": loop, "batched": lambda: [unit_models(cfg, m, None, cfg.readout, "both")[0]]}


def run_variants(name, variants, inputs, targets, kw, total_steps, repeats, device):
    """Best (cpu, wall) time of every variant over interleaved repeats, and per-run counts."""
    clock = Clock(device)
    best = {v: (float("inf"), float("inf")) for v in variants}
    counts = {}
    for _ in range(repeats):
        for v, build in variants.items():
            models = build()
            t = 0.0
            w = 0.0
            for model in models:
                c0, w0 = clock()
                train_batched(model, inputs, targets, device=device, **kw)
                c1, w1 = clock()
                t, w = t + c1 - c0, w + w1 - w0
            best[v] = min(best[v], (t, w))
            if v not in counts:
                f = b = ops = 0.0
                for model in build():
                    fm, bm, om = step_counts(model.to(device), inputs, targets)
                    f, b, ops = f + fm, b + bm, ops + om
                counts[v] = (f * total_steps, b * total_steps, ops * total_steps)
    return best, counts


def roofline_figure(points, peak, bw_dram, bw_cache, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=100)
    xs = [10 ** (k / 10) for k in range(-20, 21)]
    ax.loglog(xs, [min(peak, x * bw_cache) for x in xs], "k-", label="roofline (cache bandwidth)")
    ax.loglog(xs, [min(peak, x * bw_dram) for x in xs], "k--", lw=1,
              label="roofline (DRAM bandwidth)")
    for label, (intensity, rate) in points.items():
        ax.loglog([intensity], [rate], "o", ms=7, label=label)
    ax.set_xlabel("arithmetic intensity (matmul FLOP per byte moved)")
    ax.set_ylabel("achieved FLOP/s")
    ax.set_title("Training steps on the roofline")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def ceiling_line(variants, inputs, targets, kw, device, best, total_steps) -> float:
    """Print (and return) the speed-up ceiling: the loop's measured time over the time its
    work kernels take (from a profiled run, per step, times the steps)."""
    loop, _, loop_readout = work_seconds(variants["loop"], inputs, targets, kw, device)
    batched, compute, readout = work_seconds(variants["batched"], inputs, targets, kw, device)
    t_loop, t_batched = best["loop"][0], best["batched"][0]
    free_readout = ((t_loop - loop_readout * total_steps)
                    / max(t_batched - readout * total_steps, 1e-9))
    loop, batched, compute = (loop * total_steps / t_loop, batched * total_steps / t_batched,
                              compute * total_steps / t_batched)
    print(f"  ceiling: the loop spends {100 * loop:.0f}% of its CPU time in matmul and "
          f"gather/scatter kernels ({', '.join(o[6:] for o in WORK_OPS[:6])}), work that "
          f"stacking does not share, so batched/loop <= about x{1 / loop:.2f} unless the batched "
          f"kernels do that work faster; batched spends {100 * batched:.0f}% of its time there "
          f"and {100 * min(compute, 1):.0f}% in compute kernels of any kind (elementwise and "
          f"reductions included): stacking can remove only the rest")
    if loop_readout:
        print(f"  a pair readout that cost nothing (in both programs; "
              f"{100 * loop_readout * total_steps / t_loop:.0f}% of the loop's time, "
              f"{100 * readout * total_steps / t_batched:.0f}% of batched's) would give "
              f"batched/loop x{free_readout:.2f}")
    return 1 / loop


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--device", default="cpu")
    p.add_argument("--skip-e2", action="store_true")
    p.add_argument("--out", default=str(Path(__file__).resolve().parent / "out"))
    args = p.parse_args(argv)
    seed_everything(0, threads=args.threads)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda requested but CUDA is not available")
    seeds = list(range(args.seeds))

    peak = max(matmul_rate(device) for _ in range(3))
    t_op = min(dispatch_time(device) for _ in range(3))
    bw_dram = max(bandwidth(device, 25 * 10**6, 2) for _ in range(2))
    bw_cache = max(bandwidth(device, n) for n in (10**5, 3 * 10**5, 10**6))
    print(f"device {device} ({'wall time' if Clock(device).wall else 'CPU time'}), "
          f"torch threads={torch.get_num_threads()}, best of {args.repeats} interleaved repeats")
    print(f"ceilings: float32 matmul {peak / 1e9:.1f} GFLOP/s (1024^3); streaming add "
          f"{bw_cache / 1e9:.1f} GB/s cache-resident (<= 12 MB), {bw_dram / 1e9:.1f} GB/s DRAM "
          f"(300 MB); ridge point {peak / bw_cache:.1f} FLOP/byte; {t_op * 1e6:.1f} us per "
          f"dispatched op")
    points, pct = {}, {}

    def report(exp, v, t, w, loop_t, counts):
        f, b, ops = counts
        roof = max(f / peak, b / bw_cache)
        pct[(exp, v)] = 100 * roof / t
        points[f"{exp.upper()} {v}"] = (f / b, f / t)
        print(f"  {v:<12s} {t:7.2f} s (wall {w:6.2f} s)  x{loop_t / t:5.2f} vs loop  "
              f"{f / t / 1e9:6.2f} GFLOP/s  {b / t / 1e9:6.2f} GB/s  intensity {f / b:4.2f} "
              f"FLOP/B  {pct[(exp, v)]:5.1f}% of roofline  ({ops / total_steps_of[exp]:.0f} ops "
              f"per step; with the dispatch ceiling {100 * max(roof, ops * t_op) / t:5.1f}%)")

    cfg = dataclasses.replace(E1_FULL, seeds=seeds, dense_seeds=seeds, steps=args.steps,
                              surrogate_steps=args.steps // 2)
    fam = e1_family(cfg)
    ids = torch.as_tensor(fam.token_ids, device=device)
    y = torch.as_tensor(fam.targets, dtype=torch.float32, device=device)
    total = cfg.steps + cfg.surrogate_steps
    kw = dict(steps=cfg.steps, lr=cfg.lr, final_lr_fraction=cfg.final_lr_fraction,
              surrogate_steps=cfg.surrogate_steps, surrogate_power=cfg.surrogate_power)
    variants = e1_variants(cfg, fam, seeds)
    n_models = len(cfg.ranks) * len(seeds) + len(seeds)
    groups = [list(g) for g in cfg.rank_groups]
    print(f"E1: witness family N={len(ids)} inputs, T={len(fam.tokens)} tokens; {n_models} "
          f"models (r in {list(cfg.ranks)} x seeds {seeds} + dense), {total} steps; sweep "
          f"units {groups} + dense")
    total_steps_of = {"e1": total, "e2": args.steps}
    best1, counts1 = run_variants("E1", variants, ids, y, kw, total, args.repeats, device)
    for v, (t, w) in best1.items():
        report("e1", v, t, w, best1["loop"][0], counts1[v])
    e1_ratio = best1["loop"][0] / best1["batched"][0]
    ceilings = {}
    profiled = device.type == "cpu" and not Clock(device).wall  # CPU-time shares
    if profiled:
        ceilings["e1"] = ceiling_line(variants, ids, y, kw, device, best1, total)

    e2_ratio = float("nan")
    if not args.skip_e2:
        from companion.core.task import min_ip_targets
        from companion.experiments.e2.data import pool_inputs
        from companion.experiments.e2.protocols import E2_QUICK
        from companion.experiments.e2.readings import reading_data

        cfg2 = dataclasses.replace(E2_QUICK, seeds=seeds, steps=args.steps)
        m, pool = cfg2.widths[0], cfg2.pool_sizes[0]
        train_pool, train_idx = reading_data(cfg2, m, pool)["train"]
        inputs = pool_inputs(train_pool, train_idx, device)
        y2 = torch.as_tensor(min_ip_targets(train_pool[train_idx]).reshape(-1),
                             dtype=torch.float32, device=device)
        kw2 = dict(steps=args.steps, lr=cfg2.lr, final_lr_fraction=cfg2.final_lr_fraction)
        print(f"E2: m={m}, pool {len(train_pool)} train tokens, {len(y2)} training inputs, "
              f"ranks {list(cfg2.ranks)} in groups {[list(g) for g in cfg2.rank_groups]} x "
              f"seeds {seeds} + dense, {args.steps} steps")
        best2, counts2 = run_variants("E2", e2_variants(m, cfg2), inputs, y2, kw2, args.steps,
                                      args.repeats, device)
        for v, (t, w) in best2.items():
            report("e2", v, t, w, best2["loop"][0], counts2[v])
        e2_ratio = best2["loop"][0] / best2["batched"][0]
        if profiled:
            ceilings["e2"] = ceiling_line(e2_variants(m, cfg2), inputs, y2, kw2, device, best2,
                                          args.steps)

    fig = Path(args.out) / f"roofline_{device.type}.png"
    roofline_figure(points, peak, bw_dram, bw_cache, fig)
    print(f"figure: {fig}")
    if ceilings:
        print("ceilings (1 / the loop's work-kernel share): " + "; ".join(
            f"{k} x{v:.2f}" for k, v in ceilings.items()))
    print(f"e1 batched/loop x{e1_ratio:.2f}; e2 batched/loop x{e2_ratio:.2f}; "
          f"e1 achieved {pct[('e1', 'batched')]:.1f}% of roofline")


if __name__ == "__main__":
    main()
