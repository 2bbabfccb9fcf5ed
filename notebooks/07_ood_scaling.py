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
# # Out-of-distribution scaling: where does feature rank bind? (E2)
#
# The lower bound of the theory chapters is a worst-case statement: it builds a special
# family of length-3 inputs and shows that *no* head of small feature rank gets all of them
# right. This chapter asks the statistical companion question: train heads of feature rank
# $r$ on some sequences, test them on sequences they have never seen, and count a test
# sequence as solved only if the outputs at all three positions round to the right Min-IP
# targets (*exact-sequence accuracy*). How does that accuracy depend on $r$ as the problem
# grows?
#
# The paper {cite}`opazo2026threetokens` reports (in the sense of
# {ref}`reported <reported>`) that on "larger, disjoint train/test pools" the
# accuracy shows a **sharp transition** in $r$ that moves from $r = 8$ to $16$ to $64$ as
# the problem grows, with dense softmax attention exact on every seed. The words admit more
# than one experiment. We first fixed a decision rule and ran three readings of them at three
# problem sizes each, beside six protocols stored earlier. Those runs were read at a
# checkpoint chosen on the training error, before their heads had fitted, so a
# pre-registered study with validation checkpoints now replaces them. It comes first below,
# and the earlier runs follow it.
#
# ```{admonition} Key result
# :class: tip
# {claim-verdict}`e2-transition`. **In a pre-registered study the rank that reaches 90 %
# grows with the width, but as a graded curve, never as the reported step.** The study
# (checkpoints chosen on validation data, an optimiser chosen in a pilot, 3 seeds × 3 data
# splits, ranks up to 1,024, bootstrap intervals) judged every head by a rule fixed in
# advance. **Arm A**, unseen tokens of width $m = 6, 8, 10, 12$ with exp-affine maps: the
# threshold rank at $\tau = 0.9$ is $r^* = 4 \to 8 \to 8 \to 16$ (95 % intervals
# $[4, 1024]$, $[8, 8]$, $[8, 8]$, $[16, 16]$), and each curve climbs from 10 % to 90 % of
# its range over 2 to 4 doublings of the rank. **Arm B**, Sylvester code pools of
# $P = 14, 30, 62$ words: $r^* = 64 \to 1024 \to 512$, over 6 to 7 doublings. The
# registered rule's label for every family the study measured is
# {rule-label}`refuted at convergence`: a label of our protocol, not a refutation of the
# paper. *Added after the results*, what the study cannot test: its widths are small
# ($m \le 12$, where the theorem certifies a few features at most); arm A has no failing
# regime (rank 1 already solves 0.57–0.73 of the test triples), so the rule's absolute step
# cannot occur; in arm B dense softmax is not exact (5, 1, 0 of 9 replicates), so the
# paper's control is missing there. {claim-verdict}`e2-dense-exact`: exact on 9 of 9
# replicates at every width of arm A. A second, decisive study, with a failing regime and
# $m = 14$, reads {rule-label}`inconclusive`: from a floor of at most 0.07 the median takes 6
# doublings to reach 0.9 at $m = 10$, and by rank 1,024 it has not reached it at 12 and 14.
# ```
#
# The tables behind the verdicts (per-rank curves, the hard-test verdicts, the live re-runs
# against the committed runs, the six earlier protocols) are folded into the audit trail at
# the end of the chapter.
#
# **Code for this chapter:** `companion.experiments.e2` (`pipeline`: the one E2 pipeline,
# its configuration and presets; `data`: pools, hard test triples and splits; `rule`: the
# pre-registered rule; `verdicts`: the rule applied; `study`: the converged study's registered
# analysis), `companion.experiments.heads` (the
# stacked heads), `companion.experiments.engine` (batched training) and `companion.book`. It
# tests the statistical side of {prf:ref}`thm-exponential-rank`.

# %% tags=["remove-cell"]
# Colab or a bare kernel: install the companion (book/reading.md, "Three ways to run")
try:
    import companion  # noqa: F401
except ModuleNotFoundError:
    # %pip install --quiet "companion @ git+https://github.com/three-tokens/companion@main"
    import companion  # noqa: F401

# %% tags=["hide-input"]
import json
from pathlib import Path

import numpy as np
from IPython.display import display

from companion.book import Table
from companion.book import seed_everything
from companion.book import use_book_style
from companion.experiments.e2 import E2_LIVE

rng = seed_everything(0)  # seeds python, numpy and torch
use_book_style()  # figures fit the text column, text >= 9 pt
RESULTS = Path("..") / "results" if (Path("..") / "results").is_dir() else Path("results")
spread = json.loads((RESULTS / "cross_path_spread.json").read_text())
# the moves the live check must absorb: single heads between code paths, and the live
# subset against the sweep it is compared with (other batch companions round differently)
by_width = spread["e2_quick_test_accuracy_uniform_by_width"]
live_moves = ([by_width[str(E2_LIVE["width"])], spread["e2_live"]]
              + list(spread["e2_live_against_sweep"].values()))
TOLERANCE = 0.25  # test accuracy, per model: >= 3x every one of those moves
assert TOLERANCE >= 3 * max(move["max_abs_difference"] for move in live_moves)

# %% [markdown]
# ## The pre-registered study
#
# The study that is to settle the question was fixed before any of its runs, in
# {doc}`the pre-registration <../book/e2_preregistration>`; the code is
# `companion.experiments.e2` (designs A and B; analysis in `study`). It has two arms.
#
# * **Arm A, unseen tokens.** Token widths $m = 6, 8, 10, 12$. The whole cube
#   $\{0,1\}^m$ is cut into complementary pairs $\{x, \bar x\}$, and a seeded hash sends
#   each pair to training, validation or test (60 / 20 / 20 %). The heads therefore see the
#   same share of the cube at every width. Features are exp-affine in the bits, or come
#   from a one-hidden-layer MLP. Training uses 20,000 uniform triples. Testing uses 4,000
#   uniform triples and 4,000 near-ties from the test tokens.
# * **Arm B, code pools.** The $P = 2n - 2$ words of the Sylvester–Hadamard code of order
#   $n = 8, 16, 32$ ($P = 14, 30, 62$). Every multiset of three words is hashed to training,
#   validation or test (70 / 10 / 20 %). The heads are tables over the pool, with the
#   overlap readout or a learned readout whose values are at least $P$ wide.
#
# Both arms use the same protocol. Ranks run $1, 2, 4, \dots, 1024$. Each point has
# 9 replicates (3 seeds × 3 data splits). Each head keeps the step with the best
# *validation* accuracy, and test accuracy is read there, once. The optimiser (learning
# rate × steps × an optional max-error phase) is chosen per arm and model kind in a pilot
# that only sees validation data. The result is $r^*$ at $\tau = 0.85, 0.9, 0.95$, each
# with a bootstrap interval, and two sharpness rules. The units are stored as they finish
# and resume across runs (`python -m companion e2 --pilot`, then `e2 --study`, both with
# `--scheduler local:2`). The table reads the committed files under `results/e2_study/`.

# %% tags=["hide-input"]
from companion.experiments.e2 import PAPER_TRANSITIONS
from companion.experiments.e2 import HEADLINES
from companion.experiments.e2 import PILOT_CHOICE
from companion.experiments.e2 import complete_sizes
from companion.experiments.e2 import status_table
from companion.experiments.e2 import study_complete
from companion.experiments.e2 import study_files

study = study_files(RESULTS / "e2_study")
status_table(study, caption="the pre-registered study: units stored per arm and model kind "
             "(pilot, study) and the optimiser each pilot chose")

# %% [markdown]
# A pilot is complete when all six of its optimiser settings have run. The choice it makes
# (the best median validation accuracy, ties to fewer steps) is committed to the
# pre-registration before that arm and kind's full runs start. The pilots' tables are
# folded here.

# %% tags=["hide-cell"]
from companion.experiments.e2 import pilot_table

for key in sorted(k for k in study["pilot"] if k in PILOT_CHOICE):
    display(pilot_table(study["pilot"][key], caption=f"pilot of arm {key[0]}, {key[1]}: "
                        "median best validation accuracy per setting (ranks 16 and 256)"))
pending = [f"{a} {k}" for a, k in sorted(study["pilot"]) if (a, k) not in PILOT_CHOICE]
print("pilots still running or not yet committed: " + (", ".join(pending) or "none"))

# %% tags=["hide-input"]
from companion.experiments.e2 import size_table
from companion.experiments.e2 import study_summary
from companion.experiments.e2 import verdict_table

runs = study["study"]
complete = {f"{a}_{k}": run for (a, k), run in runs.items() if study_complete(run)}
for arm, (kind, test) in HEADLINES.items():  # the family each arm's verdict is read from
    if (arm, kind) in runs and complete_sizes(runs[arm, kind]):
        display(size_table(runs[arm, kind], test, caption=f"arm {arm}, headline ({kind}, "
                           f"{test} test): r* [95 % interval] per complete size, both "
                           "sharpness rules, the top rank's fit and dense exactness"))
