"""Lemma D / D' bounds for exactness on a complement-closed pool's witness family, direct links
only: query x, keys x-bar (overlap 0) and y-bar (overlap G = <x, y-bar>). General affine readout:
rho = c(G) = G - 1 (n = 3, eps -> 1/2); overlap readout (weights alone): rho = 2G - 1."""
from collections import Counter
from fractions import Fraction
import numpy as np
from companion.codes import paley_hadamard_code
from companion.rank_bounds import rank_bound_from_rhos
from companion.ood_protocols_dev import complement_index, pool_gram, complement_closed_pool, code_pool

def bounds(pool):
    g = pool_gram(pool); comp = complement_index(pool)
    G = g[:, comp]  # G[x, y] = <x, y-bar>
    off = G[~np.eye(len(pool), dtype=bool)]
    out = {}
    for name, f in (("general", lambda G: G - 1), ("overlap", lambda G: 2 * G - 1)):
        rhos = Counter()
        for v, k in zip(*np.unique(off, return_counts=True)):
            r = f(int(v))
            if r >= 1:
                rhos[Fraction(r)] += int(k)
        # pairs with rho < 1 prove nothing: rank_bound_from_rhos needs rho >= 1, so count them as rho = 1
        bad = sum(int(k) for v, k in zip(*np.unique(off, return_counts=True)) if f(int(v)) < 1)
        if bad: rhos[Fraction(1)] += bad
        b = rank_bound_from_rhos(len(pool), dict(rhos))
        out[name] = (b.rank, getattr(b, "sharp_rank", None) if hasattr(b, "sharp_rank") else b)
    return out

for q in (7, 11, 23, 31):
    p = paley_hadamard_code(q)
    print(f"paley m={q+1} P={len(p)}", {k: v[1] for k, v in bounds(p).items()})
for m, P in ((12, 32), (12, 64), (12, 128), (8, 64)):
    p = complement_closed_pool(m, P // 2, 0)
    print(f"closed random m={m} P={P}", {k: v[1] for k, v in bounds(p).items()})
