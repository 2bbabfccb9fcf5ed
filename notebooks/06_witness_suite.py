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
# # E1 — the witness suite: training against a certified bound
#
# Theorem E turns a code $S$ into a finite **witness family** $F(S)$ of length-3 inputs and
# a certificate: every normalised nonnegative kernel-attention (NKA) head with error below
# $1/2$ on $F(S)$ has feature rank $r \ge r^*$. This chapter puts the certificate in front of
# gradient descent. We train heads of rank $r \in \{1, 2, 4, \dots, 64\}$ — plus 20, 24,
# 27, 28, where this family's certified bound and its exact constructions sit — on our
# 24-bit witness, several seeds each, and ask three questions:
#
# 1. **Consistency** — does any trained head of rank $r < r^*$ get below error $1/2$? If one
#    did, the bound or the code would be wrong; the check below fails loudly.
# 2. **Where training succeeds** — and how that compares with the certified lower bound and
#    with explicit exact constructions (the *sandwich*).
# 3. **Why** — Lemma B's gap domination, measured live on the trained heads.
#
# The heads' maps are **lookup tables over the family's distinct tokens**: the theorem
# quantifies over arbitrary maps, so tables are its strongest test (no inductive bias to
# blame). All (rank, seed) heads of a rank group train as one batched tensor program
# (`companion.train.train_batched`, stacked parameters, ranks padded with masked features).
# The book runs a **quick mode**; the full sweep (5 seeds, longer schedules) is one command
# away, and its committed results feed the sandwich and the comparison with the paper.

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
import json
from fractions import Fraction
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from companion.e1 import (
    E1_FULL,
    E1_QUICK,
    check_e1_config,
    consistency_violations,
    lemma_b_violations,
    link_weight_ratios,
    query_indicator_head,
    run_e1_sweep,
    summarise_e1,
    train_e1_unit,
)
from companion.reproducibility import seed_everything
from companion.sweeps import config_hash
from companion.witness import (
    experiment_witness_24,
    indicator_head,
    kernel_ratio_matrix,
    max_error_exact,
    verify_certificate,
)

seed_everything(0)

# %% [markdown]
# ## The family and its certificate
#
# $S$ is the Paley ($q = 23$) subset that the theory chapter selected (the largest certified
# bound among families of 1,000–2,500 sequences): weight-12 vectors in $\{0,1\}^{24}$. The
# family holds, for every query $x \in S$, pure sequences on $\bar x$, on every $\bar y$ and
# on the chain keys, and every arrangement of the mixed sequence of each chain link the
# certificate uses. The query sits at position 1 (bidirectional form). We re-verify the
# certificate from the raw tokens before training anything.

# %%
family = experiment_witness_24()
bound = verify_certificate(family.certificate, family)
r_star = bound.rank
kinds, counts = np.unique(family.kinds, return_counts=True)
print(f"|S| = {len(family.S)} queries, token width m = {family.S.shape[1]}, weight {int(family.S[0].sum())}")
print(f"distinct tokens T = {len(family.tokens)}, sequences N = {len(family)}  "
      + ", ".join(f"{k}: {c}" for k, c in zip(kinds, counts)))
print(f"chain links: {len(family.links)}, gaps used: {sorted({l.gap for l in family.links})}")
print(f"certified bound, Theorem E (trace):  r >= {bound.trace_bound} = {float(bound.trace_bound):.3f}"
      f"  ->  r >= {bound.trace_rank}")
print(f"certified bound, Lemma D' (c = {bound.sharpened_c}): r >= {bound.sharpened_bound}"
      f"  ->  r >= {bound.sharpened_rank}")
print(f"r* = {r_star}")

