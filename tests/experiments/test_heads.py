"""The stacked-head family (companion.experiments.heads): every variant bit-identical to the
eight classes it replaced, masks and padding, the inspection methods, the exact verifier."""

import hashlib
import time
from fractions import Fraction

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from companion.book import seed_everything  # noqa: E402
from companion.core.attention import kernel_attention  # noqa: E402
from companion.core.exact import (  # noqa: E402
    HeadTables,
    exact_table_max_error,
    exact_table_outputs,
)
from companion.core.task import min_ip_targets, query_target, token_pool  # noqa: E402
from companion.experiments.e2.data import pool_inputs  # noqa: E402
from companion.experiments.engine import ModelStack, train_batched  # noqa: E402
from companion.experiments.heads import (  # noqa: E402
    FEATURES,
    HeadConfig,
    StackedHeads,
    group_ranks,
    mlp_kernel_heads,
    mlp_softmax_heads,
    multi_heads,
    pool_kernel_heads,
    pool_softmax_heads,
    signed_heads,
    table_kernel_heads,
    table_softmax_heads,
)


@pytest.fixture(autouse=True)
def _one_thread():
    seed_everything(0, threads=1)


def problem(num_tokens=16, count=240, m=8, seed=0):
    """A small stand-in for a witness family: random length-3 sequences over a token pool."""
    tokens = token_pool(m, num_tokens, seed)
    ids = np.random.default_rng(seed).integers(0, num_tokens, size=(count, 3))
    return torch.tensor(ids), torch.tensor(query_target(tokens[ids]), dtype=torch.float32)


# ---------------------------------------------------------------- bit-identical to the old code

#: Recorded from the eight classes this module replaced (table_heads, probe_heads,
#: pool_table_heads, mlp_heads at commit f1b3f8a; torch 2.13 on one AVX2 core): sha256 (first
#: 16 hex digits) of the initial parameters, the initial outputs, the loss history and best max
#: errors of 6 + 3 engine steps, the trained outputs and the inspection tables.
OLD_CODE = {
    "table_exp": ("2453dfb8390a41f9 6bb96d1cc3c8e961 20d1cb9ab0df4d5d "
        "0f7c9e1d16aa2d2b f4d85685586624f2 cba0a5b56050e6d3"),
    "table_exp_d6": ("b4080f466feb50ed 951ee1dc7433f776 d0c93d9d20c6f34e "
        "38d85b91f64e1376 1bb92da880cf4f72 644f1e98e6571faa"),
    "table_softplus": ("2c3bf3ab632e1407 163801343b58ce55 d0d3c5440a66b52e "
        "b41b9f5bcf683f51 3c3b39572d69f714 824d536820535c6b"),
    "table_softmax": ("719386a8cbb3950d ea04ce61a825a20a c63fab497d57f567 "
        "33d5da1536438ce5 1b49cad2919b0f40 5d4ce557cffc5870"),
    "table_softmax_pos": ("629ac6cfda184357 3053235270227078 e8866dd45b027594 "
        "1e4bb30d942c34f5 b48d7b425e40fec3 99ecd2af57edd853"),
    "signed_gexp": ("edd0c8ce86ef9b93 a85bef61ef501e5b 7391c947de32f8e7 "
        "ece6319fb64dcf9d 727e2d91664ff61c 682705757941ebf4"),
    "signed_columns": ("4d5eeef0fafe7928 4d87dafaa505b77a 689bab17542ab563 "
        "bbdb28338001025e 9c7f0f134683bd7a f534549f038ba8b9"),
    "multi": ("7bf12e124a970d98 0ed057ab3321af2c a90b23fe9e6eaa1e "
        "3cb06e59b0f0c597 109e213e1feb822c a06a6090db59aa0f"),
    "multi_pad": ("a40afa9969284406 f39e927d5ec4b8a0 942bdfa0620450e6 "
        "2993261a0f8c67dd c61e6cd1bfb2d839 6a53a36091a94ba9"),
    "pool_kernel_learned": ("494bcb24be896bf7 e26a8afdfc02281f 1d4a32412cc1d0f8 "
        "bbd8310f7a6bdc79 4f080dfd3db7d151 1947fb2a699d0ac8"),
    "pool_kernel_overlap": ("a4e2f5a6b4aef76a 5d07c4fb594a9045 8878ca504ebceb16 "
        "d2dc485953a742d2 db759ce8931be9d7 0965455cb0f15c54"),
    "pool_softmax_learned": ("8ad0f81050c2ba1d 444cd64df8659dd5 41b4cc22bb823e0d "
        "f3eb0674aeb42d0d ba637d1ddbadd130 -"),
    "pool_softmax_overlap": ("0a22c349aa355678 97c44e094165d404 28175dfac7e88be4 "
        "c952b5ca8f1cde62 e3971407b2340803 -"),
    "mlp_exp": ("c2b4e79dd578e910 2ddf35db1b961d1d 4f2b4943731fd4fc "
        "0b040d86ca0b6e52 d0a16466182ffe33 f4a6e6e4fe0c19af"),
    "mlp_softplus_skip": ("b2718a130002c5af 0173fd0e831f26a6 ed2520c386f73853 "
        "0b031fb3713dabd8 459109f8765e858e 66b1c80294441bc2"),
    "mlp_affine_overlap": ("b225295bdb3991fa 8090ff08ce0bae1e 29341ec3355680d9 "
        "2a2d0830e77f455b 4a10a0c66e4d1e1c 2f4542014d734771"),
    "table_exp_sparse": ("a6804d7e5a86e755 e41c62b93e55f221 a43c801172f72ddd "
        "2db546673e1896fb 73c33eb5ab0674b5 a16fb2e0da1c42ac"),
    "table_softmax_sparse": ("5a239de247afd2d3 d14809b01aae52dc c12c2514cf0f0dab "
        "4910de625574d64a e79a493df1c5c110 b0863e55c3a899df"),
    "mlp_exp_sparse": ("2fc16176b28173a2 a2531a50373f960c a1a7de2c36849491 "
        "d916a810733f42d2 399d6184a6b8aa79 7ba01d20dc7f7338"),
    "mlp_softmax_sparse": ("df6c2b3db37a449d ec5142b25a05b6d1 79a208946511a197 "
        "27f729c6046835f4 b9dcf907aa0b40ab -"),
    "mlp_softmax": ("b96557c6e5722fca 6be3b0580bf165ee fb2c862198dcd47b "
        "b1e32edec7f93777 9ea3b6bc1746a8c0 -"),
    "mlp_softmax_overlap": ("3b7819c29bb96dc7 4ac31c2c73ca1990 8e5a31788f49ef2b "
        "9566d6fe0ee5fd7a d78ea0edc2d0e676 -"),
}
RECORDED_ON = "AVX2"

