import numpy as np
import pytest

from companion.reproducibility import seed_everything


def test_seed_everything_repeats_numpy_and_torch():
    torch = pytest.importorskip("torch")
    a = seed_everything(5).random(3), np.random.random(), torch.rand(2)
    b = seed_everything(5).random(3), np.random.random(), torch.rand(2)
    assert np.array_equal(a[0], b[0]) and a[1] == b[1] and torch.equal(a[2], b[2])
    assert torch.get_num_threads() == 1


@pytest.mark.parametrize("kwargs, exc", [({"seed": -1}, ValueError), ({"seed": 1.5}, TypeError),
                                         ({"threads": 0}, ValueError)])
def test_bad_seeds(kwargs, exc):
    with pytest.raises(exc):
        seed_everything(**kwargs)