# %% [markdown]
# ## Protocol
#
# * **Heads.** `TableKernelHeads`: raw tables $q \in \mathbb{R}^{T\times r}$ and position-dependent
#   $k^{(p)} \in \mathbb{R}^{T\times r}$, features $\varphi = \exp(\text{raw})$ (nonnegative),
#   position-dependent values $v^{(p)} \in \mathbb{R}^{T\times 16}$, readout table $a$ and bias
#   table $b$ over the query token. Rank $r$ is padded to its group's largest rank with
#   features that are identically zero (tests check the padding changes nothing but rounding).
#   Init: raw tables and values $\mathcal N(0,1)$, readout $\mathcal N(0, 1/16)$, bias 0.
# * **Dense baseline.** `TableSoftmaxHeads`: $\alpha(x,z) = \exp\langle q(x), k(z)\rangle$ with
#   $q, k$ tables in $\mathbb{R}^{24}$ (the paper's $m$-dimensional scores), $q,k$ init
#   $\mathcal N(0, 0.2^2)$ — see the dense section for why not 1.
# * **Training.** Full-batch Adam, lr $3\cdot10^{-2}$ with cosine decay to 2 %, MSE; then a
#   second cosine phase on a smooth $L_{16}$-norm surrogate of the max error; each model keeps
#   the checkpoint with the smallest max error over the family. A head **solves** $F(S)$ when
#   that max error is below $1/2$ (rounding then returns every target).

# %%
quick = check_e1_config(E1_QUICK)
for key in ("ranks", "rank_groups", "seeds", "dense_seeds", "feature", "d", "lr", "steps",
            "surrogate_steps", "surrogate_power"):
    print(f"{key:>16}: {quick[key]}")
print(f"{'config hash':>16}: {config_hash(quick)}")

# %% [markdown]
# ## The sweep (quick mode)
#
# Every rank group (all its ranks × all seeds) trains as one tensor program, and so does the
# dense baseline. The cell takes one to two minutes on two cores.

# %%
# NBVAL_IGNORE_OUTPUT: trained numbers differ in the 2nd decimal across CPUs (AVX2 vs
# AVX-512 kernels round differently and training amplifies it); the asserts hold anywhere.
sweep = run_e1_sweep(quick, keep_models=True)
rows = summarise_e1(sweep)


def print_table(rows):
    print(f"{'r':>6} {'max error: median':>17} {'[min, max]':>16} {'within 1/2':>11} {'solved':>7}")
    for row in rows:
        print(f"{str(row['r']):>6} {row['median_max_error']:>17.3f} "
              f"[{row['min_max_error']:6.3f}, {row['max_max_error']:6.3f}] "
              f"{row['median_fraction_within_half']:>11.3f} {row['solved']:>4}/{row['seeds']}")


print_table(rows)

# %% [markdown]
# ## Consistency check (this cell can fail)
#
# No head of rank below $r^*$ may reach max error $< 1/2$. An assertion, not a plot: a
# violation would mean that either the certificate or the training code is wrong.

# %%
# NBVAL_IGNORE_OUTPUT: trained numbers differ in the 2nd decimal across CPUs (AVX2 vs
# AVX-512 kernels round differently and training amplifies it); the asserts hold anywhere.
violations = consistency_violations(sweep, r_star)
trained_below = [r for r in quick["ranks"] if r < r_star]
print(f"heads with r < r* = {r_star}: ranks {trained_below} x {len(quick['seeds'])} seeds")
print("violations:", violations)
assert not violations, "a head below the certified rank solved the family: bound or code is wrong"
solved_ranks = sorted({row["r"] for row in rows if row["r"] != "dense" and row["solved"] > 0})
all_seeds = sorted({row["r"] for row in rows if row["r"] != "dense" and row["solved"] == row["seeds"]})
r_train = min(solved_ranks) if solved_ranks else None
print(f"smallest trained rank solving at least one seed: {r_train}; all seeds: {min(all_seeds) if all_seeds else None}")

# %% [markdown]
# ### The causal form
#
# Theorem E also covers the causal final-query form (the query is the last token and attends
# to the two before it and to itself). The same family with the query moved to position 3
# carries the same certificate; we re-verify it and train the ranks on either side of the
# trained threshold (one batched unit, quick schedule). The same consistency check applies.

# %%
# NBVAL_IGNORE_OUTPUT: trained numbers differ in the 2nd decimal across CPUs (AVX2 vs
# AVX-512 kernels round differently and training amplifies it); the asserts hold anywhere.
family_causal = experiment_witness_24("causal")
bound_causal = verify_certificate(family_causal.certificate, family_causal)
print(f"causal: query position {family_causal.query_position + 1} of 3, N = {len(family_causal)}, "
      f"r* = {bound_causal.rank}")
causal_records, _ = train_e1_unit(quick, family_causal, (16, 27, 28, 32))
causal = {"units": {"causal": {"models": causal_records}}}
print_table(summarise_e1(causal))
assert not consistency_violations(causal, bound_causal.rank)