if complete:
    display(verdict_table(study_summary(complete), caption="the registered verdict of every "
                          "complete (arm, kind), per test set; r* per size, m = 6, 8, 10, 12 "
                          "(arm A) and P = 14, 30, 62 (arm B)"))

# %% [markdown]
# **Arm A (unseen tokens).** With exp-affine maps, the headline family, every top rank
# fits its training triples and dense softmax is exact on 9 of 9 replicates at every width.
# The threshold rank grows, $r^* = 4, 8, 8, 16$ at $m = 6, 8, 10, 12$, but no width is
# sharp: 10 % to 90 % of a curve's range takes 2 to 4 doublings, and the median at $r^*/2$
# is still 0.75 to 0.88. (The cube at $m = 6$ has only 32 complementary pairs; its large
# heads overfit them and sink back towards 0.9, hence its wide interval.) The MLP maps and
# the near-tie test agree. So the rank that reaches 90 % moves right as a graded curve,
# never as a step. *Added after the results:* this is no conflict with the theory. Uniform
# triples are mostly easy (rank 1 solves 0.57 to 0.73 of them, so the registered absolute
# rule, which needs a rank that solves at most half, cannot find a step), while the bound
# speaks of its witness families, and at these widths it certifies a few features at most.
#
# **Arm B (code pools).** With the overlap readout the heads fit their training multisets
# from small ranks (median training accuracy $\geq 0.98$ from rank 8, 16, 32 at
# $P = 14, 30, 62$), but held-out witness multisets climb over 6 to 7 doublings, and the
# dense heads are exact on only 5, 1 and 0 of 9 replicates. *Added after the results:*
# without an exact dense reference arm B lacks the paper's control and cannot test the
# contrast. The folded table of capacity and generalisation gaps below measures the fit on
# *all* training multisets and the test on *witness* multisets, not like with like, so it
# does not say whether rank or generalisation limits arm B. The learned readout's curves
# are not even monotone (rank 1, whose weights ignore the query, scores 0.55 to 0.82, ranks
# 2 and 4 less), and its dense tables are exact on none of the 27 replicates.
#
# **Convergence, judged at the checkpoint** (added after the results). Test accuracy is read
# at each head's validation checkpoint, but the registered flag judges convergence at the
# last step. Recomputed at the checkpoint, 42 of the headline family's 44 points and 135 of
# the study's 154 are converged (folded table).
#
# :::{dropdown} Where the two flags disagree, and which step each head keeps
# `rule.checkpoint_convergence` reads the stored training histories: a point is converged at
# its checkpoint when the checkpoint fits within 0.005 of the run's best fit, and that best
# fit rose by less than 0.005 in the last 20 % of the steps (medians over the replicates, as
# the registered flag). The last step can differ from the checkpoint because E1's max-error
# phase sometimes undoes the fit: at arm A's $m = 12$, $r = 8$ the last step fits 0.73 of the
# training triples and still moves, so the registered flag says not converged, while the
# checkpoint fits 0.854, the run's best; with the learned readout at $P = 62$, $r = 1$ the
# last step fits 0.001 and is flagged converged, while the checkpoint fits 0.97. In the
# headline family only $m = 6$, $r = 1$ and 2 are not converged at the checkpoint: their runs
# later fit their training triples better. Every checkpoint is a step of the best validation
# accuracy, but 224 of the 1,512 heads keep a later step of equal accuracy rather than the
# earliest one, as registered (the engine compares the scores in single precision).
# :::

# %% tags=["hide-cell"]
from companion.experiments.e2.rule import checkpoint_convergence

rows = []
for (arm, kind), run in runs.items():
    points = checkpoint_convergence(run)
    flags = [(size, r, p) for size, g in points.items() for r, p in g.items() if r != "dense"]
    rows.append({"arm, kind": f"{arm}, {kind}", "points": len(flags),
                 "at the checkpoint": sum(p["converged"] for *_, p in flags),
                 "at the last step (registered)": sum(p["converged_last"] for *_, p in flags),
                 "the flags disagree at": "; ".join(  # arm B's size n: P = 2n - 2 words
                     f"m = {size}, r = {r}" if arm == "A" else f"P = {2 * size - 2}, r = {r}"
                     for size, r, p in flags if p["converged"] != p["converged_last"]) or "—"})
Table(rows, caption="points converged at the validation checkpoint (training accuracy within "
      "0.005 of the run's best, which had settled) and by the registered flag (the last step)")

# %% tags=["hide-cell"]
from companion.experiments.e2 import gap_table

for (arm, kind), run in runs.items():
    if study_complete(run):
        display(gap_table(run, HEADLINES[arm][1], caption=f"arm {arm}, {kind}, "
                          f"{HEADLINES[arm][1]} test: capacity / generalisation gap per rank "
                          "and size (medians; * where generalisation is at least capacity)"))

# %% tags=["hide-input"] mystnb={"figure": {"caption": "The pre-registered study, each arm's pre-registered headline family: median test exact-sequence accuracy over the 9 replicates against feature rank, one curve per size whose every unit is in (band: min\u2013max over replicates; dashed: dense softmax; star: $r^*$ at $\\tau = 0.9$ with its 95 % bootstrap interval as a bar; an interval reaching past 1,024 means some resamples never stay above 0.9). Light grey steps: the jumps at $r = 8, 16, 64$ the paper reports.", "name": "fig-e2-study"}, "image": {"alt": "Two panels of test exact-sequence accuracy against feature rank from 1 to 1024 on a log scale, for the study's arm A (exp-affine maps on unseen tokens, uniform triples) and arm B (code pools, overlap readout, held-out multisets with a complementary pair), with grey step lines at ranks 8, 16 and 64 for the reported transition and one curve per completed size."}}
import matplotlib.pyplot as plt

from companion.experiments.e2 import plot_study

fig, axes = plt.subplots(1, 2, figsize=(7.2, 3.4), sharey=True)
for ax, (arm, (kind, test)) in zip(axes, HEADLINES.items()):
    for r in PAPER_TRANSITIONS:
        ax.step([1, r, 2048], [0, 1, 1], where="post", color="0.8", lw=1.2)
    plot_study(ax, runs[arm, kind], test, f"arm {arm}: {kind}, {test} test")
    ax.legend(fontsize=9, loc="lower right")
    ax.set_xlim(0.8, 2048)
axes[0].set_ylabel("test exact-seq. accuracy")
fig.tight_layout()
plt.show()

# %% [markdown]
# ## The decisive study: a test on which rank 1 fails
#
# The study above could not show a jump, because at its widths a rank-1 head already solves
# most test triples: there is no failing regime to jump from. A second registration (the
# second part of {doc}`the pre-registration <../book/e2_preregistration>`, committed before
# any of its units) adds a test built to have one. A *complement triple* is $(x, \bar x, y)$
# with $\bar x = \mathbf 1 - x$ and a third token $y$ that meets both; the targets at $x$
# and at $\bar x$ are 0. A rank-1 head mixes the three tokens with weights that ignore the
# query; read out by the overlap, its outputs at $x$ and $\bar x$ then add up to more than
# 1, so it misses every such triple. Our heads learn their readout, so for them a low floor
# is an expectation the study measures, not a theorem.
#
# It reruns arm A's exp-affine heads at $m = 6, 8, 10, 12$ with this test (also a third
# validation set) and adds $m = 14$: 6 replicates per point (2 seeds × 3 splits, the
# registered cut to a 12 CPU-hour budget, below the 9 we wanted). A width is *judged* only
# when dense softmax is exact on every replicate, the floor $a(1)$ is at most 1/2, and the
# top rank and both ends of the step are converged at their checkpoints; a width that fails
# the control leaves the evidence and never counts against the paper. A unit whose best
# validation step is its last evaluation runs again twice as long, and the longer run
# counts. The verdict was read once every unit was in.

# %% tags=["hide-input"] mystnb={"figure": {"caption": "The decisive study: median test exact-sequence accuracy over the 6 replicates against feature rank, one curve per width (extensions included); complement triples (left, the registered headline) and uniform triples (right). Band: min\u2013max over replicates; dashed: dense softmax; star: $r^*$ at $\\tau = 0.9$ with its 95 % bootstrap interval. Light grey steps: the jumps at $r = 8, 16, 64$ the paper reports.", "name": "fig-e2-decisive"}, "image": {"alt": "Two panels of test exact-sequence accuracy against feature rank from 1 to 1024 on a log scale for the decisive study's exp-affine heads, on complement triples and on uniform triples, one curve per completed width, with grey step lines at ranks 8, 16 and 64."}}
from companion.experiments.e2 import DECISIVE
from companion.experiments.e2 import decisive_summary
from companion.experiments.e2 import e2_path
from companion.experiments.e2 import load_e2

decisive_cfg = DECISIVE["A", "exp-affine"]
decisive = load_e2(e2_path(RESULTS, decisive_cfg))
decisive_sum = decisive_summary(decisive)
first_pass = [k for k in decisive["units"] if not k.endswith("/x2")]
planned = (len(decisive_cfg.sizes) * len(decisive_cfg.splits)
           * (len(decisive_cfg.rank_groups) + 1))
