"""Many independent models as one tensor program (chapters 6-8): a stacked model (parameters
with a leading model dimension, or a :class:`ModelStack`) returns (M, N); :func:`train_batched`
minimises the sum of the models' MSEs, so each trains as alone (to rounding): Adam, cosine
decay, then optionally a smooth L_p surrogate of the max error. The checkpoint kept per model
is the step with the smallest training max error (E1: can the family be fitted at all?) or,
given a ``monitor``, the evaluation with the highest validation score (E2: generalisation)."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from companion.book import progress_bar
from companion.checks import check_bool, check_device, check_float, check_instance, check_int

__all__ = ["train_batched", "lr_at"]

#: Most Adam steps of one training run (and of its surrogate phase).
MAX_STEPS = 100_000
#: Number of points kept in the loss history (evenly spaced over all steps).
HISTORY_POINTS = 200


class ModelStack(torch.nn.Module):
    """Several stacked models concatenated along the model dimension (a's models, then b's)."""

    def __init__(self, models: Sequence[torch.nn.Module]):
        super().__init__()
        self.parts = torch.nn.ModuleList(models)

    def forward(self, inputs):
        return torch.cat([part(inputs) for part in self.parts], dim=0)


@dataclass
class TrainResult:
    """What :func:`train_batched` returns (CPU tensors): per model (M,) the best checkpoint's and
    the last iterate's max error and share within 1/2, the best step; the loss history (K, M)
    at ``history_steps``; ``model`` holds the best parameters. With a monitor: its scores
    (E, M, K) at ``monitor_steps`` (E,), and the max errors are the kept checkpoint's."""

    model: torch.nn.Module
    best_max_error: torch.Tensor
    fraction_within_half: torch.Tensor
    final_max_error: torch.Tensor
    final_fraction_within_half: torch.Tensor
    best_step: torch.Tensor
    loss_history: torch.Tensor
    history_steps: torch.Tensor
    wall_time: float
    monitor_history: torch.Tensor | None = None
    monitor_steps: torch.Tensor | None = None


def lr_at(step: int, total: int, lr: float, final_lr_fraction: float) -> float:
    """Cosine decay: lr at step 0, final_lr_fraction * lr at step total - 1."""
    return cosine_lr(check_int(step, "step", 0), check_int(total, "total", 1),
                     check_float(lr, "lr"), check_float(final_lr_fraction, "final_lr_fraction"))


def cosine_lr(step: int, total: int, lr: float, final_lr_fraction: float) -> float:
    """:func:`lr_at` without the checks (the training loop's, once per step)."""
    if total <= 1:
        return lr
    progress = step / (total - 1)
    return lr * (final_lr_fraction
                 + (1 - final_lr_fraction) * 0.5 * (1 + math.cos(math.pi * progress)))


def _int_power(x: torch.Tensor, power: int) -> torch.Tensor:
    """x ** power by repeated squaring (~8x faster than torch's general pow)."""
    result = None
    while power:
        if power & 1:
            result = x if result is None else result * x
        power >>= 1
        if power:
            x = x * x
    return result


def _check_inputs(inputs) -> int:
    """N, the number of inputs: the leading size of the first tensor in `inputs`."""
    while isinstance(inputs, (tuple, list, Mapping)) and inputs:
        inputs = next(iter(inputs.values())) if isinstance(inputs, Mapping) else inputs[0]
    if not isinstance(inputs, torch.Tensor):
        raise TypeError(f"inputs must be a tensor, or a non-empty tuple/list/dict of tensors "
                        f"with the input index first, got {type(inputs).__name__}")
    return int(inputs.shape[0])


def _map_inputs(inputs, fn):
    if isinstance(inputs, torch.Tensor):
        return fn(inputs)
    if isinstance(inputs, Mapping):
        return {k: _map_inputs(v, fn) for k, v in inputs.items()}
    if isinstance(inputs, (tuple, list)):
        return type(inputs)(_map_inputs(v, fn) for v in inputs)
    return inputs  # non-tensor leaves (e.g. an int query position) pass through


