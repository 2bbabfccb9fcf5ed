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
from companion.ood import run_e2_sweep, summarise_e2

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
# ## Protocols we tried
#
# The quick mode above is one protocol among several. Each row below is a complete sweep
# (three widths, ranks 1 to 128, three seeds, dense reference) run with
# `companion.ood.run_e2_protocol` and stored under `results/e2_protocols/`; the table is
# read from those files, so it shows outcomes we did not choose to keep as well as the ones
# we did. To regenerate a row (a few minutes each on two cores):
#
# ```
# python -c "from companion.ood import run_e2_protocol; run_e2_protocol('<name>', <changes>, restart=True)"
# ```
#
# with `<changes>` the setting differences printed for that row (relative to `E2_QUICK`).

# %%
from pathlib import Path

from companion.ood import load_e2_protocols

stored = load_e2_protocols(Path("..") / "results" / "e2_protocols")
keys = ("pool_sizes", "n_train", "hidden", "encoding", "skip", "readout", "lr", "steps",
        "near_tie_fraction")
for name, res in stored.items():
    c = res["config"]
    print(f"{name}: widths {c['widths']}, " + ", ".join(f"{k} {c[k]}" for k in keys))
    print("     m  acc r=1  best r (acc)    acc r=128  train r=128  transition  dense min")
    for row in summarise_e2(res):
        med = np.asarray(row["median_uniform"])
        best = int(np.argmax(med))
        print(f"   {row['m']:3d}  {med[0]:7.2f}  {row['ranks'][best]:6d} ({med[best]:.2f})  "
              f"{med[-1]:9.2f}  {row['median_train'][-1]:11.2f}  "
              f"{str(row['transition_uniform']):>10}  {row['dense_min_uniform']:9.2f}")
    print()

# %% [markdown]
# ## Paper against ours
#
# The paper's column is what the paper reports (through the explainer we work from); our
# column is computed from the quick-mode sweep of this chapter.

# %%
paper = {
    "shape of the curve": "sharp transition in r",
    "transition r as the problem grows": "8 -> 16 -> 64",
    "dense softmax": "exact on all seeds",
}
ms = [row["m"] for row in summary]
ours = {
    "shape of the curve": "largest rise between neighbouring r: " + ", ".join(
        f"m={row['m']}: {row['largest_step_uniform']:+.2f}" for row in summary),
    "transition r as the problem grows": " -> ".join(
        str(row["transition_uniform"]) for row in summary) + f"  (m = {ms}, median >= {thr})",
    "dense softmax": "min over seeds: " + ", ".join(
        f"m={row['m']}: {row['dense_min_uniform']:.2f}" for row in summary),
}
setting = {
    "shape of the curve": "our accuracy is on unseen tokens; r = 1 ... 128",
    "transition r as the problem grows": "problem sizes: our widths m; the paper's sizes unknown",
    "dense softmax": "same MLP maps, scores in R^m, same training",
}
print(f"{'':36} {'paper':24} ours")
for key in paper:
    print(f"{key:36} {paper[key]:24} {ours[key]}")
    print(f"{'':36} {'':24} [{setting[key]}]")