CASES = {
    "table_exp": (lambda: table_kernel_heads([2, 5, 5, 3], [0, 1, 2, 3], 12, pad_to=6), "ids"),
    "table_exp_d6": (lambda: table_kernel_heads([3, 4], [4, 1], 12, d=6, positional=False,
                                                query_position=1), "ids"),
    "table_softplus": (lambda: table_kernel_heads([2, 4], [0, 1], 12, feature="softplus", d=5),
                       "ids"),
    "table_softmax": (lambda: table_softmax_heads([0, 3], 12, d=5), "ids"),
    "table_softmax_pos": (lambda: table_softmax_heads([1], 12, 3, score_dim=7, positional=True,
                                                      qk_std=0.5), "ids"),
    "signed_gexp": (lambda: signed_heads([2, 4], [0, 1], 12, d=6), "ids"),
    "signed_columns": (lambda: signed_heads([4, 3], [0, 1], 12, sign_init="columns",
                                            positional=False), "ids"),
    "multi": (lambda: multi_heads([1, 3], [2, 4], [0, 1], 12, d=6), "ids"),
    "multi_pad": (lambda: multi_heads([2], [3], [4], 12, pad_to=5, pad_heads=3), "ids"),
    "pool_kernel_learned": (lambda: pool_kernel_heads(30, [1, 3, 3], [0, 0, 1], "learned", 5),
                            "pool"),
    "pool_kernel_overlap": (lambda: pool_kernel_heads(30, [2, 4], [0, 1], "overlap"), "pool"),
    "pool_softmax_learned": (lambda: pool_softmax_heads(30, [0, 1], 6, "learned", 5), "pool"),
    "pool_softmax_overlap": (lambda: pool_softmax_heads(30, [2], 6), "pool"),
    "mlp_exp": (lambda: mlp_kernel_heads(6, [1, 3, 3], [0, 1, 2], hidden=(8,), value_dim=4),
                "pool"),
    "mlp_softplus_skip": (lambda: mlp_kernel_heads(6, [2, 4], [0, 1], (8, 5), 3, "softplus",
                                                   "pm1", True), "pool"),
    "mlp_affine_overlap": (lambda: mlp_kernel_heads(6, [2, 5], [3, 1], (), 4, "exp", "01", False,
                                                    "overlap"), "pool"),
    "table_exp_sparse": (lambda: table_kernel_heads([3, 6, 6], [0, 1, 2], 60), "ids_s"),
    "table_softmax_sparse": (lambda: table_softmax_heads([0], 60), "ids_s"),
    "mlp_exp_sparse": (lambda: mlp_kernel_heads(6, [2, 2, 7], [0, 1, 2], hidden=(8,),
                                                value_dim=4), "pool_s"),
    "mlp_softmax_sparse": (lambda: mlp_softmax_heads(6, [0], hidden=(8,), value_dim=4),
                           "pool_s"),
    "mlp_softmax": (lambda: mlp_softmax_heads(6, [0, 1], hidden=(8,), value_dim=4), "pool"),
    "mlp_softmax_overlap": (lambda: mlp_softmax_heads(6, [2], (), 4, 0.3, "pm1", False,
                                                      "overlap"), "pool"),
}


