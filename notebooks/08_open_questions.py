# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Open questions: signed kernels and several heads
#
# {prf:ref}`thm-exponential-rank` has two hypotheses that its proof uses in an essential way.
# The kernel is **nonnegative**, so the output on a mixed sequence is a convex combination of
# per-token scores; and there is **one head**, so there is exactly one such combination to
# steer. As the explainer relays it, the paper {cite}`opazo2026threetokens` leaves both open:
# a signed kernel might cancel terms, several heads might specialise. This chapter probes the
# two loopholes with proofs where we have them, exact searches where the question is finite,
# and training runs where it is not. Every statement below is labelled **Proved** (a proof
# here, checked by a test that can fail), **Measured** (an exact search over a stated class,
# or a training run) or **Open**.
#
# ```{admonition} Key result
# :class: tip
# *Several heads escape the certificate completely*: two nonnegative heads of rank 1 are exact
# (error 0) on E1's witness family, where one head needs {glue:text}`window-e1-real`
# features ({ref}`Chapter 3's table <tab-windows>`), and $2m+1$
# heads of rank $m+1$ are exact on every length-3 input — polynomial total rank where one head
# needs $2^{\Omega(m)}$. These constructions pay in value width: $d = 28$ per head on E1's
# family, $d = 2^m$ on all inputs, where the single-head bound holds for every $d$.
# *Signed kernels do not escape in the cases we can prove*: with denominators of one sign per
# query the certificate loses one feature (21 of 22), with shared keys it keeps its trace
# form minus one (13). Signed heads with position-dependent keys and
# sign-changing denominators break the proof on a single link; whether they beat the wall is
# open, and no trained signed head solved below rank 28, even at E1's full training budget.
# Verdicts — {claim-verdict}`open-signed-features`; {claim-verdict}`open-two-heads`.
# ```
#
# **Code for this chapter:** `companion.open.signed` ({prf:ref}`prop-signed-certificate`,
# {prf:ref}`prop-overlap-rank`, the counterexample), `companion.open.multihead`
# ({prf:ref}`prop-two-heads`, {prf:ref}`prop-cauchy-heads`), `companion.open.level_heads` and
# `companion.core.lp` ({prf:ref}`prop-level-heads`: exact LPs with checkable certificates),
# `companion.core.exact` (exact re-verification of trained heads), and the experiment code
# `companion.experiments.heads` (stacked signed and multi-head models) and
# `companion.experiments.probes` (the sweep behind `python -m companion probes`).

# %% tags=["remove-cell"]
# Colab or a bare kernel: install the companion (book/reading.md, "Three ways to run")
try:
    import companion  # noqa: F401
except ModuleNotFoundError:
    # %pip install --quiet "companion @ git+https://github.com/three-tokens/companion@main"
    import companion  # noqa: F401

# %% tags=["hide-input"]
import dataclasses
import json
from collections import Counter
from fractions import Fraction
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from IPython.display import display

from companion.book import Table
from companion.book import glue_text
from companion.book import seed_everything
from companion.book import use_book_style
from companion.bounds.rank_bounds import sharp_rank_bound
from companion.experiments.e1 import experiment_witness_24
from companion.sandwich.windows import sandwich_windows

RESULTS = Path("..") / "results"
RESULTS = RESULTS if RESULTS.is_dir() else Path("results")
rng = seed_everything(0)  # seeds python, numpy and torch
use_book_style()  # figures fit the text column, text >= 9 pt
probes = json.loads((RESULTS / "probes_full.json").read_text())  # E1's full budget
e1_full = json.loads((RESULTS / "e1_full.json").read_text())  # the one-head reference
# the earlier probe run at E1's quick budget and its one-head reference (Section 2.1)
probes_quick_budget = json.loads((RESULTS / "probes_full_e1quick.json").read_text())
e1_quick = json.loads((RESULTS / "e1_quick.json").read_text())
exact_tables = json.loads((RESULTS / "probes_exact.json").read_text())
family = experiment_witness_24()  # E1's witness family F(S): |S| = 28, 2,356 sequences
bound = family.certificate.bound  # Theorem E and Lemma D' (Chapter 3's first form)
sharp = sharp_rank_bound(len(family.S),  # the sharper lemma, strict bounds
                         dict(Counter(1 / r for r in family.certificate.rho.values())))
print(f"E1 witness: |S| = {len(family.S)}, {len(family.targets)} sequences, "
      f"certified single-head rank >= {sharp.rank} (first form: {bound.rank})")
for w in sandwich_windows(RESULTS / "heads"):  # Chapter 3's table, re-verified
    if w.family == "e1_28":
        glue_text(w.key, w.text)

