"""Exact-fit MLogB: the regularised multinomial logistic MLE refitted every round (a reference).

The regret reference the online learners are judged against: no online step, no sketch. The
state holds every round ``(x_s, y_s)`` in a buffer of ``horizon`` rows with a mask of the rows
filled. After appending round t the estimate is the minimiser of

    F_t(W) = sum_s l(W; x_s, y_s) + lam/2 ||W||_F^2,  l = log(1 + sum_k exp(w_k^T x)) - w_y^T x

(``w_0 = 0``: eq. 1's log-loss), by at most ``newton_steps`` damped Newton steps warm-started at
``W_{t-1}``: ``p = H(W)^{-1} g``, ``g = grad F_t(W)``,
``H(W) = lam I + sum_s grad sigma(W x_s) kron x_s x_s^T``, ``W <- W - a p`` with the first ``a``
in ``1, 1/2, ..., 2^(1 - max_halvings)`` meeting Armijo's ``F(W - a p) <= F(W) - 1e-4 a g^T p``
(F decreases; no ``a`` passes: W stays, the steps stop), and ``a = 1`` untested once
``g^T p <= 64 eps (1 + |F|)`` (a decrease below F's rounding). The steps stop early after a full
step ``||p||_F <= sqrt(eps) (1 + ||W||_F)`` (the next one would be at rounding: quadratic
convergence). The update is ``CONVERGED`` if then ``||g|| <= sqrt(eps) c_t``,
``c_t = 1 + sum_s ||x_s||``, else ``MAX_STEPS`` (not converged, the iterate kept); a non-finite
fit is rejected (``NONFINITE``, the previous state kept). With ``H_t = H(W_t)`` the scores are
OFUL-MLogB's (Zhang and Sugiyama 2023; He et al., eq. 16/19 with eq. 10's bonus): K = 1,
``w^T x + sqrt(beta) ||x||_{H_t^{-1}}``; K >= 2, ``r^T sigma(W_t x)`` plus eq. (10)'s two terms
with ``A(x) = (I_K kron x)^T H_t^{-1} (I_K kron x)``. That is the ellipsoidal form of OFUGLB's
confidence set (Lee, Yun and Jun, NeurIPS 2024: the exact MLE every round) with a fixed radius
``beta``, a tunable constant like LinUCB's ``alpha^2`` (default :data:`DEFAULT_BETA`), and no
norm bound S (the ridge keeps the fit finite).

Cost, honestly O(t): a Newton step forms g and H over the t filled rows, O(t K^2 d^2), and factors
H, O((K d)^3); a line-search trial is O(t K d): a run of T rounds is O(newton_steps T^2 K^2 d^2).
Rows are visited in blocks of ``block_rows`` up to the last filled one (under ``vmap``, the
longest history of the batch). After ``horizon`` updates the oldest row is overwritten: the fit
then covers the last ``horizon`` rounds (``state.t > horizon`` tells).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from bandits_jax import checks
from bandits_jax.checks import cast_checked, check_float, check_int, named
from bandits_jax.learner_base import all_finite, fresh_state, status_of
from bandits_jax.linalg import lapack
from bandits_jax.mlogb import bonus, model
from bandits_jax.mlogb.hparams import check_rewards, state_dtype
from bandits_jax.mlogb.learner import (
    MLogBFunctions,
    UpdateInfo,
    check_actions,
    check_hparams,
    check_static,
    check_update_args,
    empty_info,
    from_score_parts,
    status_property,
)
from bandits_jax.status import CONVERGED, MAX_STEPS

#: The default fixed radius ``beta`` (bonus ``sqrt(beta) ||x||_{H^{-1}}`` for K = 1).
DEFAULT_BETA = 0.1
ARMIJO = 1e-4  # sufficient-decrease constant of the line search
ROUNDING = 64.0  # eps multiples of 1 + |F| below which a full step is taken untested


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
      grad_norm: ``||grad F_t(W_t)||`` after the last fit.
      rho: 0 (no sketch). t: completed updates (int32).
      hparams: :class:`ExactHyperparams`. info: :class:`UpdateInfo` (``newton_steps``: Newton
        iterations of the last fit; ``beta``: the radius used at selection).
    """

    W: jax.Array
    H: jax.Array
    X: jax.Array
    Y: jax.Array
    filled: jax.Array
    grad_norm: jax.Array
    rho: jax.Array
    t: jax.Array
    hparams: ExactHyperparams
    info: UpdateInfo

    status = status_property  # read-only: info.status


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


def _a_from_factor(L: jax.Array, actions: jax.Array, K: int) -> jax.Array:
    """``(I_K kron x_n)^T (L L^T)^{-1} (I_K kron x_n)`` for every action (N, K, K), ``L`` the lower
    Cholesky factor of a (K d x K d) Hessian (the bonus's eq. 10/16 matrices)."""
    n, d = actions.shape
    Xk = jnp.einsum("ij,nd->idnj", jnp.eye(K, dtype=actions.dtype), actions)
    Yk = lapack.lower_solve(L, Xk.reshape(K * d, n * K)).reshape(K * d, n, K)
    return jnp.einsum("dni,dnj->nij", Yk, Yk)