def _digest(*tensors) -> str:
    h = hashlib.sha256()
    for t in tensors:
        a = t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]


def _inputs():
    rng = np.random.default_rng(0)
    ids = torch.as_tensor(rng.integers(0, 12, (40, 3)))
    y = torch.as_tensor(rng.integers(0, 3, 40), dtype=torch.float32)
    pool = pool_inputs(rng.integers(0, 2, (30, 6)), rng.integers(0, 30, (25, 3)))
    y2 = torch.as_tensor(rng.integers(0, 3, 75), dtype=torch.float32)
    ids_s = torch.as_tensor(rng.integers(0, 60, (40, 3)))  # sparse plans: SDDMM
    pool_s = pool_inputs(rng.integers(0, 2, (200, 6)), rng.integers(0, 200, (25, 3)))
    return {"ids": (ids, y), "pool": (pool, y2), "ids_s": (ids_s, y), "pool_s": (pool_s, y2)}


def _inspection(name, model, inputs):
    """The tables each old class exposed (pair tables, features, exports, kernels, maps)."""
    kind, out = name.split("_")[0], []
    if kind == "table":
        out += list(model.pair_tables())
        out += [] if "softmax" in name else list(model.features())
    if kind == "signed":  # the old class's pair tables: alpha and scores, (M, P, T, T)
        fq, fk = model.features()
        m, p, t, r = fk.shape
        out.append(torch.bmm(fq, fk.reshape(m, p * t, r).transpose(1, 2)).view(m, -1, p, t)
                   .permute(0, 2, 1, 3))
        out.append(torch.bmm(model.a, model.v.reshape(m, p * t, -1).transpose(1, 2))
                   .view(m, -1, p, t).permute(0, 2, 1, 3))
    if kind in ("signed", "multi"):
        tables = model.export(0)
        out += [x for head in tables.heads for x in head] + [tables.bias]
    if kind == "pool" and "kernel" in name:
        out.append(model.kernel())
    if kind == "mlp" and "softmax" not in name:
        out += list(model.token_maps(inputs[1].bits))
    if kind == "multi":
        out.append(model.head_outputs(inputs))
    if kind == "signed":
        out += list(model.features())
    return _digest(*out) if out else "-"


@pytest.mark.skipif(torch.backends.cpu.get_cpu_capability() != RECORDED_ON,
                    reason="digests recorded on an AVX2 code path; others round differently")
@pytest.mark.parametrize("name", sorted(CASES))
def test_every_variant_is_bit_identical_to_the_code_it_replaced(name):
    make, which = CASES[name]
    inputs, targets = _inputs()[which]
    model = make()
    with torch.no_grad():
        init = model(inputs)
    params = dict(model.named_parameters())
    got = [_digest(*[params[k] for k in sorted(params)]), _digest(init)]
    res = train_batched(model, inputs, targets, steps=6, lr=3e-2, surrogate_steps=3)
    with torch.no_grad():
        trained = model(inputs)
    got += [_digest(res.loss_history), _digest(res.best_max_error), _digest(trained),
            _inspection(name, model, inputs)]
    assert " ".join(got) == OLD_CODE[name]


# ---------------------------------------------------------------- masks and padding


