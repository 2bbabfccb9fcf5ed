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
# # Dense softmax solves it at a constant temperature (Proposition F)
#
# The lower bound of the previous chapters is about nonnegative kernels of *finite* feature
# rank. Dense softmax attention is a nonnegative kernel too, $\alpha(x,z) = e^{\langle q(x),
# k(z)\rangle}$, so gap domination ({prf:ref}`lem-gap-domination`) binds it as well — but
# its weights are exponential in the score, and the ratios that gap domination demands are
# exactly what an exponential delivers. This chapter gives the construction of the paper's
# Proposition F {cite}`opazo2026threetokens` in our own formalisation: scores in
# $\mathbb{R}^m$ and one temperature that works for every token width $m$.
#
# ```{admonition} Key result
# :class: tip
# Dense softmax attention with $m$-dimensional scores solves length-three Min-IP for
# every token width at one constant temperature ({prf:ref}`prop-dense-softmax`): $\beta >
# \ln 4$ suffices. The exact threshold is $\beta^* = \ln 6 / 2 \approx 0.896$ for every
# $m \ge 2$ ({prf:ref}`thm-softmax-threshold`), proved in closed form and confirmed by
# exhaustive search for $m \le 8$. Verdicts — {claim-verdict}`prop-f`;
# {claim-verdict}`prop-f-threshold`.
# ```
#
# Then we measure it: the head's exact worst-case error over **all** length-$n$ inputs for
# small $m$, against the proven bound, and the exact temperature $\beta^*(n, m)$ at which
# the worst case drops below $1/2$. The proposition's threshold is sufficient, not sharp;
# the numbers say by how much.
#
# **Code for this chapter:** `companion.core.constructions` (Proposition F's head,
# {prf:ref}`prop-dense-softmax`, and the softmax kernel as a table head),
# `companion.softmax` (exact worst cases over overlap profiles,
# {prf:ref}`lem-overlap-profiles`, and the thresholds), `companion.bounds.gap_domination` (link
# checks), `companion.core.attention` and `companion.book`.

# %% tags=["remove-cell"]
# Colab or a bare kernel: install the companion (book/reading.md, "Three ways to run")
try:
    import companion  # noqa: F401
except ModuleNotFoundError:
    # %pip install --quiet "companion @ git+https://github.com/three-tokens/companion@main"
    import companion  # noqa: F401

# %% tags=["hide-input"]
import math
from fractions import Fraction

import matplotlib.pyplot as plt
import numpy as np
from IPython.display import display

from companion.book import Table
from companion.book import seed_everything
from companion.book import use_book_style
from companion.bounds.gap_domination import family_checks
from companion.core.attention import softmax_attention
from companion.core.constructions import softmax_kernel_head
from companion.core.constructions import softmax_min_ip_head
from companion.core.task import count_sequences
from companion.core.task import query_target
from companion.softmax import count_profiles
from companion.softmax import error_bound
from companion.softmax import exact_threshold
from companion.softmax import max_error
from companion.softmax import max_error_brute_force
from companion.softmax import max_error_closed_form
from companion.softmax import max_error_closed_form_exact
from companion.softmax import max_error_exact
from companion.softmax import sufficient_threshold
from companion.softmax import threshold_closed_form
from companion.softmax import threshold_closed_form_terms
from companion.softmax import worst_gap
from companion.softmax import worst_profile

rng = seed_everything(0)  # seeds python, numpy and torch
use_book_style()  # figures fit the text column, text >= 9 pt

