"""Logistic Thompson sampling with an online Laplace posterior (a standard baseline).

Chapelle and Li (2011), "An empirical evaluation of Thompson sampling", Algorithm 3 (regularised
logistic regression, one observation a batch), as Open Bandit Pipeline's ``LogisticTS`` has it,
for the multinomial logistic model of eq. (1) (He et al.; K = 1 is the logistic bandit). The
parameter is ``W`` (K, d), ``vec(W) = W.reshape(-1)`` (``D = K d``), with the loss of round t

    l(W; x, y) = log(1 + sum_k exp(w_k^T x)) - w_y^T x     (``w_0 = 0``).

The posterior after round t-1 is ``N(W_t, P_t^{-1})``, ``P_1 = lam I`` (the prior ``N(0, I/lam)``).
Round t's Laplace step (an online MAP update on the new observation, the prior being the last
posterior):

    W_{t+1} = argmin_W  1/2 vec(W - W_t)^T P_t vec(W - W_t) + l(W; x_t, y_t),
    P_{t+1} = P_t + grad sigma(z*) kron x_t x_t^T,   z* = W_{t+1} x_t,

with ``covariance="full"`` (the Hessian of the loss at the MAP point added whole, O(D^2) memory,
a Cholesky factorisation of ``P`` each round, O(D^3 / 3): for small K d), or
``covariance="diagonal"`` (Chapelle and Li's form: ``P_t = diag(q_t)`` and only the diagonal is
added, ``q_{t+1}[k, i] = q_t[k, i] + grad sigma(z*)[k, k] x_{t,i}^2``, O(K d) a round).

The MAP point in K dimensions. With ``Sigma = P_t^{-1}``, ``B = I_K kron x`` (D x K),
``C = B^T Sigma B`` (K x K) and ``a = W_t x``, stationarity gives
``vec(W_{t+1}) = vec(W_t) - Sigma B u`` with ``u = g(a - C u)``, ``g(z) = sigma(z) - e_y``
(``e_0 = 0``), the minimiser of the strictly convex (C is positive definite for x != 0)

    psi(u) = 1/2 u^T C u + l(a - C u),

found by at most ``newton_steps`` damped Newton steps from ``u = 0``: with the residual
``r = u - g(z)``, ``z = a - C u``, the step ``p = (I + H C)^{-1} r`` (``H = grad sigma(z)``; it
is the Newton step of psi, a descent direction: ``grad psi^T p = r^T C (I + H C)^{-1} r > 0``),
``u <- u - s p`` with the first ``s`` in ``1, 1/2, ..., 2^(1 - max_halvings)`` meeting Armijo's
``psi(u - s p) <= psi(u) - 1e-4 s grad psi^T p``, and ``s = 1`` untested once
``grad psi^T p <= 64 eps (1 + |psi|)``. The steps stop after a full step with
``||p|| <= sqrt(eps) (1 + ||u||)``; the update is ``CONVERGED`` when then
``||r|| <= sqrt(eps) (1 + ||u||)``, else ``MAX_STEPS`` (the iterate kept). A non-finite result is
rejected (``NONFINITE``, the previous state kept). The loop is K-dimensional: the O(D) and O(D^2)
work (``Sigma B``, ``C``) is done once a round.

The draw and the scores. Each round draws ``W~_t = W_t + v F_t xi_t``, ``xi_t`` (K, d) standard
normals, ``F_t`` the posterior's factor: ``diag(q_t)^{-1/2}`` (diagonal) or ``L_t^{-T}`` with
``P_t = L_t L_t^T`` (lower Cholesky, full), so ``W~_t ~ N(W_t, v^2 P_t^{-1})``. The round's score
of an action is ``r^T sigma(W~_t x)``, split as the protocol's ``(estimate, bonus)`` into
``(r^T sigma(W_t x), r^T sigma(W~_t x) - r^T sigma(W_t x))``: the runner's argmax of their sum is
the Thompson choice. The key and the draws are :mod:`.lin_ts`'s (``k_1 = key(seed)``,
``k_{t+1} = split(k_t)[0]``, ``xi_t = sqrt(2) erfinv(w)`` on the even grid ``w`` drawn from
``bits(split(k_t)[1], (K, d), uint32)``: the same normals in float32 and float64 up to
float32's rounding), the sample made by ``init`` and by each accepted ``update`` and kept in the
state (``state.sample``).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from bandits_jax.checks import check_int, named
from bandits_jax.learner_base import fresh_state
from bandits_jax.linalg import lapack
from bandits_jax.mlogb import model
from bandits_jax.mlogb.learner import (
    MLogBFunctions,
    UpdateInfo,
    check_actions,
    check_hparams,
    check_static,
    check_update_args,
    from_score_parts,
    guard,
    status_property,
)
from bandits_jax.mlogb.lin_ts import (
    next_key,
    standard_normals,
    ts_fields,
)
from bandits_jax.status import CONVERGED, MAX_STEPS

__all__ = [
    "COVARIANCES",
    "LogisticTSHyperparams",
    "LogisticTSState",
    "logistic_ts",
    "logistic_ts_hyperparams",
]

COVARIANCES = ("diagonal", "full")
ARMIJO = 1e-4  # sufficient-decrease constant of the line search
ROUNDING = 64.0  # eps multiples of 1 + |psi| below which a full step is taken untested


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
      rho: 0 (no sketch). t: completed updates (int32).
      hparams: :class:`LogisticTSHyperparams`. info: :class:`UpdateInfo` of the last update
        (``newton_steps``: the MAP step's iterations; ``beta`` holds ``v``).
    """

    W: jax.Array
    prec: jax.Array
    factor: jax.Array
    sample: jax.Array
    key: jax.Array
    rho: jax.Array
    t: jax.Array
    hparams: LogisticTSHyperparams
    info: UpdateInfo

    status = status_property  # read-only: info.status


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
    dtype = a.dtype
    eps = jnp.finfo(dtype).eps
    e_y = model.onehot(y, K, dtype)
    eye = jnp.eye(K, dtype=dtype)

    def psi(u):
        return 0.5 * u @ (C @ u) + _loss(a - C @ u, y)

    def residual(u):
        z = a - C @ u
        s = model.sigma(z)
        return u - (s - e_y), model.jacobian(s)

    def norm(w):
        return jnp.sqrt(jnp.sum(w * w))

    def cond(c):
        steps, _, done = c
        return (steps < newton_steps) & ~done

    def body(c):
        steps, u, _ = c
        r, H = residual(u)
        p = lapack.solve(eye + H @ C, r)
        f = psi(u)
        dec = (C @ r) @ p  # grad psi^T p >= 0
        full = dec <= ROUNDING * eps * (1.0 + jnp.abs(f))

        def ls_cond(ls):
            j, _, ok = ls
            return (j < max_halvings) & ~ok

        def ls_body(ls):
            j, s, _ = ls
            ok = full | (psi(u - s * p) <= f - ARMIJO * s * dec)
            return j + 1, jnp.where(ok, s, 0.5 * s), ok

        one = jnp.ones((), dtype)
        _, s, ok = lax.while_loop(ls_cond, ls_body, (jnp.zeros((), jnp.int32), one, False))
        u_new = jnp.where(ok, u - s * p, u)
        small = (s == 1.0) & (norm(p) <= jnp.sqrt(eps) * (1.0 + norm(u_new)))
        return steps + 1, u_new, ~ok | small

    start = (jnp.zeros((), jnp.int32), jnp.zeros((K,), dtype), jnp.zeros((), bool))
    steps, u, _ = lax.while_loop(cond, body, start)
    r, _ = residual(u)
    ok = norm(r) <= jnp.sqrt(eps) * (1.0 + norm(u))
    return u, steps, jnp.where(ok, CONVERGED, MAX_STEPS).astype(jnp.int32)