@pytest.mark.parametrize("feature", ["exp", "softplus"])
def test_masked_rank_padding_really_masks(feature):
    ids, _ = problem()
    heads = table_kernel_heads([2, 6], [0, 1], 16, feature=feature, pad_to=6)
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


def test_padding_does_not_change_the_model_beyond_rounding():
    ids, y = problem()
    a = table_kernel_heads([3], [7], 16)
    b = table_kernel_heads([3], [7], 16, pad_to=12)
    assert torch.allclose(a(ids), b(ids), atol=1e-5)
    ra = train_batched(a, ids, y, steps=30, lr=3e-2)
    rb = train_batched(b, ids, y, steps=30, lr=3e-2)
    assert torch.allclose(ra.model.q[0], rb.model.q[0, :, :3], atol=1e-4)


@pytest.mark.parametrize("kind", ["signed", "multi"])
def test_probe_padding_changes_nothing_but_rounding(kind):
    ids, _ = problem(12, 200, 6)
    if kind == "signed":
        alone, padded = signed_heads([3], [4], 12), signed_heads([3, 6], [4, 5], 12, pad_to=8)
    else:
        alone = multi_heads([2], [3], [4], 12)
        padded = multi_heads([2, 4], [3, 6], [4, 5], 12, pad_to=8, pad_heads=5)
    with torch.no_grad():
        assert torch.allclose(alone(ids)[0], padded(ids)[0], atol=1e-5)


@pytest.mark.parametrize("kind", ["signed", "multi"])
def test_padded_columns_and_heads_get_no_gradient(kind):
    ids, y = problem(12, 200, 6)
    if kind == "signed":
        model = signed_heads([2, 5], [0, 1], 12, pad_to=6)
    else:
        model = multi_heads([1, 3], [2, 5], [0, 1], 12, pad_to=6)
    ((model(ids) - y) ** 2).sum().backward()
    if kind == "signed":
        assert torch.all(model.q.grad[0, :, 2:] == 0) and torch.all(model.k.grad[0, ..., 2:] == 0)
        assert model.q.grad[0, :, :2].abs().sum() > 0
    else:
        assert torch.all(model.q.grad[0, :, :, 2:] == 0)
        assert torch.all(model.q.grad[0, 1:] == 0) and torch.all(model.v.grad[0, 1:] == 0)
        assert torch.all(model.a.grad[0, 1:] == 0)
        assert model.a.grad[1, 2].abs().sum() > 0


@pytest.mark.parametrize("kind", ["signed", "multi"])
def test_stacked_training_equals_training_alone(kind):
    ids, y = problem(12, 200, 6)

    def make(ranks, seeds):
        if kind == "signed":
            return signed_heads(ranks, seeds, 12, pad_to=6)
        return multi_heads([2] * len(ranks), ranks, seeds, 12, pad_to=6)

    res = train_batched(ModelStack([make([3, 6], [0, 1])]), ids, y, steps=40, lr=3e-2,
                        surrogate_steps=20)
    alone = train_batched(make([6], [1]), ids, y, steps=40, lr=3e-2, surrogate_steps=20)
    assert torch.allclose(res.best_max_error[1], alone.best_max_error[0], atol=1e-4)


def test_exp_features_do_not_overflow_with_large_tables():
    ids, _ = problem()
    heads = table_kernel_heads([4], [0], 16)
    with torch.no_grad():
        heads.k.mul_(200.0)  # exp(200) overflows float32; the log-space pair tables must not
    assert torch.all(torch.isfinite(heads(ids)))


# ---------------------------------------------------------------- the variants agree


def test_table_heads_match_the_reference_kernel_attention_forward():
    ids, _ = problem()
    heads = table_kernel_heads([3, 5], [0, 1], 16, pad_to=5)
    phi_q, phi_k = heads.features()
    x = ids[:, 0]
    for j in range(2):
        kf = torch.stack([phi_k[j, p][ids[:, p]] for p in range(3)], dim=1)
        vals = torch.stack([heads.v[j, p][ids[:, p]] for p in range(3)], dim=1)
        alpha = torch.einsum("br,bnr->bn", phi_q[j][x], kf)  # the NKA forward pass
        scores = torch.einsum("bnd,bd->bn", vals, heads.a[j][x])
        ref = (alpha * scores).sum(-1) / alpha.sum(-1) + heads.b[j][x]
        assert torch.allclose(heads(ids)[j], ref, atol=1e-5)