print(f"first-pass units stored: {len(first_pass)} of {planned}; extensions run: "
      f"{len(decisive_sum['extended'])} of the {len(decisive_sum['extend'])} units the rule "
      f"flags; complete widths: m = {', '.join(map(str, complete_sizes(decisive))) or 'none'}")
fig, axes = plt.subplots(1, 2, figsize=(7.2, 3.2), sharey=True)
for ax, test in zip(axes, ("complement", "uniform")):
    for r in PAPER_TRANSITIONS:
        ax.step([1, r, 2048], [0, 1, 1], where="post", color="0.8", lw=1.2)
    plot_study(ax, decisive, test, f"{test} triples")
    ax.set_xlim(0.8, 2048)
axes[0].legend(fontsize=9, loc="lower right")
axes[0].set_ylabel("test exact-seq. accuracy")
fig.tight_layout()
plt.show()

# %% tags=["hide-cell"]
from companion.experiments.e2 import decisive_table

for test in ("complement", "uniform", "witness"):
    fam = decisive_sum["tests"][test]
    display(decisive_table(decisive_sum, test, caption=f"{test} triples: the floor, the step "
                           f"from it, r* and what keeps a width from being judged; the "
                           f"registered verdict: {fam['verdict']} ({fam['reason']})"))

# %% [markdown]
# **The verdict: {rule-label}`inconclusive`.** Every unit is in, extensions included. From
# $m = 8$ on, the new test has the failing regime it was built for: rank 1 solves a median of
# 273, 90, 30 and 3 of the 4,000 complement test triples at $m = 8$, 10, 12 and 14, and dense
# softmax is exact on 6 of 6 replicates at each. Three widths are judged. At $m = 10$ the
# median climbs from 0.10 at rank 2 to 0.91 at rank 128: a step of 6 doublings, not one;
# $r^*_{0.9} = 128$, with a 95 % interval from 128 to above 1,024. At $m = 12$ and $m = 14$
# no rank reaches 0.9: the median is 0.10 and 0.03 at rank 4, and creeps up to 0.85 and 0.79
# at rank 1,024. With no $r^*_{0.9}$ on the grid at two judged widths, the registered rule
# says {rule-label}`inconclusive`: a step above rank 1,024, if there is one, is not seen.
# Widths 6 and 8 are not judged: at $m = 6$ the floor is 0.69 (only 32 complementary pairs,
# and a learned readout is not bound by the overlap argument), and at both a point of the
# climb is not converged at its checkpoint. Noted after the results, not counted as evidence:
# the largest rise over one doubling is at ranks 2 → 4 at $m = 8$ (+0.48), ranks 4 → 8 at
# $m = 10$ (+0.53) and $m = 12$ (+0.36), and ranks 8 → 16 at $m = 14$ (+0.32); the rest of
# the way is a slow climb, not a step.

# %% [markdown]
# ## The earlier runs: the rule, fixed before their results
#
# Before any full-size run of the new readings, we wrote down what would count as the
# paper's picture (commit `525fc89`, amended before any full run in `2d367f7`: the two
# changes made single-rank optimisation dips unable to manufacture a sharp curve). For every
# protocol, problem size, readout and test distribution, the curve $a(r)$ is the **median
# over seeds** of the test exact-sequence accuracy at each rank.
#
# :::{dropdown} The earlier rule, term by term
# ```{list-table}
# :header-rows: 1
# :widths: 22 78
#
# * - term
#   - definition
# * - threshold
#   - $\tau = 0.9$, the value this chapter has used since before any sweep ran.
# * - transition rank $r^*$
#   - the smallest rank of the doubling grid $1, 2, 4, \dots, 128$ with $a(r) \ge \tau$
#     there *and at every larger grid rank*; with ranks between the doublings, the refined
#     $r^*$ is the smallest run rank in $(r^*/2, r^*]$ with the same property; none: no
#     transition.
# * - sharp
#   - $r_{50}$, the largest run rank below $r^*$ at which the running maximum
#     $\max_{r' \le r} a(r')$ is still at most $1/2$, exists, and the width
#     $\log_2(r^*/r_{50})$ is at most one doubling: within one doubling of the rank the heads
#     go from solving at most half of the held-out sequences to at least 90 %. (A rank-$r$
#     class contains every smaller rank, so a dip below a smaller rank's accuracy is an
#     optimisation failure; the running maximum keeps it from looking like a step.)
# * - dense exact
#   - test accuracy $\ge 0.99$ on every seed (seeds at exactly 1 are counted beside it).
# * - rank- or generalisation-limited
#   - below $r^*$, the missing accuracy $1 - a_{\text{test}}$ splits into *capacity*
#     $1 - a_{\text{fit}}$ (the heads do not fit their own training sequences) and
#     *generalisation* $a_{\text{fit}} - a_{\text{test}}$, summed over the grid ranks below
#     $r^*$; rank-limited when capacity is at least half.
# * - label
#   - {rule-label}`reproduced`: three sizes with sharp transitions at $r^* = 8, 16, 64$ and
#     dense exact there; {rule-label}`reproduced with our sizes`: at least three sharp
#     sizes, $r^*$ not decreasing with size, the last at least $4\times$ the first, dense
#     exact; {rule-label}`differs`: anything else, naming the first failing condition
#     (transitions at fewer than three sizes; not sharp; not moving by $4\times$; dense not
#     exact).
# ```
# :::
#
# Each protocol is judged on **uniform** test triples of its held-out side — the
# distribution a held-out pool's sequences have — with both readouts; the hard test
# distributions below are judged too but never replace it. The **headline** was fixed from
# the words alone: "OOD" and "disjoint pools" mean test tokens the heads never saw; among
# maps of the bits, exp-affine features cannot be blamed for a low-rank failure; the paper's
# model has an affine readout. So the headline is reading **X** with the learned readout on
# uniform triples. The folded cell applies the rule to two hand-made curves, to show it at
# work.

# %% tags=["hide-cell"]
from companion.experiments.e2 import RULE_DENSE_EXACT
from companion.experiments.e2 import RULE_LOW
from companion.experiments.e2 import RULE_THRESHOLD
from companion.experiments.e2 import curve_rule

print(f"threshold {RULE_THRESHOLD}, low level {RULE_LOW}, dense exact at >= "
      f"{RULE_DENSE_EXACT}; the paper's transitions {PAPER_TRANSITIONS}")
grid = [1, 2, 4, 8, 16, 32, 64, 128]
examples = {  # median accuracy per rank (one seed each)
    "a step between r = 8 and 16": [0.05, 0.1, 0.2, 0.45, 0.95, 0.97, 0.99, 1.0],
    "a steady climb": [0.2, 0.35, 0.5, 0.62, 0.75, 0.86, 0.92, 0.95],
}
Table([{"curve": name, "r*": rule["r_star"], "r50": rule["r50"], "width": rule["width"],
        "sharp": rule["sharp"]}
       for name, acc in examples.items()
       for rule in [curve_rule(grid, [[a] for a in acc])]])

# %% [markdown]
# ## Three readings of "larger, disjoint pools"
#
# Every earlier protocol (the last part of this chapter) split the *tokens* and learned MLP
# maps of the bits from about 180 training tokens; their heads fit the training sequences
# far better than they generalise, so rank could not show what it does. The three readings
# below are built so that a failure at low rank is a failure of rank.
#
# * **X — exp-affine maps on disjoint token pools** (problem size: the token width $m$).
#   A pool of random complementary pairs $\{x, \bar x\}$ is split 70/30 *by pairs* into a
#   training and a test pool that share no token; both are closed under complement, so
#   witness-like triples exist on the test side. The feature maps are
#   $\phi_Q(x) = e^{W_Q x + c_Q}$, $\phi_K(z) = e^{W_K z + c_K}$ of rank $r$: this class
#   holds the positive random features of the softmax kernel $e^{-\beta\langle x, z\rangle}$,
#   so it contains heads that generalise to unseen tokens, and with only $r(2m + 2)$ kernel
#   parameters a few hundred training tokens pin it down. The dense reference has affine
#   scores $q, k \in \mathbb{R}^m$ (it contains $q = -\beta x$, $k = z$, which solves the
#   task). We grow $m$ because the theorem's requirement grows with the width.
# * **S-code — one code pool, disjoint sets of sequences** (problem size: the pool size
#   $P$). The pool is a Paley–Hadamard code with its complements (width $m = q + 1$,
#   $P = 2q$ words; cross overlaps $m/4$, complement overlap 0): every query has one private
#   best key, its complement, and all other keys tie far above it — the identity-like
#   structure of Lemma D. Every sequence (as a multiset) is put on the training or the test
#   side by a seeded hash, 70/30, so no test sequence, in any order, was trained on. Every
#   token is seen in training, so lookup-table maps are legitimate, as in E1; rank $P$
#   always suffices (one indicator feature per key).
# * **S-random — one random pool, disjoint sets of sequences** (problem size: $P$). As
#   S-code over random complementary pairs at $m = 12$.
#
# Training sequences are half uniform triples and half witness triples $(x, \bar x, y)$
# (plus a quarter of those as pure $(x, y, y)$), the inputs on which a head must compare.
# Each reading runs **both readouts**: *learned* (values and an affine readout, the paper's
# model) and *overlap*, with values and readout fixed to $f(x, z) = \langle x, z\rangle$, so
# the attention alone must select the minimum; with free readout tables a low-rank head can
# memorise part of the answer. Full-size runs: ranks 1 to 128 (S-code also between the
# doublings), **5 seeds**, the dense heads per seed, 1,000 held-out sequences per test set,
# each (size, readout, heads or dense) a stored unit of `python -m companion e2 --full` (their
# settings in the folded cell below).

