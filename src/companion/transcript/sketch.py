"""A b-bit quantised kernel-attention network: the finite-alphabet channel of Theorem G
(chapter 5: ``thm-transcript``, ``cor-transcript-rank``, ``cor-forced-error``).

L layers of H heads (rank r, value width d) on (z, x_1, ..., x_q): per head and layer Alice's
sketch (S_A, u_A) = (phi_K(h_z) v(h_z)^T, phi_K(h_z)), its r*(d+1) entries quantised to b bits,
is all Bob learns of her. Features exp(tanh(W h)) in [1/e, e], values tanh(W h) in [-1, 1]
fix the ranges; the weights are seeded Gaussians (Theorem G holds for every weight).
"""

from __future__ import annotations

import math

import numpy as np

from companion.checks import check_instance, check_int
from companion.transcript.bound import BlockConstruction, TranscriptModel, check_transcript

__all__ = ["QuantisedSketchModel", "CountingSketchModel"]

#: Largest number of bits per sketch entry (float64 resolves about 2**52 levels).
MAX_BITS = 30


def _quantise(values, lo: float, hi: float, bits: int) -> np.ndarray:
    """Codes in {0..2**bits-1} of the nearest of 2**bits evenly spaced levels in [lo, hi]."""
    steps = 2**bits - 1
    codes = np.rint((np.asarray(values, dtype=np.float64) - lo) / (hi - lo) * steps)
    return np.clip(codes, 0, steps).astype(np.int64)


def _dequantise(codes, lo: float, hi: float, bits: int) -> np.ndarray:
    """The levels lo + code*(hi - lo)/(2**bits - 1) of the given codes."""
    return lo + np.asarray(codes).astype(np.float64) * ((hi - lo) / (2**bits - 1))


S_RANGE = (-math.e, math.e)
U_RANGE = (1 / math.e, math.e)


def _features(w, h):
    """phi(h) = exp(tanh(W h)) in [1/e, e], for h of shape (..., width)."""
    return np.exp(np.tanh(h @ w.T))


#: Most random weights of one :class:`QuantisedSketchModel` (its Python lists of per-head
#: matrices; 2**22 float64 entries, 32 MB).
MAX_SKETCH_PARAMETERS = 2**22


class _SketchModel(TranscriptModel):
    """A model whose forward pass returns (Bob's outputs, the b-bit transcript)."""

    bits: int

    @property
    def alphabet_size(self) -> int:
        return 2**self.bits

    def transcript(self, key_token) -> tuple[int, ...]:
        return self.forward(key_token)[1]