def test_signed_heads_start_as_the_nka_heads_of_the_same_seed():
    ids, _ = problem(12, 200, 6)
    nka = table_kernel_heads([3, 5], [0, 7], 12)
    signed = signed_heads([3, 5], [0, 7], 12)
    with torch.no_grad():
        assert signed(ids).shape == (2, len(ids))
        assert torch.allclose(nka(ids), signed(ids), atol=1e-5)


def test_one_head_multihead_is_the_nka_head():
    ids, _ = problem(12, 200, 6)
    with torch.no_grad():
        assert torch.allclose(table_kernel_heads([3, 5], [0, 7], 12)(ids),
                              multi_heads([1, 1], [3, 5], [0, 7], 12)(ids), atol=1e-6)


def test_multihead_output_is_the_sum_of_head_outputs_plus_bias():
    ids, _ = problem(12, 200, 6)
    multi = multi_heads([3, 2], [2, 4], [0, 1], 12)
    with torch.no_grad():
        multi.b.normal_()
        heads = multi.head_outputs(ids)
        assert heads.shape == (2, 3, len(ids))
        assert torch.all(heads[1, 2] == 0)  # model 1 has 2 heads: the third is padding
        assert torch.allclose(multi(ids), heads.sum(1) + multi.b[:, ids[:, 0]], atol=1e-6)


def test_pool_tables_and_mlp_maps_compute_the_same_head():
    """A pool-table head whose tables are an MLP head's token maps gives the MLP head's
    outputs: the two E2 map kinds share one attention and readout."""
    bits = np.random.default_rng(0).integers(0, 2, (20, 6))
    inputs = pool_inputs(bits, np.random.default_rng(1).integers(0, 20, (30, 3)))
    mlp = mlp_kernel_heads(6, [3, 3], [0, 1], hidden=(8,), value_dim=4, feature="softplus")
    table = pool_kernel_heads(20, [3, 3], [0, 1], "learned", 4)
    with torch.no_grad():
        phi_q, phi_k, v, a, b = mlp.token_maps(inputs[1].bits)
        table.q.copy_(phi_q.log())  # exp(log phi) = phi, up to rounding
        table.k.copy_(phi_k.log())
        table.v.copy_(v), table.a.copy_(a), table.b.copy_(b)
        assert torch.allclose(table(inputs), mlp(inputs), atol=1e-5)


@pytest.mark.parametrize("kind", ["kernel", "dense"])
def test_pair_tables_reproduce_the_forward_pass(kind):
    ids, _ = problem()
    heads = (table_kernel_heads([2, 5], [0, 1], 16) if kind == "kernel"
             else table_softmax_heads([0, 1], 16, positional=True))
    la, sc = heads.pair_tables()  # (M, P, T, T) indexed [model, position, query, key]
    x = ids[:, 0]
    logits = torch.stack([la[:, p, x, ids[:, p]] for p in range(3)], dim=-1)
    scores = torch.stack([sc[:, p, x, ids[:, p]] for p in range(3)], dim=-1)
    y = (torch.softmax(logits, -1) * scores).sum(-1) + heads.b[:, x]
    assert torch.allclose(heads(ids), y, atol=1e-5)


def test_to_kernel_head_matches_the_reference_numpy_evaluator():
    tokens = token_pool(8, 16, 0)
    ids = np.random.default_rng(0).integers(0, 16, size=(50, 3))
    for feature in ("exp", "softplus"):
        heads = table_kernel_heads([3, 6], [0, 1], 16, feature=feature)
        with torch.no_grad():
            y = heads(torch.tensor(ids)).double().numpy()
        for j in range(2):
            ref = kernel_attention(heads.to_kernel_head(j, tokens), tokens[ids])
            assert np.allclose(ref, y[j], atol=1e-4)


def test_sign_inits_start_with_negative_weights():
    cols = signed_heads([4, 3], [0, 1], 12, sign_init="columns")
    fq, fk = cols.features()
    assert torch.all(fq[0, :, :2] > 0) and torch.all(fq[0, :, 2:4] < 0)  # K_plus - K_minus
    assert torch.all(fq[1, :, :2] > 0) and torch.all(fq[1, :, 2] < 0) and torch.all(fk > 0 - 1e-9)