def _model_index(model: torch.nn.Module, num_models: int, device) -> dict[int, torch.Tensor]:
    """For every parameter, the model index of each slice along its leading dimension."""
    index: dict[int, torch.Tensor] = {}

    def visit(module: torch.nn.Module, offset: int) -> int:
        if isinstance(module, ModelStack):
            for part in module.parts:
                offset = visit(part, offset)
            return offset
        params = list(module.parameters())
        if not params:
            return offset
        size = params[0].shape[0] if params[0].ndim else 0
        for p in params:
            if p.ndim == 0 or p.shape[0] != size:
                raise ValueError("model: every parameter of a stacked model must have the same "
                                 "leading model dimension, got shapes "
                                 f"{[tuple(q.shape) for q in params]}")
            index[id(p)] = torch.arange(offset, offset + size, device=device)
        return offset + size

    total = visit(model, 0)
    if total != num_models:
        raise ValueError(f"model: parameters stack {total} models but model(inputs) returned "
                         f"{num_models} rows")
    return index


def train_batched(model: torch.nn.Module, inputs, targets: torch.Tensor, *, steps: int,
                  lr: float, final_lr_fraction: float = 0.02, surrogate_steps: int = 0,
                  surrogate_power: int = 16, device: str | torch.device = "cpu",
                  progress: bool = False, monitor=None, eval_every: int = 100) -> TrainResult:
    """Train the M stacked models in ``model`` together, full batch (see the module docstring):
    ``model(inputs)`` returns (M, N), ``inputs`` a tensor or a tuple/list/dict of tensors
    indexed by the N inputs first; targets (N,) or (M, N). ``monitor(model)`` (no gradients)
    returns scores (M, K) every ``eval_every`` steps and after the last; column 0 selects the
    checkpoint (highest, earliest on ties)."""
    check_instance(model, "model", torch.nn.Module)
    steps = check_int(steps, "steps", 1, MAX_STEPS)
    lr = check_float(lr, "lr", 0.0, 10.0, low_open=True)
    final_lr_fraction = check_float(final_lr_fraction, "final_lr_fraction", 0.0, 1.0,
                                    low_open=True)
    surrogate_steps = check_int(surrogate_steps, "surrogate_steps", 0, MAX_STEPS)
    surrogate_power = check_int(surrogate_power, "surrogate_power", 2, 1024)
    check_bool(progress, "progress")
    eval_every = check_int(eval_every, "eval_every", 1, MAX_STEPS)
    if monitor is not None and not callable(monitor):
        raise TypeError(f"monitor must be callable or None, got {type(monitor).__name__}")
    device = torch.device(check_device(device))
    check_instance(targets, "targets", torch.Tensor)
    n_inputs = _check_inputs(inputs)
    if n_inputs < 1:
        raise ValueError("inputs must hold at least one input (N >= 1)")
    if targets.ndim not in (1, 2) or targets.shape[-1] != n_inputs:
        raise ValueError(f"targets must have shape (N,) or (M, N) with N = {n_inputs}, "
                         f"got {tuple(targets.shape)}")
    if not torch.all(torch.isfinite(targets)):
        raise ValueError("targets contains NaN or infinite entries")

    return fit_batched(model, inputs, targets, steps, lr, final_lr_fraction, surrogate_steps,
                       surrogate_power, device, progress, monitor, eval_every)


@contextlib.contextmanager
def _no_uninitialised_fill():
    """Deterministic mode fills new tensors with NaN (a third of each step here, no result
    changes): off while training."""
    fill = torch.utils.deterministic.fill_uninitialized_memory
    torch.utils.deterministic.fill_uninitialized_memory = False
    try:
        yield
    finally:
        torch.utils.deterministic.fill_uninitialized_memory = fill


