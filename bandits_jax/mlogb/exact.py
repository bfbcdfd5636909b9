"""Exact-fit MLogB: the regularised multinomial logistic MLE refitted every round (a reference).

The regret reference the online learners are judged against: no online step, no sketch. The
state holds every round ``(x_s, y_s)`` in a ring buffer of ``horizon`` rows. After appending
round t the estimate is the minimiser of

    F_t(W) = sum_s l(W; x_s, y_s) + lam/2 ||W||_F^2,  l = log(1 + sum_k exp(w_k^T x)) - w_y^T x

(``w_0 = 0``: eq. 1's log-loss), by at most ``newton_steps`` damped Newton steps warm-started at
``W_{t-1}`` (:func:`~bandits_jax.mlogb.newton.minimise`) with the Hessian
``H(W) = lam I + sum_s grad sigma(W x_s) kron x_s x_s^T``. The update is ``CONVERGED`` if then
``||g|| <= sqrt(eps) (1 + sum_s ||x_s||)``, else ``MAX_STEPS`` (the iterate kept); a non-finite
fit is rejected (``NONFINITE``, the previous state kept). With ``H_t = H(W_t)`` the scores are
OFUL-MLogB's (Zhang and Sugiyama 2023; He et al., eq. 16/19 with eq. 10's bonus): K = 1,
``w^T x + sqrt(beta) ||x||_{H_t^{-1}}``; K >= 2, ``r^T sigma(W_t x)`` plus eq. (10)'s two terms
with ``A(x) = (I_K kron x)^T H_t^{-1} (I_K kron x)``: the ellipsoidal form of OFUGLB's
confidence set (Lee, Yun and Jun, NeurIPS 2024: the exact MLE every round) with a fixed radius
``beta`` (default :data:`DEFAULT_BETA`) and no norm bound S (the ridge keeps the fit finite).

Cost, O(t) a round: a Newton step forms g and H over the t filled rows, O(t K^2 d^2), and factors
H, O((K d)^3); a line-search trial is O(t K d). Rows are visited in blocks of ``block_rows`` up
to the last filled one (under ``vmap``, the longest history of the batch). After ``horizon``
updates the oldest row is overwritten: the fit then covers the last ``horizon`` rounds.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from bandits_jax.checks import cast_checked, check_float, check_int, named
from bandits_jax.learner_base import Learner, accept, all_finite, fresh_state, no_failures
from bandits_jax.linalg import lapack
from bandits_jax.mlogb import bonus, model, newton
from bandits_jax.mlogb.hparams import check_rewards, state_dtype
from bandits_jax.mlogb.learner import (
    UpdateInfo,
    check_actions,
    check_hparams,
    check_static,
    check_update_args,
    empty_info,
    from_score_parts,
)

#: The default fixed radius ``beta`` (bonus ``sqrt(beta) ||x||_{H^{-1}}`` for K = 1).
DEFAULT_BETA = 0.1


class ExactHyperparams(NamedTuple):
    """Hyperparameters of :func:`exact` (leading axes, if any, are grid axes).

    Attributes:
      lam: ridge ``lam > 0`` of the fit (``H = lam I`` before any round).
      beta: the fixed radius ``beta >= 0`` (0: greedy on the exact fit).
      rewards: (..., K) outcome rewards ``r_1..r_K`` (``r_0 = 0``).
    """

    lam: jax.Array
    beta: jax.Array
    rewards: jax.Array


class ExactState(NamedTuple):
    """State of :func:`exact` (``D = K d``).

    Attributes:
      W: (K, d) the fit ``W_t``. H: (D, D) ``H(W_t)`` (module docstring).
      X: (horizon, d) the buffered actions; Y: (horizon,) int32 outcomes; filled: (horizon,) bool.
      grad_norm: ``||grad F_t(W_t)||`` after the last fit. t: completed updates (int32).
      hparams: :class:`ExactHyperparams`. info: :class:`UpdateInfo` (``newton_steps``: Newton
        iterations of the last fit; ``beta``: the radius used at selection).
      status, num_failures: the last update's status and the rejected updates so far.
    """

    W: jax.Array
    H: jax.Array
    X: jax.Array
    Y: jax.Array
    filled: jax.Array
    grad_norm: jax.Array
    t: jax.Array
    hparams: ExactHyperparams
    info: UpdateInfo
    status: jax.Array
    num_failures: jax.Array


def exact_hyperparams(*, lam, beta=DEFAULT_BETA, rewards=None, dtype=None) -> ExactHyperparams:
    """Builds :class:`ExactHyperparams`, validated eagerly.

    Args:
      lam: finite ``> 0``; beta: finite ``>= 0``; scalars or arrays (broadcast to grid axes).
      rewards: (K,) or (..., K) non-negative rewards; ``None`` means ``[1.]`` (K = 1).
      dtype: float32 or float64 (default: JAX's default float).

    Raises:
      ValueError: naming the function and the offending argument.
    """
    fn = "exact_hyperparams"
    dtype = named(fn, state_dtype, dtype)
    lam_a = named(fn, check_float, "lam", lam)
    beta_a = named(fn, check_float, "beta", beta, low_open=False)
    r = named(fn, check_rewards, rewards)
    cast = {
        name: cast_checked(fn, name, a, dtype, positive)
        for name, a, positive in (
            ("lam", lam_a, True),
            ("beta", beta_a, False),
            ("rewards", r, False),
        )
    }
    try:
        batch = np.broadcast_shapes(lam_a.shape, beta_a.shape, r.shape[:-1])
    except ValueError:
        raise ValueError(
            f"{fn}: lam, beta and rewards[..., 0] must broadcast, got shapes "
            f"{lam_a.shape}, {beta_a.shape}, {r.shape[:-1]}"
        ) from None
    return ExactHyperparams(
        lam=jnp.asarray(np.broadcast_to(cast["lam"], batch), dtype),
        beta=jnp.asarray(np.broadcast_to(cast["beta"], batch), dtype),
        rewards=jnp.asarray(np.broadcast_to(cast["rewards"], batch + r.shape[-1:]), dtype),
    )


class _Options(NamedTuple):
    K: int
    d: int
    T: int  # rows of the ring buffer
    B: int  # rows per block
    newton_steps: int
    max_halvings: int


# --- the fit ---------------------------------------------------------------------------------


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


# --- the learner's steps ---------------------------------------------------------------------


def _init(opt: _Options, hp: ExactHyperparams) -> ExactState:
    check_hparams(hp, opt.K, ("lam", "beta"))
    dtype = hp.lam.dtype
    K, d, T = opt.K, opt.d, opt.T
    state = ExactState(
        W=jnp.zeros((K, d), dtype), H=hp.lam * jnp.eye(K * d, dtype=dtype),
        X=jnp.zeros((T, d), dtype), Y=jnp.zeros((T,), jnp.int32), filled=jnp.zeros((T,), bool),
        grad_norm=jnp.zeros((), dtype), t=jnp.zeros((), jnp.int32), hparams=hp,
        info=empty_info(dtype), **no_failures(),
    )  # fmt: skip
    return fresh_state(state)


def _score_parts(opt: _Options, state: ExactState, actions: jax.Array):
    """OFUL-MLogB's ``(estimate, bonus)`` with ``A(x)`` at ``H_t`` (eq. 10/16)."""
    check_actions(actions, opt.d)
    actions = actions.astype(state.W.dtype)
    hp = state.hparams
    A = newton.a_matrices(lapack.cholesky(state.H), actions, opt.K)
    return bonus.parts(state.W, actions, A, hp.rewards, hp.beta)


def _update(opt: _Options, state: ExactState, x: jax.Array, y: jax.Array) -> ExactState:
    """Writes round t into the buffer and refits (module docstring)."""
    check_update_args(x, y, opt.K, opt.d)
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
    info = empty_info(state.W.dtype)._replace(newton_steps=it.steps, beta=hp.beta)
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
      num_outcomes: K >= 1; dim: d.
      horizon: rows of the buffer (the rounds the fit covers); the run's T.
      newton_steps: cap of the Newton steps of each round's fit (warm-started; stops early once
        converged).
      block_rows: rows per block of the passes over the buffer (at most ``horizon``).
      max_halvings: cap of the line search's step halvings.

    Returns:
      An :class:`~bandits_jax.learner_base.Learner` whose ``init`` takes
      :func:`exact_hyperparams` (its ``hyperparams``; a grid: ``jax.vmap(learner.init)``).
      ``score_parts`` returns ``(estimate, bonus)`` of OFUL-MLogB's form; ``scores`` the
      optimistic reward (``sigmoid`` of the index for K = 1).

    Raises:
      ValueError: naming ``exact`` and the offending argument.
    """
    fn = "exact"
    K, d = named(fn, check_static, num_outcomes, dim)
    T = named(fn, check_int, "horizon", horizon, 1)
    B = min(named(fn, check_int, "block_rows", block_rows, 1), T)
    N = named(fn, check_int, "newton_steps", newton_steps, 1)
    opt = _Options(K, d, T, B, N, named(fn, check_int, "max_halvings", max_halvings, 1))
    return from_score_parts(
        K, d, functools.partial(_init, opt), functools.partial(_score_parts, opt),
        functools.partial(_update, opt), scores=functools.partial(bonus.optimistic_reward, K),
        hyperparams=exact_hyperparams,
    )  # fmt: skip


__all__ = [
    "DEFAULT_BETA",
    "ExactHyperparams",
    "ExactState",
    "exact",
    "exact_hyperparams",
]
