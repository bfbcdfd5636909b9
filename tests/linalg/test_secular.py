"""The secular-equation eigensolver against ``numpy.linalg.eigh`` of the dense matrix."""

import zlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax.linalg import secular
from bandits_jax.status import CONVERGED, NONFINITE

_solve = jax.jit(secular.eigh_diag_plus_lowrank)


def _check(d, A, M, dtype=np.float64):
    S = np.diag(d) + A @ M @ A.T
    ref_w, ref_v = np.linalg.eigh(S)
    res = _solve(*(jnp.asarray(x, dtype) for x in (d, A, M)))
    w, V = np.asarray(res.evals, np.float64), np.asarray(res.evecs, np.float64)
    scale = max(np.abs(ref_w).max(), 1e-300)
    n, K = A.shape
    # K rank-one updates, each backward stable to O(n eps ||S||) (Gu & Eisenstat's z_hat), and
    # the reference's own O(n eps ||S||): 4 K n eps of ||S|| for the eigenvalues (Weyl), of 1 for
    # V^T V; the input's rounding to dtype is within it.
    tol = 4 * K * n * np.finfo(dtype).eps
    assert bool(res.converged) and int(res.status) == CONVERGED
    assert np.all(np.diff(w) >= -tol * scale)  # ascending
    assert np.abs(w - ref_w).max() <= tol * scale
    assert np.abs(V.T @ V - np.eye(n)).max() <= tol
    assert np.abs(V @ np.diag(w) @ V.T - S).max() <= 2 * tol * scale
    # eigenvectors: each well-separated reference vector is matched (angle <= tol / gap)
    gaps = np.minimum(np.diff(ref_w, prepend=-np.inf), np.diff(ref_w, append=np.inf))
    sep = gaps > 1e-3 * scale
    overlap = np.abs(V.T @ ref_v).diagonal()
    assert np.all(overlap[sep] >= 1 - 1e3 * tol)