def _write_row(X, Y, filled, pos, x, y, ok=True):
    """The ring buffer ``(X, Y, filled)`` with row ``pos`` set to ``(x, y)`` where ``ok``, else
    as it was (only that row changes: no tree-where over the whole buffer)."""
    return (X.at[pos].set(jnp.where(ok, x, X[pos])), Y.at[pos].set(jnp.where(ok, y, Y[pos])),
            filled.at[pos].set(ok | filled[pos]))  # fmt: skip


def _row_losses(W, Xb, Yb):
    """``(z, l)``: logits (B, K) and the log-losses (B,) of the rows."""
    z = Xb @ W.T
    z0 = jnp.concatenate([jnp.zeros_like(z[:, :1]), z], axis=1)  # outcome 0's logit is 0
    zy = jnp.take_along_axis(z0, Yb[:, None], axis=1)[:, 0]
    return z, jax.nn.logsumexp(z0, axis=1) - zy


def _objective(W, X, Y, filled, nblocks, lam, B):
    """``F(W)`` over the filled rows (blocks ``0..nblocks-1``)."""

    def body(i, acc):
        Xb, Yb, wb = _block_rows(X, Y, filled, i, B)
        return acc + jnp.sum(wb * _row_losses(W, Xb, Yb)[1])

    return lax.fori_loop(0, nblocks, body, 0.5 * lam * jnp.sum(W * W))


def _derivatives(W, X, Y, filled, nblocks, lam, B):
    """``(F, g (K, d), H (D, D), sum_s ||x_s||)`` at W over the filled rows."""
    K, d = W.shape
    dtype = W.dtype

    def body(i, acc):
        F, g, H, xn = acc
        Xb, Yb, wb = _block_rows(X, Y, filled, i, B)
        z, loss = _row_losses(W, Xb, Yb)
        s = model.sigma(z)
        resid = (s - jax.nn.one_hot(Yb - 1, K, dtype=dtype)) * wb[:, None]  # y = 0: zero row
        J = model.jacobian(s) * wb[:, None, None]
        Hb = jnp.einsum("bkl,bi,bj->kilj", J, Xb, Xb).reshape(K * d, K * d)
        return (
            F + jnp.sum(wb * loss),
            g + resid.T @ Xb,
            H + Hb,
            xn + jnp.sum(wb * jnp.sqrt(jnp.sum(Xb * Xb, axis=1))),
        )

    init = (
        0.5 * lam * jnp.sum(W * W),
        lam * W,
        lam * jnp.eye(K * d, dtype=dtype),
        jnp.zeros((), dtype),
    )
    F, g, H, xn = lax.fori_loop(0, nblocks, body, init)
    return F, g, 0.5 * (H + H.T), xn


class _Fit(NamedTuple):
    W: jax.Array
    F: jax.Array
    g: jax.Array
    H: jax.Array
    steps: jax.Array
    done: jax.Array


def _fit(W0, X, Y, filled, nblocks, lam, *, B, newton_steps, max_halvings):
    """Damped Newton from ``W0`` (module docstring): ``(W, H, ||g||, steps, status)``."""
    K, d = W0.shape
    eps = jnp.finfo(W0.dtype).eps
    F0, g0, H0, xn = _derivatives(W0, X, Y, filled, nblocks, lam, B)
    scale = 1.0 + xn

    def norm(a):
        return jnp.sqrt(jnp.sum(a * a))

    def cond(f: _Fit):
        return (f.steps < newton_steps) & ~f.done

    def body(f: _Fit) -> _Fit:
        L = lapack.cholesky(f.H)
        p = lapack.cho_solve(L, f.g.reshape(-1)).reshape(K, d)
        dec = jnp.sum(f.g * p)  # g^T H^{-1} g >= 0
        full = dec <= ROUNDING * eps * (1.0 + jnp.abs(f.F))

        def ls_cond(c):
            j, _, ok = c
            return (j < max_halvings) & ~ok

        def ls_body(c):
            j, a, _ = c
            ok = full | (_objective(f.W - a * p, X, Y, filled, nblocks, lam, B)
                         <= f.F - ARMIJO * a * dec)  # fmt: skip
            return j + 1, jnp.where(ok, a, 0.5 * a), ok

        one = jnp.ones((), W0.dtype)
        _, a, ok = lax.while_loop(ls_cond, ls_body, (jnp.zeros((), jnp.int32), one, False))
        W = jnp.where(ok, f.W - a * p, f.W)
        F, g, H, _ = _derivatives(W, X, Y, filled, nblocks, lam, B)
        # Stop on a negligible full step, or on none acceptable (W kept; F, g, H those at W).
        small = (a == 1.0) & (norm(p) <= jnp.sqrt(eps) * (1.0 + norm(W)))
        return _Fit(W, F, g, H, f.steps + 1, ~ok | small)

    start = _Fit(W0, F0, g0, H0, jnp.zeros((), jnp.int32), jnp.zeros((), bool))
    f = lax.while_loop(cond, body, start)
    gn = norm(f.g)
    status = jnp.where(gn <= jnp.sqrt(eps) * scale, CONVERGED, MAX_STEPS).astype(jnp.int32)
    return f.W, f.H, gn, f.steps, status


