"""``bandits_jax.linalg.lapack``: the jax.numpy / jax.scipy results (against numpy), batched by
``vmap`` or leading axes, and on CPU never a LAPACK call that jaxlib would split over XLA's thread
pool: not in the functions, not in any registry kind's vmapped rollout (the calls that deadlocked
XLA's CPU pool, ``docs/xla_cpu_hang.md``; ``tests/test_no_hang.py`` runs the rollouts themselves).
A batch whose work jaxlib runs in one piece stays one call."""

from __future__ import annotations

import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax import envs, mlogb, sim
from bandits_jax.linalg import lapack
from bandits_jax.mlogb import recipes

_CALL = re.compile(r"stablehlo\.custom_call @lapack_[sdcz](\w+)_ffi\(.*?:\s*\((.*?)\)\s*->", re.S)
# jaxlib 0.10.2's FLOP estimates (jaxlib/cpu/lapack_kernels.cc, real dtypes) from the operands'
# matrix dimensions (trsm: of the right-hand side, its second operand); it splits a batch over
# the thread pool where batch x estimate >= 2e5 (GetLapackBatchChunkSize).
_ESTIMATE = {
    "potrf": lambda m, n: n**3 // 3,
    "syevd": lambda m, n: 5 * n**3,
    "getrf": lambda m, n: m * n * min(m, n),
    "trsm": lambda m, n: m * n * m,
    "gesdd": lambda m, n: 10 * m * n * min(m, n),
    "geqrf": lambda m, n: 2 * m * n * min(m, n) - 2 * min(m, n) ** 3 // 3,
    "orgqr": lambda m, n: 4 * m * n * n - 2 * n * n * (m + n) + 4 * n**3 // 3,
}


def lapack_calls(lowered_text: str) -> list[tuple[str, int, int]]:
    """``(routine, batch, batch x jaxlib's estimate)`` of each LAPACK call of a lowered program."""
    calls = []
    for routine, operands in _CALL.findall(lowered_text):
        shapes = [[int(x) for x in t.split("x")[:-1]] for t in re.findall(r"tensor<([^>]*)>",
                                                                           operands)]  # fmt: skip
        shape = shapes[1] if routine == "trsm" else shapes[0]
        batch = math.prod(shape[:-2])
        calls.append((routine, batch, batch * _ESTIMATE[routine](*shape[-2:])))
    return calls


def split_calls(lowered_text: str) -> list[tuple[str, int, int]]:
    """The calls jaxlib would split over the pool: a batch of more than one, work >= 2e5."""
    return [c for c in lapack_calls(lowered_text) if c[1] > 1 and c[2] >= 200_000]


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
                jnp.abs(jnp.diagonal(lapack.qr(a)[1])))  # fmt: skip

    got = jax.jit(jax.vmap(jax.vmap(parts)))(A, b)
    L = np.linalg.cholesky(A)
    ev = np.linalg.eigvalsh(A)

    def np_solve(M, v):
        return np.linalg.solve(M, v[..., None])[..., 0]

    R = np.linalg.qr(A)[1]
    want = (L, ev, ev, np_solve(A, b), np_solve(A, b), np_solve(L, b),
            np_solve(np.swapaxes(L, -1, -2), b), np.abs(np.diagonal(R, 0, -2, -1)))  # fmt: skip
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


def test_vmapped_functions_keep_small_batches_whole_and_split_large_ones_on_cpu():
    small, large = (
        jnp.broadcast_to(jnp.eye(4), (5, 3, 4, 4)),
        jnp.broadcast_to(jnp.eye(24), (9, 3, 24, 24)),
    )
    plain = jax.jit(jax.vmap(jax.vmap(jnp.linalg.eigh))).lower(large).as_text()
    assert split_calls(plain)  # the check sees a call that jaxlib splits where there is one
    for fn in (lapack.cholesky, lapack.eigh, lapack.eigvalsh, lapack.qr,
               lambda a: lapack.cho_solve(a, a[0]), lambda a: lapack.solve(a, a[0]),
               lambda a: lapack.lower_solve_t(a, a)):  # fmt: skip
        calls = lapack_calls(jax.jit(jax.vmap(jax.vmap(fn))).lower(small).as_text())
        assert calls and {b for _, b, _ in calls} == {15}, calls  # one call on the whole batch
        text = jax.jit(jax.vmap(jax.vmap(fn))).lower(large).as_text()
        assert lapack_calls(text) and not split_calls(text), split_calls(text)
    # At the boundary (20 x 20 Cholesky: jaxlib's estimate 2666 a matrix): 75 matrices are one
    # call; 76 are calls of 38, 151 of 51 (twice, in a loop) and 49, their work below 2e5.
    for b, want in ((75, {75}), (76, {38}), (151, {51, 49})):
        a = jnp.broadcast_to(jnp.eye(20), (b, 20, 20))
        calls = lapack_calls(jax.jit(jax.vmap(lapack.cholesky)).lower(a).as_text())
        assert {c[1] for c in calls} == want, calls


@pytest.mark.parametrize(
    "K,d",
    [
        pytest.param(1, 10, marks=pytest.mark.long),
        (4, 20),
        pytest.param(2, 65, marks=pytest.mark.long),
    ],
)
def test_no_kind_makes_a_lapack_call_that_jaxlib_splits_in_a_vmapped_rollout(K, d):
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
        assert not split_calls(text), (kind, K, d, split_calls(text)[:2])
