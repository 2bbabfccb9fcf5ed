"""Small witness families shared by the sandwich tests: Paley q = 11 (12-bit, 14 queries,
single links of gaps 3 and 6) and q = 19 (20-bit, 16 queries, complement pairs on two-step
ladders 5 + 5)."""

from fractions import Fraction

import pytest

from companion.bounds.codes import paley_subset
from companion.bounds.witness import witness_family
from companion.sandwich.heads import tables_to_kernel_head


@pytest.fixture(scope="module")
def single():
    return witness_family(paley_subset(11, 3, 11), 3, Fraction(1, 2))


@pytest.fixture(scope="module")
def ladders():
    return witness_family(paley_subset(8, 8, 19), 3, Fraction(1, 2))


@pytest.fixture(scope="session")
def kernel_head():
    """An ExactHead's tables as a KernelAttentionHead (what max_error_exact evaluates)."""
    def build(head):
        return tables_to_kernel_head(head.family, head.query_features, head.key_features,
                                     head.self_features, head.self_value_scale, head.bias)
    return build
