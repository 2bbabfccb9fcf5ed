"""Theorem G (precision transcript bound): construction, counting, pigeonhole, tight code."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from companion.core.task import min_ip_targets
from companion.transcript.bound import (
    MAX_KEY_TOKENS,
    BlockConstruction,
    Collision,
    TightEncoder,
    answer_vector_count,
    bits_needed,
    count_transcripts,
    enumerate_answer_vectors,
    find_collision,
    sketch_bits,
    smallest_feature_rank,
    verify_exhaustively,
)
from companion.transcript.sketch import S_RANGE, QuantisedSketchModel
from companion.transcript.sketch import _dequantise as dequantise
from companion.transcript.sketch import _quantise as quantise

small_qs = st.tuples(st.integers(1, 4), st.integers(1, 3))


# ------------------------------------------------------------------------- construction


@given(small_qs)
def test_construction_overlaps_and_weights(qs):
    """<x_i, x_j> = s+1 (i != j), |x_i| = 2s+1, m = qs + s + 1."""
    q, s = qs
    c = BlockConstruction(q, s)
    x = c.query_tokens()
    gram = x @ x.T
    assert c.m == q * s + s + 1 and x.shape == (q, c.m)
    assert np.all(np.diag(gram) == 2 * s + 1)
    assert np.all(gram[~np.eye(q, dtype=bool)] == s + 1)


@settings(max_examples=60)
@given(small_qs, st.data())
def test_targets_at_bob_positions_are_block_counts(qs, data):
    """min_ip_targets at Bob's positions 1..q equals |z n B_i| for any key token z."""
    q, s = qs
    c = BlockConstruction(q, s)
    bits = data.draw(st.lists(st.integers(0, 1), min_size=q * s, max_size=q * s))
    z = np.array(bits + [0] * (s + 1))
    seq = c.sequence(z)
    assert seq.shape == (q + 1, c.m) and np.array_equal(seq[0], z)
    counts = [sum(bits[i * s:(i + 1) * s]) for i in range(q)]
    assert min_ip_targets(seq)[1:].tolist() == counts
    assert c.answers(z).tolist() == counts


