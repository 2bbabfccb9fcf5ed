"""Command line: regenerate the experiments' sweeps; re-verify exact heads.

    python -m companion e1|probes|maps [--full|--quick|--smoke] [--out FILE] [--restart]
        [--scheduler local:N|tcp://HOST:PORT] [--device cpu|cuda] [--threads N]
    python -m companion e2 [--full|--quick|--smoke] [--reading X|S-code|S-random|all]
        [--out FOLDER] ...
    python -m companion e2 --pilot|--study [--arm A|B|all] [--out FOLDER] ...
    python -m companion e2 --decisive [--out FOLDER] ...
    python -m companion probes --exact [--out FILE]
    python -m companion verify-head FILE [FILE ...]

Units are stored as they finish, so a rerun resumes. E2 writes into a folder (default
results) at the paths of ``companion.experiments.e2.pipeline.e2_path``: ``--quick`` and
``--smoke`` run the stored protocols' modes (with ``--reading``, a reading's), ``--full`` the
three readings and judges them into ``e2_summary.json``, ``--pilot`` and ``--study`` the
converged study, judged into ``e2_study/e2_study_summary.json`` once every (arm, kind) is
complete, ``--decisive`` the decisive study (into ``e2_study/e2_decisive_summary.json``).
Exit 2 (one line) on a usage error, 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import sys
import time

from companion.checks import check_device
from companion.files import OutputInUseError, UnwritablePathError, atomic_write_json, out_lock

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m companion", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="experiment", required=True)
    for name, what in (("e1", "E1 witness suite"), ("e2", "E2 OOD scaling sweep"),
                       ("probes", "chapter 8: signed heads and several heads on F(S)"),
                       ("maps", "chapter 9: linear-attention feature maps against the exact "
                        "minimum rank")):
        s = sub.add_parser(name, help=what)
        mode = s.add_mutually_exclusive_group()
        modes = [("full", "full-size sweep (default)"), ("quick", "the book's quick mode"),
                 ("smoke", "a tiny configuration (seconds) checking an installation or a cluster")]
        if name == "probes":
            modes.append(("exact", "the exact LP tables (level heads, overlap heads; no "
                          "training, always in this process)"))
        if name == "e2":
            modes += [("pilot", "the converged study's pre-registered pilot (validation only)"),
                      ("study", "the converged study (book/e2_preregistration.md)"),
                      ("decisive", "the decisive study (book/e2_preregistration.md)")]
        for const, text in modes:
            mode.add_argument(f"--{const}", dest="mode", action="store_const", const=const,
                              help=text)
        s.set_defaults(mode="full")
        if name == "e2":
            s.add_argument(
                "--reading", default=None, choices=("X", "S-code", "S-random", "all"),
                help="chapter 7's readings in which rank can bind (--full: default all)")
            s.add_argument("--arm", default="all", choices=("A", "B", "all"),
                           help="with --pilot or --study: the arm(s) to run (default all)")
        s.add_argument("--scheduler", default=None, metavar="local:N|ADDRESS",
                       help="run the units as Dask tasks: local:N worker processes here, or "
                       "tcp://HOST:PORT, a running dask scheduler (default: in this process)")
        s.add_argument("--out", default=None, help="the results folder (default results)"
                       if name == "e2" else f"output JSON (default results/{name}_<mode>.json)")
        s.add_argument("--device", default="cpu", help="torch device: cpu or cuda")
        s.add_argument("--threads", type=int, default=1,
                       help="torch CPU threads (default 1: results then do not depend on the "
                       "core count)")
        s.add_argument("--restart", action="store_true",
                       help="discard an existing output file instead of resuming it")
        s.add_argument("--no-progress", dest="progress", action="store_false",
                       help="no progress bar")
    v = sub.add_parser("verify-head", help="re-verify exact head files and lower-bound "
                       "certificates (results/heads/*.json)")
    v.add_argument("files", nargs="+", metavar="FILE", help="head or certificate file(s)")
    return p


class _UsageError(Exception):
    """A failure the user can fix: printed as one line on stderr, exit status 2."""


def main(argv=None) -> int:
    """Exit status 0, 2 on a usage error (one line on stderr), 130 on Ctrl-C; the boundary:
    the options, and each verify-head file's format, are checked here."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = _parser().parse_args(argv)
    args.command = "python -m companion " + shlex.join(argv)
    try:
        if args.experiment == "verify-head":
            return _verify_heads(args.files)
        from companion.book import seed_everything
        from companion.experiments.sweep import parse_scheduler

        for option, check in (("--threads", lambda: seed_everything(0, threads=args.threads)),
                              ("--scheduler", lambda: parse_scheduler(args.scheduler)),
                              ("--device", lambda: check_device(args.device))):
            try:
                check()
            except ImportError as exc:  # check_device's torch, in a broken install
                raise _UsageError(f"the sweeps need torch, which cannot be imported here "
                                  f"({exc}); install it: pip install 'torch>=2.11,<3'") from exc
            except ValueError as exc:
                raise _UsageError(f"{option}: {exc}") from exc
        if args.mode == "exact" and args.scheduler is not None:
            raise _UsageError("--scheduler does not apply to --exact (exact LPs, no training "
                              "units); drop it or use --full/--quick/--smoke")
        if args.experiment == "e2":
            return _run_e2(args)
        out = args.out if args.out is not None else f"results/{args.experiment}_{args.mode}.json"
        with _writing(out, args.command):
            {"e1": _run_e1, "probes": _run_probes, "maps": _run_maps}[args.experiment](args, out)
        print(f"results: {out}")
        return 0
    except _UsageError as exc:
        print(f"python -m companion: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        stored = getattr(exc, "stored", None)  # a SweepInterrupted says how many
        print("python -m companion: interrupted; " + ("" if stored is None else
              f"{stored} units stored; ") + "rerun to resume", file=sys.stderr)
        return 130


def _verify_heads(paths) -> int:
    """`verify-head`: each file read once and verified, by its format, as a head file or a
    lower-bound certificate; one line per file (failures on stderr), exit 0 if all pass."""
    from companion.files import read_json_file
    from companion.sandwich import certificates, head_files

    verifiers = {head_files.FORMAT: head_files.verify_head_data,
                 certificates.FORMAT: certificates.verify_certificate_data}
    ok = True
    for p in paths:
        try:
            data = read_json_file(p, "head or certificate file")
            verify = verifiers.get(data.get("format")) if isinstance(data, dict) else None
            if verify is None:
                line, passed = (f"{p}: not verified: path {p!r:.200} must hold a JSON object "
                                f"with format {' or '.join(map(repr, verifiers))}", False)
            else:
                report = verify(data, p)
                line, passed = report.summary(), report.passed
        except (ValueError, TypeError, KeyError, OSError, RecursionError) as exc:
            line, passed = f"{p}: not verified: {' '.join(str(exc).split()):.600}", False
        print(line, file=sys.stdout if passed else sys.stderr)
        ok = ok and passed
    return 0 if ok else 2


@contextlib.contextmanager
def _writing(path, command: str):
    """Run the block with `path` locked; failures a user can fix: _UsageError (the sweep
    checks that `path` can be written)."""
    from companion.experiments import sweep

    try:
        with out_lock(path, command):
            yield
    except UnwritablePathError as exc:
        raise _UsageError(f"--out {path}: cannot write a results file there "
                          f"({exc.strerror or exc}); choose another path") from exc
    except OutputInUseError as exc:
        raise _UsageError(f"--out {exc}") from exc
    except (sweep.DaskMissingError, sweep.SchedulerUnreachableError) as exc:
        raise _UsageError(str(exc)) from exc
    except sweep.UnitFailedError as exc:
        raise _UsageError(f"{exc} in {path}; resume with: {command}") from exc
    except sweep.ResultFileError as exc:
        raise _UsageError(f"--out: {exc}") from exc
    except OSError as exc:
        # a write failed mid-sweep (disk full, folder removed): finished units are stored
        raise _UsageError(f"writing {path} failed ({exc.strerror or exc}); free space or fix "
                          "the folder, then rerun the same command to resume") from exc


def _sweep(args, out) -> dict:
    """The keyword arguments every sweep driver takes from the command line."""
    return {"device": args.device, "progress": args.progress, "out": out, "restart": args.restart,
            "scheduler": args.scheduler, "threads": args.threads}


def _run_e1(args, out: str) -> None:
    from companion.experiments import e1

    res = e1.run_e1_sweep(getattr(e1, f"E1_{args.mode.upper()}"), **_sweep(args, out))
    print(e1.summary_table(e1.summarise_e1(res)))


def _run_maps(args, out: str) -> None:
    from companion.experiments import maps

    res = maps.run_maps_sweep(getattr(maps, f"MAPS_{args.mode.upper()}"),
                              **_sweep(args, out))
    for row in maps.summarise_maps(res):
        print(f"{row['map']} {row['family']} R={row['rank']}: solved {row['solved']}/"
              f"{row['seeds']}" + (f", {row['undecided']} beyond the exact LP"
                                   if row["undecided"] else ""))


def _run_probes(args, out: str) -> None:
    if args.mode == "exact":  # the exact LP tables: no training units
        from companion.open.level_heads import exact_probe_tables

        start = time.perf_counter()
        tables = exact_probe_tables(8)
        tables["produced_by"] = "python -m companion probes --exact"
        tables["wall_time"] = round(time.perf_counter() - start, 1)
        atomic_write_json(out, tables)
        for row in tables["level"]:
            print(f"{row['kind']} w={row['w']}: least degree {row['k']}, "
                  f"impossible {row['proved_impossible']}")
        return
    from companion.experiments import probes

    res = probes.run_probe_sweep(getattr(probes, f"PROBES_{args.mode.upper()}"),
                                 **_sweep(args, out))
    print(probes.probe_table(probes.summarise_probes(res)))


def _e2_runs(p, args) -> list:
    """(configuration, mode) of every E2 run the command names, in order (`p`: the pipeline)."""
    if args.mode == "decisive":
        return [(c, "decisive") for c in p.DECISIVE.values()]
    if args.mode in ("pilot", "study"):
        runs = []
        for arm in tuple(p.ARMS) if args.arm == "all" else (args.arm,):
            for kind in p.ARMS[arm]:
                if args.mode == "study" and (arm, kind) not in p.STUDY:
                    print(f"study {arm} {kind}: waiting for its pilot's choice (run e2 "
                          "--pilot, then commit the choice as the pre-registration's pilot "
                          "outcome)")
                    continue
                runs += [(c, args.mode) for c in (p.pilot_configs(arm, kind) if args.mode ==
                                                  "pilot" else [p.STUDY[arm, kind]])]
        return runs
    if args.reading is None and args.mode != "full":
        return [(getattr(p, f"E2_{args.mode.upper()}"), args.mode)]
    names = ("X", "S-code", "S-random") if args.reading in (None, "all") else (args.reading,)
    if args.mode == "quick" and names != ("S-code",):
        raise _UsageError("--quick exists for --reading S-code only (the book's live run); "
                          "use --smoke or --full")
    return [({"quick": {"S-code": p.READING_QUICK}, "smoke": p.READINGS_SMOKE,
              "full": p.READINGS_FULL}[args.mode][n], args.mode) for n in names]


def _run_e2(args) -> int:
    """Every E2 mode: its runs into the results folder, then what the mode judges."""
    try:
        import companion.experiments.e2.pipeline as p
    except ImportError as exc:
        raise _UsageError(f"e2 is not available: companion.experiments.e2.pipeline could not "
                          f"be imported ({exc}); reinstall the package (bash "
                          "scripts/setup_env.sh)") from exc

    folder = args.out if args.out is not None else "results"
    if not folder.strip() or (os.path.exists(folder) and not os.path.isdir(folder)):
        raise _UsageError(f"--out {folder!r}: e2 writes a folder of results files; this is "
                          "not a folder")
    runs = _e2_runs(p, args)
    for cfg, mode in runs:
        path = p.e2_path(folder, cfg, mode)
        with _writing(path, args.command):
            res = p.run_e2(cfg, **_sweep(args, path))
        print(f"results: {path}")
        for m, width in res.get("widths", {}).items():
            print(f"m={m}: transition rank (median accuracy >= {cfg.threshold}) "
                  f"{width['transition_r']}")
    if args.mode in _JUDGES:
        _JUDGES[args.mode](p, runs, folder)
    return 0


def _judge_readings(p, runs, folder: str) -> None:
    """Judge every complete full reading in the folder into e2_summary.json."""
    from companion.experiments.e2.verdicts import e2_summary

    readings = {}
    for name, cfg in p.READINGS_FULL.items():
        path = p.e2_path(folder, cfg)
        if path.exists() and "sizes" in (res := p.load_e2(path)):
            readings[name] = res
    summary = e2_summary(readings, p.load_e2_protocols(os.path.join(folder, "e2_protocols")))
    atomic_write_json(os.path.join(folder, "e2_summary.json"), summary)
    for name, r in summary["readings"].items():
        for ro, tests in r["by_readout"].items():
            v = tests["uniform"]
            print(f"{name} {ro} uniform: r* per size {[s['r_star'] for s in v['per_size']]}: "
                  f"{v['verdict']} ({v['reason']})")
    print(f"summary: {os.path.join(folder, 'e2_summary.json')}")


def _report_pilots(p, runs, folder: str) -> None:
    import json

    from companion.experiments.e2.study import pilot_choice

    for arm, kind in dict.fromkeys((c.design, c.kind) for c, _ in runs):
        choice = pilot_choice([p.load_e2(p.e2_path(folder, c))
                               for c in p.pilot_configs(arm, kind)])
        print(f"pilot {arm} {kind}: " + json.dumps(
            {k: v for k, v in choice.items() if k != "options"}))


def _judge_study(p, runs, folder: str) -> None:
    """Judge the study into e2_study/e2_study_summary.json once every (arm, kind) is complete."""
    from companion.experiments.e2.study import study_summary

    paths = {f"{a}_{k}": p.e2_path(folder, c) for (a, k), c in p.STUDY.items()}
    stored = {n: p.load_e2(path) for n, path in paths.items() if path.exists()}
    if len(stored) == sum(map(len, p.ARMS.values())) and all(map(p.study_complete,
                                                                 stored.values())):
        summary = study_summary(stored)
        atomic_write_json(os.path.join(folder, "e2_study", "e2_study_summary.json"), summary)
        for arm, kinds in summary["arms"].items():
            for kind, tests in kinds.items():
                for test, fam in tests.items():
                    print(f"{arm} {kind} {test}: {fam['verdict']} ({fam['reason']})")


def _judge_decisive(p, runs, folder: str) -> None:
    """Judge the complete decisive study into e2_study/e2_decisive_summary.json."""
    from companion.experiments.e2.study import decisive_summary

    for cfg, _ in runs:
        run = p.load_e2(p.e2_path(folder, cfg))
        if p.study_complete(run):
            summary = decisive_summary(run)
            atomic_write_json(os.path.join(folder, "e2_study", "e2_decisive_summary.json"),
                              summary)
            for test, fam in summary["tests"].items():
                print(f"decisive {cfg.kind} {test}: {fam['verdict']} ({fam['reason']})")


#: What each E2 mode judges once its runs are stored: (pipeline, runs, folder) -> None.
_JUDGES = {"full": _judge_readings, "pilot": _report_pilots, "study": _judge_study,
           "decisive": _judge_decisive}


if __name__ == "__main__":
    sys.exit(main())
