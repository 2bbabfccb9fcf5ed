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
# # Out-of-distribution scaling: feature rank against unseen tokens (E2)
#
# The lower bound of the theory chapters is a worst-case statement: it builds a special
# family of length-3 inputs and shows that *no* head of small feature rank gets all of them
# right. This chapter asks the statistical companion question. We train heads whose feature
# maps are small networks of the token bits, on one set of tokens, and test them on a
# **disjoint** set of tokens they have never seen. A test sequence counts as solved only if
# the head's outputs at all three positions round to the right Min-IP targets
# (*exact-sequence accuracy*). How does that accuracy depend on the feature rank $r$, and on
# the token width $m$?
#
# The paper {cite}`opazo2026threetokens` reports a sharp transition in $r$ whose location
# moves from $r = 8$ to $16$ to $64$ as the problem grows, with dense softmax attention
# exact on every seed. We report what our own runs show, including the protocols that did
# not give a clean picture.

# %% tags=["remove-output"]
# Install the companion where it is missing (Colab, a bare kernel); a no-op locally and on
# Binder. Versions come from the lock file that CI uses (constraints.txt).
import importlib.util
import subprocess
import sys

if importlib.util.find_spec("companion") is None:
    REPO = "https://github.com/three-tokens/companion"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet",
         "--constraint", f"{REPO}/raw/main/constraints.txt", f"companion @ git+{REPO}@main"],
        check=True,
    )

# %%
import numpy as np

from companion.reproducibility import seed_everything

seed_everything(0)

# %% [markdown]
# ## The data
#
# For each width $m$ we draw a pool of distinct tokens from $\{0,1\}^m$ (seeded), split it
# 70/30 into a training pool and a test pool that share no token, and build length-3
# sequences inside each pool. Every position of a sequence is a query, so each sequence
# carries three targets $t_i = \min_j \langle x_i, x_j\rangle$.
#
# Two test distributions are used. *Uniform* triples draw the three tokens independently.
# *Near-tie* triples are built around a query $x$ and two other tokens whose overlaps with
# $x$ differ by exactly one — the case where a soft minimum has the least room, and the
# links with gap 1 are exactly where the gap-domination lemma is tight. Half of the training
# sequences are near-ties as well (the protocol table below also shows training on uniform
# triples only).

# %%
from companion.ood import E2_QUICK, TEST_DISTRIBUTIONS, make_e2_data

cfg = E2_QUICK
print("quick-mode configuration:")
for key in ("widths", "pool_sizes", "train_fraction", "n_train", "n_test", "near_tie_fraction",
            "ranks", "seeds", "hidden", "value_dim", "feature", "encoding", "skip", "steps",
            "lr", "threshold"):
    print(f"  {key}: {cfg[key]}")

print("\n  m  train pool  test pool  train seqs  near-tie share of uniform test seqs")
for m, size in zip(cfg["widths"], cfg["pool_sizes"]):
    data = make_e2_data(m, size, cfg["train_fraction"], cfg["n_train"], cfg["n_test"],
                        cfg["near_tie_fraction"], cfg["data_seed"])
    train = {tuple(t) for t in data.train_pool}
    assert train.isdisjoint(tuple(t) for t in data.test_pool)  # the pools share no token
    seqs = data.test_pool[data.test_idx["uniform"]]
    gram = np.einsum("sim,sjm->sij", seqs, seqs)
    tie = np.zeros(len(seqs), dtype=bool)
    for i in range(3):
        a, b = [j for j in range(3) if j != i]
        tie |= np.abs(gram[:, i, a] - gram[:, i, b]) == 1
    print(f"{m:3d}  {len(data.train_pool):10d}  {len(data.test_pool):9d}  "
          f"{len(data.train_idx):10d}  {tie.mean():.3f}")

# %% [markdown]
# ## The heads
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

# %%
# NBVAL_IGNORE_OUTPUT
# Training shows a tqdm progress bar (timings and refresh points differ on every run); the
# results are printed, rounded, in the next cell.
from companion.ood import run_e2_sweep, summarise_e2, transition_rank

result = run_e2_sweep(E2_QUICK, progress=True)
summary = summarise_e2(result)

# %%
seeds = result["config"]["seeds"]
for name in TEST_DISTRIBUTIONS:
    print(f"test exact-sequence accuracy, {name} triples: median [min, max] over "
          f"{len(seeds)} seeds")
    print("     r  " + "  ".join(f"{'m = ' + str(m):>18}" for m in result["widths"]))
    for i, r in enumerate(result["config"]["ranks"]):
        cells = []
        for e in result["widths"].values():
            a = np.asarray(e["accuracy"][name][i])
            cells.append(f"{np.median(a):.2f} [{a.min():.2f}, {a.max():.2f}]")
        print(f"{r:6d}  " + "  ".join(f"{c:>18}" for c in cells))
    cells = []
    for e in result["widths"].values():
        a = np.asarray(e["dense"][name])
        cells.append(f"{np.median(a):.2f} [{a.min():.2f}, {a.max():.2f}]")
    print(f"{'dense':>6}  " + "  ".join(f"{c:>18}" for c in cells))
    print()

