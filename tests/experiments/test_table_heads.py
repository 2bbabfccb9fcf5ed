"""The batched training engine and the stacked E1 heads (companion.experiments.engine,
companion.experiments.table_heads)."""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from companion.book import seed_everything  # noqa: E402
from companion.core.attention import kernel_attention_torch  # noqa: E402
from companion.core.task import query_target, token_pool  # noqa: E402
from companion.experiments.engine import ModelStack, lr_at, train_batched  # noqa: E402
from companion.experiments.table_heads import (  # noqa: E402
    TableKernelHeads,
    TableSoftmaxHeads,
    group_ranks,
)


def standin_problem(num_tokens=16, count=240, m=8, seed=0):
    """A small stand-in for a witness family: random length-3 sequences over a token pool."""
    tokens = token_pool(m, num_tokens, seed)
    ids = np.random.default_rng(seed).integers(0, num_tokens, size=(count, 3))
    y = query_target(tokens[ids])
    return torch.tensor(ids), torch.tensor(y, dtype=torch.float32)


@pytest.fixture(autouse=True)
def _one_thread():
    seed_everything(0, threads=1)


# ---------------------------------------------------------------- batched == alone


@pytest.mark.parametrize("feature", ["exp", "softplus"])
def test_batched_training_equals_training_each_model_alone(feature):
    ids, y = standin_problem()
    ranks, seeds = [3, 5, 8, 8], [0, 1, 2, 3]
    stack = TableKernelHeads(ranks, seeds, 16, feature=feature, pad_to=8)
    res = train_batched(stack, ids, y, steps=60, lr=3e-2, surrogate_steps=30)
    for j, (r, s) in enumerate(zip(ranks, seeds)):
        alone = train_batched(
            TableKernelHeads([r], [s], 16, feature=feature, pad_to=8),
            ids,
            y,
            steps=60,
            lr=3e-2,
            surrogate_steps=30,
        )
        assert torch.allclose(res.best_max_error[j], alone.best_max_error[0], atol=1e-6)
        assert res.best_step[j] == alone.best_step[0]
        for name in ("q", "k", "v", "a", "b"):
            assert torch.allclose(
                getattr(res.model, name)[j], getattr(alone.model, name)[0], atol=1e-6
            ), name


def test_batched_dense_heads_equal_alone_and_model_stack_offsets():
    ids, y = standin_problem()
    stack = ModelStack([TableKernelHeads([2, 4], [0, 1], 16), TableSoftmaxHeads([5, 6], 16)])
    res = train_batched(stack, ids, y, steps=40, lr=3e-2)
    alone = train_batched(TableSoftmaxHeads([6], 16), ids, y, steps=40, lr=3e-2)
    assert torch.allclose(res.best_max_error[3], alone.best_max_error[0], atol=1e-6)
    assert torch.allclose(res.model.parts[1].q[1], alone.model.q[0], atol=1e-6)


def test_padding_does_not_change_the_model_beyond_rounding():
    ids, y = standin_problem()
    a = TableKernelHeads([3], [7], 16)
    b = TableKernelHeads([3], [7], 16, pad_to=12)
    assert torch.allclose(a(ids), b(ids), atol=1e-5)
    ra = train_batched(a, ids, y, steps=30, lr=3e-2)
    rb = train_batched(b, ids, y, steps=30, lr=3e-2)
    assert torch.allclose(ra.model.q[0], rb.model.q[0, :, :3], atol=1e-4)


@pytest.mark.parametrize("feature", ["exp", "softplus"])
def test_masked_rank_padding_really_masks(feature):
    ids, _ = standin_problem()
    heads = TableKernelHeads([2, 6], [0, 1], 16, feature=feature, pad_to=6)
    phi_q, phi_k = heads.features()
    assert torch.all(phi_q[0, :, 2:] == 0) and torch.all(phi_k[0, ..., 2:] == 0)
    assert torch.all(phi_q[1] > 0)
    before = heads(ids).detach().clone()
    with torch.no_grad():  # arbitrary values in the masked columns change nothing
        heads.q[0, :, 2:] = 5.0
        heads.k[0, ..., 2:] = -3.0
    after = heads(ids)
    assert torch.equal(before[0], after[0].detach())
    after.sum().backward()
    assert torch.all(heads.q.grad[0, :, 2:] == 0) and torch.all(heads.k.grad[0, ..., 2:] == 0)
    assert heads.q.grad[0, :, :2].abs().sum() > 0


def test_table_heads_match_the_reference_kernel_attention_forward():
    ids, _ = standin_problem()
    heads = TableKernelHeads([3, 5], [0, 1], 16, pad_to=5)
    phi_q, phi_k = heads.features()
    n = ids.shape[1]
    x = ids[:, 0]
    for j in range(2):
        qf = phi_q[j][x]
        kf = torch.stack([phi_k[j, p][ids[:, p]] for p in range(n)], dim=1)
        vals = torch.stack([heads.v[j, p][ids[:, p]] for p in range(n)], dim=1)
        ref = kernel_attention_torch(qf, kf, vals, heads.a[j][x], heads.b[j][x])
        assert torch.allclose(heads(ids)[j], ref, atol=1e-5)


