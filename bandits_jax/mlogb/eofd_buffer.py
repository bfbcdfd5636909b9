"""Buffered EOFD-MLogB: a sketched fit corrected by damped Newton steps on a ring buffer.

EOFD's sketch (He et al., Algorithm 1, eq. 12-15) summarises the rounds that left a buffer of the
``B`` most recent ones; each round refits (:func:`~bandits_jax.mlogb.newton.minimise`), in
``w = vec(W)`` with ``X_s = I_K kron x_s`` and ``l_s`` eq. (1)'s log-loss,

    F_t(W) = (c/2) ||w||^2 + (1/2) w^T V diag(mu) V^T w - b^T w + sum_{s in buffer} l_s(W).   (1)

An evicted round s enters by its expansion at ``W_t`` (``z = W_t x_s``, ``J = grad sigma(z)``,
``H_s = X_s J X_s^T``): ``Z = V diag(mu) V^T <- FD(Z + H_s)`` and, with ``Q = Z + (c - lam) I``,
``A = c I + Z``,

    b <- b + (Q' - Q) w_t - X_s (sigma(z) - e_{y_s})                 (2, summary="gradient")
    a' = (A + H_s)^{-1} (b + H_s w_t - X_s (sigma(z) - e_{y_s})),  b <- A' a'   (3, "anchor")

``c = lam + rho/2`` (``"robust"``, Robust FD) or ``lam`` (``"paper"``). The Hessian
``c I + U L L^T U^T`` (``U = [V, X_1 .. X_B]``, ``L = blockdiag(diag(mu)^{1/2}, L_1 .. L_B)``,
``L_s L_s^T = J_s``) is solved by Woodbury through the ``r x r`` core ``S = c I + L^T U^T U L``
(``r = m + B K``; FD keeps ``V^T V = I``, so S's sketch block is diagonal and its factor comes
from the ``B K x B K`` Schur complement's), or formed where ``D <= r``; the parts a fit does not
change are formed once a round. ``CONVERGED`` if ``||g|| <= sqrt(eps) (1 + ||b|| +
sum_s ||x_s||)``, else ``MAX_STEPS``. Scores: OFUL-MLogB's (eq. 10/16/19) with
``A(x) = X^T H^{-1} X`` and :mod:`.exact`'s fixed radius ``beta``.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from bandits_jax.checks import check_int, named
from bandits_jax.learner_base import Learner, accept, all_finite, fresh_state, no_failures
from bandits_jax.linalg import lapack, sketch
from bandits_jax.mlogb import confidence, learner, model, newton
from bandits_jax.mlogb.exact import ExactHyperparams, exact_hyperparams
from bandits_jax.status import CONVERGED, is_rejected, worst

#: Default buffer size B (rounds refitted exactly).
DEFAULT_BUFFER = 64
#: How an evicted round enters the quadratic summary (module docstring, eq. 2 and 3).
SUMMARIES = ("gradient", "anchor")
#: How the fit and the bonus solve with the Hessian of eq. (1) (:func:`eofd_buffered`).
HESSIANS = ("auto", "woodbury", "dense")


class EOFDBufferState(NamedTuple):
    """State of :func:`eofd_buffered` (``D = K d``, ``r = m + B K``).

    Attributes:
      W: (K, d) the fit. V: (D, m) sketch directions; mu: (m,) weights; rho: discarded mass.
      b: (D,) linear term of the summary. X: (B, d), Y: (B,) int32, filled: (B,) the buffer.
      chol: Cholesky factor of the Woodbury core S (r, r) or of H (D, D) where dense.
      root_J: (B, K, K) the ``L_s`` at ``W`` (zero on unfilled rows).
      grad_norm: ``||grad F_t(W)||`` after the last fit. t: completed updates (int32).
      hparams: :class:`~bandits_jax.mlogb.exact.ExactHyperparams`. info: :class:`UpdateInfo`.
    """

    W: jax.Array
    V: jax.Array
    mu: jax.Array
    rho: jax.Array
    b: jax.Array
    X: jax.Array
    Y: jax.Array
    filled: jax.Array
    chol: jax.Array
    root_J: jax.Array
    grad_norm: jax.Array
    t: jax.Array
    hparams: ExactHyperparams
    info: learner.UpdateInfo
    status: jax.Array
    num_failures: jax.Array


def jacobian_root(z: jax.Array) -> jax.Array:
    """The closed-form lower Cholesky factor ``L`` (..., K, K) of ``grad sigma(z)``: with
    ``q_k = sigma_0 + sum_{j >= k} s_j``, ``L_kk = sqrt(s_k q_{k+1} / q_k)`` and, for ``i > k``,
    ``L_ik = -s_i sqrt(s_k / (q_k q_{k+1}))`` (0 where ``q_{k+1} = 0``)."""
    probs = model.probabilities(z)
    s = probs[..., 1:]
    tail = jnp.cumsum(s[..., ::-1], axis=-1)[..., ::-1]  # sum_{j >= k} s_j
    q = probs[..., :1] + tail  # q_k, k = 1..K
    q_next = jnp.concatenate([q[..., 1:], probs[..., :1]], axis=-1)
    pos = q_next > 0
    inv_sqrt_next = jnp.where(pos, 1.0 / jnp.sqrt(jnp.where(pos, q_next, 1.0)), 0.0)
    diag = jnp.sqrt(s * q_next / q)
    col = jnp.sqrt(s / q) * inv_sqrt_next  # sqrt(s_k / (q_k q_{k+1}))
    K = z.shape[-1]
    lower = jnp.tril(jnp.ones((K, K), bool), -1)
    off = -s[..., :, None] * col[..., None, :]
    return jnp.where(lower, off, 0.0) + diag[..., :, None] * jnp.eye(K, dtype=z.dtype)


class _Gram(NamedTuple):
    """What the Woodbury core takes from ``U = [V, X_1 .. X_B]`` (buffer columns ordered
    (s, k)) and ``A = c I + V diag(mu) V^T``, with FD's ``V^T V = I``: ``VX`` (m, B, K) the
    ``V_k^T x_s``; ``M`` (B, K, B, K) ``c X_s^T A^{-1} X_t = x_s^T x_t I_K - (V^T X_s)^T
    diag(mu / (c + mu)) V^T X_t``."""

    VX: jax.Array
    M: jax.Array


def _gram(V: jax.Array, mu: jax.Array, X: jax.Array, c: jax.Array) -> _Gram:
    B, d = X.shape
    m = V.shape[1]
    K = V.shape[0] // d
    VX = jnp.einsum("kdm,sd->msk", V.reshape(K, d, m), X)
    P = jnp.sqrt(mu / (c + mu))[:, None, None] * VX
    M = jnp.einsum("st,kl->sktl", X @ X.T, jnp.eye(K, dtype=X.dtype))
    return _Gram(VX, M - jnp.einsum("msk,mtl->sktl", P, P))


def _core_chol(G: _Gram, mu: jax.Array, root_J: jax.Array, c: jax.Array) -> jax.Array:
    """Cholesky factor of ``S = c I + L^T U^T U L`` (r x r), ``L = blockdiag(diag(mu)^{1/2},
    root_J)``, by block elimination: S's sketch block is ``c I + diag(mu)``, so its factor is
    ``[[diag(c + mu)^{1/2}, 0], [E^T, L_c]]`` with ``E = (mu / (c + mu))^{1/2} V^T U_x L_x``
    and ``L_c`` the factor of the Schur complement ``c I + L_x^T M L_x`` (B K x B K)."""
    m = mu.shape[0]
    B, K, _ = root_J.shape
    n = B * K
    schur = jnp.einsum("ski,sktl,tlj->sitj", root_J, G.M, root_J).reshape(n, n)
    L_c = lapack.cholesky(schur + c * jnp.eye(n, dtype=schur.dtype))
    E = jnp.sqrt(mu / (c + mu))[:, None] * jnp.einsum("msk,skj->msj", G.VX, root_J).reshape(m, n)
    top = jnp.concatenate([jnp.diag(jnp.sqrt(c + mu)), jnp.zeros((m, n), mu.dtype)], axis=1)
    return jnp.concatenate([top, jnp.concatenate([E.T, L_c], axis=1)], axis=0)


def _dense_chol(base: jax.Array, X: jax.Array, root_J: jax.Array) -> jax.Array:
    """Cholesky factor of the Hessian of eq. (1) formed outright (D x D): ``base = c I + V
    diag(mu) V^T`` (fixed during a fit) plus the buffer's ``sum_s J_s kron x_s x_s^T``."""
    B, d = X.shape
    K = root_J.shape[1]
    J = jnp.einsum("ski,sji->skj", root_J, root_J)  # L_s L_s^T, zero on unfilled rows
    return lapack.cholesky(base + jnp.einsum("skj,si,sl->kijl", J, X, X).reshape(K * d, K * d))