# %% [markdown]
# ## The construction
#
# ```{prf:proposition} Dense softmax at a constant temperature
# :label: prop-dense-softmax
#
# Let $\beta \ge 1$ and take the softmax head with query map $q(x) = -\beta x$, key map
# $k(z) = z$ (scores in $\mathbb{R}^m$), values $v(z) = z$ and readout
# $y = \langle x, o\rangle$. On every sequence of length $n$ over $\{0,1\}^m$, for every $m$
# and with the query first or last,
#
# $$ 0 \;\le\; y - t \;\le\; (n-1)\, e^{-\beta} . $$
#
# Hence, for $n \ge 3$, any fixed $\beta > \ln(2(n-1))$ — for $n = 3$,
# $\beta > \ln 4 \approx 1.386$ — has error below $1/2$ on all inputs, whatever $m$.
# ```
#
# ```{prf:proof}
# Write $o_p = \langle x, x_p\rangle$ for every position $p$ (the query's own position
# included), $t = \min_p o_p$ and $d_p = o_p - t$, nonnegative integers with at least one
# $d_p = 0$. The weight of position $p$ is
# $w_p = e^{-\beta o_p}/\sum_j e^{-\beta o_j} = e^{-\beta d_p}/\sum_j e^{-\beta d_j}$, and the
# readout returns $y = \sum_p w_p\, o_p = t + \sum_p w_p\, d_p \ge t$. The denominator
# $\sum_j e^{-\beta d_j}$ is at least 1 because one $d_j$ is 0, so
# $y - t \le \sum_{p:\, d_p \ge 1} d_p\, e^{-\beta d_p}$. For $\beta \ge 1$ the function
# $u \mapsto u e^{-\beta u}$ decreases on $[1/\beta, \infty) \supseteq [1, \infty)$, so each
# term is at most $e^{-\beta}$, and at most $n - 1$ positions have $d_p \ge 1$. Finally
# $(n-1)e^{-\beta} < 1/2$ exactly when $\beta > \ln(2(n-1))$, and for $n \ge 3$ this
# threshold is at least $\ln 4 > 1$, so the condition $\beta \ge 1$ holds automatically.
# For $n = 2$ it does not ($\ln 2 < 1$), and this proof says nothing about
# $\beta \in (\ln 2, 1)$; the conclusion still holds there, because the exact threshold for
# $n = 2$ is $\ln 3/2 \approx 0.549$ ({prf:ref}`thm-softmax-threshold`).
# ```
#
# The head attends mostly to the keys of *least* overlap with the query, and its readout
# reports that overlap. Nothing depends on $m$ except the dimension of the scores. The
# condition $\beta \ge 1$ matters for this proof: for smaller $\beta$ a larger gap $d$
# can carry more weight $d e^{-\beta d}$ than a gap of 1, and the worst case can exceed
# $(n-1)e^{-\beta}$. It still does not grow without bound for any fixed $\beta > 0$: it
# stays below $(n-1)/(e\beta)$ for every $m$ and stops changing once $m$ reaches a width
# that depends only on $\beta$ and $n$ ({prf:ref}`cor-softmax-saturation`). Only at
# $\beta = 0$ does it grow with $m$ for ever.
#
# A first look, $n = 3$, $m = 6$, at the threshold temperature:

# %%
beta0 = sufficient_threshold(3)
head = softmax_min_ip_head(beta0)
X = np.array([[[1, 1, 1, 1, 0, 0], [1, 1, 0, 0, 1, 1], [1, 1, 1, 0, 0, 0]],
              [[1, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 1], [1, 1, 1, 1, 1, 0]]])
for convention in ("bidirectional", "causal"):
    y = softmax_attention(head, X, convention)
    print(f"{convention:13s} beta = ln 4: outputs {np.round(y, 6).tolist()}, "
          f"targets {query_target(X, convention).tolist()}")
print(f"bound (n-1) e^-beta at beta = ln 4: {error_bound(beta0, 3):.6f}")

# %% [markdown]
# ## Exhaustive worst case
#
# Enumerating all $2^{nm}$ sequences is out of reach beyond $nm \approx 24$, but this head
# does not need it.
#
# ```{prf:lemma} Overlap profiles suffice
# :label: lem-overlap-profiles
#
# The output and the target of the head of {prf:ref}`prop-dense-softmax` depend on a
# sequence only through $|x|$ and the multiset of key overlaps $\langle x, x_p\rangle$.
# The achievable pairs are exactly $|x| = w \in \{0,\dots,m\}$ with $n - 1$ overlaps in
# $\{0, \dots, w\}$, $\binom{m+n}{n}$ profiles in all, so the worst case over all inputs is
# the worst case over these profiles.
# ```
#
# ```{prf:proof}
# Scores and readout terms use a key only through $\langle x, x_p\rangle$, and the softmax
# average is unchanged by permuting the keys; the target is the minimum of the same
# numbers. For $|x| = w$ the key $z$ with $\langle x, z\rangle = o$ exists for each
# $o \le w$ (switch on $o$ of the query's ones) and no larger overlap is possible, and the
# $n-1$ keys are chosen independently.
# ```
#
# The package evaluates the real softmax head once per profile, on a concrete sequence
# realising it. We first confirm the reduction against brute force over every sequence:

# %%
cases = ([(3, m) for m in range(1, 7)] + [(4, m) for m in range(1, 5)]
         + [(5, m) for m in (1, 2, 3)])
betas_check = (0.0, 0.5, 1.0, math.log(4), 3.0)
largest_diff, sequences = 0.0, 0
for n, m in cases:
    for beta in betas_check:
        diff = abs(max_error(beta, n, m) - max_error_brute_force(beta, n, m))
        largest_diff = max(largest_diff, diff)
    sequences += count_sequences(n, m)
print(f"(n, m) pairs: {len(cases)}, sequences enumerated per beta: {sequences}, "
      f"betas: {len(betas_check)}")
print("profile worst case = brute-force worst case (to 1e-12):", largest_diff <= 1e-12)
brute_38 = max_error_brute_force(1.0, 3, 8)
print(f"n = 3, m = 8, beta = 1 over all {count_sequences(3, 8)} sequences: "
      f"{brute_38:.6f}; from {count_profiles(3, 8)} profiles: "
      f"{max_error(1.0, 3, 8):.6f}")

# %% [markdown]
# ### Max error against $\beta$, length 3, every $m \le 8$

# %%
beta_table = [0.0, 0.5, 1.0, math.log(4), 2.0, 3.0, 5.0]
labels = ["0", "0.5", "1", "ln 4", "2", "3", "5"]
rows = [{"m": m, **{lab: max_error(b, 3, m) for lab, b in zip(labels, beta_table)}}
        for m in range(1, 9)]
rows.append({"m": "bound (beta >= 1)",
             **{lab: error_bound(b, 3) for lab, b in zip(labels, beta_table)}})
display(Table(rows,
              caption="n = 3: exact max error over all inputs (6 decimals), by beta",
              formats={lab: ".6f" for lab in labels}))
print("worst profile (|x|, key overlaps) at m = 8:",
      {lab: worst_profile(b, 3, 8) for lab, b in zip(labels, beta_table, strict=True)})

# %% [markdown]
# At $\beta = 0$ the head averages uniformly and the worst case is $2m/3$ (query $1^m$, one
# key $0$, one key $1^m$). At $\beta = 0.5$ the column grows up to $m = 3$ and then stays put
# ({prf:ref}`cor-softmax-saturation`). From $\beta = 1$ on it no longer depends on $m$ once
# $m \ge 2$: by {prf:ref}`cor-softmax-small-gaps`, for $n \le 15$ and $\beta \ge 1$ only the
# profiles at gaps 1 and 2 can be worst, and both exist as soon as $m \ge 2$. Gap 1 wins once
# $e^\beta \ge 1 + \sqrt n$ ($\beta \ge 1.0051$ for $n = 3$, $1.0986$ for $n = 4$, $1.1744$
# for $n = 5$), so from there on even $m = 1$ agrees: the worst profile is "all non-minimal
# positions at gap 1", with error $u/(1+u)$, $u = (n-1)e^{-\beta}$ — the proven bound is $u$
# itself, the same expression without its denominator. Below $\beta = 1$ the bound is not
# claimed, and at $\beta = 0$ it fails as soon as $2m/3 > 2$.
#
# ### Lengths 4 and 5

