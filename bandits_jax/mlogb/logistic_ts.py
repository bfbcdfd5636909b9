"""Logistic Thompson sampling with an online Laplace posterior (a standard baseline).

Chapelle and Li (2011), Algorithm 3, as Open Bandit Pipeline's ``LogisticTS``, for the model of
He et al.'s eq. (1) (``D = K d``). The posterior after round t-1 is ``N(W_t, P_t^{-1})``,
``P_1 = lam I``; round t's Laplace step is

    W_{t+1} = argmin_W  1/2 vec(W - W_t)^T P_t vec(W - W_t) + l(W; x_t, y_t),
    P_{t+1} = P_t + grad sigma(z*) kron x_t x_t^T,   z* = W_{t+1} x_t,

with the whole ``P_t`` (``covariance="full"``) or its diagonal (``"diagonal"``). With
``Sigma = P_t^{-1}``, ``B = I_K kron x``, ``C = B^T Sigma B``, ``vec(W_{t+1}) = vec(W_t) -
Sigma B u`` for the minimiser ``u`` of ``1/2 u^T C u + l(W_t x - C u)`` (:func:`map_step`:
``CONVERGED`` when its residual is at rounding, else ``MAX_STEPS``). The draw
``W~_t = W_t + v F_t xi_t`` (``F_t F_t^T = P_t^{-1}``) uses :mod:`.lin_ts`'s normals; the score
``r^T sigma(W~_t x)`` is split as ``(r^T sigma(W_t x), r^T sigma(W~_t x) - r^T sigma(W_t x))``.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from bandits_jax.checks import check_int, named
from bandits_jax.learner_base import Learner, accept, all_finite, fresh_state, no_failures
from bandits_jax.linalg import lapack
from bandits_jax.mlogb import learner, model, newton
from bandits_jax.mlogb.lin_ts import standard_normals, ts_fields

__all__ = [
    "COVARIANCES",
    "LogisticTSHyperparams",
    "LogisticTSState",
    "logistic_ts",
    "logistic_ts_hyperparams",
]

COVARIANCES = ("diagonal", "full")


class LogisticTSHyperparams(NamedTuple):
    """Hyperparameters of :func:`logistic_ts` (leading axes, if any, are grid axes): the prior
    precision ``lam > 0``, the posterior scale ``v >= 0``, the uint32 ``seed`` and the (..., K)
    ``rewards`` ``r_1..r_K`` (``r_0 = 0``)."""

    lam: jax.Array
    v: jax.Array
    seed: jax.Array
    rewards: jax.Array


class LogisticTSState(NamedTuple):
    """State of :func:`logistic_ts` (``D = K d``).

    Attributes:
      W: (K, d) the posterior mean ``W_t``. prec: ``q_t`` (K, d) or ``P_t`` (D, D).
      factor: ``q_t^{-1/2}`` (K, d) or the lower Cholesky factor of ``P_t`` (D, D).
      sample: (K, d) this round's draw ``W~_t``. key: raw PRNG key data ``k_t``.
      t: completed updates (int32). hparams: :class:`LogisticTSHyperparams`.
      info: :class:`UpdateInfo` (``newton_steps``: the MAP step's; ``beta`` holds ``v``).
    """

    W: jax.Array
    prec: jax.Array
    factor: jax.Array
    sample: jax.Array
    key: jax.Array
    t: jax.Array
    hparams: LogisticTSHyperparams
    info: learner.UpdateInfo
    status: jax.Array
    num_failures: jax.Array


def logistic_ts_hyperparams(
    *, lam, v=1.0, seed=0, rewards=None, dtype=None
) -> LogisticTSHyperparams:
    """Builds :class:`LogisticTSHyperparams`, validated eagerly.

    Args:
      lam: finite ``> 0``; v: finite ``>= 0``; seed: an int in ``[0, 2**32)``; scalars or arrays
        (broadcast to grid axes). rewards: (K,) or (..., K), ``>= 0`` (``None``: ``[1.]``).
      dtype: float32 or float64 (default: JAX's).
    """
    return LogisticTSHyperparams(
        **ts_fields("logistic_ts_hyperparams", lam, v, seed, rewards, dtype)
    )


def map_step(
    a: jax.Array, C: jax.Array, y: jax.Array, *, newton_steps: int, max_halvings: int
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The minimiser ``u`` of ``psi(u) = 1/2 u^T C u + l(a - C u)`` by damped Newton (module
    docstring): ``(u, steps, status)``."""
    K = a.shape[0]
    e_y = model.onehot(y, K, a.dtype)

    def psi(u):
        return 0.5 * u @ (C @ u) + newton.log_losses((a - C @ u)[None], y[None])[0]

    def derivatives(u):
        s = model.sigma(a - C @ u)
        r = u - (s - e_y)
        return psi(u), C @ r, (r, model.jacobian(s))

    def direction(it: newton.Newton) -> jax.Array:
        r, H = it.aux
        return lapack.solve(jnp.eye(K, dtype=a.dtype) + H @ C, r)

    it = newton.minimise(
        jnp.zeros((K,), a.dtype), derivatives, psi, direction,
        newton_steps=newton_steps, max_halvings=max_halvings,
    )  # fmt: skip
    return it.x, it.steps, newton.converged(newton.norm(it.aux[0]), 1.0 + newton.norm(it.x))


class _Options(NamedTuple):
    K: int
    d: int
    full: bool  # covariance="full"
    newton_steps: int
    max_halvings: int


def _draw(opt: _Options, W, factor, v, key) -> jax.Array:
    """``W + v F xi`` (module docstring)."""
    xi = standard_normals(key, (opt.K, opt.d), W.dtype)
    if opt.full:
        return W + v * lapack.lower_solve_t(factor, xi.reshape(-1)).reshape(W.shape)
    return W + v * (factor * xi)


def _init(opt: _Options, hp: LogisticTSHyperparams) -> LogisticTSState:
    learner.check_hparams(hp, opt.K, ("lam", "v", "seed"))
    dtype = hp.lam.dtype
    K, d, D = opt.K, opt.d, opt.K * opt.d
    if opt.full:
        prec = hp.lam * jnp.eye(D, dtype=dtype)
        factor = jnp.sqrt(hp.lam) * jnp.eye(D, dtype=dtype)
    else:
        prec = jnp.full((K, d), hp.lam, dtype)
        factor = jnp.full((K, d), 1.0 / jnp.sqrt(hp.lam), dtype)
    key = jax.random.key_data(jax.random.key(hp.seed))
    W = jnp.zeros((K, d), dtype)
    state = LogisticTSState(
        W=W, prec=prec, factor=factor, sample=_draw(opt, W, factor, hp.v, key), key=key,
        t=jnp.zeros((), jnp.int32), hparams=hp, info=learner.empty_info(dtype), **no_failures(),
    )  # fmt: skip
    return fresh_state(state)


def _score_parts(opt: _Options, state: LogisticTSState, actions: jax.Array):
    """``(r^T sigma(W_t x), r^T sigma(W~_t x) - r^T sigma(W_t x))``."""
    learner.check_actions(actions, opt.d)
    X = actions.astype(state.W.dtype)
    r = state.hparams.rewards
    est = model.expected_reward(state.W, X, r)
    return est, model.expected_reward(state.sample, X, r) - est


def _update(opt: _Options, state: LogisticTSState, x: jax.Array, y: jax.Array) -> LogisticTSState:
    """The Laplace step (module docstring), then the next round's draw."""
    K, d, dtype, hp = opt.K, opt.d, state.W.dtype, state.hparams
    learner.check_update_args(x, y, K, d)
    x = x.astype(dtype)
    y = jnp.asarray(y, jnp.int32)
    B = jnp.einsum("kl,i->kil", jnp.eye(K, dtype=dtype), x).reshape(K * d, K)  # I_K kron x
    if opt.full:
        Y = lapack.lower_solve(state.factor, B)  # L^{-1} B
        C = Y.T @ Y
        SB = lapack.lower_solve_t(state.factor, Y)  # Sigma B
    else:
        SB = (B.reshape(K, d, K) / state.prec[:, :, None]).reshape(K * d, K)
        C = B.T @ SB
    C = 0.5 * (C + C.T)
    u, steps, status = map_step(
        state.W @ x, C, y, newton_steps=opt.newton_steps, max_halvings=opt.max_halvings
    )
    W = state.W - (SB @ u).reshape(K, d)
    J = model.jacobian(model.sigma(W @ x))
    if opt.full:
        prec = state.prec + jnp.kron(J, jnp.outer(x, x))
        prec = 0.5 * (prec + prec.T)
        factor = lapack.cholesky(prec)
    else:
        prec = state.prec + jnp.diagonal(J)[:, None] * (x * x)[None, :]
        factor = 1.0 / jnp.sqrt(prec)
    key = learner.next_key(state.key)
    sample = _draw(opt, W, factor, hp.v, key)
    new = state._replace(
        W=W, prec=prec, factor=factor, sample=sample, key=key, t=state.t + 1,
        info=learner.empty_info(dtype)._replace(newton_steps=steps, beta=hp.v),
    )  # fmt: skip
    # The few numbers the state is built from (the draw reads the new factor): never the
    # (K d, K d) precision, which the guard's select then fuses into its producer.
    return accept(state, new, all_finite(x, u, J, W, sample), status)


def logistic_ts(
    *,
    num_outcomes: int,
    dim: int,
    covariance: str = "diagonal",
    newton_steps: int = 20,
    max_halvings: int = 30,
) -> Learner:
    """Logistic Thompson sampling with an online Laplace posterior (module docstring).

    Args:
      covariance: ``"diagonal"`` (O(K d) a round) or ``"full"`` (for small K d).
      newton_steps, max_halvings: caps of the MAP step's Newton steps and step halvings.

    Returns:
      A :class:`~bandits_jax.learner_base.Learner` whose ``init`` takes
      :func:`logistic_ts_hyperparams`.
    """
    fn = "logistic_ts"
    K, d = named(fn, learner.check_static, num_outcomes, dim)
    if not isinstance(covariance, str) or covariance not in COVARIANCES:
        raise ValueError(f"{fn}: covariance must be one of {COVARIANCES}, got {covariance!r}")
    N = named(fn, check_int, "newton_steps", newton_steps, 1)
    opt = _Options(
        K, d, covariance == "full", N, named(fn, check_int, "max_halvings", max_halvings, 1)
    )
    return learner.from_score_parts(
        K, d, functools.partial(_init, opt), functools.partial(_score_parts, opt),
        functools.partial(_update, opt), hyperparams=logistic_ts_hyperparams,
    )  # fmt: skip
