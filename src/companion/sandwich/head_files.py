"""Exact NKA heads on a witness family as small JSON files, and their re-verification
(Chapter 3, the sandwich table; {prf:ref}`cor-narrowed-sandwich`).

A head file names its family by definition (the code S and n, eps, convention), lists the
features as exact rationals ("p/q" strings) and claims a feature rank and an exact max error.
:func:`verify_head_file` rebuilds the family from its definition, runs the package's exact
forward pass on every input and checks: every attention weight >= 0, every denominator > 0,
max |y - t| < 1/2, and the claimed rank and max error equal the recomputed ones.

    python -m companion verify-head results/heads/*.json
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np

from companion.bounds.codes import paley_subset
from companion.bounds.witness import WitnessFamily, witness_family
from companion.checks import check_instance, check_int, read_json_file
from companion.core.attention import kernel_attention, kernel_weights
from companion.core.exact import exact_max_error
from companion.sandwich.heads import ExactHead, tables_to_kernel_head
from companion.sandwich.matrix import exact_rank

FORMAT = "companion/nka-head/v1"
_RATIONAL = re.compile(r"^-?\d+(/[1-9]\d*)?$")
#: Longest rational string read (Python refuses ints of more than 4300 digits by default).
MAX_RATIONAL_CHARS = 4000
#: Most verification work: inputs x rank x (1 + bits / 64)^2, bits the longest rational's
#: numerator plus denominator bits (exact arithmetic costs about the square of the size).
#: The book's largest head costs 1.1e6 (a few seconds); a file of very long rationals is
#: refused before the evaluation instead of running for hours.
MAX_VERIFY_COST = 2 * 10**6
#: Largest feature rank a head file may claim (the tables are |S| x rank; the book's
#: largest rank is 45).
MAX_FILE_RANK = 4096


def _check_path(path) -> Path:
    if not isinstance(path, (str, Path)):
        raise TypeError(f"path must be a str or Path, got {type(path).__name__}")
    return Path(path)


def _rational_str(v: Fraction) -> str:
    v = Fraction(v)
    return str(v.numerator) if v.denominator == 1 else f"{v.numerator}/{v.denominator}"


def parse_rational(text, name: str) -> Fraction:
    """An exact rational from "p" or "p/q" (q > 0); ValueError naming the field otherwise."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty str (the field's name), got {name!r:.60}")
    if not isinstance(text, str) or len(text) > MAX_RATIONAL_CHARS or not _RATIONAL.match(text):
        raise ValueError(f"{name} must be an exact rational string 'p' or 'p/q' of at most "
                         f"{MAX_RATIONAL_CHARS} characters, got {text!r:.80}")
    return Fraction(text)


def _bits(token) -> str:
    return "".join(str(int(b)) for b in token)


def _token(text, name: str, m: int) -> np.ndarray:
    if not isinstance(text, str) or len(text) != m or set(text) - {"0", "1"}:
        raise ValueError(f"{name} must be a string of {m} characters 0/1, got {text!r}")
    return np.array([int(c) for c in text], dtype=np.int64)


def family_from_spec(spec) -> WitnessFamily:
    """Rebuild a witness family from its definition: {"code": "paley_subset", "q", "a", "b"}
    or {"code": "words", "words": ["0101...", ...]}, plus "n", "eps" ("p/q"), "convention".
    Errors name the field (family.q, ...) after "spec"."""
    if not isinstance(spec, dict):
        raise ValueError(f"spec (the family) must be a JSON object, got {type(spec).__name__}")
    try:
        return _family_from_spec(spec)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"spec (the family): {exc}") from exc


def _family_from_spec(spec: dict) -> WitnessFamily:
    code = spec.get("code")
    if code == "paley_subset":
        S = paley_subset(*(check_int(spec.get(k), f"family.{k}", 0) for k in ("a", "b", "q")))
    elif code == "words":
        words = spec.get("words")
        if not isinstance(words, list) or not words or not all(isinstance(w, str) for w in words):
            raise ValueError("family.words must be a non-empty list of 0/1 strings")
        S = np.array([_token(w, "family.words[i]", len(words[0])) for w in words])
    else:
        raise ValueError(f"family.code must be 'paley_subset' or 'words', got {code!r}")
    n = check_int(spec.get("n"), "family.n", 3)
    eps = parse_rational(spec.get("eps"), "family.eps")
    convention = spec.get("convention")
    return witness_family(S, n, eps, convention)


