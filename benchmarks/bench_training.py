"""The training engine against its real peers, in one run: a plain PyTorch loop and torch.func.

    python benchmarks/bench_training.py [--steps 20] [--seeds 2] [--repeats 1] [--threads 1]
                                        [--device cpu|cuda] [--compile] [--skip-e2]

The same models (the same initial draws), the same Adam schedule and objective, trained three
ways:

* **plain** — a Python loop over ordinary ``nn.Module`` s with autograd, one model at a time
  (:class:`PlainTableHead`, :class:`PlainMLPHead`: what one writes without the engine; they are
  also the test oracle of ``tests/experiments/test_engine.py``);
* **vmap** — PyTorch's ensembling recipe: ``torch.func.stack_module_state`` +
  ``functional_call`` + ``vmap`` over the plain modules of one shape (one program per rank),
  eager and, with ``--compile``, under ``torch.compile`` (compile time is reported apart and
  not timed; a compile failure is reported and the compiled variant skipped);
* **engine** — the stacked heads of :mod:`companion.experiments.heads` trained by
  :func:`companion.experiments.engine.train_batched` as the sweeps do it (ranks padded into
  rank groups, one program per group), which also keeps every model's best checkpoint (the
  peers do not: a handicap to the engine).

E1: every (rank, seed) table head of the full witness sweep plus the dense heads (steps MSE
steps, then steps / 2 surrogate steps). E2: one width (m = 8) of the quick protocol: 8 ranks in
two groups x seeds plus the dense heads. Times are the best of ``--repeats``; on a CPU with one
torch thread (the default, as the sweeps run) the process's CPU time (robust to other load on a
shared machine), otherwise (synchronised) wall time. Prints ratios to the plain loop and to
eager vmap, never asserts; the processor and its measured float32 matmul rate are printed with
the figures, since ratios move with the processor.

Measured 2026-12-01 on an AMD EPYC (AVX2; one torch thread on a 2-core machine shared with
other jobs; float32 matmul 55-69 GFLOP/s), 2 seeds, best of 1-2 (ratios move by ~10 % between
runs): E1 engine x3.5 vs plain and x2.8 vs eager vmap at 20 + 10 steps, x3.0 and x2.75 at
100 + 50; E2 engine x2.6 vs plain and x1.9 vs eager vmap at 20 steps, x2.7 and x2.1 at 100.
After the distilling round (issue 23: full-batch engine, one progress bar), measured
2026-12-02 on an Intel Xeon (AVX-512; float32 matmul 176 GFLOP/s; one torch thread), 2 seeds,
20 (+ 10) steps, best of 1: E1 engine x3.2 vs plain and x2.7 vs eager vmap; E2 x2.1 and x1.8.
Eager vmap gains little over the plain loop (x1.0-1.3): it stacks only models of one shape,
two per rank here, where the engine pads ranks into groups. ``torch.compile`` pays in the
steady state but not in these runs: on one group of E2's shapes (3 heads of rank 16, 20 steps)
compiled vmap took 0.135 s against 0.218 s eager and 0.156 s for the engine, after 185 s of
compilation (wall, on that loaded machine); ``--compile`` compiles one program per group shape
(21 here), so it is off by default.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import math
import platform
import time

import numpy as np
import torch
from torch import nn

from companion.book import seed_everything
from companion.experiments.engine import lr_at, train_batched


class PlainTableHead(nn.Module):
    """One E1 table head as an ordinary module (no stacking, no custom autograd): NKA of rank
    ``width`` with exp features (``kind="kernel"``) or a softmax head with scores in R^width;
    tables over ``num_tokens`` tokens, keys and values per position (``positional``).
    The draws are those of the engine's heads of the same seed."""

    def __init__(self, kind, width, seed, num_tokens, length=3, d=16, std=1.0,
                 query_position=0, positional=True):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        p = length if positional else 1
        self.kind, self.query_position, self.positional = kind, query_position, positional
        self.q = nn.Parameter(torch.randn(num_tokens, width, generator=g) * std)
        self.k = nn.Parameter(torch.randn(p, num_tokens, width, generator=g) * std)
        self.v = nn.Parameter(torch.randn(p, num_tokens, d, generator=g))
        self.a = nn.Parameter(torch.randn(num_tokens, d, generator=g) * (1.0 / math.sqrt(d)))
        self.b = nn.Parameter(torch.zeros(num_tokens))

    def forward(self, ids):
        n, t = ids.shape[1], self.q.shape[0]
        x = ids[:, self.query_position]
        pos = torch.arange(n) if self.positional else torch.zeros(n, dtype=torch.long)
        cols = pos.to(ids.device) * t + ids  # (N, n) into the P*T keys
        k = self.k.reshape(-1, self.k.shape[-1])
        if self.kind == "kernel":  # log alpha = log <exp(q - max q), exp(k - max k)> + max k
            q_shift = self.q.detach().amax(-1, keepdim=True)
            k_shift = k.detach().amax(-1, keepdim=True)
            kern = torch.exp(self.q - q_shift) @ torch.exp(k - k_shift).T
            logits = _read(kern, x[:, None], cols).clamp_min(1e-30).log() + k_shift[cols, 0]
        else:
            logits = _read(self.q @ k.T, x[:, None], cols)
        w = (logits - logits.detach().amax(-1, keepdim=True)).exp()
        scores = _read(self.a @ self.v.reshape(-1, self.v.shape[-1]).T, x[:, None], cols)
        return (w * scores).sum(-1) / w.sum(-1) + self.b[x]