# %%
for n in (4, 5):
    rows = [{"m": m, **{lab: max_error(b, n, m) for lab, b in zip(labels, beta_table)}}
            for m in range(1, 9)]
    rows.append({"m": "bound",
                 **{lab: error_bound(b, n) for lab, b in zip(labels, beta_table)}})
    display(Table(rows, caption=f"n = {n}: exact max error over all inputs, by beta",
                  formats={lab: ".6f" for lab in labels}))

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Dense softmax's exact maximum error on all length-3 inputs against the temperature $\\beta$. Top: $n = 3$ for $m = 1, \\dots, 8$ with the bound $2e^{-\\beta}$ (dashed), the sufficient $\\ln 4$ (dotted) and the exact thresholds $\\beta^*$ (dots); the shaded region $\\beta < 1$ is not claimed. Bottom: $n = 3, 4, 5$ at $m = 4$ with their bounds.", "name": "fig-softmax-error"}, "image": {"alt": "Two panels of maximum error against beta from 0 to 4. Top: eight falling curves, one per token width m, below a dashed bound curve, crossing the line at one half before the dotted vertical line at ln 4. Bottom: curves for lengths 3, 4 and 5 at width 4 with their dashed bounds and dotted sufficient thresholds."}}
grid = np.linspace(0.0, 4.0, 161)
fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(7.2, 7.0))
colors = plt.cm.viridis(np.linspace(0, 0.9, 8))
for m, color in zip(range(1, 9), colors, strict=True):
    ax1.plot(grid, [max_error(float(b), 3, m) for b in grid], color=color,
             label=f"$m = {m}$")
ax1.plot(grid, [error_bound(float(b), 3) for b in grid], "k--",
         label=r"bound $2 e^{-\beta}$")
ax1.axvspan(0, 1, color="gray", alpha=0.12, lw=0)
ax1.axhline(0.5, color="tab:red", lw=1, label="$1/2$")
ax1.axvline(sufficient_threshold(3), color="tab:red", ls=":",
            label=r"$\ln 4$ (sufficient)")
for m in (1, 2):
    ax1.plot(exact_threshold(3, m), 0.5, "o", color=colors[m - 1], ms=6)
ax1.set(xlabel=r"$\beta$", ylabel="max $|y - t|$, all length-3 inputs", ylim=(0, 3),
        title=r"$n = 3$ (shaded: $\beta < 1$, bound not claimed; dots: $\beta^*$)")
ax1.legend(loc="upper right", ncol=3)
for n, color in ((3, "tab:blue"), (4, "tab:orange"), (5, "tab:green")):
    ax2.plot(grid, [max_error(float(b), n, 4) for b in grid], color=color,
             label=f"$n = {n}$, $m = 4$")
    ax2.plot(grid, [error_bound(float(b), n) for b in grid], "--", color=color, lw=1,
             label=f"bound ${n - 1} e^{{-\\beta}}$")
    ax2.axvline(sufficient_threshold(n), color=color, ls=":", lw=1)
    ax2.plot(exact_threshold(n, 4), 0.5, "o", color=color, ms=6)
ax2.axhline(0.5, color="tab:red", lw=1)
ax2.set(xlabel=r"$\beta$", ylabel="max $|y - t|$ over all inputs", ylim=(0, 2.5),
        xlim=(0, 4),
        title=r"Lengths 3–5 (dotted: $\ln(2(n-1))$; dots: $\beta^*$)")
ax2.legend(loc="upper right", ncol=2)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## The exact threshold $\beta^*(n, m)$
#
# For each profile the error is the mean gap under weights proportional to
# $e^{-\beta d}$; its derivative in $\beta$ is minus the variance of the gaps, so the worst
# case never increases with $\beta$ and bisection finds
# $\beta^*(n,m) = \inf\{\beta : \text{max error} < 1/2\}$ (to $10^{-12}$; printed to 6
# decimals):

# %%
ns = range(3, 9)
thresholds = {n: [exact_threshold(n, m) for m in range(1, 9)] for n in ns}
# one row per width m, one column per length n: narrow enough for the text column
columns = {f"n = {n}": n for n in ns}
rows = [{"m": m, **{c: thresholds[n][m - 1] for c, n in columns.items()}}
        for m in range(1, 9)]
