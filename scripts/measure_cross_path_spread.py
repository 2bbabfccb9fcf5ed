"""Measure how far trained results move between two CPU code paths of this machine.

Runs the quick sweeps of E1 and E2 and the chapters' live subsets twice, through the CLI and
the package, in fresh subprocesses: once as this machine runs them ("plain": AVX2 or AVX-512
kernels, MKL's own dispatch) and once under ``ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE``
(torch's non-vectorised kernels, MKL's vendor-neutral path). Writes, per experiment and
quantity, the largest and the median |difference| over models, how many models, both CPU
capabilities and the torch version to ``results/cross_path_spread.json``; chapters 6, 7 and
the reading page quote that file to justify their tolerances (>= 3x the spread).

    python scripts/measure_cross_path_spread.py [--out results/cross_path_spread.json]
        [--keep-plain]   # also write the plain runs to results/e1_quick.json, e2_quick.json
        [--reuse DIR]    # only rewrite the report from the run files kept in DIR

Takes about 10 minutes on two cores (both paths run at once, one thread each).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PATHS = {"plain": {}, "default": {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"}}

LIVE = r"""
import json, sys
from companion.experiments import e1 as w
from companion.experiments.e2 import pipeline as o
from companion.book import seed_everything
import torch
seed_everything(0, threads=1)
if sys.argv[2] == "quick":
    records, _ = w.train_e1_live(w.E1_QUICK, w.experiment_witness_24())
    e2 = o.e2_live_result(o.E2_QUICK)
else:  # smoke: checks this script in seconds
    records, _ = w.train_e1_live(w.E1_SMOKE, w.experiment_witness_24(), ranks=(16, 28))
    e2 = o.e2_live_result(o.E2_SMOKE, width=8, ranks=(1, 4))
json.dump({"e1": records, "e2": e2, "cpu_capability": torch.backends.cpu.get_cpu_capability(),
           "torch": torch.__version__}, open(sys.argv[1], "w"))