# %% [markdown]
# ## 1. Signed kernels
#
# ### 1.1 The signed head and its denominator
#
# ```{prf:definition} Signed head
# :label: def-signed-head
#
# A *signed head* of feature rank $r$ has feature maps $\phi_Q(x)$, $\phi_K^{(p)}(z)$ in
# $\mathbb{R}^r$ of any sign, weights $\alpha_p = \langle \phi_Q(x), \phi_K^{(p)}(x_p)\rangle$,
# and output
# $y(X) = \sum_p \alpha_p f_p / D(X) + b(x)$ with $D(X) = \sum_p \alpha_p$ and
# $f_p = \langle a(x), v^{(p)}(x_p)\rangle$. It **counts** on a family of inputs when
# $D(X) \neq 0$ on every input of the family, and **solves** the family when in addition
# $|y(X) - t(X)| < 1/2$ there.
# ```
#
# The weights $\alpha_p / D$ still sum to one but may leave $[0, 1]$: the output becomes an
# affine, not a convex, combination of the scores. The only new problem is the denominator,
# which can vanish or change sign. Our rule — the head must define an output on every input
# we ask about, nothing more — is the most permissive one under which "solves" has a
# meaning: a lower bound proved under it is as strong as possible, and a head that solves
# under it is a real solution. Clipping $D$ away from zero would change the model and hide
# where it breaks; dropping the normalisation altogether is hopeless, as the next statement
# shows, so normalisation stays.
#
# ```{prf:proposition} Normalisation is needed
# :label: prop-normalisation-needed
#
# No model whose output for a fixed query is a sum $g_0(x) + g_1(x, x_1) + g_2(x, x_2)$ of one
# function per key position — in particular no unnormalised signed head, of any rank — has
# error below $1/2$ on all length-3 inputs, for any $m \ge 2$.
# ```
#
# ```{prf:proof}
# Take the query $x = 11$ (padded with zeros) and keys in $\{00, 11\}$, with overlaps $0$
# or $2$. The targets $t(a, b) = \min(a, b)$ at $(0,0), (0,2), (2,0), (2,2)$ are $0, 0, 0, 2$,
# whose alternating sum $t(0,0) - t(0,2) - t(2,0) + t(2,2)$ is $2$. The alternating sum of
# any additive function $g_0 + g_1(a) + g_2(b)$ is $0$, so the four errors have an
# alternating sum of absolute value $2$ and one of them is at least $2/4 = 1/2$.
# ```

# %%
targets = {(a, b): min(a, b) for a in (0, 2) for b in (0, 2)}
alternating = targets[0, 0] - targets[0, 2] - targets[2, 0] + targets[2, 2]
print(f"alternating sum of the four targets: {alternating}; "
      f"forced error >= {Fraction(alternating, 4)}")

# %% [markdown]
# ### 1.2 Signed features are not yet signed kernels (Proved)
#
# The theorem looks at a head only through the values $\alpha_p(x, z)$ on the inputs of the
# family and through the rank $r$. Features with negative entries whose kernel is still
# $\geq 0$ on those inputs give an NKA head in the theorem's sense, and the bound applies to it
# unchanged. Polynomial kernels in the overlap are the natural example; their rank is exact:
#
# ```{prf:proposition} Rank of an overlap kernel
# :label: prop-overlap-rank
#
# For $P$ defined on $\{0, \dots, m\}$ with forward differences $\Delta^j P(0)$, the
# $2^m \times 2^m$ matrix $[P(\langle x, z\rangle)]_{x, z \in \{0,1\}^m}$ has rank
# $\sum \{ \binom{m}{j} : \Delta^j P(0) \neq 0 \}$. A polynomial of degree $k$ in the overlap
# has rank $\sum_{j \le k} \binom{m}{j}$.
# ```
#
# ```{prf:proof}
# Newton's formula gives $P(t) = \sum_j \Delta^j P(0) \binom{t}{j}$, and
# $\binom{\langle x, z\rangle}{j} = \sum_{|J| = j} x_J z_J$ with $x_J = \prod_{i \in J} x_i$.
# So the matrix is $\sum_J \Delta^{|J|}P(0)\, x_J z_J$: a diagonal matrix in the monomial
# basis. The monomials $x_J$, $J \subseteq [m]$, are a basis of the functions on
# $\{0,1\}^m$, so the rank is the number of $J$ with $\Delta^{|J|} P(0) \neq 0$.
# ```
#
# The head below uses $P(t) = (14 - t)^4$ at the key positions (weight 0 on the query's own
# position), values $z$ and readout $\langle x, o\rangle - 9/20$. Its forward differences
# alternate in sign, so a feature realisation through monomials needs negative coefficients;
# we realise it on $F(S)$ by an exact rank factorisation of its $28 \times 66$ kernel table
# (the code is folded above the result).

# %% tags=["hide-input"]
from companion.core.exact import exact_rank
from companion.core.exact import rank_factorisation
from companion.open.signed import newton_coefficients
from companion.open.signed import overlap_kernel_head
from companion.open.signed import overlap_kernel_rank

width = family.S.shape[1]
kernel = [Fraction((14 - t) ** 4) for t in range(width + 1)]  # P(t) = (14 - t)^4
print("forward differences of (14 - t)^4:",
      [int(c) for c in newton_coefficients(kernel[:5])])
# the rank formula against exact ranks of the full 2^m x 2^m matrices
toks = {m: (np.arange(2**m)[:, None] >> np.arange(m)) & 1 for m in (2, 3, 4)}
agree = all(exact_rank([[kernel[int(x @ z)] for z in toks[w]] for x in toks[w]])
            == overlap_kernel_rank(kernel[: w + 1], w) for w in toks)
print(f"rank formula = exact rank for m = 2, 3, 4: {agree}")

