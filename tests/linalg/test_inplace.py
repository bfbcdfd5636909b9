"""``linalg.inplace.subtract_outer`` against numpy, and the claim behind it: a round whose large
matrix is updated through it has no element-wise loop that XLA's CPU compiler splits over its
thread pool (``outer_dimension_partitions`` in the compiled program), while the plain update of
the same matrix is split."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax import mlogb
from bandits_jax.linalg import inplace
from tests import xla_defaults

SPLIT = 'outer_dimension_partitions":["'  # a loop XLA's CPU runtime runs as parallel tasks


@pytest.mark.parametrize("shape", [(1, 3), (2, 2), (7, 5)])
def test_subtract_outer_equals_numpy_and_keeps_a_rejected_matrix(shape):
    rng = np.random.default_rng(shape[0])
    A, u, v = rng.normal(size=shape), rng.normal(size=shape[0]), rng.normal(size=shape[1])
    fn = xla_defaults.jit(inplace.subtract_outer)
    np.testing.assert_allclose(fn(A, u, v, True), A - np.outer(u, v), rtol=1e-15, atol=1e-15)
    np.testing.assert_array_equal(fn(A, u, v, False), A)
    np.testing.assert_array_equal(fn(A, u * np.nan, v, False), A)


def _compiled_text(fn, *args) -> str:
    return jax.jit(fn).lower(*args).compile().as_text()


def test_a_large_update_is_not_split_where_the_plain_one_is():
    D = 600  # 2 x 8 x D^2 bytes of traffic: above XLA's 256 KiB a task
    A, u = jnp.eye(D), jnp.ones(D)
    plain = _compiled_text(lambda A, u: jnp.where(True, A - jnp.outer(u, u), A), A, u)
    if jax.devices()[0].platform != "cpu" or SPLIT not in plain:
        pytest.skip("this XLA splits no element-wise loop here (one core, or another runtime)")
    assert SPLIT not in _compiled_text(lambda A, u: inplace.subtract_outer(A, u, u, True), A, u)


@pytest.mark.parametrize("kind", ["linucb", "lin-ts"])
def test_the_ridge_learners_round_has_no_split_loop_at_d_600(kind):
    """The round as a user compiles it (act, then update): its (D, D) loop is in place."""
    d, N = 600, 4
    tu = mlogb.tuned(kind, num_outcomes=1, dim=d, S=4.0, horizon=100)
    learner, X = tu.learner, jnp.ones((N, d)) / np.sqrt(d)

    def round_(state, y):
        return learner.update(state, learner.act(state, (X, jnp.ones(N, bool))), y)

    text = _compiled_text(round_, learner.init(tu.hparams), jnp.asarray(1))
    big = [line for line in text.splitlines() if SPLIT in line and f"[{d + 1},{d + 1}]" in line]
    assert not big, big
