import numpy as np
from companion.ood_protocols_dev import *
rng=np.random.default_rng(0)
cp = code_pool(24, 32, 4, 8, seed=0); print(cp.shape, np.unique(pool_gram(cp), return_counts=True))
d = disjoint_pool_split(12, 1024, 0.7, 3000, 500, seed=0)
print(len(d.train_pool), len(d.test_pool), set(map(tuple,d.train_pool)).isdisjoint(map(tuple,d.test_pool)))
for k,v in d.test_idx.items():
    g=query_gaps(d.test_pool[v]); print(k, np.round(np.bincount(g.ravel(),minlength=8)[:8]/g.size,2))
sp = shared_pool_split(24, 64, 5000, 1000, train_mix={"uniform":0.5,"witness":0.5}, test_distributions=("uniform","witness"), pool=cp)
print({k: v.shape for k,v in sp.test_idx.items()}, sp.train_idx.shape)
