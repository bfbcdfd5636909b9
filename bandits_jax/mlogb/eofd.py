"""EOFD-MLogB: OFUL-MLogB with a Frequent-Directions sketch of the Hessian.

He et al., Algorithm 2 (with Algorithm 1 for the sketch), eq. (16)-(25). Per round, with
``X = I_K kron x_t`` and the sketch ``Z_t = lam I + V diag(mu) V^T``:

1. one orthonormal extension ``X = V C + Q T`` (``linalg.sketch.extend``) serves the whole round;
2. the surrogate ``Zt = Z_t + eta grad^2 l_t(W_t)`` (eq. 20-22) is the eigendecomposition of the
   (m+K) x (m+K) core ``diag(mu, 0) + eta [C;T] grad sigma(W_t x) [C;T]^T`` in the basis
   ``[V, Q]``; its eigenvectors are never formed as a D x (m+K) matrix: the gradient
   ``vec((sigma - y) x^T) = X (sigma - y)`` lies in that span, so the Woodbury step (eq. 8) and the
   Lemma 2 projection (eq. 23-25) work on (m+K)-vectors and cost O(D (m+K));
3. Algorithm 1 absorbs ``grad^2 l_t(W_{t+1})`` with an eigendecomposition of the same-basis core
   (eq. 12-15): O(D (m+K) m) for the new ``V``, no SVD of a D-long matrix.

Multiplying ``eta D`` inside a square root (eq. 21) is replaced by putting ``eta grad sigma`` in
the core directly, so errata 4's negative-eigenvalue trap never arises.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from bandits_jax.linalg import projection, sketch
from bandits_jax.mlogb import bonus, confidence, model
from bandits_jax.mlogb.hyperparams import MLogBHyperparams
from bandits_jax.mlogb.learner import (
    MLogBLearner,
    UpdateInfo,
    check_actions,
    check_hparams,
    check_static,
    check_update_args,
    empty_info,
    guard,
)


class EOFDState(NamedTuple):
    """EOFD-MLogB state.

    Attributes:
      W: (K, d) estimate ``W_t``.
      V: (K d, m_eff) sketch directions; mu: (m_eff,) weights; rho: ``rho_{1:t-1}``.
      acc: running sum of eq. (36)'s last line (theory radius).
      t: completed updates (int32).
      hparams: :class:`MLogBHyperparams`.
      info: :class:`UpdateInfo` of the last update.
    """

    W: jax.Array
    V: jax.Array
    mu: jax.Array
    rho: jax.Array
    acc: jax.Array
    t: jax.Array
    hparams: MLogBHyperparams
    info: UpdateInfo


def lemma1_matrices(V: jax.Array, mu: jax.Array, lam: jax.Array, actions: jax.Array, K: int):
    """``A(x)`` of Lemma 1, eq. (18), for every row of ``actions`` (N, d): (N, K, K).

    ``C[n, k, i] = <x_n, u_ki>`` with ``u_ki`` block ``i`` of column ``k`` of V; cost O(N K d m).
    """
    d = actions.shape[1]
    Vr = V.reshape(K, d, V.shape[1])
    C = jnp.einsum("nd,idk->nki", actions, Vr)
    w = 1.0 / (mu + lam) - 1.0 / lam
    A = jnp.einsum("nki,k,nkj->nij", C, w, C)
    xx = jnp.sum(actions * actions, axis=1) / lam
    return A + xx[:, None, None] * jnp.eye(K, dtype=actions.dtype)


def eofd(
    *,
    num_outcomes: int,
    dim: int,
    sketch_size: int,
    max_newton_steps: int = 50,
) -> MLogBLearner:
    """EOFD-MLogB (Algorithm 2).

    Args:
      num_outcomes: K >= 1 (K = 1 is the logistic bandit with decision rule eq. 16).
      dim: action dimension d.
      sketch_size: m >= 1; ``m_eff = min(m, K d)`` (errata 1: m >= K d reproduces OFUL-MLogB).
      max_newton_steps: cap of the Lemma 2 root loop.

    Returns:
      An :class:`~bandits_jax.mlogb.learner.MLogBLearner`.
    """
    K, d = check_static(num_outcomes, dim, sketch_size)
    D = K * d
    m_eff = min(int(sketch_size), D)

    def init(hp: MLogBHyperparams) -> EOFDState:
        check_hparams(hp, K)
        dtype = hp.lam.dtype
        fd = sketch.init(D, m_eff, dtype)
        zero = jnp.zeros((), dtype)
        return EOFDState(
            W=jnp.zeros((K, d), dtype),
            V=fd.V,
            mu=fd.mu,
            rho=fd.rho,
            acc=zero,
            t=jnp.zeros((), jnp.int32),
            hparams=hp,
            info=empty_info(dtype),
        )

    def beta_of(state: EOFDState) -> jax.Array:
        return confidence.radius(
            state.hparams, state.t, state.rho, state.acc, num_outcomes=K, dim=d, rank=m_eff
        )

    def score_parts(state: EOFDState, actions: jax.Array):
        check_actions(actions, d)
        actions = actions.astype(state.W.dtype)
        hp = state.hparams
        A = lemma1_matrices(state.V, state.mu, hp.lam, actions, K)
        return bonus.parts(state.W, actions, A, hp.rewards, beta_of(state))

    def scores(state: EOFDState, actions: jax.Array) -> jax.Array:
        return bonus.optimistic_reward(K, *score_parts(state, actions))

    def select(state: EOFDState, actions: jax.Array, mask: jax.Array | None = None) -> jax.Array:
        est, bon = score_parts(state, actions)
        return bonus.argmax_tie(est + bon, mask)

    def update(state: EOFDState, x: jax.Array, y: jax.Array) -> EOFDState:
        check_update_args(x, y, K, d)
        hp = state.hparams
        dtype = state.W.dtype
        x = x.astype(dtype)
        lam, eta = hp.lam, hp.eta
        V, mu = state.V, state.mu
        w = state.W.reshape(-1)
        beta_used = beta_of(state)

        # One extension of [V] by span(I_K kron x) serves the whole round.
        X = jnp.kron(jnp.eye(K, dtype=dtype), x[:, None])  # (D, K)
        ext = sketch.extend(V, X)
        coords = ext.coords  # (m+K, K)

        # Surrogate Zt = Z_t + eta grad^2 l_t(W_t) in the basis [V, Q] (eq. 20-22).
        s = model.sigma(state.W @ x)
        core_t = sketch.core(mu, ext, eta * model.jacobian(s))
        e_t, U_t = jnp.linalg.eigh(core_t)
        e_t = jnp.maximum(e_t, 0.0)

        # Gradient step (eq. 8): grad = X (sigma - y) = [V, Q] coords (sigma - y).
        g = coords @ (s - model.onehot(y, K, dtype))
        step = U_t @ ((U_t.T @ g) / (lam + e_t))
        w_prime = w - eta * sketch.apply_basis(V, ext, step)

        # Projection (Lemma 2): a = Vt^T w' = U_t^T [V, Q]^T w'.
        b = sketch.basis_coords(V, ext, w_prime)
        a = U_t.T @ b
        sol = projection.dual_root(
            jnp.sum(w_prime * w_prime), a, e_t, lam, hp.S, max_steps=max_newton_steps
        )
        alpha, c = projection.project_coeffs(a, e_t, lam, sol.nu)
        corr = U_t @ c
        w_new = alpha * w_prime + sketch.apply_basis(V, ext, corr)
        W_new = w_new.reshape(K, d)

        # Eq. (36) running sum with Z_t (before the sketch absorbs the new term):
        # V^T w_new = alpha V^T w' + corr[:m] since V^T Q = 0.
        m = V.shape[1]
        dv = alpha * b[:m] + corr[:m] - V.T @ w
        dw = w_new - w
        step_z_sq = lam * jnp.sum(dw * dw) + jnp.sum(mu * dv * dv)
        step_x = (W_new - state.W) @ x
        acc = state.acc + confidence.increment(
            hp, num_outcomes=K, dim=d, step_x_sq=jnp.sum(step_x**2), step_z_sq=step_z_sq
        )

        # Algorithm 1: absorb grad^2 l_t(W_{t+1}) (eq. 12-15) in the same basis.
        s_new = model.sigma(W_new @ x)
        fd, _ = sketch.absorb(sketch.FDState(V, mu, state.rho), ext, model.jacobian(s_new))

        info = UpdateInfo(
            projected=sol.active,
            nu=sol.nu,
            newton_steps=sol.steps,
            status=sol.status,
            beta=beta_used,
        )
        new = EOFDState(
            W=W_new,
            V=fd.V,
            mu=fd.mu,
            rho=fd.rho,
            acc=acc,
            t=state.t + 1,
            hparams=hp,
            info=info,
        )
        return guard(state, new)

    return MLogBLearner(
        init=init,
        scores=scores,
        score_parts=score_parts,
        select=select,
        update=update,
        num_outcomes=K,
        dim=d,
    )
