import time, numpy as np
from companion.ood_protocols_dev import *
for m, P in [(8, 64), (8, 256), (12, 256), (12, 1024)]:
    t=time.time()
    d = shared_pool_split(m, P, 5000, 1000, seed=0)
    s = {}
    for name, idx in d.test_idx.items():
        g = query_gaps(d.pool[idx])
        s[name] = (np.round(np.bincount(g.ravel(), minlength=6)[:6]/g.size,2).tolist())
    print(m, P, f"{time.time()-t:.2f}s")
    for k,v in s.items(): print("   ", k, "gap dist", v)