# %% [markdown]
# ## The dense softmax baseline, and the initialisation that makes it train
#
# The dense head must reach error $< 1/2$ on every seed — it has the capacity: Proposition F
# solves Min-IP with $m$-dimensional scores and constant temperature. A scratch probe saw the
# table-parameterised dense head stuck at max error $\approx 6.8$ when $q, k$ start with
# standard deviation 1. The reason is visible before any training step: with $24$-dimensional
# $q, k$ of std 1 the logits $\langle q(x), k(z)\rangle$ have std $\approx \sqrt{24} \approx 4.9$,
# so softmax over three positions starts almost one-hot and its gradient
# $w_p(\delta_{pq} - w_q)$ nearly vanishes. With std 0.2 the logits have std $\approx 0.2$,
# the weights start near uniform and every position gets gradient. Below: the initial
# attention concentration for both, and the same schedule trained from std 1.

# %%
import torch  # noqa: E402

from companion.heads import TableSoftmaxHeads  # noqa: E402

ids = torch.as_tensor(family.token_ids)
for std in (1.0, 0.2):
    heads = TableSoftmaxHeads(quick["dense_seeds"], len(family.tokens), score_dim=24, qk_std=std)
    with torch.no_grad():
        la, _ = heads.pair_tables()
        x = ids[:, 0]
        logits = torch.stack([la[:, 0, x, ids[:, p]] for p in range(3)], dim=-1)
        w = torch.softmax(logits, dim=-1)
    print(f"init std {std}: logit std {logits.std().item():.2f}, mean largest weight "
          f"{w.amax(-1).mean().item():.3f}, inputs with a weight > 0.99: "
          f"{(w.amax(-1) > 0.99).float().mean().item():.3f}")

# %%
# NBVAL_IGNORE_OUTPUT: trained numbers differ in the 2nd decimal across CPUs (AVX2 vs
# AVX-512 kernels round differently and training amplifies it); the asserts hold anywhere.
dense_std1, _ = train_e1_unit({**quick, "qk_std": 1.0}, family, None)
dense_ok = [m for m in sweep["units"]["dense"]["models"]]
print("\nseed  max error (std 1)  max error (std 0.2)")
for a, b in zip(dense_std1, dense_ok):
    print(f"{a['seed']:>4} {a['best_max_error']:>18.3f} {b['best_max_error']:>20.3f}")
assert all(m["best_max_error"] < 0.5 for m in dense_ok), "dense baseline failed a seed"

# %% [markdown]
# ## Live certificate: gap domination in the trained heads
#
# Lemma B says: if a head is within $\varepsilon < 1/2$ on a link's pure sequences
# $(x, z, z)$, $(x, z', z')$ and on every arrangement of its mixed sequence, where
# $g = \langle x, z'\rangle - \langle x, z\rangle$, then its total weights on the pure
# sequences obey $D(x;z)/D(x;z') \ge c_{3,\varepsilon}(g) = (g - 2\varepsilon)/(2\varepsilon)$.
# We convert trained heads to `KernelAttentionHead`s (float64; the package's reference
# evaluator, cross-checked against the training forward pass), compute $D$ with the witness
# module's `total_weights`, and for every link take $\varepsilon$ = the head's own max error on
# that link's rows. The lemma must hold on every link where that $\varepsilon < 1/2$ — for
# solving and failing heads alike; a failing head has links where $\varepsilon \ge 1/2$, and
# there nothing forces the ratio.

# %%
# NBVAL_IGNORE_OUTPUT: trained numbers differ in the 2nd decimal across CPUs (AVX2 vs
# AVX-512 kernels round differently and training amplifies it); the asserts hold anywhere.
def find(kind_rank, seed=0):
    for key, model in sweep["models"].items():
        for j, (r, s) in enumerate(zip(getattr(model, "ranks", [0] * model.num_models), model.seeds)):
            if (key == "dense") == (kind_rank == "dense") and (kind_rank == "dense" or r == kind_rank) and s == seed:
                return model, j
    raise KeyError(kind_rank)