def test_group_ranks_partitions_and_trades_padding_for_groups():
    ranks = [1, 2, 4, 8, 16, 32, 64]
    assert sorted(r for g in group_ranks(ranks) for r in g) == ranks
    assert group_ranks(ranks, overhead=0) == [[r] for r in ranks]  # padding costs, groups free
    assert group_ranks(ranks, overhead=1e9) == [ranks]  # groups cost, padding free


def test_group_ranks_is_the_quadratic_programme_and_runs_in_linear_time():
    def quadratic(rs, overhead):  # the exact O(n^2) dynamic programme it replaced
        best, cut = [0.0] + [float("inf")] * len(rs), [0] * (len(rs) + 1)
        for j in range(1, len(rs) + 1):
            for i in range(j):
                if best[i] + (j - i) * rs[j - 1] + overhead < best[j]:
                    best[j], cut[j] = best[i] + (j - i) * rs[j - 1] + overhead, i
        groups, j = [], len(rs)
        while j:
            groups, j = [rs[cut[j]:j]] + groups, cut[j]
        return groups

    rng = np.random.default_rng(0)
    for _ in range(300):
        rs = sorted(set(rng.integers(1, 300, rng.integers(0, 30)).tolist()))
        for overhead in (0, 3.5, 48.0, 1000.0):
            assert group_ranks(rs, overhead) == quadratic(rs, overhead)
    start = time.process_time()  # CPU time: the machine may be shared
    assert sum(map(len, group_ranks(range(1, 10**6 + 1)))) == 10**6
    assert time.process_time() - start < 10


# ---------------------------------------------------------------- the configuration


def test_an_exploding_parameter_count_is_refused():
    with pytest.raises(ValueError, match="MAX_PARAMETERS"):
        HeadConfig(maps="table", attention="softmax", seeds=[0], num_tokens=10**6,
                   score_dim=10**3)


@pytest.mark.parametrize("fields, name", [
    ({"maps": "pool", "attention": "signed"}, "attention"),
    ({"ranks": (2, 3)}, "ranks"),
    ({"heads": (2,), "feature": "relu"}, "heads"),
    ({"maps": "mlp", "feature": "relu"}, "feature"),
    ({"query_position": 3}, "query_position"),
    ({"pad_to": 1}, "pad_to"),
    ({"phi_std": 0.0}, "phi_std"),
])
def test_the_configuration_checks_its_fields(fields, name):
    with pytest.raises((ValueError, TypeError), match=name):
        HeadConfig(**{"maps": "table", "attention": "kernel", "seeds": (0,), "ranks": (2,),
                      **fields})


def test_the_module_takes_a_configuration():
    cfg = HeadConfig("pool", "kernel", (0, 1), (2, 3), num_tokens=10)
    assert StackedHeads(cfg).num_models == 2 and StackedHeads(cfg).q.shape == (2, 10, 3)


# ---------------------------------------------------------------- export and the exact verifier


def dyadic_min_ip_tables(m=2):
    """An exact NKA head on every length-3 input in {0,1}^m with dyadic tables: one-hot
    query features, key weights 4^-<x,z> (0 at the query position), values z, readout x."""
    T = 2 ** m
    toks = (np.arange(T)[:, None] >> np.arange(m)) & 1
    fq = np.eye(T)
    fk = np.zeros((3, T, T))
    fk[1:] = (4.0 ** -(toks @ toks.T)).T  # fk[p, z, x] = 4^-<x, z>
    v = np.broadcast_to(toks.astype(float), (3, T, m)).copy()
    tables = HeadTables(heads=((fq, fk, v, toks.astype(float)),), bias=np.zeros(T),
                        positional=True, query_position=0)
    ids = np.stack(np.meshgrid(*[np.arange(T)] * 3, indexing="ij"), -1).reshape(-1, 3)
    ov = toks @ toks.T
    targets = np.minimum(ov[ids[:, 0], ids[:, 1]], ov[ids[:, 0], ids[:, 2]])
    return tables, ids, targets, toks


def test_exact_verifier_matches_hand_computation():
    tables, ids, targets, toks = dyadic_min_ip_tables()
    out, dens = exact_table_outputs(tables, ids)
    # query 11, keys 00 (overlap 0) and 11 (overlap 2): (0 * 1 + 2 / 16) / (1 + 1/16) = 2/17
    row = int(np.flatnonzero((ids == [3, 0, 3]).all(1))[0])
    assert out[row] == Fraction(2, 17)
    assert dens[row] == (Fraction(17, 16),)
    err = exact_table_max_error(tables, ids, targets)
    assert err == max(Fraction(g, 4 ** g + 1) for g in (1, 2)) == Fraction(1, 5)