head, r = overlap_kernel_head(family, kernel.__getitem__)
S, tokens = np.asarray(family.S), np.asarray(family.tokens)
K = [[kernel[int(x @ t)] for t in tokens] for x in S]
U, V = rank_factorisation(K)
assert (U.dot(V.T) == np.array(K, dtype=object)).all()  # exact factorisation K = U V^T
negative = sum(v < 0 for v in U.ravel()) + sum(v < 0 for v in V.ravel())
# the head's output depends on its features only through the kernel values:
# evaluate them
ids, q = np.asarray(family.token_ids), family.query_position
query_row = {tuple(t): i for i, t in enumerate(S)}
worst = Fraction(0)
for seq, target in zip(ids, family.targets, strict=True):
    i = query_row[tuple(tokens[seq[q]])]
    keys = [seq[p] for p in range(len(seq)) if p != q]
    w = [K[i][k] for k in keys]
    scores = [int(S[i] @ tokens[k]) for k in keys]
    y = sum(wk * sk for wk, sk in zip(w, scores)) / sum(w) - Fraction(9, 20)
    worst = max(worst, abs(y - int(target)))
display(Table([{"feature rank": r, "negative feature entries": int(negative),
                "exact max error on F(S)": str(worst), "solves": worst < Fraction(1, 2),
                "certified bound": sharp.rank}],
              caption="signed features, nonnegative kernel: an NKA head"))

# %% [markdown]
# It solves $F(S)$ with rank 28, above the certified 22, as {prf:ref}`thm-exponential-rank`
# demands: signed *features* alone are no loophole. The question is about signed *kernels*,
# whose values $\alpha_p(x, z)$ are themselves negative on inputs of the family.
#
# ### 1.3 What the certificate still proves (Proved)
#
# The certificate of Chapter 3 passes through three steps: gap domination on each chain link
# ({prf:ref}`lem-gap-domination`), multiplication along chains
# ({prf:ref}`lem-amplification`), and rank lower bounds for the matrix of weight ratios
# ({prf:ref}`lem-trace-rank`, {prf:ref}`lem-shifted-trace`). Write $B$ for the value of the
# sharper lemma on a witness family (so NKA heads need $\lfloor B\rfloor + 1$,
# {prf:ref}`cor-strict-sandwich`) and $T$ for the trace value alone.
#
# ```{prf:proposition} The certificate for signed heads
# :label: prop-signed-certificate
#
# Let a signed head of feature rank $r$ solve a witness family $F(S)$ (length $n \geq 3$).
#
# (a) If on $F(S)$ the denominators of each query share one sign, then
# $r \geq \lfloor B \rfloor$.
#
# (b) If the key maps do not depend on the position, then $r \geq \lceil T \rceil - 1$.
# ```
#
# ```{prf:proof}
# (a) Replacing $\phi_Q(x)$ by $-\phi_Q(x)$ flips all denominators of query $x$ and leaves
# the output unchanged, so we may assume every denominator is positive. The mediant identity
# of {prf:ref}`lem-mediant` is algebra and holds for any signs. Gap domination uses signs in
# one place only: the mediant of arrangements with positive denominators lies between their
# outputs. So {prf:ref}`lem-gap-domination` and then {prf:ref}`lem-amplification` hold
# verbatim, with the total weight $D(x; z) = \alpha_q(x, x) + \langle \phi_Q(x), \sum_{p \neq
# q} \phi_K^{(p)}(z)\rangle$. That is a rank-$\leq r$ matrix plus a rank-one matrix (the
# self-weight), so the ratio matrix $M[x, y] = D(x; \bar y) / D(x; \bar x)$ has rank at most
# $r + 1$, unit diagonal and entries in $(0, 1/R_{xy}] \subset (0, 1/\rho_{xy})$ (the head's
# error is below $1/2$, so $R_{xy} > \rho_{xy}$); {prf:ref}`cor-strict-sandwich` applies, and
# $r + 1 \geq \lfloor B \rfloor + 1$. (For an NKA head the self-weight is $\geq 0$ and can
# be dropped, which is why the NKA bound does not lose the one.)
#
# (b) With shared keys, the arrangements of a mixed sequence are the same multiset of
# weighted scores, so for $n = 3$ the mixed sequence is exactly the mediant of the two pure
# ones: $y_{\text{mix}} = (1 - \mu) y_z + \mu y_{z'}$ with $\mu = D_{z'} / (D_z + D_{z'})$,
# now any real number. With errors $e \in [-\varepsilon, \varepsilon]$ and gap $g$,
# $e_{\text{mix}} - e_z = \mu (g + e_{z'} - e_z)$, and $g + e_{z'} - e_z \geq g - 2\varepsilon >
# 0$. If $\mu \geq 0$ this is the convex case of gap domination; if $\mu < 0$ then
# $D_z / D_{z'} = 1/\mu - 1 \leq -g / (2\varepsilon)$. Either way
# $|D_z| \geq c_{3,\varepsilon}(g)\,|D_{z'}|$, and with $k, l$ copies the same computation gives
# $c_{n,\varepsilon}(g)$. Absolute values multiply along chains, so $|M[x, y]| \leq
# 1/\rho_{xy}$ with unit diagonal and rank $\leq r + 1$. {prf:ref}`lem-trace-rank` holds for
# every real matrix; the shift of {prf:ref}`lem-shifted-trace` needs entries of one sign to
# help and is lost.
# ```

# %%
from companion.open.signed import one_sign_rank_lower_bound
from companion.open.signed import signed_rank_lower_bound

