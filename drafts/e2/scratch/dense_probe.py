"""Dense table heads with the learned readout on Paley pools: which lr / score_dim / qk_std train?"""
import sys, json, numpy as np
from companion.ood_protocols_dev import *
from companion.codes import paley_hadamard_code
from companion.reproducibility import seed_everything
seed_everything(0)
for q in (7, 11):
    pool = paley_hadamard_code(q); m = q + 1; P = len(pool)
    d = shared_pool_split(m, P, 3000, 1000, train_mix={"uniform": 0.5, "witness": 0.5},
                          test_distributions=("uniform", "witness"), pool=pool)
    evals = {"train": (pool, d.train_idx[:3000]), **{k: (pool, v) for k, v in d.test_idx.items()}}
    for lr, qk in ((0.03, 0.2), (0.01, 0.2), (0.03, 1.0), (0.1, 0.2)):
        res = run_protocol("table", m=m, train=(pool, d.train_idx), evals=evals, ranks=[1], seeds=[0, 1, 2],
                           readout="learned", steps=3000, lr=lr, qk_std=qk)
        print(f"m={m} lr={lr} qk_std={qk}: " + " ".join(
            f"{n}=" + ",".join(f"{res['acc'][n][f'dense/s{s}']:.2f}" for s in (0, 1, 2)) for n in evals), f"cpu {res['cpu_s']:.0f}s", flush=True)