# %% tags=["hide-cell"]
from companion.experiments.e2 import READINGS
from companion.experiments.e2 import READINGS_FULL

Table([{"reading": name, "maps": "exp-affine of the bits" if cfg.kind == "mlp"
        else "tables over the pool", "pool": READINGS[name][1],
        "sizes (m, P)": ", ".join(f"({m}, {p})" for m, p in cfg.sizes),
        "ranks": f"{len(cfg.ranks)} from {cfg.ranks[0]} to {cfg.ranks[-1]}",
        "seeds": len(cfg.seeds), "train seqs": cfg.n_train, "steps": cfg.steps, "lr": cfg.lr,
        "test sets": ", ".join(cfg.tests)}
       for name, cfg in READINGS_FULL.items()], caption="the three readings' full runs")

# %% [markdown]
# Besides uniform triples, every reading is scored on harder test triples drawn from its
# held-out side: **witness** triples $(x, \bar x, y)$, where the query must prefer its
# complement (overlap 0) to a key at a larger overlap — the direct links of Theorem E — and,
# on the random pools, **gap-2** triples, where one query's two competitors differ by
# exactly 2. Uniform triples are not dominated by one clearly best competitor (about 70 % of
# queries on a random 8-bit pool face a gap of 0 or 1), but near-ties are cheap: a rank
# $m + 1$ head already orders gap-1 competitors correctly. Witness triples are the ones that
# need the comparison, and the only ones on which a rank-1 head fails whatever the readout.

# %% tags=["hide-input"]
import json as _json

from companion.experiments.e2 import HEADLINE
from companion.experiments.e2 import load_e2
from companion.experiments.e2 import code_facts
from companion.experiments.e2 import curve_table
from companion.experiments.e2 import decomposition_table
from companion.experiments.e2 import gaps_by_rank_table
from companion.experiments.e2 import plot_reading
from companion.experiments.e2 import summary_line
from companion.experiments.e2 import verdict_table

summary_e2 = _json.loads((RESULTS / "e2_summary.json").read_text())
readings = {name: load_e2(RESULTS / f"e2_{name}_full.json") for name in READINGS}
assert all("sizes" in res for res in readings.values()), "a reading's full run is incomplete"
print(f"headline: reading {HEADLINE['reading']}, {HEADLINE['readout']} readout, "
      f"{HEADLINE['test']} test triples")

# %% [markdown]
# ## The headline: exp-affine maps on disjoint token pools (X)
#
# Test exact-sequence accuracy on uniform triples from the held-out tokens, learned readout,
# median [min, max] over the five seeds, is folded in the next cell.

# %% tags=["hide-cell"]
x_res = readings["X"]
curve_table(x_res, "learned", "uniform",
            caption="X, learned readout: uniform test triples of unseen tokens")

# %% [markdown]
# The earlier rule's label, beside the reported numbers:

# %% tags=["hide-input"]
head = summary_line(summary_e2, HEADLINE["reading"], HEADLINE["readout"], HEADLINE["test"])
per_size = head["per_size"]
size_name = summary_e2["readings"]["X"]["problem_size"]
Table([
    {"": "problem sizes", "reported": "not stated (\"as the problem grows\")",
     "ours": ", ".join(f"{size_name} = {s['size']}" for s in per_size)},
    {"": "transition rank r*", "reported": " → ".join(map(str, PAPER_TRANSITIONS)),
     "ours": " → ".join("none" if s["r_star"] is None else str(s["r_star"])
                        for s in per_size)},
    {"": "sharp (within one doubling)", "reported": "yes",
     "ours": ", ".join("yes" if s["sharp"] else "no" for s in per_size)},
    {"": "median accuracy at r = 1 → 128", "reported": "—",
     "ours": ", ".join(f"{s['median'][0]:.2f} → {s['median'][-1]:.2f}" for s in per_size)},
    {"": "dense exact seeds", "reported": "all",
     "ours": ", ".join(f"{s['dense_exact_seeds']}/{s['seeds']}" for s in per_size)},
    {"": "verdict", "reported": "—", "ours": f"{head['verdict']} ({head['reason']})"},
], caption="headline: X, learned readout, uniform test triples")

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Reading X (unseen tokens, exp-affine maps): median test exact-sequence accuracy over five seeds against feature rank, one curve per token width (band: min\u2013max over seeds; dashed: dense softmax; dotted: the threshold 0.9; a star marks a transition $r^*$ where the rule finds one). Top: the learned readout (the headline is the top left panel); bottom: the overlap readout.", "name": "fig-e2-reading-x"}, "image": {"alt": "Four panels of median test exact-sequence accuracy over five seeds against feature rank from 1 to 128 on a log scale, one curve per token width with a min-max band, dashed dense-softmax levels, a dotted line at 0.9 and stars where the rule finds a transition."}}
import matplotlib.pyplot as plt

fig, axes = plt.subplots(2, 2, figsize=(7.2, 6.2), sharex=True, sharey=True)
for row, readout in zip(axes, ("learned", "overlap")):
    for ax, test in zip(row, ("uniform", "witness")):
        plot_reading(ax, readings["X"], summary_e2, "X", readout, test,
                     f"{readout} readout, {test} triples")
for ax in axes[:, 0]:
    ax.set_ylabel("test exact-seq. accuracy")
for ax in axes[0]:
    ax.set_xlabel("")
axes[0, 0].legend(fontsize=9, loc="lower right")
fig.tight_layout()
plt.show()

# %% [markdown]
# What reading X shows:
#
# * **The headline curve climbs; it does not jump.** With the learned readout, accuracy on
#   uniform triples of unseen tokens rises from 0.56, 0.31, 0.25 at $r = 1$ to 0.96, 0.93,
#   0.89 at $r = 128$ for $m = 8, 10, 12$. The rule finds $r^* = 8$ at $m = 8$, $r^* = 64$
#   at $m = 10$ and no transition at $m = 12$. The transition moves in the reported
#   direction, but no size passes the sharpness test: at $m = 8$ rank 1 already solves more
#   than half of the sequences (there is no low regime), and at $m = 10$ the climb from at
#   most 0.5 to at least 0.9 takes five doublings ($r_{50} = 2$, $r^* = 64$). The earlier
#   rule's label: {rule-label}`differs` — a transition at two of three sizes, neither sharp.
#
# :::{dropdown} Capacity and generalisation, witness triples, the overlap readout, dense softmax
# * **Capacity limits the low ranks, generalisation the rest.** Summed over the grid ranks
#   below $r^*$ the missing accuracy is mostly capacity (share 0.81–0.96 in the decomposition
#   below), but that sum is dominated by ranks 1 to 4, where the heads fail 0.07–0.70 of
#   their own training triples. Rank by rank (the table after the decomposition) the two gaps
#   are about equal at $r = 16$ (capacity 0.02, 0.06, 0.08 against generalisation 0.02, 0.05,
#   0.07 for $m = 8, 10, 12$), and from $r = 32$ on the generalisation gap is the larger at
#   every width (at $r = 128$: 0.03, 0.06, 0.10 against 0.01, 0.01, 0.02). So near and above
#   the transition, unseen tokens cost at least as much as missing rank.
# * **Witness triples have a low regime, and still no step.** Rank 1 solves 0.32, 0.18,
#   0.10 of them; the climb then spreads over the whole range of ranks, to 0.86, 0.86, 0.75
#   at $r = 128$.
# * **The overlap readout starts near zero** (0.06, 0.03, 0.01 at $r = 1$: rank-1 weights
#   depend on the key only, so the attention cannot pick each query's minimum) and climbs
#   over seven doublings to 0.89, 0.84, 0.74 — no transition at any width.
# * **Dense softmax with the learned readout is exact on every seed at every width** (5/5,
#   and at least 0.99 on witness triples too). With the overlap readout it is exact on 3, 5
#   and 1 of 5 seeds: the fixed readout makes its training harder as well.
# :::