r_fail = max(r for r in quick["ranks"] if r < r_star)
examples = {}
for label, r in (("fails", r_fail), ("solves", r_train)):
    model, j = find(r)
    head = model.to_kernel_head(j, family.tokens)
    with torch.no_grad():
        y_torch = model(ids)[j].double().numpy()
    ratios = link_weight_ratios(head, family)
    from companion.attention import kernel_attention  # noqa: E402

    drift = np.abs(kernel_attention(head, family.sequences) - y_torch).max()
    ok = ratios["eps"] < 0.5
    examples[label] = (r, head, ratios)
    print(f"r = {r:>2} (seed 0, {label}): max error {ratios['max_error']:.3f}; float64 vs training "
          f"forward {'agree' if drift < 1e-3 else 'DISAGREE'}; links within eps < 1/2: "
          f"{ok.sum()}/{len(ok)}; Lemma B violations: {lemma_b_violations(ratios)}")
    assert lemma_b_violations(ratios) == 0, "a trained head breaks Lemma B: the evaluator is wrong"

# %% [markdown]
# Theorem E's proof goes one step further: for a head with error $< 1/2$ on the whole family,
# the matrix $M[x,y] = K(x,\bar y)/K(x,\bar x)$ satisfies $0 \le M[x,y] \le 1/\rho_{xy}$,
# where $\rho_{xy}$ is the certificate's chain factor; a rank-$r$ head makes $M$ of rank
# $\le r$, and a matrix with unit diagonal and small off-diagonal entries needs a large rank.
# For the solving head we measure the largest $M[x,y]\,\rho_{xy}$ (the proof says $\le 1$) and
# the numerical rank of $M$:

# %%
# NBVAL_IGNORE_OUTPUT: trained numbers differ in the 2nd decimal across CPUs (AVX2 vs
# AVX-512 kernels round differently and training amplifies it); the asserts hold anywhere.
r_ok, head_ok, _ = examples["solves"]
M = kernel_ratio_matrix(head_ok, family)
rho = family.certificate.rho
worst = max(M[i, j] * float(rho[(i, j)]) for i in range(len(M)) for j in range(len(M)) if i != j)
sv = np.linalg.svd(M, compute_uv=False)
print(f"r = {r_ok}: max over x != y of M[x,y] * rho_xy = {worst:.4f} (Theorem E: <= 1)")
print(f"singular values of M above 1e-6 * largest: {(sv > 1e-6 * sv[0]).sum()} (head rank {r_ok}, "
      f"|S| = {len(M)})")
assert worst <= 1 + 1e-9

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
gs = np.linspace(3.2, 6.5, 100)
for ax, label in zip(axes, ("fails", "solves")):
    r, _, rat = examples[label]
    jitter = np.random.default_rng(0).uniform(-0.15, 0.15, len(rat["gap"]))
    inside = rat["eps"] < 0.5
    ax.scatter(rat["gap"][inside] + jitter[inside], rat["ratio"][inside], s=8, alpha=0.5,
               label=r"links with $\varepsilon_{link} < 1/2$")
    ax.scatter(rat["gap"][~inside] + jitter[~inside], rat["ratio"][~inside], s=8, alpha=0.5,
               marker="x", color="tab:red", label=r"links with $\varepsilon_{link} \geq 1/2$")
    ax.plot(gs, (gs - 1) / 1, "k--", lw=1, label=r"$c_{3,1/2}(g) = g - 1$")
    if rat["max_error"] < 0.5:
        e = rat["max_error"]
        ax.plot(gs, (gs - 2 * e) / (2 * e), "k-", lw=1,
                label=rf"$c_{{3,\varepsilon}}(g)$ at $\varepsilon$ = max error {e:.2f}")
    ax.set_yscale("log")
    ax.set_xlabel("gap g of the link")
    ax.set_title(f"rank {r}, seed 0 ({label}: max error {rat['max_error']:.2f})")
axes[0].set_ylabel(r"$D(x;z)\,/\,D(x;z')$")
axes[1].legend(fontsize=8, loc="lower right")
fig.suptitle("Gap domination in trained heads: each solving head puts >= c(g) times more weight on the better key")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Full results (committed)
#
# The full sweep — the same 11 ranks × 5 seeds plus 5 dense seeds, 3,000 MSE + 2,000
# surrogate steps per head —
# is regenerated (resumably, with a progress bar, results written atomically beside the
# configuration's hash) by
#
# ```
# python -m companion e1 --full --out results/e1_full.json
# ```
#
# `tests/test_cli.py` re-trains a random subset of it and checks the stored numbers.

