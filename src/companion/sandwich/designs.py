"""Nonnegative heads from block designs (Chapter 3, {prf:ref}`prop-design-heads`):
blocks of size k that pairwise share at most one point give queries whose feature vectors
1_B / sqrt(k) have inner products 0 or 1/k, and pairs whose bound is below that get disjoint
blocks. Size k >= 6 fits the bound 1/5 with room (a shift keeps every entry positive); size 5
meets it exactly and needs one more coordinate, the *lift*, to pass strictly below it. The
designs: transversal designs and the affine plane in closed form, packings by a seeded search.
"""

from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction

import numpy as np

from companion.checks import check_bool, check_instance, check_int
from companion.sandwich.matrix import RatioBounds, admissibility_violations, ratio_matrix_of_factors

__all__ = ["transversal_design", "affine_plane", "packing", "disjoint_classes", "design_factors"]

#: The lift's scales: parallel class c gets t_c = LIFT_TOP / (2k + 1)^c (see design_factors).
LIFT_TOP = Fraction(1, 5)
#: The shift of the unlifted construction: K_y = 1_B + SHIFT (every entry of M positive).
SHIFT = Fraction(1, 100)
#: Seeded tries of the greedy matching of paired queries to disjoint blocks, and the most
#: blocks (and the largest point) a design may have.
MATCHING_TRIES = 200
MAX_BLOCKS = 4096


def transversal_design(k: int, q: int) -> list[list[frozenset]]:
    """The q^2 blocks {(g, a g + b mod q): g < k} of the transversal design TD(k, q) on the
    points (g, e) -> g q + e, as q parallel classes (slope a), for a prime q >= k: two blocks
    share at most one point, blocks of one class none."""
    k = check_int(k, "k (block size)", 2, 64)
    q = check_int(q, "q (a prime >= k)", k, 64)
    if any(q % d == 0 for d in range(2, q)):
        raise ValueError(f"q must be a prime, got {q}")
    return [[frozenset(g * q + (a * g + b) % q for g in range(k)) for b in range(q)]
            for a in range(q)]


def affine_plane(q: int) -> list[list[frozenset]]:
    """The q^2 + q lines of the affine plane AG(2, q) on q^2 points, as q + 1 parallel
    classes: the transversal design TD(q, q) and its q groups (a prime q)."""
    q = check_int(q, "q (a prime)", 2, 64)
    return transversal_design(q, q) + [[frozenset(g * q + e for e in range(q))
                                        for g in range(q)]]


def packing(points: int, count: int, k: int = 5, seed: int = 0,
            steps: int = 2_000_000) -> list[frozenset]:
    """`count` blocks of size k on range(points) that pairwise share at most one point, by
    seeded simulated annealing on the number of point pairs covered twice (one point of one
    block moved per step; Python's seeded generator, the same on every machine). ValueError
    if `steps` moves find none (the Johnson bound: count <= floor(points/k floor((points-1)/
    (k-1))))."""
    points = check_int(points, "points", 2, MAX_BLOCKS)
    k = check_int(k, "k (block size)", 2, points)
    count = check_int(count, "count", 1, MAX_BLOCKS)
    seed, steps = check_int(seed, "seed", 0), check_int(steps, "steps", 1, 10**8)
    rng = random.Random(seed)
    blocks = [rng.sample(range(points), k) for _ in range(count)]
    cover: dict = {}
    for b in blocks:
        for pair in itertools.combinations(sorted(b), 2):
            cover[pair] = cover.get(pair, 0) + 1
    excess = sum(c - 1 for c in cover.values() if c > 1)
    temperature = 2.0
    for _ in range(steps):
        if excess == 0:
            return [frozenset(b) for b in blocks]
        b = blocks[rng.randrange(count)]
        j, new = rng.randrange(k), rng.randrange(points)
        if new in b:
            continue
        old, rest = b[j], [x for x in b if x != b[j]]
        gone = [(min(x, old), max(x, old)) for x in rest]
        come = [(min(x, new), max(x, new)) for x in rest]
        delta = sum(cover.get(q, 0) >= 1 for q in come) - sum(cover[q] > 1 for q in gone)
        if delta <= 0 or rng.random() < math.exp(-delta / temperature):
            for q in gone:
                cover[q] -= 1
            for q in come:
                cover[q] = cover.get(q, 0) + 1
            b[j] = new
            excess += delta
        temperature = max(0.05, temperature * 0.99999)
    raise ValueError(f"found no packing of {count} blocks of size {k} on {points} points in "
                     f"{steps} steps (seed {seed})")


def disjoint_classes(blocks) -> list[list[frozenset]]:
    """The blocks in classes of pairwise disjoint blocks (greedy, in order): the classes
    :func:`design_factors` lifts to different scales."""
    if not isinstance(blocks, (list, tuple)) or not all(isinstance(b, frozenset)
                                                        for b in blocks):
        raise TypeError("blocks must be a list of frozensets of points")
    classes: list[list[frozenset]] = []
    for b in blocks:
        home = next((c for c in classes if all(not b & other for other in c)), None)
        if home is None:
            classes.append([b])
        else:
            home.append(b)
    return classes


