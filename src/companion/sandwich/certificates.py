"""Lower ends of the sandwich as files, re-checked exactly (Chapter 3,
{prf:ref}`lem-shifted-trace`, {prf:ref}`cor-strict-sandwich`): the family, a ladder per ordered
pair of queries, c, and value = N^2 (1-c)^2 / (N (1-c)^2 + sum_{x != y} max(c, 1/rho_xy - c)^2),
rank = floor(value) + 1. :func:`main` is ``python -m companion verify-head FILE ...``.
"""

from __future__ import annotations

import itertools
import math
import sys
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np

from companion.bounds.rank_bounds import sharp_rank_bound
from companion.checks import (
    check_fraction,
    check_instance,
    check_json_data,
    check_mapping,
    check_path,
)
from companion.files import read_json_file
from companion.sandwich.head_files import (
    family_from_spec,
    parse_rational,
    parse_token,
    rational_str,
    read_format_file,
    token_str,
    verify_head_file,
    write_json_file,
)
from companion.sandwich.matrix import RatioBounds

__all__ = ["write_certificate_file", "verify_certificate_file", "main", "kneser_box_matrix"]

FORMAT = "companion/rank-lower-bound/v1"
#: Most ordered pairs a certificate file may list (the book's largest, |S| = 46, has 2070).
MAX_PAIRS = 2**16


def _certificate_to_dict(spec: dict) -> dict:
    """The certificate of the family `spec` defines: its ladders, the sharper lemma's c."""
    family = family_from_spec(spec)
    cert, N = family.certificate, len(family.S)
    keys: dict[str, int] = {}
    ladders = []
    for (i, j), chain in sorted(cert.chains.items()):
        ladders.append([i, j, [keys.setdefault(token_str(t), len(keys)) for t in chain]])
    bound = sharp_rank_bound(N, dict(Counter(1 / r for r in cert.rho.values())))
    return {
        "format": FORMAT,
        "family": spec,
        "claim": (f"every head (kernel >= 0, any real features) with max error < "
                  f"{family.eps} on this family has feature rank >= {bound.rank}"),
        "c": rational_str(bound.c),
        "value": rational_str(bound.value),
        "rank": bound.rank,
        "argument": ("ladder (x, y): keys z_0 = complement(x), ..., z_k = complement(y) with "
                     "overlaps with x rising by g_i; the family holds their pure sequences and "
                     "every arrangement of each link's mixed sequence, so a head with error < "
                     "eps has M_xy = K(x, ybar)/K(x, xbar) <= 1/R < 1/rho_xy, rho_xy = prod "
                     "(n-2)(g_i - 2 eps)/(2 eps); M has unit diagonal and rank <= r, so r >= "
                     "N^2 (1-c)^2 / ||M - cJ||_F^2 > value unless M = I"),
        "queries": [token_str(x) for x in family.S],
        "keys": list(keys),
        "ladders": ladders,
    }


def write_certificate_file(path, spec: dict) -> Path:
    """Write the certificate of the family `spec` defines (compact JSON, one ladder a line)."""
    spec = check_json_data(check_mapping(spec, "spec"), "spec")
    return write_json_file(path, _certificate_to_dict(spec), ("ladders",))


@dataclass
class CertificateReport:
    """What :func:`verify_certificate_file` found; optimal: c reaches the lemma's maximum."""

    path: str
    size: int
    pairs: int
    value: Fraction | None
    rank: int | None
    optimal: bool | None
    passed: bool
    problems: list = field(default_factory=list)

    def summary(self) -> str:
        verdict = "PASS" if self.passed else "FAIL: " + "; ".join(self.problems[:3])
        return (f"{self.path}: lower-bound certificate, |S| = {self.size}, {self.pairs} "
                f"ladders, value {self.value} -> feature rank >= {self.rank} -> {verdict}")


