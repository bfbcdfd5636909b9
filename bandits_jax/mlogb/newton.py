"""Damped Newton with Armijo steps, and the ring buffer of rounds the MLogB fits refit.

The exact fit (:mod:`.exact`), buffered EOFD (:mod:`.eofd_buffer`) and logistic Thompson sampling
(:mod:`.logistic_ts`) minimise a strictly convex objective built from the log-loss of He et al.'s
eq. (1), ``l(W; x, y) = log(1 + sum_k exp(w_k^T x)) - w_y^T x`` (``w_0 = 0``), over the rounds
``(x_s, y_s)`` they keep in a ring buffer (slot ``t mod B``). :func:`minimise` is the one solver:
from ``x_0``, at most ``newton_steps`` steps ``x <- x - a p``, ``p = H(x)^{-1} g(x)``, with ``a``
the first of ``1, 1/2, ..., 2^(1 - max_halvings)`` meeting Armijo's
``F(x - a p) <= F(x) - ARMIJO a g^T p`` (none passes: x stays and the steps stop), ``a = 1``
untested once ``g^T p <= ROUNDING eps (1 + |F|)`` (a decrease below F's rounding); the steps stop
after a full step with ``||p|| <= sqrt(eps) (1 + ||x||)`` (the next one would be at rounding).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from bandits_jax.linalg import lapack
from bandits_jax.mlogb import model
from bandits_jax.status import CONVERGED, MAX_STEPS

ARMIJO = 1e-4  # sufficient-decrease constant of the line search
ROUNDING = 64.0  # eps multiples of 1 + |F| below which a full step is taken untested


class Newton(NamedTuple):
    """An iterate of :func:`minimise`: ``x``, ``F(x)``, ``g(x)``, what ``derivatives`` returned
    beside them (``aux``: e.g. the Hessian or its factor), the steps taken and whether they
    stopped."""

    x: jax.Array
    F: jax.Array
    g: jax.Array
    aux: Any
    steps: jax.Array
    done: jax.Array


def norm(a: jax.Array) -> jax.Array:
    """The Frobenius norm ``sqrt(sum a^2)``."""
    return jnp.sqrt(jnp.sum(a * a))


def minimise(
    x0: jax.Array,
    derivatives: Callable[[jax.Array], tuple[jax.Array, jax.Array, Any]],
    objective: Callable[[jax.Array], jax.Array],
    direction: Callable[[Newton], jax.Array],
    *,
    newton_steps: int,
    max_halvings: int,
) -> Newton:
    """Damped Newton from ``x0`` (module docstring). ``derivatives(x) -> (F, g, aux)``;
    ``objective(x) -> F`` (the line search's trials); ``direction(it) -> H^{-1} g`` at the
    iterate ``it``. Returns the last iterate (``steps``: the Newton steps taken)."""
    eps = jnp.finfo(x0.dtype).eps

    def body(it: Newton) -> Newton:
        p = direction(it)
        dec = jnp.sum(it.g * p)  # g^T H^{-1} g >= 0
        full = dec <= ROUNDING * eps * (1.0 + jnp.abs(it.F))

        def ls_cond(c):
            return (c[0] < max_halvings) & ~c[2]

        def ls_body(c):
            j, a, _ = c
            ok = full | (objective(it.x - a * p) <= it.F - ARMIJO * a * dec)
            return j + 1, jnp.where(ok, a, 0.5 * a), ok

        one = jnp.ones((), x0.dtype)
        _, a, ok = lax.while_loop(ls_cond, ls_body, (jnp.zeros((), jnp.int32), one, False))
        x = jnp.where(ok, it.x - a * p, it.x)
        small = (a == 1.0) & (norm(p) <= jnp.sqrt(eps) * (1.0 + norm(x)))
        return Newton(x, *derivatives(x), it.steps + 1, ~ok | small)

    start = Newton(x0, *derivatives(x0), jnp.zeros((), jnp.int32), jnp.zeros((), bool))
    return lax.while_loop(lambda it: (it.steps < newton_steps) & ~it.done, body, start)


def converged(size: jax.Array, scale: jax.Array) -> jax.Array:
    """``CONVERGED`` where ``size <= sqrt(eps) scale`` (a gradient at rounding), else
    ``MAX_STEPS`` (int32)."""
    eps = jnp.finfo(size.dtype).eps
    return jnp.where(size <= jnp.sqrt(eps) * scale, CONVERGED, MAX_STEPS).astype(jnp.int32)


def write_row(
    X: jax.Array,
    Y: jax.Array,
    filled: jax.Array,
    pos: jax.Array,
    x: jax.Array,
    y: jax.Array,
    ok: jax.Array | bool = True,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The ring buffer ``(X, Y, filled)`` with row ``pos`` set to ``(x, y)`` where ``ok``, else
    as it was (only that row changes: no tree-where over the whole buffer)."""
    return (X.at[pos].set(jnp.where(ok, x, X[pos])), Y.at[pos].set(jnp.where(ok, y, Y[pos])),
            filled.at[pos].set(ok | filled[pos]))  # fmt: skip


def log_losses(z: jax.Array, Y: jax.Array) -> jax.Array:
    """The log-losses (B,) of eq. (1) at logits z (B, K) of the outcomes Y (B,)."""
    z0 = jnp.concatenate([jnp.zeros_like(z[:, :1]), z], axis=1)  # outcome 0's logit is 0
    return jax.nn.logsumexp(z0, axis=1) - jnp.take_along_axis(z0, Y[:, None], axis=1)[:, 0]


def row_losses(W: jax.Array, X: jax.Array, Y: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(z, l)``: the logits (B, K) ``X W^T`` and the log-losses (B,) of eq. (1) of the rows."""
    z = X @ W.T
    return z, log_losses(z, Y)


def rows_loss_grad(
    W: jax.Array, X: jax.Array, Y: jax.Array, wts: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """``(sum_s w_s l_s, sum_s w_s grad l_s (K, d), z, sigma(z))`` over the rows, weights
    ``wts`` (0 on unfilled rows); ``grad l_s = (sigma(z_s) - e_{y_s}) x_s^T`` (``e_0 = 0``)."""
    z, loss = row_losses(W, X, Y)
    s = model.sigma(z)
    resid = (s - jax.nn.one_hot(Y - 1, W.shape[0], dtype=W.dtype)) * wts[:, None]
    return jnp.sum(wts * loss), resid.T @ X, z, s


def a_matrices(L: jax.Array, actions: jax.Array, K: int) -> jax.Array:
    """``(I_K kron x_n)^T (L L^T)^{-1} (I_K kron x_n)`` for every action (N, K, K), ``L`` the lower
    Cholesky factor of a (K d x K d) Hessian (the bonus's eq. 10/16 matrices)."""
    n, d = actions.shape
    Xk = jnp.einsum("ij,nd->idnj", jnp.eye(K, dtype=actions.dtype), actions)
    Yk = lapack.lower_solve(L, Xk.reshape(K * d, n * K)).reshape(K * d, n, K)
    return jnp.einsum("dni,dnj->nij", Yk, Yk)
