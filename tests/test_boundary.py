"""Checks once, at the boundary (issue 37): no function outside a module's ``__all__`` checks
its arguments.

The test reads every module of the package and lists, per function, the calls of argument
checks (a name ``check_*`` / ``_check_*`` / ``checked_*``) and the argument raises (``raise
ValueError(...)`` / ``raise TypeError(...)``). They may sit only

* in a boundary function: a name in its module's ``__all__``, or a public method (or
  ``__init__`` / ``__post_init__``) of a class in ``__all__``;
* in a checker: a function named ``check_*`` / ``_check_*``, the argument checks themselves
  (``companion.checks`` and a module's own), which the boundary calls;
* in a function listed in ``ALLOWED`` with the reason (a condition that exists only while the
  function computes: a head's maps evaluated, a simplex pivoting, a file being parsed).

Everything else is a finding; an ``ALLOWED`` entry that no longer has one fails too, so the
list can only shrink.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import companion

PACKAGE = Path(companion.__file__).resolve().parent

CHECK_CALL = re.compile(r"^_?check(ed)?_")
#: Functions named like checks that check no argument: a proof step, a result's verification.
NOT_CHECKS = {"check_chain_growth": "asserts Lemma C's growth bounds, exactly (a theorem)",
              "check_against_reference": "compares a live run with a committed results file"}
ARGUMENT_ERRORS = {"ValueError", "TypeError"}

_MAPS = "checks what a head's maps return: they are callables, so only their outputs can be " \
        "checked, when the head is evaluated"
_COMPUTED = "a condition of the computation, not of an argument as given: it appears only " \
            "while the function computes on inputs its boundary already checked"
_FILE = "parses a field of a head or certificate file (the file is the input): a step of the " \
        "file loader (verify_head_file, verify_certificate_file, read_head_claims)"
#: Non-boundary functions that raise or check, each with the reason.
ALLOWED = {
    **{f"files.py:{f}": "a hook of the one JSON loader (json.loads' parse_constant, "
       "parse_float, object_pairs_hook): refuses what the file holds, the file being the "
       "input of read_json_file" for f in ("_refuse_constant", "_finite", "_no_repeats")},
    "files.py:_target": "the one path check of the writers (writable_path, atomic_write_json "
    "and out_lock, the boundary, call it with the argument's name)",
    "core/attention.py:_table": _MAPS,
    "core/attention.py:_weights_total": _COMPUTED + " (the head's weights turn out negative, "
    "or a denominator 0, on some input)",
    "core/attention.py:attention_output": _COMPUTED + " (the float64 output overflows on "
    "some input: values times readout weights beyond a float)",
    "core/constructions.py:lookup_head": "a table head's maps check the position p they are "
    "called at (a head built for n positions, evaluated on a longer sequence): the map's own "
    "argument, checked when the head is evaluated",
    "core/attention.py:kernel_attention_integer": "a cost limit known only once the head's "
    "integer tables are evaluated (a bound on every product beyond int64)",
    "core/exact.py:exact_table_outputs": _COMPUTED + " (a trained table head's denominator "
    "vanishes on an input)",
    "core/lp.py:_phase_one": "a cost limit of the exact simplex, known only while it pivots "
    "(its entries grow as it goes)",
    "bounds/amplification.py:_ChainTable.dp_gap": "a cost limit known only once the DP table "
    "of (n, eps) exists (its link weights' size and period search decide it); the public "
    "functions reach it before any work of size G",
    "bounds/amplification.py:_exp_rate": _COMPUTED + " (the growth rate lambda is beyond a "
    "float; chain_growth's exact fields hold it)",
    "sandwich/heads.py:_ladder_trees": _COMPUTED + " (a family's ladders do not form a tree)",
    "sandwich/heads.py:_shared_key_weights": _COMPUTED + " (no features for a shared key)",
    "sandwich/matrix.py:_ladder_sharers": _COMPUTED + " (a ladder key occurs in sequences of "
    "queries whose ladders do not use it)",
    "sandwich/designs.py:_disjoint_pairs": _COMPUTED + " (the greedy matching finds no "
    "disjoint couples of blocks for the family's complement pairs)",
    "bounds/witness.py:walk_ladder": "checks one ladder of a certificate (the certificate is "
    "the input, from a file or a WitnessFamily): a step of verify_certificate and of the "
    "certificate file's loader",
    "sandwich/certificates.py:verify_certificate_data": _FILE,
    "experiments/engine.py:_model_index": "checks that a stacked model's parameters share its "
    "model dimension: known only once the model's modules are walked, in the unchecked core",
    "experiments/engine.py:fit_batched": _COMPUTED + " (the model's output, run once, has no "
    "trainable parameters or the wrong shape for the targets)",
    "experiments/sweep.py:ResultStore._read_units": "reads the results file being resumed (the "
    "file is the input): a step of its loader, like check_units on a loaded sweep",
    "transcript/bound.py:_reevaluate": "checks what the model's transcript returns (a "
    "TranscriptModel is user code), like _MAPS for heads",
    **{f"sandwich/head_files.py:{f}": _FILE for f in (
        "parse_rational", "parse_token", "_vector", "read_format_file", "_entries",
        "_load_head")},
}


def _all_names(tree: ast.Module) -> set[str]:
    for node in tree.body:
        if (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "__all__"):
            return {e.value for e in node.value.elts}
    return set()


def _functions(tree: ast.Module):
    """(qualified name, node, class name or None) of every module-level function and method."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            yield node.name, node, None
        elif isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, ast.FunctionDef):
                    yield f"{node.name}.{sub.name}", sub, node.name


