"""Theorem E made concrete: the witness family F(S), its certificate and an exact realisation.

For each query x in S the family holds the pure sequences (x, z, ..., z) on the complement
x-bar, on the chain keys and on every y-bar (y != x), and every arrangement of the mixed
sequences (one copy of the better key z, n-2 copies of the worse key z') of every chain link
the certificate uses. Any NKA head with error < 1/2 on F(S) has rank >= the certified bound.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction
from types import MappingProxyType

import numpy as np

from .amplification import best_chain, link_factor
from .attention import KernelAttentionHead, kernel_attention
from .codes import check_code, paley_hadamard_code
from .gap_domination import check_eps, check_length
from .rank_bounds import RankLowerBound, check_rank_bound_input, rank_bound_from_rhos
from .task import check_convention, check_tokens, query_index, query_target

Token = tuple[int, ...]

#: Largest family witness_family builds (beyond it the exact checks become slow).
MAX_FAMILY_SEQUENCES = 200_000


@dataclass(frozen=True, eq=False)
class Certificate:
    """What Theorem E needs, in raw tokens so it can be re-checked from scratch.

    chains[(i, j)]: the keys z_0 = complement(S[i]), ..., z_k = complement(S[j]) of the chain
    for query S[i] and column S[j]; gaps[(i, j)] their overlap increments with S[i];
    rho[(i, j)] = prod max(c(g), 0) over the chain; the bounds as in RankLowerBound.
    """

    S: tuple[Token, ...]
    n: int
    eps: Fraction
    chains: MappingProxyType
    gaps: MappingProxyType
    rho: MappingProxyType
    bound: RankLowerBound

    @property
    def exact_bound(self) -> Fraction:
        """Theorem E: |S|^2 / sum_{x,y} rho_xy^-2."""
        return self.bound.trace_bound

    @property
    def integer_bound(self) -> int:
        """The integer consequence: r >= the larger of ceil(Theorem E) and ceil(Lemma D')."""
        return self.bound.rank


@dataclass(frozen=True)
class FamilyLink:
    """One chain link used by the certificate, located in the family.

    better/worse: token ids (into WitnessFamily.tokens) of the keys with the lower/higher
    overlap with the query; mixed_rows: the rows of all arrangements of one `better` and n-2
    `worse` copies; pure_rows: rows of the pure sequences on (better, worse).
    """

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


def chain_key(x: np.ndarray, level: int) -> np.ndarray:
    """The key with overlap `level` with x: the complement of x plus x's first `level` ones."""
    z = 1 - x
    ones = np.flatnonzero(x)
    if not 0 <= level <= len(ones):
        raise ValueError(f"level must be an int in [0, |x|] = [0, {len(ones)}], got {level}")
    z[ones[:level]] = 1
    return z


def _sequence(query: Token, keys: list[Token], position: int) -> list[Token]:
    seq = list(keys)
    seq.insert(position, query)
    return seq


def _plan(S: np.ndarray, n: int, eps: Fraction):
    """Per query: the chain (keys, gaps) of every pair, the pure keys and the links used."""
    w = int(S[0].sum())
    comp = [tuple(r) for r in (1 - S).tolist()]
    gram = (S @ S.T).tolist()
    chains, gaps, rho = {}, {}, {}
    pure_keys: list[list[Token]] = []
    links: list[list[tuple[Token, Token, int]]] = []
    factor_cache: dict[tuple[int, ...], Fraction] = {}
    chain_cache: dict[int, tuple[int, ...]] = {}
    for i, x in enumerate(S):
        level_keys: dict[int, Token] = {0: comp[i]}  # chain keys shared by all pairs of x
        keys: dict[Token, int] = {comp[i]: 0}  # key -> overlap with x
        used: dict[tuple[Token, Token], int] = {}
        for j in range(len(S)):
            if j == i:
                continue
            G = w - gram[i][j]
            if G not in chain_cache:
                chain_cache[G] = best_chain(G, n, eps)
            chain_gaps = chain_cache[G]
            levels = np.cumsum((0,) + chain_gaps).tolist()
            for lv in levels[1:-1]:
                if lv not in level_keys:
                    level_keys[lv] = tuple(chain_key(x, lv).tolist())
            tokens = [level_keys[lv] for lv in levels[:-1]] + [comp[j]]
            chains[(i, j)] = tuple(tokens)
            gaps[(i, j)] = chain_gaps
            if chain_gaps not in factor_cache:
                factor_cache[chain_gaps] = math.prod(
                    (link_factor(g, n, eps) for g in chain_gaps), start=Fraction(1))
            rho[(i, j)] = factor_cache[chain_gaps]
            for t, lv in zip(tokens, levels, strict=True):
                keys[t] = lv
            for a, b, g in zip(tokens, tokens[1:], chain_gaps, strict=False):
                used[(a, b)] = g
        pure_keys.append(sorted(keys, key=lambda t: (keys[t], t)))
        links.append([(a, b, g) for (a, b), g in used.items()])
    return chains, gaps, rho, pure_keys, links


def family_size(S, n: int = 3, eps=Fraction(1, 2)) -> int:
    """Number of sequences witness_family(S, n, eps) builds (without building it)."""
    arr, *_ = check_rank_bound_input(S, n, eps)
    n, eps = check_length(n), check_eps(eps)
    *_, pure_keys, links = _plan(arr, n, eps)
    return sum(len(k) for k in pure_keys) + (n - 1) * sum(len(v) for v in links)


def witness_family(S, n: int = 3, eps=Fraction(1, 2), convention: str = "bidirectional",
                   max_sequences: int = MAX_FAMILY_SEQUENCES) -> WitnessFamily:
    """The family F(S) of Theorem E with its certificate (best chains, exact bound).

    S: constant-weight code with every pairwise gap G_xy = w - <x,y> admitting a chain with
    rho >= 1; n >= 3 the sequence length; eps in (0, 1/2]; convention 'bidirectional' (query
    at position 0) or 'causal' (query at position n-1).
    """
    arr, w, _, _ = check_rank_bound_input(S, n, eps)
    n, eps = check_length(n), check_eps(eps)
    check_convention(convention)
    if isinstance(max_sequences, bool) or not isinstance(max_sequences, (int, np.integer)):
        raise TypeError(f"max_sequences must be an int, got {type(max_sequences).__name__}")
    q = query_index(n, convention)
    chains, gaps, rho, pure_keys, links = _plan(arr, n, eps)
    total = sum(len(k) for k in pure_keys) + (n - 1) * sum(len(v) for v in links)
    if total > max_sequences:
        raise ValueError(
            f"the witness family of this S has {total} sequences, above max_sequences="
            f"{max_sequences}; use a smaller S or raise max_sequences"
        )
    token_index: dict[Token, int] = {}

    def tid(t: Token) -> int:
        return token_index.setdefault(t, len(token_index))

    rows, query_ids, kinds = [], [], []
    pure_rows: dict[tuple[int, int], int] = {}
    family_links = []
    for i, x in enumerate(arr):
        xt = tuple(x.tolist())
        tid(xt)
        for z in pure_keys[i]:
            pure_rows[(i, tid(z))] = len(rows)
            rows.append(_sequence(xt, [z] * (n - 1), q))
            query_ids.append(i)
            kinds.append("pure")
        for better, worse, g in links[i]:
            mixed = []
            for p in range(n - 1):  # the single better copy at key slot p, n-2 worse copies
                keys = [worse] * (n - 1)
                keys[p] = better
                mixed.append(len(rows))
                rows.append(_sequence(xt, keys, q))
                query_ids.append(i)
                kinds.append("mixed")
            family_links.append(FamilyLink(
                query=i, better=tid(better), worse=tid(worse), gap=g,
                factor=link_factor(g, n, eps), mixed_rows=tuple(mixed),
                pure_rows=(pure_rows[(i, tid(better))], pure_rows[(i, tid(worse))])))
    sequences = np.asarray(rows, dtype=np.int64)
    tokens = np.asarray(list(token_index), dtype=np.int64)
    token_ids = np.asarray([[token_index[t] for t in seq] for seq in rows], dtype=np.int64)
    targets = query_target(sequences, convention)
    rho_counts = Counter(rho.values())
    certificate = Certificate(
        S=tuple(tuple(r.tolist()) for r in arr), n=n, eps=eps,
        chains=MappingProxyType(chains), gaps=MappingProxyType(gaps),
        rho=MappingProxyType(rho), bound=rank_bound_from_rhos(len(arr), dict(rho_counts)))
    return WitnessFamily(
        S=arr, n=n, eps=eps, convention=convention, query_position=q, sequences=sequences,
        targets=targets, tokens=tokens, token_ids=token_ids,
        query_ids=np.asarray(query_ids, dtype=np.int64), kinds=np.asarray(kinds),
        links=tuple(family_links), certificate=certificate,
        pure_rows=MappingProxyType(pure_rows))


def verify_certificate(certificate: Certificate, family: WitnessFamily) -> RankLowerBound:
    """Re-verify a certificate against a family from scratch; return the recomputed bound.

    Recomputes every overlap, gap, link factor and rho, checks that every link's pure and
    mixed sequences (all arrangements) are in the family with their Min-IP targets, and
    recomputes the bound. Raises ValueError naming the first thing that is wrong.
    """
    if not isinstance(certificate, Certificate):
        raise TypeError(f"certificate must be a Certificate, got {type(certificate).__name__}")
    if not isinstance(family, WitnessFamily):
        raise TypeError(f"family must be a WitnessFamily, got {type(family).__name__}")
    S, w = check_code(np.asarray(certificate.S, dtype=np.int64), "certificate.S")
    n, eps = check_length(certificate.n), check_eps(certificate.eps)
    seqs = check_tokens(family.sequences, "family.sequences", min_ndim=3)
    if seqs.ndim != 3 or seqs.shape[1] != n or seqs.shape[2] != S.shape[1]:
        raise ValueError(
            f"family.sequences must have shape (N, n={n}, m={S.shape[1]}), got {seqs.shape}")
    check_convention(family.convention)
    q = query_index(n, family.convention)
    if family.query_position != q:
        raise ValueError(f"family.query_position is {family.query_position}, but the "
                         f"{family.convention} convention puts the query at {q}")
    targets = np.asarray(family.targets)
    if targets.shape != (len(seqs),):
        raise ValueError(f"family.targets must have shape ({len(seqs)},), got {targets.shape}")
    true_targets = query_target(seqs, family.convention)
    wrong = np.flatnonzero(targets != true_targets)
    if len(wrong):
        raise ValueError(f"family.targets is wrong at row {wrong[0]}: {targets[wrong[0]]} != "
                         f"min-IP target {true_targets[wrong[0]]}")
    present = {seq.tobytes() for seq in seqs}

    def require(query: np.ndarray, keys: list[np.ndarray], what: str) -> None:
        seq = np.asarray(_sequence(query, keys, q), dtype=np.int64)
        if seq.tobytes() not in present:
            raise ValueError(f"the family lacks the {what}")

    comp = 1 - S
    rho_counts: Counter = Counter()
    for i, x in enumerate(S):
        for j in range(len(S)):
            if j == i:
                continue
            pair = f"pair (x=S[{i}], y=S[{j}])"
            if (i, j) not in certificate.chains or (i, j) not in certificate.rho:
                raise ValueError(f"certificate has no chain for {pair}")
            chain = np.asarray(certificate.chains[(i, j)], dtype=np.int64)
            if chain.ndim != 2 or len(chain) < 2 or chain.shape[1] != S.shape[1]:
                raise ValueError(f"certificate.chains for {pair} must hold >= 2 keys of width m")
            if not np.array_equal(chain[0], comp[i]) or not np.array_equal(chain[-1], comp[j]):
                raise ValueError(f"certificate.chains for {pair} must run from complement(x) "
                                 "to complement(y)")
            levels = chain @ x
            gaps = np.diff(levels)
            if np.any(gaps < 1):
                raise ValueError(f"certificate.chains for {pair}: overlaps with x {levels.tolist()}"
                                 " must increase strictly")
            if tuple(gaps.tolist()) != tuple(certificate.gaps.get((i, j), ())):
                raise ValueError(f"certificate.gaps for {pair} are {certificate.gaps.get((i, j))}"
                                 f", recomputed {tuple(gaps.tolist())}")
            value = Fraction(1)
            for a, b, g in zip(chain, chain[1:], gaps.tolist(), strict=False):
                c = link_factor(int(g), n, eps)
                if c <= 0:
                    raise ValueError(f"certificate link of gap {g} for {pair} has factor c <= 0:"
                                     " it proves nothing and cannot be chained")
                value *= c
                require(x, [a] * (n - 1), f"pure sequence on a chain key of {pair}")
                require(x, [b] * (n - 1), f"pure sequence on a chain key of {pair}")
                for p in range(n - 1):
                    keys = [b] * (n - 1)
                    keys[p] = a
                    require(x, keys, f"mixed sequence (arrangement {p}) of a link of gap {g} "
                                     f"for {pair}")
            if value != certificate.rho[(i, j)]:
                raise ValueError(f"certificate.rho for {pair} is {certificate.rho[(i, j)]}, "
                                 f"recomputed {value}")
            if value < 1:
                raise ValueError(f"certificate.rho for {pair} is {value} < 1: proves no ratio")
            rho_counts[value] += 1
    bound = rank_bound_from_rhos(len(S), dict(rho_counts))
    if bound != certificate.bound:
        raise ValueError(f"certificate.bound is {certificate.bound}, recomputed {bound}")
    return bound



def _one_hot(tokens: np.ndarray, index: dict, r: int) -> np.ndarray:
    """Indicator features e_index[token] (a zero row for tokens outside `index`): (..., r)."""
    out = np.zeros(tokens.shape[:-1] + (r,), dtype=np.int64)
    view = out.reshape(-1, r)
    for row, tok in enumerate(tokens.reshape(-1, tokens.shape[-1])):
        col = index.get(tok.tobytes())
        if col is not None:
            view[row, col] = 1
    return out

def indicator_head(family: WitnessFamily, base: int | None = None) -> KernelAttentionHead:
    """The trivial exact realisation: one indicator feature per distinct key token.

    phi_K(z) = e_z at key positions and 0 at the query's own position; phi_Q(x)_z =
    base^-<x,z>, v(z) = z, readout <x, o>. Error on a mixed sequence with gap g is
    (n-2) g / (base^g + n - 2) < 1/2 for base > n - 2; pure sequences are exact.
    """
    if not isinstance(family, WitnessFamily):
        raise TypeError(f"family must be a WitnessFamily, got {type(family).__name__}")
    n, q = family.n, family.query_position
    base = 2 * n if base is None else base
    if isinstance(base, bool) or not isinstance(base, (int, np.integer)) or base <= n - 2:
        raise ValueError(f"base must be an int > n - 2 = {n - 2}, got {base!r}")
    key_ids = sorted(set(family.token_ids[:, [p for p in range(n) if p != q]].ravel().tolist()))
    keys = family.tokens[key_ids]
    index = {k.tobytes(): r for r, k in enumerate(keys)}
    r = len(keys)

    def query_features(x):
        x = np.asarray(x, dtype=np.int64)
        ov = x @ keys.T
        out = np.empty(ov.shape, dtype=object)
        out.reshape(-1)[:] = [Fraction(1, int(base) ** int(v)) for v in ov.ravel()]
        return out

    def key_features(z, p):
        z = np.asarray(z, dtype=np.int64)
        return _one_hot(z, index, r) if p != q else np.zeros(z.shape[:-1] + (r,), np.int64)

    return KernelAttentionHead(
        rank=r, query_features=query_features, key_features=key_features,
        values=lambda z, p: np.asarray(z, dtype=np.int64),
        readout_weights=lambda x: np.asarray(x, dtype=np.int64),
        readout_bias=lambda x: np.zeros(np.shape(x)[:-1], dtype=np.int64))


def max_error_exact(head: KernelAttentionHead, family: WitnessFamily) -> Fraction:
    """max over the family of |y(X) - t(X)|, computed exactly (Fractions)."""
    y = kernel_attention(head, family.sequences, family.convention, exact=True)
    return max(abs(Fraction(v) - int(t)) for v, t in zip(y, family.targets, strict=True))


#: (a, b) of the experiments' witness: the first a Paley rows and the complements of the
#: first b of them. Found by select_paley_witness() (tests re-run the search and compare).
EXPERIMENT_PALEY_SUBSET = (23, 5)


def paley_subset(a: int, b: int, q: int = 23) -> np.ndarray:
    """The first a non-constant Paley rows and the complements of the first b of them."""
    if not (isinstance(a, int) and isinstance(b, int) and 0 <= b <= a <= q and a + b >= 2):
        raise ValueError(f"a, b must be ints with 0 <= b <= a <= q = {q} and a + b >= 2, "
                         f"got a={a!r}, b={b!r}")
    code = paley_hadamard_code(q, complements=True)
    return np.concatenate([code[:a], code[q:q + b]])


def experiment_code_24() -> np.ndarray:
    """The 24-bit query set of the experiments: the Paley (q = 23) subset that
    :func:`select_paley_witness` picks (largest certified bound with 1,000-2,500 sequences)."""
    return paley_subset(*EXPERIMENT_PALEY_SUBSET)


def select_paley_witness(q: int = 23, min_sequences: int = 1000, max_sequences: int = 2500,
                         n: int = 3) -> tuple[tuple[int, int], RankLowerBound, int]:
    """Search the Paley code's subsets {first a rows} + {complements of the first b of them}
    for the largest certified rank bound whose family size lies in [min, max]; ties go to the
    smaller family. Returns ((a, b), bound, family size); see :func:`paley_subset`."""
    best = None
    for a in range(2, q + 1):
        for b in range(0, a + 1):
            S = paley_subset(a, b, q)
            size = family_size(S, n)
            if not min_sequences <= size <= max_sequences:
                continue
            bound = rank_bound_from_rhos(len(S), dict(Counter(_plan(S, n, Fraction(1, 2))[2]
                                                                   .values())))
            key = (bound.rank, bound.sharpened_bound, -size)
            if best is None or key > best[0]:
                best = (key, (a, b), bound, size)
    if best is None:
        raise ValueError(f"no Paley subset has a family size in [{min_sequences}, {max_sequences}]")
    return best[1], best[2], best[3]


def experiment_witness_24(convention: str = "bidirectional") -> WitnessFamily:
    """The witness family the experiments chapter trains on (n = 3, eps = 1/2)."""
    return witness_family(experiment_code_24(), 3, Fraction(1, 2), convention)


def total_weights(head: KernelAttentionHead, family: WitnessFamily, exact: bool = False):
    """D(x;z) on every row: the head's total kernel weight sum_p alpha_p, shape (N,)."""
    from .attention import kernel_weights

    alpha = kernel_weights(head, family.sequences, family.convention, exact=exact)
    return alpha.sum(axis=-1)


def kernel_ratio_matrix(head: KernelAttentionHead, family: WitnessFamily, exact: bool = False):
    """M[x,y] = K(x, complement y) / K(x, complement x), with K the weight on the key
    positions of the pure sequence; Theorem E's proof shows 0 <= M[x,y] <= 1/rho_xy."""
    from .attention import kernel_weights

    alpha = kernel_weights(head, family.sequences, family.convention, exact=exact)
    keys = np.delete(alpha, family.query_position, axis=-1).sum(axis=-1)
    S = family.S
    index = {t.tobytes(): k for k, t in enumerate(family.tokens)}
    comp_ids = [index[(1 - x).astype(np.int64).tobytes()] for x in S]
    M = np.empty((len(S), len(S)), dtype=object if exact else np.float64)
    for i in range(len(S)):
        base = keys[family.pure_rows[(i, comp_ids[i])]]
        if base == 0:
            raise ValueError(f"K(x, complement x) = 0 for x = S[{i}]: the head cannot solve F(S)")
        for j in range(len(S)):
            M[i, j] = (Fraction(keys[family.pure_rows[(i, comp_ids[j])]]) / Fraction(base)
                       if exact else keys[family.pure_rows[(i, comp_ids[j])]] / base)
    return M


def query_indicator_head(family: WitnessFamily, base: int | None = None) -> KernelAttentionHead:
    """An exact realisation of rank |S|: one indicator feature per query of S.

    phi_Q(x) = e_x and phi_K(z)_x = base^-<x,z> at key positions (0 at the query's own
    position): the same kernel as :func:`indicator_head`, so the same error on F(S). Any
    nonnegative kernel table on the |S| queries is realisable this way.
    """
    if not isinstance(family, WitnessFamily):
        raise TypeError(f"family must be a WitnessFamily, got {type(family).__name__}")
    n, q = family.n, family.query_position
    base = 2 * n if base is None else base
    if isinstance(base, bool) or not isinstance(base, (int, np.integer)) or base <= n - 2:
        raise ValueError(f"base must be an int > n - 2 = {n - 2}, got {base!r}")
    S = family.S
    index = {x.tobytes(): i for i, x in enumerate(S)}
    r = len(S)

    def query_features(x):
        return _one_hot(np.asarray(x, dtype=np.int64), index, r)

    def key_features(z, p):
        z = np.asarray(z, dtype=np.int64)
        ov = z @ S.T
        out = np.empty(ov.shape, dtype=object)
        out.reshape(-1)[:] = [Fraction(0) if p == q else Fraction(1, int(base) ** int(v))
                              for v in ov.ravel()]
        return out

    return KernelAttentionHead(
        rank=r, query_features=query_features, key_features=key_features,
        values=lambda z, p: np.asarray(z, dtype=np.int64),
        readout_weights=lambda x: np.asarray(x, dtype=np.int64),
        readout_bias=lambda x: np.zeros(np.shape(x)[:-1], dtype=np.int64))


def spread_query_head(family: WitnessFamily, eta=Fraction(1, 1000),
                      tau=Fraction(1, 10**4)) -> KernelAttentionHead:
    """A hand-built exact head of rank |S| - 1: one-hot query features for all queries but
    one, and the remaining query s spread evenly over all of them.

    Scores are shifted down by delta = 1/2 - eta (readout <x, o> - delta), so a link of gap g
    only needs a weight ratio above l (g - 1 + eta)/(1 - eta) (l = n - 2), just above the
    gap-domination factor. Query k's own column puts weight 1 on its complement, the product
    of 1/A along its ladders on chain keys, tau on single-link keys and c on complement(s);
    the spread query sees the column sums. c must satisfy
    (|S|-1) c > A(G) * (column sum of every other key of s) and c < 1/A(G_ks); raises
    ValueError if no such c (or no query s whose ladders are all single links) exists.
    """
    if not isinstance(family, WitnessFamily):
        raise TypeError(f"family must be a WitnessFamily, got {type(family).__name__}")
    eta, tau = Fraction(eta), Fraction(tau)
    if not (0 < eta < Fraction(1, 2) and 0 < tau < 1):
        raise ValueError(f"eta must lie in (0, 1/2) and tau in (0, 1), got {eta}, {tau}")
    cert, n, q = family.certificate, family.n, family.query_position
    S = np.asarray(cert.S, dtype=np.int64)
    N = len(S)
    delta = Fraction(1, 2) - eta

    def need(g: int) -> Fraction:  # weight ratio that makes a gap-g link exact, plus 0.1%
        return (n - 2) * (g - 1 + eta) / (1 - eta) * Fraction(1001, 1000)

    single = [all(len(cert.gaps[(k, s)]) == 1 and len(cert.gaps[(s, k)]) == 1
                  for k in range(N) if k != s) for s in range(N)]
    if not any(single):
        raise ValueError("spread_query_head needs a query whose ladders are all single links")
    s = max(i for i in range(N) if single[i])
    others = [k for k in range(N) if k != s]
    column = {k: c for c, k in enumerate(others)}
    comp_s = tuple((1 - S[s]).tolist())
    weights: dict[tuple, list] = {}  # key token -> its entries, one per one-hot query

    def entry(token, k, value):
        weights.setdefault(token, [Fraction(0)] * (N - 1))[column[k]] = value

    for k in others:
        for j in range(N):
            if j == k:
                continue
            chain, gaps = cert.chains[(k, j)], cert.gaps[(k, j)]
            entry(chain[0], k, Fraction(1))
            if len(gaps) == 1:
                if chain[-1] != comp_s:
                    entry(chain[-1], k, tau)
                continue
            w = Fraction(1)
            for token, g in zip(chain[1:], gaps, strict=True):
                w /= need(g)
                entry(token, k, w)
    lower = max(need(cert.gaps[(s, j)][0]) * sum(weights[cert.chains[(s, j)][-1]])
                for j in others) / (N - 1)
    upper = min(1 / need(cert.gaps[(k, s)][0]) for k in others)
    if not lower < upper:
        raise ValueError(f"no spread weight c works: need {float(lower):.4f} < c < "
                         f"{float(upper):.4f}")
    c = (lower + upper) / 2
    for k in others:
        entry(comp_s, k, c)
    index = {bytes(np.asarray(t, dtype=np.int64).tobytes()): v for t, v in weights.items()}
    query_col = {S[k].tobytes(): column[k] for k in others}
    spread_key = S[s].tobytes()

    def query_features(x):
        x = np.asarray(x, dtype=np.int64)
        out = np.zeros(x.shape[:-1] + (N - 1,), dtype=np.int64)
        flat, view = x.reshape(-1, x.shape[-1]), out.reshape(-1, N - 1)
        for row, tok in enumerate(flat):
            b = tok.tobytes()
            if b == spread_key:
                view[row, :] = 1
            elif b in query_col:
                view[row, query_col[b]] = 1
        return out

    def key_features(z, p):
        z = np.asarray(z, dtype=np.int64)
        out = np.empty(z.shape[:-1] + (N - 1,), dtype=object)
        flat, view = z.reshape(-1, z.shape[-1]), out.reshape(-1, N - 1)
        zero = [Fraction(0)] * (N - 1)
        for row, tok in enumerate(flat):
            view[row, :] = zero if p == q else index.get(tok.tobytes(), zero)
        return out

    return KernelAttentionHead(
        rank=N - 1, query_features=query_features, key_features=key_features,
        values=lambda z, p: np.asarray(z, dtype=np.int64),
        readout_weights=lambda x: np.asarray(x, dtype=np.int64),
        readout_bias=lambda x: np.full(np.shape(x)[:-1], -delta, dtype=object))