def verify_certificate_file(path) -> CertificateReport:
    """Rebuild the family and re-check the certificate exactly (each link's factor from the
    raw tokens); malformed files raise ValueError, wrong claims give passed False."""
    path = check_path(path, "path")
    data = read_format_file(path, "certificate file", FORMAT,
                            ("family", "c", "value", "rank", "queries", "keys", "ladders"))
    family = family_from_spec(data["family"])
    S, n, eps, q = family.S, family.n, family.eps, family.query_position
    N, m = S.shape
    c = parse_rational(data["c"], "c")
    claimed_value = parse_rational(data["value"], "value")
    claimed_rank = data["rank"]
    if isinstance(claimed_rank, bool) or not isinstance(claimed_rank, int):
        raise ValueError(f"rank must be an int, got {claimed_rank!r:.40}")
    queries, keys, ladders = data["queries"], data["keys"], data["ladders"]
    if not isinstance(queries, list) or len(queries) != N:
        raise ValueError(f"queries must list the family's {N} queries")
    Q = [parse_token(t, f"queries[{i}]", m) for i, t in enumerate(queries)]
    if sorted(map(token_str, Q)) != sorted(map(token_str, S)) or len(set(queries)) != N:
        raise ValueError("queries must be the family's queries, each once")
    if not isinstance(keys, list) or not isinstance(ladders, list) or len(ladders) > MAX_PAIRS:
        raise ValueError(f"keys and ladders must be lists (at most {MAX_PAIRS} ladders)")
    Z = [parse_token(t, f"keys[{i}]", m) for i, t in enumerate(keys)]
    present = {seq.tobytes() for seq in np.asarray(family.sequences, dtype=np.int64)}

    def has(x, keys_):
        seq = list(keys_)
        seq.insert(q, x)
        return np.asarray(seq, dtype=np.int64).tobytes() in present

    problems, rho, seen = [], {}, set()
    for k, entry in enumerate(ladders):
        if (not isinstance(entry, list) or len(entry) != 3 or not isinstance(entry[2], list)
                or not all(isinstance(v, int) and not isinstance(v, bool) for v in
                           entry[:2] + entry[2])):
            raise ValueError(f"ladders[{k}] must be [x, y, [key indices]] of ints")
        i, j, chain = entry
        if not (0 <= i < N and 0 <= j < N and i != j) or (i, j) in seen:
            raise ValueError(f"ladders[{k}]: ({i}, {j}) must be a new ordered pair of queries")
        if len(chain) < 2 or not all(0 <= t < len(Z) for t in chain):
            raise ValueError(f"ladders[{k}] needs >= 2 key indices into keys")
        seen.add((i, j))
        x, zs = Q[i], [Z[t] for t in chain]
        pair = f"ladder ({i}, {j})"
        if not (np.array_equal(zs[0], 1 - x) and np.array_equal(zs[-1], 1 - Q[j])):
            problems.append(f"{pair} must run from complement(x) to complement(y)")
            continue
        levels = [int(z @ x) for z in zs]
        value = Fraction(1)
        for a, b, lo, hi in zip(zs, zs[1:], levels, levels[1:], strict=False):
            factor = Fraction(n - 2) * (hi - lo - 2 * eps) / (2 * eps)
            if not factor > 0:
                problems.append(f"{pair}: a link of gap {hi - lo} proves nothing")
                break
            value *= factor
            arrangements = [[b] * p + [a] + [b] * (n - 2 - p) for p in range(n - 1)]
            if not (has(x, [a] * (n - 1)) and has(x, [b] * (n - 1))
                    and all(has(x, keys_) for keys_ in arrangements)):
                problems.append(f"{pair}: the family lacks a pure or mixed sequence of a link")
                break
        else:
            if value < 1:
                problems.append(f"{pair}: rho = {value} < 1 proves no ratio")
            rho[(i, j)] = value
    missing = N * (N - 1) - len(seen)
    if missing:
        problems.append(f"{missing} ordered pairs have no ladder")
    report = CertificateReport(str(path), N, len(seen), None, None, None, False, problems)
    if problems:
        return report
    if not 0 <= c < 1:
        problems.append(f"c = {c} must lie in [0, 1)")
        return report
    upper = [1 / r for r in rho.values()]
    report.value = Fraction(N * N) * (1 - c) ** 2 / (
        N * (1 - c) ** 2 + sum((max(c, u - c) ** 2 for u in upper), Fraction(0)))
    report.rank = N if report.value == N else math.floor(report.value) + 1
    report.optimal = report.value == sharp_rank_bound(N, dict(Counter(upper))).value
    if report.value != claimed_value:
        problems.append(f"claimed value {claimed_value} != recomputed {report.value}")
    if report.rank != claimed_rank:
        problems.append(f"claimed rank {claimed_rank} != recomputed {report.rank}")
    report.passed = not problems
    return report


