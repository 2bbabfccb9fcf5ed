"""The trained heads of chapters 6-8, y = sum_p w_p f_p / sum_p w_p + b(x) with w_p from
<left(x), right(z_p)> and f_p = <a(x), v(z_p)>, read only at the U distinct (query, key) pairs
of a :class:`PairPlan` (dense bmm or SDDMM), with one fused hand-written backward."""

from __future__ import annotations

import itertools
import warnings
from dataclasses import dataclass, field

import torch

__all__: list[str] = []  # internal kernels of companion.experiments.heads

_TINY = 1e-30

#: Below these arguments exp underflows and torch's vectorised exp takes a ~40x slower scalar
#: path; a weight clamped there is below the dtype's resolution after the max-shift.
_EXP_FLOOR = {torch.float32: -87.0, torch.float64: -708.0}

#: Pairs sparser than this in their table use SDDMM (measured crossover on a CPU core).
SPARSE_DENSITY = 0.15


@dataclass(frozen=True, eq=False)
class PairPlan:
    """Index tensors for one input set over a (rows x cols) pair table: ``uniq`` (U,) the
    distinct flat pairs ascending; ``inv`` (n*N,) position-major place of each input's pair
    in ``uniq``; ``bias_idx`` (N,); ``shift_idx`` (U,) pairs modulo the shift period."""

    uniq: torch.Tensor
    inv: torch.Tensor
    n: int
    num_inputs: int
    rows: int
    cols: int
    bias_idx: torch.Tensor | None
    shift_idx: torch.Tensor | None
    sparse: bool
    _csr: dict = field(default_factory=dict, repr=False)

    def block_csr(self, num_models: int):
        """Block-diagonal CSR patterns of the pairs for M models, (M*rows x M*cols) and its
        transpose, plus the permutation from row-major to column-major pair order."""
        if num_models not in self._csr:
            u = self.uniq.numel()
            row, col = self.uniq // self.cols, self.uniq % self.cols
            off = torch.arange(num_models, device=row.device)[:, None]
            brow = (row[None] + off * self.rows).reshape(-1)
            bcol = (col[None] + off * self.cols).reshape(-1)
            crow = _crow(brow, num_models * self.rows)
            perm_t = torch.argsort(col * self.rows + row)  # pairs in column-major order
            bperm = (perm_t[None] + off * u).reshape(-1)
            crow_t = _crow(bcol[bperm], num_models * self.cols)
            self._csr[num_models] = (crow, bcol, crow_t, brow[bperm], bperm)
        return self._csr[num_models]


def _crow(sorted_rows: torch.Tensor, num_rows: int) -> torch.Tensor:
    counts = torch.bincount(sorted_rows, minlength=num_rows)
    return torch.cat([counts.new_zeros(1), counts.cumsum(0)])


def make_pair_plan(flat: torch.Tensor, rows: int, cols: int, bias_idx=None,
                   shift_period: int | None = None, sparse: bool | None = None) -> PairPlan:
    """Plan for inputs whose pairs sit at ``flat`` (N, n) = row * cols + col."""
    # position-major, so the readout reduces over a middle axis (a reduction over a last axis
    # of length 3 is ~10x slower on the CPU)
    uniq, inv = torch.unique(flat.t().reshape(-1), sorted=True, return_inverse=True)
    shift_idx = None if shift_period is None else uniq % shift_period
    if sparse is None:
        sparse = uniq.numel() < SPARSE_DENSITY * rows * cols
    return PairPlan(uniq, inv, int(flat.shape[1]), int(flat.shape[0]), int(rows), int(cols),
                    bias_idx, shift_idx, bool(sparse))


def _csr(crow, col, values, size):
    with warnings.catch_warnings():  # "sparse CSR support is in beta" (the ops used are stable)
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(crow, col, values, size, check_invariants=False)


class _SampledDots(torch.autograd.Function):
    """<left[m, row_u], right[m, col_u]> at the plan's pairs by SDDMM on a block-diagonal
    pattern; backward: two sparse-dense products."""

    @staticmethod
    def forward(ctx, left, right, plan):
        m, r, k = left.shape
        crow, col, *_ = plan.block_csr(m)
        pattern = _csr(crow, col, left.new_zeros(col.numel()), (m * plan.rows, m * plan.cols))
        out = torch.sparse.sampled_addmm(pattern, left.reshape(m * r, k),
                                         right.reshape(-1, k).t(), beta=0.0)
        ctx.plan = plan
        ctx.save_for_backward(left, right)
        return out.values().view(m, -1)

    @staticmethod
    def backward(ctx, grad):
        left, right = ctx.saved_tensors
        plan = ctx.plan
        m, r, k = left.shape
        crow, col, crow_t, col_t, perm = plan.block_csr(m)
        g = grad.contiguous().view(-1)
        g_left = g_right = None
        if ctx.needs_input_grad[0]:
            mat = _csr(crow, col, g, (m * plan.rows, m * plan.cols))
            g_left = torch.sparse.mm(mat, right.reshape(-1, k)).view(m, r, k)
        if ctx.needs_input_grad[1]:
            mat_t = _csr(crow_t, col_t, g.index_select(0, perm), (m * plan.cols, m * plan.rows))
            g_right = torch.sparse.mm(mat_t, left.reshape(-1, k)).view(m, plan.cols, k)
        return g_left, g_right, None


def pair_values(left: torch.Tensor, right: torch.Tensor, plan: PairPlan) -> torch.Tensor:
    """(M, U): <left[m, row], right[m, col]> at every distinct pair of the plan. left
    (M, rows, K), right (M, cols, K)."""
    if plan.sparse and left.dtype in (torch.float32, torch.float64):
        return _SampledDots.apply(left, right, plan)
    table = torch.bmm(left, right.transpose(1, 2))
    return table.reshape(table.shape[0], -1).index_select(1, plan.uniq)


