"""OFUL-MLogB (Zhang and Sugiyama, 2023): the full-Hessian baseline of EOFD-MLogB.

He et al., Section 2.1, eq. (3)-(10), with the dense K d x K d matrix
``H_t = lam I + sum_{s<t} grad^2 l_s(W_{s+1})``. Scores: ``A(x) = (I_K kron x)^T H_t^{-1}
(I_K kron x)`` from one Cholesky factor of ``H_t`` and eq. (10)'s bonus (:mod:`.bonus`). Update:
the Newton step (eq. 8) with ``H~ = H_t + eta grad^2 l_t(W_t)`` and the projection (eq. 9) by
Lemma 2 in the ``H~``-norm, either (``solver="lapack"``) Section 3.1's route,
``H~ = Q diag(e) Q^T`` and Lemma 2 with ``V = Q``, ``mu = e - lam``, or (``"batched"``) a
Cholesky solve and one Cholesky factorisation a root step
(:func:`~bandits_jax.linalg.projection.project_dense`), which a GPU keeps as one batch; then
``H_{t+1} = H_t + grad^2 l_t(W_{t+1})``.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from bandits_jax.learner_base import Learner, accept, finite_floats, no_failures
from bandits_jax.linalg import lapack, projection
from bandits_jax.mlogb import confidence, learner, model, newton
from bandits_jax.mlogb.hparams import MLogBHyperparams


class OFULState(NamedTuple):
    """OFUL-MLogB state: ``W_t``, the Hessian ``H_t``, eq. (36)'s running sum ``acc``, the
    completed updates ``t``, the hyperparameters, the last update's diagnostics and status."""

    W: jax.Array
    H: jax.Array
    acc: jax.Array
    t: jax.Array
    hparams: MLogBHyperparams
    info: learner.UpdateInfo
    status: jax.Array
    num_failures: jax.Array


def hessian_term(s: jax.Array, x: jax.Array) -> jax.Array:
    """``grad^2 l(W) = grad sigma(W x) kron x x^T`` (Appendix B.1), D x D."""
    return jnp.kron(model.jacobian(s), jnp.outer(x, x))


def _radius(K: int, d: int, state: OFULState) -> jax.Array:
    """Eq. (36)/(27) with no sketch: ``rho = 0``, rank ``K d``."""
    zero = jnp.zeros_like(state.acc)
    return confidence.radius(
        state.hparams, state.t, zero, state.acc, num_outcomes=K, dim=d, rank=K * d
    )


def _init(K: int, d: int, hp: MLogBHyperparams) -> OFULState:
    """``W_1 = 0``, ``H_1 = lam I`` (validated eagerly)."""
    learner.check_hparams(hp, K)
    dtype = hp.lam.dtype
    # A fresh buffer per leaf (and own hyperparameter copies), so the state can be donated.
    return OFULState(
        W=jnp.zeros((K, d), dtype),
        H=hp.lam * jnp.eye(K * d, dtype=dtype),
        acc=jnp.zeros((), dtype),
        t=jnp.zeros((), jnp.int32),
        hparams=jax.tree_util.tree_map(jnp.array, hp),
        info=learner.empty_info(dtype),
        **no_failures(),
    )


def _update(
    K: int, d: int, max_steps: int, solver: str, state: OFULState, x: jax.Array, y: jax.Array
) -> OFULState:
    """Newton step, ellipsoidal projection, then ``H_{t+1}``."""
    learner.check_update_args(x, y, K, d)
    hp = state.hparams
    dtype = state.W.dtype
    x = x.astype(dtype)
    eta = hp.eta
    w = state.W.reshape(-1)

    s = model.sigma(state.W @ x)
    H_tilde = state.H + eta * hessian_term(s, x)
    H_tilde = 0.5 * (H_tilde + H_tilde.T)
    g = jnp.kron(s - model.onehot(y, K, dtype), x)

    def by_eigh(H_tilde, w, g):
        e, Q = lapack.eigh(H_tilde)
        w_prime = w - eta * (Q @ ((Q.T @ g) / e))
        a, mu = Q.T @ w_prime, jnp.maximum(e - hp.lam, 0.0)
        sol = projection.dual_root(w_prime @ w_prime, a, mu, hp.lam, hp.S, max_steps=max_steps)
        alpha, c = projection.project_coeffs(a, mu, hp.lam, sol.nu)
        return alpha * w_prime + Q @ c, sol

    def by_cholesky(H_tilde, w, g):
        w_prime = w - eta * lapack.cho_solve(lapack.cholesky(H_tilde), g)
        # H_tilde w' = H_tilde w - eta g, exactly.
        z = H_tilde @ w - eta * g
        return projection.project_dense(H_tilde, w_prime, z, hp.S, max_steps=max_steps)

    w_new, sol = lapack.by_platform(solver, by_eigh, by_cholesky, H_tilde, w, g)
    W_new = w_new.reshape(K, d)

    dw = w_new - w
    step_x = (W_new - state.W) @ x
    acc = state.acc + confidence.increment(
        hp, num_outcomes=K, dim=d, step_x_sq=jnp.sum(step_x**2), step_z_sq=dw @ state.H @ dw
    )
    H_new = state.H + hessian_term(model.sigma(W_new @ x), x)
    info = learner.UpdateInfo(sol.active, sol.nu, sol.steps, _radius(K, d, state))
    new = state._replace(W=W_new, H=0.5 * (H_new + H_new.T), acc=acc, t=state.t + 1, info=info)
    return accept(state, new, finite_floats(new), sol.status)


def oful(
    *, num_outcomes: int, dim: int, max_newton_steps: int = 50, solver: str = "auto"
) -> Learner:
    """OFUL-MLogB with the full Hessian (the baseline of EOFD-MLogB).

    Args:
      num_outcomes: K >= 1; dim: d.
      max_newton_steps: cap of the projection's dual root loop.
      solver: the update's linear algebra, ``"auto"``, ``"lapack"`` or ``"batched"`` (speed
        only; module docstring, :data:`~bandits_jax.linalg.lapack.SOLVERS`).
    """
    K, d = learner.check_static(num_outcomes, dim, max_newton_steps=max_newton_steps)
    lapack.check_solver("oful", solver)
    parts = learner.optimistic(
        K,
        d,
        a_matrices=lambda state, actions: newton.a_matrices(lapack.cholesky(state.H), actions, K),
        radius=functools.partial(_radius, K, d),
    )
    return learner.from_score_parts(
        K,
        d,
        functools.partial(_init, K, d),
        update=functools.partial(_update, K, d, max_newton_steps, solver),
        in_ball=True,
        **parts,
    )