# %% [markdown]
# ## Shared pools: S-code and S-random
#
# On the Paley code pools every token is seen in training and the heads are lookup tables,
# so the question is only how much rank the comparison needs. S-random asks the same on a
# random pool. The per-rank tables of the four curves in the folded figure are in the audit trail.
#
# * **S-code, overlap readout: the capacity curve steps.** The fraction of their own
#   training witness triples the heads fit stays at or below 0.54 up to $r = 32$ at
#   $P = 46$ and jumps to 1.00 at $r = 40$; at $P = 62$ it stays at or below 0.26 up to
#   $r = 20$ and jumps to 0.98 at $r = 24$; at $P = 22$ it rises from 0.72 at $r = 16$ to 1.00
#   at $r = 24$. This is the E1 picture on a pool: below a rank of the order of the pool
#   size nothing fits reliably, above it everything does.
#
# :::{dropdown} Held-out sequences, the learned readout, dense softmax, S-random
# * **Held-out sequences lag behind.** On held-out witness triples the step is sharp under
#   the rule only at $P = 46$ ($r_{50} = 32$, $r^* = 64$; with the learned readout, only at
#   $P = 22$); at $P = 22$ the climb starts too
#   early (0.51 at $r = 4$) and at $P = 62$ accuracy stops at 0.89 at $r = 128$ — the table
#   heads must also infer comparisons $(x, \bar x, y)$ they never saw. On uniform held-out
#   triples rank 2 already solves about half (most queries on a Paley pool face equal
#   overlaps), so there is no low regime and no sharp curve at any size.
# * **The learned readout moves the transition down and softens it**: $r^* = 12, 12, 20$ on
#   uniform triples (free value and readout tables absorb part of the comparison), each a
#   climb of more than two doublings.
# * **Dense softmax is exact on every seed with the overlap readout** (5/5 at every $P$);
#   with learned readout tables it is not (0, 4 and 0 of 5 seeds reach 0.99, and at
#   $P = 62$ three seeds stay below 0.7): an optimisation failure of the dense tables, not a
#   limit of the class, since the overlap-readout dense heads solve the same sequences.
# * **S-random shows the other failure.** At $P = 32$ the overlap heads cross 0.9 only at
#   $r = 128$; at $P = 64$ and $128$ the heads fit their training sequences (0.96 and 0.92 with
#   the overlap readout, 1.00 with the learned one) but solve only 0.75 and 0.51 of the
#   held-out ones, and dense heads fail the same way (as low as 0.14–0.20 with the learned
#   readout at $P = 128$): with $P^3/6$ possible multisets and 4,000 training sequences,
#   table heads cannot infer the held-out comparisons at all.
# :::

# %% tags=["hide-cell"] mystnb={"figure": {"caption": "The shared-pool readings: median held-out exact-sequence accuracy against feature rank (band: seeds; dashed: dense; dotted: 0.9; stars: transitions under the rule). S-code's problem size is the code's pool size $P$; S-random's is the pool size at $m = 12$.", "name": "fig-e2-shared-pools"}, "image": {"alt": "Four panels of median held-out exact-sequence accuracy against feature rank on a log scale for the shared-pool readings, one curve per problem size, with dashed dense levels, a dotted line at 0.9 and stars at transitions."}}
fig, axes = plt.subplots(2, 2, figsize=(7.2, 6.2), sharex=True, sharey=True)
for ax, (name, readout, test) in zip(axes.flat, [("S-code", "overlap", "witness"),
                                                 ("S-code", "overlap", "uniform"),
                                                 ("S-code", "learned", "uniform"),
                                                 ("S-random", "overlap", "uniform")]):
    plot_reading(ax, readings[name], summary_e2, name, readout, test,
                 f"{name}, {readout}, {test}")
for ax in axes[:, 0]:
    ax.set_ylabel("test exact-seq. accuracy")
for ax in axes[0]:
    ax.set_xlabel("")
for ax in (axes[0, 0], axes[1, 1]):
    ax.legend(fontsize=9, loc="lower right")
fig.tight_layout()
plt.show()

# %% [markdown]
# ## Every protocol under the rule
#
# One row per protocol and readout (folded), judged on uniform held-out triples: the problem
# sizes, $r^*$ per size (refined where ranks between the doublings were run; — : none), the
# width of each transition in doublings (— : no $r_{50}$, i.e. no transition or no low
# regime), the dense seeds that are exact, and the verdict. The six earlier protocols (A to
# I, three seeds each; audit trail) are judged by the same rule, and so are the hard test
# distributions (tables in the audit trail).

# %% tags=["hide-cell"]
verdict_table(summary_e2, "uniform", caption="uniform held-out triples (the judged test)")

# %% [markdown]
# **No protocol reproduces the reported picture, and none passes the rule with our sizes.**
# Of the twelve curves judged on uniform triples, only S-code has a transition at all three
# sizes, and each of its transitions spreads over 2.3 to 5.3 doublings of the rank; X finds
# transitions at two widths, the others at one or none. On the hard test triples two curves
# have a sharp transition, both on witness triples of the Paley code pools and each at one
# size, where the rule asks for three: S-code with the overlap readout at $P = 46$
# ($r^* = 64$, one doubling above $r_{50} = 32$; dense exact on 5 of 5 seeds) and with the
# learned readout at $P = 22$ ($r^* = 16$, $r_{50} = 8$; dense exact on 1 of 5 seeds).
#
# ## Rank against generalisation
#
# Below the transition (over all grid ranks where there is none), how much of the missing
# accuracy is capacity — the heads do not fit their own training sequences — and how much is
# generalisation? The table per protocol, size and readout (with held-out against training
# accuracy at the largest rank) is in the audit trail; in short:

# %% [markdown]
# In X and S-code the capacity share is 0.81 to 0.97 at every size and readout, and at
# $r = 128$ held-out and training accuracy are within 0.1 of each other except at X,
# $m = 12$ (0.89 against 0.98). S-random at $P = 64, 128$ with the learned readout is the
# opposite case (0.35 and 0.11: generalisation-limited). In the earlier protocols the share
# is about one half because their shortfall at low ranks is capacity and at high ranks
# generalisation (training accuracy at $r = 128$ is 0.92–0.99, test 0.33–0.93).
#
# The share is a sum over every grid rank below the transition, so the lowest ranks, where
# the heads fit little of anything, dominate it. The folded table splits it rank by rank for
# the headline reading: capacity $1 - a_{\text{fit}}$ / generalisation
# $a_{\text{fit}} - a_{\text{test}}$ (medians over seeds; * where generalisation is at least
# capacity).

# %% tags=["hide-cell"]
gaps_by_rank_table(readings["X"], "learned", "uniform", caption="X, learned readout, uniform "
                   "triples: capacity / generalisation gap per rank")

# %% [markdown]
# Capacity is the larger gap at every width only at ranks 1 to 4, and there by far (0.07–0.70
# against at most 0.05); at $r = 8$ and 16 it is still the larger at $m = 10$ and 12, by at
# most 0.13. From $r = 32$ on the generalisation gap is at least the capacity gap at every
# width, and both stay below 0.11 there. So the decomposition does not show that rank, rather than
# generalisation, keeps the headline curve from stepping: near and above the transition the
# remaining shortfall is at least as much generalisation to unseen tokens. (In S-code the
# same holds from $r = 16$ with the learned readout and from $r = 64$ with the overlap
# readout, with both gaps at most 0.09 there.)

# %% [markdown]
# ## Why the curves climb instead of jumping: a ladder of explicit heads
#
# A trained head is one point of evidence; an explicit head of known rank is another, with
# no training at all. The kernel $\alpha(x, z) = (2\langle x, \mathbf{1} - z\rangle + 1)^k$
# falls as the overlap $\langle x, z\rangle$ grows, more steeply for larger $k$; its
# features are the monomials of $x$ times those of $\mathbf{1} - z$ up to degree $k$, with
# positive coefficients, so it is an NKA head of rank $\sum_{j \le k}\binom{m}{j}$. With
# the overlap readout it needs no pool and no data. The folded cell scores it, exactly in
# integers, on the held-out triples of every reading, and prints the smallest degree that
# reaches the threshold.

# %% tags=["hide-cell"]
from fractions import Fraction

from companion.experiments.e2 import complement_power_head_accuracy
from companion.experiments.e2 import complement_power_rank
from companion.experiments.e2 import e2_data

ladder_rows = []
for name, cfg in READINGS_FULL.items():
    for m, p in cfg.sizes:
        evals = e2_data(cfg, m, p)["evals"]
        row = {"reading": name, "(m, P)": f"({m}, {p})"}
        first = None
        for k in range(1, 5):
            acc = complement_power_head_accuracy(*evals["test/uniform"], k)
            wit = complement_power_head_accuracy(*evals["test/witness"], k)
            row[f"k={k}"] = (f"r={complement_power_rank(m, k)}: "
                             f"{float(acc):.2f} / {float(wit):.2f}")
            if first is None and acc >= Fraction(9, 10):
                first = complement_power_rank(m, k)
        row["rank at 0.9 (uniform)"] = first
        ladder_rows.append(row)
Table(ladder_rows, caption="complement-power heads, overlap readout: rank, then accuracy on "
      "held-out uniform / witness triples")

