"""Exact NKA heads on a witness family as small JSON files, and their re-verification
(Chapter 3, the sandwich table; {prf:ref}`cor-narrowed-sandwich`): the family by definition,
features as exact "p/q" strings, a claimed rank and exact max error.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import sys
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np

from companion.bounds.codes import paley_subset
from companion.bounds.witness import WitnessFamily, family_size, witness_family
from companion.checks import (
    check_choice,
    check_instance,
    check_int,
    check_json_data,
    check_mapping,
    check_path,
)
from companion.core.exact import exact_rank
from companion.files import read_json_file, writable_path, write_text
from companion.sandwich.heads import ExactHead, all_nonnegative

__all__ = ["family_from_spec", "write_head_file", "verify_head_file", "read_head_claims"]

FORMAT = "companion/nka-head/v1"
VARIANTS = ("signed", "nonnegative")
_RATIONAL = re.compile(r"-?[0-9]+(/[1-9][0-9]*)?\Z")
#: Longest feature, bias or scale read: numerator and denominator of at most
#: MAX_RATIONAL_BITS bits each (about 1,233 digits; the committed heads use a few hundred).
#: A claimed max error, an output of the head, may have MAX_ERROR_BITS (its size grows with
#: the features': about (n + 1) times their bits over one denominator).
MAX_RATIONAL_BITS = 4096
MAX_ERROR_BITS = 2**17
#: Verification budget per input, in word operations (about 1.5e9 a second on one core):
#: see :func:`verification_cost`.
COST_PER_INPUT = 10**7
#: Largest family a file may specify (the book's largest: 46 words of width 24, n = 3, 6,532
#: sequences of 72 token entries each).
MAX_SPEC_QUERIES, MAX_SPEC_WIDTH, MAX_SPEC_LENGTH, MAX_SPEC_CELLS = 256, 1024, 16, 2**23
#: The fields of a head file (construction: free text saying where the head came from).
FIELDS = {"format", "family", "variant", "construction", "rank", "max_error", "model",
          "queries", "keys"}
MODEL = ("alpha_p(x, z) = <phi_Q(x), phi_K(z)> at key positions and <phi_Q(x), "
         "self_features(x)> at the query's own position; values v(z) = z at key positions and "
         "self_value_scale(x) * x at the query's position; readout y = <x, o> + bias(x)")


@contextlib.contextmanager
def _long_ints():
    """Decimal strings of ints past Python's default 4,300 digits, which guards unchecked
    input (the callers check the lengths)."""
    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        yield
    finally:
        sys.set_int_max_str_digits(old)


def rational_str(v: Fraction) -> str:
    v = Fraction(v)
    with _long_ints():
        return str(v.numerator) if v.denominator == 1 else f"{v.numerator}/{v.denominator}"


def parse_rational(text, name: str, max_bits: int = MAX_RATIONAL_BITS) -> Fraction:
    """An exact rational from "p" or "p/q" (q > 0), numerator and denominator of at most
    `max_bits` bits; ValueError naming the field otherwise."""
    chars = 2 * (max_bits * 30103 // 100000 + 2)  # log10(2) = 0.30103...
    if not isinstance(text, str) or len(text) > chars or not _RATIONAL.match(text):
        raise ValueError(f"{name} must be an exact rational string 'p' or 'p/q' of at most "
                         f"{max_bits} bits each, got {text!r:.80}")
    num, _, den = text.partition("/")
    with _long_ints():
        v = Fraction(int(num), int(den) if den else 1)
    if max(abs(v.numerator).bit_length(), v.denominator.bit_length()) > max_bits:
        raise ValueError(f"{name} has a numerator or denominator of more than {max_bits} bits, "
                         f"got {text!r:.80}")
    return v


def token_str(token) -> str:
    return "".join(str(int(b)) for b in token)


def parse_token(text, name: str, m: int) -> np.ndarray:
    if not isinstance(text, str) or len(text) != m or set(text) - {"0", "1"}:
        raise ValueError(f"{name} must be a string of {m} characters 0/1, got {text!r:.60}")
    return np.array([int(c) for c in text], dtype=np.int64)


def write_json_file(path, data: dict, row_keys: tuple) -> Path:
    """`data` as compact JSON: a line per field and per entry of the lists in `row_keys`,
    written atomically (through a symlink, to its target)."""
    fields = []
    for k, v in data.items():
        if k in row_keys:
            rows = ",\n".join(f"    {json.dumps(e, separators=(',', ':'))}" for e in v)
            fields.append(f"  {json.dumps(k)}: [\n{rows}\n  ]")
        else:
            fields.append(f"  {json.dumps(k)}: {json.dumps(v)}")
    return write_text(writable_path(path), "{\n" + ",\n".join(fields) + "\n}\n")


def family_from_spec(spec) -> WitnessFamily:
    """Rebuild a witness family from {"code": "paley_subset", "q", "a", "b"} or {"code":
    "words", "words": ["0101...", ...]}, plus "n", "eps" ("p/q"), "convention"; at most
    MAX_SPEC_QUERIES words of width <= MAX_SPEC_WIDTH and n <= MAX_SPEC_LENGTH (a file cannot
    ask for an arbitrarily large family)."""
    if not isinstance(spec, dict):
        raise ValueError(f"spec (the family) must be a JSON object, got {type(spec).__name__}")
    code, words = spec.get("code"), spec.get("words")
    try:
        if code == "paley_subset":
            a, b, q = (check_int(spec.get(k), f"family.{k}", 0) for k in "abq")
            if a + b > MAX_SPEC_QUERIES:
                raise ValueError(f"family.a + family.b must be at most {MAX_SPEC_QUERIES}")
            S = paley_subset(a, b, q)
        elif code != "words":
            raise ValueError(f"family.code must be 'paley_subset' or 'words', got {code!r:.60}")
        elif (not isinstance(words, list) or not 0 < len(words) <= MAX_SPEC_QUERIES
              or not all(isinstance(w, str) for w in words)
              or not 0 < len(words[0]) <= MAX_SPEC_WIDTH):
            raise ValueError(f"family.words must be a list of 1 to {MAX_SPEC_QUERIES} 0/1 "
                             f"strings of width at most {MAX_SPEC_WIDTH}")
        else:
            S = np.array([parse_token(w, "family.words[i]", len(words[0])) for w in words])
        n = check_int(spec.get("n"), "family.n", 3, MAX_SPEC_LENGTH)
        eps = parse_rational(spec.get("eps"), "family.eps")
        # it holds at least |S|^2 sequences (a pure one per pair): refuse a huge one first
        cells = len(S) ** 2 * n * S.shape[1]
        cells = cells if cells > MAX_SPEC_CELLS else family_size(S, n, eps) * n * S.shape[1]
        if cells > MAX_SPEC_CELLS:
            raise ValueError(f"the family would hold {cells} or more token entries, above "
                             f"MAX_SPEC_CELLS = {MAX_SPEC_CELLS}")
        return witness_family(S, n, eps, spec.get("convention"))
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"spec (the family): {exc}") from exc


def write_head_file(path, head: ExactHead, family_spec: dict, variant: str,
                    construction: str) -> Path:
    """Write a head file (compact JSON, one query or key per line)."""
    check_instance(head, "head", ExactHead)
    check_json_data(check_mapping(family_spec, "family_spec"), "family_spec")
    check_instance(construction, "construction", str)
    check_choice(variant, "variant", VARIANTS)
    if variant == "nonnegative" and not head.nonnegative:
        raise ValueError("variant 'nonnegative' claimed, but the head has a negative feature")
    fam = head.family
    queries = []
    for x, word in enumerate(fam.S):
        entry = {"token": token_str(word),
                 "features": [rational_str(v) for v in head.query_features[x]],
                 "bias": rational_str(head.bias[x])}
        if any(v != 0 for v in head.self_features[x]):
            entry["self_features"] = [rational_str(v) for v in head.self_features[x]]
            entry["self_value_scale"] = rational_str(head.self_value_scale[x])
        queries.append(entry)
    keys = [{"token": token_str(fam.tokens[t]), "features": [rational_str(v) for v in feats]}
            for t, feats in sorted(head.key_features.items())]
    data = {"format": FORMAT, "family": family_spec, "variant": variant,
            "construction": construction, "rank": head.rank,
            "max_error": rational_str(head.max_error), "model": MODEL, "queries": queries,
            "keys": keys}
    return write_json_file(path, data, ("queries", "keys"))


@dataclass
class HeadReport:
    """What :func:`verify_head_file` found. passed: every check held."""

    path: str
    family: dict
    variant: str
    size: int
    inputs: int
    rank: int
    kernel_rank: int | None
    max_error: Fraction | None
    min_weight: Fraction | None
    passed: bool
    problems: list = field(default_factory=list)

    def summary(self) -> str:
        exact = "" if self.max_error is None else rational_str(self.max_error)
        err = "n/a" if self.max_error is None else (
            f"{exact} (~{float(self.max_error):.6f})" if len(exact) <= 120 else
            f"~{float(self.max_error):.6f} (a {len(exact):,}-character fraction)")
        verdict = "PASS" if self.passed else "FAIL: " + "; ".join(self.problems[:3])
        return (f"{self.path}: |S| = {self.size}, {self.inputs} inputs, {self.variant} "
                f"features, rank {self.rank} (kernel table rank {self.kernel_rank}), exact max "
                f"error {err} -> {verdict}")


def _vector(values, name: str, r: int) -> list[Fraction]:
    if not isinstance(values, list) or len(values) != r:
        raise ValueError(f"{name} must be a list of {r} rationals, got {values!r:.60}")
    return [parse_rational(v, f"{name}[{i}]") for i, v in enumerate(values)]


def read_format_file(path, what: str, fmt: str, fields: tuple) -> dict:
    """The JSON object of a `what` file of format `fmt` holding `fields`; ValueError else."""
    data = read_json_file(path, what)
    if not isinstance(data, dict) or data.get("format") != fmt:
        raise ValueError(f"path {str(path)!r} must hold a JSON object with format {fmt!r}")
    return check_fields(data, path, what, fields)


def check_fields(data: dict, path, what: str, required, allowed=None) -> dict:
    """`data` if it holds the `required` fields and (`allowed` given) no other: a file states
    nothing the verifier does not check or show."""
    for key in required:
        if key not in data:
            raise ValueError(f"path {str(path)!r} lacks the field {key!r}")
    if allowed is not None and set(data) - allowed:
        raise ValueError(f"path {str(path)!r} has fields a {what} does not have: "
                         f"{sorted(set(data) - allowed)!r:.100}")
    return data


def _check_rank(data: dict) -> int:
    r = data["rank"]
    if isinstance(r, bool) or not isinstance(r, int) or r < 1:
        raise ValueError(f"rank must be an int >= 1, got {r!r:.40}")
    return r


def _entries(data: dict, name: str, m: int, index: dict):
    """(k, entry, row) for each entry of data[name]; row = index[its token], each once."""
    if not isinstance(data[name], list):
        raise ValueError(f"{name} must be a list")
    seen = set()
    for k, e in enumerate(data[name]):
        if not isinstance(e, dict):
            raise ValueError(f"{name}[{k}] must be an object")
        tok = token_str(parse_token(e.get("token"), f"{name}[{k}].token", m))
        if tok not in index:
            raise ValueError(f"{name}[{k}].token {tok} is not a "
                             f"{'query' if name == 'queries' else 'key token'} of the family")
        if tok in seen:
            raise ValueError(f"{name}[{k}].token {tok} is listed twice")
        seen.add(tok)
        yield k, e, index[tok]


def key_token_ids(family: WitnessFamily) -> set:
    """The token ids that occur at a key position of the family (T of them)."""
    return set(np.delete(family.token_ids, family.query_position, axis=1).ravel().tolist())


def verification_cost(family: WitnessFamily, rank: int, vector_bits: int) -> tuple[int, int]:
    """(cost, limit) of verifying a head file, in word operations. The rule: each input
    multiplies a few integers of B = (n + 1) b bits, b the bits of the largest feature vector
    over one denominator (the lcm of its denominators and the numerators over it), and each
    (query, key token) pair of the family takes a dot product of `rank` such entries, so
    cost = inputs (1 + B/64)^2 + pairs rank (1 + b/64)^2; the limit scales with the family,
    COST_PER_INPUT per input (a b of up to about 40,000 bits at n = 3: e.g. a rank-32 head
    on the 46 words whose every entry has its own 362-bit denominator, b = 23,000, verifies
    in 16 s on one core). A file above it is refused unverified, and a rank above the
    family's T key tokens too (T features always suffice: one indicator per key token)."""
    inputs, n = len(family), family.n
    keys = np.delete(family.token_ids, family.query_position, axis=1)
    pairs = len({(int(q), int(t)) for q, row in zip(family.query_ids, keys) for t in row})
    cost = (inputs * (1 + (n + 1) * vector_bits // 64) ** 2
            + pairs * rank * (1 + vector_bits // 64) ** 2)
    return cost, inputs * COST_PER_INPUT


def _integer_form(vec, cap: int):
    """(ints, d) with vec == ints / d, d > 0 the least common denominator; None as soon as
    d and the numerators over it need more than `cap` bits (the lcm is built step by step,
    so a hostile file stops early)."""
    d = 1
    top = max((abs(v.numerator).bit_length() for v in vec), default=0)
    for v in vec:
        d = math.lcm(d, v.denominator)
        if 2 * d.bit_length() + top > cap:
            return None
    return [v.numerator * (d // v.denominator) for v in vec], d


def _load_head(data: dict, path):
    """(family, tables, integer forms) of a head file's JSON object; ValueError on malformed
    content, or when its verification costs more than :func:`verification_cost` allows."""
    check_fields(data, path, "head file",
                 ("family", "variant", "rank", "max_error", "queries", "keys"), FIELDS)
    check_choice(data["variant"], "variant", VARIANTS)
    r = _check_rank(data)
    parse_rational(data["max_error"], "max_error", MAX_ERROR_BITS)
    family = family_from_spec(data["family"])
    T = len(key_token_ids(family))
    if r > T:
        raise ValueError(f"rank {r} is above the family's {T} key tokens (one indicator feature "
                         "per key token always suffices)")
    m, N = family.S.shape[1], len(family.S)
    Q, self_f = (np.full((N, r), Fraction(0), dtype=object) for _ in "qs")
    scale, bias = np.full(N, Fraction(1), dtype=object), np.full(N, Fraction(0), dtype=object)
    queries = list(_entries(data, "queries", m, {token_str(x): i for i, x in enumerate(family.S)}))
    for k, e, i in queries:
        Q[i] = _vector(e.get("features"), f"queries[{k}].features", r)
        bias[i] = parse_rational(e.get("bias"), f"queries[{k}].bias")
        if "self_features" in e:
            self_f[i] = _vector(e["self_features"], f"queries[{k}].self_features", r)
            scale[i] = parse_rational(e.get("self_value_scale"), f"queries[{k}].self_value_scale")
    if len(queries) != N:
        raise ValueError(f"queries must list all {N} queries of the family, got {len(queries)}")
    tid = {token_str(t): k for k, t in enumerate(family.tokens)}
    key_features = {t: tuple(_vector(e.get("features"), f"keys[{k}].features", r))
                    for k, e, t in _entries(data, "keys", m, tid)}
    # the largest b the budget allows even without the pairs' term: stop building beyond it
    cap = 64 * math.isqrt(COST_PER_INPUT) // (family.n + 1)
    forms = {}
    for name, table in (("q", Q), ("s", self_f), ("k", key_features)):
        for i, vec in (table.items() if isinstance(table, dict) else enumerate(table)):
            form = _integer_form(vec, cap)
            if form is None:
                raise ValueError(f"path {str(path)!r}: not verified, too costly: a feature vector "
                                 f"needs more than {cap} bits over one denominator, the most "
                                 f"this family's budget allows (COST_PER_INPUT = "
                                 f"{COST_PER_INPUT} per input; see verification_cost)")
            forms[(name, i)] = form
    bits = max(max((abs(u).bit_length() for u in ints), default=0) + d.bit_length()
               for ints, d in forms.values())
    cost, limit = verification_cost(family, r, bits)
    if cost > limit:
        raise ValueError(f"path {str(path)!r}: not verified, too costly: feature vectors of up "
                         f"to {bits} bits over one denominator at rank {r} cost {cost:.3g} word "
                         f"operations on {len(family)} inputs, above this family's budget "
                         f"{limit:.3g} (COST_PER_INPUT = {COST_PER_INPUT} per input)")
    return family, (Q, key_features, self_f, scale, bias), forms


def _dot(a, b) -> int:
    return sum(u * v for u, v in zip(a, b) if u and v)


def _exact_check(family: WitnessFamily, tables, forms):
    """The exact weights and outputs of a head file on every input, in integers: per input the
    weights alpha_p = A_p / (d_Q d_p) share d_Q, so y - b = sum_p A_p L_p f_p / sum_p A_p L_p
    with L_p = prod_{p' != p} d_p'. Returns (least weight, max error or None, whether a
    denominator vanishes, {(query, token): A})."""
    Q, key_features, self_f, scale, bias = tables
    n, qpos, S = family.n, family.query_position, family.S
    qform = [forms[("q", i)] for i in range(len(Q))]
    sform = [forms[("s", i)] for i in range(len(Q))]
    kform = {t: forms[("k", t)] for t in key_features}
    keys = np.delete(family.token_ids, qpos, axis=1)
    pair = {(i, t): _dot(qform[i][0], kform[t][0])
            for i, t in {(int(i), int(t)) for i, row in zip(family.query_ids, keys) for t in row}}
    self_w = [_dot(qform[i][0], sform[i][0]) for i in range(len(S))]
    least = min([Fraction(a, qform[i][1] * kform[t][1]) for (i, t), a in pair.items()]
                + [Fraction(a, qform[i][1] * sform[i][1]) for i, a in enumerate(self_w)])
    if least < 0:
        return least, None, False, pair
    overlaps = (family.tokens @ S.T).tolist()  # overlaps[token][query]
    weights = S.sum(axis=1).tolist()
    worst = (-1, 1)  # max error as (numerator, denominator)
    for row, (i, ids) in enumerate(zip(family.query_ids.tolist(), family.token_ids.tolist())):
        sn, sd = scale[i].numerator, scale[i].denominator
        A = [self_w[i] if p == qpos else pair[(i, t)] for p, t in enumerate(ids)]
        D = [sform[i][1] if p == qpos else kform[t][1] for p, t in enumerate(ids)]
        F = [sn * weights[i] if p == qpos else overlaps[t][i] * sd for p, t in enumerate(ids)]
        L = [math.prod(D[:p] + D[p + 1:]) for p in range(n)]
        den = sum(a * lp for a, lp in zip(A, L)) * sd
        if den <= 0:
            return least, None, True, pair
        num = sum(a * lp * f for a, lp, f in zip(A, L, F))
        bn, bd = bias[i].numerator, bias[i].denominator
        err_num = abs(num * bd + (bn - int(family.targets[row]) * bd) * den)
        err_den = den * bd
        if err_num * worst[1] > worst[0] * err_den:
            worst = (err_num, err_den)
    return least, Fraction(*worst), False, pair


#: Primes for the kernel table's rank: its rank mod p is a lower bound on the rank over Q.
_PRIMES = (2**61 - 1, 2**89 - 1)


def _kernel_rank(forms: dict, N: int, key_ids: list, r: int) -> int | None:
    """Rank of the table [<Q_x, K_t>] over queries x and key tokens t. Rows and columns over
    one denominator each have the same rank; r bounds it above and its rank mod a prime
    below, so a prime that reaches r decides it (else exact elimination, None if too big)."""
    qform = [forms[("q", i)][0] for i in range(N)]
    kform = [forms[("k", t)][0] for t in key_ids]
    best = 0
    for p in _PRIMES:
        qp = [[u % p for u in q] for q in qform]
        kp = [[u % p for u in k] for k in kform]
        M = [[_dot(q, k) % p for k in kp] for q in qp]
        rank = 0
        for c in range(len(kp)):
            piv = next((k for k in range(rank, len(M)) if M[k][c]), None)
            if piv is None:
                continue
            M[rank], M[piv] = M[piv], M[rank]
            inv = pow(M[rank][c], -1, p)
            for k in range(len(M)):
                if k != rank and M[k][c]:
                    f = M[k][c] * inv % p
                    M[k] = [(u - f * v) % p for u, v in zip(M[k], M[rank])]
            rank += 1
        best = max(best, rank)
        if best == r:
            return r
    try:
        return exact_rank([[_dot(q, k) for k in kform] for q in qform])
    except ValueError:
        return None


def verify_head_file(path) -> HeadReport:
    """Re-verify the head on the rebuilt family exactly: weights >= 0, denominators > 0, max
    error < 1/2, the claims (passed False); malformed or too costly files raise ValueError
    (:func:`verification_cost` says when a file is too costly)."""
    path = check_path(path, "path")
    return verify_head_data(read_format_file(path, "head file", FORMAT, ()), path)


def verify_head_data(data: dict, path) -> HeadReport:
    """:func:`verify_head_file` on the JSON object already read from `path`."""
    family, tables, forms = _load_head(data, path)
    Q, key_features, self_f = tables[:3]
    r = data["rank"]
    problems = []
    key_ids = key_token_ids(family)
    missing = sorted(key_ids - set(key_features))
    if missing:
        problems.append(f"{len(missing)} key tokens of the family have no features")
    if set(key_features) - key_ids:
        problems.append(f"{len(set(key_features) - key_ids)} listed key tokens never occur at "
                        "a key position")
    if data["variant"] == "nonnegative" and not all_nonnegative(Q, self_f, key_features):
        problems.append("variant 'nonnegative' but a feature is negative")
    if data.get("model", MODEL) != MODEL:
        problems.append("the model text is not the one this verifier checks")
    report = HeadReport(str(path), data["family"], data["variant"], len(family.S), len(family),
                        r, None, None, None, False, problems)
    if missing:
        return report
    least, max_error, zero_den, _ = _exact_check(family, tables, forms)
    report.min_weight = least
    if least < 0:
        problems.append(f"an attention weight is negative ({least})")
        return report
    if zero_den:
        problems.append("an attention denominator is 0")
        return report
    report.max_error = max_error
    if not max_error < Fraction(1, 2):
        problems.append(f"max error {float(max_error):.6f} >= 1/2")
    claimed = parse_rational(data["max_error"], "max_error", MAX_ERROR_BITS)
    if claimed != max_error:
        problems.append(f"claimed max error {float(claimed):.6f} != recomputed "
                        f"{float(max_error):.6f}")
    report.kernel_rank = _kernel_rank(forms, len(family.S), sorted(key_features), r)
    report.passed = not problems
    return report


def read_head_claims(path) -> dict:
    """A head file's claims (family, variant, rank, max error, construction), unverified."""
    path = check_path(path, "path")
    data = read_format_file(path, "head file", FORMAT, ("family", "variant", "rank", "max_error"))
    _check_rank(data)
    return {"path": str(path), "family": data["family"], "variant": data["variant"],
            "rank": data["rank"],
            "max_error": parse_rational(data["max_error"], "max_error", MAX_ERROR_BITS),
            "construction": data.get("construction", "")}