rows.append({"m": "ln(2(n-1))",
             **{c: sufficient_threshold(n) for c, n in columns.items()}})
display(Table(rows, caption="beta*(n, m); last row: the sufficient temperature",
              formats={c: ".6f" for c in columns}))
print("all beta* below ln(2(n-1)):",
      all(b < sufficient_threshold(n) for n in ns for b in thresholds[n]))
print("sufficient - exact, n >= 4:",
      sorted({round(sufficient_threshold(n) - b, 9)
              for n in ns if n >= 4 for b in thresholds[n]}))
print("worst profile at beta*: n = 3, m = 8:",
      worst_profile(thresholds[3][7] - 1e-9, 3, 8),
      "| n = 5, m = 8:", worst_profile(thresholds[5][7] - 1e-9, 5, 8))

# %% [markdown]
# Where do these numbers come from? Put $n - 1$ positions (the query's own slot among them)
# at a common gap $d$ and one key at the minimum: the *uniform profile* $U_d$. Its error is
# $(n-1)\,d\,e^{-\beta d}/(1 + (n-1)e^{-\beta d})$. No other profile is ever worse, and this
# gives the threshold in closed form for every $n$ and $m$.
#
# ```{prf:theorem} Worst case and exact threshold of the softmax head
# :label: thm-softmax-threshold
#
# Let $n \ge 2$, $m \ge 1$ and $\beta \ge 0$. Over all length-$n$ sequences on $\{0,1\}^m$
# (query first or last), the largest error of the head of {prf:ref}`prop-dense-softmax` is
#
# $$ E^*(\beta; n, m) \;=\; \max_{1 \le d \le m}\ \frac{(n-1)\, d}{e^{\beta d} + n - 1}, $$
#
# attained by $U_d$ for a maximising $d$. Consequently the head has error below $1/2$ on
# every input exactly when $\beta > \beta^*(n, m)$, where
#
# $$ \beta^*(n, m) \;=\; \max_{1 \le d \le m} \frac{\ln\bigl((n-1)(2d-1)\bigr)}{d}
#    \;=\; \begin{cases}
#    \ln(n-1) & \text{if } m = 1 \text{ or } n \ge 4,\\
#    \tfrac12 \ln 3 \approx 0.549 & \text{if } n = 2,\ m \ge 2,\\
#    \tfrac12 \ln 6 \approx 0.896 & \text{if } n = 3,\ m \ge 2,
#    \end{cases} $$
#
# and at $\beta = \beta^*$ the largest error is exactly $1/2$. For $n \ge 4$ this is
# exactly $\ln 2$ below the proposition's sufficient $\ln(2(n-1))$, and for $m \ge 2$ it does
# not depend on $m$.
# ```
#
# ```{prf:proof}
# *Errors of profiles.* As in the proof of {prf:ref}`prop-dense-softmax`, write the overlaps
# as $t + d_p$ with gaps $d_p \ge 0$ and put $y_0 = e^{-\beta}$; the error of an input is
# $E = \sum_p d_p y_0^{d_p} / \sum_p y_0^{d_p}$. At least one gap is $0$ (the minimum), at
# most $n - 1$ are positive, and each is at most $m$ (an overlap never exceeds
# $|x| \le m$).
#
# *No profile beats the best uniform one.* Let $\lambda = \max_{1 \le d \le m} E(U_d)$,
# where $E(U_d) = (n-1) d y_0^d / (1 + (n-1) y_0^d)$. For each $1 \le d \le m$ the inequality
# $E(U_d) \le \lambda$ rearranges to $(n-1)(d - \lambda)\,y_0^{d} \le \lambda$. Take any
# input, with $z \ge 1$ gaps equal to $0$ and $k \le n - 1$ positive gaps. Then
#
# $$ \sum_p (d_p - \lambda)\, y_0^{d_p} \;=\; -z\lambda + \sum_{d_p \ge 1}
#    (d_p - \lambda)\, y_0^{d_p} \;\le\; -z\lambda + k\,\frac{\lambda}{n-1} \;\le\; 0, $$
#
# that is, $\sum_p d_p y_0^{d_p} \le \lambda \sum_p y_0^{d_p}$, or $E \le \lambda$.
#
# *Every uniform profile occurs.* For $1 \le d \le m$ take the query $x = 1^d 0^{m-d}$, one
# key $0$ (overlap 0) and $n - 2$ keys equal to $x$ (overlap $d$); the query's own overlap
# is $d$. Its gaps are one $0$ and $n - 1$ times $d$ (for $n = 2$ the query itself is the
# position at gap $d$). So $E^* = \lambda$.
#
# *The threshold.* $E(U_d) \ge 1/2$ rearranges to $(n-1)(2d-1)\,e^{-\beta d} \ge 1$, that is,
# $\beta \le \beta_d = \ln((n-1)(2d-1))/d$. Hence $E^* \ge 1/2$ exactly when
# $\beta \le \max_d \beta_d$, with $E^* = 1/2$ at equality. Since $\beta_1 = \ln(n-1) \ge 0$,
# the maximum is never negative.
#
# *Which gap decides.* For $d \ge 3$, $\beta_d < \beta_2$: this is
# $(2d-1)^2 < 3^d (n-1)^{d-2}$, and already $(2d-1)^2 < 3^d$ ($25 < 27$ at $d = 3$, and each
# step $d \to d+1$ multiplies the left side by $((2d+1)/(2d-1))^2 \le (7/5)^2 < 3$ and the
# right side by 3). So $\beta^* = \beta_1$ when $m = 1$ and $\max(\beta_1, \beta_2)$ when
# $m \ge 2$; and $\beta_2 > \beta_1$ exactly when $3(n-1) > (n-1)^2$, i.e. $n \le 3$ (at
# $n = 4$ they tie at $\ln 3$).
# ```
#
# Two consequences explain the tables above.
#
# ```{prf:corollary} Below $\beta = 1$ the worst case saturates
# :label: cor-softmax-saturation
#
# For every $\beta > 0$ and every $m$, $E^*(\beta; n, m) < (n-1)/(e\beta)$. It is
# nondecreasing in $m$ and constant from $m = m_0(\beta, n)$ on, where $m_0$ is the smallest
# maximiser over all $d \ge 1$ of $(n-1)d/(e^{\beta d} + n - 1)$. At $\beta = 0$ instead
# $E^* = (n-1)m/n$, which grows without bound.
# ```
#
# ```{prf:proof}
# $E(U_d) < (n-1)\,d\,e^{-\beta d} \le (n-1)/(e\beta)$, because $u \mapsto u e^{-\beta u}$
# peaks at $u = 1/\beta$ with value $1/(e\beta)$. The terms tend to $0$ as $d \to \infty$,
# so the maximum over all $d \ge 1$ is attained, at $m_0$, and the maximum over $d \le m$
# equals it once $m \ge m_0$. At $\beta = 0$, $E(U_d) = (n-1)d/n$.
# ```
#
# ```{prf:corollary} From $\beta = 1$ on only gaps 1 and 2 matter ($n \leq 15$)
# :label: cor-softmax-small-gaps
#
# If $2 \le n \le 15$ and $\beta \ge 1$, the maximum in {prf:ref}`thm-softmax-threshold` is
# attained at $d \in \{1, 2\}$, so $E^*$ is the same for every $m \ge 2$. It is attained at
# $d = 1$, with $E^* = u/(1+u)$ and $u = (n-1)e^{-\beta}$ for every $m$, exactly when
# $e^\beta \ge 1 + \sqrt n$.
# ```
#
# ```{prf:proof}
# Write $s = e^\beta \ge e$ and $a = n - 1 \le 14$, so $E(U_d) = ad/(s^d + a)$. For
# $d \ge 3$, $E(U_d) < E(U_2)$ is equivalent to $a(d-2) < s^2 (2 s^{d-2} - d)$. Using
# $s \ge e$ and $e^x \ge 1 + x + x^2/2$ with $x = d - 2$,
# $2 s^{d-2} - d \ge 2e^{d-2} - d \ge (d-2)(d-1)$, so the right side is at least
# $e^2 (d-1)(d-2) \ge 2e^2 (d-2) > 14 (d-2) \ge a(d-2)$. Between gaps 1 and 2:
# $E(U_1) \ge E(U_2)$ is $s^2 + a \ge 2(s + a)$, i.e. $s^2 - 2s - (n-1) \ge 0$, i.e.
# $s \ge 1 + \sqrt n$.
# ```
#
# The bound $n \le 15$ is not a technicality: at $n = 20$ and $\beta = 1$ the worst profile
# has gap 3 ($57/(e^3 + 19) \approx 1.458$ against $38/(e^2 + 19) \approx 1.440$ at gap 2), and
# at $n = 101$ it has gap 4. We check the theorem against the exhaustive search and the
# bisection above, and once more in exact rational arithmetic, choosing $e^{-\beta}$
# rational:

# %%
thresholds[2] = [exact_threshold(2, m) for m in range(1, 9)]
agree = all(abs(threshold_closed_form(n, m) - thresholds[n][m - 1]) <= 1e-9
            for n in range(2, 9) for m in range(1, 9))
print("beta*(n, m) closed form = bisection (to 1e-9), n <= 8, m <= 8:", agree)
agree = all(abs(max_error_closed_form(b, n, m) - max_error(b, n, m)) <= 1e-12
            for n in (2, 3, 4, 5) for m in range(1, 9) for b in beta_table)
print("max error closed form = exhaustive (to 1e-12), n <= 5, m <= 8, tabulated beta:",
      agree)
for n, m in ((2, 1), (2, 5), (3, 1), (3, 8), (4, 8), (8, 8)):
    N, d = threshold_closed_form_terms(n, m)
    print(f"n = {n}, m = {m}: beta* = ln({N})/{d} = {math.log(N) / d:.6f}")
# exactly, with e^-beta rational: at beta* = ln 2 (n = 3, m = 1) the worst error is 1/2,
# and on either side of ln(6)/2 (n = 3, m = 4) it is >= 1/2 or < 1/2
print("n = 3, m = 1, e^-beta = 1/2: max error over all profiles =",
      max_error_exact(Fraction(1, 2), 3, 1))