needed = {"nka": sharp.rank, "positive": one_sign_rank_lower_bound(sharp),
          "shared_keys": signed_rank_lower_bound(bound, "shared_keys"),
          "position_dependent": "open"}
settings = [("nka", "NKA head (Theorem E, sharper lemma)"),
            ("positive", "signed, one sign per query: (a)"),
            ("shared_keys", "signed, shared keys: (b)"),
            ("position_dependent", "signed, position-dependent keys, any signs")]
Table([{"head class": text, "rank needed on F(S)": needed[s],
        "first form (Lemma D')": signed_rank_lower_bound(bound, s)
        if s != "position_dependent" else "open"} for s, text in settings],
      caption=f"E1's witness: B = {sharp.value}, T = {bound.trace_bound} "
              f"≈ {float(bound.trace_bound):.2f}")

# %% [markdown]
# ### 1.4 Where the proof stops (Proved: a counterexample to one step)
#
# With keys that depend on the position and denominators of both signs, the two arrangements
# $(x, z, z')$ and $(x, z', z)$ of a mixed sequence can have denominators of opposite sign.
# Their mediant then lies outside the interval between their outputs, and gap domination
# fails:
#
# ```{prf:example} Gap domination fails for a signed head
# :label: ex-signed-link
#
# A rank-1 head with weight 0 on the query's own position, on a link of gap $g = 4$ at error
# $\varepsilon = 2/5$: key weights $\alpha_1(z) = 5$, $\alpha_2(z) = -4$, $\alpha_1(z') = 0$,
# $\alpha_2(z') = 1$. Both pure sequences have denominator $1$, the two arrangements $6$ and
# $-4$. Scores chosen so that the four outputs have errors $0, 0, +2/5, -2/5$: the head is
# within $2/5$ on the whole link, yet $D(z)/D(z') = 1$ where gap domination demands
# $c_{3,2/5}(4) = 4$.
# ```

# %%
from companion.bounds.gap_domination import gap_domination_factor
from companion.open.signed import signed_attention
from companion.open.signed import signed_denominators
from companion.open.signed import signed_link_counterexample

head, x, z, zp = signed_link_counterexample(4, Fraction(2, 5))
seqs = np.stack([[x, z, z], [x, zp, zp], [x, z, zp], [x, zp, z]])
outputs = signed_attention(head, seqs, exact=True)
dens = signed_denominators(head, seqs, exact=True)
link_targets = [0, 4, 0, 0]
Table([{"sequence": name, "denominator": str(d), "output": str(y), "target": t,
        "error": str(abs(y - t))}
       for name, d, y, t in zip(["(x,z,z)", "(x,z',z')", "(x,z,z')", "(x,z',z)"],
                                dens, outputs, link_targets, strict=True)],
      caption=f"D(z)/D(z') = {dens[0] / dens[1]}, gap domination needs >= "
              f"{gap_domination_factor(4, 3, Fraction(2, 5))}")

# %% [markdown]
# This breaks the *proof*, not the wall: it is one link of one query. By
# {prf:ref}`prop-signed-certificate`, any signed head that solves a witness family below
# $\lceil T \rceil - 1$ features must use position-dependent keys *and* opposite-sign
# arrangements on some links. Whether such a head exists at low rank — on a witness family or
# on all inputs — is the open question of this section.
#
# ### 1.5 Training signed heads on E1's witness (Measured)
#
# The stacked model `signed_heads` is E1's table head with features
# $\phi = (1 + 0.1\,g) \odot e^{u}$ and free gains $g$ starting at 0: every model starts as
# exactly the NKA head of the same seed and rank, and differs only in what training may do.
# A second start, *signed start*, negates half of each model's columns
# ($\alpha = K_+ - K_-$), so it begins deep inside the signed regime. Protocol: E1's, with
# its full schedule and seeds (3,000 MSE + 2,000 surrogate steps, seeds 0–4), so the one-head
# NKA reference is the committed `results/e1_full.json` at the same budget. The run behind
# this section is `python -m companion probes --full --scheduler local:2`
# (`results/probes_full.json`; 12 units, each a model kind × a block of seeds; 38 minutes on
# two shared, busy cores, 4,300 s of unit time in all). An earlier run at E1's quick budget (1,200
# + 800 steps, seeds 0–2) is kept
# as `results/probes_full_e1quick.json`; Section 2.1 compares the two.

# %% tags=["hide-input"]
from companion.experiments.probes import e1_probe_rows
from companion.experiments.probes import probe_table
from companion.experiments.probes import signed_bound_violations
from companion.experiments.probes import summarise_probes

rows = summarise_probes(probes)
nka_rows = [r for r in e1_probe_rows(e1_full) if r["total_rank"] >= 8]
signed = [r for r in rows if r["kind"].startswith("signed")]
display(probe_table(nka_rows + signed,
                    caption="best max error on F(S), median over seeds [min, max]; "
                    "exact: solved heads re-verified in rational arithmetic"))
records = [rec for unit in probes["units"].values() for rec in unit["models"]]
sign_rows = []
for kind in ("signed_pos", "signed_shared", "signed_columns"):
    recs = [rec for rec in records if rec["kind"] == kind]
    sign_rows.append({"start": kind, "models": len(recs),
                      "one sign per query": sum(rec["sign_consistent"] for rec in recs),
                      "links with flipped arrangements": max(rec["arrangement_flips"]
                                                             for rec in recs),
                      "negative weights (max share)": max(rec["negative_weights"]
                                                          for rec in recs)})
