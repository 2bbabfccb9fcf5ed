"""Theorem G, the precision transcript bound: exact Min-IP on q blocks needs q*log2(s+1) bits
(chapter 5: ``def-transcript-model``, ``thm-transcript``, ``cor-transcript-rank``).

Blocks B_1..B_q of size s and C of size s+1 (m = q*s + s + 1); Bob's queries x_i = 1_{B_i} +
1_C, Alice's key token z inside the blocks, targets t_i = |z n B_i| (all (s+1)^q answer
vectors). A transcript model passes Bob `length` symbols over `alphabet_size` letters: below
(s+1)^q :func:`find_collision` finds a collision; :class:`TightEncoder` meets the bound.
"""

from __future__ import annotations

import abc
import itertools
from collections import Counter
from dataclasses import dataclass

import numpy as np

from companion.checks import (
    check_instance,
    check_int,
    check_int_sequence,
    check_tokens,
)
from companion.core.task import min_ip_targets

__all__ = [
    "answer_vector_count", "bits_needed", "BlockConstruction", "enumerate_answer_vectors",
    "count_transcripts", "find_collision", "find_forced_error", "TightEncoder",
    "OneBitShortEncoder", "verify_exhaustively", "sketch_bits", "smallest_feature_rank",
]

#: Most key tokens 2**(q*s) enumerated (65,536 sequences take well under a second) and most
#: answer vectors (s+1)**q searched, one representative each.
MAX_KEY_TOKENS = 2**16
MAX_ANSWER_VECTORS = 2**20


def answer_vector_count(q: int, s: int) -> int:
    """Number of answer vectors (s+1)**q (q * bits(s + 1) <= 2**24)."""
    q, s = check_int(q, "q", 1), check_int(s, "s", 1)
    if q * (s + 1).bit_length() > 2**24:
        raise ValueError(f"q * bits(s + 1) must be at most 2**24 (the count (s+1)**q has that "
                         f"many bits), got q={q}, s={s}")
    return (s + 1) ** q


def bits_needed(q: int, s: int) -> int:
    """ceil(q*log2(s+1)), computed exactly: the least k with 2**k >= (s+1)**q."""
    q, s = check_int(q, "q", 1), check_int(s, "s", 1)
    if (s + 1) & s == 0:  # s + 1 = 2**j: exactly q*j bits, no big integer needed
        return q * s.bit_length()
    return (answer_vector_count(q, s) - 1).bit_length()


# --------------------------------------------------------------------------- construction