def test_exp_features_do_not_overflow_with_large_tables():
    ids, _ = standin_problem()
    heads = TableKernelHeads([4], [0], 16)
    with torch.no_grad():
        heads.k.mul_(200.0)  # exp(200) overflows float32; the log-space pair tables must not
    assert torch.all(torch.isfinite(heads(ids)))


# ---------------------------------------------------------------- engine behaviour


def test_training_is_deterministic_on_cpu():
    ids, y = standin_problem()
    runs = [
        train_batched(
            TableKernelHeads([2, 4], [0, 1], 16),
            ids,
            y,
            steps=50,
            lr=3e-2,
            surrogate_steps=20,
            batch_size=64,
            seed=3,
        )
        for _ in range(2)
    ]
    assert torch.equal(runs[0].best_max_error, runs[1].best_max_error)
    assert torch.equal(runs[0].model.q, runs[1].model.q)


def test_minibatch_seed_changes_the_batches():
    ids, y = standin_problem()
    a = train_batched(
        TableKernelHeads([2], [0], 16), ids, y, steps=30, lr=3e-2, batch_size=32, seed=1
    )
    b = train_batched(
        TableKernelHeads([2], [0], 16), ids, y, steps=30, lr=3e-2, batch_size=32, seed=2
    )
    assert not torch.equal(a.model.q, b.model.q)


