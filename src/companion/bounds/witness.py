"""Theorem E made concrete (chapter 3, ``thm-exponential-rank``; chapter 6 trains on it): the
witness family F(S), per query x the pure sequences on the chain keys and every arrangement of
each chain link, and its certificate; error < 1/2 on F(S) forces rank >= the bound."""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction
from types import MappingProxyType

import numpy as np

from companion.bounds.amplification import chain_table, link_factor
from companion.bounds.codes import check_code
from companion.bounds.rank_bounds import (
    RankLowerBound,
    check_rank_bound_input,
    rank_bound_from_rhos,
)
from companion.checks import (
    check_eps,
    check_exact_array,
    check_instance,
    check_int,
    check_length,
    check_tokens,
)
from companion.core.attention import KernelAttentionHead, kernel_attention, kernel_weights
from companion.core.exact import exact_max_error
from companion.core.task import check_convention, query_index, query_target, token_index

__all__ = ["witness_family", "verify_certificate", "without_rows", "certificate_error",
           "max_error_exact", "kernel_ratio_matrix", "ratio_matrix_facts"]

Token = tuple[int, ...]

#: Largest family witness_family builds (beyond it the exact checks become slow).
MAX_FAMILY_SEQUENCES = 200_000


@dataclass(frozen=True, eq=False)
class Certificate:
    """Theorem E's certificate in raw tokens: chains[(i, j)] the keys complement(S[i]), ...,
    complement(S[j]), gaps[(i, j)] their overlap increments with S[i], rho[(i, j)] its value."""

    S: tuple[Token, ...]
    n: int
    eps: Fraction
    chains: MappingProxyType
    gaps: MappingProxyType
    rho: MappingProxyType
    bound: RankLowerBound

    @property
    def integer_bound(self) -> int:
        """The integer consequence: r >= the larger of ceil(Theorem E) and ceil(Lemma D')."""
        return self.bound.rank


@dataclass(frozen=True)
class FamilyLink:
    """One certificate link in the family: token ids of its better / worse key, the rows of its
    arrangements (one `better`, n-2 `worse`) and of its two pure sequences."""

    query: int
    better: int
    worse: int
    gap: int
    factor: Fraction
    mixed_rows: tuple[int, ...]
    pure_rows: tuple[int, int]


@dataclass(frozen=True, eq=False)
class WitnessFamily:
    """The family F(S): sequences (N, n, m), targets (N,), tokens (T, m), token_ids (N, n),
    query_ids (N,) (index into S of each row's query), kinds (N,) 'pure' / 'mixed'."""

    S: np.ndarray
    n: int
    eps: Fraction
    convention: str
    query_position: int
    sequences: np.ndarray
    targets: np.ndarray
    tokens: np.ndarray
    token_ids: np.ndarray
    query_ids: np.ndarray
    kinds: np.ndarray
    links: tuple[FamilyLink, ...]
    certificate: Certificate
    pure_rows: MappingProxyType = field(repr=False)  # (query index, key token id) -> row

    def __len__(self) -> int:
        return len(self.sequences)


def _sequence(query: Token, keys: list[Token], position: int) -> list[Token]:
    return [*keys[:position], query, *keys[position:]]


def _plan(S: np.ndarray, n: int, eps: Fraction):
    """Per query: the chain (keys, gaps) of every pair, the pure keys and the links used."""
    w = int(S[0].sum())
    comp = [tuple(r) for r in (1 - S).tolist()]
    gram = (S @ S.T).tolist()
    chains, gaps, rho = {}, {}, {}
    pure_keys: list[list[Token]] = []
    links: list[list[tuple[Token, Token, int]]] = []
    for i, x in enumerate(S):
        level_keys: dict[int, Token] = {0: comp[i]}  # chain keys shared by all pairs of x
        keys: dict[Token, int] = {comp[i]: 0}  # key -> overlap with x
        used: dict[tuple[Token, Token], int] = {}
        for j in range(len(S)):
            if j == i:
                continue
            G = w - gram[i][j]
            chain_gaps = chain_table(n, eps).chain(G)  # the DP tables are cached
            levels = np.cumsum((0,) + chain_gaps).tolist()
            for lv in levels[1:-1]:
                if lv not in level_keys:  # overlap lv with x: complement(x) + x's first lv ones
                    z = 1 - x
                    z[np.flatnonzero(x)[:lv]] = 1
                    level_keys[lv] = tuple(z.tolist())
            tokens = [level_keys[lv] for lv in levels[:-1]] + [comp[j]]
            chains[(i, j)] = tuple(tokens)
            gaps[(i, j)] = chain_gaps
            rho[(i, j)] = chain_table(n, eps).rho(G)  # the product over chain_gaps
            for t, lv in zip(tokens, levels, strict=True):
                keys[t] = lv
            for a, b, g in zip(tokens, tokens[1:], chain_gaps, strict=False):
                used[(a, b)] = g
        pure_keys.append(sorted(keys, key=lambda t: (keys[t], t)))
        links.append([(a, b, g) for (a, b), g in used.items()])
    return chains, gaps, rho, pure_keys, links


