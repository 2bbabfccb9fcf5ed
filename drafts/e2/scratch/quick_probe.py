"""Candidate live quick mode for the chapter: one Paley pool, overlap readout, few ranks."""
import json, sys, time, numpy as np
from companion.ood_protocols_dev import *
from companion.codes import paley_hadamard_code
from companion.reproducibility import seed_everything
seed_everything(0)
cfg = json.loads(sys.argv[1])
q = cfg["q"]; pool = paley_hadamard_code(q); m = q + 1; P = len(pool)
c0 = time.process_time()
d = shared_pool_split(m, P, cfg["n_train"], 500, train_mix={"uniform": 0.5, "witness": 0.5},
                      test_distributions=("uniform", "witness"), pool=pool)
evals = {"tr_witness": (pool, d.train_parts["witness"]), **{k: (pool, v) for k, v in d.test_idx.items()}}
res = run_protocol("table", m=m, train=(pool, d.train_idx), evals=evals, ranks=cfg["ranks"], seeds=cfg["seeds"],
                   groups=cfg.get("groups"), readout="overlap", steps=cfg["steps"], lr=0.03)
print(cfg, f"cpu {time.process_time() - c0:.1f}s")
for n in evals:
    print(n, np.round(np.median(table(res, n, cfg["ranks"], cfg["seeds"]), axis=1), 2))