@given(small_qs)
def test_causal_prefix_target_equals_full_target(qs):
    """Alice first: each query's min over its causal prefix already equals the full min."""
    q, s = qs
    c = BlockConstruction(q, s)
    for z in c.all_key_tokens()[:: max(1, 2 ** (q * s) // 16)]:
        seq = c.sequence(z)
        full = min_ip_targets(seq)
        prefix = [min_ip_targets(seq[: i + 1])[i] for i in range(1, q + 1)]
        assert prefix == full[1:].tolist()


def test_key_token_outside_blocks_rejected():
    c = BlockConstruction(2, 2)
    z = np.zeros(c.m, dtype=int)
    z[-1] = 1
    with pytest.raises(ValueError, match="inside the blocks"):
        c.sequence(z)
    with pytest.raises(ValueError, match="width m=7"):
        c.sequence(np.zeros(6, dtype=int))


# --------------------------------------------------------------------------- enumeration


@pytest.mark.parametrize("q,s", [(1, 1), (1, 5), (2, 2), (3, 1), (3, 3), (4, 2), (2, 7)])
def test_enumeration_count_is_s_plus_one_to_the_q(q, s):
    """Over all 2**(qs) key tokens (Bob fixed) exactly (s+1)^q answer vectors occur, each
    answer vector c with multiplicity prod_i C(s, c_i)."""
    counter = enumerate_answer_vectors(BlockConstruction(q, s))
    assert len(counter) == (s + 1) ** q == answer_vector_count(q, s)
    assert sum(counter.values()) == 2 ** (q * s)
    for vec, mult in counter.items():
        assert mult == math.prod(math.comb(s, ci) for ci in vec)


def test_enumeration_refuses_beyond_stated_size():
    assert MAX_KEY_TOKENS == 2**16
    BlockConstruction(4, 4).all_key_tokens()  # q*s = 16: allowed
    with pytest.raises(ValueError, match=r"2\*\*\(q\*s\) = 2\*\*17.*q\*s <= 16"):
        BlockConstruction(17, 1).all_key_tokens()
    with pytest.raises(ValueError, match="max_tokens"):
        enumerate_answer_vectors(BlockConstruction(5, 4))


# -------------------------------------------------------------------- the quantised channel


def test_quantiser_alphabet_has_exactly_two_to_the_b_letters():
    for bits in (1, 2, 3, 5):
        grid = np.linspace(S_RANGE[0] - 1, S_RANGE[1] + 1, 4001)
        codes = quantise(grid, *S_RANGE, bits)
        assert sorted(set(codes.tolist())) == list(range(2**bits))
        levels = dequantise(np.arange(2**bits), *S_RANGE, bits)
        assert levels[0] == S_RANGE[0] and math.isclose(levels[-1], S_RANGE[1])
        # quantise o dequantise is the identity on codes
        assert np.array_equal(quantise(levels, *S_RANGE, bits), np.arange(2**bits))


@settings(max_examples=25, deadline=None)
@given(small_qs, st.integers(1, 2), st.integers(1, 2), st.integers(1, 2), st.integers(1, 3),
       st.integers(1, 4), st.integers(0, 2**16))
def test_quantised_sketch_is_a_deterministic_transcript_model(qs, L, H, r, d, b, seed):
    """Transcript: L*H*r*(d+1) symbols in {0..2**b-1}; fixed by the seed; the network's outputs
    equal Bob's outputs recomputed from the transcript alone."""
    c = BlockConstruction(*qs)
    model = QuantisedSketchModel(c, layers=L, heads=H, rank=r, value_dim=d, bits=b, seed=seed)
    twin = QuantisedSketchModel(c, layers=L, heads=H, rank=r, value_dim=d, bits=b, seed=seed)
    assert model.length == L * H * r * (d + 1) and model.alphabet_size == 2**b
    assert model.transcript_count_bound() == 2 ** sketch_bits(L, H, r, d, b)
    tokens = c.all_key_tokens()
    for z in tokens[:: max(1, len(tokens) // 8)]:
        out, t = model.forward(z)
        assert len(t) == model.length and all(0 <= sym < 2**b for sym in t)
        assert twin.forward(z)[1] == t and model.transcript(z) == t
        assert np.array_equal(model.read(t), out)
        assert np.array_equal(twin.outputs(z), out)
    assert count_transcripts(model, tokens) <= model.transcript_count_bound()


def test_per_position_prefix_quantisation_is_a_wider_channel():
    """Why the channel is Alice's contribution quantised once per head and layer: if each of q
    causal queries quantised its own prefix sum c_i + a with 1 bit, a single scalar a would
    reach q+1 distinct transcripts, more than the 2 that one 1-bit message allows."""
    q = 5
    offsets = np.arange(1, q + 1) / (q + 1)
    a = np.linspace(0, 1, 1001)
    messages = quantise(offsets[None, :] + a[:, None], 0.0, 2.0, 1)
    assert len({tuple(row) for row in messages.tolist()}) == q + 1 > 2**1


# ------------------------------------------------------------------------------ pigeonhole


def _check_collision(model, col: Collision):
    c = model.construction
    z0, z1 = col.key_tokens
    # re-evaluate both from scratch, independently of the finder
    t0, t1 = model.transcript(z0), model.transcript(z1)
    assert t0 == t1 == col.transcript
    a0 = tuple(min_ip_targets(c.sequence(z0))[1:].tolist())
    a1 = tuple(min_ip_targets(c.sequence(z1))[1:].tolist())
    assert (a0, a1) == col.answers and a0 != a1
    y0, y1 = model.outputs(z0), model.outputs(z1)
    assert np.array_equal(y0, y1) and np.array_equal(y0, col.outputs)
    worst = [float(np.max(np.abs(y0 - np.array(a)))) for a in (a0, a1)]
    assert worst == list(col.errors)
    assert col.wrong_on and max(worst) >= 0.5
    assert col.predicted != a0 or col.predicted != a1


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 6), st.integers(1, 3), st.integers(1, 2), st.integers(1, 2),
       st.integers(1, 2), st.integers(1, 3), st.integers(1, 3), st.integers(0, 1000))
def test_collision_found_whenever_bits_below_bound(q, s, L, H, r, d, b, seed):
    """q*log2(s+1) <= 12 keeps the search at most 2**11 + 1 forward passes."""
    c = BlockConstruction(q, s)
    model = QuantisedSketchModel(c, layers=L, heads=H, rank=r, value_dim=d, bits=b, seed=seed)
    below = sketch_bits(L, H, r, d, b) < q * math.log2(s + 1)
    assert model.below_bound() == below
    if below:
        _check_collision(model, find_collision(model))


def test_smallest_instance_collides():
    """q=3, s=1 needs 3 bits; the smallest sketch (L=H=r=d=b=1) carries 2."""
    model = QuantisedSketchModel(BlockConstruction(3, 1))
    assert model.length * math.log2(model.alphabet_size) == 2 < bits_needed(3, 1) == 3
    col = find_collision(model)
    _check_collision(model, col)


@pytest.mark.parametrize("q,s", [(3, 1), (2, 2), (5, 2), (4, 3)])
def test_tight_encoder_one_bit_short_collides(q, s):
    """With ceil(q log2(s+1)) - 1 one-bit symbols no transcript model is exact: the tight code
    truncated by its top bit collides."""

    class Truncated(TightEncoder):
        @property
        def length(self):
            return bits_needed(q, s) - 1

    model = Truncated(BlockConstruction(q, s))
    assert model.below_bound()
    _check_collision(model, find_collision(model))


def test_find_collision_rejects_non_transcript_models():
    """A model that cheats (outputs use z, not just the transcript) is caught."""

    class Cheat(TightEncoder):
        @property
        def length(self):
            return 1

        def transcript(self, key_token):
            return (0,)

        def outputs(self, key_token):
            return self.construction.answers(key_token).astype(float)

    with pytest.raises(RuntimeError, match="one transcript gave two outputs"):
        find_collision(Cheat(BlockConstruction(2, 1)))


def test_find_collision_rejects_non_deterministic_models():
    """A transcript that changes between calls is caught on re-evaluation."""

    class Flaky(TightEncoder):
        calls = 0

        @property
        def length(self):
            return 1

        def transcript(self, key_token):
            Flaky.calls += 1
            return (Flaky.calls % 2,) if Flaky.calls > 2 else (0,)

    with pytest.raises(RuntimeError, match="not deterministic"):
        find_collision(Flaky(BlockConstruction(2, 1)))


def test_find_collision_refuses_huge_searches_above_the_bound():
    enc = TightEncoder(BlockConstruction(21, 1))
    with pytest.raises(ValueError, match="max_vectors"):
        find_collision(enc)
    assert find_collision(TightEncoder(BlockConstruction(3, 2))) is None


# ---------------------------------------------------------------------------- tight encoder


@pytest.mark.parametrize("q,s", [(1, 1), (1, 6), (2, 2), (3, 1), (3, 3), (4, 2), (5, 2), (2, 5)])
def test_tight_encoder_is_exact_on_every_key_token(q, s):
    c = BlockConstruction(q, s)
    enc = TightEncoder(c)
    assert enc.length == bits_needed(q, s) == math.ceil(q * math.log2(s + 1))
    assert not enc.below_bound() and 2 ** (enc.length - 1) < (s + 1) ** q
    assert verify_exhaustively(enc) == 2 ** (q * s)
    assert count_transcripts(enc, c.all_key_tokens()) == (s + 1) ** q


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 12), st.integers(1, 20), st.integers(1, 8), st.data())
def test_tight_encoder_decodes_every_answer_vector(q, s, symbol_bits, data):
    c = BlockConstruction(q, s)
    enc = TightEncoder(c, symbol_bits=symbol_bits)
    assert enc.length == -(-bits_needed(q, s) // symbol_bits)
    counts = data.draw(st.lists(st.integers(0, s), min_size=q, max_size=q))
    z = c.representative(np.array(counts))
    assert enc.outputs(z).tolist() == counts == c.answers(z).tolist()


def test_tight_encoder_decodes_all_answer_vectors_exhaustively():
    c = BlockConstruction(6, 3)
    enc = TightEncoder(c, symbol_bits=3)
    seen = Counter()
    for counts in itertools.product(range(c.s + 1), repeat=c.q):
        t = enc.transcript(c.representative(np.array(counts)))
        seen[t] += 1
        assert tuple(enc.read(t).astype(int).tolist()) == counts
    assert len(seen) == 4**6 and max(seen.values()) == 1


def test_verify_exhaustively_catches_a_wrong_model():
    with pytest.raises(AssertionError, match="wrong on key token"):
        verify_exhaustively(QuantisedSketchModel(BlockConstruction(3, 1)))


# ----------------------------------------------------------------------------- rank bound


@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 64), st.integers(1, 16),
       st.integers(1, 10**4), st.integers(1, 1000))