def family_size(S, n: int = 3, eps=Fraction(1, 2)) -> int:
    """Number of sequences witness_family(S, n, eps) builds (without building it)."""
    *_, pure_keys, links = _plan(np.asarray(S, dtype=np.int64), n, Fraction(eps))
    return sum(len(k) for k in pure_keys) + (n - 1) * sum(len(v) for v in links)


def witness_family(S, n: int = 3, eps=Fraction(1, 2), convention: str = "bidirectional",
                   max_sequences: int = MAX_FAMILY_SEQUENCES) -> WitnessFamily:
    """The family F(S) of Theorem E with its certificate (best chains, exact bound), for a
    constant-weight code S whose every gap admits a chain with rho >= 1."""
    arr = check_rank_bound_input(S, n, eps)[0]
    n, eps = check_length(n), check_eps(eps)
    check_convention(convention)
    check_int(max_sequences, "max_sequences")
    q = query_index(n, convention)
    total = family_size(arr, n, eps)
    if total > max_sequences:
        raise ValueError(f"the witness family of this S has {total} sequences, above "
                         f"max_sequences={max_sequences}; use a smaller S or raise max_sequences")
    chains, gaps, rho, pure_keys, links = _plan(arr, n, eps)
    token_index: dict[Token, int] = {}

    def tid(t: Token) -> int:
        return token_index.setdefault(t, len(token_index))

    rows, query_ids, kinds = [], [], []
    pure_rows: dict[tuple[int, int], int] = {}
    family_links = []

    def add(keys: list[Token], kind: str) -> int:  # a row with query xt = S[i]
        rows.append(_sequence(xt, keys, q))
        query_ids.append(i)
        kinds.append(kind)
        return len(rows) - 1

    for i, x in enumerate(arr):
        xt = tuple(x.tolist())
        tid(xt)
        for z in pure_keys[i]:
            pure_rows[(i, tid(z))] = add([z] * (n - 1), "pure")
        for better, worse, g in links[i]:
            mixed = [add([worse] * p + [better] + [worse] * (n - 2 - p), "mixed")
                     for p in range(n - 1)]  # the single better copy at key slot p
            family_links.append(FamilyLink(
                query=i, better=tid(better), worse=tid(worse), gap=g,
                factor=link_factor(g, n, eps), mixed_rows=tuple(mixed),
                pure_rows=(pure_rows[(i, tid(better))], pure_rows[(i, tid(worse))])))
    sequences = np.asarray(rows, dtype=np.int64)
    certificate = Certificate(
        S=tuple(tuple(r.tolist()) for r in arr), n=n, eps=eps,
        chains=MappingProxyType(chains), gaps=MappingProxyType(gaps),
        rho=MappingProxyType(rho), bound=rank_bound_from_rhos(len(arr), Counter(rho.values())))
    return WitnessFamily(
        S=arr, n=n, eps=eps, convention=convention, query_position=q, sequences=sequences,
        targets=query_target(sequences, convention),
        tokens=np.asarray(list(token_index), dtype=np.int64),
        token_ids=np.asarray([[token_index[t] for t in seq] for seq in rows], dtype=np.int64),
        query_ids=np.asarray(query_ids, dtype=np.int64), kinds=np.asarray(kinds),
        links=tuple(family_links), certificate=certificate, pure_rows=MappingProxyType(pure_rows))