display(Table(sign_rows, caption="signs of the trained heads' denominators on F(S)",
              formats={"negative weights (max share)": ".3f"}))
print("trained heads contradicting the signed certificate:",
      signed_bound_violations(probes, bound))

# %% [markdown]
# Signed heads started at the NKA head behave like NKA heads: no rank below 28 solves, and
# their denominators keep one sign per query, so gradient descent from there does not use the
# extra freedom at all (the same run's shares of negative weights are in the table). Started
# inside the signed regime, with many negative weights and sign-changing arrangements, they
# do not train at all at this budget (best max error above 4 on every seed), even at rank 32
# where NKA heads solve. Training
# therefore neither finds a counterexample nor rules one out; what it confirms is that nothing
# it found contradicts {prf:ref}`prop-signed-certificate` (the check above would list any
# exactly verified signed head below the applicable bound).
#
# ### 1.6 All length-3 inputs at small $m$ (Measured: exact LPs over a stated class)
#
# At small $m$ the certified bound is weak (Chapter 3), so an exhaustive question makes more
# sense there: which kernels solve *every* length-3 input? A *level head* sees an input only
# through the query's weight $w = |x|$ and the two overlaps: kernel $P_w(\langle x, z\rangle)$
# at the key positions, a self-weight $s_w$, scores any functions of $(w, \text{overlap})$.
# With $P_w$ of degree $\leq k$ in the overlap its feature rank on $\{0,1\}^m$ is
# $\sum_{j \le k}\binom{m}{j} + 1$ ({prf:ref}`prop-overlap-rank`, plus the self-weight). For
# fixed $w$, $k$ and denominator signs, "is there a level head with max error $\leq E$" is a
# linear programme; we solve it in rational arithmetic and keep either a point (re-checked)
# or a Farkas certificate (re-checked) that proves infeasibility.
#
# ```{prf:proposition} Level heads on all length-3 inputs
# :label: prop-level-heads
#
# For every query weight $w \leq 8$, an NKA level head with error $< 1/2$ on every length-3
# input exists with kernel degree $0$ ($w = 1$), $1$ ($2 \leq w \leq 5$) and $2$
# ($6 \leq w \leq 8$), and no level head of smaller degree has error $< 1/2$. Signed level
# heads whose denominators share one sign need exactly the same degrees.
# ```
#
# The proof is the table below: each entry is an LP solution or a Farkas certificate, both
# re-checked exactly (`results/probes_exact.json`, from `python -m companion probes --exact`;
# the cell re-derives the entries for $w \leq 4$ live and compares). The one gap in the
# certificates is degree 0 at $w = 2$, whose best error is exactly $1/2$: a constant kernel
# makes the output additive in the two overlaps, and the four-point argument of
# {prf:ref}`prop-normalisation-needed` rules it out.

# %%
from companion.open.level_heads import level_feature_rank
from companion.open.level_heads import min_level_degree

level = exact_tables["level"]
for w in range(1, 5):  # live re-derivation of the first rows (exact: compared exactly)
    k, _, proved = min_level_degree(w, "nka")
    stored = next(row for row in level if row["kind"] == "nka" and row["w"] == w)
    assert (k, proved) == (stored["k"], stored["proved_impossible"]), w
by_w = {(row["kind"], row["w"]): row for row in level}
Table([{"w = m": w, "NKA degree": by_w["nka", w]["k"],
        "degrees proved impossible": str(by_w["nka", w]["proved_impossible"]),
        "signed (one sign) degree": by_w["positive", w]["k"],
        "feature rank on {0,1}^m": level_feature_rank(w, by_w["nka", w]["k"]),
        "indicator head 2^m": 2**w} for w in range(1, 9)],
      caption="least kernel degree of a level head with error < 1/2 on every input")

