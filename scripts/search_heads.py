"""Build, search, verify and commit the exact heads of the sandwich (Chapter 3).

    PYTHONPATH=src python scripts/search_heads.py constructions [--family NAME]
    PYTHONPATH=src nice -n 10 python scripts/search_heads.py search --family paley_code_46 \
        --variant signed --rank 31 --seeds 0-3 [--restarts 2 --rounds 50 --margin 2e-3]
    PYTHONPATH=src nice -n 10 python scripts/search_heads.py packing --family paley_code_46 \
        --points 33 --seeds 0-3 [--steps 10000000]

`constructions` writes the closed-form heads: results/heads/<family>_nonnegative.json from
the lowest-rank nonnegative construction of companion.sandwich that exists (a block design
lifted into one more coordinate, a one-query spread or the query indicators). `packing` runs
one unit per seed: a seeded search for a packing of blocks of size 5 on --points points,
lifted into a nonnegative head of rank points + 1. `search` runs one unit per seed: a seeded
search (Douglas-Rachford for signed features, HALS for nonnegative ones) for an admissible
ratio matrix of the given rank, rounded to rationals and built into a head. A head that
verifies exactly and has a lower rank than the committed file replaces it at once. Every unit
is appended to results/heads/search_log.jsonl when it ends (its key: the unit's settings),
and a rerun of the same command skips the units the log holds, so an interrupted search
resumes. One process at a time; single thread.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from companion.sandwich.designs import (
    affine_plane,
    design_factors,
    disjoint_classes,
    packing,
    transversal_design,
)
from companion.sandwich.head_files import (
    family_from_spec,
    read_head_claims,
    verify_head_file,
    write_head_file,
)
from companion.sandwich.heads import build_exact_head
from companion.sandwich.matrix import (
    indicator_factors,
    ratio_bounds,
    spread_factors,
    spread_products,
)
from companion.sandwich.search import exact_head_from_search, search_ratio_factors
from companion.sandwich.windows import FAMILIES

OUT = Path("results/heads")
LOG = OUT / "search_log.jsonl"

#: The closed-form nonnegative constructions tried per family: (description, factors).
DESIGNS = (
    ("the lines of the affine plane AG(2, 5), lifted (companion.sandwich.designs)",
     lambda b: design_factors(b, affine_plane(5), lift=True)),
    ("the blocks of the transversal design TD(5, 7), lifted (companion.sandwich.designs)",
     lambda b: design_factors(b, transversal_design(5, 7), lift=True)),
    ("the blocks of the transversal design TD(6, 7) (companion.sandwich.designs)",
     lambda b: design_factors(b, transversal_design(6, 7))),
    ("a packing of blocks of size 5 on 34 points (companion.sandwich.designs.packing, seed "
     "0), lifted", lambda b: design_factors(b, disjoint_classes(packing(34, b.size)),
                                            lift=True)),
)


def _nonnegative_candidates(bounds):
    """(description, factors) of every closed-form nonnegative construction that exists."""
    for how, make in DESIGNS:
        try:
            yield how, make(bounds)
        except ValueError:  # too few blocks, or not admissible for this family
            continue
    P = spread_products(bounds)
    if max(P) > 1:
        yield f"one-query spread (max P_s = {max(P)} > 1)", spread_factors(bounds)
    yield "query indicators", indicator_factors(bounds)


def _commit(name: str, variant: str, head, how: str) -> str:
    """Write the head if it verifies and beats the committed one; say what happened."""
    path = OUT / f"{name}_{variant}.json"
    old = read_head_claims(path)["rank"] if path.exists() else None
    if old is not None and old <= head.rank:
        return f"kept the committed rank-{old} head"
    tmp = path.with_suffix(".tmp.json")
    write_head_file(tmp, head, FAMILIES[name], variant, how)
    report = verify_head_file(tmp)
    if not report.passed:
        tmp.unlink()
        return f"built head FAILED to verify: {report.problems[:2]}"
    os.replace(tmp, path)
    return f"wrote {path} (rank {head.rank}, was {old}): " + report.summary().replace(
        str(tmp), str(path))


def constructions(names) -> int:
    for name in names:
        family = family_from_spec(FAMILIES[name])
        bounds = ratio_bounds(family)
        t = time.time()
        best = None
        for how, (Q, K) in _nonnegative_candidates(bounds):
            if best is None or Q.shape[1] < best[1][0].shape[1]:
                best = (how, (Q, K))
        how, (Q, K) = best
        head = build_exact_head(family, Q, K)
        print(f"{name}: {how}: rank {head.rank}, max error {float(head.max_error):.15f}; "
              f"{_commit(name, 'nonnegative', head, how)} ({time.time() - t:.0f} s)",
              flush=True)
    return 0


def packings(args) -> int:
    """One unit per seed: a packing of |S| blocks of size 5 on --points points, lifted."""
    family = family_from_spec(FAMILIES[args.family])
    bounds = ratio_bounds(family)
    lo, _, hi = args.seeds.partition("-")
    done = _logged()
    for seed in range(int(lo), int(hi or lo) + 1):
        unit = {"family": args.family, "variant": "nonnegative", "method": "packing",
                "points": args.points, "seed": seed, "steps": args.steps}
        if json.dumps(unit, sort_keys=True) in done:
            print(f"seed {seed}: in the log, skipped", flush=True)
            continue
        t = time.time()
        entry = {"unit": unit, "method": "packing (seeded annealing), lifted"}
        try:
            blocks = packing(args.points, bounds.size, seed=seed, steps=args.steps)
            head = build_exact_head(family, *design_factors(bounds, disjoint_classes(blocks),
                                                            lift=True))
            how = (f"a packing of {bounds.size} blocks of size 5 on {args.points} points "
                   f"(companion.sandwich.designs.packing, seed {seed}), lifted")
            entry |= {"found": True, "outcome": _commit(args.family, "nonnegative", head, how)}
        except ValueError as exc:
            entry |= {"found": False, "outcome": str(exc)}
        entry["seconds"] = round(time.time() - t)
        with open(LOG, "a") as f:
            f.write(json.dumps(entry) + "\n")
        print(json.dumps(entry), flush=True)
    return 0


def _logged() -> set:
    if not LOG.exists():
        return set()
    keys = set()
    for line in LOG.read_text().splitlines():
        entry = json.loads(line)
        keys.add(json.dumps(entry["unit"], sort_keys=True))
    return keys


def search(args) -> int:
    family = family_from_spec(FAMILIES[args.family])
    bounds = ratio_bounds(family)
    lo, _, hi = args.seeds.partition("-")
    done = _logged()
    for seed in range(int(lo), int(hi or lo) + 1):
        unit = {"family": args.family, "variant": args.variant, "rank": args.rank,
                "seed": seed, "restarts": args.restarts, "rounds": args.rounds,
                "margin": args.margin}
        if json.dumps(unit, sort_keys=True) in done:
            print(f"seed {seed}: in the log, skipped", flush=True)
            continue
        t = time.time()
        res = search_ratio_factors(bounds, args.rank, seed=seed,
                                   nonnegative=args.variant == "nonnegative",
                                   restarts=args.restarts, rounds=args.rounds,
                                   margin=args.margin)
        entry = {"unit": unit, "method": "HALS" if args.variant == "nonnegative"
                 else "Douglas-Rachford", "found": res.query_factor is not None,
                 "worst_violation": res.worst_violation, "seconds": round(time.time() - t)}
        if res.query_factor is not None:
            try:
                head = exact_head_from_search(family, res)
                how = (f"seeded {entry['method']} search (seed {seed}) for a rank-{args.rank} "
                       "admissible ratio matrix, rounded to rationals (companion.sandwich)")
                entry["outcome"] = _commit(args.family, args.variant, head, how)
            except ValueError as exc:
                entry["outcome"] = f"rounding failed: {exc}"
        with open(LOG, "a") as f:  # the unit is finished: log it
            f.write(json.dumps(entry) + "\n")
        print(json.dumps(entry), flush=True)
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("constructions", help="the closed-form nonnegative heads")
    c.add_argument("--family", choices=sorted(FAMILIES), action="append")
    s = sub.add_parser("search", help="one seeded search unit per seed (resumable)")
    s.add_argument("--family", choices=sorted(FAMILIES), required=True)
    s.add_argument("--variant", choices=("signed", "nonnegative"), required=True)
    s.add_argument("--rank", type=int, required=True)
    s.add_argument("--seeds", default="0", help="a seed or a range a-b")
    s.add_argument("--restarts", type=int, default=2)
    s.add_argument("--rounds", type=int, default=50)
    s.add_argument("--margin", type=float, default=2e-3)
    k = sub.add_parser("packing", help="one packing unit per seed (resumable), lifted")
    k.add_argument("--family", choices=sorted(FAMILIES), required=True)
    k.add_argument("--points", type=int, required=True)
    k.add_argument("--seeds", default="0", help="a seed or a range a-b")
    k.add_argument("--steps", type=int, default=10_000_000)
    args = p.parse_args(argv)
    if args.command == "constructions":
        return constructions(args.family or list(FAMILIES))
    return packings(args) if args.command == "packing" else search(args)


if __name__ == "__main__":
    sys.exit(main())
