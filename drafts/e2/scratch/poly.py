"""Explicit nonnegative heads of known rank: K(x,z) = (<x, 1-z> + c)^k, overlap readout.
Rank = sum_{j<=k} C(m, j) (multilinear monomials). Exact-sequence accuracy per distribution."""
import itertools, math, numpy as np
from companion.ood_protocols_dev import *
from companion.task import min_ip_targets, token_pool

def acc(K, pool, idx):
    g = pool_gram(pool); t = min_ip_targets(pool[idx]); out = np.empty(idx.shape)
    for i in range(3):
        q = idx[:, i]; a = K[q[:, None], idx]; f = g[q[:, None], idx]
        out[:, i] = (a * f).sum(1) / a.sum(1)
    return (np.abs(out - t) < 0.5).all(1).mean()

def slice_pool(m, w):
    return np.array([[1 if i in c else 0 for i in range(m)] for c in itertools.combinations(range(m), w)])

rng = np.random.default_rng(0)
pools = [("random m=8 P=256", token_pool(8, 256, 0)), ("random m=10 P=1024", token_pool(10, 1024, 0)),
         ("random m=12 P=2048", token_pool(12, 2048, 0)), ("random m=16 P=2048", token_pool(16, 2048, 0)),
         ("slice m=8", slice_pool(8, 4)), ("slice m=12", slice_pool(12, 6))]
for label, pool in pools:
    g = pool_gram(pool); m = pool.shape[1]
    comp = pool @ (1 - pool).T  # <x, 1-z>
    dists = {n: draw_triples(n, g, 3000, rng) for n in HARD_DISTRIBUTIONS}
    print(label)
    for k in range(1, 7):
        rank = sum(math.comb(m, j) for j in range(k + 1))
        best = max(((c, [acc((comp + c) ** k, pool, dists[n]) for n in dists]) for c in (0.05, 0.25, 0.5, 1.0, 2.0)),
                   key=lambda t: t[1][0])
        print(f"  k={k} rank={rank:5d} c={best[0]}: " + " ".join(f"{n}={a:.2f}" for n, a in zip(dists, best[1])))
