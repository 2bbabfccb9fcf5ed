"""Apply the pre-registered rule (curve_rule) to every probe in scratch/results/probes.jsonl.
Prints one block per probe: medians per rank for train and each test set, r*, width, sharp,
limit, dense exact counts, CPU seconds."""
import json, sys
import numpy as np
from companion.ood_protocols_dev import curve_rule, dense_exact, table

rows = [json.loads(l) for l in open("scratch/results/probes.jsonl")]
seen = {}
for rec in rows:  # keep the last record of identical configs
    seen[json.dumps(rec["config"], sort_keys=True)] = rec
for rec in seen.values():
    c, res = rec["config"], rec["result"]
    ranks, seeds = c["ranks"], c["seeds"]
    if c.get("kind") == "table" and c.get("P") == 64 and c.get("m") == 24 and c.get("pool") == "random":
        pass
    names = [n for n in res["acc"] if not n.startswith("tr_")]
    names = ["train"] + [n for n in names if n != "train"]
    extra = [n for n in res["acc"] if n.startswith("tr_")]
    label = f"{c['kind']}/{c['pool']} m={c['m']} P={c['P']} readout={c['readout']} steps={c['steps']} seeds={len(seeds)}"
    print(f"== {label}  cpu={res.get('cpu_s', float('nan')):.0f}s  train_mix={c['train_mix']}")
    tr = table(res, "train", ranks, seeds)
    print("   r: " + " ".join(f"{r:>5}" for r in ranks) + "  dense")
    for n in names + extra:
        t = table(res, n, ranks, seeds)
        med = np.median(t, axis=1)
        line = f"   {n[:9]:>9}: " + " ".join(f"{a:5.2f}" for a in med[:-1]) + f"  {med[-1]:5.2f}"
        if n != "train" and not n.startswith("tr_"):
            trn = table(res, "tr_" + n, ranks, seeds) if "tr_" + n in res["acc"] else tr
            rule = curve_rule(ranks, t[:-1], trn[:-1])
            d = dense_exact(t[-1])
            line += (f" | r*={rule['r_star']} first={rule['r_first']} r50={rule['r50']} "
                     f"w={rule['width']} sharp={rule['sharp']} limit={rule.get('limit')}(cap {rule.get('capacity_share') or 0:.2f}) "
                     f"rise={rule.get('largest_grid_rise', 0):.2f}@{rule.get('largest_grid_rise_at')} "
                     f"dense {d['exact']}/{d['seeds']}")
        print(line)
