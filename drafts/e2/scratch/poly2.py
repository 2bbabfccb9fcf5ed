"""Explicit nonnegative heads of known rank (overlap readout), for reference curves:
degree-k 'complement' kernels K = (<x, 1-z> + c)^k, rank sum_{j<=k} C(m, j), and the
indicator head (one feature per pool token, rank P), on the distributions of the protocols."""
import math, numpy as np
from companion.ood_protocols_dev import *
from companion.codes import paley_hadamard_code
from companion.task import min_ip_targets

def acc(K, pool, idx):
    g = pool_gram(pool); t = min_ip_targets(pool[idx]); out = np.empty(idx.shape)
    for i in range(3):
        q = idx[:, i]; a = K[q[:, None], idx]; f = g[q[:, None], idx]
        out[:, i] = (a * f).sum(1) / a.sum(1)
    return (np.abs(out - t) < 0.5).all(1).mean()

rng = np.random.default_rng(0)
pools = [("paley m=8", paley_hadamard_code(7)), ("paley m=12", paley_hadamard_code(11)),
         ("paley m=24", paley_hadamard_code(23)), ("closed m=8 P=256", complement_closed_pool(8, 128, 0)),
         ("closed m=10 P=1024", complement_closed_pool(10, 512, 0)), ("closed m=12 P=2048", complement_closed_pool(12, 1024, 0)),
         ("closed m=12 P=64", complement_closed_pool(12, 32, 0))]
for label, pool in pools:
    m = pool.shape[1]; comp = pool @ (1 - pool).T
    dists = {}
    for n in ("uniform", "gap2", "witness"):
        try: dists[n] = draw_triples(n, pool, 3000, rng)
        except ValueError: pass
    print(label, "P =", len(pool))
    for k in range(1, 8):
        rank = sum(math.comb(m, j) for j in range(k + 1))
        if rank > 20000: break
        best = max(((c, [acc((comp + c) ** k, pool, dists[n]) for n in dists]) for c in (0.05, 0.5, 2.0)), key=lambda t: t[1][0])
        print(f"  k={k} rank={rank:6d}: " + " ".join(f"{n}={a:.2f}" for n, a in zip(dists, best[1])))
