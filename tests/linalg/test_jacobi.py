"""Cyclic Jacobi eigenvalues of small symmetric matrices against numpy's LAPACK eigvalsh."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax.linalg import jacobi


def _cases(K, rng):
    """Symmetric K x K matrices that stress Jacobi: generic SPD, clustered and repeated
    eigenvalues, a multiple of I, diagonal, rank-deficient PSD, indefinite, wide scales."""
    G = rng.normal(size=(K, K + 2))
    Q, _ = np.linalg.qr(rng.normal(size=(K, K)))
    out = [
        G @ G.T / (K + 2),
        Q @ np.diag(1.0 + 1e-9 * np.arange(K)) @ Q.T,  # clustered
        Q @ np.diag([2.0] * (K - 1) + [1.0]) @ Q.T,  # repeated top
        3.0 * np.eye(K),
        np.diag(rng.uniform(size=K)),
        G[:, :1] @ G[:, :1].T,  # rank one
        (G[:, :K] + G[:, :K].T) / 2,  # indefinite
        Q @ np.diag(np.logspace(-12, 3, K)) @ Q.T,  # wide scales
    ]
    return np.stack(out)


@pytest.mark.parametrize("K", [1, 2, 3, 4, 6])
def test_eigvalsh_matches_lapack(K):
    rng = np.random.default_rng(K)
    A = _cases(K, rng)
    ref = np.linalg.eigvalsh(A)
    got = np.asarray(jax.jit(jacobi.eigvalsh)(jnp.asarray(A)))
    scale = np.max(np.abs(ref), axis=1, keepdims=True)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-13 * 10 * K)
    assert np.all(np.abs(got - ref) <= 1e-13 * K * scale + 1e-300)
    top = np.asarray(jacobi.lambda_max(jnp.asarray(A)))
    np.testing.assert_allclose(top, ref[:, -1], rtol=1e-13 * K, atol=1e-300)


def test_small_eigenvalues_keep_relative_accuracy_on_spd():
    # Demmel & Veselic: for a well-scaled SPD matrix Jacobi gets every eigenvalue to
    # relative accuracy; here a diagonal scaling of a well-conditioned matrix.
    rng = np.random.default_rng(0)
    G = rng.normal(size=(4, 6))
    Dsc = np.diag([1.0, 1e-3, 1e-6, 1e-8])
    A = Dsc @ (G @ G.T / 6) @ Dsc
    exact = np.linalg.eigvalsh(np.asarray(A, np.longdouble).astype(np.float64))
    got = np.asarray(jacobi.eigvalsh(jnp.asarray(A)))
    np.testing.assert_allclose(got, exact, rtol=1e-10)


def test_batch_axes_vmap_and_float32():
    rng = np.random.default_rng(1)
    G = rng.normal(size=(3, 5, 4, 6))
    A = G @ np.swapaxes(G, -1, -2) / 6
    ref = np.linalg.eigvalsh(A)[..., -1]
    np.testing.assert_allclose(np.asarray(jacobi.lambda_max(jnp.asarray(A))), ref, rtol=1e-13)
    vm = jax.vmap(jax.vmap(jacobi.lambda_max))(jnp.asarray(A))
    np.testing.assert_allclose(np.asarray(vm), ref, rtol=1e-13)
    got32 = jacobi.lambda_max(jnp.asarray(A, jnp.float32))
    assert got32.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(got32), ref, rtol=1e-5)


def test_nonfinite_input_gives_nonfinite_output():
    A = np.eye(3)[None].repeat(2, 0)
    A[1, 0, 2] = A[1, 2, 0] = np.nan
    out = np.asarray(jacobi.lambda_max(jnp.asarray(A)))
    assert out[0] == 1.0 and np.isnan(out[1])


def test_bad_shape_is_a_value_error():
    with pytest.raises(ValueError, match="A: expected shape"):
        jacobi.eigvalsh(jnp.ones((2, 3)))


def test_above_max_k_falls_back_to_lapack():
    K = jacobi.MAX_K + 2
    rng = np.random.default_rng(3)
    G = rng.normal(size=(2, K, K + 1))
    A = G @ np.swapaxes(G, 1, 2)
    ref = np.linalg.eigvalsh(A)
    np.testing.assert_allclose(np.asarray(jacobi.eigvalsh(jnp.asarray(A))), ref, rtol=1e-12)
    np.testing.assert_allclose(
        np.asarray(jacobi.lambda_max(jnp.asarray(A))), ref[:, -1], rtol=1e-12
    )
