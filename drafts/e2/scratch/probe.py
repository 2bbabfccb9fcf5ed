"""General probe: python scratch/probe.py '<json config>'  (appends to scratch/results/probes.jsonl)"""
import sys, time, json, numpy as np, torch
from companion.ood_protocols_dev import *
from companion.task import token_pool
from companion.codes import paley_hadamard_code
from companion.reproducibility import seed_everything
seed_everything(0)
c = {"kind": "table", "pool": "random", "m": 12, "P": 64, "n_train": 5000, "n_test": 1000,
     "train_mix": {"uniform": 1.0}, "tests": ["uniform"], "readout": "overlap", "steps": 1500,
     "lr": 0.03, "ranks": [1, 2, 4, 8, 16, 32, 64], "groups": None, "seeds": [0, 1],
     "hidden": [], "low": 4, "high": 8, "data_seed": 0, "phi_std": 1.0, "tag": ""}
c.update(json.loads(sys.argv[1]))
m, P = c["m"], c["P"]
t0 = time.perf_counter()
if c["kind"] == "table":
    pool = {"random": lambda: token_pool(m, P, c["data_seed"]),
            "cube": lambda: all_tokens_pool(m),
            "code": lambda: code_pool(m, P // 2, c["low"], c["high"], seed=c["data_seed"]),
            "closed": lambda: complement_closed_pool(m, P // 2, c["data_seed"]),
            "paley": lambda: paley_hadamard_code(m - 1)}[c["pool"]]()
    d = shared_pool_split(m, P, c["n_train"], c["n_test"], train_mix=c["train_mix"],
                          test_distributions=c["tests"], seed=c["data_seed"], pool=pool)
    train = (d.pool, d.train_idx)
    evals = {"train": (d.pool, d.train_idx[:3000])}
    evals.update({"tr_" + k: (d.pool, v[:2000]) for k, v in d.train_parts.items()})
    evals.update({k: (d.pool, v) for k, v in d.test_idx.items()})
else:
    d = disjoint_pool_split(m, P, 0.7, c["n_train"], c["n_test"], train_mix=c["train_mix"],
                            test_distributions=c["tests"], seed=c["data_seed"],
                            complement_closed=c["pool"] != "random")
    train = (d.train_pool, d.train_idx)
    evals = {"train": (d.train_pool, d.train_idx[:3000])}
    evals.update({"tr_" + k: (d.train_pool, v) for k, v in d.train_eval_idx.items() if k != "uniform"})
    evals.update({k: (d.test_pool, v) for k, v in d.test_idx.items()})
res = run_protocol(c["kind"], m=m, train=train, evals=evals, ranks=c["ranks"], seeds=c["seeds"],
                   groups=c["groups"], readout=c["readout"], steps=c["steps"], lr=c["lr"],
                   hidden=c["hidden"], phi_std=c["phi_std"])
ranks, seeds = c["ranks"], c["seeds"]
names = list(evals)
print(f"== {json.dumps({k: v for k, v in c.items() if k not in ('ranks', 'groups')})}")
print(f"   train wall {res['wall_s']:.0f}s cpu {res.get('cpu_s', float('nan')):.0f}s (total {time.perf_counter()-t0:.0f}s)")
print("  r    " + " ".join(f"{n:>9}" for n in names))
for i, r in enumerate(ranks + ["dense"]):
    print(f"{str(r):>6} " + " ".join(f"{np.median(table(res, n, ranks, seeds)[i]):9.2f}" for n in names))
with open("scratch/results/probes.jsonl", "a") as fh:
    fh.write(json.dumps({"config": c, "result": res}) + "\n")
