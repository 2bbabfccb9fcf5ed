import sys, time, json, numpy as np, torch
from companion.ood_protocols_dev import *
from companion.reproducibility import seed_everything
seed_everything(0)
m, P, ntr = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
readout = sys.argv[4]; steps = int(sys.argv[5]); lr = float(sys.argv[6])
mix = json.loads(sys.argv[7]) if len(sys.argv) > 7 else None
ranks = [1, 2, 4, 8, 16, 32, 64]; seeds = [0, 1]
pool = all_tokens_pool(m) if P == 2**m else None
d = shared_pool_split(m, P, ntr, 1000, train_mix=mix, seed=0, pool=pool)
evals = {"train": (d.pool, d.train_idx[:2000])}
evals.update({k: (d.pool, v) for k, v in d.test_idx.items()})
res = run_protocol("table", m=m, train=(d.pool, d.train_idx), evals=evals, ranks=ranks, seeds=seeds,
                   groups=[[1,2,4,8,16],[32,64]], readout=readout, steps=steps, lr=lr)
print(f"m={m} P={P} ntr={ntr} readout={readout} steps={steps} lr={lr} mix={mix} wall={res['wall_s']:.0f}s")
names = list(evals)
print("  r    " + " ".join(f"{n:>8}" for n in names))
for i, r in enumerate(ranks + ["dense"]):
    print(f"{str(r):>6} " + " ".join(f"{np.median(table(res, n, ranks, seeds)[i]):8.2f}" for n in names))
