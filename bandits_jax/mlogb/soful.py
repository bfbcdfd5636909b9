"""SOFUL: LinUCB on a Frequent Directions sketch, the sketched linear peer of EOFD-MLogB.

Kuzborskij, Cella and Cesa-Bianchi (2019), "Efficient Linear Bandits through Matrix Sketching"
(AISTATS), Sketched OFUL: LinUCB (:mod:`.linucb`: its features ``z = [x, 1]`` or ``x``, scalar
rewards ``r_y`` and hyperparameters) with ``A_t = lam I + sum z z^T`` replaced by a Frequent
Directions sketch with the robust shift of Luo et al. (2016),

    V_t = U_t diag(mu_t) U_t^T + alpha_t I,   alpha_t = lam + rho_t,

``U_t diag(mu_t) U_t^T`` Fast FD (Ghashami et al. 2016, Algorithm 3) in EOFD's spectral form
(:func:`bandits_jax.linalg.fast_fd.spectral_rule`, block 1, capacity ``min(2m, D)``: ``z z^T``
absorbed by a secular rank-one eigenupdate, the sketch shrunk to its top m directions when full
and its basis rebuilt only then) and ``rho_t`` its accumulated shrinkage, the whole of it (Luo
et al. add half), so ``A_t <= V_t <= A_t + rho_t I``. ``U_t`` is orthonormal, so

    V_t^{-1} = (I - U_t diag(mu_t / (mu_t + alpha_t)) U_t^T) / alpha_t,

a diagonal core: no factorisation, no LAPACK call. The state keeps ``b_t = sum r_{y_s} z_s`` and
``theta_t = V_t^{-1} b_t``. LinUCB's index ``theta_t^T z + alpha ||z||_{V_t^{-1}}`` costs O(m D)
an action; an update O(m D) amortised (four passes over the basis, its rebuild every m + 1
rounds) plus O(m^3) small work. With ``m >= D`` (``m`` is capped at ``D``) the sketch drops
nothing, ``rho`` stays 0 to rounding and SOFUL is LinUCB. The rejected-step guard reads
``z^T z``, ``r`` and the eigenupdate's small results.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from bandits_jax.learner_base import Learner, accept, all_finite, fresh_state, no_failures
from bandits_jax.linalg import fast_fd, sketch
from bandits_jax.mlogb import learner, ridge
from bandits_jax.mlogb.linucb import LinUCBHyperparams, linucb_hyperparams


class SOFULState(NamedTuple):
    """State of :func:`soful` (``D = d + 1`` with the intercept, ``d`` without; ``m <= D``).

    Attributes:
      theta: (d,) the feature weights of ``theta_t``; bias: its intercept (0 without one).
      basis, R, mu, rank, used: the sketch ``U diag(mu) U^T``, ``U = basis @ R``
        (:class:`~bandits_jax.linalg.sketch.Sketch` of the fast spectral rule, ``2m + 1`` slots).
      rho: ``rho_t``, the accumulated shrinkage. b: (D,) ``sum r_{y_s} z_s``.
      t: completed updates (int32). hparams: LinUCB's.
    """

    theta: jax.Array
    bias: jax.Array
    basis: jax.Array
    R: jax.Array
    mu: jax.Array
    rank: jax.Array
    used: jax.Array
    rho: jax.Array
    b: jax.Array
    t: jax.Array
    hparams: LinUCBHyperparams
    status: jax.Array
    num_failures: jax.Array

    W = property(ridge.weights)


def _init(K: int, d: int, D: int, rule: sketch.SketchRule, hp: LinUCBHyperparams) -> SOFULState:
    learner.check_hparams(hp, K, ("lam", "alpha"))
    dtype = hp.lam.dtype
    zero = jnp.zeros((), dtype)
    state = SOFULState(
        jnp.zeros((d,), dtype), zero, *rule.init(D, dtype), zero, jnp.zeros((D,), dtype),
        jnp.zeros((), jnp.int32), hp, **no_failures(),
    )  # fmt: skip
    return fresh_state(state)


def _score_parts(d: int, intercept: bool, state: SOFULState, actions: jax.Array):
    """``(theta^T z, alpha ||z||_{V^{-1}})`` (module docstring)."""
    learner.check_actions(actions, d)
    X = actions.astype(state.theta.dtype)
    Z = ridge.features(X, intercept)
    alpha = state.hparams.lam + state.rho
    Uz = state.R.T @ (Z @ state.basis).T  # (2m + 1, N): U^T z
    sq = (jnp.sum(Z * Z, axis=1) - (state.mu / (state.mu + alpha)) @ (Uz * Uz)) / alpha
    return X @ state.theta + state.bias, state.hparams.alpha * jnp.sqrt(jnp.maximum(sq, 0.0))


def _update(K: int, intercept: bool, rule: sketch.SketchRule, state: SOFULState, x, y):
    """Absorb ``z z^T`` (the rule's extend, absorb, commit), then ``theta = V^{-1} b``."""
    learner.check_update_args(x, y, K, state.theta.shape[-1])
    z = ridge.features(x.astype(state.b.dtype), intercept)
    r = ridge.reward(state.hparams.rewards, y)
    ok = all_finite(z @ z, r)
    z, r = jnp.where(ok, z, 0.0), jnp.where(ok, r, 0.0)
    sk, Z = sketch.Sketch(state.basis, state.R, state.mu, state.rank, state.used), z[:, None]
    ext_b, ext = rule.extend(sk, Z, sk.basis.T @ Z)
    coef = jnp.zeros(ext.coords.shape[:1], z.dtype)
    rnd = rule.absorb(sk, ext, jnp.ones((1, 1), z.dtype), coef, None)
    ok = ok & all_finite(rnd.R, rnd.mu, rnd.delta)
    basis, _, rnd = rule.commit(sk, sketch.mask_extension(ext_b, ok), rnd, coef, ok)
    b, rho = state.b + r * z, state.rho + rnd.delta
    alpha = state.hparams.lam + rho  # theta = V^{-1} b by the diagonal Woodbury core
    Ub = (rnd.mu / (rnd.mu + alpha)) * (rnd.R.T @ (basis.T @ b))
    full = (b - basis @ (rnd.R @ Ub)) / alpha
    theta, bias = ridge.split(full, x.shape[-1], intercept, state.bias)
    new = state._replace(theta=theta, bias=bias, basis=basis, R=rnd.R, mu=rnd.mu, rank=rnd.rank,
                         used=rnd.used, rho=rho, b=b, t=state.t + 1)  # fmt: skip
    return accept(state, new, ok, rnd.status, written=("basis",))


def soful(*, num_outcomes: int, dim: int, sketch_size: int, intercept: bool = True) -> Learner:
    """SOFUL (Kuzborskij et al. 2019): LinUCB on a Frequent Directions sketch of size m.

    Args:
      sketch_size: m, the directions kept at a shrink (up to ``min(2m, D)`` between; capped at
        ``D``).
      intercept: regress on ``[x, 1]`` (the constant regularised by ``lam``), else on ``x``.

    Returns:
      A :class:`~bandits_jax.learner_base.Learner` whose ``init`` takes
      :func:`~bandits_jax.mlogb.linucb.linucb_hyperparams`.
    """
    K, d = learner.check_static(num_outcomes, dim, sketch_size)
    icpt = ridge.check_intercept("soful", intercept)
    D = d + 1 if icpt else d
    m = min(sketch_size, D)
    rule = fast_fd.spectral_rule(m, min(2 * m, D), 1)
    return learner.from_score_parts(
        K, d, functools.partial(_init, K, d, D, rule), functools.partial(_score_parts, d, icpt),
        functools.partial(_update, K, icpt, rule), hyperparams=linucb_hyperparams,
    )  # fmt: skip