def test_smallest_feature_rank_is_least_satisfying(L, H, d, b, q, s):
    r = smallest_feature_rank(L, H, d, b, q, s)
    assert sketch_bits(L, H, r, d, b) >= bits_needed(q, s)
    assert r == 1 or sketch_bits(L, H, r - 1, d, b) < bits_needed(q, s)
    assert 2 ** (L * H * r * (d + 1) * b) >= (s + 1) ** q


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 9), st.integers(1, 3), st.integers(1, 2))
def test_rank_one_below_smallest_rank_collides(q, s, b):
    """r = smallest_feature_rank - 1 (when >= 1) is below the bound: a collision exists."""
    r = smallest_feature_rank(1, 1, 1, b, q, s) - 1
    if r >= 1:
        model = QuantisedSketchModel(BlockConstruction(q, s), rank=r, bits=b)
        _check_collision(model, find_collision(model))


def test_rank_table_values():
    assert smallest_feature_rank(1, 1, 1, 1, 3, 1) == 2
    assert smallest_feature_rank(12, 12, 64, 16, 10**6, 1) == math.ceil(10**6 / (144 * 65 * 16))
    assert bits_needed(3, 2) == 5 and bits_needed(1, 1) == 1 and bits_needed(2, 3) == 4
    # s + 1 a power of two takes the shortcut; it agrees with the exact big-integer count
    assert all(bits_needed(q, s) == (answer_vector_count(q, s) - 1).bit_length()
               for q in range(1, 40) for s in (1, 3, 7, 15, 2, 5, 6))
    assert bits_needed(10**7, 1) == 10**7  # beyond the big-integer limit, still exact