def _summary(W, V, mu, b, c):
    """The quadratic summary of eq. (1) at W and ``V^T w``."""
    w = W.reshape(-1)
    vw = V.T @ w
    return 0.5 * c * (w @ w) + 0.5 * jnp.sum(mu * vw * vw) - b @ w, vw


def _objective(W, V, mu, b, X, Y, wts, c):
    """``F_t(W)`` of eq. (1) (``wts``: 1 on filled rows)."""
    return _summary(W, V, mu, b, c)[0] + jnp.sum(wts * newton.row_losses(W, X, Y)[1])


def _derivatives(W, V, mu, b, X, Y, wts, c, fixed, dense):
    """``(F, g (K, d), (root_J, chol))`` at W: ``root_J`` (B, K, K) zero on unfilled rows,
    ``chol`` the Cholesky factor of the Woodbury core (r x r) or, where ``dense``, of H;
    ``fixed``: what of them a fit does not change (:func:`_fixed`)."""
    K, d = W.shape
    loss, grad, z, _ = newton.rows_loss_grad(W, X, Y, wts)
    root_J = jacobian_root(z) * wts[:, None, None]
    quad, vw = _summary(W, V, mu, b, c)
    F = quad + loss
    g = c * W + (V @ (mu * vw) - b).reshape(K, d) + grad
    chol = _dense_chol(fixed, X, root_J) if dense else _core_chol(fixed, mu, root_J, c)
    return F, g, (root_J, chol)


