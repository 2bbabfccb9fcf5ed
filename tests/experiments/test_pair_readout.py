"""The pair-plan readout and its hand-written backward against straightforward autograd."""

import pytest

torch = pytest.importorskip("torch")

import companion.experiments.pair_readout as pr  # noqa: E402


def reference(left, right, a, v, b, flat, x, mode, shift=None):
    """The autograd version: full pair tables, gathered per (input, position)."""
    m = left.shape[0]
    table = torch.bmm(left, right.transpose(1, 2)).reshape(m, -1)[:, flat]  # (M, N, n)
    scores = torch.bmm(a, v.transpose(1, 2)).reshape(m, -1)[:, flat]
    if mode == "kernel":
        return (table * scores).sum(-1) / table.sum(-1).clamp_min(1e-30) + b[:, x]
    la = table if mode == "logits" else torch.log(table.clamp_min(1e-30))
    if shift is not None:
        la = la + shift.reshape(m, -1)[:, flat % shift[0].numel()]
    return (torch.softmax(la, -1) * scores).sum(-1) + b[:, x]


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("mode", ["log_kernel", "logits", "kernel"])
def test_readout_matches_autograd_values_and_gradients(mode, sparse):
    gen = torch.Generator().manual_seed(1)
    m, rows, cols, k, d, n, num = 3, 5, 7, 4, 3, 3, 40
    left = torch.rand(m, rows, k, generator=gen, dtype=torch.float64)
    right = torch.rand(m, cols, k, generator=gen, dtype=torch.float64)
    if mode == "logits":
        left, right = left - 0.5, right - 0.5
    a = torch.randn(m, rows, d, generator=gen, dtype=torch.float64)
    v = torch.randn(m, cols, d, generator=gen, dtype=torch.float64)
    b = torch.randn(m, rows, generator=gen, dtype=torch.float64)
    x = torch.randint(0, rows, (num,), generator=gen)
    z = torch.randint(0, cols, (num, n), generator=gen)
    flat = x[:, None] * cols + z
    shift = torch.randn(m, cols, generator=gen, dtype=torch.float64)
    shift = shift if mode == "log_kernel" else None
    tensors = [t.requires_grad_() for t in (left, right, a, v, b)]
    plan = pr.make_pair_plan(flat, rows, cols, bias_idx=x, shift_period=cols, sparse=sparse)
    assert plan.sparse is sparse
    u_shift = None if shift is None else shift[:, plan.shift_idx]
    got = pr.pair_readout(pr.pair_values(left, right, plan), pr.pair_values(a, v, plan), b,
                          plan, mode, u_shift)
    want = reference(left, right, a, v, b, flat, x, mode, shift)
    torch.testing.assert_close(got, want)
    g = torch.randn(m, num, generator=gen, dtype=torch.float64)
    for gg, gw in zip(torch.autograd.grad(got, tensors, g), torch.autograd.grad(want, tensors, g)):
        torch.testing.assert_close(gg, gw)


def test_plan_lists_each_pair_once_in_ascending_order():
    flat = torch.tensor([[5, 2, 5], [2, 2, 9]])
    plan = pr.make_pair_plan(flat, 2, 5)
    assert plan.uniq.tolist() == [2, 5, 9]
    # position-major: entry p*N + i is input i's pair at position p
    assert plan.uniq[plan.inv].view(3, 2).t().tolist() == flat.tolist()


def test_ranked_pair_values_equal_padded_products_and_blocks(monkeypatch):
    monkeypatch.setattr(pr, "BLOCK_MIN_SAVED_FLOPS", 0.0)
    gen = torch.Generator().manual_seed(0)
    ranks = [1, 1, 3, 4]
    left = torch.rand(4, 3, 4, generator=gen, dtype=torch.float64)
    right = torch.rand(4, 6, 4, generator=gen, dtype=torch.float64)
    mask = (torch.arange(4)[None, :] < torch.tensor(ranks)[:, None]).double()[:, None, :]
    left, right = left * mask, right * mask  # padded columns exactly 0
    plan = pr.make_pair_plan(torch.tensor([[0, 7, 17], [5, 6, 12]]), 3, 6)
    assert pr.rank_blocks(ranks) == [(2, 1), (1, 3), (1, 4)]
    torch.testing.assert_close(pr.ranked_pair_values(left, right, plan, pr.rank_blocks(ranks)),
                               pr.pair_values(left, right, plan))


def test_shifted_exp_is_exact_on_own_columns_zero_on_padding_and_never_nan():
    x = torch.tensor([[0.0, -3.0, 50.0, -1e4]], requires_grad=True)
    mask = torch.tensor([[1.0, 1.0, 0.0, 1.0]])
    out = pr.shifted_exp(x, torch.tensor([[0.0]]), mask)
    assert out[0, 0] == 1 and out[0, 2] == 0
    torch.testing.assert_close(out[0, 1], torch.exp(torch.tensor(-3.0)))
    assert 0 <= out[0, 3] < 1e-37  # clamped at the float32 underflow floor
    (g,) = torch.autograd.grad(out.sum(), [x])
    assert torch.isfinite(g).all() and g[0, 2] == 0