def _checks_in(fn: ast.FunctionDef) -> list[str]:
    found = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(
                f, ast.Attribute) else ""
            if CHECK_CALL.match(name) and name not in NOT_CHECKS:
                found.append(f"calls {name}")
        elif isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            f = node.exc.func
            if isinstance(f, ast.Name) and f.id in ARGUMENT_ERRORS:
                found.append(f"raises {f.id}")
    return found


def module_findings(rel: str, tree: ast.Module) -> dict[str, list[str]]:
    """{"rel:function": [what it does]} for every check outside the boundary of one module."""
    out, public = {}, _all_names(tree)
    for qual, fn, cls in _functions(tree):
        method = qual.rsplit(".", 1)[-1]
        boundary = (fn.name in public if cls is None else cls in public and (
            not method.startswith("_") or method in ("__init__", "__post_init__")))
        checker = CHECK_CALL.match(fn.name) and fn.name not in NOT_CHECKS
        hits = _checks_in(fn)
        if hits and not boundary and not checker:
            out[f"{rel}:{qual}"] = sorted(set(hits))
    return out


def findings() -> dict[str, list[str]]:
    """module_findings over the package (checks.py, the shared checks themselves, excepted)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(PACKAGE))
        if rel != "checks.py":
            out |= module_findings(rel, ast.parse(path.read_text()))
    return out


def test_no_function_outside_the_boundary_checks_its_arguments():
    found = findings()
    unexplained = {k: v for k, v in found.items() if k not in ALLOWED}
    assert not unexplained, "\n".join(f"{k}: {', '.join(v)}" for k, v in unexplained.items())


def test_every_allowance_still_has_a_finding():
    """An entry whose function no longer checks (or no longer exists) must go."""
    found = findings()
    stale = sorted(k for k in ALLOWED if k not in found)
    assert not stale, stale


def test_the_finder_sees_what_it_must():
    """The finder itself: helpers that check are findings; a checker and a public name not."""
    tree = ast.parse(
        "__all__ = ['f', 'C']\n"
        "def f(x):\n    return _g(check_int(x, 'x'))\n"
        "def _g(x):\n    if x < 0:\n        raise ValueError('x')\n    return x\n"
        "def _check_y(y):\n    raise TypeError('y')\n"
        "def _h(z):\n    return check_fraction(z, 'z')\n"
        "class C:\n    def __init__(self, a):\n        check_int(a, 'a')\n"
        "    def _k(self, b):\n        check_int(b, 'b')\n")
    assert set(module_findings("m.py", tree)) == {"m.py:_g", "m.py:_h", "m.py:C._k"}
