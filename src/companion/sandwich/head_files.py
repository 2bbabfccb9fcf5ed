"""Exact NKA heads on a witness family as small JSON files, and their re-verification
(Chapter 3, the sandwich table; {prf:ref}`cor-narrowed-sandwich`): the family by definition,
features as exact "p/q" strings, a claimed rank and exact max error.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np

from companion.bounds.codes import paley_subset
from companion.bounds.witness import WitnessFamily, witness_family
from companion.checks import (
    check_instance,
    check_int,
    check_json_data,
    check_mapping,
    check_path,
)
from companion.core.attention import kernel_attention, kernel_weights
from companion.core.exact import exact_max_error
from companion.files import read_json_file
from companion.sandwich.heads import ExactHead, all_nonnegative, tables_to_kernel_head
from companion.sandwich.matrix import exact_rank

__all__ = ["family_from_spec", "write_head_file", "verify_head_file", "read_head_claims"]

FORMAT = "companion/nka-head/v1"
_RATIONAL = re.compile(r"^-?\d+(/[1-9]\d*)?$")
#: Longest rational string read (Python refuses ints of more than 4300 digits by default).
MAX_RATIONAL_CHARS = 4000
#: Most verification work, inputs x rank x (1 + bits / 64)^2 with bits the longest
#: rational's (the book's largest head: 1.1e6, a few seconds), and largest rank (book: 45).
MAX_VERIFY_COST = 2 * 10**6
MAX_FILE_RANK = 4096


def rational_str(v: Fraction) -> str:
    v = Fraction(v)
    return str(v.numerator) if v.denominator == 1 else f"{v.numerator}/{v.denominator}"


def parse_rational(text, name: str) -> Fraction:
    """An exact rational from "p" or "p/q" (q > 0); ValueError naming the field otherwise."""
    if not isinstance(text, str) or len(text) > MAX_RATIONAL_CHARS or not _RATIONAL.match(text):
        raise ValueError(f"{name} must be an exact rational string 'p' or 'p/q' of at most "
                         f"{MAX_RATIONAL_CHARS} characters, got {text!r:.80}")
    return Fraction(text)


def token_str(token) -> str:
    return "".join(str(int(b)) for b in token)


def parse_token(text, name: str, m: int) -> np.ndarray:
    if not isinstance(text, str) or len(text) != m or set(text) - {"0", "1"}:
        raise ValueError(f"{name} must be a string of {m} characters 0/1, got {text!r:.60}")
    return np.array([int(c) for c in text], dtype=np.int64)


def write_json_file(path, data: dict, row_keys: tuple) -> Path:
    """`data` as compact JSON: a line per field and per entry of the lists in `row_keys`."""
    path = check_path(path, "path")
    if str(path) in ("", ".") or path.is_dir():
        raise ValueError(f"path must name a file, got the folder {str(path)!r}")
    fields = []
    for k, v in data.items():
        if k in row_keys:
            rows = ",\n".join(f"    {json.dumps(e, separators=(',', ':'))}" for e in v)
            fields.append(f"  {json.dumps(k)}: [\n{rows}\n  ]")
        else:
            fields.append(f"  {json.dumps(k)}: {json.dumps(v)}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{\n" + ",\n".join(fields) + "\n}\n")
    except OSError as exc:
        raise ValueError(f"path {str(path)!r}: cannot write there ({exc.strerror or exc})") \
            from exc
    return path


def family_from_spec(spec) -> WitnessFamily:
    """Rebuild a witness family from {"code": "paley_subset", "q", "a", "b"} or {"code":
    "words", "words": ["0101...", ...]}, plus "n", "eps" ("p/q"), "convention"."""
    if not isinstance(spec, dict):
        raise ValueError(f"spec (the family) must be a JSON object, got {type(spec).__name__}")
    code, words = spec.get("code"), spec.get("words")
    try:
        if code == "paley_subset":
            S = paley_subset(*(check_int(spec.get(k), f"family.{k}", 0) for k in "abq"))
        elif code != "words":
            raise ValueError(f"family.code must be 'paley_subset' or 'words', got {code!r:.60}")
        elif not isinstance(words, list) or not words or not all(isinstance(w, str)
                                                                 for w in words):
            raise ValueError("family.words must be a non-empty list of 0/1 strings")
        else:
            S = np.array([parse_token(w, "family.words[i]", len(words[0])) for w in words])
        n = check_int(spec.get("n"), "family.n", 3)
        eps = parse_rational(spec.get("eps"), "family.eps")
        return witness_family(S, n, eps, spec.get("convention"))
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"spec (the family): {exc}") from exc


def write_head_file(path, head: ExactHead, family_spec: dict, variant: str,
                    construction: str) -> Path:
    """Write a head file (compact JSON, one query or key per line)."""
    check_instance(head, "head", ExactHead)
    check_json_data(check_mapping(family_spec, "family_spec"), "family_spec")
    check_instance(construction, "construction", str)
    if not isinstance(variant, str) or variant not in ("signed", "nonnegative"):
        raise ValueError(f"variant must be 'signed' or 'nonnegative', got {variant!r:.60}")
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
    data = {
        "format": FORMAT,
        "family": family_spec,
        "variant": variant,
        "construction": construction,
        "rank": head.rank,
        "max_error": rational_str(head.max_error),
        "model": ("alpha_p(x, z) = <phi_Q(x), phi_K(z)> at key positions and "
                  "<phi_Q(x), self_features(x)> at the query's own position; values v(z) = z "
                  "at key positions and self_value_scale(x) * x at the query's position; "
                  "readout y = <x, o> + bias(x)"),
        "queries": queries,
        "keys": keys,
    }
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
        err = "n/a" if self.max_error is None else (
            f"{self.max_error} (~{float(self.max_error):.6f})")
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
    for key in fields:
        if key not in data:
            raise ValueError(f"path {str(path)!r} lacks the field {key!r}")
    return data


def _read_head_json(path, fields: tuple) -> dict:
    data = read_format_file(path, "head file", FORMAT, fields)
    r = data["rank"]
    if isinstance(r, bool) or not isinstance(r, int) or not 1 <= r <= MAX_FILE_RANK:
        raise ValueError(f"rank must be an int >= 1 (at most {MAX_FILE_RANK}), got {r!r:.40}")
    return data


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


def _load_head_file(path):
    """(data, family, tables) of a head file; ValueError on malformed content."""
    data = _read_head_json(path, ("family", "variant", "rank", "max_error", "queries", "keys"))
    if data["variant"] not in ("signed", "nonnegative"):
        raise ValueError(f"variant must be 'signed' or 'nonnegative', got {data['variant']!r}")
    r = data["rank"]
    parse_rational(data["max_error"], "max_error")
    family = family_from_spec(data["family"])
    m, N = family.S.shape[1], len(family.S)
    Q = np.full((N, r), Fraction(0), dtype=object)
    self_f = np.full((N, r), Fraction(0), dtype=object)
    scale = np.full(N, Fraction(1), dtype=object)
    bias = np.full(N, Fraction(0), dtype=object)
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
    return data, family, (Q, key_features, self_f, scale, bias)


def verify_head_file(path) -> HeadReport:
    """Re-verify the head on the rebuilt family exactly: weights >= 0, denominators > 0, max
    error < 1/2, the claims (passed False); malformed files raise ValueError."""
    path = check_path(path, "path")
    data, family, (Q, key_features, self_f, scale, bias) = _load_head_file(path)
    r = data["rank"]
    values = [*Q.ravel(), *self_f.ravel(), *scale, *bias,
              *(v for t in key_features.values() for v in t)]
    bits = max(abs(v.numerator).bit_length() + v.denominator.bit_length() for v in values)
    cost = len(family) * r * (1 + bits / 64) ** 2
    if cost > MAX_VERIFY_COST:
        raise ValueError(f"path {str(path)!r}: rationals of up to {bits} bits on {len(family)} "
                         f"inputs at rank {r} cost {cost:.3g} to verify, above MAX_VERIFY_COST "
                         f"= {MAX_VERIFY_COST}")
    problems = []
    key_ids = set(np.delete(family.token_ids, family.query_position, axis=1).ravel().tolist())
    missing = sorted(key_ids - set(key_features))
    if missing:
        problems.append(f"{len(missing)} key tokens of the family have no features")
    if set(key_features) - key_ids:
        problems.append(f"{len(set(key_features) - key_ids)} listed key tokens never occur at "
                        "a key position")
    if data["variant"] == "nonnegative" and not all_nonnegative(Q, self_f, key_features):
        problems.append("variant 'nonnegative' but a feature is negative")
    report = HeadReport(str(path), data["family"], data["variant"], len(family.S), len(family),
                        r, None, None, None, False, problems)
    if missing:
        return report
    head = tables_to_kernel_head(family, Q, key_features, self_f, scale, bias)
    alpha = kernel_weights(head, family.sequences, family.convention, exact=True)
    report.min_weight = min(Fraction(v) for v in alpha.ravel())
    if report.min_weight < 0:
        problems.append(f"an attention weight is negative ({report.min_weight})")
        return report
    if any(t <= 0 for t in alpha.sum(axis=-1)):
        problems.append("an attention denominator is 0")
        return report
    y = kernel_attention(head, family.sequences, family.convention, exact=True)
    report.max_error = exact_max_error(y, family.targets)
    if not report.max_error < Fraction(1, 2):
        problems.append(f"max error {float(report.max_error):.6f} >= 1/2")
    claimed = parse_rational(data["max_error"], "max_error")
    if claimed != report.max_error:
        problems.append(f"claimed max error {float(claimed):.6f} != recomputed "
                        f"{float(report.max_error):.6f}")
    report.kernel_rank = exact_rank([[sum((a * b for a, b in zip(q, key_features[t])),
                                          Fraction(0)) for t in sorted(key_features)] for q in Q])
    report.passed = not problems
    return report


def read_head_claims(path) -> dict:
    """A head file's claims (family, variant, rank, max error, construction), unverified."""
    path = check_path(path, "path")
    data = _read_head_json(path, ("family", "variant", "rank", "max_error"))
    return {"path": str(path), "family": data["family"], "variant": data["variant"],
            "rank": data["rank"], "max_error": parse_rational(data["max_error"], "max_error"),
            "construction": data.get("construction", "")}