@dataclass(frozen=True)
class BlockConstruction:
    """Blocks B_i = [(i-1)s, is) (i = 1..q), then C = [qs, qs+s+1), in {0,1}^m (0-based)."""

    q: int
    s: int

    def __post_init__(self):  # stored as Python ints: numpy ints would overflow (s+1)**q
        object.__setattr__(self, "q", check_int(self.q, "q", 1))
        object.__setattr__(self, "s", check_int(self.s, "s", 1))

    @property
    def m(self) -> int:
        """Token width m = q*s + s + 1."""
        return self.q * self.s + self.s + 1

    @property
    def n(self) -> int:
        """Sequence length: Alice's token plus q queries."""
        return self.q + 1

    def query_tokens(self) -> np.ndarray:
        """Bob's tokens x_i = 1_{B_i} + 1_C, shape (q, m)."""
        x = np.zeros((self.q, self.m), dtype=np.int64)
        for i in range(self.q):
            x[i, i * self.s:(i + 1) * self.s] = 1
        x[:, self.q * self.s:] = 1
        return x

    def check_key_token(self, z, name: str = "key_token", one: bool = False) -> np.ndarray:
        """z as a 0/1 token of width m (one of them if `one`) inside B_1 u ... u B_q."""
        z = check_tokens(z, name, min_ndim=1)
        if one and z.ndim != 1:
            raise ValueError(f"{name} must be one token of shape (m,), got {z.shape}")
        if z.shape[-1] != self.m:
            raise ValueError(f"{name} must have width m={self.m}, got shape {z.shape}")
        if np.any(z[..., self.q * self.s:]):
            raise ValueError(f"{name} must lie inside the blocks B_1..B_q (no bit of C set)")
        return z

    def sequence(self, z) -> np.ndarray:
        """(z, x_1, ..., x_q): shape (..., q+1, m) for key tokens of shape (..., m)."""
        z = self.check_key_token(z)
        x = np.broadcast_to(self.query_tokens(), z.shape[:-1] + (self.q, self.m))
        return np.concatenate([z[..., None, :], x], axis=-2)

    def answers(self, z) -> np.ndarray:
        """Targets at Bob's positions, t_i = min_j <x_i, x_j>, via task.min_ip_targets: (..., q)."""
        return min_ip_targets(self.sequence(z))[..., 1:]

    def block_counts(self, z) -> np.ndarray:
        """|z n B_i| for i = 1..q, read off the blocks directly: (..., q)."""
        z = self.check_key_token(z)
        return z[..., : self.q * self.s].reshape(z.shape[:-1] + (self.q, self.s)).sum(axis=-1)

    def representative(self, counts) -> np.ndarray:
        """The key token with the first counts[i] coordinates of each B_i set."""
        counts = check_int_sequence(counts, "counts", 0, self.s)
        if len(counts) != self.q:
            raise ValueError(f"counts must be q={self.q} ints, got {len(counts)}")
        z = np.zeros(self.m, dtype=np.int64)
        for i, c in enumerate(counts):
            z[i * self.s: i * self.s + c] = 1
        return z

    def all_key_tokens(self, max_tokens: int = MAX_KEY_TOKENS) -> np.ndarray:
        """Every key token z inside the blocks: shape (2**(q*s), m), at most max_tokens."""
        qs = self.q * self.s
        if 2**qs > check_int(max_tokens, "max_tokens", 1):
            raise ValueError(
                f"enumerating all key tokens needs 2**(q*s) = 2**{qs} tokens, above "
                f"max_tokens={max_tokens}; choose q*s <= {max_tokens.bit_length() - 1}")
        codes = np.arange(2**qs, dtype=np.int64)
        inside = (codes[:, None] >> np.arange(qs - 1, -1, -1)) & 1
        return np.concatenate([inside, np.zeros((2**qs, self.s + 1), np.int64)], axis=1)


def enumerate_answer_vectors(construction: BlockConstruction,
                             max_tokens: int = MAX_KEY_TOKENS) -> Counter:
    """Counter {answer vector at Bob's positions: number of key tokens giving it}."""
    check_instance(construction, "construction", BlockConstruction)
    answers = construction.answers(construction.all_key_tokens(max_tokens))
    return Counter(map(tuple, answers.tolist()))


# ------------------------------------------------------------------- transcript abstraction


class TranscriptModel(abc.ABC):
    """A model whose only channel from Alice to Bob is `length` symbols in
    range(alphabet_size) (``def-transcript-model``): outputs(z) = read(transcript(z))."""

    construction: BlockConstruction

    @property
    @abc.abstractmethod
    def alphabet_size(self) -> int: ...

    @property
    @abc.abstractmethod
    def length(self) -> int: ...

    @abc.abstractmethod
    def transcript(self, key_token) -> tuple[int, ...]: ...

    @abc.abstractmethod
    def read(self, transcript) -> np.ndarray: ...

    def outputs(self, key_token) -> np.ndarray:
        return self.read(self.transcript(key_token))

    def transcript_count_bound(self) -> int:
        """alphabet_size ** length: no more distinct transcripts can occur."""
        return self.alphabet_size ** self.length

    def below_bound(self) -> bool:
        """True when alphabet_size**length < (s+1)**q, so no such model can be exact."""
        c = self.construction
        return self.transcript_count_bound() < answer_vector_count(c.q, c.s)


def check_transcript(model: TranscriptModel, transcript) -> tuple[int, ...]:
    """A transcript of `length` symbols, each an int in range(alphabet_size), as a tuple."""
    if isinstance(transcript, (str, bytes)) or not hasattr(transcript, "__iter__"):
        raise TypeError(f"transcript must be a sequence of ints, got {type(transcript).__name__}")
    # at most length + 1 symbols are read: a huge or endless iterable is refused, not consumed
    t = tuple(itertools.islice(transcript, model.length + 1))
    if len(t) != model.length:
        raise ValueError(f"transcript must have length {model.length}, got {len(t)}")
    return tuple(check_int(sym, "transcript symbols", 0, model.alphabet_size - 1) for sym in t)


