import sys, time, json, numpy as np, torch
from companion.ood_protocols_dev import *
from companion.reproducibility import seed_everything
seed_everything(0)
m, P, ntr = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
readout = sys.argv[4]; steps = int(sys.argv[5]); lr = float(sys.argv[6])
hidden = tuple(json.loads(sys.argv[7])) if len(sys.argv) > 7 else ()
mix = json.loads(sys.argv[8]) if len(sys.argv) > 8 else None
ranks = [1, 2, 4, 8, 16, 32, 64, 128]; seeds = [0, 1]
d = disjoint_pool_split(m, P, 0.7, ntr, 1000, train_mix=mix, seed=0)
evals = {"train": (d.train_pool, d.train_idx[:2000]), "tr_tight": (d.train_pool, d.train_eval_idx["tight"])}
evals.update({k: (d.test_pool, v) for k, v in d.test_idx.items()})
res = run_protocol("mlp", m=m, train=(d.train_pool, d.train_idx), evals=evals, ranks=ranks, seeds=seeds,
                   groups=[[1,2,4,8,16],[32,64,128]], readout=readout, steps=steps, lr=lr, hidden=hidden)
print(f"DISJOINT m={m} P={P} ({len(d.train_pool)}/{len(d.test_pool)}) ntr={ntr} readout={readout} hidden={hidden} steps={steps} lr={lr} mix={mix} wall={res['wall_s']:.0f}s")
names = list(evals)
print("  r    " + " ".join(f"{n:>8}" for n in names))
for i, r in enumerate(ranks + ["dense"]):
    print(f"{str(r):>6} " + " ".join(f"{np.median(table(res, n, ranks, seeds)[i]):8.2f}" for n in names))
