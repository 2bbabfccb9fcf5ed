"""Lower ends of the sandwich as files, re-checked exactly (Chapter 3): the family, a ladder per
ordered pair of queries, and what the ladders prove. Real features ({prf:ref}`lem-shifted-trace`,
{prf:ref}`cor-strict-sandwich`): c and value = N^2 (1-c)^2 / (N (1-c)^2 + sum_{x != y}
max(c, 1/rho_xy - c)^2), rank = floor(value) + 1. Nonnegative features
({prf:ref}`cor-nonnegative-rank`): value = beta^2 = max_{x != y} 1/(rho_xy rho_yx), rank =
min(|S|, floor(1/beta^2) + 1). The claim and argument texts are generated from these and
checked, so a file cannot say more than it proves.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np

from companion.bounds.rank_bounds import near_orthogonal_rank_bound, sharp_rank_bound
from companion.bounds.witness import sequence_lookup, walk_ladder
from companion.checks import (
    check_choice,
    check_fraction,
    check_instance,
    check_json_data,
    check_mapping,
    check_path,
)
from companion.sandwich.head_files import (
    check_fields,
    family_from_spec,
    parse_rational,
    parse_token,
    rational_str,
    read_format_file,
    token_str,
    write_json_file,
)
from companion.sandwich.matrix import RatioBounds

__all__ = ["write_certificate_file", "verify_certificate_file", "kneser_box_matrix"]

FORMAT = "companion/rank-lower-bound/v2"
#: The feature classes a certificate speaks about, and the lemma that proves each.
LEMMAS = {"real": "shifted trace (cor-strict-sandwich)",
          "nonnegative": "near-orthogonality (cor-nonnegative-rank)"}
#: The fields of a certificate file.
FIELDS = {"format", "family", "features", "lemma", "claim", "c", "value", "rank", "argument",
          "queries", "keys", "ladders"}
#: Most ordered pairs a certificate file may list (the book's largest, |S| = 46, has 2070).
MAX_PAIRS = 2**16

_LADDERS = ("ladder (x, y): keys z_0 = complement(x), ..., z_k = complement(y) with overlaps "
            "with x rising by g_i; the family holds their pure sequences and every arrangement "
            "of each link's mixed sequence, so a head with error < eps has M_xy = K(x, ybar)/"
            "K(x, xbar) <= 1/R < 1/rho_xy, rho_xy = prod (n-2)(g_i - 2 eps)/(2 eps)")
ARGUMENTS = {
    "real": _LADDERS + ("; M has unit diagonal and rank <= r, so r >= N^2 (1-c)^2 / "
                        "||M - cJ||_F^2 > value unless M = I"),
    "nonnegative": _LADDERS + ("; with nonnegative features M = A B^T, A, B >= 0, and v_x = "
                               "sqrt(A_x o B_x) are nonnegative unit vectors in R^r with "
                               "<v_x, v_y> <= sqrt(M_xy M_yx) < sqrt(value); r + 1 of them "
                               "would hold a pair >= 1/sqrt(r), so r >= |S| or r > 1/value"),
}


def certificate_claim(features: str, eps: Fraction, rank: int) -> str:
    """The sentence a certificate of `features` proving `rank` states (generated, checked)."""
    kind = "any real" if features == "real" else "nonnegative"
    return (f"every head (kernel >= 0, {kind} features) with max error < {eps} on this "
            f"family has feature rank >= {rank}")


def _rank_from_rhos(features: str, N: int, rho: dict, c=None):
    """(c or None, value, rank) of the lemma for `features` on {(x, y): rho_xy}; c None: the
    optimal shift (real features)."""
    upper = {pair: 1 / r for pair, r in rho.items()}
    if features == "nonnegative":
        u = np.full((N, N), Fraction(1), dtype=object)
        for (i, j), v in upper.items():
            u[i, j] = v
        bound = near_orthogonal_rank_bound(u)
        return None, bound.beta_squared, bound.rank
    if c is None:
        sharp = sharp_rank_bound(N, dict(Counter(upper.values())))
        return sharp.c, sharp.value, sharp.rank
    value = Fraction(N * N) * (1 - c) ** 2 / (
        N * (1 - c) ** 2 + sum((max(c, u - c) ** 2 for u in upper.values()), Fraction(0)))
    return c, value, N if value == N else math.floor(value) + 1


def _certificate_to_dict(spec: dict, features: str) -> dict:
    """The certificate of the family `spec` defines: its ladders and what they prove."""
    family = family_from_spec(spec)
    cert, N = family.certificate, len(family.S)
    keys: dict[str, int] = {}
    ladders = [[i, j, [keys.setdefault(token_str(t), len(keys)) for t in chain]]
               for (i, j), chain in sorted(cert.chains.items())]
    c, value, rank = _rank_from_rhos(features, N, dict(cert.rho))
    data = {"format": FORMAT, "family": spec, "features": features, "lemma": LEMMAS[features],
            "claim": certificate_claim(features, family.eps, rank)}
    data |= {} if c is None else {"c": rational_str(c)}
    data |= {"value": rational_str(value), "rank": rank, "argument": ARGUMENTS[features],
             "queries": [token_str(x) for x in family.S], "keys": list(keys),
             "ladders": ladders}
    return data


def write_certificate_file(path, spec: dict, features: str = "real") -> Path:
    """Write the certificate of the family `spec` defines for `features` ('real': the sharper
    trace lemma; 'nonnegative': Lemma N), compact JSON, one ladder a line."""
    spec = check_json_data(check_mapping(spec, "spec"), "spec")
    check_choice(features, "features", tuple(LEMMAS))
    return write_json_file(path, _certificate_to_dict(spec, features), ("ladders",))


@dataclass
class CertificateReport:
    """What :func:`verify_certificate_file` found; optimal: c reaches the lemma's maximum
    (None for nonnegative certificates, which have no c)."""

    path: str
    features: str
    size: int
    pairs: int
    value: Fraction | None
    rank: int | None
    optimal: bool | None
    passed: bool
    problems: list = field(default_factory=list)

    def summary(self) -> str:
        verdict = "PASS" if self.passed else "FAIL: " + "; ".join(self.problems[:3])
        return (f"{self.path}: lower-bound certificate ({self.features} features), |S| = "
                f"{self.size}, {self.pairs} ladders, value {self.value} -> feature rank >= "
                f"{self.rank} -> {verdict}")


def verify_certificate_file(path) -> CertificateReport:
    """Rebuild the family and re-check the certificate exactly (each link's factor from the
    raw tokens, the lemma's value and rank, the claim text); malformed files raise
    ValueError, wrong claims give passed False."""
    path = check_path(path, "path")
    return verify_certificate_data(read_format_file(path, "certificate file", FORMAT, ()), path)


def verify_certificate_data(data: dict, path) -> CertificateReport:
    """:func:`verify_certificate_file` on the JSON object already read from `path`."""
    check_fields(data, path, "certificate", ("family", "features", "value", "rank", "claim",
                                             "queries", "keys", "ladders"), FIELDS)
    features = check_choice(data["features"], "features", tuple(LEMMAS))
    family = family_from_spec(data["family"])
    S, n, eps = family.S, family.n, family.eps
    N, m = S.shape
    c = parse_rational(data.get("c"), "c") if features == "real" else None
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
    has, Qa = sequence_lookup(family), np.asarray(Q)
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
        try:
            rho[(i, j)] = walk_ladder(Qa, i, j, [Z[t] for t in chain], n, eps, has)[1]
        except ValueError as exc:
            problems.append(str(exc))
    missing = N * (N - 1) - len(seen)
    if missing:
        problems.append(f"{missing} ordered pairs have no ladder")
    report = CertificateReport(str(path), features, N, len(seen), None, None, None, False,
                               problems)
    if problems:
        return report
    if c is not None and not 0 <= c < 1:
        problems.append(f"c = {c} must lie in [0, 1)")
        return report
    # the queries may be listed in any order: the lemmas depend only on the rho of each pair
    _, report.value, report.rank = _rank_from_rhos(features, N, rho, c)
    if c is not None:
        report.optimal = report.value == _rank_from_rhos(features, N, rho)[1]
    if report.value != claimed_value:
        problems.append(f"claimed value {claimed_value} != recomputed {report.value}")
    if report.rank != claimed_rank:
        problems.append(f"claimed rank {claimed_rank} != recomputed {report.rank}")
    if data["claim"] != certificate_claim(features, eps, report.rank):
        problems.append(f"the claim {data['claim']!r:.80} is not what the file certifies: "
                        f"{certificate_claim(features, eps, report.rank)!r}")
    if data.get("argument") != ARGUMENTS[features] or data.get("lemma") != LEMMAS[features]:
        problems.append("the argument or lemma text is not the one of the lemma for these "
                        "features")
    report.passed = not problems
    return report


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
    place = {x: place[x] if x in place else next(free) for x in range(N)}
    return np.array([[Fraction(1) if x == y else value if not set(place[x]) & set(place[y])
                      else Fraction(0) for y in range(N)] for x in range(N)], dtype=object)