def count_transcripts(model: TranscriptModel, key_tokens) -> int:
    """Number of distinct transcripts over the given key tokens (shape (N, m))."""
    z = check_instance(model, "model", TranscriptModel).construction.check_key_token(
        key_tokens, "key_tokens")
    if z.ndim != 2:
        raise ValueError(f"key_tokens must have shape (N, m), got {z.shape}")
    return len({model.transcript(row) for row in z})


@dataclass(frozen=True)
class Collision:
    """Two key tokens with one transcript and different answer vectors, both re-evaluated."""

    key_tokens: tuple[np.ndarray, np.ndarray]
    transcript: tuple[int, ...]
    answers: tuple[tuple[int, ...], tuple[int, ...]]
    outputs: np.ndarray
    predicted: tuple[int, ...]
    errors: tuple[float, float]

    @property
    def wrong_on(self) -> tuple[int, ...]:
        """Indices (0 or 1) of the inputs on which the model is not exact (error >= 1/2)."""
        return tuple(k for k in (0, 1) if self.errors[k] >= 0.5)


def find_collision(model: TranscriptModel, max_vectors: int = MAX_ANSWER_VECTORS):
    """Pigeonhole search over one key token per answer vector: the first :class:`Collision`
    (two answer vectors, one transcript), else None; below the bound one must occur."""
    c = check_instance(model, "model", TranscriptModel).construction
    max_vectors = check_int(max_vectors, "max_vectors", 1)
    guaranteed = model.below_bound()
    if not guaranteed and answer_vector_count(c.q, c.s) > max_vectors:
        raise ValueError(
            f"the model is not below the bound and (s+1)**q = {answer_vector_count(c.q, c.s)} "
            f"exceeds max_vectors={max_vectors}; no exhaustive search attempted")
    seen: dict[tuple[int, ...], tuple[int, ...]] = {}
    limit = model.transcript_count_bound() + 1 if guaranteed else None
    vectors = itertools.product(range(c.s + 1), repeat=c.q)
    for counts in itertools.islice(vectors, limit):
        t = check_transcript(model, model.transcript(c.representative(np.array(counts))))
        if t in seen:
            return _reevaluate(model, seen[t], counts)
        seen[t] = counts
    if guaranteed:
        raise RuntimeError("no collision below the bound: the model's transcript is not "
                           "what Bob's outputs depend on (pigeonhole violated)")
    return None


def _reevaluate(model: TranscriptModel, counts_a, counts_b) -> Collision:
    """Recompute everything about both inputs from scratch and check it is a real collision."""
    c = model.construction
    z = (c.representative(np.array(counts_a)), c.representative(np.array(counts_b)))
    transcripts = [check_transcript(model, model.transcript(zk)) for zk in z]
    outputs = [np.asarray(model.outputs(zk), dtype=np.float64) for zk in z]
    answers = [tuple(c.answers(zk).tolist()) for zk in z]
    if transcripts[0] != transcripts[1]:
        raise RuntimeError("re-evaluation changed a transcript: the model is not deterministic")
    if not np.array_equal(outputs[0], outputs[1]):
        raise RuntimeError("one transcript gave two outputs: Bob's outputs use more than it")
    if answers[0] == answers[1]:
        raise RuntimeError("the colliding inputs have the same answers")
    errors = tuple(float(np.max(np.abs(outputs[0] - np.array(a)))) for a in answers)
    predicted = tuple(np.floor(outputs[0] + 0.5).astype(np.int64).tolist())  # rounding
    return Collision(key_tokens=z, transcript=transcripts[0], answers=tuple(answers),
                     outputs=outputs[0], predicted=predicted, errors=errors)


# ----------------------------------------------------------------------- the tight encoder