# %% [markdown]
# So on all length-3 inputs a single NKA head of rank $m + 2$ suffices for $m \leq 5$ and one
# of rank 23, 30, 38 for $m = 6, 7, 8$, well below the $2^m$ of a head that indicates every
# token. Signed kernels with one sign per query do no better in this class, which is what
# {prf:ref}`prop-signed-certificate` predicts. Signed level heads with position-dependent keys
# and sign-changing denominators are an LP only once their sign pattern is fixed; searching
# all patterns is the part we did not do.
#
# ### 1.7 What is open about signed kernels
#
# Whether a signed head with position-dependent keys and sign-changing denominators can solve
# a witness family — or all length-3 inputs — with fewer features than the NKA certificate
# (at least below $\lceil T \rceil - 1$). {prf:ref}`prop-signed-certificate` says such a head
# must flip the sign of arrangement denominators on some links, {prf:ref}`ex-signed-link`
# shows that this can beat gap domination on one link, and nothing we trained or solved came
# close to doing it on a whole family.
#
# ## 2. Several heads
#
# ```{prf:definition} Several heads
# :label: def-multihead
#
# $H$ NKA heads $h = 1, \dots, H$ of feature ranks $r_h$, each with its own features, values
# and readout, combined by one query-dependent affine readout:
# $y(X) = \sum_h \langle a_h(x), o_h(X)\rangle + b(x)$ with
# $o_h = \sum_p \alpha^h_p v^h_p / \sum_p \alpha^h_p$. Its total feature rank is
# $\sum_h r_h$. The keys reach the query only through the $H$ sketches
# $(\sum_p \phi^h_{K,p} v^{h\top}_p, \sum_p \phi^h_{K,p})$, i.e. $\sum_h r_h (d_h + 1)$
# numbers; at finite precision this is a transcript model ({prf:ref}`def-transcript-model`).
# ```
#
# Each head's output is still a convex combination of its own scores; the sum of two is not a
# convex combination of anything. On a chain link ($z$ better than $z'$ by $g$), write
# $\mu_h$ for the weight head $h$ puts on $z'$ in the mixed sequence and $\Delta_h$ for the
# change of its score. The mixed output is $y(z) + \sum_h \mu_h \Delta_h$, while the pure
# outputs force $\sum_h \Delta_h = g$. One head needs $\mu \approx 0$, which is gap
# domination. Two heads only need $\mu_1 \Delta_1 + \mu_2 \Delta_2 = 0$ with
# $\Delta_1 + \Delta_2 = g$, which is solvable whenever $\mu_1 \neq \mu_2$, with *any* weights.
#
# ```{prf:proposition} Two heads of rank one on a witness family
# :label: prop-two-heads
#
# If the chain links of every query of $F(S)$ form a forest, two NKA heads of rank 1 solve
# $F(S)$ with error $0$.
# ```
#
# ```{prf:proof}
# Head 1 weighs the key positions uniformly; head 2 gives key $z$ the weight
# $\psi(z) = 1 + \mathrm{index}(z)$ for every query (both give the query's position weight
# 0). On a link $(z, z', g)$ with one copy of $z$ and $n - 2$ of $z'$, $\mu_1 = (n-2)/(n-1)$
# and $\mu_2 = (n-2)\psi(z') / (\psi(z) + (n-2)\psi(z'))$, and $\mu_1 \neq \mu_2$ since
# $\psi(z) \neq \psi(z')$. Set head 2's score $F_2(x, \cdot)$ to 0 at the root of each tree
# of $x$'s links and increase it by $\mu_1 g / (\mu_1 - \mu_2)$ along each link; set
# $F_1 = \langle x, z\rangle - F_2$. Pure sequences are exact because $F_1 + F_2 =
# \langle x, z\rangle$, and on every mixed one $\mu_1 \Delta_1 + \mu_2 \Delta_2 =
# \mu_1 g - (\mu_1 - \mu_2)\Delta_2 = 0$. Values are one-hot over $S$, readouts $e_x$.
# ```

# %%
from companion.open.multihead import multihead_max_error_exact
from companion.open.multihead import two_head_witness_heads

heads = two_head_witness_heads(family)  # raises if some query's links are not a forest
print(f"two rank-1 heads on E1's witness: exact max error "
      f"{multihead_max_error_exact(heads, family.sequences)} on all "
      f"{len(family.targets)} sequences; total feature rank 2 against the certified "
      f"{sharp.rank}")

# %% [markdown]
# Several heads break the single-head certificate completely on $F(S)$. The price is in the
# value width: $d = |S| = 28$ per head. The single-head theorem allows any $d$, so in the
# theorem's own currency, feature rank, the comparison is fair.
#
# On all length-3 inputs the same mechanism works with more heads:
#
# ```{prf:proposition} Polynomially many heads on all length-3 inputs
# :label: prop-cauchy-heads
#
# The $2m + 1$ NKA heads with kernels $\langle x, z\rangle + t_h$, $t_h = h + 1/2$ (rank
# $m + 1$ each, weight 0 at the query's position) and suitable scores have error $0$ on every
# length-3 input in $\{0,1\}^m$. Total feature rank $(2m+1)(m+1)$.
# ```
#
# ```{prf:proof}
# For a query of weight $w$ and keys of overlaps $a, b$, head $h$ outputs
# $(P_h(a) + P_h(b)) / (a + b + 2t_h)$, where $P_h(a) = (a + t_h) F_h(a)$ is free through the
# scores. The functions $s \mapsto 1/(s + 2t_h)$, $h = 0, \dots, 2w$, on $s \in \{0, \dots,
# 2w\}$ form an invertible Cauchy matrix, so some combination
# $\sum_h C_{s_0 h} / (s + 2t_h)$ is the indicator of $s = s_0$. On a fixed sum
# $a + b = s_0$, $\min(a, b) = g_{s_0}(a) + g_{s_0}(b)$ with $g_{s_0}(a) = \min(a, s_0 - a)/2$.
# Then $P_h = \sum_{s_0} C_{s_0 h}\, g_{s_0}$ gives $\sum_h (P_h(a) + P_h(b))/(a + b + 2t_h) =
# \min(a, b)$ for all $a, b \leq w$.
# ```
#
# The heads see an input only through $(|x|, a, b)$, so checking every such class is an
# exhaustive check. With error $< 1/2$ instead of $0$, fewer heads of the same kind suffice;
# the least number per weight comes from exact LPs over the scores (infeasibility again
# proved by checked Farkas certificates).

# %%
from companion.open.multihead import answer_function_count
from companion.open.multihead import cauchy_level_max_error