# %%
full_path = Path("..") / "results" / "e1_full.json"
if not full_path.exists():
    full_path = Path("results") / "e1_full.json"
full_cfg = check_e1_config(E1_FULL)
full = json.loads(full_path.read_text())
print("configuration hash matches E1_FULL:", full["config_hash"] == config_hash(full_cfg))
print(f"seeds {full_cfg['seeds']}, steps {full_cfg['steps']} + {full_cfg['surrogate_steps']} surrogate")
full_rows = summarise_e1(full)
print_table(full_rows)
full_violations = consistency_violations(full, r_star)
print("consistency check (no r < r* solves):", "passed" if not full_violations else full_violations)
assert not full_violations
full_solved = [row["r"] for row in full_rows if row["r"] != "dense" and row["solved"] > 0]
full_by_r = {row["r"]: row for row in full_rows}
print("smallest rank solving a seed:", min(full_solved) if full_solved else None)

# %% [markdown]
# ## The sandwich
#
# For this finite witness the true minimum rank $r_{\min}$ (the smallest rank of *any* NKA
# head with error $< 1/2$ on $F(S)$) is unknown, but it is pinned between numbers we can
# compute: the certified lower bounds (Theorem E's trace bound and the Lemma D′ sharpening)
# and explicit exact constructions — the witness module's key-indicator head (one feature
# per distinct key token) and a query-indicator head (one feature per query of $S$, kernel
# $6^{-\langle x_i, z\rangle}$), both verified in exact rational arithmetic on every input of
# the family. A trained head that solves the family is a construction too (verified in
# float64 above). Training is shown beside them, from the committed full sweep (5 seeds, the
# longer schedule, and numbers that do not depend on the reader's CPU). The theory notes
# mention a hand-built rank-$(|S|-1)$ head for a different,
# 32-query witness; we have not found one for this family, so our best exact construction has
# rank $|S|$.

# %%
key_ind = indicator_head(family)
query_ind = query_indicator_head(family)
err_key, err_query = max_error_exact(key_ind, family), max_error_exact(query_ind, family)
assert err_key < Fraction(1, 2) and err_query < Fraction(1, 2)
r_full = min(full_solved)
failed_ranks = [row["r"] for row in full_rows if row["r"] != "dense" and row["solved"] == 0]
sandwich = [
    ("certified lower bound, Theorem E (trace)", bound.trace_rank, f"r >= {float(bound.trace_bound):.2f}"),
    ("certified lower bound, Lemma D'", bound.sharpened_rank, f"r >= {bound.sharpened_bound}"),
    ("exact construction: query indicators", query_ind.rank, f"exact max error {err_query}"),
    ("exact construction: key indicators", key_ind.rank, f"exact max error {err_key}"),
    ("training: largest rank failing on every seed", max(r for r in failed_ranks if r < r_full),
     "full sweep, 5 seeds"),
    ("training: smallest rank solving a seed", r_full,
     f"full sweep: {full_by_r[r_full]['solved']}/{full_by_r[r_full]['seeds']} seeds"),
]
for name, r, note in sandwich:
    print(f"{name:<48} {r:>3}   {note}")
upper = min(query_ind.rank, key_ind.rank, r_full)
print(f"\n=> {bound.sharpened_rank} <= r_min <= {upper}")
assert bound.trace_rank <= bound.sharpened_rank <= upper

# %%
fig, ax = plt.subplots(figsize=(11, 3.8))
nka_rows = [row for row in full_rows if row["r"] != "dense"]
rs = [row["r"] for row in nka_rows]
med = [row["median_max_error"] for row in nka_rows]
lo = [row["min_max_error"] for row in nka_rows]
hi = [row["max_max_error"] for row in nka_rows]
ax.errorbar(rs, med, yerr=[np.subtract(med, lo), np.subtract(hi, med)], fmt="o-", capsize=3,
            label="trained NKA heads (full sweep): max error, median and min–max over 5 seeds")
dense_row = full_by_r["dense"]
ax.axhline(dense_row["median_max_error"], color="tab:green", lw=1, label="dense softmax (median)")
ax.axhline(0.5, color="k", lw=0.8, ls=":", label="error 1/2 (solved below)")
ax.axvspan(0.8, bound.sharpened_rank, color="tab:red", alpha=0.08,
           label=f"certified impossible: r < {bound.sharpened_rank}")