# 1/sqrt 6 = 0.40824829
for y in (Fraction(408249, 1000000), Fraction(408248, 1000000)):
    side = "beta < beta*" if 6 * y * y > 1 else "beta > beta*"
    worst = max_error_exact(y, 3, 4)
    formula = worst == max_error_closed_form_exact(y, 3, 4)
    print(f"n = 3, m = 4, e^-beta = {y}: {side}, max error >= 1/2: "
          f"{worst >= Fraction(1, 2)}, = formula: {formula}")

# %% [markdown]
# The threshold against $n$, and the worst gap over the $(\beta, n)$ plane:

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Left: the exact threshold of {prf:ref}`thm-softmax-threshold` for $m = 1$ and for $m \\ge 2$, against the sufficient $\\ln(2(n-1))$ of {prf:ref}`prop-dense-softmax`. Right: the gap $d^*$ of the worst uniform profile at $m = 40$; right of the dashed line ($\\beta = 1$) and below the dotted one ($n \\le 15$) it is 1 or 2 ({prf:ref}`cor-softmax-small-gaps`).", "name": "fig-softmax-threshold"}, "image": {"alt": "Left: the exact temperature threshold against the sequence length n from 2 to 30, for m equal to 1 and for m at least 2, both below the sufficient curve ln of 2 times n minus 1. Right: a colour map of the worst gap over temperature beta and length n at width 40, small to the right of a dashed line at beta equal to 1 and below a dotted line at n equal to 15."}}
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(7.2, 3.4))
ns_plot = np.arange(2, 31)
ax1.plot(ns_plot, [threshold_closed_form(int(n), 1) for n in ns_plot], "o", ms=3,
         label=r"$\beta^*(n, 1) = \ln(n-1)$")
ax1.plot(ns_plot, [threshold_closed_form(int(n), 2) for n in ns_plot], "s", ms=3,
         mfc="none", label=r"$\beta^*(n, m)$, $m \geq 2$")