class _Checkpoints:
    """The kept checkpoint of every model: its parameters, step and training max error and
    share within 1/2 (or its monitor score); updates touch only the models that improved."""

    def __init__(self, model, params, num_models: int, device):
        self.params, self.best = params, [p.detach().clone() for p in params]
        index = _model_index(model, num_models, device)
        self.index = [index[id(p)] for p in params]
        # which rows of the stacked output each parameter's leading slices belong to
        self.spans = [(int(i[0]), int(i.numel())) for i in self.index]
        self.on_cpu = device.type == "cpu"
        self.err = torch.full((num_models,), math.inf, device=device)
        self.frac = torch.zeros(num_models, device=device)
        self.step = torch.full((num_models,), -1, dtype=torch.long, device=device)
        self.score = torch.full((num_models,), -math.inf, device=device)

    def keep(self, better: torch.Tensor) -> None:
        """Copy the parameters of the models where ``better`` (M,) holds."""
        if not self.on_cpu:  # masked copies: no host synchronisation on an accelerator
            for p, bp, idx in zip(self.params, self.best, self.index):
                sel = better[idx].view(-1, *([1] * (p.ndim - 1)))
                bp.copy_(torch.where(sel, p.detach(), bp))
            return
        if bool(better.all()):
            torch._foreach_copy_(self.best, [p.detach() for p in self.params])
            return
        local_of = {}  # the parameters of one stacked module share their span of models
        for p, bp, span in zip(self.params, self.best, self.spans):
            if span not in local_of:
                offset, size = span
                local_of[span] = better[offset:offset + size].nonzero().squeeze(1)
            local = local_of[span]
            if local.numel() == span[1]:
                bp.copy_(p.detach())
            elif local.numel():
                bp.index_copy_(0, local, p.detach().index_select(0, local))

    def record(self, err: torch.Tensor, step: int) -> None:
        """Keep every model whose max error improved; err = |pred - targets| (M, N)."""
        mx = err.amax(dim=-1)
        better = mx < self.err
        if not self.on_cpu:
            self.err.copy_(torch.where(better, mx, self.err))
            self.frac.copy_(torch.where(better, (err < 0.5).float().mean(-1), self.frac))
            self.step.copy_(torch.where(better, torch.full_like(self.step, step), self.step))
            self.keep(better)
            return
        # on the CPU, touch only the improved models' slices: no pass over every parameter
        improved = better.nonzero().squeeze(1)
        if improved.numel() == 0:
            return
        self.err.index_copy_(0, improved, mx.index_select(0, improved).to(self.err.dtype))
        frac = (err.index_select(0, improved) < 0.5).float().mean(-1)
        self.frac.index_copy_(0, improved, frac.to(self.frac.dtype))
        self.step.index_fill_(0, improved, step)
        self.keep(better)

    def select(self, scores: torch.Tensor, step: int) -> None:
        """Keep every model whose monitor score (column 0 of scores (M, K)) improved."""
        better = scores[:, 0] > self.score
        self.score.copy_(torch.where(better, scores[:, 0], self.score))
        self.step.copy_(torch.where(better, torch.full_like(self.step, step), self.step))
        self.keep(better)


def _evaluate(model, monitor, best: _Checkpoints, step: int, steps: list, history: list):
    """The monitor's scores now (no gradients, eval mode); keep the models that improved."""
    was = model.training
    model.eval()
    with torch.no_grad():
        scores = torch.as_tensor(monitor(model), device=best.err.device).reshape(
            len(best.err), -1)
    model.train(was)
    best.select(scores, step)
    steps.append(step)
    history.append(scores.detach().to("cpu"))


def _step_loss(err, surrogate: bool, power: int):
    """Per-model loss (M,) of the errors pred - targets: the MSE, or a smooth L_p norm of
    the errors scaled by the (detached) max for stability (and then |err|, detached)."""
    if not surrogate:
        return (err * err).mean(-1), None
    a = err.abs()
    abs_err = a.detach()
    scale = abs_err.amax(dim=-1, keepdim=True).clamp_min(1e-12)
    return scale[:, 0] * _int_power(a / scale, power).mean(-1) ** (1.0 / power), abs_err


