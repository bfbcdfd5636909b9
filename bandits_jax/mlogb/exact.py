"""Exact-fit MLogB: the regularised multinomial logistic MLE refitted every round (a reference).

The regret reference of the online learners: no online step, no sketch. The state keeps the
rounds ``(x_s, y_s)`` in a ring buffer of ``horizon`` rows; after round t the estimate minimises

    F_t(W) = sum_s l(W; x_s, y_s) + lam/2 ||W||_F^2        (l: eq. 1's log-loss)

by at most ``newton_steps`` damped Newton steps from ``W_{t-1}``
(:func:`~bandits_jax.mlogb.newton.minimise`) with ``H(W) = lam I + sum_s grad sigma(W x_s) kron
x_s x_s^T``: ``CONVERGED`` if then ``||g|| <= sqrt(eps) (1 + sum_s ||x_s||)``, else ``MAX_STEPS``;
``NONFINITE`` rejects. The scores are OFUL-MLogB's (eq. 16/19 with eq. 10's bonus) at
``H_t = H(W_t)``, the ellipsoidal form of OFUGLB's confidence set (Lee, Yun and Jun, NeurIPS 2024)
with a fixed radius ``beta`` and no norm bound S. A round costs O(t K^2 d^2 + (K d)^3): the rows
are visited in blocks of ``block_rows`` up to the last filled one.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from bandits_jax.checks import check_int, named
from bandits_jax.learner_base import Learner, accept, all_finite, fresh_state, no_failures
from bandits_jax.linalg import lapack
from bandits_jax.mlogb import learner, model, newton
from bandits_jax.mlogb.hparams import checked, grid_arrays, state_dtype

#: The default fixed radius ``beta`` (bonus ``sqrt(beta) ||x||_{H^{-1}}`` for K = 1).
DEFAULT_BETA = 0.1


class ExactHyperparams(NamedTuple):
    """Hyperparameters of :func:`exact` (leading axes, if any, are grid axes): the ridge
    ``lam > 0``, the fixed radius ``beta >= 0`` (0: greedy) and the (..., K) ``rewards``."""

    lam: jax.Array
    beta: jax.Array
    rewards: jax.Array


class ExactState(NamedTuple):
    """State of :func:`exact` (``D = K d``).

    Attributes:
      W: (K, d) the fit ``W_t``. H: (D, D) ``H(W_t)``. X, Y, filled: the ring buffer.
      grad_norm: ``||grad F_t(W_t)||`` after the last fit. t: completed updates (int32).
      hparams: :class:`ExactHyperparams`. info: :class:`UpdateInfo` (the fit's Newton steps).
    """

    W: jax.Array
    H: jax.Array
    X: jax.Array
    Y: jax.Array
    filled: jax.Array
    grad_norm: jax.Array
    t: jax.Array
    hparams: ExactHyperparams
    info: learner.UpdateInfo
    status: jax.Array
    num_failures: jax.Array


def exact_hyperparams(*, lam, beta=DEFAULT_BETA, rewards=None, dtype=None) -> ExactHyperparams:
    """Builds :class:`ExactHyperparams`, validated eagerly.

    Args:
      lam: finite ``> 0``; beta: finite ``>= 0``; scalars or arrays (broadcast to grid axes).
      rewards: (K,) or (..., K), ``>= 0`` (``None``: ``[1.]``). dtype: float32 or float64.
    """
    fn = "exact_hyperparams"
    dtype = named(fn, state_dtype, dtype)
    lam, beta = checked(fn, "lam", lam, dtype), checked(fn, "beta", beta, dtype, positive=False)
    return ExactHyperparams(**grid_arrays(fn, dtype, rewards, lam=lam, beta=beta))


class _Options(NamedTuple):
    K: int
    d: int
    T: int  # rows of the ring buffer
    B: int  # rows per block
    newton_steps: int
    max_halvings: int


def _block_rows(X, Y, filled, i, B):
    """Block ``i`` of B rows: ``(X_b, Y_b, weight_b)``. The last block starts at ``T - B``
    (clamped), so its rows before ``i B`` are weighted 0 (counted by the block before)."""
    T = X.shape[0]
    start = jnp.minimum(i * B, T - B)
    Xb = lax.dynamic_slice_in_dim(X, start, B)
    Yb = lax.dynamic_slice_in_dim(Y, start, B)
    rows = start + jnp.arange(B)
    wb = lax.dynamic_slice_in_dim(filled, start, B) & (rows >= i * B)
    return Xb, Yb, wb.astype(X.dtype)


def _objective(W, X, Y, filled, nblocks, lam, B):
    """``F(W)`` over the filled rows (blocks ``0..nblocks-1``)."""

    def body(i, acc):
        Xb, Yb, wb = _block_rows(X, Y, filled, i, B)
        return acc + jnp.sum(wb * newton.row_losses(W, Xb, Yb)[1])

    return lax.fori_loop(0, nblocks, body, 0.5 * lam * jnp.sum(W * W))


def _derivatives(W, X, Y, filled, nblocks, lam, B):
    """``(F, g (K, d), (H (D, D), sum_s ||x_s||))`` at W over the filled rows."""
    K, d = W.shape
    dtype = W.dtype

    def body(i, acc):
        F, g, H, xn = acc
        Xb, Yb, wb = _block_rows(X, Y, filled, i, B)
        loss, grad, _, s = newton.rows_loss_grad(W, Xb, Yb, wb)
        J = model.jacobian(s) * wb[:, None, None]
        Hb = jnp.einsum("bkl,bi,bj->kilj", J, Xb, Xb).reshape(K * d, K * d)
        return (F + loss, g + grad, H + Hb,
                xn + jnp.sum(wb * jnp.sqrt(jnp.sum(Xb * Xb, axis=1))))  # fmt: skip

    init = (0.5 * lam * jnp.sum(W * W), lam * W, lam * jnp.eye(K * d, dtype=dtype),
            jnp.zeros((), dtype))  # fmt: skip
    F, g, H, xn = lax.fori_loop(0, nblocks, body, init)
    return F, g, (0.5 * (H + H.T), xn)


def _fit(opt: _Options, W0, X, Y, filled, nblocks, lam) -> newton.Newton:
    """The damped Newton fit of ``F_t`` from ``W0`` (module docstring); ``aux = (H, xn)``."""
    args = (X, Y, filled, nblocks, lam, opt.B)

    def direction(it: newton.Newton) -> jax.Array:
        L = lapack.cholesky(it.aux[0])
        return lapack.cho_solve(L, it.g.reshape(-1)).reshape(it.g.shape)

    return newton.minimise(
        W0, lambda W: _derivatives(W, *args), lambda W: _objective(W, *args), direction,
        newton_steps=opt.newton_steps, max_halvings=opt.max_halvings,
    )  # fmt: skip


def _init(opt: _Options, hp: ExactHyperparams) -> ExactState:
    learner.check_hparams(hp, opt.K, ("lam", "beta"))
    dtype = hp.lam.dtype
    K, d, T = opt.K, opt.d, opt.T
    state = ExactState(
        W=jnp.zeros((K, d), dtype), H=hp.lam * jnp.eye(K * d, dtype=dtype),
        X=jnp.zeros((T, d), dtype), Y=jnp.zeros((T,), jnp.int32), filled=jnp.zeros((T,), bool),
        grad_norm=jnp.zeros((), dtype), t=jnp.zeros((), jnp.int32), hparams=hp,
        info=learner.empty_info(dtype), **no_failures(),
    )  # fmt: skip
    return fresh_state(state)


def _update(opt: _Options, state: ExactState, x: jax.Array, y: jax.Array) -> ExactState:
    """Writes round t into the buffer and refits (module docstring)."""
    learner.check_update_args(x, y, opt.K, opt.d)
    hp = state.hparams
    x = x.astype(state.W.dtype)
    y = jnp.asarray(y, jnp.int32)
    pos = state.t % opt.T
    X, Y, filled = newton.write_row(state.X, state.Y, state.filled, pos, x, y)
    nblocks = (jnp.minimum(state.t + 1, opt.T) + opt.B - 1) // opt.B
    it = _fit(opt, state.W, X, Y, filled, nblocks, hp.lam)
    (H, xn), gn = it.aux, newton.norm(it.g)
    status = newton.converged(gn, 1.0 + xn)
    ok = all_finite(x, (it.x, H, gn))
    info = learner.empty_info(state.W.dtype)._replace(newton_steps=it.steps, beta=hp.beta)
    # The buffers change in one row: a rejected round leaves it as it was.
    X, Y, filled = newton.write_row(state.X, state.Y, state.filled, pos, x, y, ok)
    new = state._replace(W=it.x, H=H, X=X, Y=Y, filled=filled, grad_norm=gn, t=state.t + 1,
                         info=info)  # fmt: skip
    return accept(state, new, ok, status, written=("X", "Y", "filled"))


def exact(
    *,
    num_outcomes: int,
    dim: int,
    horizon: int,
    newton_steps: int = 10,
    block_rows: int = 128,
    max_halvings: int = 30,
) -> Learner:
    """The exact-fit reference learner (module docstring).

    Args:
      horizon: rows of the buffer (the rounds the fit covers); the run's T.
      newton_steps, max_halvings: caps of each fit's Newton steps and step halvings.
      block_rows: rows per block of the passes over the buffer (at most ``horizon``).

    Returns:
      A :class:`~bandits_jax.learner_base.Learner` whose ``init`` takes :func:`exact_hyperparams`.
    """
    fn = "exact"
    K, d = named(fn, learner.check_static, num_outcomes, dim)
    T = named(fn, check_int, "horizon", horizon, 1)
    B = min(named(fn, check_int, "block_rows", block_rows, 1), T)
    N = named(fn, check_int, "newton_steps", newton_steps, 1)
    opt = _Options(K, d, T, B, N, named(fn, check_int, "max_halvings", max_halvings, 1))
    a_matrices = lambda state, actions: newton.a_matrices(lapack.cholesky(state.H), actions, K)  # noqa: E731
    parts = learner.optimistic(K, d, a_matrices, radius=lambda state: state.hparams.beta)
    return learner.from_score_parts(
        K, d, functools.partial(_init, opt), update=functools.partial(_update, opt),
        hyperparams=exact_hyperparams, **parts,
    )  # fmt: skip


__all__ = ["DEFAULT_BETA", "ExactHyperparams", "ExactState", "exact", "exact_hyperparams"]