ax1.plot(ns_plot, np.log(2 * (ns_plot - 1)), "k--", lw=1,
         label=r"sufficient $\ln(2(n-1))$")
ax1.set(xlabel="sequence length $n$", ylabel=r"temperature $\beta$",
        title=r"Exact threshold $\beta^*(n, m)$")
ax1.legend(fontsize=9, loc="lower right")
betas_plot = np.linspace(0.05, 3.0, 119)
ns_map = np.arange(2, 41)
gap_map = np.array([[worst_gap(float(b), int(n), 40) for b in betas_plot]
                    for n in ns_map])
image = ax2.pcolormesh(betas_plot, ns_map, np.minimum(gap_map, 6), cmap="viridis",
                       shading="nearest", vmin=1, vmax=6)
ax2.axvline(1.0, color="w", ls="--", lw=1)
ax2.axhline(15.5, color="w", ls=":", lw=1)
ax2.set(xlabel=r"$\beta$", ylabel="$n$",
        title=r"Worst gap $d^*$ ($m = 40$; 6: $\geq 6$)")
fig.colorbar(image, ax=ax2, ticks=range(1, 7))
fig.tight_layout()
plt.show()

# %% [markdown]
# ## Gap domination, met by an exponential
#
# The softmax head is a nonnegative kernel head, so {prf:ref}`lem-gap-domination` applies
# to it. Written as a kernel table (feature rank $2^m$), at $\beta$ just above $\ln 4$, its
# weight ratio on every link of the chain family of the previous chapters clears the
# forced factor with room to spare: the exponential $e^{\beta g}$ outgrows the linear
# $c_{n,\varepsilon}(g)$.

# %%
checks = family_checks(softmax_kernel_head(1.4, 4, 3), 4, 3)
print("links:", len(checks),
      "| all with error < 1/2:", all(c.eps < 0.5 for c in checks),
      "| gap domination holds on all:", all(c.holds for c in checks))
binding = [c for c in checks if c.factor and c.factor > 0]
Table([{"gap": g, "smallest ratio / c_(3,eps)(g)": min(
            c.ratio / c.factor for c in binding if c.gap == g)}
       for g in sorted({c.gap for c in binding})],
      formats={"smallest ratio / c_(3,eps)(g)": ".3f"})

# %% [markdown]
# ## Summary
#
# - {prf:ref}`prop-dense-softmax`: error at most $(n-1)e^{-\beta}$ for $\beta \ge 1$, never
#   violated on any profile (hence any input) for $n \le 5$, $m \le 8$ at the tabulated
#   temperatures; below $\beta = 1$ the bound is not claimed, and it fails at small $\beta$
#   once $m$ is large enough (at $\beta = 0$, $n = 3$: from $m = 4$ on).
# - {prf:ref}`lem-overlap-profiles` reduces the exhaustive check to $\binom{m+n}{n}$
#   profiles, confirmed against brute force over all sequences for $nm \le 18$ and for
#   $n = 3$, $m = 8$.
# - {prf:ref}`thm-softmax-threshold`: the worst case over all inputs is the best uniform-gap
#   profile, and the exact threshold is $\beta^*(n, m) = \max_{d \le m}
#   \ln((n-1)(2d-1))/d$ — proved constant in $m$ from $m = 2$ on: $\ln 3/2$ ($n = 2$),
#   $\ln 6/2$ ($n = 3$), $\ln(n-1)$ ($n \ge 4$, exactly $\ln 2$ below the sufficient
#   $\ln(2(n-1))$); $\ln(n-1)$ at $m = 1$. Checked against the exhaustive search and the
#   bisection for $n \le 8$, $m \le 8$, and in exact arithmetic on both sides of $\beta^*$.
# - Below $\beta = 1$ the worst case exceeds the bound at large gaps but saturates in $m$,
#   below $(n-1)/(e\beta)$; only at $\beta = 0$ is it unbounded
#   ({prf:ref}`cor-softmax-saturation`).