class QuantisedSketchModel(_SketchModel):
    """L layers x H heads of b-bit quantised NKA sketches on a :class:`BlockConstruction`.
    Limit: layers * heads * (2 rank + 2 value_dim) * m <= 2**22 (:data:`MAX_SKETCH_PARAMETERS`).
    """

    def __init__(self, construction: BlockConstruction, layers: int = 1, heads: int = 1,
                 rank: int = 1, value_dim: int = 1, bits: int = 1, seed: int = 0):
        self.construction = check_instance(construction, "construction", BlockConstruction)
        self.layers = check_int(layers, "layers", 1)
        self.heads = check_int(heads, "heads", 1)
        self.rank = check_int(rank, "rank", 1)
        self.value_dim = check_int(value_dim, "value_dim", 1)
        self.bits = check_int(bits, "bits", 1, MAX_BITS)
        rng = np.random.default_rng(check_int(seed, "seed", 0))
        w, r, d, big_h = construction.m, self.rank, self.value_dim, self.heads
        size = self.layers * big_h * (2 * r + 2 * d) * w
        if size > MAX_SKETCH_PARAMETERS:
            raise ValueError(
                f"layers x heads x (2 rank + 2 value_dim) x m = {size} parameters, above "
                f"MAX_SKETCH_PARAMETERS = {MAX_SKETCH_PARAMETERS}; use a smaller model")
        scale = 1 / math.sqrt(w)
        self._heads = [[{"q": rng.normal(0, scale, (r, w)), "k": rng.normal(0, scale, (r, w)),
                         "v": rng.normal(0, scale, (d, w))} for _ in range(big_h)]
                       for _ in range(self.layers)]
        self._out = [rng.normal(0, 1 / math.sqrt(big_h * d), (w, big_h * d))
                     for _ in range(self.layers)]
        self._readout = rng.normal(0, scale, w)
        self._bias = construction.s / 2  # centres the outputs on the answer range 0..s
        self._bob_tokens = construction.query_tokens().astype(np.float64)

    @property
    def length(self) -> int:
        """L*H*r*(d+1) quantised sketch entries."""
        return self.layers * self.heads * self.rank * (self.value_dim + 1)

    def _bob_head(self, p, h_bob, s_alice, u_alice):
        """Bob's queries in one head: exact own sketch plus Alice's dequantised one."""
        k_bob = _features(p["k"], h_bob)                      # (q, r)
        v_bob = np.tanh(h_bob @ p["v"].T)                     # (q, d)
        s_bob, u_bob = k_bob.T @ v_bob, k_bob.sum(axis=0)     # (r, d), (r,)
        phi_q = _features(p["q"], h_bob)                      # (q, r)
        return (phi_q @ (s_bob + s_alice)) / (phi_q @ (u_bob + u_alice))[:, None], s_bob, u_bob

    def _split(self, codes):
        """Dequantised (S_A~, u_A~) of one head from its r*d + r codes."""
        r, d = self.rank, self.value_dim
        codes = np.asarray(codes, dtype=np.int64)
        return (_dequantise(codes[: r * d].reshape(r, d), *S_RANGE, self.bits),
                _dequantise(codes[r * d:], *U_RANGE, self.bits))

    def forward(self, key_token) -> tuple[np.ndarray, tuple[int, ...]]:
        """The whole network on (z, x_1..x_q): Bob's outputs (q,) and the transcript."""
        z = self.construction.check_key_token(key_token, one=True)
        h_alice, h_bob = z.astype(np.float64), self._bob_tokens.copy()
        codes: list[int] = []
        for layer in range(self.layers):
            o_alice, o_bob = [], []
            for p in self._heads[layer]:
                k_alice = _features(p["k"], h_alice)                  # (r,)
                v_alice = np.tanh(p["v"] @ h_alice)                   # (d,)
                s_alice = np.outer(k_alice, v_alice)
                head_codes = np.concatenate([_quantise(s_alice, *S_RANGE, self.bits).ravel(),
                                             _quantise(k_alice, *U_RANGE, self.bits)])
                codes.extend(head_codes.tolist())
                o, s_bob, u_bob = self._bob_head(p, h_bob, *self._split(head_codes))
                o_bob.append(o)
                # Alice's own query sees everything exactly: Bob -> Alice is unrestricted.
                phi_q = _features(p["q"], h_alice)
                o_alice.append(phi_q @ (s_bob + s_alice) / (phi_q @ (u_bob + k_alice)))
            h_alice = h_alice + self._out[layer] @ np.concatenate(o_alice)
            h_bob = h_bob + np.concatenate(o_bob, axis=1) @ self._out[layer].T
        return h_bob @ self._readout + self._bias, tuple(codes)

    def read(self, transcript) -> np.ndarray:
        """Bob's outputs from the transcript alone: Alice's token is never touched."""
        codes = np.asarray(check_transcript(self, transcript), dtype=np.int64)
        per_head = self.rank * (self.value_dim + 1)
        h_bob = self._bob_tokens.copy()
        for layer in range(self.layers):
            o_bob = []
            for j, p in enumerate(self._heads[layer]):
                start = (layer * self.heads + j) * per_head
                o, _, _ = self._bob_head(p, h_bob, *self._split(codes[start:start + per_head]))
                o_bob.append(o)
            h_bob = h_bob + np.concatenate(o_bob, axis=1) @ self._out[layer].T
        return h_bob @ self._readout + self._bias

    def outputs(self, key_token) -> np.ndarray:
        """The network's outputs (forward pass), which equal read(transcript(z))."""
        return self.forward(key_token)[0]

    def __repr__(self):
        c = self.construction
        return (f"QuantisedSketchModel(q={c.q}, s={c.s}, L={self.layers}, H={self.heads}, "
                f"r={self.rank}, d={self.value_dim}, b={self.bits})")