class _Scripted(torch.nn.Module):
    """Two stacked 'models' whose parameter walks a scripted path: the error is |w - t|."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor([[3.0], [0.01]]))

    def forward(self, inputs):
        return self.w.expand(2, inputs.shape[0])


def test_best_checkpoint_is_selected_per_model():
    # model 0 starts at error 3 and improves; model 1 starts next to its optimum (error 0.01)
    # and Adam's unit steps at lr 1 overshoot: the best checkpoint must keep each model's own.
    x = torch.zeros(4, 1)
    y = torch.zeros(4)
    res = train_batched(_Scripted(), x, y, steps=5, lr=1.0, final_lr_fraction=1.0)
    assert res.best_step[1] == 0 and float(res.best_max_error[1]) == pytest.approx(0.01)
    assert float(res.model.w[1, 0].detach()) == pytest.approx(0.01)  # model 1 restored to step 0
    assert res.best_step[0] > 0 and float(res.best_max_error[0]) < 3.0
    assert float(res.model.w[0, 0].detach()) == pytest.approx(float(res.best_max_error[0]))
    assert float(res.final_max_error[1]) > 0.5
    assert float(res.final_fraction_within_half[1]) == 0.0
    assert res.fraction_within_half[1] == 1.0


def test_surrogate_phase_lowers_the_max_error_of_a_table_model():
    ids, y = standin_problem()
    base = train_batched(TableKernelHeads([8], [0], 16), ids, y, steps=150, lr=3e-2)
    more = train_batched(
        TableKernelHeads([8], [0], 16), ids, y, steps=150, lr=3e-2, surrogate_steps=150
    )
    assert float(more.best_max_error[0]) <= float(base.best_max_error[0])
    assert more.loss_history.shape[1] == 1 and len(more.history_steps) == len(more.loss_history)


def test_cosine_schedule_endpoints():
    assert lr_at(0, 100, 0.1, 0.02) == pytest.approx(0.1)
    assert lr_at(99, 100, 0.1, 0.02) == pytest.approx(0.002)
    assert lr_at(49, 99, 0.1, 0.0) == pytest.approx(0.05)


def test_dense_softmax_baseline_solves_the_standin_problem():
    ids, y = standin_problem()
    res = train_batched(TableSoftmaxHeads([0, 1], 16), ids, y, steps=400, lr=3e-2)
    assert torch.all(res.best_max_error < 0.5)


# ---------------------------------------------------------------- grouping and stacking


def test_group_ranks_partitions_and_trades_padding_for_groups():
    ranks = [1, 2, 4, 8, 16, 32, 64]
    groups = group_ranks(ranks)
    assert sorted(r for g in groups for r in g) == ranks
    assert group_ranks(ranks, overhead=0) == [[r] for r in ranks]  # padding costs, groups free
    assert group_ranks(ranks, overhead=1e9) == [ranks]  # groups cost, padding free


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "kwargs, exc, word",
    [
        ({"steps": 0}, ValueError, "steps"),
        ({"steps": 2.5}, TypeError, "steps"),
        ({"lr": -1.0}, ValueError, "lr"),
        ({"lr": math.nan}, ValueError, "lr"),
        ({"lr": "fast"}, TypeError, "lr"),
        ({"final_lr_fraction": 0.0}, ValueError, "final_lr_fraction"),
        ({"final_lr_fraction": 1.5}, ValueError, "final_lr_fraction"),
        ({"surrogate_steps": -1}, ValueError, "surrogate_steps"),
        ({"surrogate_power": 1}, ValueError, "surrogate_power"),
        ({"batch_size": 0}, ValueError, "batch_size"),
        ({"batch_size": 10_000}, ValueError, "batch_size"),
        ({"seed": -1}, ValueError, "seed"),
        ({"device": 3}, TypeError, "device"),
        ({"device": "tpu-of-dreams"}, ValueError, "device"),
        ({"progress": "yes"}, TypeError, "progress"),
    ],
)
def test_bad_training_arguments(kwargs, exc, word):
    ids, y = standin_problem()
    args = {"steps": 2, "lr": 1e-2, **kwargs}
    with pytest.raises(exc, match=word):
        train_batched(TableKernelHeads([2], [0], 16), ids, y, **args)


def test_bad_model_and_targets():
    ids, y = standin_problem()
    with pytest.raises(TypeError, match="model"):
        train_batched(lambda x: x, ids, y, steps=1, lr=0.1)
    with pytest.raises(TypeError, match="targets"):
        train_batched(TableKernelHeads([2], [0], 16), ids, y.numpy(), steps=1, lr=0.1)
    with pytest.raises(ValueError, match="targets"):
        train_batched(TableKernelHeads([2], [0], 16), ids, y[:-1], steps=1, lr=0.1)
    with pytest.raises(ValueError, match="targets"):
        train_batched(
            TableKernelHeads([2], [0], 16), ids, torch.full_like(y, math.inf), steps=1, lr=0.1
        )
    with pytest.raises(ValueError, match="targets"):
        train_batched(TableKernelHeads([2, 3], [0, 1], 16), ids, y.expand(3, -1), steps=1, lr=0.1)
    with pytest.raises(TypeError, match="inputs"):
        train_batched(TableKernelHeads([2], [0], 16), "ids", y, steps=1, lr=0.1)


@pytest.mark.parametrize(
    "kwargs, exc, word",
    [
        ({"ranks": [0], "seeds": [0]}, ValueError, "ranks"),
        ({"ranks": [2, 3], "seeds": [0]}, ValueError, "same length"),
        ({"ranks": [2], "seeds": [0], "feature": "relu"}, ValueError, "feature"),
        ({"ranks": [4], "seeds": [0], "pad_to": 2}, ValueError, "pad_to"),
        ({"ranks": "4", "seeds": [0]}, TypeError, "ranks"),
        ({"ranks": [2], "seeds": [0], "query_position": 3}, ValueError, "query_position"),
    ],
)
def test_bad_table_heads(kwargs, exc, word):
    with pytest.raises(exc, match=word):
        TableKernelHeads(num_tokens=16, **kwargs)


def test_bad_token_ids():
    heads = TableKernelHeads([2], [0], 16)
    with pytest.raises(TypeError, match="token_ids"):
        heads(torch.zeros(4, 3))
    with pytest.raises(ValueError, match="token_ids"):
        heads(torch.zeros(4, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="overhead"):
        group_ranks([1, 2], overhead=-1)


def test_to_kernel_head_matches_the_reference_numpy_evaluator():
    from companion.core.attention import kernel_attention

    tokens = token_pool(8, 16, 0)
    ids = np.random.default_rng(0).integers(0, 16, size=(50, 3))
    for feature in ("exp", "softplus"):
        heads = TableKernelHeads([3, 6], [0, 1], 16, feature=feature)
        with torch.no_grad():
            y = heads(torch.tensor(ids)).double().numpy()
        for j in range(2):
            ref = kernel_attention(heads.to_kernel_head(j, tokens), tokens[ids])
            assert np.allclose(ref, y[j], atol=1e-4)
    with pytest.raises(ValueError, match="tokens"):
        heads.to_kernel_head(0, tokens[:3])


@pytest.mark.parametrize("cls", ["kernel", "dense"])
def test_pair_tables_reproduce_the_forward_pass(cls):
    ids, _ = standin_problem()
    heads = (TableKernelHeads([2, 5], [0, 1], 16) if cls == "kernel"
             else TableSoftmaxHeads([0, 1], 16, positional=True))
    la, sc = heads.pair_tables()  # (M, P, T, T) indexed [model, position, query, key]
    x = ids[:, 0]
    logits = torch.stack([la[:, p, x, ids[:, p]] for p in range(3)], dim=-1)
    scores = torch.stack([sc[:, p, x, ids[:, p]] for p in range(3)], dim=-1)
    y = (torch.softmax(logits, -1) * scores).sum(-1) + heads.b[:, x]
    assert torch.allclose(heads(ids), y, atol=1e-5)