def _read(table, rows, cols):
    """table[rows, cols] for index tensors of one shape, as one flat gather (index_select:
    its backward is an index_add, much faster on a CPU than advanced indexing's)."""
    flat = (rows * table.shape[1] + cols).reshape(-1)
    return table.reshape(-1).index_select(0, flat).view(cols.shape)


def _seed(*parts) -> int:
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(1)[0])


class PlainMLPHead(nn.Module):
    """One E2 head as an ordinary module: an MLP of the m bits gives, per pool token,
    phi_Q and phi_K (exp features of rank ``width``, ``kind="kernel"``) or scores in R^m
    (``"softmax"``), values, readout and bias. Inputs (rows, PoolBits) as the engine's."""

    def __init__(self, kind, m, width, seed, hidden=(32,), d=16, std=0.2):
        super().__init__()
        gen = torch.Generator().manual_seed(_seed(seed, width, m, 1) if kind == "kernel"
                                            else _seed(seed, 0, m, 2))
        self.width, self.d, self.kind = width, d, kind
        dims = (m, *hidden, 2 * width + 2 * d + 1)
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims, dims[1:]))
        with torch.no_grad():  # He init; the output layer scaled by 1 (kernel) or std
            for i, layer in enumerate(self.layers):
                w = torch.randn(dims[i], dims[i + 1], generator=gen)
                w = w * math.sqrt(2.0 / dims[i]) if i < len(hidden) else \
                    w * (1.0 if kind == "kernel" else std) / math.sqrt(dims[i])
                layer.weight.copy_(w.T)
                layer.bias.zero_()

    def forward(self, inputs):
        rows, pool = inputs
        h = pool.bits
        for layer in self.layers[:-1]:
            h = torch.relu(torch.addmm(layer.bias, h, layer.weight.T))
        out = torch.addmm(self.layers[-1].bias, h, self.layers[-1].weight.T)
        q, k, v, a, b = out.split([self.width, self.width, self.d, self.d, 1], dim=-1)
        x, keys = rows[:, 0], rows[:, 1:]
        scores = _read(a @ v.T, x[:, None], keys)
        if self.kind == "kernel":  # alpha = <exp(q - max q), exp(k - max k)>
            w = _read(torch.exp(q - q.detach().amax(-1, keepdim=True))
                      @ torch.exp(k - k.detach().amax()).T, x[:, None], keys)
            return (w * scores).sum(-1) / w.sum(-1).clamp_min(1e-30) + b[x, 0]
        logits = _read(q @ k.T, x[:, None], keys)
        w = (logits - logits.detach().amax(-1, keepdim=True)).exp()
        return (w * scores).sum(-1) / w.sum(-1) + b[x, 0]


def objective(pred, targets, surrogate: bool, power: int):
    """Each model's loss, as the engine computes it: mean squared error, or in the surrogate
    phase the max-scaled L_power norm of the errors."""
    err = pred - targets
    if not surrogate:
        return (err * err).mean(-1)
    a = err.abs()
    scale = a.detach().amax(-1, keepdim=True).clamp_min(1e-12)
    x, p, result = a / scale, power, None
    while p:  # x ** power by squaring, as the engine
        if p & 1:
            result = x if result is None else result * x
        p >>= 1
        if p:
            x = x * x
    return scale[..., 0] * result.mean(-1) ** (1.0 / power)


