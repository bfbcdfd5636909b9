"""Fast Frequent Directions in spectral form (``fast_fd.spectral_rule``) against the dense
covariance, and its basis commit."""

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
    """The spectral rule (capacity 2m, block k) absorbing ``B B^T`` per block, as SOFUL drives
    it: the sketch and the accumulated shrinkage ``rho``."""
    k = blocks.shape[2]
    rule = fast_fd.spectral_rule(m, 2 * m, k)

    def step(carry, B):
        sk, rho = carry
        ext_b, ext = rule.extend(sk, B, sk.basis.T @ B)
        coef = jnp.zeros(ext.coords.shape[:1], dtype)
        rnd = rule.absorb(sk, ext, jnp.eye(k, dtype=dtype), coef, None)
        basis, _, rnd = rule.commit(sk, ext_b, rnd, coef, jnp.asarray(True))
        return (sketch.Sketch(basis, rnd.R, rnd.mu, rnd.rank, rnd.used), rho + rnd.delta), None

    init = (rule.init(D, dtype), jnp.zeros((), dtype))
    (sk, rho), _ = jax.lax.scan(step, init, jnp.asarray(blocks, dtype))
    U = np.asarray(sk.basis @ sk.R)
    return U @ np.diag(np.asarray(sk.mu)) @ U.T, float(rho)


@pytest.mark.parametrize("D,k,m", [(20, 1, 4), (20, 3, 5), (12, 2, 3)])
def test_fd_invariants_dense(D, k, m):
    """Ghashami et al.'s guarantee against the dense sum: ``C <= M <= C + rho I`` and
    ``rho <= (tr M - tr C) / (m + 1)``, with ``rho > 0`` (the sketch drops something)."""
    blocks = _stream(D, k, 40, seed=D + k + m)
    C, rho = _run(D, m, blocks)
    M = np.einsum("tik,tjk->ij", blocks, blocks)
    gap = np.linalg.eigvalsh(M - C)
    scale = np.trace(M)
    assert rho > 1e-3 * scale
    assert gap.min() >= -1e-10 * scale
    assert gap.max() <= rho + 1e-10 * scale
    assert rho <= (np.trace(M) - np.trace(C)) / (m + 1) + 1e-10 * scale


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