# %% [markdown]
# On the random pools of X and S-random the explicit heads climb one degree at a time: at
# $m = 8$ rank 9 solves 0.10 of the uniform held-out triples, rank 37 solves 0.77, rank 93
# solves 0.99; at $m = 12$ the same steps land at ranks 13, 79, 299 and 0.9 needs rank
# 794. Random pools hold comparisons at every scale — gap-1 orderings (solved by degree 1),
# gap-2 ratios, witness links — and each degree buys a further share of the sequences, so
# accuracy rises over several doublings of the rank, and the rank that reaches 0.9 grows
# with $m$ beyond 128 at $m \ge 10$, which is where the trained X heads also stop short of
# a sharp crossing. On a code pool every query faces the same single comparison (its
# complement against keys that all tie), which a token-generic head cannot exploit (witness
# accuracy is stuck at 0.46–0.60 until degree 4 or 5) but per-token tables of rank about
# the pool size can: one scale, one step — the capacity step of S-code above.

# %% [markdown]
# ## Paper against ours
#
# The reported numbers beside ours, for the headline and for the reading closest to the
# reported picture; every "ours" cell is read from `results/e2_summary.json`.

# %% tags=["hide-input"]
cols = ["problem sizes", "transition r*", "sharp?", "dense exact seeds", "verdict"]
rows = [dict(zip(["", *cols], ["reported", "not stated", " → ".join(map(str,
             PAPER_TRANSITIONS)), "sharp", "all seeds", "—"], strict=True))]
for label, key in (("ours, headline: X, learned, uniform", ("X", "learned", "uniform")),
                   ("ours: X, overlap, uniform", ("X", "overlap", "uniform")),
                   ("ours: S-code, overlap, witness", ("S-code", "overlap", "witness")),
                   ("ours: S-code, overlap, uniform", ("S-code", "overlap", "uniform"))):
    rows.append({"": label, **{c: summary_line(summary_e2, *key)[c] for c in cols}})
Table(rows)

# %% [markdown]
# ### Why the two pictures differ
#
# Six factors separate our curves from the reported ones: the structure of the pool, held-out
# sequences, the readout, the test distribution, the problem sizes and the dense reference.
#
# :::{dropdown} Each factor: the evidence and its effect
# ```{list-table}
# :header-rows: 1
# :widths: 18 44 38
#
# * - factor
#   - evidence
#   - effect
# * - structure of the pool
#   - on random pools the explicit heads of known rank climb one degree at a time and
#     need rank 93 to 794 for 0.9; on Paley code pools the trained heads' capacity jumps
#     to 1 within one rank step near the pool size
#   - a sharp step needs pools with one dominant comparison per query (witness
#     structure); the reported sizes and pools are not available to us
# * - held-out sequences
#   - S-code's held-out witness accuracy follows the capacity step sharply at $P = 46$
#     only; at $P = 22$ it climbs early, at $P = 62$ it stops at 0.89
#   - generalising to unseen comparisons blurs the step that capacity shows
# * - readout
#   - with the learned readout rank 1 already solves 0.25–0.56 of uniform triples (X);
#     with the overlap readout it solves at most 0.06
#   - a learned readout removes the low regime a sharp curve needs
# * - test distribution
#   - uniform triples on a code pool are mostly ties (rank 2 solves about half); witness
#     triples have a low regime everywhere
#   - the reported words (accuracy on held-out pools) fit uniform triples; a sharp curve
#     is only possible on witness-like ones
# * - problem size
#   - our ladders are token widths 8–12 (X) and pool sizes 22–62 (S-code), 32–128
#     (S-random); S-code's capacity steps sit near 20, 40, 24, not monotone in $P$
#   - a ladder of pool sizes chosen to land on 8, 16, 64 was not run: it would be chosen
#     from the reported numbers
# * - dense reference
#   - exact on every seed in X with the learned readout and in S-code with the overlap
#     readout; not with learned readout tables (S-code), nor on large random shared pools
#   - "dense always exact" depends on the model class and training, as for the heads
# ```
# :::
#
# ## Summary
#
# * **The pre-registered study** (first section) is the chapter's evidence: two arms,
#   validation checkpoints, an optimiser chosen in a pilot, 9 replicates per point, ranks to
#   1,024, bootstrap intervals. {claim-verdict}`e2-transition`: on unseen tokens $r^*$ rises
#   $4 \to 8 \to 8 \to 16$ over $m = 6$ to $12$, each curve over 2 to 4 doublings of the
#   rank; on code pools $64 \to 1024 \to 512$ over 6 to 7. The registered label of every
#   family is {rule-label}`refuted at convergence`, a label of our protocol.
# * *Added after the results*, what the study cannot test: its widths are small; arm A has no
#   failing regime (rank 1 solves 0.57–0.73); arm B has no exact dense reference (5, 1, 0 of
#   9). Judged at the checkpoint, 42 of the headline family's 44 points and 135 of the
#   study's 154 are converged.
# * **The decisive study** (second section) has the failing regime the first lacks (rank 1
#   solves at most 0.07 of the complement triples from $m = 8$ on) and reads
#   {rule-label}`inconclusive`. Together the two studies say one thing: the rank a head needs
#   grows with the width, and it gets there by a climb over several doublings, not the
#   reported step (at $m = 10$, 0.10 at rank 2 to 0.91 at rank 128; at $m = 12$ and 14, 0.85
#   and 0.79 at rank 1,024). The theorem bounds exact heads, so a graded climb does not
#   contradict it; a step beyond $m = 14$ or rank 1,024 is not excluded.
# * **The earlier runs** (rule fixed in commits `525fc89`, `2d367f7`; three readings, both
#   readouts, 5 seeds) pointed the same way: on their headline $r^* = 8 \to 64 \to$ none for
#   $m = 8, 10, 12$, no size sharp, label {rule-label}`differs`. They were read early, on one
#   split, and at $m = 12$ "none" only means the grid stops at 128.
# * Every table is read from committed results (`results/e2_study/`, `results/e2_*_full.json`,
#   `results/e2_summary.json`, `results/e2_protocols/`, `results/e2_quick.json`); two live
#   re-runs (S-code at $P = 22$; the earlier quick sweep at width 8), in the audit trail, are
#   checked against them by assertions.

# %% [markdown]
# ## Audit trail
#
# The checks and per-case tables behind the chapter's verdicts, each executed with the chapter
# and compared by the tests, each folded (click to open): the per-rank curves of the
# shared-pool readings, the verdicts on the hard test triples, the capacity decomposition, a
# live re-run of S-code, and the six earlier protocols with a live re-run of their quick
# sweep.

# %% [markdown]
# **Shared pools, per rank.** The four curves of the shared-pool figure as tables: median
# [min, max] over the five seeds.

# %% tags=["hide-cell"]
display(curve_table(readings["S-code"], "overlap", "witness",
                    caption="S-code, overlap readout: held-out witness triples"))
curve_table(readings["S-code"], "overlap", "uniform",
            caption="S-code, overlap readout: held-out uniform triples")

# %% tags=["hide-cell"]
display(curve_table(readings["S-code"], "learned", "uniform",
                    caption="S-code, learned readout: held-out uniform triples"))
curve_table(readings["S-random"], "overlap", "uniform",
            caption="S-random, overlap readout: held-out uniform triples")

# %% [markdown]
# **A live re-run of S-code** at $P = 22$ on this machine, checked against the committed run
# (only which facts hold is printed).
#
# :::{dropdown} Details
# **A live re-run of S-code, checked against the committed run**
#
# The next cell trains a small version of S-code at $P = 22$ on this machine — overlap
# readout, ranks 4 to 64, two seeds, 1,500 training sequences and 2,000 steps, about twenty
# seconds — and checks the facts the committed full run rests on, on both: the low regime
# exists (at rank 4 the median over seeds fits fewer than 90 % of the training witness
# triples), rank 64 fits every training witness triple on every seed (at least 95 %), and
# dense softmax heads are exact on held-out witness triples on every seed. Trained numbers
# move between CPU code paths, so only which facts hold is printed; the per-rank numbers are
# read from the committed file above.
# :::

# %% tags=["hide-cell"]
from companion.experiments.e2 import READING_QUICK
from companion.experiments.e2 import run_e2

live_code = run_e2(READING_QUICK)["sizes"]["m12-P22"]["overlap"]
full_code = readings["S-code"]["sizes"]["m12-P22"]["overlap"]


facts = {"committed full run": code_facts(full_code, readings["S-code"]["config"]["ranks"]),
         "live quick run": code_facts(live_code, list(READING_QUICK.ranks))}
assert all(all(f.values()) for f in facts.values()), facts
Table([{"fact": fact, **{run: f[fact] for run, f in facts.items()}}
       for fact in facts["live quick run"]])

# %% [markdown]
# **Verdicts on the hard test triples** (witness triples; gap-2 triples on the random pools).

# %% tags=["hide-cell"]
display(verdict_table(summary_e2, "witness", caption="witness triples (hard test)"))
verdict_table(summary_e2, "gap2", caption="gap-2 triples (hard test; random pools only)")