def _fixed(V, mu, X, c, dense):
    """What a fit's factorisations share: ``c I + V diag(mu) V^T`` (dense), else the Woodbury
    core's :class:`_Gram`."""
    if dense:
        return (V * mu) @ V.T + c * jnp.eye(V.shape[0], dtype=V.dtype)
    return _gram(V, mu, X, c)


def _woodbury(V, X, mu, root_J, chol, c, g):
    """``H^{-1} g = (g - U L S^{-1} L^T U^T g) / c`` for g (K, d), ``chol`` the factor of S."""
    (K, d), (B, _), m = g.shape, X.shape, V.shape[1]
    root_mu = jnp.sqrt(mu)
    gx = jnp.einsum("skj,sk->sj", root_J, X @ g.T)  # L_s^T (x_s^T g_k)_k
    y = lapack.cho_solve(chol, jnp.concatenate([root_mu * (V.T @ g.reshape(-1)), gx.reshape(-1)]))
    yx = jnp.einsum("skj,sj->sk", root_J, y[m:].reshape(B, K))
    ul_y = (V @ (root_mu * y[:m])).reshape(K, d) + yx.T @ X  # U L y as (K, d)
    return (g - ul_y) / c


def _h_solve(V, X, mu, c, it: newton.Newton, dense):
    """``H^{-1} g`` by Woodbury, or by H's factor where ``dense``."""
    root_J, chol = it.aux
    if dense:
        return lapack.cho_solve(chol, it.g.reshape(-1)).reshape(it.g.shape)
    return _woodbury(V, X, mu, root_J, chol, c, it.g)


