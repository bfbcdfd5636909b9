"""OFUL-MLogB (Zhang and Sugiyama, 2023): the full-Hessian baseline of EOFD-MLogB.

He et al., Section 2.1, eq. (3)-(10). The state keeps the dense K d x K d matrix
``H_t = lam I + sum_{s<t} grad^2 l_s(W_{s+1})``. Per round:

- scores: ``A(x) = (I_K kron x)^T H_t^{-1} (I_K kron x)`` from one Cholesky factor of ``H_t``
  (O(D^3) once, then O(N K D^2)); the bonus of eq. (10) via :mod:`bandits_jax.mlogb.bonus`;
- update: the exact eigendecomposition route of Section 3.1: ``Ht = Q diag(e) Q^T`` (O(D^3)), the
  Newton step (eq. 8) and the ellipsoidal projection (eq. 9) by Lemma 2 with ``Vt = Q`` and
  ``mu = e - lam`` (the residual term of eq. 25 is then empty); then
  ``H_{t+1} = H_t + grad^2 l_t(W_{t+1})``.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from bandits_jax.learner_base import Learner, accept, finite_floats, no_failures
from bandits_jax.linalg import lapack, projection
from bandits_jax.mlogb import confidence, model
from bandits_jax.mlogb.hparams import MLogBHyperparams
from bandits_jax.mlogb.learner import (
    UpdateInfo,
    assemble,
    check_hparams,
    check_static,
    check_update_args,
    empty_info,
    radius_of,
)


class OFULState(NamedTuple):
    """OFUL-MLogB state: ``W_t``, the Hessian ``H_t``, eq. (36)'s running sum ``acc``, the
    completed updates ``t``, the hyperparameters, the last update's diagnostics and status."""

    W: jax.Array
    H: jax.Array
    acc: jax.Array
    t: jax.Array
    hparams: MLogBHyperparams
    info: UpdateInfo
    status: jax.Array
    num_failures: jax.Array


def hessian_term(s: jax.Array, x: jax.Array) -> jax.Array:
    """``grad^2 l(W) = grad sigma(W x) kron x x^T`` (Appendix B.1), D x D."""
    return jnp.kron(model.jacobian(s), jnp.outer(x, x))


def _oful_init(hp: MLogBHyperparams, *, K: int, d: int) -> OFULState:
    """``init`` of :func:`oful`: ``W_1 = 0``, ``H_1 = lam I`` (validated eagerly)."""
    check_hparams(hp, K)
    dtype = hp.lam.dtype
    # A fresh buffer per leaf (and own hyperparameter copies), so the state can be donated.
    return OFULState(
        W=jnp.zeros((K, d), dtype),
        H=hp.lam * jnp.eye(K * d, dtype=dtype),
        acc=jnp.zeros((), dtype),
        t=jnp.zeros((), jnp.int32),
        hparams=jax.tree_util.tree_map(jnp.array, hp),
        info=empty_info(dtype),
        **no_failures(),
    )


def _oful_a_matrices(state: OFULState, actions: jax.Array, *, K: int, d: int) -> jax.Array:
    """``(I_K kron x_n)^T H_t^{-1} (I_K kron x_n)`` for all actions, (N, K, K)."""
    # One Cholesky factor of H_t, then L^{-1} (I_K kron x_n) for all actions at once.
    N = actions.shape[0]
    D = K * d
    L = lapack.cholesky(state.H)
    X = jnp.einsum("ij,nd->idnj", jnp.eye(K, dtype=actions.dtype), actions).reshape(D, N * K)
    Y = lapack.lower_solve(L, X).reshape(D, N, K)
    return jnp.einsum("dni,dnj->nij", Y, Y)


def _oful_update(
    state: OFULState, x: jax.Array, y: jax.Array, *, K: int, d: int, max_newton_steps: int
) -> OFULState:
    """``update`` of :func:`oful`: Newton step, ellipsoidal projection, then ``H_{t+1}``."""
    check_update_args(x, y, K, d)
    hp = state.hparams
    dtype = state.W.dtype
    x = x.astype(dtype)
    lam, eta = hp.lam, hp.eta
    w = state.W.reshape(-1)
    beta_used = radius_of(state, num_outcomes=K, dim=d, rank=K * d)

    s = model.sigma(state.W @ x)
    H_tilde = state.H + eta * hessian_term(s, x)
    e, Q = lapack.eigh(0.5 * (H_tilde + H_tilde.T))
    g = jnp.kron(s - model.onehot(y, K, dtype), x)
    w_prime = w - eta * (Q @ ((Q.T @ g) / e))

    a = Q.T @ w_prime
    mu = jnp.maximum(e - lam, 0.0)
    sol = projection.dual_root(
        jnp.sum(w_prime * w_prime), a, mu, lam, hp.S, max_steps=max_newton_steps
    )
    alpha, c = projection.project_coeffs(a, mu, lam, sol.nu)
    w_new = alpha * w_prime + Q @ c
    W_new = w_new.reshape(K, d)

    dw = w_new - w
    step_x = (W_new - state.W) @ x
    acc = state.acc + confidence.increment(
        hp, num_outcomes=K, dim=d, step_x_sq=jnp.sum(step_x**2), step_z_sq=dw @ state.H @ dw
    )
    H_new = state.H + hessian_term(model.sigma(W_new @ x), x)
    info = UpdateInfo(projected=sol.active, nu=sol.nu, newton_steps=sol.steps, beta=beta_used)
    new = state._replace(W=W_new, H=0.5 * (H_new + H_new.T), acc=acc, t=state.t + 1, info=info)
    return accept(state, new, finite_floats(new), sol.status)


def oful(*, num_outcomes: int, dim: int, max_newton_steps: int = 50) -> Learner:
    """OFUL-MLogB with the full Hessian (the baseline of EOFD-MLogB).

    Args:
      num_outcomes: K >= 1; dim: d.
      max_newton_steps: cap of the projection's dual root loop.
    """
    K, d = check_static(num_outcomes, dim, max_newton_steps=max_newton_steps)

    def init(hp: MLogBHyperparams) -> OFULState:
        # A closure, not a partial: the protocol's init takes the hyperparameters only.
        return _oful_init(hp, K=K, d=d)

    return assemble(
        num_outcomes=K,
        dim=d,
        rank=K * d,
        init=init,
        a_matrices=functools.partial(_oful_a_matrices, K=K, d=d),
        update=functools.partial(_oful_update, K=K, d=d, max_newton_steps=max_newton_steps),
    )