def _adam_loop(params, loss_fn, kw):
    """kw's schedule (cosine lr, MSE then surrogate steps) on one loss function."""
    opt = torch.optim.Adam(params, lr=kw["lr"], fused=params[0].device.type in ("cpu", "cuda"))
    steps, sur = kw["steps"], kw.get("surrogate_steps", 0)
    for step in range(steps + sur):
        surrogate = step >= steps
        phase, length = (step - steps, sur) if surrogate else (step, steps)
        for group in opt.param_groups:
            group["lr"] = lr_at(phase, length, kw["lr"], kw["final_lr_fraction"])
        loss = loss_fn(surrogate)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


def train_plain(models, inputs, targets, kw):
    for model in models:
        _adam_loop(list(model.parameters()), lambda s, model=model: objective(
            model(inputs), targets, s, kw.get("surrogate_power", 16)), kw)


_LOSSES: dict = {}  # (shapes, compiled, targets) -> one loss per group shape, compiled once


def vmap_programs(models, inputs, targets, kw, compiled: bool):
    """One torch.func program per group of same-shape plain modules: (stacked params,
    buffers, loss of the whole group)."""
    groups = {}
    for model in models:
        key = (type(model), model.kind,
               tuple((n, tuple(p.shape)) for n, p in model.named_parameters()))
        groups.setdefault(key, []).append(model)
    programs = []
    for key, group in groups.items():
        params, buffers = torch.func.stack_module_state(group)
        key = (key, compiled, id(targets))
        if key not in _LOSSES:
            base = copy.deepcopy(group[0]).to("meta")

            def loss(p, b, surrogate, base=base):
                pred = torch.func.vmap(lambda pi, bi: torch.func.functional_call(
                    base, (pi, bi), (inputs,)))(p, b)
                return objective(pred, targets, surrogate, kw.get("surrogate_power", 16)).sum()

            _LOSSES[key] = torch.compile(loss) if compiled else loss
        programs.append((params, buffers, _LOSSES[key]))
    return programs


def train_vmap(programs, kw):
    for params, buffers, loss in programs:
        _adam_loop(list(params.values()), lambda s, p=params, b=buffers, f=loss: f(p, b, s), kw)