ax.axvspan(bound.sharpened_rank, upper, color="tab:orange", alpha=0.12,
           label=f"r_min lies in [{bound.sharpened_rank}, {upper}]")
ax.axvline(bound.trace_rank, color="tab:red", ls="--", lw=1, label=f"trace bound {bound.trace_rank}")
ax.axvline(key_ind.rank, color="tab:purple", ls="--", lw=1, label=f"key-indicator construction {key_ind.rank}")
ax.set_xscale("log", base=2)
ax.set_xlabel("feature rank r")
ax.set_ylabel("max error on F(S)")
ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
ax.set_title("E1 sandwich: certified bounds <= minimum rank <= constructions, beside training")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Paper vs ours
#
# The paper's numbers are printed beside ours; none of ours is tuned towards them.

# %%
below = [full_by_r[r] for r in full_cfg["ranks"] if r < 8]
paper_vs_ours = [
    ("family size (inputs)", "1,272", f"{len(family):,}",
     f"our S: {len(family.S)} Paley vectors, own link set"),
    ("certified bound", "r >= 8", f"r >= {r_star} (trace {bound.trace_rank}, Lemma D' {bound.sharpened_rank})",
     "different S; we also apply Lemma D'"),
    ("r < 8: max error", "> 0.80",
     f"min over r<8, seeds: {min(row['min_max_error'] for row in below):.2f}", "full sweep"),
    ("r = 32", "solved exactly", f"solved {full_by_r[32]['solved']}/{full_by_r[32]['seeds']} seeds",
     "max error < 1/2"),
    ("ranks that fail / solve", "r < 8 fail, r = 32 solves",
     f"all r <= {max(r for r in full_cfg['ranks'] if r < min(full_solved))} fail; "
     f"r = {min(full_solved)} solves {full_by_r[min(full_solved)]['solved']}/"
     f"{full_by_r[min(full_solved)]['seeds']}", "grid {1,...,64} + {20,24,27,28}"),
    ("dense softmax", "exact on all seeds",
     f"solved {full_by_r['dense']['solved']}/{full_by_r['dense']['seeds']}, max error <= {full_by_r['dense']['max_max_error']:.3f}",
     "q, k init std 0.2"),
]
print(f"{'quantity':<26} {'paper':<22} {'ours':<44} setting")
for q, p, o, s in paper_vs_ours:
    print(f"{q:<26} {p:<22} {o:<44} {s}")

# %% [markdown]
# **Why the numbers differ.** The paper's witness is a different family (1,272 inputs,
# bound $r \ge 8$) built from its own 24-bit set; ours is the Paley subset of $|S| = 28$
# queries that the theory chapter selected to maximise the certified bound among families of
# 1,000–2,500 inputs, so its size (2,356) and its bound ($r^* = 20$ with Lemma D′, 14 from the
# trace bound alone) differ from the paper's. The shape agrees: every head below the bound
# fails by a wide margin (max error above 1.3 for $r \le 16$, well above the paper's 0.80),
# $r = 32$ solves on every seed, and the dense softmax head solves on every seed once its
# initialisation keeps the softmax out of saturation. Two things the paper's summary does not
# show: training succeeds only from $r = |S| = 28$ (some seeds; none at 27), above the
# certified 20 and exactly at the rank of the query-indicator construction, so the window
# $[20, 28]$ stays open — the certificate may be loose, or lower-rank solutions may exist that
# gradient descent on tables does not find; and whether a seed solves at $r = 28$ is sensitive
# to float rounding: while developing this chapter, a change that only reordered the sums in
# one matrix product moved the full sweep from 2 to 4 solved seeds (of 5) at $r = 28$, with
# every other rank's verdict unchanged, and AVX2 vs AVX-512 kernels move individual max
# errors by up to about 0.07 — which is why the quick-mode numbers above are not compared
# digit for digit across machines, while the committed full results are. The paper does not
# state its training protocol (features, initialisation, schedule, max-error surrogate), so
# failure levels need not match; ours are the best checkpoints of full-batch Adam runs of
# 2,000 (quick) or 5,000 (full) steps per head.