# %% [markdown]
# **Capacity and generalisation below the transition**, per protocol, size and readout:

# %% tags=["hide-cell"]
decomposition_table(summary_e2, "uniform", caption="uniform test triples: capacity share "
                    "of the missing accuracy below the transition")

# %% [markdown]
# **The six earlier protocols: MLP maps on disjoint tokens.** Before the readings, six
# protocols were run and stored (three seeds each). They share one design: MLP maps of the
# token bits, trained on one pool of tokens and tested on a disjoint pool. The book's quick
# mode is one of them (H). Their data, heads, a live re-run of the quick sweep and all six
# sweeps:
#
# :::{dropdown} The data
# For each width $m$ we draw a pool of distinct tokens from $\{0,1\}^m$ (seeded), split it
# 70/30 into a training pool and a test pool that share no token, and build length-3
# sequences inside each pool. Every position of a sequence is a query, so each sequence
# carries three targets $t_i = \min_j \langle x_i, x_j\rangle$.
#
# Two test distributions are used. *Uniform* triples draw the three tokens independently.
# *Near-tie* triples are built around a query $x$ and two other tokens whose overlaps with
# $x$ differ by exactly one — the case where a soft minimum has the least room: the two
# candidate answers are only one apart, so to land within $1/2$ of the smaller one the head
# must put clearly more weight on it than on a token that is almost as good. Half of the
# training sequences are near-ties as well (the protocol table below also shows training on
# uniform triples only).
# :::

# %% tags=["hide-cell"]
from companion.experiments.e2 import TEST_DISTRIBUTIONS
from companion.experiments.e2 import query_gaps
from companion.experiments.e2 import E2_QUICK
from companion.experiments.e2 import e2_data

cfg = E2_QUICK
display(Table([(key, getattr(cfg, key)) for key in (
    "widths", "pool_sizes", "train_fraction", "n_train", "n_test", "near_tie_fraction", "ranks",
    "seeds", "hidden", "value_dim", "feature", "encoding", "skip", "steps", "lr", "threshold")],
    columns=["setting", "value"], caption="quick-mode configuration"))
rows = []
for m, size in zip(cfg.widths, cfg.pool_sizes, strict=True):
    data = e2_data(cfg, m, size)
    train_pool, train_idx = data["train"]
    test_pool, test_uniform = data["evals"]["test/uniform"]
    # the pools share no token
    assert {tuple(t) for t in train_pool}.isdisjoint(tuple(t) for t in test_pool)
    rows.append({"m": m, "train pool": len(train_pool), "test pool": len(test_pool),
                 "train seqs": len(train_idx),
                 "near-tie share of uniform test seqs":
                     (query_gaps(test_pool[test_uniform]) == 1).any(axis=1).mean()})
Table(rows, formats={"near-tie share of uniform test seqs": ".3f"})

# %% [markdown]
# :::{dropdown} The heads
# **The heads**
#
# Every head maps a token's bits through a small MLP. A kernel head (the class of the
# theorem) reads off the MLP's output nonnegative query and key features of rank $r$
# (`exp` of a linear read-out, shifted by constants that cancel in the normalised head),
# values $v(z)$, and a query-dependent affine readout $a(x), b(x)$:
# $y = \langle a(x), \sum_p \alpha_p v(x_p)\rangle / \sum_p \alpha_p + b(x)$ with
# $\alpha_p = \langle \phi_Q(x), \phi_K(x_p)\rangle$. The dense reference uses the same kind
# of network for scores $q(x), k(z) \in \mathbb{R}^m$ and weights
# $e^{\langle q(x), k(z)\rangle}$ — a nonnegative kernel with no finite rank.
#
# All heads of one width — every rank from 1 to 128, every seed, and the dense heads — are
# trained together as one batched program (stacked parameters; ranks are grouped and padded
# to the largest rank of their group, the extra feature columns masked to exactly zero), with
# full-batch Adam on the mean squared error and a cosine learning-rate decay; each head keeps
# its checkpoint with the smallest maximum training error.
# :::

# %% tags=["hide-cell"]
from companion.experiments.e2 import accuracy_table
from companion.experiments.e2 import e2_live_result
from companion.experiments.e2 import e2_model_values
from companion.experiments.e2 import load_e2
from companion.experiments.e2 import summarise_e2
from companion.experiments.e2 import curve_rule
from companion.experiments.reference import check_against_reference
from companion.experiments.sweep import config_hash

result = load_e2(RESULTS / "e2_quick.json")
assert result["config_hash"] == config_hash(E2_QUICK), "not E2_QUICK's"
summary = summarise_e2(result)

# %% [markdown]
# :::{dropdown} The live re-run and the cross-path spread
# **A live re-run, checked against the committed sweep**
#
# The next cell re-trains a small subset of the quick sweep — width $m = 8$, ranks 4 and 16
# (padded to 16, as inside the sweep), seed 0, and the dense head of seed 0, on the same data
# and with the same per-model initialisation as in the sweep, some seconds — and compares each
# head's test accuracy on uniform triples with the committed one. It passes when every head
# is within $\pm 0.25$ of its committed accuracy. The table printed first
# (`results/cross_path_spread.json`, written by `scripts/measure_cross_path_spread.py`) shows
# how far accuracies moved between two CPU code paths of one machine, and between the subset
# and the sweep it is compared with. Most heads move by less than a hundredth, but single
# heads at the larger widths moved by more than a tenth, and medians over seeds by several
# hundredths — which moved the first rank reaching 0.9 at $m = 8$ (printed below the table,
# as recorded by that script). So the
# live subset uses the width whose heads moved least, the tolerance is at least three times
# every move measured there, and transition ranks are read only from the committed file. No
# live head is farther than the tolerance from the threshold 0.9, so the check has no
# verdicts to compare; the transition verdicts are the committed ones. Only the check's
# summary is printed; the live accuracies appear as crosses in the figure below.
# :::

# %% tags=["hide-cell"]
e2_spread = spread["e2_quick"]
paths = spread["paths"]
print(f"measured moves of test accuracies ({paths['plain']['cpu_capability']} vs "
      f"{paths['default']['cpu_capability']} kernels, and a subset trained apart from its "
      "sweep):")
moves = ([("quick sweep, single heads (uniform)", e2_spread["test_accuracy_uniform"])]
         + [(f"quick sweep, single heads, m = {m}", by_width[m])
            for m in sorted(by_width, key=int)]
         + [("quick sweep, single heads (near-tie)", e2_spread["test_accuracy_near_tie"]),
            ("quick sweep, medians over seeds", e2_spread["median_test_accuracy_uniform"]),
            ("quick sweep, dense heads", e2_spread["dense_test_accuracy"]),
            ("live subset", spread["e2_live"])]
         + [(f"live subset vs quick sweep, {paths[path]['cpu_capability']} path", move)
            for path, move in spread["e2_live_against_sweep"].items()])
display(Table([{"what moved": what, "models": move["models"],
                "largest |difference|": move["max_abs_difference"],
                "median": move["median_abs_difference"]} for what, move in moves],
              formats={"largest |difference|": ".3f", "median": ".3f"}))
transitions = spread["e2_quick_transition_ranks"]
print("first ranks reaching 0.9 (uniform) of the quick sweep on the two paths, as recorded: "
      + "; ".join(f"{path}: " + ", ".join(f"m={m}: {by_m[m]['uniform']}"
                                          for m in sorted(by_m, key=int))
                  for path, by_m in transitions.items()))
m_live = E2_LIVE["width"]
live_width = e2_live_result(E2_QUICK)
live = e2_model_values(live_width, "uniform", seeds=E2_LIVE["seeds"], width=m_live)
stored_all = e2_model_values(result["widths"][str(m_live)], "uniform",
                             seeds=E2_QUICK.seeds, width=m_live)
check = check_against_reference(live, {key: stored_all[key] for key in live},
                                quantity="test accuracy", tolerance=TOLERANCE)
print(check.summary())
assert check.passed, check.failure_message()

# %% tags=["hide-cell"]
seeds = result["config"]["seeds"]
for name in TEST_DISTRIBUTIONS:
    display(accuracy_table(result, name, caption=f"test exact-sequence accuracy, {name} "
                           f"triples: median [min, max] over {len(seeds)} seeds"))
accuracy_table(result, "train", caption="train exact-sequence accuracy (median over seeds): how "
               "much is fitting, how much generalising")

# %% tags=["hide-cell"]
thr = result["config"]["threshold"]
print(f"transition r*: the rule's, the smallest r from which the median test accuracy stays "
      f">= {thr} (None: no such r up to 128)")
display(Table([{"m": row["m"], "uniform": row["transition_uniform"],
                "near-tie": row["transition_near_tie"]} for row in summary]))
display(Table([{"threshold": t,
                **{f"m={m}": curve_rule(e["ranks"], e["accuracy"]["uniform"], threshold=t)[
                    "r_star"]
                   for m, e in result["widths"].items()}}
               for t in (0.7, 0.8, 0.9, 0.95)], formats={"threshold": ".2f"},
              caption="the same rule at other thresholds (uniform test triples), to show how "
                      "much the answer depends on the choice"))
