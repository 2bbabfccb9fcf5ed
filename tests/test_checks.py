"""The argument checks added to close the fuzz suite's open findings (issue 16).

Each bad input below once ended in an AttributeError, KeyError, IndexError, OSError or a
numpy/torch error naming nothing; now it is a TypeError/ValueError naming the argument. The
valid-input cases pin that the checks changed no result.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest
import torch
from fuzz_harness import digest, exception_kind

from companion.checks import (
    check_array,
    check_device,
    check_exact_array,
    check_mapping,
    check_path,
)
from companion.core.task import token_pool
from companion.experiments.e2.data import pool_inputs
from companion.experiments.engine import lr_at
from companion.experiments.sweep import ResultFileError, canonical_json
from companion.files import UnwritablePathError, atomic_write_json


def test_check_array_accepts_real_arrays_and_exact_tables():
    assert check_array([[1, 2], [3, 4]], "a", 2).shape == (2, 2)
    exact = np.array([Fraction(1, 3), 2], dtype=object)
    assert check_exact_array(exact, "a").tolist() == [Fraction(1, 3), 2]
    assert check_array(np.float32(0.5), "a").ndim == 0


@pytest.mark.parametrize("bad, kind", [
    ([[0, 1], [1]], TypeError),                      # ragged
    (np.array([None, 1], dtype=object), TypeError),  # object arrays: check_exact_array
    (np.array(["a", "b"]), TypeError),               # strings
    (np.ones(2, dtype=complex), TypeError),
    (None, TypeError), ("0101", TypeError), ({}, TypeError),
    (np.zeros(3), ValueError),                       # ndim 1, 2 wanted
])
def test_check_array_refuses_with_the_name(bad, kind):
    with pytest.raises(kind, match="table"):
        check_array(bad, "table", 2)


def test_the_conversion_rule_on_its_own():
    from companion.checks import check_exact

    big = np.uint64(2**64 - 1)
    assert check_exact(big, "v") == 2**64 - 1 and type(check_exact(big, "v")) is int
    for f in (Fraction(np.int64(2**40)), Fraction(1, np.int64(3))):  # numpy parts kept by Fraction
        v = check_exact(f, "v")
        assert v == f and type(v.numerator) is int is type(v.denominator)
    assert check_exact(np.longdouble(1) / 3, "v") == Fraction(
        *(np.longdouble(1) / 3).as_integer_ratio())  # every bit of the extended float
    assert check_exact(np.float16(0.1), "v") == Fraction(819, 8192)
    for bad, kind in ((np.float32("nan"), ValueError), (-np.inf, ValueError), (True, TypeError),
                      (np.bool_(False), TypeError), ("1/2", TypeError), (1j, TypeError)):
        with pytest.raises(kind, match="^v must be"):
            check_exact(bad, "v")
    assert check_exact_array([[1, 2**70], [0.5, np.int8(-3)]], "M").tolist() == [
        [1, 2**70], [Fraction(1, 2), -3]]  # a list never through float64
    for bad in ([[0, 1], [1]], np.ones(2, dtype=bool), np.array(["1"]), None, {1: 2}):
        with pytest.raises(TypeError, match="^M must be"):
            check_exact_array(bad, "M")


def test_check_device_mapping_path():
    assert check_device("cpu") == "cpu"
    assert check_device(torch.device("cpu")) == torch.device("cpu")
    with pytest.raises(ValueError, match="device"):
        check_device("tpu")
    with pytest.raises(ValueError, match="device"):
        check_device("")
    with pytest.raises(TypeError, match="device"):
        check_device(3)
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    with pytest.raises(ValueError, match=f"has {count} CUDA device"):
        check_device(f"cuda:{count}")
    with pytest.raises(TypeError, match="counts"):
        check_mapping([], "counts")
    with pytest.raises(TypeError, match="out_dir"):
        check_path(None, "out_dir")
    assert str(check_path("results", "out_dir")) == "results"


def test_unwritable_path_is_an_oserror_and_a_valueerror(tmp_path):
    with pytest.raises(UnwritablePathError) as info:
        atomic_write_json("/proc/companion-test/x.json", {"a": 1})
    assert isinstance(info.value, OSError) and isinstance(info.value, ValueError)
    assert str(info.value).startswith("path '/proc/companion-test/x.json'")
    with pytest.raises(ValueError, match="path .*folder"):
        atomic_write_json(tmp_path, {"a": 1})


def test_atomic_write_json_refuses_non_json_before_touching_the_file(tmp_path):
    path = tmp_path / "r.json"
    atomic_write_json(path, {"b": [1, 2.5], "a": None})
    # same bytes as the json.dump it replaced: indent 1, sorted keys, one final newline
    assert path.read_text() == json.dumps({"a": None, "b": [1, 2.5]}, indent=1,
                                          sort_keys=True) + "\n"
    before = path.read_bytes()
    with pytest.raises(TypeError, match="obj must be JSON"):
        atomic_write_json(path, {"a": np.zeros(2)})
    with pytest.raises(ValueError, match="obj must be JSON"):
        atomic_write_json(path, {"a": math.nan})
    assert path.read_bytes() == before
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind
    with pytest.raises(TypeError, match="obj"):
        canonical_json(np.zeros(3))


def test_harness_reports_subclasses_by_their_base():
    assert exception_kind(ValueError("x")) == "ValueError"
    assert exception_kind(ResultFileError("x")) == "ValueError (ResultFileError)"
    assert exception_kind(UnwritablePathError("x")) == "ValueError (UnwritablePathError)"
    assert exception_kind(KeyError("x")) == "KeyError"


def test_engine_checks_keep_the_schedule():
    assert lr_at(0, 10, 0.1, 0.5) == pytest.approx(0.1)
    assert lr_at(9, 10, 0.1, 0.5) == pytest.approx(0.05)
    with pytest.raises(TypeError, match="step"):
        lr_at(math.inf, 10, 0.1, 0.5)


def test_pool_inputs_checks_indices():
    pool = token_pool(6, 16, 0)
    rows, bits = pool_inputs(pool, np.array([[0, 1, 2]]))
    assert rows.shape == (3, 4) and bits.bits.shape == (16, 6)
    with pytest.raises(ValueError, match="idx"):
        pool_inputs(pool, np.array([[0, 1, 16]]))
    with pytest.raises(TypeError, match="pool"):
        pool_inputs(None, np.array([[0, 1, 2]]))
    with pytest.raises(ValueError, match="device"):
        pool_inputs(pool, np.array([[0, 1, 2]]), device="nonsense")


# --------------------------------------------------------------------------- exact inputs
# Issue 41: one conversion rule (checks.check_exact) for every exact function. Property: an
# argument given as a Python int / Fraction, as a numpy scalar of any width, as a Fraction of
# numpy ints, as a list, an object array or a numpy array gives the SAME result (or the same
# refusal); a float of any width holding the value gives what the Fraction gives; NaN, inf and
# bool are refused naming the argument. EXACT_CASES says how to call each exact function of
# the theory floors; every other public callable there is in NOT_EXACT with the reason, and a
# new public callable in neither fails test_every_exact_function_has_a_case.

import dataclasses  # noqa: E402
import importlib  # noqa: E402
import inspect  # noqa: E402
import pkgutil  # noqa: E402

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import companion  # noqa: E402

THEORY_FLOORS = ("core", "bounds", "sandwich", "transcript", "open", "softmax", "book", "checks")


@dataclasses.dataclass(frozen=True)
class Num:
    """An exact scalar argument (`count`: an int such as n, m, G; else an exact value; not
    `floats`: a float selects a float64 path by design, so it is dressed as ints only)."""

    value: object
    count: bool = False
    floats: bool = True


@dataclasses.dataclass(frozen=True)
class Build:
    """An argument built per call from dressed parts (a head from its tables, a generator)."""

    make: object
    args: tuple = ()


@dataclasses.dataclass(frozen=True)
class Arr:
    """An array argument of exact numbers (nested lists); `tokens`: a 0/1 token array;
    `count`: ints such as widths or row indices (never dressed as floats)."""

    rows: object
    tokens: bool = False
    count: bool = False


INT_KINDS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
FLOAT_KINDS = ("float16", "float32", "float64", "longdouble", "float")
#: Every way of dressing a call's numbers, and the twin it must agree with.
KINDS = {**{k: "python" for k in INT_KINDS + FLOAT_KINDS + ("object", "numpy-object")},
         "bool": "pybool"}
#: NaN and infinity in every float width: a value argument (or array entry) so replaced is
#: refused, by a ValueError naming it, the same way in every width (twin: the Python float).
_WIDTHS = {"16": np.float16, "32": np.float32, "64": np.float64, "ld": np.longdouble,
           "py": float}
NAN_KINDS = {f"{bad}-{w}": (t, x) for w, t in _WIDTHS.items()
             for bad, x in (("nan", np.nan), ("naninf", -np.inf))}


def _dtype(kind):
    return float if kind == "float" else np.dtype(kind).type


def _scalar(v, kind, count: bool):
    """v (int or Fraction) dressed as `kind` where that holds it exactly, else v itself."""
    if kind in ("bool", "pybool"):
        return (np.bool_(v) if kind == "bool" else bool(v)) if v in (0, 1) else v
    if kind in INT_KINDS or kind == "numpy-object":
        t = np.int64 if kind == "numpy-object" else _dtype(kind)
        if not (isinstance(v, int) or v.denominator == 1) or not (
                np.iinfo(t).min <= v <= np.iinfo(t).max):
            return v  # a numpy int cannot hold it
        # numpy-object: a Fraction whose numerator is an np.int64 (it keeps it: issue 41)
        return Fraction(t(int(v))) if kind == "numpy-object" and not count else t(int(v))
    if kind in FLOAT_KINDS and not count:
        with np.errstate(over="ignore"):
            f = _dtype(kind)(float(v)) if abs(v) < 2**60 else None
        return f if f is not None and np.isfinite(f) and Fraction(*f.as_integer_ratio()) == v \
            else v
    return v


def dress(value, kind):
    """Every Num / Arr inside `value` (also inside dicts, lists, tuples) dressed as `kind`."""
    if isinstance(value, Num):
        if kind.startswith("nan") and not value.count and value.floats:
            return NAN_KINDS[kind][0](NAN_KINDS[kind][1])
        return _scalar(value.value, kind, value.count or not value.floats and kind in FLOAT_KINDS)
    if isinstance(value, Build):
        return value.make(*dress(value.args, kind))
    if isinstance(value, Arr):
        flat = np.asarray(value.rows, dtype=object)
        if kind.startswith("nan"):
            entries = list(flat.flat)
            if entries and not (value.tokens or value.count):
                entries[0] = NAN_KINDS[kind][0](NAN_KINDS[kind][1])
            return np.asarray(entries, dtype=object).reshape(flat.shape)
        if kind in ("bool", "pybool") and not value.tokens:
            return value.rows  # numpy coerces lists of bools and ints: tokens only
        entries = [_scalar(v, kind, value.count) for v in flat.flat]
        if kind in ("python", "pybool", "float"):  # nested lists of Python numbers
            return np.asarray(entries, dtype=object).reshape(flat.shape).tolist()
        whole = kind not in ("object", "numpy-object") and all(
            isinstance(e, np.generic) for e in entries)
        if whole:  # a numpy array of the kind's dtype
            return np.array(entries, dtype=np.bool_ if kind == "bool" else _dtype(kind)
                            ).reshape(flat.shape)
        out = np.empty(flat.shape, dtype=object)  # an object array (mixed where not whole)
        out.reshape(-1)[:] = entries
        return out
    if isinstance(value, dict):
        return {dress(k, kind): dress(v, kind) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(dress(v, kind) for v in value)
    return value


def outcome(fn, spec, kind, post):
    """("ok", digest) or ("raised", type, message) of fn on `spec` dressed as `kind` (the
    arguments a Build makes included: a head refuses its beta as the call would)."""
    try:
        result = fn(**dress(spec, kind))
        return ("ok", digest(post(result) if post else result))
    except (TypeError, ValueError) as exc:
        return ("raised", type(exc).__name__, str(exc))


# --- the registry: how to call each exact function with random valid arguments

EXACT_CASES: dict = {}


def case(target: str, examples: int = 3):
    """Register `build(draw) -> (kwargs, post)` for `target` ("module:name"); `post` maps the
    result to what is compared (None: the result itself)."""
    def register(build):
        EXACT_CASES[f"companion.{target}"] = (build, examples)
        return build
    return register


def cnt(lo, hi):
    return st.integers(lo, hi).map(lambda v: Num(v, count=True))


H = Fraction(1, 2)
BIG = (2**31, 2**40, 2**63 - 1, 2**64)  # the int64 overflows of issue 41
EPS = st.sampled_from([H, Fraction(1, 4), Fraction(3, 8), Fraction(1, 3), Fraction(2, 5)]).map(Num)


_GRID = sorted({Fraction(p, q) for p in range(-64, 65) for q in (1, 2, 3, 4, 8, 2**10, 2**30)})


def frac(lo=None, hi=None, big=False, floats=True):
    """Exact values in [lo, hi]: dyadic (every float width holds some), thirds, big ints."""
    grid = [v for v in _GRID + list(BIG if big else ())
            if (lo is None or v >= lo) and (hi is None or v <= hi)]
    return st.sampled_from(grid).map(lambda v: Num(v, floats=floats))


def tokens(draw, shape):
    return Arr(np.asarray(draw(st.lists(st.integers(0, 1), min_size=int(np.prod(shape)),
                                        max_size=int(np.prod(shape))))).reshape(shape).tolist(),
               tokens=True)


def exact_matrix(draw, rows, cols, big=True):
    entry = st.one_of(st.integers(-9, 9), st.builds(Fraction, st.integers(-9, 9),
                                                    st.sampled_from([2, 4, 3])),
                      st.sampled_from(BIG) if big else st.just(1))
    return [[draw(entry) for _ in range(cols)] for _ in range(rows)]


def _lazy(fn):
    import functools
    return functools.cache(fn)


@_lazy
def _family(a=11, b=3, q=11):
    from companion.bounds.codes import paley_subset
    from companion.bounds.witness import witness_family
    return witness_family(paley_subset(a, b, q), 3)


@_lazy
def _bounds(a=11, b=3):
    from companion.sandwich.matrix import ratio_bounds
    return ratio_bounds(_family(a, b))


def _exactly(head, seqs, convention="bidirectional"):
    from companion.core.attention import kernel_attention
    return kernel_attention(head, seqs, convention, exact=True)


def _rank_one():
    from companion.core.constructions import rank_one_head
    return rank_one_head()


def _table_head(qf, kf, vals, a, b):
    from companion.core.constructions import lookup_head
    return lookup_head(qf, kf, vals, a, b)


def _tables(draw, m, n, r=2, d=1):
    """Exact tables of a lookup head (features > 0 in coordinate 0)."""
    T = 2**m
    qf = exact_matrix(draw, T, r, big=False)
    kf = [exact_matrix(draw, T, r, big=False) for _ in range(n)]
    for row in qf:
        row[0] = abs(row[0]) + 1
    for table in kf:
        for row in table:
            row[0] = abs(row[0]) + 1
    for row in qf + [r_ for t in kf for r_ in t]:
        row[1:] = [abs(v) for v in row[1:]]
    vals = [exact_matrix(draw, T, d) for _ in range(n)]
    return (Arr(qf), Arr(kf), Arr(vals), Arr(exact_matrix(draw, T, d)),
            Arr([draw(st.integers(-9, 9)) for _ in range(T)]))


# amplification (Lemma C)
for _f in ("best_chain_factor", "best_chain"):
    case(f"bounds.amplification:{_f}")(lambda draw: (
        {"G": draw(cnt(1, 60)), "n": draw(cnt(3, 6)), "eps": draw(EPS)}, None))
case("bounds.amplification:brute_force_chain_factor")(lambda draw: (
    {"G": draw(cnt(1, 9)), "n": draw(cnt(3, 6)), "eps": draw(EPS)}, None))
case("bounds.amplification:log2_best_chain_factor")(lambda draw: (
    {"G": draw(cnt(1, 10**4)), "n": draw(cnt(3, 6)), "eps": draw(EPS)}, None))
case("bounds.amplification:chain_growth_rate")(lambda draw: (
    {"n": draw(cnt(3, 6)), "eps": draw(EPS), "max_gap": draw(cnt(1, 300))}, None))
case("bounds.amplification:chain_growth")(lambda draw: (
    {"n": draw(cnt(3, 6)), "eps": draw(EPS)}, None))
case("bounds.amplification:check_chain_growth")(lambda draw: (
    {"G_max": draw(cnt(1, 40)), "n": draw(cnt(3, 6)), "eps": draw(EPS)}, None))


# codes, rank bounds, asymptotics (Theorem E)
def _code(draw, q=11):
    from companion.bounds.codes import paley_subset
    a = draw(st.integers(2, q))
    return Arr(paley_subset(a, draw(st.integers(0, a)), q).tolist(), tokens=True)


case("bounds.codes:paley_hadamard_code")(lambda draw: (
    {"q": Num(draw(st.sampled_from([3, 7, 11, 19, 23])), True),
     "complements": draw(st.booleans())}, None))


@case("bounds.codes:paley_subset")
def _(draw):
    q = draw(st.sampled_from([7, 11, 19]))
    a = draw(st.integers(1, q))
    return {"a": Num(a, True), "b": Num(draw(st.integers(2 - a if a < 2 else 0, a)), True),
            "q": Num(q, True)}, None


case("bounds.rank_bounds:certified_rank_bound")(lambda draw: (
    {"S": _code(draw), "n": draw(cnt(3, 6)), "eps": draw(EPS)}, None))
case("bounds.asymptotics:every_width_rank_bound")(lambda draw: (
    {"S": _code(draw), "m": draw(cnt(12, 60)), "n": draw(cnt(3, 5)), "eps": draw(EPS)}, None))
case("bounds.asymptotics:large_context_limit_log2_bounds")(lambda draw: (
    {"m": draw(cnt(2, 300))}, None))


@_lazy
def _bases():
    from companion.bounds.asymptotics import base_codes
    return base_codes(widths=())


def _widths(draw, low):
    return Arr(sorted(draw(st.lists(st.integers(low, 200), min_size=1, max_size=3))), count=True)


case("bounds.asymptotics:base_codes", examples=2)(lambda draw: (
    {"n": draw(cnt(3, 4)), "eps": draw(EPS), "widths": Arr([], count=True), "seed": draw(cnt(0, 3)),
     "max_size": draw(cnt(2, 50))}, None))
case("bounds.asymptotics:explicit_code_log2_bounds")(lambda draw: (
    {"bases": _bases(), "widths": _widths(draw, 1), "n": draw(cnt(3, 4)), "eps": draw(EPS),
     "exact": draw(st.booleans())}, None))
case("bounds.asymptotics:asymptotic_rows")(lambda draw: (
    {"bases": _bases(), "widths": _widths(draw, 4), "n": draw(cnt(3, 4)), "eps": draw(EPS)},
    None))
case("bounds.code_search:search_code", examples=2)(lambda draw: (
    {"m": draw(cnt(6, 10)), "n": draw(cnt(3, 4)), "eps": draw(EPS), "seed": draw(cnt(0, 3)),
     "weights": Arr([3], count=True), "candidates": draw(cnt(10, 60)),
     "max_size": draw(cnt(2, 20))}, None))


@case("bounds.rank_bounds:shifted_trace_bound")
def _(draw):
    N = draw(st.integers(1, 5))
    M = exact_matrix(draw, N, N)
    for i in range(N):
        M[i][i] = 1
    return {"M": Arr(M), "c": draw(st.one_of(st.none(), frac(0, Fraction(7, 8))))}, None


@case("bounds.rank_bounds:sharp_rank_bound")
def _(draw):
    N = draw(st.integers(1, 5))
    if draw(st.booleans()):
        M = [[abs(v) for v in row] for row in exact_matrix(draw, N, N)]
        return {"N": Num(N, True), "off_diagonal_bounds": Arr(M)}, None
    us = draw(st.lists(frac(0, big=True), min_size=1, max_size=3, unique=True))
    pairs, counts = N * (N - 1), {}
    for u in us[:-1]:
        k = draw(st.integers(0, pairs))
        counts[u], pairs = Num(k, True), pairs - k
    counts[us[-1]] = Num(pairs, True)
    return {"N": Num(N, True), "off_diagonal_bounds": counts}, None


@case("bounds.rank_bounds:unit_diagonal_from_factors")
def _(draw):
    N, k = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    return {"A": Arr(exact_matrix(draw, N, k)), "B": Arr(exact_matrix(draw, N, k))}, None


def _torch_generator(seed):
    import torch
    return torch.Generator().manual_seed(int(seed))


case("bounds.rank_bounds:shifted_trace_attack", examples=2)(lambda draw: (
    {"N": draw(cnt(2, 5)), "k": draw(cnt(1, 3)), "nonnegative": draw(st.booleans()),
     "gen": Build(_torch_generator, (3,)), "steps": draw(cnt(1, 4))}, None))
case("bounds.rank_bounds:random_matrix_survey", examples=2)(lambda draw: (
    {"num_draws": draw(cnt(1, 2)), "rng": Build(np.random.default_rng, (0,))}, None))


# Lemma B and its heads
X3, Z3, ZP3 = [1, 1, 0], [0, 0, 1], [1, 1, 0]


@case("bounds.gap_domination:gap_domination_factor")
def _(draw):
    n = draw(st.integers(3, 8))
    return {"g": draw(cnt(1, 20)), "n": Num(n, True), "eps": draw(EPS),
            "k": draw(cnt(1, n - 2))}, None


@case("bounds.gap_domination:split_gap_domination_factor")
def _(draw):
    n = draw(st.integers(3, 8))
    return {"g": draw(cnt(1, 20)), "n": Num(n, True), "eps_pure": draw(frac(0, H)),
            "eps_mixed": draw(frac(Fraction(1, 8), H)), "k": draw(cnt(1, n - 2))}, None


@case("bounds.gap_domination:min_error_for_ratio")
def _(draw):
    n = draw(st.integers(3, 8))
    return {"ratio": draw(frac(Fraction(1, 8), big=True, floats=False)), "g": draw(cnt(1, 20)),
            "n": Num(n, True), "k": draw(cnt(1, n - 2))}, None


case("bounds.gap_domination:pure_sequence")(lambda draw: (
    {"x": tokens(draw, (3,)), "z": tokens(draw, (3,)), "n": draw(cnt(2, 6))}, None))
case("bounds.gap_domination:mixed_sequences")(lambda draw: (
    {"x": tokens(draw, (3,)), "z": tokens(draw, (3,)), "z_prime": tokens(draw, (3,)),
     "k": draw(cnt(1, 3)), "l": draw(cnt(1, 3))}, None))
case("bounds.gap_domination:total_weight")(lambda draw: (
    {"head": _rank_one(), "x": tokens(draw, (3,)), "z": tokens(draw, (3,)),
     "n": draw(cnt(3, 6)), "exact": True}, None))
for _f in ("gap_domination_ratio",):
    case(f"bounds.gap_domination:{_f}")(lambda draw: (
        {"head": _rank_one(), "x": tokens(draw, (3,)), "z": tokens(draw, (3,)),
         "z_prime": tokens(draw, (3,)), "n": draw(cnt(3, 6)), "exact": True}, None))
for _f in ("mediant_of_arrangements", "mediant_closed_form", "link_errors"):
    case(f"bounds.gap_domination:{_f}")(lambda draw: (
        {"head": _rank_one(), "x": tokens(draw, (3,)), "z": tokens(draw, (3,)),
         "z_prime": tokens(draw, (3,)), "k": draw(cnt(1, 3)), "l": draw(cnt(1, 3)),
         "exact": True}, None))
case("bounds.gap_domination:family_checks")(lambda draw: (
    {"head": _rank_one(), "m": draw(cnt(1, 3)), "n": draw(cnt(3, 5))}, None))


@case("bounds.random_heads:random_kernel_head")
def _(draw):
    m, n = draw(st.integers(1, 3)), draw(st.integers(3, 4))
    from companion.core.task import all_sequences
    seqs = all_sequences(n, m)[:64]
    return ({"m": Num(m, True), "n": Num(n, True), "rank": draw(cnt(1, 3)), "d": draw(cnt(1, 2)),
             "seed": draw(cnt(0, 10)), "integer": True,
             "zero_fraction": draw(frac(0, Fraction(7, 8)))}, lambda h: _exactly(h, seqs))


case("bounds.random_heads:mediant_survey", examples=2)(lambda draw: (
    {"num_heads": draw(cnt(1, 3)), "seed": draw(cnt(0, 5)), "max_m": draw(cnt(1, 3)),
     "max_n": draw(cnt(3, 5)), "exact_every": draw(cnt(1, 3))}, None))
case("bounds.random_heads:perturbed_link_survey", examples=2)(lambda draw: (
    {"x": Arr(X3, True), "z": Arr(Z3, True), "z_prime": Arr(ZP3, True), "n": draw(cnt(3, 4)),
     "num_heads": draw(cnt(1, 2))}, None))
case("bounds.random_heads:counterexample_search", examples=2)(lambda draw: (
    {"num_heads": draw(cnt(1, 2)), "m": draw(cnt(1, 3)), "seed": draw(cnt(0, 50))}, None))
case("bounds.random_heads:error_floor_survey", examples=2)(lambda draw: (
    {"num_heads": draw(cnt(1, 4))}, None))


# the witness family, its certificate, and the heads built on it
case("bounds.witness:witness_family", examples=2)(lambda draw: (
    {"S": _code(draw), "n": draw(cnt(3, 4)), "eps": draw(EPS),
     "max_sequences": draw(cnt(10**4, 10**5))},
    lambda f: (f.sequences, f.targets, f.token_ids, f.certificate.bound)))


@case("bounds.witness:without_rows")
def _(draw):
    rows = sorted(set(draw(st.lists(st.integers(0, len(_family(3, 1)) - 1), max_size=4))))
    return ({"family": _family(3, 1), "rows": Arr(rows, count=True)},
            lambda f: (f.sequences, f.targets))


case("core.constructions:rank_one_length_three_worst_inputs")(lambda draw: (
    {"m": draw(cnt(1, 6))}, None))


@case("core.constructions:softmax_min_ip_head")
def _(draw):
    from companion.core.attention import softmax_attention
    from companion.core.task import all_sequences
    seqs = all_sequences(3, 2)
    return {"beta": draw(frac(0, 50))}, lambda h: softmax_attention(h, seqs)


@case("core.constructions:softmax_kernel_head")
def _(draw):
    from companion.core.task import all_sequences
    m, n = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    seqs = all_sequences(n, m)[:64]
    from companion.core.attention import kernel_attention
    return ({"beta": draw(frac(0, 20)), "m": Num(m, True), "n": Num(n, True)},
            lambda h: kernel_attention(h, seqs))


@case("bounds.gap_domination:balanced_link_head")
def _(draw):
    from companion.bounds.gap_domination import mixed_sequences
    n = draw(st.integers(3, 5))
    seqs = mixed_sequences(np.array(X3), np.array(Z3), np.array(ZP3), 1, n - 2)
    return ({"x": Arr(X3, True), "z": Arr(Z3, True), "z_prime": Arr(ZP3, True),
             "ratio": draw(frac(Fraction(1, 8), big=True, floats=False)), "n": Num(n, True),
             "shift": draw(st.one_of(st.none(), frac(-4, 4, floats=False)))},
            lambda h: _exactly(h, seqs))


case("sandwich.heads:indicator_head")(lambda draw: (
    {"family": _family(3, 1), "base": draw(st.one_of(st.none(), cnt(2, 40)))},
    lambda h: _exactly(h, _family(3, 1).sequences)))
for _f in ("query_indicator_head", "spread_query_head"):
    case(f"sandwich.heads:{_f}", examples=1)(lambda draw: (
        {"family": _family(4, 0, 7)}, lambda h: _exactly(h, _family(4, 0, 7).sequences)))


@case("bounds.rank_bounds:near_orthogonal_rank_bound")
def _(draw):
    N = draw(st.integers(2, 5))
    return {"off_diagonal_bounds": Arr([[abs(v) for v in row]
                                        for row in exact_matrix(draw, N, N)])}, None


case("bounds.rank_bounds:near_orthogonal_attack", examples=2)(lambda draw: (
    {"r": draw(cnt(1, 4)), "gen": Build(_torch_generator, (3,)), "steps": draw(cnt(1, 4))},
    None))
case("sandwich.designs:transversal_design")(lambda draw: (
    {"k": draw(cnt(2, 3)), "q": Num(draw(st.sampled_from([3, 5, 7])), True)}, None))
case("sandwich.designs:affine_plane")(lambda draw: (
    {"q": Num(draw(st.sampled_from([2, 3, 5])), True)}, None))
case("sandwich.designs:packing", examples=2)(lambda draw: (
    {"points": draw(cnt(9, 12)), "count": draw(cnt(2, 6)), "k": draw(cnt(3, 3)),
     "seed": draw(cnt(0, 3)), "steps": draw(cnt(1000, 2000))}, None))
case("sandwich.matrix:ratio_matrix_of_factors")(lambda draw: (
    {"query_factor": Arr(_factors()[0].tolist()), "key_factor": Arr(_factors()[1].tolist())},
    None))


# the evaluator, the task, exact linear algebra
@case("core.attention:kernel_attention")
def _(draw):
    m, n = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    head = Build(_table_head, _tables(draw, m, n))
    return ({"head": head, "sequences": tokens(draw, (draw(st.integers(1, 4)), n, m)),
             "convention": draw(st.sampled_from(["bidirectional", "causal"])),
             "exact": draw(st.booleans())}, None)


def _softmax_head(beta):
    from companion.core.constructions import softmax_min_ip_head
    return softmax_min_ip_head(beta)


for _f in ("softmax_attention", "softmax_weights"):
    case(f"core.attention:{_f}")(lambda draw: (
        {"head": Build(_softmax_head, (draw(frac(0, 20)),)),
         "sequences": tokens(draw, (2, 3, 2))}, None))
case("core.exact:exhaustive_check")(lambda draw: (
    {"head": _rank_one(), "n": draw(cnt(1, 3)), "m": draw(cnt(1, 3)),
     "chunk": draw(cnt(1, 64))}, None))
for _f in ("exact_rank", "rank_factorisation"):
    case(f"core.exact:{_f}")(lambda draw: (
        {"M": Arr(exact_matrix(draw, draw(st.integers(1, 4)), draw(st.integers(1, 4))))}, None))
case("core.task:min_ip_targets")(lambda draw: (
    {"sequences": tokens(draw, (2, draw(st.integers(1, 4)), 3))}, None))
case("core.task:query_target")(lambda draw: (
    {"sequences": tokens(draw, (2, draw(st.integers(1, 4)), 3)),
     "convention": draw(st.sampled_from(["bidirectional", "causal"]))}, None))
case("core.task:count_sequences")(lambda draw: ({"n": draw(cnt(1, 40)), "m": draw(cnt(1, 40))},
                                                None))
case("core.task:all_sequences")(lambda draw: (
    {"n": draw(cnt(1, 3)), "m": draw(cnt(1, 3)), "max_sequences": draw(cnt(512, 2**20))}, None))


# chapter 8's open questions
case("open.level_heads:min_level_degree")(lambda draw: (
    {"w": draw(cnt(0, 2)), "kind": draw(st.sampled_from(["nka", "positive"]))}, None))
case("open.level_heads:level_feature_rank")(lambda draw: (
    {"m": draw(cnt(1, 60)), "k": draw(cnt(0, 10))}, None))
case("open.level_heads:exact_probe_tables", examples=1)(lambda draw: (
    {"max_w": Num(1, True)}, None))
case("open.multihead:multihead_max_error_exact")(lambda draw: (
    {"heads": (_rank_one(),), "sequences": tokens(draw, (3, 3, 2))}, None))
case("open.multihead:cauchy_level_max_error")(lambda draw: ({"m": draw(cnt(1, 2))}, None))
case("open.multihead:answer_function_count")(lambda draw: ({"m": draw(cnt(1, 3))}, None))
for _f in ("signed_denominators", "signed_attention"):
    case(f"open.signed:{_f}")(lambda draw: (
        {"head": _rank_one(), "sequences": tokens(draw, (3, 3, 2)), "exact": True}, None))


@case("open.signed:signed_link_counterexample")
def _(draw):
    from companion.open.signed import signed_attention

    def post(result):
        head, x, z, zp = result
        return x, z, zp, signed_attention(head, np.stack([[x, z, zp], [x, zp, z]]), exact=True)
    return {"g": draw(cnt(1, 8)), "eps": draw(frac(Fraction(1, 16), Fraction(7, 16)))}, post


case("open.signed:newton_coefficients")(lambda draw: (
    {"values": Arr(exact_matrix(draw, 1, draw(st.integers(1, 6)))[0])}, None))


@case("open.signed:overlap_kernel_rank")
def _(draw):
    m = draw(st.integers(1, 5))
    return {"values": Arr(exact_matrix(draw, 1, m + 1)[0]), "m": Num(m, True)}, None


def _plus_one(overlap):
    return overlap + 1


case("open.signed:overlap_kernel_head")(lambda draw: (
    {"family": _family(3, 1), "kernel": _plus_one, "shift": draw(frac(-1, 1))},
    lambda r: (_exactly(r[0], _family(3, 1).sequences), r[1])))


# the sandwich
case("sandwich.certificates:kneser_box_matrix")(lambda draw: (
    {"bounds": _bounds(10, 0), "value": draw(frac(Fraction(1, 64), Fraction(1, 5)))}, None))
case("sandwich.head_files:family_from_spec", examples=2)(lambda draw: (
    {"spec": {"code": "paley_subset", "a": draw(cnt(2, 6)), "b": Num(0, True), "q": Num(11, True),
              "n": draw(cnt(3, 4)), "eps": "1/2", "convention": "bidirectional"}},
    lambda f: (f.sequences, f.certificate.bound)))


def _factors():
    from companion.sandwich.matrix import indicator_factors
    return indicator_factors(_bounds(3, 1))


case("sandwich.heads:build_exact_head", examples=2)(lambda draw: (
    {"family": _family(3, 1), "query_factor": Arr(_factors()[0].tolist()),
     "key_factor": Arr(_factors()[1].tolist()), "self_weight": draw(frac(Fraction(1, 64), 1))},
    lambda h: (h.query_features, h.key_features, h.self_features, h.bias, h.max_error)))


@case("sandwich.matrix:admissibility_violations")
def _(draw):
    from companion.sandwich.matrix import ratio_matrix_of_factors
    M = ratio_matrix_of_factors(*_factors()).tolist()
    i, j = draw(st.integers(0, 3)), draw(st.integers(0, 3))
    M[i][j] = draw(frac(-1, 2)).value
    return {"M": Arr(M), "bounds": _bounds(3, 1)}, None


case("sandwich.matrix:indicator_factors")(lambda draw: (
    {"bounds": _bounds(3, 1), "fill": draw(frac(Fraction(1, 64), Fraction(63, 64)))}, None))
case("sandwich.matrix:spread_factors")(lambda draw: (
    {"bounds": _bounds(), "s": draw(st.one_of(st.none(), cnt(0, 13)))}, None))
case("sandwich.search:search_ratio_factors", examples=2)(lambda draw: (
    {"bounds": _bounds(), "rank": draw(cnt(12, 14)), "seed": draw(cnt(0, 3)), "nonnegative": True,
     "restarts": draw(cnt(1, 1)), "rounds": draw(cnt(1, 2)),
     "margin": draw(frac(Fraction(1, 512), Fraction(1, 64))),
     "floor": draw(frac(Fraction(1, 2**14), Fraction(1, 1024)))}, None))


@_lazy
def _search():
    from companion.sandwich.search import search_ratio_factors
    return search_ratio_factors(_bounds(), 14, 0, True)


case("sandwich.search:exact_head_from_search", examples=1)(lambda draw: (
    {"family": _family(), "result": _search(),
     "denominators": Arr([2**10, 2**14, 2**20, 2**30], count=True)},
    lambda h: (h.query_features, h.key_features, h.bias, h.max_error)))


# Proposition F
_NM = {"n": cnt(2, 5), "m": cnt(1, 4)}
for _f in ("count_profiles", "threshold_closed_form_terms", "threshold_closed_form"):
    case(f"softmax:{_f}")(lambda draw: ({k: draw(v) for k, v in _NM.items()}, None))
for _f in ("max_error", "worst_profile", "max_error_closed_form", "worst_gap"):
    case(f"softmax:{_f}")(lambda draw: (
        {"beta": draw(frac(0, 20)), **{k: draw(v) for k, v in _NM.items()}}, None))
case("softmax:max_error_brute_force")(lambda draw: (
    {"beta": draw(frac(0, 20)), "n": draw(cnt(1, 3)), "m": draw(cnt(1, 3)),
     "chunk": draw(cnt(1, 100))}, None))
case("softmax:error_bound")(lambda draw: ({"beta": draw(frac(0, 20)), "n": draw(cnt(2, 9))},
                                          None))
case("softmax:sufficient_threshold")(lambda draw: ({"n": draw(cnt(2, 9))}, None))
case("softmax:exact_threshold")(lambda draw: (
    {"n": draw(cnt(2, 4)), "m": draw(cnt(1, 3)), "tol": draw(frac(Fraction(1, 2**30),
                                                                   Fraction(1, 2**10)))}, None))
for _f in ("max_error_exact", "max_error_closed_form_exact"):
    case(f"softmax:{_f}")(lambda draw: (
        {"decay": draw(frac(Fraction(1, 64), 1)), **{k: draw(v) for k, v in _NM.items()}}, None))


# Theorem G
def _bc(q, s):
    from companion.transcript.bound import BlockConstruction
    return BlockConstruction(q, s)


def _encoder(q, s, short=False):
    from companion.transcript.bound import OneBitShortEncoder, TightEncoder
    return (OneBitShortEncoder if short else TightEncoder)(_bc(q, s))


_QS = {"q": cnt(1, 3), "s": cnt(1, 3)}
for _f in ("answer_vector_count", "bits_needed"):
    case(f"transcript.bound:{_f}")(lambda draw: ({k: draw(v) for k, v in _QS.items()}, None))
case("transcript.bound:BlockConstruction")(lambda draw: (
    {k: draw(v) for k, v in _QS.items()},
    lambda c: (c.q, c.s, c.m, c.n, c.all_key_tokens(), c.answers(c.all_key_tokens()))))
case("transcript.bound:enumerate_answer_vectors")(lambda draw: (
    {"construction": Build(_bc, (draw(cnt(1, 3)), draw(cnt(1, 3)))),
     "max_tokens": draw(cnt(512, 2**16))}, None))


@case("transcript.bound:count_transcripts")
def _(draw):
    keys = [row + [0, 0, 0] for row in np.asarray(tokens(draw, (4, 4)).rows).tolist()]
    return {"model": Build(_encoder, (Num(2, True), Num(2, True))),
            "key_tokens": Arr(keys, True)}, None


for _f in ("find_collision", "find_forced_error"):
    case(f"transcript.bound:{_f}")(lambda draw: (
        {"model": Build(_encoder, (draw(cnt(1, 3)), draw(cnt(1, 3)), draw(st.booleans()))),
         "max_vectors": draw(cnt(64, 2**10))}, None))
for _f in ("TightEncoder", "OneBitShortEncoder"):
    case(f"transcript.bound:{_f}")(lambda draw: (
        {"construction": Build(_bc, (draw(cnt(1, 3)), draw(cnt(1, 3)))),
         "symbol_bits": draw(cnt(1, 8))},
        lambda e: [e.transcript(z) for z in e.construction.all_key_tokens()]))
case("transcript.bound:verify_exhaustively")(lambda draw: (
    {"model": Build(_encoder, (draw(cnt(1, 3)), draw(cnt(1, 3)))),
     "max_tokens": draw(cnt(512, 2**16))}, None))
case("transcript.bound:sketch_bits")(lambda draw: (
    {k: draw(cnt(1, 9)) for k in ("L", "H", "r", "d", "b")}, None))
case("transcript.bound:smallest_feature_rank")(lambda draw: (
    {k: draw(cnt(1, 9)) for k in ("L", "H", "d", "b", "q", "s")}, None))
case("transcript.sketch:QuantisedSketchModel")(lambda draw: (
    {"construction": Build(_bc, (Num(2, True), Num(2, True))),
     **{k: draw(cnt(1, 2)) for k in ("layers", "heads", "rank", "value_dim")},
     "bits": draw(cnt(1, 6)), "seed": draw(cnt(0, 3))},
    lambda mdl: [mdl.forward(z) for z in mdl.construction.all_key_tokens()[:8]]))
case("transcript.sketch:CountingSketchModel")(lambda draw: (
    {"construction": Build(_bc, (Num(2, True), Num(2, True))), "value_dim": draw(cnt(1, 2)),
     "bits": draw(cnt(1, 6))},
    lambda mdl: [mdl.forward(z) for z in mdl.construction.all_key_tokens()[:8]]))
case("book:seed_everything")(lambda draw: (
    {"seed": draw(cnt(0, 2**32 - 1)), "threads": Num(1, True)},
    lambda rng: rng.integers(0, 2**62, 4)))

#: Public callables of the theory floors that take no exact number, each with the reason.
_OBJECTS = "takes only objects built by the package (a family, a certificate, bounds, a head)"
NOT_EXACT = {
    **{f"companion.book:{c}": "a constant" for c in ("BOOK_WIDTH", "BOOK_COLORS",
                                                       "BOOK_MARKERS", "BOOK_LINESTYLES")},
    "companion.core.task:CONVENTIONS": "a constant",
    "companion.book:Table": "shows each value as given (a float as a float, a Fraction as a "
    "Fraction; numpy scalars as the Python numbers they hold): tests/test_book.py",
    "companion.book:use_book_style": "no arguments",
    "companion.core.constructions:rank_one_head": "no arguments",
    "companion.checks:check_device": "a device name",
    "companion.open.level_heads:LevelSolution": "a record dataclass (min_level_degree builds it)",
    **{f"companion.bounds.witness:{f}": _OBJECTS for f in (
        "verify_certificate", "certificate_error", "max_error_exact", "kernel_ratio_matrix",
        "ratio_matrix_facts")},
    **{f"companion.open.{f}": _OBJECTS for f in (
        "multihead:two_head_witness_heads", "signed:signed_rank_lower_bound",
        "signed:one_sign_rank_lower_bound")},
    **{f"companion.sandwich.matrix:{f}": _OBJECTS for f in ("ratio_bounds", "spread_products")},
    **{f"companion.sandwich.designs:{f}": _OBJECTS + " (blocks of points, classes)"
       for f in ("disjoint_classes", "design_factors")},
    "companion.sandwich.windows:FAMILIES": "a constant",
    "companion.sandwich.windows:sandwich_windows": "reads the committed head and certificate "
    "files of a folder (a path)",
    "companion.book:glue_text": "a name and a text, no numbers",
    **{f"companion.sandwich.{f}": "reads or writes a file; the numbers inside a spec are JSON "
       "as written (a numpy number in a spec is refused naming it)" for f in (
        "certificates:write_certificate_file", "certificates:verify_certificate_file",
        "head_files:write_head_file", "head_files:verify_head_file",
        "head_files:read_head_claims")},
}


def theory_floor_callables():
    for info in pkgutil.walk_packages(companion.__path__, "companion."):
        if info.name.split(".")[1] in THEORY_FLOORS and not info.name.endswith("__main__"):
            mod = importlib.import_module(info.name)
            yield from (f"{info.name}:{n}" for n in getattr(mod, "__all__", ()))


def test_every_exact_function_has_a_case():
    """Each public callable of the theory floors is called by the dtype property or excused;
    a new one in neither fails here, and so does an entry whose name left the boundary."""
    public = set(theory_floor_callables())
    missing = sorted(public - set(EXACT_CASES) - set(NOT_EXACT))
    assert not missing, f"add a case (EXACT_CASES) or a reason (NOT_EXACT) for {missing}"
    stale = sorted((set(EXACT_CASES) | set(NOT_EXACT)) - public)
    assert not stale, stale
    assert len(EXACT_CASES) >= 90


def _resolve(target):
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("target", sorted(EXACT_CASES))
def test_exact_inputs_agree_across_dtypes(target):
    """The same numbers in any dtype or container give the same result or the same refusal;
    NaN and infinity in any float width are refused, naming the argument."""
    from fuzz_harness import names_argument

    build, examples = EXACT_CASES[target]
    fn = _resolve(target)

    @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def check(data):
        kwargs, post = build(data.draw)
        twins = {t: outcome(fn, kwargs, t, post) for t in ("python", "pybool")}
        assert twins["python"][0] == "ok", twins["python"]  # valid input: not vacuous
        wrong = {kind: outcome(fn, kwargs, kind, post) for kind in KINDS}
        wrong = {k: v for k, v in wrong.items() if v != twins[KINDS[k]]}
        assert not wrong, {k: (str(v)[:300], str(twins[KINDS[k]])[:300]) for k, v in wrong.items()}
        for bad in ("nan", "naninf"):
            ref = outcome(fn, kwargs, f"{bad}-py", post)
            if ref == twins["python"]:
                continue  # no value argument: nothing to replace
            names = [*kwargs, *(p for v in kwargs.values() if isinstance(v, Build)
                                for p in inspect.signature(v.make).parameters)]
            assert ref[:2] == ("raised", "ValueError") and names_argument(ref[2], names), ref
            for w in _WIDTHS:
                assert outcome(fn, kwargs, f"{bad}-{w}", post) == ref, (bad, w)

    check()


def test_spec_writers_refuse_numbers_json_cannot_hold(tmp_path):
    """A spec is written as given: a numpy int in it is refused naming the spec (one check,
    checks.check_json_data), before any file is touched."""
    from companion.sandwich.certificates import write_certificate_file

    spec = {"code": "paley_subset", "a": np.int64(11), "b": 3, "q": 11, "n": 3, "eps": "1/2",
            "convention": "bidirectional"}
    with pytest.raises(TypeError, match="spec must be JSON data"):
        write_certificate_file(tmp_path / "c.json", spec)
    assert not list(tmp_path.iterdir())
    write_certificate_file(tmp_path / "c.json", {**spec, "a": 11})
    assert (tmp_path / "c.json").is_file()