def head_to_dict(head: ExactHead, family_spec: dict, variant: str, construction: str) -> dict:
    """The JSON form of an :class:`ExactHead` (see the module docstring)."""
    check_instance(head, "head", ExactHead)
    if not isinstance(family_spec, dict):
        raise TypeError(f"family_spec must be a dict, got {type(family_spec).__name__}")
    try:  # it is written as it is: refuse what JSON cannot hold before any file is touched
        json.dumps(family_spec, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"family_spec must be JSON data (str keys, finite numbers): {exc}") \
            from exc
    if not isinstance(construction, str):
        raise TypeError(f"construction must be a str, got {type(construction).__name__}")
    if not isinstance(variant, str) or variant not in ("signed", "nonnegative"):
        raise ValueError(f"variant must be 'signed' or 'nonnegative', got {variant!r}")
    if variant == "nonnegative" and not head.nonnegative:
        raise ValueError("variant 'nonnegative' claimed, but the head has a negative feature")
    fam = head.family
    queries = []
    for x, word in enumerate(fam.S):
        entry = {"token": _bits(word),
                 "features": [_rational_str(v) for v in head.query_features[x]],
                 "bias": _rational_str(head.bias[x])}
        if any(v != 0 for v in head.self_features[x]):
            entry["self_features"] = [_rational_str(v) for v in head.self_features[x]]
            entry["self_value_scale"] = _rational_str(head.self_value_scale[x])
        queries.append(entry)
    keys = [{"token": _bits(fam.tokens[t]), "features": [_rational_str(v) for v in feats]}
            for t, feats in sorted(head.key_features.items())]
    return {
        "format": FORMAT,
        "family": family_spec,
        "variant": variant,
        "construction": construction,
        "rank": head.rank,
        "max_error": _rational_str(head.max_error),
        "model": ("alpha_p(x, z) = <phi_Q(x), phi_K(z)> at key positions and "
                  "<phi_Q(x), self_features(x)> at the query's own position; values v(z) = z "
                  "at key positions and self_value_scale(x) * x at the query's position; "
                  "readout y = <x, o> + bias(x)"),
        "queries": queries,
        "keys": keys,
    }


def write_head_file(path, head: ExactHead, family_spec: dict, variant: str,
                    construction: str) -> Path:
    """Write a head file (compact JSON, one query or key per line)."""
    data = head_to_dict(head, family_spec, variant, construction)
    lines = ["{"]
    items = [(k, v) for k, v in data.items() if k not in ("queries", "keys")]
    for k, v in items:
        lines.append(f"  {json.dumps(k)}: {json.dumps(v)},")
    for name in ("queries", "keys"):
        lines.append(f'  "{name}": [')
        rows = [f"    {json.dumps(e, separators=(',', ':'))}" for e in data[name]]
        lines.append(",\n".join(rows))
        lines.append("  ]," if name == "queries" else "  ]")
    lines.append("}")
    path = _check_path(path)
    if str(path) in ("", ".") or path.is_dir():
        raise ValueError(f"path must name a file, got the folder {str(path)!r}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n")
    except OSError as exc:
        raise ValueError(f"path {str(path)!r}: cannot write the head file there "
                         f"({exc.strerror or exc})") from exc
    return path


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
        raise ValueError(f"{name} must be a list of {r} rationals, got "
                         f"{type(values).__name__} of length "
                         f"{len(values) if isinstance(values, list) else 'n/a'}")
    return [parse_rational(v, f"{name}[{i}]") for i, v in enumerate(values)]