# --- the learner -----------------------------------------------------------------------------


def exact(
    *,
    num_outcomes: int,
    dim: int,
    horizon: int,
    newton_steps: int = 10,
    block_rows: int = 128,
    max_halvings: int = 30,
) -> MLogBFunctions:
    """The exact-fit reference learner (module docstring).

    Args:
      num_outcomes: K >= 1; dim: d.
      horizon: rows of the buffer (the rounds the fit covers); the run's T.
      newton_steps: cap of the Newton steps of each round's fit (warm-started; stops early once
        converged). 10: on digits at ``lam = 1e-4`` (T = 300) the fits reach rounding within
        12 steps; a cap of 5 leaves 11% of the rounds (the first ones) ``MAX_STEPS``, 10 none,
        at the same regret.
      block_rows: rows per block of the passes over the buffer (at most ``horizon``).
      max_halvings: cap of the line search's step halvings.

    Returns:
      An :class:`~bandits_jax.mlogb.learner.MLogBFunctions` whose ``init`` takes
      :func:`exact_hyperparams` (its ``hyperparams``; a grid: ``jax.vmap(learner.init)``).
      ``score_parts`` returns ``(estimate, bonus)`` of OFUL-MLogB's form; ``scores`` the
      optimistic reward (``sigmoid`` of the index for K = 1).

    Raises:
      ValueError: naming ``exact`` and the offending argument.
    """
    fn = "exact"
    K, d = named(fn, check_static, num_outcomes, dim)
    T = named(fn, check_int, "horizon", horizon, 1)
    N = named(fn, check_int, "newton_steps", newton_steps, 1)
    B = min(named(fn, check_int, "block_rows", block_rows, 1), T)
    M = named(fn, check_int, "max_halvings", max_halvings, 1)
    D = K * d

    def init(hp: ExactHyperparams) -> ExactState:
        check_hparams(hp, K, ("lam", "beta"))
        dtype = hp.lam.dtype
        state = ExactState(
            W=jnp.zeros((K, d), dtype),
            H=hp.lam * jnp.eye(D, dtype=dtype),
            X=jnp.zeros((T, d), dtype),
            Y=jnp.zeros((T,), jnp.int32),
            filled=jnp.zeros((T,), bool),
            grad_norm=jnp.zeros((), dtype),
            rho=jnp.zeros((), dtype),
            t=jnp.zeros((), jnp.int32),
            hparams=hp,
            info=empty_info(dtype),
        )
        return fresh_state(state)

    def score_parts(state: ExactState, actions: jax.Array) -> tuple[jax.Array, jax.Array]:
        check_actions(actions, d)
        actions = actions.astype(state.W.dtype)
        hp = state.hparams
        A = _a_from_factor(lapack.cholesky(state.H), actions, K)  # eq. 10/16 at H_t
        return bonus.parts(state.W, actions, A, hp.rewards, hp.beta)

    def update(state: ExactState, x: jax.Array, y: jax.Array) -> ExactState:
        check_update_args(x, y, K, d)
        hp = state.hparams
        x = x.astype(state.W.dtype)
        y = jnp.asarray(y, jnp.int32)
        pos = state.t % T
        X, Y, filled = _write_row(state.X, state.Y, state.filled, pos, x, y)
        nblocks = (jnp.minimum(state.t + 1, T) + B - 1) // B
        W, H, gn, steps, status = _fit(
            state.W, X, Y, filled, nblocks, hp.lam, B=B, newton_steps=N, max_halvings=M
        )
        ok = all_finite(x, (W, H, gn))
        W, H, gn = checks.guard(ok, (W, H, gn), (state.W, state.H, state.grad_norm))
        info = UpdateInfo(
            projected=jnp.zeros((), bool),
            nu=jnp.zeros((), state.W.dtype),
            newton_steps=steps,
            status=status_of(ok, status),
            beta=hp.beta,
        )
        # The buffers change in one row: a rejected round leaves it as it was.
        X, Y, filled = _write_row(state.X, state.Y, state.filled, pos, x, y, ok)
        return ExactState(W=W, H=H, X=X, Y=Y, filled=filled, grad_norm=gn, rho=state.rho,
                          t=jnp.where(ok, state.t + 1, state.t), hparams=hp,
                          info=info)  # fmt: skip

    scores = functools.partial(bonus.optimistic_reward, K)
    return from_score_parts(
        K, d, init, score_parts, update, scores=scores, hyperparams=exact_hyperparams
    )


__all__ = [
    "DEFAULT_BETA",
    "ExactHyperparams",
    "ExactState",
    "exact",
    "exact_hyperparams",
]