def _anchor(V, mu, x, root_J, c, rhs):
    """``(c I + V diag(mu) V^T + X J X^T)^{-1} rhs`` for one round (``X = I_K kron x``,
    ``root_J``: ``L`` with ``L L^T = J``), by the Woodbury core of size ``m + K``."""
    X, R = x[None, :], root_J[None]
    chol = _core_chol(_gram(V, mu, X, c), mu, R, c)
    return _woodbury(V, X, mu, R, chol, c, rhs)


def _evict(state, x_old, y_old, opt):
    """``(V, mu, rho, b, fd_status)`` after round ``(x_old, y_old)`` enters the summary at
    ``state.W`` (eq. 2, or 3 when ``opt.anchored``) and the sketch."""
    K, d = state.W.shape
    dtype, hp, half_rho = state.W.dtype, state.hparams, opt.half_rho
    z = state.W @ x_old
    s = model.sigma(z)
    J = model.jacobian(s)
    Xo = jnp.kron(jnp.eye(K, dtype=dtype), x_old[:, None])  # (D, K)
    ext = sketch.extend(state.V, Xo)
    fd, _, fd_status = sketch.absorb(
        sketch.FDState(state.V, state.mu, state.rho), ext, J, opt.solver
    )
    grad_s = Xo @ (s - model.onehot(y_old, K, dtype))
    if opt.anchored:
        # The summary's minimiser is kept (eq. 3): a = (A + H_s)^{-1} (b + H_s w - grad), b' = A' a.
        c_old = hp.lam + half_rho * state.rho
        rhs = state.b + Xo @ (J @ z) - grad_s
        a = _anchor(state.V, state.mu, x_old, jacobian_root(z), c_old, rhs.reshape(K, d))
        a = a.reshape(-1)
        b_new = (hp.lam + half_rho * fd.rho) * a + fd.V @ (fd.mu * (fd.V.T @ a))
    else:
        # b keeps the summary's gradient at W exact (eq. 2): b += (Q' - Q) w - grad l_s(w).
        w = state.W.reshape(-1)
        dQw = (fd.V @ (fd.mu * (fd.V.T @ w)) - state.V @ (state.mu * (state.V.T @ w))
               + half_rho * (fd.rho - state.rho) * w)  # fmt: skip
        b_new = state.b + dQw - grad_s
    return fd.V, fd.mu, fd.rho, b_new, fd_status


def _fit(W0, V, mu, b, X, Y, wts, c, *, newton_steps, max_halvings, dense):
    """Damped Newton on eq. (1) from ``W0``: ``(iterate, grad_norm, status)``."""
    fixed = _fixed(V, mu, X, c, dense)
    args = (V, mu, b, X, Y, wts, c)
    it = newton.minimise(
        W0, lambda W: _derivatives(W, *args, fixed, dense), lambda W: _objective(W, *args),
        lambda it: _h_solve(V, X, mu, c, it, dense),
        newton_steps=newton_steps, max_halvings=max_halvings,
    )  # fmt: skip
    gn = newton.norm(it.g)
    scale = 1.0 + newton.norm(b) + jnp.sum(wts * jnp.sqrt(jnp.sum(X * X, axis=1)))
    return it, gn, newton.converged(gn, scale)