def fit_batched(model, inputs, targets, steps, lr, final_lr_fraction, surrogate_steps,
                surrogate_power, device, progress=False, monitor=None,
                eval_every=100) -> TrainResult:
    """:func:`train_batched` without the checks of its arguments (the sweeps' units)."""
    with _no_uninitialised_fill():
        start = time.perf_counter()
        model = model.to(device)
        inputs = _map_inputs(inputs, lambda t: t.to(device))
        targets = targets.to(device=device, dtype=next(model.parameters()).dtype)
        params = [p for p in model.parameters() if p.requires_grad]
        if not params:
            raise ValueError("model has no trainable parameters")
        with torch.no_grad():
            first = model(inputs)
        n_inputs = targets.shape[-1]
        if first.ndim != 2 or first.shape[1] != n_inputs:
            raise ValueError(f"model(inputs) must return (M, N) with N = {n_inputs}, got "
                             f"{tuple(first.shape)}")
        num_models = first.shape[0]
        if targets.ndim == 2 and targets.shape[0] != num_models:
            raise ValueError(f"targets of shape (M, N) must have M = {num_models} rows, got "
                             f"{targets.shape[0]}")
        tgt = targets.expand(num_models, n_inputs)
        best = _Checkpoints(model, params, num_models, device)
        total = steps + surrogate_steps
        stride = max(1, total // HISTORY_POINTS)
        hist_steps, hist, mon_steps, mon_hist = [], [], [], []
        optimizer = torch.optim.Adam(params, lr=lr, fused=device.type in ("cpu", "cuda"))
        bar = progress_bar(progress, total=total, desc="train", leave=False)
        for step in range(total):
            phase_step, phase_len = (step - steps, surrogate_steps) if step >= steps else (
                step, steps)
            for group in optimizer.param_groups:
                group["lr"] = cosine_lr(phase_step, phase_len, lr, final_lr_fraction)
            err = model(inputs) - tgt
            per_model, abs_err = _step_loss(err, step >= steps, surrogate_power)
            if monitor is None:  # the step's own errors: no second pass over the outputs
                best.record(err.detach().abs() if abs_err is None else abs_err, step)
            elif step % eval_every == 0:
                _evaluate(model, monitor, best, step, mon_steps, mon_hist)
            if step % stride == 0:
                hist_steps.append(step)
                hist.append(per_model.detach().to("cpu"))
            optimizer.zero_grad(set_to_none=True)
            per_model.sum().backward()
            optimizer.step()
            bar.update(1)
        bar.close()
        with torch.no_grad():  # the last evaluation, then the kept parameters put back
            final = model(inputs)
            if monitor is None:
                best.record((final - tgt).abs(), total)
            else:
                _evaluate(model, monitor, best, total, mon_steps, mon_hist)
            final_abs = (final - tgt).abs()
            final_err, final_frac = final_abs.amax(-1), (final_abs < 0.5).float().mean(-1)
            for p, bp in zip(params, best.best):
                p.copy_(bp)
            best_err, best_frac = best.err, best.frac
            if monitor is not None:  # the kept checkpoint's training errors
                kept = (model(inputs) - tgt).abs()
                best_err, best_frac = kept.amax(-1), (kept < 0.5).float().mean(-1)
        return TrainResult(model, best_err.cpu(), best_frac.cpu(), final_err.cpu(),
                           final_frac.cpu(), best.step.cpu(),
                           torch.stack(hist) if hist else torch.zeros(0, num_models),
                           torch.tensor(hist_steps, dtype=torch.long), time.perf_counter() - start,
                           torch.stack(mon_hist) if mon_hist else None,
                           torch.tensor(mon_steps, dtype=torch.long) if mon_steps else None)