def sequence_lookup(family: WitnessFamily):
    """has(query, keys): whether the family holds the sequence with `query` at its query
    position and `keys` (n - 1 tokens) at the others, in order."""
    present = {seq.tobytes() for seq in np.asarray(family.sequences, dtype=np.int64)}
    q = family.query_position

    def has(query, keys) -> bool:
        return np.asarray(_sequence(query, list(keys), q), dtype=np.int64).tobytes() in present

    return has


def walk_ladder(S: np.ndarray, i: int, j: int, chain, n: int, eps: Fraction,
                has) -> tuple[tuple[int, ...], Fraction]:
    """The one check of a ladder (certificates in memory and in files alike): keys `chain`
    from complement(S[i]) to complement(S[j]) with overlaps rising, every link of factor
    c > 0 with its pure sequences and all arrangements of its mixed one in the family
    (`has`, :func:`sequence_lookup`), rho >= 1. Returns (gaps, rho); ValueError names a fault."""
    x, pair = S[i], f"pair (x=S[{i}], y=S[{j}])"
    chain = np.asarray(chain, dtype=np.int64)
    if chain.ndim != 2 or len(chain) < 2 or chain.shape[1] != S.shape[1]:
        raise ValueError(f"the ladder of {pair} must hold >= 2 keys of width m")
    if not np.array_equal(chain[0], 1 - x) or not np.array_equal(chain[-1], 1 - S[j]):
        raise ValueError(f"the ladder of {pair} must run from complement(x) to complement(y)")
    levels = chain @ x
    gaps = np.diff(levels)
    if np.any(gaps < 1):
        raise ValueError(f"the ladder of {pair}: overlaps with x {levels.tolist()} must "
                         "increase strictly")
    value = Fraction(1)
    for a, b, g in zip(chain, chain[1:], gaps.tolist(), strict=False):
        c = link_factor(int(g), n, eps)
        if c <= 0:
            raise ValueError(f"a link of gap {g} in the ladder of {pair} has factor c <= 0: it "
                             "proves nothing and cannot be chained")
        value *= c
        if not (has(x, [a] * (n - 1)) and has(x, [b] * (n - 1))):
            raise ValueError(f"the family lacks the pure sequence on a ladder key of {pair}")
        for p in range(n - 1):
            if not has(x, [b] * p + [a] + [b] * (n - 2 - p)):
                raise ValueError(f"the family lacks the mixed sequence (arrangement {p}) of a "
                                 f"link of gap {g} for {pair}")
    if value < 1:
        raise ValueError(f"rho for {pair} is {value} < 1: proves no ratio")
    return tuple(gaps.tolist()), value


def verify_certificate(certificate: Certificate, family: WitnessFamily) -> RankLowerBound:
    """Re-verify a certificate against a family from scratch (overlaps, gaps, link factors, rho,
    every link's sequences and targets, the bound): the bound, or a ValueError naming a fault."""
    check_instance(certificate, "certificate", Certificate)
    check_instance(family, "family", WitnessFamily)
    S, w = check_code(np.asarray(certificate.S, dtype=np.int64), "certificate.S")
    n, eps = check_length(certificate.n), check_eps(certificate.eps)
    seqs = check_tokens(family.sequences, "family.sequences", min_ndim=3)
    if seqs.shape[1:] != (n, S.shape[1]):
        raise ValueError(f"family.sequences must have shape (N, n={n}, m={S.shape[1]}), got "
                         f"{seqs.shape}")
    check_convention(family.convention)
    q = query_index(n, family.convention)
    if family.query_position != q:
        raise ValueError(f"family.query_position is {family.query_position}, but the "
                         f"{family.convention} convention puts the query at {q}")
    targets, true_targets = np.asarray(family.targets), query_target(seqs, family.convention)
    if targets.shape != (len(seqs),):
        raise ValueError(f"family.targets must have shape ({len(seqs)},), got {targets.shape}")
    wrong = np.flatnonzero(targets != true_targets)
    if len(wrong):
        raise ValueError(f"family.targets is wrong at row {wrong[0]}: {targets[wrong[0]]} != "
                         f"min-IP target {true_targets[wrong[0]]}")
    has = sequence_lookup(family)
    rho_counts: Counter = Counter()
    for i, j in itertools.permutations(range(len(S)), 2):
        pair = f"pair (x=S[{i}], y=S[{j}])"
        if (i, j) not in certificate.chains or (i, j) not in certificate.rho:
            raise ValueError(f"certificate has no chain for {pair}")
        gaps, value = walk_ladder(S, i, j, certificate.chains[(i, j)], n, eps, has)
        if gaps != tuple(certificate.gaps.get((i, j), ())):
            raise ValueError(f"certificate.gaps for {pair} are {certificate.gaps.get((i, j))}"
                             f", recomputed {gaps}")
        if value != certificate.rho[(i, j)]:
            raise ValueError(f"certificate.rho for {pair} is {certificate.rho[(i, j)]}, "
                             f"recomputed {value}")
        rho_counts[value] += 1
    bound = rank_bound_from_rhos(len(S), dict(rho_counts))
    if bound != certificate.bound:
        moved = [f"{f.name} {getattr(certificate.bound, f.name)} (recomputed "
                 f"{getattr(bound, f.name)})" for f in dataclasses.fields(bound)
                 if getattr(certificate.bound, f.name, None) != getattr(bound, f.name)]
        raise ValueError("certificate.bound differs: " + ", ".join(moved))
    return bound