def _a_matrices(
    state: EOFDBufferState, actions: jax.Array, half_rho: float, dense: bool
) -> jax.Array:
    """``A(x) = X^T H^{-1} X`` (N, K, K): ``(||x||^2 I_K - Y^T Y) / c`` with
    ``Y = chol^{-1} L^T U^T X`` (Woodbury), or by H's factor where ``dense``."""
    K, d = state.W.shape
    if dense:
        return newton.a_matrices(state.chol, actions, K)
    m, B = state.mu.shape[0], state.X.shape[0]
    r = m + B * K
    c = state.hparams.lam + half_rho * state.rho
    n = actions.shape[0]
    root_mu = jnp.sqrt(state.mu)
    Pv = jnp.einsum("kdm,nd->mnk", state.V.reshape(K, d, m), actions)  # V_k^T x
    xs = state.X @ actions.T  # (B, N): x_s^T x
    # L^T U^T X: the sketch rows scaled by root_mu; buffer block s is L_s^T (x_s^T x) I_K.
    Lv = root_mu[:, None, None] * Pv
    Lx = jnp.einsum("skj,sn->sjnk", state.root_J, xs).reshape(B * K, n, K)
    v = jnp.concatenate([Lv, Lx], axis=0).reshape(r, n * K)
    Y = lapack.lower_solve(state.chol, v).reshape(r, n, K)
    xx = jnp.sum(actions * actions, axis=1)
    A = xx[:, None, None] * jnp.eye(K, dtype=actions.dtype) - jnp.einsum("rni,rnj->nij", Y, Y)
    return A / c


class _Options(NamedTuple):
    K: int
    d: int
    m: int  # m_eff = min(m, K d)
    B: int  # buffer rows
    newton_steps: int
    max_halvings: int
    half_rho: float  # c = lam + half_rho rho
    anchored: bool  # eq. (3), else eq. (2)
    dense: bool  # H formed (D x D), else the Woodbury core (r x r)
    solver: str  # the FD core's (linalg.sketch.core_eigh)


def _init(opt: _Options, hp: ExactHyperparams) -> EOFDBufferState:
    learner.check_hparams(hp, opt.K, ("lam", "beta"))
    dtype = hp.lam.dtype
    K, d, B = opt.K, opt.d, opt.B
    fd = sketch.init(K * d, opt.m, dtype)
    n = K * d if opt.dense else opt.m + B * K
    state = EOFDBufferState(
        W=jnp.zeros((K, d), dtype), V=fd.V, mu=fd.mu, rho=fd.rho, b=jnp.zeros((K * d,), dtype),
        X=jnp.zeros((B, d), dtype), Y=jnp.zeros((B,), jnp.int32), filled=jnp.zeros((B,), bool),
        chol=jnp.sqrt(hp.lam) * jnp.eye(n, dtype=dtype), root_J=jnp.zeros((B, K, K), dtype),
        grad_norm=jnp.zeros((), dtype), t=jnp.zeros((), jnp.int32), hparams=hp,
        info=learner.empty_info(dtype),
        **no_failures(),
    )  # fmt: skip
    return fresh_state(state)


def _update(opt: _Options, state: EOFDBufferState, x: jax.Array, y: jax.Array) -> EOFDBufferState:
    """Evicts the slot's round (eq. 2 or 3), writes round t there and refits eq. (1)."""
    learner.check_update_args(x, y, opt.K, opt.d)
    hp = state.hparams
    dtype = state.W.dtype
    x = x.astype(dtype)
    y = jnp.asarray(y, jnp.int32)
    pos = state.t % opt.B
    # The slot's round leaves only where it holds one (the first B rounds evict nothing).
    V, mu, rho, b, fd_status = jax.lax.cond(
        state.filled[pos],
        lambda: _evict(state, state.X[pos], state.Y[pos], opt),
        lambda: (state.V, state.mu, state.rho, state.b, jnp.asarray(CONVERGED, jnp.int32)),
    )
    X, Y, filled = newton.write_row(state.X, state.Y, state.filled, pos, x, y)
    wts = filled.astype(dtype)
    c = hp.lam + opt.half_rho * rho
    it, gn, fit_status = _fit(
        state.W, V, mu, b, X, Y, wts, c,
        newton_steps=opt.newton_steps, max_halvings=opt.max_halvings, dense=opt.dense,
    )  # fmt: skip
    root_J, chol = it.aux
    # Finite inputs keep every field finite but for a factorisation that failed (all NaN, so
    # its diagonal tells) and a sketch whose eigensolve did (its status): O(D + r) numbers.
    ok = all_finite(x, it.x, b, mu, rho, gn, jnp.diagonal(chol)) & ~is_rejected(fd_status)
    info = learner.empty_info(dtype)._replace(newton_steps=it.steps, beta=hp.beta)
    # The buffers change in one row: a rejected round leaves it as it was.
    X, Y, filled = newton.write_row(state.X, state.Y, state.filled, pos, x, y, ok)
    new = state._replace(
        W=it.x, V=V, mu=mu, rho=rho, b=b, X=X, Y=Y, filled=filled, chol=chol, root_J=root_J,
        grad_norm=gn, t=state.t + 1, info=info,
    )  # fmt: skip
    return accept(state, new, ok, worst(fit_status, fd_status), written=("X", "Y", "filled"))