def _info(v: jax.Array, steps: jax.Array, status: jax.Array) -> UpdateInfo:
    return UpdateInfo(
        projected=jnp.zeros((), bool),
        nu=jnp.zeros((), v.dtype),
        newton_steps=jnp.asarray(steps, jnp.int32),
        status=jnp.asarray(status, jnp.int32),
        beta=v,
    )


def logistic_ts(
    *,
    num_outcomes: int,
    dim: int,
    covariance: str = "diagonal",
    newton_steps: int = 20,
    max_halvings: int = 30,
) -> MLogBFunctions:
    """Logistic Thompson sampling with an online Laplace posterior (module docstring).

    Args:
      num_outcomes: K >= 1; dim: d.
      covariance: ``"diagonal"`` (Chapelle and Li's diagonal precision, O(K d) a round) or
        ``"full"`` (the whole precision, a Cholesky factorisation of the (K d, K d) matrix each
        round: for small K d).
      newton_steps: cap of the MAP step's damped Newton iterations (K-dimensional; from the
        last mean they reach rounding in a few).
      max_halvings: cap of the line search's step halvings.

    Returns:
      An :class:`~bandits_jax.mlogb.learner.MLogBFunctions` whose ``init`` takes
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
    M = named(fn, check_int, "max_halvings", max_halvings, 1)
    full = covariance == "full"
    D = K * d

    def draw(W, factor, v, key):
        """``W + v F xi`` (module docstring)."""
        xi = standard_normals(key, (K, d), W.dtype)
        if full:
            step = lapack.lower_solve_t(factor, xi.reshape(D)).reshape(K, d)
        else:
            step = factor * xi
        return W + v * step

    def init(hp: LogisticTSHyperparams) -> LogisticTSState:
        check_hparams(hp, K, ("lam", "v", "seed"))
        dtype = hp.lam.dtype
        if full:
            prec = hp.lam * jnp.eye(D, dtype=dtype)
            factor = jnp.sqrt(hp.lam) * jnp.eye(D, dtype=dtype)
        else:
            prec = jnp.full((K, d), hp.lam, dtype)
            factor = jnp.full((K, d), 1.0 / jnp.sqrt(hp.lam), dtype)
        key = jax.random.key_data(jax.random.key(hp.seed))
        W = jnp.zeros((K, d), dtype)
        state = LogisticTSState(
            W=W,
            prec=prec,
            factor=factor,
            sample=draw(W, factor, hp.v, key),
            key=key,
            rho=jnp.zeros((), dtype),
            t=jnp.zeros((), jnp.int32),
            hparams=hp,
            info=_info(jnp.zeros((), dtype), 0, CONVERGED),
        )
        return fresh_state(state)

    def score_parts(state: LogisticTSState, actions: jax.Array) -> tuple[jax.Array, jax.Array]:
        check_actions(actions, d)
        X = actions.astype(state.W.dtype)
        r = state.hparams.rewards
        est = model.expected_reward(state.W, X, r)
        return est, model.expected_reward(state.sample, X, r) - est

    def update(state: LogisticTSState, x: jax.Array, y: jax.Array) -> LogisticTSState:
        check_update_args(x, y, K, d)
        dtype = state.W.dtype
        hp = state.hparams
        x = x.astype(dtype)
        y = jnp.asarray(y, jnp.int32)
        B = jnp.einsum("kl,i->kil", jnp.eye(K, dtype=dtype), x).reshape(D, K)  # I_K kron x
        if full:
            Y = lapack.lower_solve(state.factor, B)  # L^{-1} B
            C = Y.T @ Y
            SB = lapack.lower_solve_t(state.factor, Y)  # Sigma B
        else:
            SB = (B.reshape(K, d, K) / state.prec[:, :, None]).reshape(D, K)
            C = B.T @ SB
        C = 0.5 * (C + C.T)
        a = state.W @ x
        u, steps, status = map_step(a, C, y, newton_steps=N, max_halvings=M)
        W = state.W - (SB @ u).reshape(K, d)
        J = model.jacobian(model.sigma(W @ x))
        if full:
            prec = state.prec + jnp.kron(J, jnp.outer(x, x))
            prec = 0.5 * (prec + prec.T)
            factor = lapack.cholesky(prec)
        else:
            prec = state.prec + jnp.diagonal(J)[:, None] * (x * x)[None, :]
            factor = 1.0 / jnp.sqrt(prec)
        key = next_key(state.key)
        new = LogisticTSState(
            W=W,
            prec=prec,
            factor=factor,
            sample=draw(W, factor, hp.v, key),
            key=key,
            rho=state.rho,
            t=state.t + 1,
            hparams=hp,
            info=_info(hp.v, steps, status),
        )
        return guard(state, new)

    return from_score_parts(K, d, init, score_parts, update, hyperparams=logistic_ts_hyperparams)