def main(argv=None) -> int:
    """`verify-head`: each file is checked, by its format, as a lower-bound certificate or a
    head file; one line per file (failures on stderr), exit status 0 if all pass, else 2."""
    if argv is not None and (not isinstance(argv, (list, tuple))
                             or not all(isinstance(a, str) for a in argv)):
        raise TypeError(f"argv must be a list of str (file paths), got {argv!r:.60}")
    paths = sys.argv[1:] if argv is None else list(argv)
    if not paths:
        print("usage: python -m companion verify-head FILE [FILE ...]", file=sys.stderr)
        return 2
    ok = True
    for p in paths:
        try:
            is_cert = read_json_file(p, "certificate file").get("format") == FORMAT
        except (OSError, ValueError, AttributeError):
            is_cert = False  # not a readable JSON object: the head verifier says why
        try:
            report = (verify_certificate_file if is_cert else verify_head_file)(p)
        except (ValueError, TypeError, KeyError, OSError) as exc:
            kind = "certificate" if is_cert else "head"
            print(f"{p}: not a valid {kind} file: {exc}", file=sys.stderr)
            ok = False
            continue
        print(report.summary(), file=sys.stdout if report.passed else sys.stderr)
        ok = ok and report.passed
    return 0 if ok else 2


# --------------------------------------------------------------------------- the closed box


def kneser_box_matrix(bounds: RatioBounds, value=Fraction(1, 5)) -> np.ndarray:
    """I + value * A(K(n, 2)) on the C(n, 2) queries, the pairs with bound below `value` on
    intersecting subsets (entry 0). For E1 (n = 8, value 1/5): in the closed box, rank 21."""
    check_instance(bounds, "bounds", RatioBounds)
    value = check_fraction(value, "value", 0, low_open=True)
    N = bounds.size
    n = round((1 + math.isqrt(1 + 8 * N)) / 2)
    if n * (n - 1) // 2 != N:
        raise ValueError(f"bounds: |S| = {N} is not a binomial C(n, 2)")
    low = sorted({tuple(sorted((x, y))) for x in range(N) for y in range(N)
                  if x != y and bounds.upper[x, y] < value})
    if len({v for p in low for v in p}) != 2 * len(low) or len(low) > n - 2:
        raise ValueError(f"bounds: the {len(low)} pairs below value must be disjoint and at "
                         f"most n - 2 = {n - 2}")
    # low pair k -> {k, n-1} and {k, n-2} (they share k); the rest fill the other subsets
    subsets = list(itertools.combinations(range(n), 2))
    place = {}
    for k, (x, y) in enumerate(low):
        place[x], place[y] = (k, n - 1), (k, n - 2)
    free = iter(s for s in subsets if s not in place.values())
    for x in range(N):
        if x not in place:
            place[x] = next(free)
    M = np.empty((N, N), dtype=object)
    for x in range(N):
        for y in range(N):
            M[x, y] = (Fraction(1) if x == y else value if not set(place[x]) & set(place[y])
                       else Fraction(0))
    return M