overlap = {row["w"]: row for row in exact_tables["overlap_heads"]}
rows_all = []
for m in range(3, 9):
    assert cauchy_level_max_error(m) == 0  # every class (|x|, a, b): exact, error 0
    lp_heads = max(overlap[w]["heads"] for w in range(1, m + 1))
    nka_single = level_feature_rank(m, by_w["nka", m]["k"])
    rows_all.append({"m": m, "exact heads: total rank": (2 * m + 1) * (m + 1),
                     "error < 1/2: heads": lp_heads,
                     "total rank": lp_heads * (m + 1),
                     "one level head: rank": nka_single})
Table(rows_all, caption="NKA feature rank on every length-3 input in {0,1}^m "
      "(all entries exact)")

# %% [markdown]
# In the limit, several heads escape the wall *in feature rank*: $(2m+1)(m+1)$ against the
# $2^{\Omega(m)}$ that {prf:ref}`thm-exponential-rank` forces on one head through random
# codes. At the small $m$ we can check, a single level head is still cheaper up to $m = 5$;
# from $m = 6$ on the heads with error $< 1/2$ are cheaper (14 against 23 at $m = 6$). Both
# constructions pay in the value width ($d = 2^m$ here), since the scores are arbitrary
# functions of $(|x|, \langle x, z\rangle)$.
#
# A counting argument in the spirit of {prf:ref}`thm-transcript` measures something else:
# the numbers in the keys' sketch, $\sum_h r_h(d_h + 1)$, at $b$ bits each. Two key pairs
# with different answer tables $x \mapsto \min(\langle x, z\rangle, \langle x, z'\rangle)$
# must send different sketches, so the sketch needs at least $\log_2$ (number of answer
# tables) bits. On all length-3 inputs these tables are few:

# %%
counts = {m: answer_function_count(m) for m in range(1, 8)}
Table([{"m": m, "answer tables": c, "bits needed": (c - 1).bit_length()}
       for m, c in counts.items()],
      caption="distinct answer tables over all key pairs (z, z')")

# %% [markdown]
# At 32 bits per number a single number of sketch passes the counting bound for every
# $m \le 7$, so the transcript bound neither obstructs these constructions nor explains the
# single-head wall: it measures information, not how a normalised head spends its features.
#
# ### 2.1 Training several heads on E1's witness (Measured)
#
# `multi_heads` stacks $H$ table NKA heads (E1's exp features) of rank $r$ each, $d = 16$
# per head, one bias; same protocol and budget as above. Every model that solves with total
# rank below the certificate is re-verified in exact rational arithmetic.

# %% tags=["hide-input"]
multi = [r for r in rows if r["kind"] == "multi"]
display(probe_table(multi, caption="H NKA heads of rank r, total H r"))


budgets = {"quick": (e1_quick, probes_quick_budget), "full": (e1_full, probes)}
for e1_res, probe_res in budgets.values():  # each pair was trained at one budget
    assert all(e1_res["config"][k] == probe_res["config"][k]
               for k in ("steps", "surrogate_steps", "seeds", "lr", "d"))
classes = [("one NKA head (E1)", "nka", 1)] + [
    (f"signed, {what}", kind, 1) for kind, what in (("signed_pos", "NKA start"),
                                                    ("signed_shared", "shared keys"),
                                                    ("signed_columns", "signed start"))] + [
    (f"{h} NKA heads", "multi", h) for h in sorted({r["heads"] for r in multi})]
smallest = []
for label, kind, h in classes:
    row, checks = {"model": label}, []
    for name, (e1_res, probe_res) in budgets.items():
        source = e1_probe_rows(e1_res) if kind == "nka" else [
            r for r in summarise_probes(probe_res) if r["kind"] == kind and r["heads"] == h]
        solving = [r["total_rank"] for r in source if r["solved"] > 0]
        least = min(solving) if solving else "-"
        # every exactly re-verified head below the certificate solved exactly
        exact_ok = all(r["exact"] == r["checked"] for r in source if r["total_rank"] < bound.rank)
        row["grid H r"] = str(sorted({r["total_rank"] for r in source}))
        row[f"{name}: smallest"] = least
        row[f"{name}: seeds"] = next(
            (f"{r['solved']}/{r['seeds']}" for r in source if r["total_rank"] == least), "-")
        checks.append(exact_ok)
    row["exact re-checks passed"] = all(checks)
    smallest.append(row)
cq, cf = probes_quick_budget["config"], probes["config"]
Table(smallest, caption="smallest total rank H r that solves on at least one seed (seeds: how "
      f"many solve there), at E1's quick budget ({cq['steps']:,} + {cq['surrogate_steps']:,} "
      f"steps, seeds {cq['seeds'][0]}-{cq['seeds'][-1]}) and its full budget ({cf['steps']:,} + "
      f"{cf['surrogate_steps']:,} steps, seeds {cf['seeds'][0]}-{cf['seeds'][-1]})")

# %% [markdown]
# With one head nothing below rank 28 solves at either budget; with two, four or eight heads
# the smallest total rank in the grid that solves is far below the certificate, and every such
# head passed the exact re-verification. The longer budget (2.5 times the steps, five seeds
# instead of three) changes the picture only where training was the bottleneck: two heads now
# solve at total rank 4 on every seed (at the quick budget the smallest was 8), while four
# and eight heads already solved at the smallest total rank of their grids (4 and 8). For one
# head and for signed heads the smallest solving rank stays 28 (a minority of seeds there,
# all seeds at 32): below the certified bound 22 the longer budget rescued no single-head
# model, signed or not. What it moved is the several-heads row, where
# {prf:ref}`prop-two-heads` already allows solutions far below the certificate. Training does not
# find the rank-1 pair of
# {prf:ref}`prop-two-heads` (it has only $d = 16$ value dimensions per head, the construction
# uses 28): it finds solutions with more features and fewer value dimensions.