def rank_blocks(ranks) -> list[tuple[int, int]]:
    """Runs of equal consecutive ranks as (number of models, rank)."""
    return [(sum(1 for _ in run), int(r)) for r, run in itertools.groupby(ranks)]


#: Padded FLOPs a run of equal-rank models must save to be multiplied at its own width (each
#: extra run costs ~8 small ops).
BLOCK_MIN_SAVED_FLOPS = 5e6


def ranked_pair_values(left, right, plan: PairPlan, blocks) -> torch.Tensor:
    """:func:`pair_values` for features padded to a common width, the models in runs
    ``blocks`` [(count, rank)] of equal rank (each run at its own width where it pays)."""
    width = left.shape[-1]
    size = plan.uniq.numel() if plan.sparse else plan.rows * plan.cols
    saved = 6 * size * sum(c * (width - r) for c, r in blocks)  # forward + backward
    if len(blocks) == 1 or saved < BLOCK_MIN_SAVED_FLOPS * (len(blocks) - 1):
        return pair_values(left, right, plan)
    counts = [c for c, _ in blocks]
    parts = [
        pair_values(lb[..., :r], rb[..., :r], plan)
        for lb, rb, (_, r) in zip(left.split(counts), right.split(counts), blocks)
    ]
    return torch.cat(parts)


class _PairReadout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, values, scores, bias, shift, plan, mode):
        m, n, num = values.shape[0], plan.n, plan.num_inputs
        if mode == "log_kernel":
            la = values.clamp_min(_TINY).log_()
            if shift is not None:
                la += shift
        else:
            la = values
        g = la.index_select(1, plan.inv).view(m, n, num)
        sc = scores.index_select(1, plan.inv).view(scores.shape[0], n, num)
        w = g if mode == "kernel" else (
            g.sub_(g.amax(1, keepdim=True)).clamp_min_(_EXP_FLOOR.get(g.dtype, -87.0)).exp_())
        total = w.sum(1)
        if mode == "kernel":
            total.clamp_min_(_TINY)
        out = (w * sc).sum(1).div_(total)
        y = out if bias is None else out + bias.index_select(1, plan.bias_idx)
        ctx.plan, ctx.mode = plan, mode
        ctx.u_shapes = (values.shape, scores.shape)
        ctx.bias_shape = None if bias is None else bias.shape
        ctx.save_for_backward(w, sc, out, total, values if mode == "log_kernel" else None)
        return y

    @staticmethod
    def backward(ctx, grad_y):
        plan, mode = ctx.plan, ctx.mode
        w, sc, out, total, values = ctx.saved_tensors
        m = grad_y.shape[0]
        grad_values = grad_scores = grad_bias = None
        if ctx.needs_input_grad[2]:
            grad_bias = grad_y.new_zeros(ctx.bias_shape).index_add_(1, plan.bias_idx, grad_y)
        # dy/df_p = w_p / W (the normalised weight), also where W is clamped (kernel mode)
        g_sc = (grad_y / total).unsqueeze(1) * w
        if ctx.needs_input_grad[1]:
            flat = g_sc.view(m, -1)
            if ctx.u_shapes[1][0] != m:  # broadcast scores (one shared table)
                flat = flat.sum(0, keepdim=True)
            grad_scores = flat.new_zeros(ctx.u_shapes[1]).index_add_(1, plan.inv, flat)
        if ctx.needs_input_grad[0]:
            if mode == "kernel":
                # y = sum_p t_p f_p / W: dy/dt_p = (f_p - y) / W, or f_p / W where W is clamped
                out = torch.where(total <= _TINY, 0.0, out)
                g_t = (sc - out.unsqueeze(1)).mul_((grad_y / total).unsqueeze(1))
            else:  # softmax over log weights: dy/dla_p = s_p (f_p - y)
                g_t = g_sc.mul_(sc - out.unsqueeze(1))
            g_u = g_t.new_zeros(ctx.u_shapes[0]).index_add_(1, plan.inv, g_t.view(m, -1))
            if mode == "log_kernel":  # d log(max(t, tiny)) / dt = 1/t where t >= tiny
                g_u = torch.where(values >= _TINY, g_u / values, 0.0)
            grad_values = g_u
        return grad_values, grad_scores, grad_bias, None, None, None


def pair_readout(values, scores, bias, plan: PairPlan, mode: str, shift=None) -> torch.Tensor:
    """Predictions (M, N) from pair ``values`` t (M, U), ``scores`` f (M or 1, U) and ``bias``
    (M, B) read at ``plan.bias_idx`` (or None). Weights, max-shifted per input: ``mode``
    "log_kernel" w = exp(log max(t, 1e-30) + shift) (``shift`` (M, U), no gradient), "logits"
    w = exp(t), "kernel" w = t (normalised by max(sum_p t, 1e-30))."""
    if shift is not None:
        shift = shift.detach()
    return _PairReadout.apply(values, scores, bias, shift, plan, mode)


class _ShiftedExp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, shift, mask):
        out = (x - shift).clamp_(_EXP_FLOOR.get(x.dtype, -87.0), 0.0).exp_().mul_(mask)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        # exact where the clamp is inactive; where it clamps, out <= e^floor (~1e-38 in
        # float32), so grad * out differs from the exact 0 by less than the dtype resolves
        return grad * out, None, None


def shifted_exp(x: torch.Tensor, shift: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """exp(x - shift) on a model's own columns, exactly 0 where ``mask`` is 0; the argument is
    clamped into [floor, 0] (padded entries may hold anything; see :data:`_EXP_FLOOR`)."""
    return _ShiftedExp.apply(x, shift.detach(), mask)