def test_exact_verifier_rejects_a_doctored_head():
    tables, ids, targets, _ = dyadic_min_ip_tables()
    fq, fk, v, a = tables.heads[0]
    fk = fk.copy()
    fk[1:, 3, 3] = 1.0  # query 11 now weighs key 11 like key 00: no gap domination there
    bad = HeadTables(heads=((fq, fk, v, a),), bias=tables.bias, positional=True,
                     query_position=0)
    assert exact_table_max_error(bad, ids, targets) == 1  # (11, 00, 11): (0 + 2) / 2 vs 0
    zero = HeadTables(heads=((np.zeros_like(fq), fk, v, a),), bias=tables.bias,
                      positional=True, query_position=0)
    with pytest.raises(ValueError, match="vanishing denominator"):
        exact_table_outputs(zero, ids)


@pytest.mark.parametrize("make", [lambda: multi_heads([2], [3], [5], 12),
                                  lambda: signed_heads([4], [3], 12),
                                  lambda: table_kernel_heads([3], [2], 12, feature="softplus")])
def test_export_agrees_with_the_float_forward_pass(make):
    ids, y = problem(12, 200, 6)
    res = train_batched(make(), ids, y, steps=30, lr=3e-2)
    out, _ = exact_table_outputs(res.model.export(0), ids.numpy())
    with torch.no_grad():
        ref = res.model.double()(ids)[0].numpy()
    assert np.allclose([float(v) for v in out], ref, atol=1e-9)


def _gram_of(pool, idx):
    s = pool[idx]
    return np.einsum("sim,sjm->sij", s, s)


def _uniform(size, count, seed):
    return np.random.default_rng(seed).integers(0, size, (count, 3))


# ---------------------------------------------------------------- E2's heads (pool tables and MLPs)


def test_pool_table_heads_shapes_masking_and_nonnegative_kernel():
    pool = token_pool(8, 40, 0)
    idx = _uniform(40, 30, 0)
    inputs = pool_inputs(pool, idx)
    for readout in ("overlap", "learned"):
        heads = pool_kernel_heads(40, [1, 3, 8], [0, 0, 1], readout)
        out = heads(inputs)
        assert out.shape == (3, 90) and torch.isfinite(out).all()
        k = heads.kernel()
        assert k.shape == (3, 40, 40) and (k >= 0).all()
        # rank-1 head: the kernel matrix has rank 1; padded feature columns stay exactly 0
        sv = [torch.linalg.svdvals(k[i].detach().double()) for i in range(2)]
        assert sv[0][1] < 1e-5 * sv[0][0] and sv[1][2] > 1e-3 * sv[1][0]
        assert sv[1][3] < 1e-5 * sv[1][0]
        dense = pool_softmax_heads(40, [0, 1], score_dim=8, readout=readout)
        assert dense(inputs).shape == (2, 90)


def test_overlap_readout_outputs_are_convex_combinations_of_overlaps():
    pool = token_pool(8, 40, 0)
    idx = _uniform(40, 50, 1)
    heads = pool_kernel_heads(40, [4, 4], [0, 1], "overlap")
    out = heads(pool_inputs(pool, idx)).detach().numpy().reshape(2, -1, 3)
    g = _gram_of(pool, idx)
    assert (out >= g.min(-1)[None] - 1e-4).all() and (out <= g.max(-1)[None] + 1e-4).all()


