"""Logistic Thompson sampling with an online Laplace posterior (a standard baseline).

Chapelle and Li (2011), Algorithm 3 (regularised logistic regression, one observation a batch),
as Open Bandit Pipeline's ``LogisticTS`` has it, for the multinomial logistic model of He et al.'s
eq. (1) (K = 1 is the logistic bandit), ``W`` (K, d), ``D = K d``, ``l`` eq. (1)'s log-loss. The
posterior after round t-1 is ``N(W_t, P_t^{-1})``, ``P_1 = lam I``; round t's Laplace step is

    W_{t+1} = argmin_W  1/2 vec(W - W_t)^T P_t vec(W - W_t) + l(W; x_t, y_t),
    P_{t+1} = P_t + grad sigma(z*) kron x_t x_t^T,   z* = W_{t+1} x_t,

with ``covariance="full"`` (the whole precision, a Cholesky factorisation each round: small K d)
or ``"diagonal"`` (Chapelle and Li's ``P_t = diag(q_t)``, only the diagonal added, O(K d)).

The MAP point in K dimensions. With ``Sigma = P_t^{-1}``, ``B = I_K kron x``, ``C = B^T Sigma B``
and ``a = W_t x``, stationarity gives ``vec(W_{t+1}) = vec(W_t) - Sigma B u`` with ``u`` the
minimiser of the strictly convex ``psi(u) = 1/2 u^T C u + l(a - C u)`` (:func:`map_step`: damped
Newton, :func:`~bandits_jax.mlogb.newton.minimise`, from ``u = 0``, gradient ``C r`` with the
residual ``r = u - (sigma(z) - e_y)``, ``z = a - C u``, step ``(I + grad sigma(z) C)^{-1} r``).
``CONVERGED`` when then ``||r|| <= sqrt(eps) (1 + ||u||)``, else ``MAX_STEPS``; a non-finite
result is rejected (``NONFINITE``, the previous state kept).

The draw: ``W~_t = W_t + v F_t xi_t``, ``F_t`` the posterior's factor (``diag(q_t)^{-1/2}``, or
``L_t^{-T}`` with ``P_t = L_t L_t^T``), so ``W~_t ~ N(W_t, v^2 P_t^{-1})``; the keys and normals
are :mod:`.lin_ts`'s, drawn by ``init`` and each accepted ``update`` (``state.sample``). The
score ``r^T sigma(W~_t x)`` is split as ``(r^T sigma(W_t x), r^T sigma(W~_t x) - r^T sigma(W_t
x))``: the runner's argmax of their sum is the Thompson choice.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from bandits_jax.checks import check_int, named
from bandits_jax.learner_base import Learner, accept, finite_floats, fresh_state, no_failures
from bandits_jax.linalg import lapack
from bandits_jax.mlogb import model, newton
from bandits_jax.mlogb.learner import (
    UpdateInfo,
    check_actions,
    check_hparams,
    check_static,
    check_update_args,
    empty_info,
    from_score_parts,
)
from bandits_jax.mlogb.lin_ts import next_key, standard_normals, ts_fields

__all__ = [
    "COVARIANCES",
    "LogisticTSHyperparams",
    "LogisticTSState",
    "logistic_ts",
    "logistic_ts_hyperparams",
]

COVARIANCES = ("diagonal", "full")


class LogisticTSHyperparams(NamedTuple):
    """Hyperparameters of :func:`logistic_ts` (leading axes, if any, are grid axes).

    Attributes:
      lam: prior precision ``lam > 0`` (``P_1 = lam I``).
      v: posterior scale ``v >= 0`` (``W~ ~ N(W, v^2 P^{-1})``; 0 is greedy on the MAP point).
      seed: uint32 seed of the state's PRNG key.
      rewards: (..., K) outcome rewards ``r_1..r_K`` (``r_0 = 0``).
    """

    lam: jax.Array
    v: jax.Array
    seed: jax.Array
    rewards: jax.Array


class LogisticTSState(NamedTuple):
    """State of :func:`logistic_ts` (``D = K d``).

    Attributes:
      W: (K, d) the posterior mean ``W_t``.
      prec: the precision: (K, d) ``q_t`` (diagonal) or (D, D) ``P_t`` (full).
      factor: (K, d) ``q_t^{-1/2}`` (diagonal) or (D, D) the lower Cholesky factor of ``P_t``.
      sample: (K, d) this round's draw ``W~_t``. key: raw PRNG key data ``k_t``.
      t: completed updates (int32).
      hparams: :class:`LogisticTSHyperparams`. info: :class:`UpdateInfo` of the last update
        (``newton_steps``: the MAP step's iterations; ``beta`` holds ``v``).
      status, num_failures: the last update's status and the rejected updates so far.
    """

    W: jax.Array
    prec: jax.Array
    factor: jax.Array
    sample: jax.Array
    key: jax.Array
    t: jax.Array
    hparams: LogisticTSHyperparams
    info: UpdateInfo
    status: jax.Array
    num_failures: jax.Array


def logistic_ts_hyperparams(
    *, lam, v=1.0, seed=0, rewards=None, dtype=None
) -> LogisticTSHyperparams:
    """Builds :class:`LogisticTSHyperparams`, validated eagerly.

    Args:
      lam: finite ``> 0``; v: finite ``>= 0``; seed: an int in ``[0, 2**32)``; scalars or
        arrays (broadcast to grid axes).
      rewards: (K,) or (..., K) non-negative rewards; ``None`` means ``[1.]`` (K = 1).
      dtype: float32 or float64 (default: JAX's default float).

    Raises:
      ValueError: naming the function and the offending argument.
    """
    return LogisticTSHyperparams(
        **ts_fields("logistic_ts_hyperparams", lam, v, seed, rewards, dtype)
    )


def _loss(z: jax.Array, y: jax.Array) -> jax.Array:
    """``l`` at logits z (K,): ``logsumexp([0, z]) - z_y`` (``z_0 = 0``)."""
    z0 = jnp.concatenate([jnp.zeros((1,), z.dtype), z])
    return jax.nn.logsumexp(z0) - z0[y]


def map_step(
    a: jax.Array, C: jax.Array, y: jax.Array, *, newton_steps: int, max_halvings: int
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The minimiser ``u`` of ``psi(u) = 1/2 u^T C u + l(a - C u)`` by damped Newton (module
    docstring): ``(u, steps, status)``."""
    K = a.shape[0]
    e_y = model.onehot(y, K, a.dtype)

    def psi(u):
        return 0.5 * u @ (C @ u) + _loss(a - C @ u, y)

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
    check_hparams(hp, opt.K, ("lam", "v", "seed"))
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
        t=jnp.zeros((), jnp.int32), hparams=hp, info=empty_info(dtype), **no_failures(),
    )  # fmt: skip
    return fresh_state(state)


def _score_parts(opt: _Options, state: LogisticTSState, actions: jax.Array):
    """``(r^T sigma(W_t x), r^T sigma(W~_t x) - r^T sigma(W_t x))``."""
    check_actions(actions, opt.d)
    X = actions.astype(state.W.dtype)
    r = state.hparams.rewards
    est = model.expected_reward(state.W, X, r)
    return est, model.expected_reward(state.sample, X, r) - est


def _update(opt: _Options, state: LogisticTSState, x: jax.Array, y: jax.Array) -> LogisticTSState:
    """The Laplace step (module docstring), then the next round's draw."""
    K, d = opt.K, opt.d
    check_update_args(x, y, K, d)
    dtype = state.W.dtype
    hp = state.hparams
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
    key = next_key(state.key)
    new = state._replace(
        W=W, prec=prec, factor=factor, sample=_draw(opt, W, factor, hp.v, key), key=key,
        t=state.t + 1, info=empty_info(dtype)._replace(newton_steps=steps, beta=hp.v),
    )  # fmt: skip
    return accept(state, new, finite_floats(new), status)


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
      num_outcomes: K >= 1; dim: d.
      covariance: ``"diagonal"`` (Chapelle and Li's diagonal precision, O(K d) a round) or
        ``"full"`` (the whole precision, a Cholesky factorisation of the (K d, K d) matrix each
        round: for small K d).
      newton_steps: cap of the MAP step's damped Newton iterations (K-dimensional, warm-started
        at the last mean).
      max_halvings: cap of the line search's step halvings.

    Returns:
      An :class:`~bandits_jax.learner_base.Learner` whose ``init`` takes
      :func:`logistic_ts_hyperparams`. ``score_parts`` returns
      ``(r^T sigma(W_t x), r^T sigma(W~_t x) - r^T sigma(W_t x))``; ``scores`` their sum.

    Raises:
      ValueError: naming ``logistic_ts`` and the offending argument.
    """
    fn = "logistic_ts"
    K, d = named(fn, check_static, num_outcomes, dim)
    if not isinstance(covariance, str) or covariance not in COVARIANCES:
        raise ValueError(f"{fn}: covariance must be one of {COVARIANCES}, got {covariance!r}")
    N = named(fn, check_int, "newton_steps", newton_steps, 1)
    opt = _Options(
        K, d, covariance == "full", N, named(fn, check_int, "max_halvings", max_halvings, 1)
    )
    return from_score_parts(
        K, d, functools.partial(_init, opt), functools.partial(_score_parts, opt),
        functools.partial(_update, opt), hyperparams=logistic_ts_hyperparams,
    )  # fmt: skip
