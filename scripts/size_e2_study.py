"""Size the converged E2 study from measured step times (book/e2_preregistration.md, "Budget").

For every unit of the study of the given arms (the committed pilot choices, or --steps for an
arm whose pilot is still running) this trains the unit's models for a few full-batch steps on
one thread (two lengths, differenced) and multiplies by the unit's steps. Prints the
CPU-hours per (arm, kind, size) and in all; run it on an idle machine.

    .venv/bin/python scripts/size_e2_study.py [--arm A|B] [--steps N] [--probe 8]
"""

from __future__ import annotations

import argparse
import dataclasses
import time

from companion.book import seed_everything
from companion.experiments.e2 import pipeline as pl


def step_seconds(cfg, size, group, probe: int) -> float:
    """Seconds per training step of one unit (a rank group, or None: the dense heads) at a
    size (m, P): the unit run for `probe` and for 3 `probe` steps, differenced, so that
    drawing the data, building the models and evaluating drop out."""
    def run(steps):
        short = dataclasses.replace(cfg, steps=steps, surrogate_steps=0, eval_every=steps)
        start = time.perf_counter()
        pl.train_e2_unit(short, *size, 0, cfg.readouts[0], () if group is None else (group,),
                         group is None)
        return time.perf_counter() - start

    return max(0.0, (run(3 * probe) - run(probe)) / (2 * probe))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arm", choices=tuple(pl.ARMS), action="append")
    parser.add_argument("--steps", type=int, default=None,
                        help="total steps per unit where no pilot choice is committed")
    parser.add_argument("--probe", type=int, default=8, help="steps timed per repetition")
    args = parser.parse_args()
    seed_everything(0)
    total = 0.0
    for arm in args.arm or tuple(pl.ARMS):
        for kind in pl.ARMS[arm]:
            choice = pl.PILOT_CHOICE.get((arm, kind))
            if choice is None and args.steps is None:
                print(f"{arm} {kind}: no pilot choice committed; pass --steps")
                continue
            steps = args.steps if choice is None else choice["steps"] + choice["surrogate_steps"]
            cfg = pl.STUDY.get((arm, kind)) or pl.study_config(arm, kind)
            for size in cfg.sizes:
                seconds = sum(step_seconds(cfg, size, g, args.probe)
                              for g in (*cfg.rank_groups, None))
                hours = seconds * steps * len(cfg.splits) / 3600
                total += hours
                print(f"{arm} {kind} size {size[0]}: {seconds * 1000:.0f} ms per step over its "
                      f"units, {steps} steps x {len(cfg.splits)} splits: {hours:.2f} CPU-h")
    print(f"in all: {total:.2f} CPU-hours, {total / 2:.2f} h on 2 cores")


if __name__ == "__main__":
    main()