def test_model_in_a_stack_equals_the_model_alone():
    pool = token_pool(8, 30, 0)
    inputs = pool_inputs(pool, _uniform(30, 20, 0))
    alone = pool_kernel_heads(30, [4], [7], "learned")(inputs)
    stacked = pool_kernel_heads(30, [2, 4, 16], [0, 7, 1], "learned")(inputs)
    torch.testing.assert_close(stacked[1], alone[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("feature", FEATURES)
def test_kernel_heads_shapes_nonnegativity_and_rank_mask(feature):
    ranks, seeds = [1, 3, 8], [0, 1, 2]
    model = mlp_kernel_heads(6, ranks, seeds, hidden=(8,), value_dim=4, feature=feature)
    bits = torch.as_tensor(np.random.default_rng(0).integers(0, 2, (20, 6)), dtype=torch.float32)
    phi_q, phi_k, v, a, b = model.token_maps(bits)
    assert phi_q.shape == phi_k.shape == (3, 20, 8) and v.shape == a.shape == (3, 20, 4)
    assert b.shape == (3, 20)
    assert (phi_q >= 0).all() and (phi_k >= 0).all()
    for i, r in enumerate(ranks):  # columns beyond a head's rank are exactly zero
        assert (phi_q[i, :, r:] == 0).all() and (phi_k[i, :, r:] == 0).all()
        assert (phi_q[i, :, :r] > 0).all()
    rows, pool = pool_inputs(bits.long().numpy(), np.array([[0, 1, 2], [4, 5, 5]]))
    assert model((rows, pool)).shape == (3, 6)


def test_rank_mask_makes_padding_irrelevant():
    """A head of rank r stacked with bigger ranks computes what it computes alone."""
    bits = np.random.default_rng(1).integers(0, 2, (15, 7))
    rows = pool_inputs(bits, np.random.default_rng(2).integers(0, 15, (10, 3)))
    alone = mlp_kernel_heads(7, [2], [5], hidden=(8,), value_dim=3)
    stacked = mlp_kernel_heads(7, [2, 16], [5, 0], hidden=(8,), value_dim=3)
    with torch.no_grad():
        torch.testing.assert_close(stacked(rows)[0], alone(rows)[0])
        stacked.weights[-1][0, :, 2:16] += 5.0  # change the masked feature columns of head 0
        torch.testing.assert_close(stacked(rows)[0], alone(rows)[0])


def test_rank_one_kernel_head_ignores_the_query_in_its_weights():
    """Rank 1: alpha(x, z) = phi_Q(x) phi_K(z), so the normalised weights depend on keys only."""
    model = mlp_kernel_heads(5, [1], [0], hidden=(4,), value_dim=2)
    bits = torch.as_tensor(np.random.default_rng(3).integers(0, 2, (9, 5)), dtype=torch.float32)
    phi_q, phi_k, *_ = model.token_maps(bits)
    kernel = phi_q[0] @ phi_k[0].T
    weights = kernel / kernel.sum(1, keepdim=True)
    torch.testing.assert_close(weights, weights[:1].expand_as(weights))


def test_softmax_heads_shape():
    model = mlp_softmax_heads(6, [0, 1], hidden=(8,), value_dim=4)
    rows = pool_inputs(np.eye(6, dtype=np.int64), np.array([[0, 1, 2], [3, 4, 5]]))
    assert model(rows).shape == (2, 6)


def test_dense_head_with_proposition_f_weights_solves_min_ip():
    """Affine maps set to Proposition F (q = -beta x, k = z, overlap readout) are exact, and the
    forward pass agrees with the numpy reference head of companion.core.constructions."""
    from companion.core.attention import softmax_attention
    from companion.core.constructions import softmax_min_ip_head

    m, beta = 8, 4.0
    model = mlp_softmax_heads(m, [0], hidden=(), value_dim=2, readout="overlap")
    with torch.no_grad():
        model.weights[0].zero_()
        model.biases[0].zero_()
        model.weights[0][0, :, :m] = -beta * torch.eye(m)
        model.weights[0][0, :, m:2 * m] = torch.eye(m)
    pool = np.random.default_rng(0).integers(0, 2, (40, m))
    idx = _uniform(40, 200, 1)
    with torch.no_grad():
        pred = model(pool_inputs(pool, idx)).numpy().reshape(200, 3)
    seqs = pool[idx]
    targets = min_ip_targets(seqs)
    assert np.abs(pred - targets).max() < 0.5
    for i in range(3):  # position i as the query: rotate it to the front
        ref = softmax_attention(softmax_min_ip_head(beta), np.roll(seqs, -i, axis=1))
        np.testing.assert_allclose(pred[:, i], ref, rtol=1e-4, atol=1e-4)


def test_mlp_values_are_affine_in_the_bits():
    model = mlp_kernel_heads(6, [4], [0], hidden=(8,), value_dim=5, affine_values=True)
    bits = torch.tensor(np.random.default_rng(0).integers(0, 2, (7, 6)), dtype=torch.float32)
    *_, v, a, b = model.token_maps(bits)
    w, c = model.weights[-1][0], model.biases[-1][0]
    expect = bits @ w + c
    assert torch.allclose(torch.cat([v[0], a[0], b[0, :, None]], -1), expect, atol=1e-6)