print("train exact-sequence accuracy (median over seeds) — how much is fitting, how much "
      "generalising")
print("     r  " + "  ".join(f"{'m = ' + str(m):>8}" for m in result["widths"]))
for i, r in enumerate(result["config"]["ranks"]):
    print(f"{r:6d}  " + "  ".join(f"{row['median_train'][i]:8.2f}" for row in summary))
print(f"{'dense':>6}  " + "  ".join(
    f"{np.median(e['dense_train_accuracy']):8.2f}" for e in result["widths"].values()))

# %%
thr = result["config"]["threshold"]
print(f"transition r: first r whose median test accuracy reaches {thr} "
      "(None: no r up to 128 does)")
for row in summary:
    print(f"  m = {row['m']:2d}: uniform {row['transition_uniform']}, "
          f"near-tie {row['transition_near_tie']}")
print("\nthe same rule at other thresholds (uniform test triples), to show how much the "
      "answer depends on the choice")
for t in (0.7, 0.8, 0.9, 0.95):
    print(f"  threshold {t:.2f}: " + ", ".join(
        f"m={int(m)}: {transition_rank(e['ranks'], e['accuracy']['uniform'], t)}"
        for m, e in result["widths"].items()))
print("\ndense softmax test accuracy per seed")
for m, e in result["widths"].items():
    print(f"  m = {int(m):2d}: uniform " + ", ".join(f"{a:.3f}" for a in e["dense"]["uniform"])
          + " | near-tie " + ", ".join(f"{a:.3f}" for a in e["dense"]["near_tie"]))

# %%
import matplotlib.pyplot as plt

fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
colors = plt.cm.viridis(np.linspace(0, 0.8, len(result["widths"])))
for ax, name in zip(axes, TEST_DISTRIBUTIONS):
    for color, (m, e) in zip(colors, result["widths"].items()):
        acc = np.asarray(e["accuracy"][name])
        ranks = e["ranks"]
        ax.plot(ranks, np.median(acc, axis=1), "o-", color=color, label=f"m = {m}")
        ax.fill_between(ranks, acc.min(axis=1), acc.max(axis=1), color=color, alpha=0.15)
        ax.axhline(np.median(e["dense"][name]), color=color, ls="--", lw=1)
    ax.axhline(thr, color="grey", ls=":", lw=1)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("feature rank r")
    ax.set_title(f"{name.replace('_', '-')} test triples")
axes[0].set_ylabel("exact-sequence accuracy (unseen tokens)")
axes[0].legend(title="solid: NKA median (band: seeds)\ndashed: dense softmax", fontsize=8,
               title_fontsize=8, loc="lower right")
plt.tight_layout()
plt.show()

# %% [markdown]
# ### What the quick sweep shows
#
# * At the smallest width most of the rise happens between $r = 4$ and $r = 8$, and the
#   curve is flat after that: more rank buys nothing once it has risen. This is the closest
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

# %% [markdown]
# ## Protocols we tried
#
# The quick mode above is one protocol among several. Each row below is a complete sweep
# (three widths, ranks 1 to 128, three seeds, dense reference), registered in
# `companion.ood.E2_PROTOCOLS` and stored under `results/e2_protocols/`; the table is read
# from those files, so it shows the outcomes we did not keep as well as the one we did.
# Any row is regenerated (a few minutes on two cores) by
#
# ```
# python -c "from companion.ood import E2_PROTOCOLS, run_e2_protocol as run; \
#            run('F_mlp_1500steps', E2_PROTOCOLS['F_mlp_1500steps'], restart=True)"
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
# * **H** — as F with widths 8, 10, 12: the book's quick mode.
#
# Earlier exploratory runs with 600 training steps (not stored, so not tabulated) fitted
# even the training set poorly at $m \geq 12$, dense heads included; that is why every
# stored protocol but E trains for 1,500 steps.

# %%
from pathlib import Path

from companion.ood import E2_PROTOCOLS, E2_QUICK, load_e2_protocols

stored = load_e2_protocols(Path("..") / "results" / "e2_protocols")
print("columns: median test accuracy (uniform triples) over seeds; transition at "
      f"threshold {E2_QUICK['threshold']}; dense: worst seed\n")
