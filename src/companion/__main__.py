"""Command line: regenerate the experiments' full-size sweeps.

    python -m companion e1 [--full|--quick] [--out results/e1_full.json] [--device cpu|cuda]
    python -m companion e2 [--full|--quick] [--out results/e2_full.json] [--device cpu|cuda]

Results are written atomically as JSON beside a hash of the configuration. E1 stores every
finished unit (rank group × seeds, or the dense baseline) as it finishes, so rerunning the same
command after an interruption resumes without redoing finished units (``--restart`` starts
over). Shows a tqdm progress bar on stderr.

Serves chapters 6 and 7: the full-size runs behind their committed results.
"""

from __future__ import annotations

import argparse
import sys


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m companion", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="experiment", required=True)
    for name, what in (("e1", "E1 witness suite"), ("e2", "E2 OOD scaling sweep")):
        s = sub.add_parser(name, help=what)
        mode = s.add_mutually_exclusive_group()
        mode.add_argument(
            "--full",
            dest="mode",
            action="store_const",
            const="full",
            help="full-size sweep (default)",
        )
        mode.add_argument(
            "--quick",
            dest="mode",
            action="store_const",
            const="quick",
            help="the book's quick mode",
        )
        s.set_defaults(mode="full")
        s.add_argument(
            "--out", default=None, help=f"output JSON (default results/{name}_<mode>.json)"
        )
        s.add_argument("--device", default="cpu", help="torch device: cpu or cuda")
        s.add_argument(
            "--threads",
            type=int,
            default=1,
            help="torch CPU threads (default 1: results then do not depend on the "
            "core count, so committed results can be re-checked bit for bit)",
        )
        s.add_argument(
            "--restart",
            action="store_true",
            help="discard an existing output file instead of resuming it",
        )
        s.add_argument(
            "--no-progress", dest="progress", action="store_false", help="no progress bar"
        )
    return p


def _device(name: str) -> str:
    import torch

    if name not in ("cpu", "cuda") and not name.startswith("cuda:"):
        raise SystemExit(f"--device must be cpu or cuda[:i], got {name!r}")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("--device cuda requested but CUDA is not available on this machine")
    return name


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    from .reproducibility import seed_everything

    if args.threads < 1:
        raise SystemExit(f"--threads must be >= 1, got {args.threads}")
    seed_everything(0, threads=args.threads)
    device = _device(args.device)
    out = args.out or f"results/{args.experiment}_{args.mode}.json"
    if args.experiment == "e1":
        from .experiments.witness_suite import E1_FULL, E1_QUICK, run_e1_sweep, summarise_e1

        config = E1_FULL if args.mode == "full" else E1_QUICK
        res = run_e1_sweep(
            config, device=device, progress=args.progress, out=out, restart=args.restart
        )
        for row in summarise_e1(res):
            print(
                f"r={row['r']}: max error median {row['median_max_error']:.3f} "
                f"[{row['min_max_error']:.3f}, {row['max_max_error']:.3f}], "
                f"solved {row['solved']}/{row['seeds']}"
            )
    else:
        try:
            from .experiments.ood_scaling import E2_FULL, E2_QUICK, run_e2_sweep
        except ImportError as exc:
            print(
                "e2 is not available: companion.experiments.ood_scaling.run_e2_sweep could not "
                f"be imported ({exc})",
                file=sys.stderr,
            )
            return 2
        from .experiments.store import ResultStore

        config = E2_FULL if args.mode == "full" else E2_QUICK
        store = ResultStore(out, config, restart=args.restart)
        if store.done("sweep"):
            print(f"{out} already holds the finished sweep for this configuration")
        else:
            store.put("sweep", run_e2_sweep(config, device=device, progress=args.progress))
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