class TightEncoder(TranscriptModel):
    """Alice writes N = sum_i |z n B_i| (s+1)^(i-1) in base 2**symbol_bits, Bob reads its base
    s+1 digits: ceil(ceil(q log2(s+1)) / symbol_bits) symbols."""

    def __init__(self, construction: BlockConstruction, symbol_bits: int = 1):
        self.construction = check_instance(construction, "construction", BlockConstruction)
        self.symbol_bits = check_int(symbol_bits, "symbol_bits", 1, 62)

    @property
    def alphabet_size(self) -> int:
        return 2**self.symbol_bits

    @property
    def length(self) -> int:
        k = bits_needed(self.construction.q, self.construction.s)
        return -(-k // self.symbol_bits)

    def transcript(self, key_token) -> tuple[int, ...]:
        base = self.construction.s + 1
        counts = self.construction.block_counts(key_token).tolist()
        number = sum(cnt * base**i for i, cnt in enumerate(counts))
        mask = self.alphabet_size - 1
        return tuple((number >> (self.symbol_bits * j)) & mask for j in range(self.length))

    def read(self, transcript) -> np.ndarray:
        t = check_transcript(self, transcript)
        number = sum(sym << (self.symbol_bits * j) for j, sym in enumerate(t))
        base, digits = self.construction.s + 1, []
        for _ in range(self.construction.q):
            number, digit = divmod(number, base)
            digits.append(digit)
        return np.array(digits, dtype=np.float64)


class OneBitShortEncoder(TightEncoder):
    """The tight code less its most significant bit: one bit below the bound."""

    @property
    def length(self) -> int:
        return bits_needed(self.construction.q, self.construction.s) - 1


def verify_exhaustively(model: TranscriptModel, max_tokens: int = MAX_KEY_TOKENS) -> int:
    """How many key tokens the model is exact on (error < 1/2): all, else AssertionError."""
    c = check_instance(model, "model", TranscriptModel).construction
    tokens = c.all_key_tokens(max_tokens)
    targets = c.answers(tokens)
    for z, t in zip(tokens, targets, strict=True):
        out = np.asarray(model.outputs(z), dtype=np.float64)
        if out.shape != t.shape or not np.max(np.abs(out - t)) < 0.5:
            raise AssertionError(f"wrong on key token {z.tolist()}: output {out}, target {t}")
    return len(tokens)


# ------------------------------------------------------------------------- feature rank


def sketch_bits(L: int, H: int, r: int, d: int, b: int) -> int:
    """Bits in L layers of H b-bit sketches (S, u) with S in R^{r x d}, u in R^r."""
    L, H, r, d, b = (check_int(v, name, 1) for name, v in
                     (("L", L), ("H", H), ("r", r), ("d", d), ("b", b)))
    return L * H * r * (d + 1) * b


def smallest_feature_rank(L: int, H: int, d: int, b: int, q: int, s: int) -> int:
    """Least r >= 1 with L*H*r*(d+1)*b >= q*log2(s+1): ceil(ceil(q log2(s+1)) / (L H (d+1) b))."""
    per_rank = sketch_bits(L, H, 1, d, b)
    return max(1, -(-bits_needed(q, s) // per_rank))


def find_forced_error(model: TranscriptModel, max_vectors: int = MAX_ANSWER_VECTORS):
    """A collision in which the model is right on the first input, hence wrong on the second
    (``cor-forced-error``: a transcript class has one output vector), or None."""
    c = check_instance(model, "model", TranscriptModel).construction
    if answer_vector_count(c.q, c.s) > check_int(max_vectors, "max_vectors", 1):
        raise ValueError(f"(s+1)**q = {answer_vector_count(c.q, c.s)} answer vectors exceeds "
                         f"max_vectors={max_vectors}")
    right: dict[tuple[int, ...], tuple[int, ...]] = {}
    other: dict[tuple[int, ...], tuple[int, ...]] = {}
    for counts in itertools.product(range(c.s + 1), repeat=c.q):
        t = check_transcript(model, model.transcript(c.representative(np.array(counts))))
        out = np.asarray(model.read(t), dtype=np.float64)
        if np.max(np.abs(out - np.array(counts))) < 0.5:
            right.setdefault(t, counts)
        else:
            other.setdefault(t, counts)
        if t in right and t in other:
            collision = _reevaluate(model, right[t], other[t])
            if not (collision.errors[0] < 0.5 <= collision.errors[1]):
                raise RuntimeError("re-evaluation disagrees with the search about who is right")
            return collision
    return None