for name, res in stored.items():
    print(f"{name}: changes to E2_QUICK {E2_PROTOCOLS[name]}")
    print("     m  acc r=1  best r (acc)  acc r=128  train r=128  transition  dense min")
    for row in summarise_e2(res):
        med = np.asarray(row["median_uniform"])
        best = int(np.argmax(med))
        print(f"   {row['m']:3d}  {med[0]:7.2f}  {row['ranks'][best]:6d} ({med[best]:.2f})"
              f"  {med[-1]:9.2f}  {row['median_train'][-1]:11.2f}  "
              f"{str(row['transition_uniform']):>10}  {row['dense_min_uniform']:9.2f}")
    print()

# %%
fig, axes = plt.subplots(1, len(stored), figsize=(3.2 * len(stored), 3.4), sharey=True)
for ax, (name, res) in zip(axes, stored.items()):
    colors = plt.cm.viridis(np.linspace(0, 0.8, len(res["widths"])))
    for color, (m, e) in zip(colors, res["widths"].items()):
        acc = np.median(np.asarray(e["accuracy"]["uniform"]), axis=1)
        ax.plot(e["ranks"], acc, "o-", ms=3, color=color, label=f"m = {m}")
        ax.axhline(np.median(e["dense"]["uniform"]), color=color, ls="--", lw=1)
    ax.set_xscale("log", base=2)
    ax.set_title(name.split("_")[0] + ": " + " ".join(name.split("_")[1:]), fontsize=9)
    ax.set_xlabel("r")
    ax.legend(fontsize=7, loc="lower right")
axes[0].set_ylabel("median test accuracy (uniform)")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Paper against ours
#
# "Paper" is what the paper reports (through the explainer we work from); "ours" is
# computed from the quick-mode sweep of this chapter (uniform test triples), and "setting"
# names the difference that matters most for the comparison.

# %%
paper = {
    "shape of the curve": "sharp transition in r",
    "transition r as the problem grows": "8 -> 16 -> 64",
    "dense softmax": "exact on all seeds",
}
ms = [row["m"] for row in summary]
ours = {
    "shape of the curve": "median r=1 -> r=128 (largest rise between neighbouring r): "
    + ", ".join(f"m={row['m']}: {row['median_uniform'][0]:.2f} -> "
                f"{row['median_uniform'][-1]:.2f} ({row['largest_step_uniform']:+.2f})"
                for row in summary),
    "transition r as the problem grows": " -> ".join(
        str(row["transition_uniform"]) for row in summary) + f"  (m = {ms}, median >= {thr})",
    "dense softmax": "worst seed (seeds with accuracy exactly 1): " + ", ".join(
        f"m={row['m']}: {row['dense_min_uniform']:.3f} ({row['dense_exact_seeds']['uniform']}"
        f"/{len(seeds)})" for row in summary),
}
setting = {
    "shape of the curve": "our accuracy is on unseen tokens; r = 1 ... 128",
    "transition r as the problem grows": "problem sizes: our widths m; the paper's sizes unknown",
    "dense softmax": "same MLP maps, scores in R^m, same training",
}
for key in paper:
    print(key)
    print(f"  paper:   {paper[key]}")
    print(f"  ours:    {ours[key]}")
    print(f"  setting: {setting[key]}")

# %% [markdown]
# ### Why the two pictures may differ
#
# Several differences in setting could account for the gap, and our runs cannot rank them.
# *Problem size.* We grow the token width $m$ with a fixed budget of 179 training tokens;
# the paper's notion of problem size and its pool sizes are not available to us, so the
# ladders need not correspond. *What limits accuracy.* In every protocol we stored, the
# kernel heads fit their training sequences far better than they generalise, and the gap
# widens with $m$; a sharp transition in rank would need a regime where rank, not
# generalisation from a few hundred tokens, is the binding constraint — larger pools and
# longer training (the `E2_FULL` configuration, `python -m companion e2 --full`) are the
# obvious next step, beyond a two-core build. *Readout.* With learned values and readout
# (quick mode) even rank 1 gets a sizeable fraction right, which flattens the low end of
# the curve; with the readout fixed to overlaps (protocol G) rank 1 fails completely and
# the curve rises steadily up to $r = 128$ — a clearer dependence on rank, but still no
# step. *Theory.* The lower bound is a worst-case statement about special families;
# uniformly random triples from a pool need not contain that structure, so the theorem
# does not predict a sharp transition for this statistical task. *Dense reference.* Dense
# softmax is exact on every seed on our ladder, as in the paper, but with the same budget
# at $m = 16$ (protocols A, F, G) it is not: the paper's "always exact" depends on the data
# and training budget as well.
