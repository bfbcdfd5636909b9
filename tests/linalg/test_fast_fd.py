"""Fast Frequent Directions (2m buffer, periodic shrink) against dense covariance and the
per-round rule of ``linalg.sketch``."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax.linalg import fast_fd, sketch


def _stream(D, k, T, seed):
    rng = np.random.default_rng(seed)
    decay = np.linspace(2.0, 0.05, D)  # a decaying spectrum, so the sketch has work to do
    return rng.normal(size=(T, D, k)) * decay[None, :, None]


def _run(D, m, blocks, dtype=jnp.float64):
    def step(state, B):
        return fast_fd.update(state, B), None

    state, _ = jax.lax.scan(step, fast_fd.init(D, m, dtype), jnp.asarray(blocks, dtype))
    return state


@pytest.mark.parametrize("D,k,m", [(20, 1, 4), (20, 3, 5), (8, 2, 3), (6, 2, 6)])
def test_fd_invariants_dense(D, k, m):
    blocks = _stream(D, k, 40, seed=D + k + m)
    state = _run(D, m, blocks)
    M = np.einsum("tik,tjk->ij", blocks, blocks)
    C = np.asarray(fast_fd.covariance(state))
    rho = float(state.rho)
    gap = np.linalg.eigvalsh(M - C)
    scale = np.trace(M)
    assert gap.min() >= -1e-10 * scale  # S S^T <= M_t
    assert gap.max() <= rho + 1e-10 * scale  # M_t <= S S^T + rho I
    assert rho <= (np.trace(M) - np.trace(C)) / (m + 1) + 1e-10 * scale  # trace argument
    assert int(state.count) <= 2 * m and int(state.rejected) == 0
    if m >= D:  # sigma_{m+1} = 0 at every shrink: nothing is lost (errata 1)
        assert rho <= 1e-10 * scale


def test_vs_per_round_fd():
    """Same stream, same m: both satisfy the FD guarantee; fast FD's covariance error is of
    the same order as the per-round rule's (it keeps up to 2m directions between shrinks)."""
    D, k, m = 30, 1, 5
    blocks = _stream(D, k, 60, seed=7)
    M = np.einsum("tik,tjk->ij", blocks, blocks)
    fast = _run(D, m, blocks)
    fd = sketch.init(D, m, jnp.float64)
    upd = jax.jit(sketch.update)
    for B in blocks:
        fd, _, _ = upd(fd, jnp.asarray(B))
    C_fd = np.asarray(fd.V * fd.mu) @ np.asarray(fd.V).T
    err_fast = np.linalg.eigvalsh(M - np.asarray(fast_fd.covariance(fast))).max()
    err_fd = np.linalg.eigvalsh(M - C_fd).max()
    tail = np.linalg.eigvalsh(M)[::-1][m:].sum()  # ||A - A_m||_F^2 bounds the rank-m error
    assert err_fast <= float(fast.rho) + 1e-9 and err_fd <= float(fd.rho) + 1e-9
    assert err_fast <= 2.0 * err_fd
    assert float(fast.rho) <= tail + 1e-9


def test_view_is_spectral_state():
    D, m = 15, 3
    state = _run(D, m, _stream(D, 2, 10, seed=1))
    v = fast_fd.view(state)
    C = np.asarray(fast_fd.covariance(state))
    V, mu = np.asarray(v.V), np.asarray(v.mu)
    np.testing.assert_allclose(V * mu @ V.T, C, atol=1e-10 * np.abs(C).max())
    pos = mu > 0
    np.testing.assert_allclose(V[:, pos].T @ V[:, pos], np.eye(pos.sum()), atol=1e-8)
    assert np.all(np.diff(mu) <= 0) and float(v.rho) == float(state.rho)


def test_float32_invariants():
    D, k, m = 20, 2, 4
    blocks = _stream(D, k, 30, seed=2)
    state = _run(D, m, blocks, jnp.float32)
    assert state.buffer.dtype == jnp.float32 and state.rho.dtype == jnp.float32
    M = np.einsum("tik,tjk->ij", blocks, blocks)
    gap = np.linalg.eigvalsh(M - np.asarray(fast_fd.covariance(state), np.float64))
    assert gap.min() >= -1e-4 * np.trace(M)
    assert gap.max() <= float(state.rho) + 1e-4 * np.trace(M)


def test_bad_input():
    state = fast_fd.init(6, 2, jnp.float64)
    with pytest.raises(ValueError, match="B:"):
        fast_fd.update(state, jnp.ones((5, 1)))
    with pytest.raises(ValueError, match="B:"):
        fast_fd.update(state, jnp.ones((6, 3)))
    with pytest.raises(ValueError, match="B:"):
        fast_fd.update(state, jnp.full((6, 1), jnp.nan))
    with pytest.raises(ValueError, match="sketch_size"):
        fast_fd.init(6, 0)
    # under jit: flagged and rejected, the last good state kept
    good = fast_fd.update(state, jnp.ones((6, 1)))
    bad = jax.jit(fast_fd.update)(good, jnp.full((6, 1), jnp.nan))
    assert int(bad.rejected) == 1
    np.testing.assert_array_equal(bad.buffer, good.buffer)
    assert int(bad.count) == int(good.count)


def test_commit_basis_writes_in_place_or_shrinks():
    """Without a shrink only columns used .. used + k change (to Q); with one the basis becomes
    basis' @ coeffs (basis' = Q written in) padded with zero columns."""
    D, n, m, k, used = 7, 6, 2, 2, 3
    rng = np.random.default_rng(0)
    basis = jnp.asarray(np.concatenate([rng.normal(size=(D, used)), np.zeros((D, n - used))], 1))
    Q = jnp.asarray(rng.normal(size=(D, k)))
    coeffs = jnp.asarray(rng.normal(size=(n, m)))
    rot = fast_fd.Rotation(
        R=jnp.eye(n), mu=jnp.zeros(n), rank=jnp.int32(used), used=jnp.int32(used + k),
        delta=jnp.zeros(()), shrink=jnp.asarray(False), coeffs=coeffs, status=jnp.int32(0),
    )  # fmt: skip
    commit = jax.jit(fast_fd.commit_basis)
    out = np.asarray(commit(basis, Q, rot, jnp.int32(used)))
    want = np.asarray(basis).copy()
    want[:, used : used + k] = np.asarray(Q)
    np.testing.assert_array_equal(out, want)
    out = np.asarray(commit(basis, Q, rot._replace(shrink=jnp.asarray(True)), jnp.int32(used)))
    np.testing.assert_allclose(out[:, :m], want @ np.asarray(coeffs), rtol=1e-12)
    assert np.all(out[:, m:] == 0)
