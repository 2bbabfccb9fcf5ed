"""The batched training engine (companion.experiments.engine): stacked training is training
every model alone, its losses are a plain PyTorch module's, checkpoints, schedule, bad input."""

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from companion.book import seed_everything  # noqa: E402
from companion.core.task import query_target, token_pool  # noqa: E402
from companion.experiments.e2.data import pool_inputs  # noqa: E402
from companion.experiments.engine import ModelStack, lr_at, train_batched  # noqa: E402
from companion.experiments.heads import (  # noqa: E402
    mlp_kernel_heads,
    mlp_softmax_heads,
    table_kernel_heads,
    table_softmax_heads,
)


def _bench():
    """benchmarks/bench_training.py, whose plain modules are the oracle here."""
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_training.py"
    spec = importlib.util.spec_from_file_location("bench_training", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def standin_problem(num_tokens=16, count=240, m=8, seed=0):
    """A small stand-in for a witness family: random length-3 sequences over a token pool."""
    tokens = token_pool(m, num_tokens, seed)
    ids = np.random.default_rng(seed).integers(0, num_tokens, size=(count, 3))
    y = query_target(tokens[ids])
    return torch.tensor(ids), torch.tensor(y, dtype=torch.float32)


@pytest.fixture(autouse=True)
def _one_thread():
    seed_everything(0, threads=1)


# ---------------------------------------------------------------- the plain-module oracle


def _assert_oracle(stacked, plains, inputs, y, grads):
    """The engine's step-0 losses equal the plain modules' to the bit; the stacked model's
    gradients equal theirs to 1e-6 (relative to the gradient's largest entry). ``grads(plain)``:
    the plain module's gradients in the stacked layout, with the stacked parameter's name."""
    initial = [p.detach().clone() for p in stacked.parameters()]
    res = train_batched(stacked, inputs, y, steps=1, lr=1e-3)  # loss_history[0]: step 0
    with torch.no_grad():
        for p, p0 in zip(stacked.parameters(), initial):
            p.copy_(p0)
    stacked.zero_grad(set_to_none=True)
    ((stacked(inputs) - y) ** 2).mean(-1).sum().backward()  # the engine's objective
    params = dict(stacked.named_parameters())
    for j, plain in enumerate(plains):
        pred = plain(inputs)
        loss = ((pred - y) * (pred - y)).mean()
        assert loss.item() == res.loss_history[0, j].item()  # bit-identical
        loss.backward()
        for g, theirs in grads(plain):
            h = params[theirs].grad[j]
            assert (g - h).abs().max() <= 1e-6 * max(1.0, h.abs().max())


@pytest.mark.parametrize("kind", ["kernel", "softmax"])
def test_engine_losses_are_the_plain_table_modules_losses(kind):
    bench = _bench()
    ids, y = standin_problem()
    if kind == "kernel":
        stacked = table_kernel_heads([4, 4, 4], [0, 1, 2], 16)  # one rank: no padding
        plains = [bench.PlainTableHead("kernel", 4, s, 16) for s in (0, 1, 2)]
    else:
        stacked = table_softmax_heads([0, 1], 16)
        plains = [bench.PlainTableHead("softmax", 24, s, 16, std=0.2, positional=False)
                  for s in (0, 1)]
    for j, plain in enumerate(plains):  # the same initial draws
        for name in "qkvab":
            assert torch.equal(getattr(plain, name), getattr(stacked, name)[j])
    _assert_oracle(stacked, plains, ids, y,
                   lambda plain: [(getattr(plain, n).grad, n) for n in "qkvab"])


@pytest.mark.parametrize("kind", ["kernel", "softmax"])
def test_engine_losses_are_the_plain_mlp_modules_losses(kind):
    bench = _bench()
    rng = np.random.default_rng(0)
    inputs = pool_inputs(rng.integers(0, 2, (40, 6)), rng.integers(0, 40, (200, 3)))
    y = torch.as_tensor(rng.integers(0, 3, 600), dtype=torch.float32)
    if kind == "kernel":
        stacked = mlp_kernel_heads(6, [4, 4], [0, 1], (64,), 16)
        plains = [bench.PlainMLPHead("kernel", 6, 4, s, (64,), 16) for s in (0, 1)]
    else:
        stacked = mlp_softmax_heads(6, [0, 1], (64,), 16)
        plains = [bench.PlainMLPHead("softmax", 6, 6, s, (64,), 16) for s in (0, 1)]
    for j, plain in enumerate(plains):
        for i, layer in enumerate(plain.layers):
            assert torch.equal(layer.weight.T, stacked.weights[i][j])

    def grads(plain):  # nn.Linear holds weight^T
        return [g for i, layer in enumerate(plain.layers) for g in (
            (layer.weight.grad.T, f"weights.{i}"), (layer.bias.grad, f"biases.{i}"))]

    _assert_oracle(stacked, plains, inputs, y, grads)


# ---------------------------------------------------------------- batched == alone


@pytest.mark.parametrize("feature", ["exp", "softplus"])
def test_batched_training_equals_training_each_model_alone(feature):
    ids, y = standin_problem()
    ranks, seeds = [3, 5, 8, 8], [0, 1, 2, 3]
    stack = table_kernel_heads(ranks, seeds, 16, feature=feature, pad_to=8)
    res = train_batched(stack, ids, y, steps=60, lr=3e-2, surrogate_steps=30)
    for j, (r, s) in enumerate(zip(ranks, seeds)):
        alone = train_batched(table_kernel_heads([r], [s], 16, feature=feature, pad_to=8),
                              ids, y, steps=60, lr=3e-2, surrogate_steps=30)
        assert torch.allclose(res.best_max_error[j], alone.best_max_error[0], atol=1e-6)
        assert res.best_step[j] == alone.best_step[0]
        for name in ("q", "k", "v", "a", "b"):
            assert torch.allclose(getattr(res.model, name)[j], getattr(alone.model, name)[0],
                                  atol=1e-6), name


def test_batched_dense_heads_equal_alone_and_model_stack_offsets():
    ids, y = standin_problem()
    stack = ModelStack([table_kernel_heads([2, 4], [0, 1], 16), table_softmax_heads([5, 6], 16)])
    res = train_batched(stack, ids, y, steps=40, lr=3e-2)
    alone = train_batched(table_softmax_heads([6], 16), ids, y, steps=40, lr=3e-2)
    assert torch.allclose(res.best_max_error[3], alone.best_max_error[0], atol=1e-6)
    assert torch.allclose(res.model.parts[1].q[1], alone.model.q[0], atol=1e-6)


# ---------------------------------------------------------------- engine behaviour


def test_training_is_deterministic_on_cpu():
    ids, y = standin_problem()
    runs = [train_batched(table_kernel_heads([2, 4], [0, 1], 16), ids, y, steps=50, lr=3e-2,
                          surrogate_steps=20) for _ in range(2)]
    assert torch.equal(runs[0].best_max_error, runs[1].best_max_error)
    assert torch.equal(runs[0].model.q, runs[1].model.q)


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
    res = train_batched(_Scripted(), torch.zeros(4, 1), torch.zeros(4), steps=5, lr=1.0,
                        final_lr_fraction=1.0)
    assert res.best_step[1] == 0 and float(res.best_max_error[1]) == pytest.approx(0.01)
    assert float(res.model.w[1, 0].detach()) == pytest.approx(0.01)  # model 1 restored to step 0
    assert res.best_step[0] > 0 and float(res.best_max_error[0]) < 3.0
    assert float(res.model.w[0, 0].detach()) == pytest.approx(float(res.best_max_error[0]))
    assert float(res.final_max_error[1]) > 0.5
    assert float(res.final_fraction_within_half[1]) == 0.0
    assert res.fraction_within_half[1] == 1.0


def test_monitor_selects_the_best_validation_step_not_the_training_error():
    # the monitor scores model 0 by -|w| (its training error: improves every step) and model
    # 1 by a fixed script peaking at the second evaluation: each keeps its own best step
    script = iter([0.1, 0.9, 0.9, 0.3, 0.2, 0.2, 0.1, 0.0])
    seen = []

    def monitor(model):
        w = model.w.detach()[:, 0]
        seen.append(w.clone())
        return torch.stack([-w[0].abs(), torch.tensor(next(script))]).reshape(2, 1)

    res = train_batched(_Scripted(), torch.zeros(4, 1), torch.zeros(4), steps=6, lr=0.5,
                        final_lr_fraction=1.0, monitor=monitor, eval_every=2)
    assert res.monitor_steps.tolist() == [0, 2, 4, 6]
    assert res.monitor_history.shape == (4, 2, 1)
    assert int(res.best_step[1]) == 2  # 0.9 at steps 2 and 4: the earliest wins
    assert float(res.model.w[1, 0].detach()) == pytest.approx(float(seen[1][1]))
    best0 = int(torch.argmax(res.monitor_history[:, 0, 0]))
    assert int(res.best_step[0]) == res.monitor_steps[best0]
    assert float(res.model.w[0, 0].detach()) == pytest.approx(float(seen[best0][0]))
    # the reported max error is the kept checkpoint's, not the last step's
    assert float(res.best_max_error[1]) == pytest.approx(abs(float(seen[1][1])))
    with pytest.raises(TypeError, match="monitor"):
        train_batched(_Scripted(), torch.zeros(4, 1), torch.zeros(4), steps=2, lr=0.5,
                      monitor=3)


def test_surrogate_phase_lowers_the_max_error_of_a_table_model():
    ids, y = standin_problem()
    base = train_batched(table_kernel_heads([8], [0], 16), ids, y, steps=150, lr=3e-2)
    more = train_batched(table_kernel_heads([8], [0], 16), ids, y, steps=150, lr=3e-2,
                         surrogate_steps=150)
    assert float(more.best_max_error[0]) <= float(base.best_max_error[0])
    assert more.loss_history.shape[1] == 1 and len(more.history_steps) == len(more.loss_history)


def test_cosine_schedule_endpoints():
    assert lr_at(0, 100, 0.1, 0.02) == pytest.approx(0.1)
    assert lr_at(99, 100, 0.1, 0.02) == pytest.approx(0.002)
    assert lr_at(49, 99, 0.1, 0.0) == pytest.approx(0.05)


def test_dense_softmax_baseline_solves_the_standin_problem():
    ids, y = standin_problem()
    res = train_batched(table_softmax_heads([0, 1], 16), ids, y, steps=400, lr=3e-2)
    assert torch.all(res.best_max_error < 0.5)


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("kwargs, exc, word", [
    ({"steps": 0}, ValueError, "steps"),
    ({"steps": 2.5}, TypeError, "steps"),
    ({"lr": -1.0}, ValueError, "lr"),
    ({"lr": math.nan}, ValueError, "lr"),
    ({"lr": "fast"}, TypeError, "lr"),
    ({"final_lr_fraction": 0.0}, ValueError, "final_lr_fraction"),
    ({"final_lr_fraction": 1.5}, ValueError, "final_lr_fraction"),
    ({"surrogate_steps": -1}, ValueError, "surrogate_steps"),
    ({"surrogate_power": 1}, ValueError, "surrogate_power"),
    ({"device": 3}, TypeError, "device"),
    ({"device": "tpu-of-dreams"}, ValueError, "device"),
    ({"progress": "yes"}, TypeError, "progress"),
])
def test_bad_training_arguments(kwargs, exc, word):
    ids, y = standin_problem()
    with pytest.raises(exc, match=word):
        train_batched(table_kernel_heads([2], [0], 16), ids, y, **{"steps": 2, "lr": 1e-2,
                                                                  **kwargs})


def test_bad_model_and_targets():
    ids, y = standin_problem()
    model = table_kernel_heads([2], [0], 16)
    with pytest.raises(TypeError, match="model"):
        train_batched(lambda x: x, ids, y, steps=1, lr=0.1)
    with pytest.raises(TypeError, match="targets"):
        train_batched(model, ids, y.numpy(), steps=1, lr=0.1)
    with pytest.raises(ValueError, match="targets"):
        train_batched(model, ids, y[:-1], steps=1, lr=0.1)
    with pytest.raises(ValueError, match="targets"):
        train_batched(model, ids, torch.full_like(y, math.inf), steps=1, lr=0.1)
    with pytest.raises(ValueError, match="targets"):
        train_batched(table_kernel_heads([2, 3], [0, 1], 16), ids, y.expand(3, -1), steps=1,
                      lr=0.1)
    with pytest.raises(TypeError, match="inputs"):
        train_batched(model, "ids", y, steps=1, lr=0.1)