def load_head_file(path):
    """Parse a head file: (data, family, tables). Raises ValueError on malformed content."""
    path = _check_path(path)
    data = read_json_file(path, "head file")
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"path {str(path)!r} must hold a JSON object with format {FORMAT!r}")
    for key in ("family", "variant", "rank", "max_error", "queries", "keys"):
        if key not in data:
            raise ValueError(f"path {str(path)!r} lacks the field {key!r}")
    if data["variant"] not in ("signed", "nonnegative"):
        raise ValueError(f"variant must be 'signed' or 'nonnegative', got {data['variant']!r}")
    r = data["rank"]
    if isinstance(r, bool) or not isinstance(r, int) or not 1 <= r <= MAX_FILE_RANK:
        raise ValueError(f"rank must be an int >= 1 (at most {MAX_FILE_RANK}), got {r!r}")
    parse_rational(data["max_error"], "max_error")
    family = family_from_spec(data["family"])
    m = family.S.shape[1]
    if not isinstance(data["queries"], list) or not isinstance(data["keys"], list):
        raise ValueError("queries and keys must be lists")
    N = len(family.S)
    qrow = {_bits(x): i for i, x in enumerate(family.S)}
    Q = np.full((N, r), Fraction(0), dtype=object)
    self_f = np.full((N, r), Fraction(0), dtype=object)
    scale = np.full(N, Fraction(1), dtype=object)
    bias = np.full(N, Fraction(0), dtype=object)
    seen = set()
    for k, e in enumerate(data["queries"]):
        if not isinstance(e, dict):
            raise ValueError(f"queries[{k}] must be an object")
        tok = _bits(_token(e.get("token"), f"queries[{k}].token", m))
        if tok not in qrow:
            raise ValueError(f"queries[{k}].token {tok} is not a query of the family")
        if tok in seen:
            raise ValueError(f"queries[{k}].token {tok} is listed twice")
        seen.add(tok)
        i = qrow[tok]
        Q[i] = _vector(e.get("features"), f"queries[{k}].features", r)
        bias[i] = parse_rational(e.get("bias"), f"queries[{k}].bias")
        if "self_features" in e:
            self_f[i] = _vector(e["self_features"], f"queries[{k}].self_features", r)
            scale[i] = parse_rational(e.get("self_value_scale"), f"queries[{k}].self_value_scale")
    if len(seen) != N:
        raise ValueError(f"queries must list all {N} queries of the family, got {len(seen)}")
    tid = {_bits(t): k for k, t in enumerate(family.tokens)}
    key_features = {}
    for k, e in enumerate(data["keys"]):
        if not isinstance(e, dict):
            raise ValueError(f"keys[{k}] must be an object")
        tok = _bits(_token(e.get("token"), f"keys[{k}].token", m))
        if tok not in tid:
            raise ValueError(f"keys[{k}].token {tok} does not occur in the family")
        if tid[tok] in key_features:
            raise ValueError(f"keys[{k}].token {tok} is listed twice")
        key_features[tid[tok]] = tuple(_vector(e.get("features"), f"keys[{k}].features", r))
    return data, family, (Q, key_features, self_f, scale, bias)


def verify_head_file(path) -> HeadReport:
    """Rebuild the family from its definition and re-verify the head from scratch (exact).

    Checks: every key token of the family has features; for a 'nonnegative' file every
    feature is >= 0; every attention weight >= 0 and every denominator > 0 on every input;
    exact max error < 1/2 and equal to the claimed one; the claimed rank equals the feature
    length. Returns a HeadReport (passed False with the reasons); malformed files raise
    ValueError.
    """
    data, family, (Q, key_features, self_f, scale, bias) = load_head_file(path)
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
    q = family.query_position
    key_ids = set(np.delete(family.token_ids, q, axis=1).ravel().tolist())
    missing = sorted(key_ids - set(key_features))
    if missing:
        problems.append(f"{len(missing)} key tokens of the family have no features")
    extra = sorted(set(key_features) - key_ids)
    if extra:
        problems.append(f"{len(extra)} listed key tokens never occur at a key position")
    if data["variant"] == "nonnegative":
        tables = [Q.ravel(), self_f.ravel()] + [np.asarray(v, dtype=object)
                                                 for v in key_features.values()]
        if any(v < 0 for t in tables for v in t):
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
    totals = alpha.sum(axis=-1)
    if any(t <= 0 for t in totals):
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
    ids = sorted(key_features)
    table = [[sum((a * b for a, b in zip(Q[x], key_features[t], strict=True)), Fraction(0))
              for t in ids] for x in range(len(Q))]
    report.kernel_rank = exact_rank(table)
    report.passed = not problems
    return report


def read_head_claims(path) -> dict:
    """The claims of a head file without re-verifying it (for tables and figures; the tests
    and :func:`verify_head_file` do the checking): family spec, variant, rank, exact max
    error and how the head was made."""
    path = _check_path(path)
    data = read_json_file(path, "head file")
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"path {str(path)!r} must hold a JSON object with format {FORMAT!r}")
    missing = [k for k in ("family", "variant", "rank", "max_error") if k not in data]
    if missing or isinstance(data["rank"], bool) or not isinstance(data["rank"], int):
        raise ValueError(f"path {str(path)!r}: a head file needs the fields family, variant, "
                         f"rank (an int) and max_error; missing {missing}")
    return {"path": str(path), "family": data["family"], "variant": data["variant"],
            "rank": int(data["rank"]), "max_error": parse_rational(data["max_error"],
                                                                   "max_error"),
            "construction": data.get("construction", "")}


def main(argv=None) -> int:
    """Verify each head file given: one line per file with its rank and exact max error;
    exit status 0 if all pass, 2 (one line per failing file on stderr) otherwise."""
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
            report = verify_head_file(p)
        except (ValueError, TypeError, KeyError, OSError) as exc:
            print(f"{p}: not a valid head file: {exc}", file=sys.stderr)
            ok = False
            continue
        if report.passed:
            print(report.summary())
        else:
            print(report.summary(), file=sys.stderr)
            ok = False
    return 0 if ok else 2


if __name__ == "__main__":
    sys.exit(main())