class CountingSketchModel(_SketchModel):
    """A one-head, rank-1, b-bit quantised NKA sketch *designed* to be exact on as many answer
    vectors as it has transcripts (min(s+1, 2**b)**d): every feature is 1, Alice's value v_k(z)
    (k <= d) is the level of min(|z n B_k|, 2**b - 1), so it crosses the channel losslessly,
    and query i <= d turns entry i of o back into the count (queries i > d output 0)."""

    def __init__(self, construction: BlockConstruction, value_dim: int = 1, bits: int = 1):
        self.construction = check_instance(construction, "construction", BlockConstruction)
        self.value_dim = check_int(value_dim, "value_dim", 1, construction.q)
        self.bits = check_int(bits, "bits", 1, MAX_BITS)
        self.rank = 1
        self._steps = 2**self.bits - 1
        # the dequantised level Bob receives for u_A = phi_K(z) = 1; the same for every z
        self._u_level = float(_dequantise(_quantise(1.0, *U_RANGE, self.bits), *U_RANGE,
                                         self.bits))

    @property
    def length(self) -> int:
        """r*(d+1) = d + 1 quantised entries: S_A (1 x d) and u_A (1)."""
        return self.value_dim + 1

    def _value(self, token) -> np.ndarray:
        """v(token) in R^d: for a token inside the blocks (Alice's), the levels of its first d
        block counts clamped to 2**b - 1; for a token touching C (Bob's), 0."""
        c = self.construction
        if np.any(token[c.q * c.s:]):
            return np.zeros(self.value_dim)
        counts = c.block_counts(token)[: self.value_dim]
        return _dequantise(np.minimum(counts, self._steps), *S_RANGE, self.bits)

    def _readout(self, x) -> tuple[np.ndarray, float]:
        """Query-dependent affine readout (a(x), b(x)): the query covering B_k with k <= d
        turns entry k of o back into a count; the others output 0."""
        c = self.construction
        a = np.zeros(self.value_dim)
        k = int(np.argmax(x[: c.q * c.s])) // c.s  # x = 1_{B_k} + 1_C: its block, 0-based
        if k >= self.value_dim:
            return a, 0.0
        lo, hi = S_RANGE
        a[k] = (c.q + self._u_level) * self._steps / (hi - lo)
        return a, -lo * self._steps / (hi - lo)

    def forward(self, key_token) -> tuple[np.ndarray, tuple[int, ...]]:
        """Bob's outputs (q,) and the transcript: Alice's sketch (S_A, u_A) = (v(z), 1) reaches
        Bob only as its b-bit codes, from which and his own exact sketch his queries (all
        features 1) read the head's output."""
        z = self.construction.check_key_token(key_token, one=True)
        codes = np.concatenate([_quantise(self._value(z), *S_RANGE, self.bits),
                                _quantise(np.array([1.0]), *U_RANGE, self.bits)])
        codes = tuple(int(cd) for cd in codes)
        return self.read(codes), codes

    def read(self, transcript) -> np.ndarray:
        """Bob's outputs from the transcript and his own tokens only."""
        codes = np.asarray(check_transcript(self, transcript), dtype=np.int64)
        d, bob = self.value_dim, self.construction.query_tokens()
        s_tilde = _dequantise(codes[:d], *S_RANGE, self.bits)
        u_tilde = float(_dequantise(codes[d], *U_RANGE, self.bits))
        s_bob = sum(1.0 * self._value(x) for x in bob)
        o = (s_bob + s_tilde) / (len(bob) + u_tilde)
        return np.array([a @ o + b for a, b in map(self._readout, bob)])

    def exact_answer_vectors(self) -> int:
        """min(s+1, 2**b)**d: how many answer vectors the model gets right."""
        return min(self.construction.s + 1, 2**self.bits) ** self.value_dim

    def __repr__(self):
        c = self.construction
        return (f"CountingSketchModel(q={c.q}, s={c.s}, L=1, H=1, r=1, d={self.value_dim}, "
                f"b={self.bits})")