"""


def _env(extra: dict) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY", "MKL_CBWR")}
    env.update(extra, OMP_NUM_THREADS="1", PYTHONHASHSEED="0")
    return env


def _spread(a: dict, b: dict) -> dict:
    if set(a) != set(b):
        raise SystemExit(f"the two runs hold different models: {sorted(set(a) ^ set(b))}")
    diffs = [abs(a[k] - b[k]) for k in a]
    return {"max_abs_difference": round(max(diffs), 6),
            "median_abs_difference": round(statistics.median(diffs), 6),
            "models": len(diffs)}


def _e1_values(result, quantity):
    units = result["units"].values() if isinstance(result, dict) else [{"models": result}]
    return {f"{m['kind']}:r{m['rank']}:s{m['seed']}": m[quantity]
            for u in units for m in u["models"]}


def _e2_values(widths: dict, key: str):
    out = {}
    for m, e in widths.items():
        if key == "dense":
            for name, accs in e["dense"].items():
                out.update({f"m{m}:{name}:s{j}": a for j, a in enumerate(accs)})
            continue
        table = e["train_accuracy"] if key == "train" else e["accuracy"][key]
        for i, r in enumerate(e["ranks"]):
            out.update({f"m{m}:r{r}:s{j}": a for j, a in enumerate(table[i])})
            if key != "train":
                out[f"m{m}:r{r}:median"] = statistics.median(table[i])
    return out


def _e2_medians(widths: dict, name: str):
    return {f"m{m}:r{r}": statistics.median(e["accuracy"][name][i])
            for m, e in widths.items() for i, r in enumerate(e["ranks"])}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=str(ROOT / "results" / "cross_path_spread.json"))
    p.add_argument("--smoke", action="store_true", help="tiny configurations: checks the script")
    p.add_argument("--reuse", default=None, metavar="DIR",
                   help="write the report from the run files of an earlier call kept in DIR "
                        "(e1_plain.json, ..., live_default.json) instead of training again")
    p.add_argument("--keep-plain", action="store_true",
                   help="copy the plain quick runs to results/e1_quick.json, e2_quick.json")
    args = p.parse_args()
    mode = "smoke" if args.smoke else "quick"
    tmp = Path(args.reuse) if args.reuse else Path(tempfile.mkdtemp(prefix="spread-"))
    procs = {}
    for path, extra in ({} if args.reuse else PATHS).items():
        cmd = (f"{sys.executable} -m companion e1 --{mode} --no-progress --restart "
               f"--out {tmp}/e1_{path}.json && "
               f"{sys.executable} -m companion e2 --{mode} --no-progress --restart "
               f"--out {tmp}/e2_{path} && "
               f"{sys.executable} -c '{LIVE}' {tmp}/live_{path}.json {mode}")
        log = open(tmp / f"{path}.log", "w")
        procs[path] = subprocess.Popen(["bash", "-c", cmd], cwd=ROOT, env=_env(extra),
                                       stdout=log, stderr=subprocess.STDOUT)
    for path, proc in procs.items():
        if proc.wait():
            print((tmp / f"{path}.log").read_text(), file=sys.stderr)
            raise SystemExit(f"the {path} run failed")
    load = {f"{kind}_{path}": json.loads((tmp / (f"e2_{path}/e2_{mode}.json" if kind == "e2"
                                              else f"{kind}_{path}.json")).read_text())
            for kind in ("e1", "e2", "live") for path in PATHS}
    env = {path: {"cpu_capability": load[f"live_{path}"]["cpu_capability"],
                  "environment": {k: v for k, v in PATHS[path].items()}}
           for path in PATHS}
    e2 = {path: load[f"e2_{path}"] for path in PATHS}
    e2w = {path: {m: {k: v for k, v in u.items() if k not in ("wall_time", "environment")}
                  for m, u in ((k[1:], u) for k, u in e2[path]["units"].items())}
           for path in PATHS}
    report = {
        "what": "largest and median |difference| over models between the plain run and the "
                "run under ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE, same seeds",
        "torch": load["live_plain"]["torch"],
        "paths": env,
        "e1_quick": {
            q: _spread(_e1_values(load["e1_plain"], q), _e1_values(load["e1_default"], q))
            for q in ("best_max_error", "fraction_within_half")},
        "e1_quick_best_max_error_by_rank": {
            str(r): _spread(*({k: v for k, v in _e1_values(load[f"e1_{p}"],
                                                           "best_max_error").items()
                               if k.split(":")[1] == f"r{r}"} for p in PATHS))
            for r in sorted({m["rank"] for u in load["e1_plain"]["units"].values()
                             for m in u["models"] if m["kind"] == "nka"})},
        "e1_quick_solved_changed": sorted(
            k for k, v in _e1_values(load["e1_plain"], "best_max_error").items()
            if (v < 0.5) != (_e1_values(load["e1_default"], "best_max_error")[k] < 0.5)),
        "e1_live": _spread(_e1_values(load["live_plain"]["e1"], "best_max_error"),
                           _e1_values(load["live_default"]["e1"], "best_max_error")),
        "e1_live_against_sweep": {
            path: _spread(_e1_values(load[f"live_{path}"]["e1"], "best_max_error"),
                          {k: v for k, v in _e1_values(load[f"e1_{path}"],
                                                       "best_max_error").items()
                           if k in _e1_values(load[f"live_{path}"]["e1"], "best_max_error")})
            for path in PATHS},
        "e2_quick": {
            "test_accuracy_uniform": _spread(*(
                {k: v for k, v in _e2_values(e2w[p], "uniform").items() if ":s" in k}
                for p in PATHS)),
            "test_accuracy_near_tie": _spread(*(
                {k: v for k, v in _e2_values(e2w[p], "near_tie").items() if ":s" in k}
                for p in PATHS)),
            "train_accuracy": _spread(*(_e2_values(e2w[p], "train") for p in PATHS)),
            "dense_test_accuracy": _spread(*(_e2_values(e2w[p], "dense") for p in PATHS)),
            "median_test_accuracy_uniform": _spread(*(_e2_medians(e2w[p], "uniform")
                                                      for p in PATHS)),
        },
        "e2_quick_test_accuracy_uniform_by_width": {
            m: _spread(*({k: v for k, v in _e2_values({m: e2w[p][m]}, "uniform").items()
                          if ":s" in k} for p in PATHS))
            for m in e2w["plain"]},
        "e2_quick_transition_ranks": {
            p: {m: e["transition_r"] for m, e in e2w[p].items()} for p in PATHS},
    }
    live = {p: load[f"live_{p}"]["e2"] for p in PATHS}
    lv = {p: {f"r{r}": live[p]["accuracy"]["uniform"][i][0]
              for i, r in enumerate(live[p]["ranks"])}
          | {"dense": live[p]["dense"]["uniform"][0]} for p in PATHS}
    report["e2_live"] = _spread(lv["plain"], lv["default"])
    from companion.experiments.e2.pipeline import E2_LIVE

    m = "8" if args.smoke else str(E2_LIVE["width"])
    report["e2_live_against_sweep"] = {
        p: _spread(lv[p], {f"r{r}": e2w[p][m]["accuracy"]["uniform"][i][0]
                           for i, r in enumerate(e2w[p][m]["ranks"]) if f"r{r}" in lv[p]}
                   | {"dense": e2w[p][m]["dense"]["uniform"][0]})
        for p in PATHS}
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))
    if args.keep_plain and not args.smoke:
        shutil.copy(tmp / "e1_plain.json", ROOT / "results" / "e1_quick.json")
        shutil.copy(tmp / "e2_plain" / "e2_quick.json", ROOT / "results" / "e2_quick.json")
    if not args.reuse:
        shutil.rmtree(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