# %% [markdown]
# ## 3. The picture

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Best max error on E1's witness family against total feature rank $Hr$ (log scales): one head, several heads, signed features, at E1's full budget (median over seeds 0\u20134, bars from the best to the worst seed; all read from the committed runs). Below the dotted line at $1/2$ a head solves the family. The grey region starts at the NKA certificate $r \\geq 22$ (the exact minimum for one head here); the thin red lines mark the signed bounds 21 (one sign per query) and 13 (shared keys). Stars are exact constructions at their exact errors (error 0 drawn at the axis floor).", "name": "fig-open-probes"}, "image": {"alt": "Log-log plot of best maximum error on the E1 witness family against total feature rank H times r, for single nonnegative heads, two heads of rank one and signed features, with bars from best to worst seed, a dotted line at one half, a grey region from the certificate onwards and thin red lines at the signed bounds."}}
from companion.experiments.probes import probe_figure

fig, ax = plt.subplots(figsize=(7.2, 5.4))
one_head = [r for r in e1_probe_rows(e1_full) if r["total_rank"] <= 64]
# the figure marks bound.rank (NKA) and bound.rank - 1 (signed, (a)): give it the sharper
# integer bound, so that it draws 22 and 21
probe_figure(one_head + rows, dataclasses.replace(bound, sharpened_rank=sharp.rank), ax=ax)
ax.plot([2], [1e-5], marker="*", ms=12, color="tab:blue", ls="none",
        label="2 heads of rank 1 (Prop.)")
ax.plot([28], [0.45], marker="*", ms=12, color="tab:red", ls="none",
        label="signed features (Sec. 1.2)")
ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3)
ax.set_xlim(1.5, 80)
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Summary
#
# - **Proved.** Normalisation is necessary ({prf:ref}`prop-normalisation-needed`); signed
#   *features* with a nonnegative kernel are NKA heads and obey the bound (a rank-28 example
#   on $F(S)$); a signed head whose denominators keep one sign per query needs
#   $\lfloor B\rfloor$ features (21 on E1's witness, where one NKA head needs
#   {glue:text}`window-e1-real`) and
#   one with shared keys $\lceil T\rceil - 1$ (13) ({prf:ref}`prop-signed-certificate`).
# - **Proved.** Several heads escape: two rank-1 heads are exact on E1's witness (total rank
#   2 against 22), and $2m+1$ heads of rank $m+1$ are exact on all length-3 inputs
#   ({prf:ref}`prop-two-heads`, {prf:ref}`prop-cauchy-heads`), paying in value width.
# - **Measured.** Exact LPs: single level heads need kernel degree 1 up to $m = 5$ and 2 for
#   $m = 6, 7, 8$, signed (one sign) or not; two or three overlap heads reach error $< 1/2$
#   for $m \le 8$. Training at E1's full budget (3,000 + 2,000 steps, seeds 0–4): no signed
#   head solves below rank 28, as at the quick budget; $H = 2, 4, 8$ heads solve from total
#   rank 4, 4, 8 (two heads: 8 at the quick budget), far below the certificate, every such
#   head exactly re-verified.
# - **Open.** Signed heads with position-dependent keys and sign-changing denominators: gap
#   domination fails on a link ({prf:ref}`ex-signed-link`), and whether they beat the wall is
#   unknown. For several heads: whether total *sketch size* $\sum_h r_h(d_h + 1)$ can stay
#   polynomial on all inputs, and whether total feature rank $\Omega(m)$ is necessary.

# %% [markdown]
# ## Audit trail
#
# The verdicts above are read from committed runs. The folded cell re-trains a small subset
# live, to show the code runs here: four heads of rank 1, seeds 0 and 1, on a short schedule
# (200 + 100 steps, `PROBES_QUICK`), checked against the committed run of the same
# configuration (`python -m companion probes --quick`, `results/probes_quick.json`): each best
# max error within $\pm 0.25$ of the stored one (at least three times the measured
# cross-path spread), and the verdict "solves" unchanged wherever the stored value is farther
# than that from $1/2$. At this short budget the heads do not solve yet.

# %% tags=["hide-cell"]
from companion.experiments.probes import PROBES_QUICK
from companion.experiments.probes import run_probe_sweep
from companion.experiments.reference import check_against_reference

reference = json.loads((RESULTS / "probes_quick.json").read_text())
live = run_probe_sweep(PROBES_QUICK, family=family)
assert live["config_hash"] == reference["config_hash"]  # the same configuration
stored = {(rec["heads"], rec["rank"], rec["seed"]): rec["best_max_error"]
          for rec in reference["units"]["multi_H4"]["models"]}
now = {(rec["heads"], rec["rank"], rec["seed"]): rec["best_max_error"]
       for rec in live["units"]["multi_H4"]["models"]}
check = check_against_reference(now, stored, quantity="best max error", tolerance=0.25,
                                threshold=0.5)
print(check.summary())
assert check.passed, check.failure_message()