def eofd_buffered(
    *,
    num_outcomes: int,
    dim: int,
    sketch_size: int,
    buffer_size: int = DEFAULT_BUFFER,
    regularization: str = "robust",
    summary: str = "gradient",
    newton_steps: int = 5,
    max_halvings: int = 30,
    hessian: str = "auto",
    solver: str = "auto",
) -> Learner:
    """Buffered EOFD-MLogB (module docstring).

    Args:
      sketch_size: m >= 1 (``m_eff = min(m, K d)``), the sketch of the evicted rounds.
      buffer_size: B >= 1, the recent rounds fitted exactly.
      regularization: ``"robust"`` (``c = lam + rho/2``) or ``"paper"`` (``c = lam``).
      summary: ``"gradient"`` (eq. 2) or ``"anchor"`` (eq. 3).
      newton_steps, max_halvings: caps of each fit's Newton steps and step halvings.
      hessian: ``"woodbury"`` (the r x r core), ``"dense"`` (H formed) or ``"auto"`` (dense where
        ``D <= r``); the two agree to rounding.
      solver: the sketch's FD core, ``"auto"``, ``"lapack"`` or ``"batched"`` (speed only;
        :func:`~bandits_jax.linalg.sketch.core_eigh`).

    Returns:
      A :class:`~bandits_jax.learner_base.Learner` whose ``init`` takes
      :func:`~bandits_jax.mlogb.exact.exact_hyperparams`.
    """
    fn = "eofd_buffered"
    K, d = named(fn, learner.check_static, num_outcomes, dim, sketch_size)
    B = named(fn, check_int, "buffer_size", buffer_size, 1)
    N = named(fn, check_int, "newton_steps", newton_steps, 1)
    M = named(fn, check_int, "max_halvings", max_halvings, 1)
    robust = named(fn, confidence.check_regularization, regularization)
    if summary not in SUMMARIES:
        raise ValueError(f"{fn}: summary must be one of {SUMMARIES}, got {summary!r}")
    if hessian not in HESSIANS:
        raise ValueError(f"{fn}: hessian must be one of {HESSIANS}, got {hessian!r}")
    m = min(int(sketch_size), K * d)
    dense = hessian == "dense" or (hessian == "auto" and K * d <= m + B * K)
    lapack.check_solver(fn, solver)
    opt = _Options(K, d, m, B, N, M, 0.5 if robust else 0.0, summary == "anchor", dense, solver)
    parts = learner.optimistic(
        K,
        d,
        a_matrices=functools.partial(_a_matrices, half_rho=opt.half_rho, dense=dense),
        radius=lambda state: state.hparams.beta,
    )
    return learner.from_score_parts(
        K,
        d,
        functools.partial(_init, opt),
        update=functools.partial(_update, opt),
        hyperparams=exact_hyperparams,
        **parts,
    )


__all__ = ["DEFAULT_BUFFER", "HESSIANS", "SUMMARIES", "EOFDBufferState", "eofd_buffered"]