Table([{"m": int(m), "uniform": ", ".join(f"{a:.3f}" for a in e["dense"]["uniform"]),
        "near-tie": ", ".join(f"{a:.3f}" for a in e["dense"]["near_tie"])}
       for m, e in result["widths"].items()], caption="dense softmax test accuracy per seed")

# %% tags=["hide-cell"] mystnb={"figure": {"caption": "Test exact-sequence accuracy of the committed quick sweep against feature rank, per width (band: min\u2013max over seeds; dashed: dense softmax). Red crosses: this machine's live re-run of width 8, seed 0; they may differ slightly on yours.", "name": "fig-e2-quick-sweep"}, "image": {"alt": "Two panels of test exact-sequence accuracy against feature rank, one curve per width with a min-max band and dashed dense levels, and red crosses for a live re-run of width 8."}}
import matplotlib.pyplot as plt

fig, axes = plt.subplots(1, 2, figsize=(7.2, 3.6), sharey=True)
colors = plt.cm.viridis(np.linspace(0, 0.8, len(result["widths"])))
for ax, name in zip(axes, TEST_DISTRIBUTIONS):
    for color, (m, e) in zip(colors, result["widths"].items()):
        acc = np.asarray(e["accuracy"][name])
        ranks = e["ranks"]
        ax.plot(ranks, np.median(acc, axis=1), "o-", color=color, label=f"m = {m}")
        ax.fill_between(ranks, acc.min(axis=1), acc.max(axis=1), color=color, alpha=0.15)
        ax.axhline(np.median(e["dense"][name]), color=color, ls="--", lw=1)
        if name == "uniform" and int(m) == m_live:
            ax.plot(live_width["ranks"], [a[0] for a in live_width["accuracy"][name]], "x",
                    color="tab:red", ms=7, label=f"live re-run, m = {m}, seed 0")
    ax.axhline(thr, color="grey", ls=":", lw=1)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("feature rank $r$")
    ax.set_title(f"{name.replace('_', '-')} test triples", fontsize=10)
axes[0].set_ylabel("test exact-seq. accuracy")
fig.legend(*axes[0].get_legend_handles_labels(), fontsize=9, loc="lower center", ncol=4,
           bbox_to_anchor=(0.5, -0.08))
plt.tight_layout()
plt.show()

# %% [markdown]
# :::{dropdown} What the quick sweep shows
# **What the quick sweep shows**
#
# * At the smallest width the largest rise is between $r = 4$ and $r = 8$, and the curve is
#   flat from $r = 16$ on: more rank buys nothing once it has risen. This is the closest
#   thing to a transition that we see.
# * At the larger widths the curves rise over several doublings and stay *below* the
#   threshold; the level they reach drops as $m$ grows, and at the largest width the curve
#   is still creeping up at $r = 128$.
# * The training accuracy of the same heads is close to 1 from moderate ranks on, at every
#   width: what separates the test curves from 1 is **generalisation to unseen tokens**, not
#   the capacity to fit the training sequences. Rank narrows that gap only slowly.
# * The dense softmax heads, trained the same way on the same data, are exact or within one
#   test sequence of exact on every seed, at all three widths and on both test
#   distributions: the gap is not a failure of the data or of the training loop as such.
# * Near-tie test triples are not harder than uniform ones for these heads (if anything
#   slightly easier). At these widths about two thirds of the uniform triples already hold a
#   gap-1 pair for some query (the share printed in the data cell), and half of the training
#   triples are near-ties. (For the overlap-readout heads of protocol G below they are
#   harder.)
#
# A transition rank is therefore found only at the smallest width at our stated threshold
# of 0.9; the threshold table shows that lower thresholds would report a transition at more
# widths, which is why we state the threshold and keep it fixed (it was chosen before any
# sweep ran).
# :::
#
#
#
# :::{dropdown} The six protocols
# **The six protocols**
#
# The quick mode above is one protocol among six. Each row below is a complete sweep
# (three widths, ranks 1 to 128, three seeds, dense reference), registered in
# `companion.experiments.e2.pipeline.E2_PROTOCOLS` and stored under `results/e2_protocols/`;
# the table is read from those files, so it shows the outcomes we did not keep as well as the
# one we did.
# Any row is regenerated (a few minutes on two cores) by
#
# ```
# python -c "from companion.experiments.e2.pipeline import *; c = protocol(**E2_PROTOCOLS[\
#     'F_mlp_1500steps']); run_e2(c, e2_path('results', c, 'F_mlp_1500steps'), restart=True)"
# ```
#
# What the protocols change:
#
# * **A** — as F, but trained on uniform triples only (no near-ties in training).
# * **E** — larger pools at $m = 12, 16$, a wider MLP with inputs in $\{-1, +1\}$ and an
#   affine shortcut from the bits, a higher learning rate (0.03) and fewer steps.
# * **F** — MLP maps (one hidden layer of 32), 1,500 steps at learning rate 0.01, half of the
#   training triples near-ties, widths 8, 12, 16.
# * **G** — as F, but values and readout fixed to the overlap form used by the constructions
#   ($v(z) = z$, $a(x) = x$, $b = 0$): the head only learns *where to attend*.
# * **H** — as F with widths 8, 10, 12: the book's quick mode, stored before the current
#   training engine (its file holds a single "sweep" unit). Its numbers differ from the
#   committed quick sweep above in the second decimal, enough to move the transition at
#   $m = 8$ between $r = 8$ and $r = 16$: a median near the threshold is as sensitive to
#   rounding as the single heads are.
# * **I** — as H, but pools of 512 tokens at $m = 10, 12$ (358 training tokens instead of
#   179): the same heads with twice as many tokens to learn from. It takes about twice as
#   long as H, too long for the book's build budget.
#
# Earlier exploratory runs with 600 training steps (not stored, so not tabulated) fitted
# even the training set poorly at $m \geq 12$, dense heads included; that is why every
# stored protocol but E trains for 1,500 steps.
# :::

# %% tags=["hide-cell"]
from companion.experiments.e2 import E2_PROTOCOLS
from companion.experiments.e2 import load_e2_protocols

stored = load_e2_protocols(RESULTS / "e2_protocols")
print("columns: median test accuracy over seeds (uniform triples unless marked near-tie); "
      f"transition at threshold {E2_QUICK.threshold}; dense: worst seed (uniform)")
for name, res in stored.items():
    rows = []
    for row in summarise_e2(res):
        med = np.asarray(row["median_uniform"])
        best = int(np.argmax(med))
        rows.append({"m": row["m"], "acc r=1": med[0],
                     "best r (acc)": f"{row['ranks'][best]} ({med[best]:.2f})",
                     "acc r=128": med[-1], "near-tie r=128": row["median_near_tie"][-1],
                     "train r=128": row["median_train"][-1],
                     "transition": row["transition_uniform"],
                     "dense min": row["dense_min_uniform"]})
    display(Table(rows, caption=f"{name}: changes to E2_QUICK {E2_PROTOCOLS[name]}",
                  formats={k: ".2f" for k in ("acc r=1", "acc r=128", "near-tie r=128",
                                              "train r=128", "dense min")}))

# %% tags=["hide-cell"] mystnb={"figure": {"caption": "The six earlier protocols: median test accuracy on uniform triples of unseen tokens against feature rank, one curve per width (dashed: dense softmax). No panel has a transition at every width. (The \"transition\" columns of this part are the rule's $r^*$, as in the verdict table above. Before the rule this part printed the first rank whose median reaches 0.9; that differs where a curve dips back below the threshold: protocol A at $m = 8$ crossed at $r = 32$ and I at $m = 10$ at $r = 16$, and neither stays above.)", "name": "fig-e2-earlier-protocols"}, "image": {"alt": "Six small panels, one per earlier protocol, of median test accuracy against feature rank, one curve per width, with dashed dense-softmax levels; no panel shows a sharp jump at every width."}}
fig, axes = plt.subplots(2, 3, figsize=(7.2, 5.6), sharex=True, sharey=True)
for ax, (name, res) in zip(axes.flat, stored.items()):
    colors = plt.cm.viridis(np.linspace(0, 0.8, len(res["widths"])))
    for color, (m, e) in zip(colors, res["widths"].items()):
        acc = np.median(np.asarray(e["accuracy"]["uniform"]), axis=1)
        ax.plot(e["ranks"], acc, "o-", ms=3, color=color, label=f"m = {m}")
        ax.axhline(np.median(e["dense"]["uniform"]), color=color, ls="--", lw=1)
    ax.set_xscale("log", base=2)
    ax.set_title(name.split("_")[0] + ": " + " ".join(name.split("_")[1:]), fontsize=9)
    ax.legend(fontsize=9, loc="lower right", handlelength=1)
for ax in axes[1]:
    ax.set_xlabel("feature rank $r$")
for ax in axes[:, 0]:
    ax.set_ylabel("median test acc.")
plt.tight_layout()
plt.show()