# ------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize("q,s,arg", [(0, 1, "q"), (-2, 1, "q"), (1, 0, "s"), (3, -1, "s")])
def test_construction_rejects_bad_sizes(q, s, arg):
    with pytest.raises(ValueError, match=rf"{arg} must be an int >= 1"):
        BlockConstruction(q, s)
    with pytest.raises(ValueError, match=rf"{arg} must be an int >= 1"):
        bits_needed(q, s)


@pytest.mark.parametrize("q,s,arg", [(1.0, 1, "q"), (True, 1, "q"), (2, "3", "s"), (2, None, "s")])
def test_construction_rejects_non_ints(q, s, arg):
    with pytest.raises(TypeError, match=rf"{arg} must be an int"):
        BlockConstruction(q, s)
    with pytest.raises(TypeError, match=rf"{arg} must be an int"):
        smallest_feature_rank(1, 1, 1, 1, q, s)


@pytest.mark.parametrize("kw,arg", [({"bits": 0}, "bits"), ({"bits": 31}, "bits"),
                                    ({"rank": 0}, "rank"), ({"layers": 0}, "layers"),
                                    ({"heads": -1}, "heads"), ({"value_dim": 0}, "value_dim")])
def test_sketch_model_rejects_bad_sizes(kw, arg):
    with pytest.raises(ValueError, match=rf"{arg} must be an int (in|>=)"):
        QuantisedSketchModel(BlockConstruction(2, 1), **kw)


@pytest.mark.parametrize("args,arg", [((0, 1, 1, 1, 3, 1), "L"), ((1, 0, 1, 1, 3, 1), "H"),
                                      ((1, 1, 0, 1, 3, 1), "d"), ((1, 1, 1, 0, 3, 1), "b"),
                                      ((1, 1, 1, 1, 0, 1), "q"), ((1, 1, 1, 1, 3, 0), "s")])
def test_rank_formula_rejects_bad_sizes(args, arg):
    with pytest.raises(ValueError, match=rf"\b{arg} must be an int >= 1"):
        smallest_feature_rank(*args)


def test_other_bad_input():
    with pytest.raises(TypeError, match="bits must be an int"):
        QuantisedSketchModel(BlockConstruction(2, 1), bits=1.5)
    with pytest.raises(TypeError, match="construction must be a BlockConstruction"):
        TightEncoder((2, 1))
    with pytest.raises(ValueError, match="symbol_bits must be an int in"):
        TightEncoder(BlockConstruction(2, 1), symbol_bits=0)
    enc = TightEncoder(BlockConstruction(2, 1))
    with pytest.raises(ValueError, match="transcript must have length 2"):
        enc.read((0,))
    with pytest.raises(ValueError, match=r"symbols must be an int in \[0, 1\]"):
        enc.read((0, 2))
    with pytest.raises(ValueError, match=r"counts\[1\] must be an int in \[0, 1\]"):
        BlockConstruction(2, 1).representative(np.array([0, 2]))