def _case(name, n, K, rng):
    A = rng.normal(size=(n, K))
    G = rng.normal(size=(K, K))
    M = G @ G.T
    if name == "random":
        d = rng.normal(size=n)
    elif name == "zero_d":  # every FD weight is zero in the first m rounds
        d = np.zeros(n)
    elif name == "fd_core":
        mu = np.sort(rng.exponential(size=n - K))[::-1]
        mu[n // 2 :] = 0.0
        d = np.concatenate([mu, np.zeros(K)])
    elif name == "ties":
        d = np.repeat(rng.normal(size=4), n)[:n]
    elif name == "near_ties":
        d = rng.normal(size=n)
        d[1::2] = d[::2][: n // 2] + 1e-13
    elif name == "zero_z":
        d = rng.normal(size=n)
        A[::3] = 0.0
    elif name == "tiny_z":
        d = rng.normal(size=n)
        A *= 1e-9
    elif name == "graded":
        d = np.geomspace(1e-12, 1.0, n)
    elif name == "singular_M":
        d = rng.normal(size=n)
        G[:, 0] = 0.0
        M = G @ G.T
    elif name == "sentinel":  # sketch.truncate's degenerate directions: negative d, zero rows
        d = np.concatenate([np.sort(rng.exponential(size=n - K))[::-1], -5.0 * np.ones(K)])
        A[n - K :] = 0.0
    # The largest root, above every pole, is modelled with its own pole and the next one down:
    elif name == "one_active":  # a single active pole: no pole below it
        d = rng.normal(size=n)
        A[1:] = 0.0
    elif name == "top_light":  # little weight on the largest pole, the next one close below
        d = np.sort(rng.normal(size=n))
        d[-2] = d[-1] - 1e-7
        A[-1] *= 1e-5
    elif name == "top_heavy":  # the largest pole carries almost all the weight
        d = rng.normal(size=n)
        A[np.argmax(d)] *= 1e4
    else:
        raise AssertionError(name)
    return d, A, M


CASES = [
    "random",
    "zero_d",
    "fd_core",
    "ties",
    "near_ties",
    "zero_z",
    "tiny_z",
    "graded",
    "singular_M",
    "sentinel",
    "one_active",
    "top_light",
    "top_heavy",
]


@pytest.mark.parametrize("K", [1, 4])
@pytest.mark.parametrize("name", CASES)
def test_matches_dense_eigh_float64(name, K):
    d, A, M = _case(name, 23, K, np.random.default_rng(zlib.crc32(f"{name}-{K}".encode())))
    _check(d, A, M)


@pytest.mark.parametrize("K", [1, 4])
def test_matches_dense_eigh_float32(K):
    d, A, M = _case("fd_core", 23, K, np.random.default_rng(1))
    _check(d, A, M, np.float32)


def test_zero_lowrank_term_is_a_permutation():
    d = np.random.default_rng(5).integers(-3, 3, size=23).astype(float)  # many ties
    res = _solve(jnp.asarray(d), jnp.zeros((23, 1)), jnp.eye(1))
    np.testing.assert_allclose(res.evals, np.sort(d))
    V = np.abs(np.asarray(res.evecs))
    np.testing.assert_allclose(V.sum(0), np.ones(23))
    np.testing.assert_allclose(d[V.argmax(0)], np.sort(d))


def test_vmap_equals_loop():
    rng = np.random.default_rng(3)
    cases = [_case(n, 23, 1, rng) for n in ("random", "fd_core", "ties", "zero_d")]
    d, A, M = (jnp.asarray(np.stack(x)) for x in zip(*cases, strict=True))
    batched = jax.jit(jax.vmap(secular.eigh_diag_plus_lowrank))(d, A, M)
    for i in range(len(cases)):
        one = _solve(d[i], A[i], M[i])
        np.testing.assert_allclose(batched.evals[i], one.evals, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(
            np.abs(batched.evecs[i].T @ one.evecs).diagonal(), 1.0, atol=1e-8
        )


def test_psd_factor_reconstructs():
    rng = np.random.default_rng(4)
    G = rng.normal(size=(4, 2))
    M = G @ G.T  # rank 2
    L = np.asarray(secular.psd_factor(jnp.asarray(M)))
    np.testing.assert_allclose(L @ L.T, M, atol=1e-12)


def test_nonfinite_input():
    d, A, M = (jnp.asarray(x) for x in _case("random", 23, 1, np.random.default_rng(6)))
    with pytest.raises(ValueError, match="d:"):
        secular.eigh_diag_plus_lowrank(d.at[3].set(jnp.nan), A, M)
    bad = _solve(d, A.at[2, 0].set(jnp.nan), M)
    assert not bool(bad.converged) and int(bad.status) == NONFINITE  # flagged under jit


def test_shape_errors():
    with pytest.raises(ValueError, match="A:"):
        secular.eigh_diag_plus_lowrank(jnp.zeros(3), jnp.zeros((4, 1)), jnp.eye(1))
    with pytest.raises(ValueError, match="M:"):
        secular.eigh_diag_plus_lowrank(jnp.zeros(3), jnp.zeros((3, 2)), jnp.eye(1))


@pytest.mark.parametrize("k,in_span", [(1, False), (3, False), (2, True)])
def test_swaps_into_sketch_truncate(k, in_span):
    """The FD truncation (Algorithm 1 lines 3-6) from the secular solver equals
    ``sketch.truncate`` (which calls ``jnp.linalg.eigh`` on the dense core): same weights, same
    discarded mass, same kept covariance ``U diag(mu) U^T``. ``in_span``: X inside span V, so
    the residual directions are degenerate and carry the negative sentinel."""
    from bandits_jax.linalg import sketch

    D, m = 12, 5
    rng = np.random.default_rng(k)
    V = np.linalg.qr(rng.normal(size=(D, m)))[0]
    mu = np.sort(rng.exponential(size=m))[::-1]
    mu[-2:] = 0.0  # early rounds: zero weights
    X = V @ rng.normal(size=(m, k)) if in_span else rng.normal(size=(D, k))
    G = rng.normal(size=(k, k))
    M = G @ G.T
    ext = sketch.extend(jnp.asarray(V), jnp.asarray(X))
    ref = sketch.truncate(jnp.asarray(mu), ext, jnp.asarray(M))

    # the one-line swap: diag(base + sentinel on invalid rows) + coords M coords^T
    A = ext.coords
    base = jnp.concatenate([jnp.asarray(mu), jnp.zeros((k,))])
    invalid = jnp.concatenate([jnp.zeros((m,), bool), ~ext.valid])
    sentinel = -(1.0 + jnp.sum(base) + jnp.trace(A @ jnp.asarray(M) @ A.T))
    evals, evecs, ok = _solve(base + jnp.where(invalid, sentinel, 0.0), A, jnp.asarray(M))
    assert bool(ok)
    sigma2 = jnp.maximum(evals[k - 1], 0.0)
    mu_new = jnp.maximum(evals[k:][::-1] - sigma2, 0.0)
    U = evecs[:, k:][:, ::-1]
    np.testing.assert_allclose(mu_new, ref.mu, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(sigma2, ref.sigma2, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(
        (U * mu_new) @ U.T, (ref.U * ref.mu) @ ref.U.T, rtol=1e-9, atol=1e-10
    )