def processor(device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        with open("/proc/cpuinfo") as f:
            name = next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
    except (OSError, StopIteration):
        name = platform.processor() or platform.machine()
    return f"{name} ({torch.backends.cpu.get_cpu_capability()})"


class Clock:
    """CPU time with one torch thread on a CPU, else (synchronised) wall time."""

    def __init__(self, device):
        self.device, self.wall = device, device.type != "cpu" or torch.get_num_threads() > 1

    def __call__(self) -> float:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter() if self.wall else time.process_time()


def matmul_gflops(device, n: int = 1024, repeats: int = 10) -> float:
    """Measured float32 matmul rate (n x n x n products), GFLOP/s, best of three."""
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    clock, best = Clock(device), 0.0
    a @ b
    for _ in range(3):
        t0 = clock()
        for _ in range(repeats):
            a @ b
        best = max(best, 2 * n**3 * repeats / (clock() - t0) / 1e9)
    return best


def compare(name, make_plain, make_engine, inputs, targets, kw, args, device):
    """Time every way of training the models; print each with its ratios; return the times."""
    clock, times = Clock(device), {}

    def timed(label, fn):
        t0 = clock()
        fn()
        times[label] = min(times.get(label, math.inf), clock() - t0)

    ways = ["plain", "vmap"] + (["vmap+compile"] if args.compile else []) + ["engine"]
    if args.compile:  # compile (and warm up) outside the timed runs
        torch._dynamo.config.cache_size_limit = 64  # one entry per group shape and phase
        t0 = time.perf_counter()
        try:
            train_vmap(vmap_programs(make_plain(), inputs, targets, kw, True),
                       dict(kw, steps=2, surrogate_steps=2 if kw.get("surrogate_steps") else 0))
            print(f"  (torch.compile of the vmap programs: {time.perf_counter() - t0:.0f} s "
                  "wall, not timed)")
        except Exception as exc:  # noqa: BLE001 - any compiler failure: report, go on
            print(f"  torch.compile failed ({type(exc).__name__}: {str(exc)[:200]}); skipped")
            ways.remove("vmap+compile")
    for _ in range(args.repeats):
        for way in ways:
            if way == "engine":
                programs = make_engine()
                timed(way, lambda ps=programs: [
                    train_batched(p, inputs, targets, device=device, **kw) for p in ps])
            elif way == "plain":
                models = make_plain()
                timed(way, lambda ms=models: train_plain(ms, inputs, targets, kw))
            else:
                programs = vmap_programs(make_plain(), inputs, targets, kw, way != "vmap")
                timed(way, lambda ps=programs: train_vmap(ps, kw))
    for way in ways:
        t = times[way]
        print(f"  {name} {way:<13s} {t:7.2f} s   x{times['plain'] / t:5.2f} vs plain   "
              f"x{times['vmap'] / t:5.2f} vs vmap")
    return times


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu")
    p.add_argument("--compile", action="store_true", help="also time vmap under torch.compile")
    p.add_argument("--skip-e2", action="store_true")
    args = p.parse_args(argv)
    seed_everything(0, threads=args.threads)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda requested but CUDA is not available")
    seeds = list(range(args.seeds))
    clock = Clock(device)
    print(f"{processor(device)}: float32 matmul {matmul_gflops(device):.1f} GFLOP/s; torch "
          f"{torch.__version__}, {torch.get_num_threads()} thread(s), "
          f"{'wall' if clock.wall else 'CPU'} time, best of {args.repeats}")

    from companion.experiments.e1 import E1_FULL, build_unit, e1_family

    cfg = dataclasses.replace(E1_FULL, seeds=seeds, dense_seeds=seeds, steps=args.steps,
                              surrogate_steps=args.steps // 2)
    fam = e1_family(cfg)
    ids = torch.as_tensor(fam.token_ids, device=device)
    y = torch.as_tensor(fam.targets, dtype=torch.float32, device=device)
    t = len(fam.tokens)
    kw = dict(steps=cfg.steps, lr=cfg.lr, final_lr_fraction=cfg.final_lr_fraction,
              surrogate_steps=cfg.surrogate_steps, surrogate_power=cfg.surrogate_power)
    print(f"E1: witness family, {len(ids)} inputs over {t} tokens; {len(cfg.ranks)} ranks x "
          f"{len(seeds)} seeds + {len(seeds)} dense; {cfg.steps} + {cfg.surrogate_steps} steps; "
          f"engine groups {[list(g) for g in cfg.rank_groups]} + dense")

    def e1_plain():
        models = [PlainTableHead("kernel", r, s, t, d=cfg.d, std=cfg.phi_std)
                  for r in cfg.ranks for s in seeds]
        models += [PlainTableHead("softmax", cfg.score_dim, s, t, d=cfg.d, std=cfg.qk_std,
                                  positional=False) for s in seeds]
        return [m.to(device) for m in models]

    def e1_engine():
        return [build_unit(cfg, fam, g)[0] for g in cfg.rank_groups] + [
            build_unit(cfg, fam, None)[0]]

    compare("E1", e1_plain, e1_engine, ids, y, kw, args, device)
    if args.skip_e2:
        return

    from companion.core.task import min_ip_targets
    from companion.experiments.e2 import pipeline
    from companion.experiments.e2.data import pool_inputs

    cfg2 = dataclasses.replace(pipeline.E2_QUICK, seeds=seeds, steps=args.steps)
    m, pool = cfg2.sizes[0]
    train_pool, train_idx = pipeline.e2_data(cfg2, m, pool)["train"]
    inputs = pool_inputs(train_pool, train_idx, device)
    y2 = torch.as_tensor(min_ip_targets(train_pool[train_idx]).reshape(-1), dtype=torch.float32,
                         device=device)
    kw2 = dict(steps=args.steps, lr=cfg2.lr, final_lr_fraction=cfg2.final_lr_fraction)
    print(f"E2: m = {m}, {len(train_pool)} pool tokens, {len(y2)} training inputs; ranks "
          f"{list(cfg2.ranks)} x {len(seeds)} seeds + {len(seeds)} dense; {args.steps} steps; "
          f"engine groups {[list(g) for g in cfg2.rank_groups]} + dense")

    def e2_plain():
        models = [PlainMLPHead("kernel", m, r, s, cfg2.hidden, cfg2.value_dim)
                  for r in cfg2.ranks for s in seeds]
        models += [PlainMLPHead("softmax", m, m, s, cfg2.hidden, cfg2.value_dim) for s in seeds]
        return [x.to(device) for x in models]

    def e2_engine():
        return [pipeline.unit_models(cfg2, m, pool, "learned", cfg2.rank_groups, True)[0]]

    compare("E2", e2_plain, e2_engine, inputs, y2, kw2, args, device)


if __name__ == "__main__":
    main()
