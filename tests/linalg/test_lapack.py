"""``bandits_jax.linalg.lapack``: the jax.numpy / jax.scipy results (against numpy), batched by
``vmap`` or leading axes, and on CPU never one LAPACK call on a batch of matrices: not in the
functions, not in any registry kind's vmapped rollout (the calls that deadlocked XLA's CPU
pool, ``docs/xla_cpu_hang.md``; ``tests/test_no_hang.py`` runs the rollouts themselves)."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax import envs, mlogb, sim
from bandits_jax.linalg import lapack
from bandits_jax.mlogb import recipes

_CALL = re.compile(r"stablehlo\.custom_call @(lapack_\w+)\(.*?:\s*\((.*?)\)\s*->", re.S)


def batched_lapack_calls(lowered_text: str) -> list[str]:
    """The LAPACK custom calls of a lowered program with an operand of rank > 2 (a batch)."""
    bad = []
    for target, operands in _CALL.findall(lowered_text):
        ranks = [len(t.split("x")) - 1 for t in re.findall(r"tensor<([^>]*)>", operands)]
        if max(ranks, default=0) > 2:
            bad.append(f"{target}({operands})")
    return bad


def _spd(rng, *shape):
    a = rng.normal(size=(*shape, shape[-1]))
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


def test_functions_match_numpy_batched_by_vmap_and_by_leading_axes():
    rng = np.random.default_rng(0)
    A, b = _spd(rng, 3, 2, 6), rng.normal(size=(3, 2, 6))
    tol = dict(rtol=1e-10, atol=1e-10)  # well-conditioned (eigenvalues >= 6), float64

    def parts(a, v):
        L = lapack.cholesky(a)
        return (L, lapack.eigh(a)[0], lapack.eigvalsh(a), lapack.solve(a, v),
                lapack.cho_solve(L, v), lapack.lower_solve(L, v), lapack.lower_solve_t(L, v),
                lapack.svd(a)[1], jnp.abs(jnp.diagonal(lapack.qr(a)[1])))  # fmt: skip

    got = jax.jit(jax.vmap(jax.vmap(parts)))(A, b)
    L = np.linalg.cholesky(A)
    ev = np.linalg.eigvalsh(A)

    def np_solve(M, v):
        return np.linalg.solve(M, v[..., None])[..., 0]

    R = np.linalg.qr(A)[1]
    want = (L, ev, ev, np_solve(A, b), np_solve(A, b), np_solve(L, b),
            np_solve(np.swapaxes(L, -1, -2), b), np.linalg.svd(A, compute_uv=False),
            np.abs(np.diagonal(R, 0, -2, -1)))  # fmt: skip
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, **tol)
    # Leading axes of a one-argument function are a batch, as under vmap.
    np.testing.assert_allclose(lapack.cholesky(jnp.asarray(A)), L, **tol)
    np.testing.assert_allclose(lapack.eigvalsh(jnp.asarray(A)), ev, **tol)
    with pytest.raises(ValueError, match=r"lapack\.cho_solve: a must be one matrix"):
        lapack.cho_solve(jnp.asarray(L), jnp.asarray(b))
    # An unbatched argument beside a batched one.
    x = jax.vmap(lapack.lower_solve, in_axes=(0, None))(jnp.asarray(L[0]), jnp.asarray(b[0, 0]))
    np.testing.assert_allclose(
        x, np.linalg.solve(L[0], np.broadcast_to(b[0, 0], (2, 6))[..., None])[..., 0], **tol
    )


def test_vmapped_functions_make_one_matrix_calls_on_cpu():
    A = jnp.broadcast_to(jnp.eye(4), (5, 3, 4, 4))
    plain = jax.jit(jax.vmap(jax.vmap(jnp.linalg.cholesky))).lower(A).as_text()
    assert batched_lapack_calls(plain)  # the check sees a batched call where there is one
    for fn in (lapack.cholesky, lapack.eigh, lapack.eigvalsh, lapack.svd, lapack.qr,
               lambda a: lapack.cho_solve(a, a[0]), lambda a: lapack.solve(a, a[0])):  # fmt: skip
        text = jax.jit(jax.vmap(jax.vmap(fn))).lower(A).as_text()
        assert "lapack_" in text and not batched_lapack_calls(text)


@pytest.mark.parametrize(
    "K,d",
    [
        pytest.param(1, 10, marks=pytest.mark.long),
        (4, 20),
        pytest.param(2, 65, marks=pytest.mark.long),
    ],
)
def test_no_kind_batches_a_lapack_call_in_a_vmapped_rollout(K, d):
    env = envs.synthetic_mlogb(num_outcomes=K, dim=d, S=4.0)
    keys = jax.random.split(jax.random.key(0), 8)
    env_states = jax.vmap(env.init)(keys)
    for kind in recipes.KINDS:
        if K > 1 and kind in recipes.K1_ONLY:
            continue
        rec = mlogb.tuned(kind, num_outcomes=K, dim=d, S=4.0, horizon=100)
        step = mlogb.interact(rec.learner, env)
        play = jax.vmap(
            lambda e, k, s=step, r=rec: sim.rollout(s, r.learner.init(r.hparams), e, k, 100)
        )
        text = jax.jit(play).lower(env_states, keys).as_text()
        assert not batched_lapack_calls(text), (kind, K, d, batched_lapack_calls(text)[:2])
