"""How many singular directions of the canonical kernel exp(-beta <x,z>) does a head need?
Truncated-SVD kernels (signed, clipped at a tiny positive floor) on a pool, overlap readout,
exact-sequence accuracy on uniform triples and on all-gap-1-ish 'tight' triples."""
import itertools, numpy as np
from companion.ood_protocols_dev import *
from companion.task import min_ip_targets, token_pool

def slice_pool(m, w):
    return np.array([[1 if i in c else 0 for i in range(m)] for c in itertools.combinations(range(m), w)])

def acc(K, pool, idx):
    g = pool_gram(pool); t = min_ip_targets(pool[idx])
    out = np.empty(idx.shape)
    for i in range(3):
        q = idx[:, i]
        a = np.maximum(K[q[:, None], idx], 1e-12)
        f = g[q[:, None], idx]
        out[:, i] = (a * f).sum(1) / a.sum(1)
    return (np.abs(out - t) < 0.5).all(1).mean()

rng = np.random.default_rng(0)
for label, pool in [("slice m=8", slice_pool(8, 4)), ("slice m=10", slice_pool(10, 5)),
                    ("slice m=12", slice_pool(12, 6)), ("cube m=8", all_tokens_pool(8)),
                    ("random m=12 P=256", token_pool(12, 256, 0))]:
    g = pool_gram(pool); P = len(pool)
    idx_u = uniform_triples(P, 3000, rng); idx_t = tight_triples(g, 3000, rng)
    for beta in (1.0, 2.0):
        K = np.exp(-beta * g)
        U, s, Vt = np.linalg.svd(K)
        sv = s / s[0]
        row = []
        for r in (1, 2, 4, 8, 16, 32, 64, 128, 256):
            if r > P: break
            Kr = (U[:, :r] * s[:r]) @ Vt[:r]
            row.append(f"{r}:{acc(Kr, pool, idx_u):.2f}/{acc(Kr, pool, idx_t):.2f}")
        print(f"{label} P={P} beta={beta} full={acc(K,pool,idx_u):.2f}/{acc(K,pool,idx_t):.2f}  " + " ".join(row))
    # distinct singular value levels (multiplicity plateaus)
    lv = np.round(np.log10(sv[sv > 1e-8]), 2)
    vals, counts = np.unique(-lv, return_counts=True)
    print("   sv plateaus (log10 s/s0 : count):", list(zip((-vals).tolist(), counts.tolist()))[:8])