def without_rows(family: WitnessFamily, rows) -> WitnessFamily:
    """The family without `rows` (certificate and links kept): a tampering to be rejected."""
    check_instance(family, "family", WitnessFamily)
    arr = check_exact_array(rows, "rows")
    if arr.ndim > 1:
        raise ValueError(f"rows must be an int or a 1-d sequence of row indices, got shape "
                         f"{arr.shape}")
    rows = [check_int(v, "rows", 0, len(family) - 1) for v in arr.ravel().tolist()]
    keep = np.delete(np.arange(len(family)), np.asarray(rows, dtype=np.int64))
    return dataclasses.replace(family, sequences=family.sequences[keep],
                               targets=family.targets[keep], token_ids=family.token_ids[keep],
                               query_ids=family.query_ids[keep], kinds=family.kinds[keep])


def certificate_error(certificate: Certificate, family: WitnessFamily) -> str | None:
    """The reason :func:`verify_certificate` rejects the pair, or None if it accepts it."""
    try:
        verify_certificate(certificate, family)
    except ValueError as err:
        return str(err)
    return None


def max_error_exact(head: KernelAttentionHead, family: WitnessFamily) -> Fraction:
    """max over the family of |y(X) - t(X)|, computed exactly (Fractions)."""
    check_instance(family, "family", WitnessFamily)
    y = kernel_attention(head, family.sequences, family.convention, exact=True)
    return exact_max_error(y, family.targets)


def kernel_ratio_matrix(head: KernelAttentionHead, family: WitnessFamily, exact: bool = False):
    """M[x,y] = K(x, complement y) / K(x, complement x), K the weight on the key positions of
    the pure sequence; Theorem E's proof shows 0 <= M[x,y] <= 1/rho_xy."""
    check_instance(head, "head", KernelAttentionHead)
    check_instance(family, "family", WitnessFamily)
    alpha = kernel_weights(head, family.sequences, family.convention, exact=exact)
    keys = np.delete(alpha, family.query_position, axis=-1).sum(axis=-1)
    S = family.S
    index = token_index(family.tokens)
    comp_ids = [index[(1 - x).tobytes()] for x in S]
    M = np.empty((len(S), len(S)), dtype=object if exact else np.float64)
    for i in range(len(S)):
        row = [keys[family.pure_rows[(i, c)]] for c in comp_ids]
        if row[i] == 0:
            raise ValueError(f"K(x, complement x) = 0 for x = S[{i}]: the head cannot solve F(S)")
        for j, v in enumerate(row):
            M[i, j] = Fraction(v) / Fraction(row[i]) if exact else v / row[i]
    return M


def ratio_matrix_facts(head: KernelAttentionHead, family: WitnessFamily) -> tuple[float, int]:
    """Theorem E's two facts on a head's ratio matrix M (chapter 6, float64): max_{x != y}
    M[x,y] rho_xy (<= 1 at error < 1/2) and M's numerical rank (singular values > 1e-6 top)."""
    M = kernel_ratio_matrix(head, family)
    rho = family.certificate.rho
    worst = max(M[i, j] * float(rho[(i, j)])
                for i in range(len(M)) for j in range(len(M)) if i != j)
    sv = np.linalg.svd(M, compute_uv=False)
    return worst, int((sv > 1e-6 * sv[0]).sum())