def _disjoint_pairs(classes, pairs: int, blocks: list):
    """`pairs` pairwise-disjoint couples of disjoint blocks (indices into `blocks`), found by a
    seeded greedy matching that prefers couples from one class; ValueError if none is found."""
    if pairs == 0:
        return []
    cls = {b: c for c, members in enumerate(classes) for b in members}
    edges = [(a, b) for a, b in itertools.combinations(range(len(blocks)), 2)
             if not blocks[a] & blocks[b]]
    rng = np.random.default_rng(0)
    for _ in range(MATCHING_TRIES):
        order = sorted(rng.permutation(len(edges)).tolist(),
                       key=lambda e: cls[blocks[edges[e][0]]] != cls[blocks[edges[e][1]]])
        used, chosen = set(), []
        for e in order:
            a, b = edges[e]
            if a not in used and b not in used:
                used |= {a, b}
                chosen.append((a, b))
                if len(chosen) == pairs:
                    return chosen
    raise ValueError(f"found no {pairs} disjoint pairs of disjoint blocks in "
                     f"{MATCHING_TRIES} tries")


def design_factors(bounds: RatioBounds, classes, lift: bool = False):
    """Nonnegative factors (Q, K) of an admissible M from blocks of one size k (classes of
    pairwise disjoint blocks, e.g. :func:`transversal_design`). Queries x, y whose bound
    u_xy is below what two blocks sharing a point give must form a matching; they get
    disjoint blocks. Unlifted (rank = points): Q_x = 1_B / (k (1 + SHIFT)), K_y = 1_B + SHIFT,
    so M_xy = (|B_x & B_y| + k SHIFT) / (k (1 + SHIFT)). Lifted (rank = points + 1): the
    blocks of class c get v = (gamma 1_B, s), gamma = (k - t^2)/(k + t^2), s = 2kt/(k + t^2),
    t = LIFT_TOP / (2k + 1)^c, a rational point of gamma^2 + s^2/k = 1, so |v|^2 = k and
    M_xy = <v_x, v_y>/k = (gamma_x gamma_y + s_x s_y)/k for meeting blocks: below 1/k when
    their classes' t differ by a factor above k + sqrt(k^2 - 1). Checked exactly."""
    check_instance(bounds, "bounds", RatioBounds)
    lift = check_bool(lift, "lift")
    if not isinstance(classes, (list, tuple)) or not all(
            isinstance(c, (list, tuple)) and all(isinstance(b, frozenset) for b in c)
            for c in classes):
        raise TypeError("classes must be a list of lists of frozensets of points (blocks), "
                        f"got {type(classes).__name__}")
    blocks = [b for c in classes for b in c]
    if not 0 < len(blocks) <= MAX_BLOCKS or not all(
            isinstance(p, int) and not isinstance(p, bool) and 0 <= p < MAX_BLOCKS
            for b in blocks for p in b):
        raise ValueError(f"classes must hold 1 to {MAX_BLOCKS} blocks of int points in "
                         f"[0, {MAX_BLOCKS})")
    sizes = {len(b) for b in blocks}
    if len(sizes) != 1:
        raise ValueError("classes must hold blocks of one size k")
    k, N = sizes.pop(), bounds.size
    meet = Fraction(1, k) if lift else (1 + k * SHIFT) / (k * (1 + SHIFT))
    # x, y may get meeting blocks if both bounds allow it (lifted: entries strictly below 1/k)
    apart = [(x, y) for x in range(N) for y in range(x + 1, N)
             if not all(u >= meet if lift else u > meet for u in bounds.upper[[x, y], [y, x]])]
    if len({v for p in apart for v in p}) != 2 * len(apart):
        raise ValueError("the pairs whose bound is below a shared point must form a matching")
    if len(blocks) < N:
        raise ValueError(f"classes hold {len(blocks)} blocks, fewer than the {N} queries")
    assign: dict[int, int] = {}
    for (x, y), (a, b) in zip(apart, _disjoint_pairs(classes, len(apart), blocks), strict=True):
        assign[x], assign[y] = a, b
    rest = iter(b for b in range(len(blocks)) if b not in assign.values())
    assign = {x: assign[x] if x in assign else next(rest) for x in range(N)}
    points = sorted(set().union(*blocks))
    col = {p: j for j, p in enumerate(points)}
    cls = {b: c for c, members in enumerate(classes) for b in members}
    r = len(points) + lift
    Q = np.full((N, r), Fraction(0), dtype=object)
    K = np.full((N, r), Fraction(0) if lift else SHIFT, dtype=object)
    for x in range(N):
        block = blocks[assign[x]]
        if lift:
            t = LIFT_TOP / (2 * k + 1) ** cls[block]
            gamma, s = (k - t * t) / (k + t * t), 2 * k * t / (k + t * t)
            for p in block:
                K[x, col[p]] = gamma
            K[x, -1] = s
            Q[x] = K[x] / k
        else:
            for p in block:
                K[x, col[p]] += 1
                Q[x, col[p]] = 1 / (k * (1 + SHIFT))
    problems = admissibility_violations(ratio_matrix_of_factors(Q, K), bounds)
    if problems:
        raise ValueError(f"the design's matrix is not admissible for this family: {problems[:2]}")
    return Q, K
