"""EOFD-MLogB: OFUL-MLogB with a Frequent-Directions sketch of the Hessian.

He et al., Algorithm 2 (with Algorithm 1 for the sketch), eq. (16)-(25). Per round, with
``X = I_K kron x_t`` and the sketch ``Z_t = lam I + V diag(mu) V^T``:

1. one orthonormal extension ``X = V C + Q T`` (``linalg.sketch.extend``) serves the whole round:
   both low-rank terms (the surrogate at ``W_t``, the sketch term at ``W_{t+1}``) and the gradient
   ``vec((sigma - y) x^T) = X (sigma - y)`` lie in ``span[V, Q]``;
2. the surrogate ``Zt = Z_t + eta grad^2 l_t(W_t)`` (eq. 20-22) restricted to that span is
   ``lam I + diag(mu, 0) + A (eta grad sigma) A^T`` with ``A = [C; T]``: a diagonal plus a rank-K
   term. The Woodbury step (eq. 8) and Lemma 2's dual function (eq. 25, the same ``f(nu)``) are
   evaluated with the push-through Woodbury identity on (m+K)-vectors, so the surrogate needs
   neither its eigenvectors as a D x (m+K) matrix nor even its eigendecomposition (the paper's
   SVD of eq. 21 is what the numpy reference does; the tests check both agree);
3. Algorithm 1 absorbs ``grad^2 l_t(W_{t+1})`` with one eigendecomposition of the
   (m+K) x (m+K) core in the same basis (eq. 12-15), whose top m eigenvectors ``U`` give the
   new ``V = [V, Q] U``.

From K d = ``DEFER_MIN_DIM`` on (by default; ``spare_columns`` chooses) the basis rotation of
step 3 is deferred (as under the fast rule below): the state keeps ``V = basis @ R`` with
``basis`` (K d x n, ``n = m + c``, ``c = spare_columns``) orthonormal in its ``used`` columns
and zero after them, and ``R`` (n x m) small. After a truncation ``span V`` is a strict
subspace of the used columns (they also hold discarded directions), so the round's new
direction is orthogonalised against the whole used basis: with ``P = basis^T X``,
``X = basis P + Qb Tb`` (``Qb``: K new columns, written into the spare columns
``used .. used + K``), and the extension ``X = V C + Q T`` of step 1 is taken in basis
coordinates (``R`` for V, ``[P; Tb]`` for X): ``C = R^T P``, and Q has the coordinates
``[P - R C; Tb] T^+``. The FD core ``diag(mu, 0) + [C; T] M [C; T]^T`` is the same matrix as
with an explicit V, and the new V is ``basis' R'`` with ``R' = [R, Q's coordinates] U``, an
n x (m+K) x m product. A round so costs two passes over ``basis`` (one ``basis^T [X, w]``, one
product giving ``Qb`` and the w step; two more only when the residual needs a second
Gram-Schmidt pass), the next round's scores read it once more, and the K d x n x m product
``basis' R'`` is formed only when the spare columns run out, once every ``c / K`` rounds (then
``basis = [V, 0]``, ``R = I``, ``used = m``), in a ``lax.while_loop`` of zero or one trip
(:func:`bandits_jax.linalg.fast_fd.rebase`). A residual already in the used basis adds no
column (with ``m >= K d`` the basis is the identity and never grows). Without the deferral
(``c = 0``: ``basis`` is V, ``R`` is None) V is read three times per round (``V^T [X, w]``, one
D x (m+K) x (m+1) product forming the new V and the w step, the next round's scores) and twice
more only for a second Gram-Schmidt pass. Each deferred pass reads ``m + c`` columns, so ``c``
trades passes against products, and the deferral adds small fixed work (a second, (n, K)-sized
extension, the n x (m+K) x m rotation, scores through R): measured on one CPU core it pays only
at large K d (:func:`default_spare_columns`), where the D x (m+K) x m product dominates.
Putting ``eta grad sigma`` in the core directly (instead of ``P (eta D)^{1/2}`` of eq. 21)
means errata 4's negative-eigenvalue trap never arises.

The update's status (``info.status``) is the :func:`bandits_jax.status.worst` of Lemma 2's root
and step 3's eigensolve (``MAX_STEPS`` when a secular root hit its step cap), or ``NONFINITE``
when the update is rejected.

Options beyond Algorithm 2 (both off by default; the default is Algorithm 2 exactly):

- ``regularization="robust"`` (Robust Frequent Directions, Luo, Chen, Zhang & Zhang, JMLR 2019):
  ``Z_t = (lam + alpha_t) I + V diag(mu) V^T`` with ``alpha_t = rho_{1:t-1}/2``, half of the mass
  the sketch discarded before round t (the ``rho`` the state holds when round t starts; round t's
  own truncation enters ``Z_{t+1}``). The same ``lam_t = lam + alpha_t`` is used in every place Z
  is: the surrogate and Woodbury step (eq. 8, 20-22), Lemma 2's projection (the part outside
  ``span[V, Q]`` scales by ``lam_t/(lam_t + nu)``, eq. 23-25), Lemma 1's ``A(x)`` (eq. 16-19) and
  the ``||W_{s+1} - W_s||_{Z_s}`` of eq. (36). FD's one-sided error ``G <= M <= G + rho I``
  becomes two-sided, ``Z - rho/2 I <= lam I + M <= Z + rho/2 I``: the factor ``Delta_T`` of
  Lemma 5/12 becomes ``(lam + rho)/(lam + rho/2) < 2``, the telescoping of Theorem 1 loses at most
  ``2 S^2 rho_{1:T}``, and ``Delta_T = 1 + rho/(2 lam)`` bounds the distortion both ways
  (derivation in :mod:`bandits_jax.mlogb.confidence`, applied to the theory/order radius).
- an adaptive sketch size (the paper's closing remark): ``max_sketch_size=m_max`` and
  ``delta_target=tau``. Arrays have the static capacity ``m_max``; the state's ``rank`` (int32,
  starts at ``sketch_size``) is the active rank: weights beyond it are 0. At each truncation
  the rank becomes the smallest ``r'`` in ``[rank, m_max]`` whose discarded eigenvalue keeps
  ``Delta_t`` (``1 + rho/lam``, robust ``1 + rho/(2 lam)``) at or below ``tau`` (``m_max`` if
  none), so the rank is non-decreasing. The radius uses the active rank.
- ``sketch_rule="fast"``: Fast Frequent Directions (Ghashami, Liberty, Phillips & Woodruff 2016,
  Algorithm 3) in EOFD's spectral form, for very large K d. The sketch holds up to a capacity
  ``c`` (``buffer_size``, default 2m) of directions: each round's K new directions are added to
  the core without truncation (its eigendecomposition is still taken every round, by K
  secular-equation updates, since the Woodbury step, Lemma 1 and Lemma 2 need Z's eigenbasis);
  only when the next block would not fit is the sketch shrunk to m directions by
  ``delta = lambda_{m+1}`` (added to ``rho``). FD's ``G <= M <= G + rho I`` holds, with
  ``rho <= (tr M - tr G)/(m + 1)``, and ``Z_{t+1} <= Z_t + grad^2 l_t(W_{t+1})`` as in the
  paper's telescoping. The basis rotation is deferred: ``V = basis @ R`` with ``basis``
  (K d x (c + K)) orthonormal in its used columns (a round's Q is written into a spare column)
  and R small, so a round costs two passes over ``basis`` (``basis^T [X, w]`` and one product
  giving Q and the new w) plus O(c^2 K) small work, and the O(K d c m) product ``basis @ R`` is
  formed only at a shrink, once every ``(c - m)/K`` rounds. Radius (eq. 36, Lemma 6): ``rho``
  is the sum of the shrinks' deltas, and the rank is the state's ``rank``, the number of
  sketch directions (between m and c once filled; ``max(rank, 1)`` since
  ``m ln(1 + a/m)`` grows with m): so the radius is that of a sketch of size ``rank``. The
  robust regularisation works unchanged (``lam + rho/2`` everywhere Z is used). An adaptive
  sketch size is rejected: the buffer already grows the rank between shrinks, and a rank kept
  above m at a shrink leaves less room, so shrinks come more often until every round shrinks.
  Speed: on a 2-core CPU at K d = 10^5, m = 100 (``python -m benchmarks.fast_fd``,
  docs/bench/fast_fd.json) the fast rule was slower than the per-round rule (0.69x), which
  defers its rotation too at that size: the fast rule's passes read a wider basis (c + K = 201
  columns against m + m/4 = 125), they are memory-bound, and its core is up to twice as large.
  It does discard less (a smaller ``rho`` at the same m).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from bandits_jax import checks
from bandits_jax.linalg import fast_fd, lowrank, projection, sketch
from bandits_jax.mlogb import confidence, model
from bandits_jax.mlogb import learner as base
from bandits_jax.mlogb.hyperparams import MLogBHyperparams
from bandits_jax.status import NONFINITE, worst


class EOFDState(NamedTuple):
    """EOFD-MLogB state (per-round sketch rule): the sketch is ``V diag(mu) V^T`` with
    ``V = basis @ R`` (deferred basis rotation; module docstring).

    Attributes:
      W: (K, d) estimate ``W_t``.
      basis: (K d, n) with ``n = m_eff + c`` (``c`` spare columns): columns ``0 .. used``
        orthonormal (or zero), the rest zero. With ``c = 0`` (no deferral) it is V itself.
      R: (n, m_eff) rotation with orthonormal columns, zero rows at and after ``used``; None
        with ``c = 0``.
      mu: (m_eff,) weights; rho: ``rho_{1:t-1}`` (``m_eff`` is the capacity
        ``min(max_sketch_size, K d)`` of an adaptive sketch).
      rank: active rank (int32): ``m_eff`` for a fixed sketch size; weights beyond it are 0.
      used: int32, basis columns in use (where the next round's new direction is written).
      acc: running sum of eq. (36)'s last line (theory radius).
      t: completed updates (int32).
      hparams: :class:`MLogBHyperparams`.
      info: :class:`UpdateInfo` of the last update.
    """

    W: jax.Array
    basis: jax.Array
    R: jax.Array
    mu: jax.Array
    rho: jax.Array
    rank: jax.Array
    used: jax.Array
    acc: jax.Array
    t: jax.Array
    hparams: MLogBHyperparams
    info: base.UpdateInfo

    @property
    def V(self) -> jax.Array:
        """(K d, m_eff) sketch directions ``basis @ R`` (read-only; formed on each access, a
        O(K d n m) product, batched over leading axes), ``basis`` when not deferred."""
        return self.basis if self.R is None else self.basis @ self.R


class EOFDFastState(NamedTuple):
    """EOFD-MLogB state under ``sketch_rule="fast"``: the sketch is ``V diag(mu) V^T`` with
    ``V = basis @ R`` (deferred rotation).

    Attributes:
      W: (K, d) estimate ``W_t``.
      basis: (K d, c + K) columns ``0 .. used`` orthonormal (or zero), the rest zero; ``c`` is
        the capacity (``buffer_size``, default 2m) and K more columns take a round's new ones.
      R: (c + K, c + K) rotation; columns at and after ``rank`` are zero.
      mu: (c + K,) weights, descending, zero at and after ``rank``; rho: ``rho_{1:t-1}`` (the sum of
        the shrinks' ``delta``).
      rank: int32, number of sketch directions (between m and c once the sketch has filled).
      used: int32, basis columns in use (where the next round's ``Q`` is written).
      acc, t, hparams, info: as :class:`EOFDState`.
    """

    W: jax.Array
    basis: jax.Array
    R: jax.Array
    mu: jax.Array
    rho: jax.Array
    rank: jax.Array
    used: jax.Array
    acc: jax.Array
    t: jax.Array
    hparams: MLogBHyperparams
    info: base.UpdateInfo


def lemma1_matrices(
    V: jax.Array,
    mu: jax.Array,
    lam: jax.Array,
    actions: jax.Array,
    K: int,
    R: jax.Array | None = None,
):
    """``A(x)`` of Lemma 1, eq. (18), for every row of ``actions`` (N, d): (N, K, K).

    ``C[n, i, k] = <x_n, u_ki>`` with ``u_ki`` block ``i`` of column ``k`` of V; cost O(N K d m).
    ``lam`` is Z's scalar part (``lam + rho/2`` for the robust regularisation). With ``R`` the
    directions are ``V @ R`` (the deferred rotation of both sketch rules, V then being the basis;
    O(N K n m) more).
    """
    d = actions.shape[1]
    Vr = V.reshape(K, d, V.shape[1])
    # One (N, d) x (d, m) product per block: no transposed copy of V.
    C = jnp.stack([actions @ Vr[i] for i in range(K)], axis=1)  # (N, K, m)
    if R is not None:
        C = C @ R
    w = 1.0 / (mu + lam) - 1.0 / lam
    A = jnp.einsum("nik,k,njk->nij", C, w, C)
    xx = jnp.sum(actions * actions, axis=1) / lam
    return A + xx[:, None, None] * jnp.eye(K, dtype=actions.dtype)


class _Step(NamedTuple):
    """The small part of one EOFD round (everything but the sketch and the D-sized maps)."""

    coef: jax.Array  # w_new = alpha w + [V, Q] coef
    alpha: jax.Array
    z_new: jax.Array  # W_{t+1} x_t
    sol: projection.DualSolution
    acc_increment: jax.Array


def _newton_step(
    hp: MLogBHyperparams,
    lam: jax.Array,
    mu: jax.Array,
    A: jax.Array,
    bw: jax.Array,
    Wx: jax.Array,
    w_sq0: jax.Array,
    y: jax.Array,
    max_newton_steps: int,
    dim: int,
) -> _Step:
    """Newton step (eq. 8, 20-22), projection (Lemma 2, eq. 23-25) and the eq. (36) increment
    in the orthonormal basis ``[V, Q]`` of a round: ``A = [V, Q]^T X``, ``bw = [V, Q]^T w``,
    ``Wx = W_t x``, ``w_sq0 = ||w||^2``, ``lam`` Z's scalar part, ``mu`` the weights of V."""
    K = A.shape[1]
    dtype = A.dtype
    eta = hp.eta
    # Surrogate Zt = Z_t + eta grad^2 l_t(W_t) (eq. 20-22) restricted to span[V, Q]:
    # lam I + diag(mu, 0) + A (eta grad sigma) A^T, a diagonal plus rank K. Its inverse is
    # applied by the Woodbury identity instead of an eigendecomposition (exact; eq. 21's SVD
    # is the numpy reference's route).
    s = model.sigma(Wx)
    J = eta * model.jacobian(s)
    diag = jnp.concatenate([mu, jnp.zeros((K,), dtype)]) + lam

    def zt_solve(shift, v):
        return lowrank.diag_lowrank_solve(diag + shift, A, J, v)

    # Gradient step (eq. 8): grad = X (sigma - y) = [V, Q] A (sigma - y),
    # w' = w - eta [V, Q] step.
    g = A @ (s - model.onehot(y, K, dtype))
    step = zt_solve(0.0, g)
    b = bw - eta * step  # [V, Q]^T w'
    w_sq = jnp.maximum(w_sq0 - 2.0 * eta * (bw @ step) + eta**2 * (step @ step), 0.0)

    # Projection (Lemma 2, eq. 23-25). The part of w' outside span[V, Q] scales by
    # lam/(lam+nu); inside, y(nu) = (M + nu I)^{-1} M b = b - nu (M + nu I)^{-1} b with
    # M = Zt restricted, so f(nu) = r0 lam^2/(lam+nu)^2 + ||y(nu)||^2 is eq. (25) and
    # f'(nu) = -2 r0 lam^2/(lam+nu)^3 - 2 y^T (M + nu I)^{-1} y.
    r0 = jnp.maximum(projection.effective_norm_sq(w_sq, hp.S) - b @ b, 0.0)

    def f_and_df(nu):
        yv = b - nu * zt_solve(nu, b)
        p = lam + nu
        f = r0 * lam**2 / p**2 + yv @ yv
        df = -2.0 * r0 * lam**2 / p**3 - 2.0 * (yv @ zt_solve(nu, yv))
        return f, df

    curvature = jnp.max(diag) + jnp.trace(J @ (A.T @ A))  # >= lambda_max(Zt)
    sol = projection.solve_dual(f_and_df, w_sq, hp.S, curvature, max_steps=max_newton_steps)
    nu = sol.nu
    alpha = lam / (lam + nu)
    y_nu = b - nu * zt_solve(nu, b)
    # w_new = alpha (w' - [V,Q] b) + [V,Q] y_nu = alpha w + [V,Q] coef. W_new x needs no pass
    # over V: (([V,Q] coef) as K x d) x = A^T coef, since X = [V, Q] A.
    coef = y_nu - alpha * b - alpha * eta * step
    z_new = alpha * Wx + A.T @ coef
    # Eq. (36) running sum with Z_t (before the sketch absorbs the new term), from small
    # quantities: [V,Q]^T (w_new - w) = (alpha - 1) bw + coef, and V^T Q = 0.
    m = mu.shape[0]
    dc = (alpha - 1.0) * bw + coef
    dv = dc[:m]
    step_z_sq = (
        lam * jnp.sum(dc * dc)
        + lam * (alpha - 1.0) ** 2 * jnp.maximum(w_sq0 - bw @ bw, 0.0)
        + jnp.sum(mu * dv * dv)
    )
    step_x = z_new - Wx
    inc = confidence.increment(
        hp, num_outcomes=K, dim=dim, step_x_sq=jnp.sum(step_x**2), step_z_sq=step_z_sq
    )
    return _Step(coef=coef, alpha=alpha, z_new=z_new, sol=sol, acc_increment=inc)


def _extend_deferred(
    basis: jax.Array, R: jax.Array, used: jax.Array, X: jax.Array, P: jax.Array
) -> tuple[sketch.Extension, sketch.Extension]:
    """The extension of Algorithm 1 (eq. 12-14) when ``V = basis @ R``: ``(ext_b, ext)``.

    ``ext_b`` extends the whole used basis by ``X`` (``X = basis P + Qb Tb``, ``P = basis^T X``
    given, ``Qb`` implicit, to be written into the spare columns ``used .. used + K``). After a
    per-round truncation ``span V`` is a strict subspace of the used columns, so ``X``'s
    residual against ``V`` is not ``Qb Tb``: ``ext`` is the extension ``X = V C + Q T`` of
    :func:`bandits_jax.linalg.sketch.extend` taken in basis coordinates, with ``R`` for ``V``
    and ``X``'s coordinates ``[P; Tb]`` (``Tb`` placed at rows ``used .. used + K``) for ``X``:
    ``C = R^T P`` and ``Q`` has coordinates ``(P - R C) T^+`` on the old columns and
    ``Tb T^+`` on the new ones. Only (n, K)-sized work beyond ``ext_b``; the FD core
    ``diag(mu, 0) + [C; T] M [C; T]^T`` is the same matrix as with an explicit V."""
    n, K = R.shape[0], X.shape[1]
    ext_b = sketch.extend(basis, X, P)
    # ext_b.C is zero at rows >= used (zero columns), where Tb goes.
    place = lax.dynamic_update_slice(jnp.zeros((n, K), X.dtype), ext_b.T, (used, jnp.int32(0)))
    return ext_b, sketch.extend(R, ext_b.C + place)


def _pass2_coeffs(on_basis: jax.Array, on_q: jax.Array) -> jax.Array:
    """Coefficients in ``[basis, Q]`` of ``[Q, step]`` for one product
    (:func:`bandits_jax.linalg.sketch.apply_basis`) giving a round's K new columns ``Q`` and the
    w step, given the step's coordinates ``on_basis`` (n,) in the basis and ``on_q`` (K,) in Q."""
    n, K = on_basis.shape[0], on_q.shape[0]
    dtype = on_basis.dtype
    top = jnp.concatenate([jnp.zeros((n, K), dtype), on_basis[:, None]], axis=1)
    bottom = jnp.concatenate([jnp.eye(K, dtype=dtype), on_q[:, None]], axis=1)
    return jnp.concatenate([top, bottom], axis=0)


def eofd(
    *,
    num_outcomes: int,
    dim: int,
    sketch_size: int,
    max_newton_steps: int = 50,
    regularization: str = "paper",
    max_sketch_size: int | None = None,
    delta_target: float | None = None,
    sketch_rule: str = "per_round",
    buffer_size: int | None = None,
    spare_columns: int | None = None,
) -> base.MLogBLearner:
    """EOFD-MLogB (Algorithm 2), optionally robust, with an adaptive sketch size, or with the
    fast sketch rule.

    Args:
      num_outcomes: K >= 1 (K = 1 is the logistic bandit with decision rule eq. 16).
      dim: action dimension d.
      sketch_size: m >= 1; ``m_eff = min(m, K d)`` (errata 1: m >= K d reproduces OFUL-MLogB).
        With ``max_sketch_size`` it is the initial active rank.
      max_newton_steps: cap of the Lemma 2 root loop.
      regularization: ``"paper"`` (``Z = lam I + V diag(mu) V^T``, Algorithm 2) or ``"robust"``
        (``Z = (lam + rho/2) I + V diag(mu) V^T``, Robust FD; see the module docstring).
      max_sketch_size: capacity ``m_max >= sketch_size`` of an adaptive sketch (capped at K d);
        needs ``delta_target``.
      delta_target: ``tau >= 1``: the active rank grows so that ``Delta_t <= tau`` while it can
        (``inf``: never grows; ``1``: grows whenever mass would be discarded).
      sketch_rule: ``"per_round"`` (Algorithm 1, the paper) or ``"fast"`` (Fast FD with a
        deferred basis rotation; module docstring). The fast rule cannot be combined with an
        adaptive sketch size.
      buffer_size: capacity ``c`` of the fast rule (default ``2 m``, Ghashami et al., or
        ``m + K`` when K > m; capped at K d); needs ``sketch_rule="fast"`` and ``c >= m + K``
        (room for one round between shrinks).
      spare_columns: spare basis columns ``c >= K`` of the per-round rule's deferred rotation
        (module docstring): V is formed once every ``c / K`` rounds, and every pass over the
        basis reads ``m + c`` columns; ``0``: no deferral (V formed every round, one
        D x (m+K) x m product). Default :func:`default_spare_columns`: 0 below
        K d = ``DEFER_MIN_DIM``, else about ``m / 4``. Not for the fast rule.

    Returns:
      An :class:`~bandits_jax.mlogb.learner.MLogBLearner`.

    Raises:
      ValueError: naming the offending argument.
    """
    K, d = base.check_static(num_outcomes, dim, sketch_size, max_newton_steps=max_newton_steps)
    robust = confidence.check_regularization(regularization)
    adaptive = _check_adaptive(sketch_size, max_sketch_size, delta_target)
    D = K * d
    capacity = _check_rule(sketch_rule, buffer_size, adaptive, min(int(sketch_size), D), K, D)
    m_eff = min(int(max_sketch_size if adaptive else sketch_size), D)
    rank0 = min(int(sketch_size), m_eff)
    tau = float(delta_target) if adaptive else None
    spare = _check_spare(spare_columns, capacity is not None, m_eff, K, D)

    def init(hp: MLogBHyperparams) -> EOFDState:
        base.check_hparams(hp, K)
        dtype = hp.lam.dtype
        fd = sketch.init(D, m_eff, dtype)
        return EOFDState(
            W=jnp.zeros((K, d), dtype),
            basis=jnp.concatenate([fd.V, jnp.zeros((D, spare), dtype)], axis=1),
            R=jnp.eye(m_eff + spare, m_eff, dtype=dtype) if spare else None,
            mu=fd.mu,
            rho=fd.rho,
            rank=jnp.full((), rank0, jnp.int32),
            used=jnp.full((), m_eff, jnp.int32),
            acc=jnp.zeros((), dtype),
            t=jnp.zeros((), jnp.int32),
            # Own copies: a donated state must not delete the caller's hyperparameter arrays.
            hparams=jax.tree_util.tree_map(jnp.array, hp),
            info=base.empty_info(dtype),
        )

    def z_scalar(state: EOFDState) -> jax.Array:
        """Z's scalar part: ``lam`` (paper) or ``lam + rho_{1:t-1}/2`` (robust)."""
        lam = state.hparams.lam
        return lam + 0.5 * state.rho if robust else lam

    def radius_at(state, rank) -> jax.Array:
        """Eq. (36)/(27) with the sketch rank ``rank`` (static int or int32 array)."""
        return confidence.radius(
            state.hparams,
            state.t,
            state.rho,
            state.acc,
            num_outcomes=K,
            dim=d,
            rank=rank,
            robust=robust,
        )

    def beta_of(state: EOFDState) -> jax.Array:
        if not (robust or adaptive):
            return base.radius_of(state, num_outcomes=K, dim=d, rank=m_eff)
        return radius_at(state, state.rank if adaptive else m_eff)

    def a_matrices(state: EOFDState, actions: jax.Array) -> jax.Array:
        return lemma1_matrices(state.basis, state.mu, z_scalar(state), actions, K, state.R)

    def update(state: EOFDState, x: jax.Array, y: jax.Array) -> EOFDState:
        base.check_update_args(x, y, K, d)
        hp = state.hparams
        dtype = state.W.dtype
        x = x.astype(dtype)
        lam = z_scalar(state)
        B, R, mu, used = state.basis, state.R, state.mu, state.used
        m = mu.shape[0]
        n = m + spare
        w = state.W.reshape(-1)
        beta_used = beta_of(state)

        # Pass 1 over the basis: basis^T [X, w]. One extension of [V] by span(I_K kron x) serves
        # the whole round, taken in basis coordinates (V^T = R^T basis^T: no pass over V).
        X = jnp.kron(jnp.eye(K, dtype=dtype), x[:, None])  # (D, K)
        P = B.T @ jnp.concatenate([X, w[:, None]], axis=1)
        if spare:
            ext_b, ext = _extend_deferred(B, R, used, X, P[:, :K])
            Vw = R.T @ P[:, K]
        else:  # V is the basis: one extension, the new V formed below
            ext_b = ext = sketch.extend(B, X, P[:, :K])
            Vw = P[:, K]
        Wx = state.W @ x  # = X^T w
        bw = jnp.concatenate([Vw, sketch.q_coords(ext, Wx, Vw)])  # [V, Q]^T w

        st = _newton_step(hp, lam, mu, ext.coords, bw, Wx, jnp.sum(w * w), y, max_newton_steps, d)
        coef, alpha, z_new, sol = st.coef, st.alpha, st.z_new, st.sol

        # Algorithm 1: absorb grad^2 l_t(W_{t+1}) (eq. 12-15) in the same basis.
        M_new = model.jacobian(model.sigma(z_new))
        if adaptive:
            budget = confidence.discard_budget(state.rho, hp.lam, tau, robust)
            tr, rank_new = sketch.truncate_adaptive(mu, ext, M_new, state.rank, budget)
        else:
            tr, rank_new = sketch.truncate(mu, ext, M_new), state.rank

        acc = state.acc + st.acc_increment
        small = (x, coef, alpha, z_new, tr.U, tr.mu, tr.sigma2, acc, sol.nu)
        if spare:
            # The new V = [V, Q] U = basis' R_new and the step [V, Q] coef = basis' c_w, in
            # basis coordinates (basis' = basis with Qb written in): (n, m)-sized work.
            R_new, c_w = sketch.map_basis(R, ext, tr.U, coef)
            small = small + (R_new, c_w)

        # NaN guard on the small quantities only (basis, w are finite by induction, Qb is finite
        # when x is): a rejected update maps the identity / writes zero columns where zero
        # columns are, and keeps the small state, so the D-sized work is done once either way.
        ok = jnp.all(jnp.stack([jnp.all(jnp.isfinite(a)) for a in small]))
        ext_b = ext_b._replace(
            X=jnp.where(ok, ext_b.X, 0.0),
            C=jnp.where(ok, ext_b.C, 0.0),
            T_pinv=jnp.where(ok, ext_b.T_pinv, 0.0),
        )
        if spare:
            # Pass 2: Qb and the w step in one product; then Qb goes into the spare columns and,
            # once they run out, V = basis' R_new is formed (the only O(K d n m) product).
            # c_w's rows used .. used + K are the step's coordinates on Qb.
            c_w = jnp.where(ok, c_w, 0.0)
            on_q = lax.dynamic_slice(c_w, (used,), (K,))
            out = sketch.apply_basis(B, ext_b, _pass2_coeffs(c_w, on_q))
            grown = used + jnp.where(jnp.any(ext_b.valid), K, 0).astype(jnp.int32)
            full = ok & (grown + K > n)  # the next round's Qb would not fit
            basis = fast_fd.rebase(B, out[:, :K], used, R_new, full)
            R_new = jnp.where(full, jnp.eye(n, m, dtype=dtype), R_new)
            used_new = jnp.where(full, m, grown).astype(jnp.int32)
            dw = out[:, K]
        else:
            # The new V and the step in one D x (m+K) x (m+1) product ([V, Q] [I; 0] = V when
            # rejected, with X and C zeroed).
            U = jnp.where(ok, tr.U, jnp.eye(m + K, m, dtype=dtype))
            basis, dw = sketch.map_basis(B, ext_b, U, jnp.where(ok, coef, 0.0))
            R_new, used_new = R, used
        w_new = jnp.where(ok, alpha, 1.0) * w + dw

        info = base.UpdateInfo(
            projected=sol.active,
            nu=sol.nu,
            newton_steps=sol.steps,
            status=jnp.where(ok, worst(sol.status, tr.status), NONFINITE).astype(jnp.int32),
            beta=beta_used,
        )
        old = (R, state.mu, state.rho, state.rank, used, state.acc, state.t, state.info)
        new = (R_new, tr.mu, state.rho + tr.sigma2, rank_new, used_new, acc, state.t + 1, info)
        R_n, mu_n, rho_n, rank_n, used_n, acc_n, t_n, info_n = checks.guard(ok, new, old)
        info_n = info_n._replace(status=info.status)
        return EOFDState(
            W=w_new.reshape(K, d),
            basis=basis,
            R=R_n,
            mu=mu_n,
            rho=rho_n,
            rank=rank_n,
            used=used_n,
            acc=acc_n,
            t=t_n,
            hparams=hp,
            info=info_n,
        )

    if capacity is not None:
        return _fast(
            K=K,
            d=d,
            m=m_eff,
            capacity=capacity,
            max_newton_steps=max_newton_steps,
            z_scalar=z_scalar,
            radius_at=radius_at,
        )

    return base.assemble(
        num_outcomes=K,
        dim=d,
        rank=m_eff,
        init=init,
        a_matrices=a_matrices,
        update=update,
        radius=beta_of,
    )


def _fast(*, K, d, m, capacity, max_newton_steps, z_scalar, radius_at) -> base.MLogBLearner:
    """The learner under ``sketch_rule="fast"`` (module docstring)."""
    # Arrays hold c + K slots so that a round's Q always fits (fast_fd.spectral_round).
    D, c = K * d, capacity + K

    def init(hp: MLogBHyperparams) -> EOFDFastState:
        base.check_hparams(hp, K)
        dtype = hp.lam.dtype
        return EOFDFastState(
            W=jnp.zeros((K, d), dtype),
            basis=jnp.zeros((D, c), dtype),
            R=jnp.zeros((c, c), dtype),
            mu=jnp.zeros((c,), dtype),
            rho=jnp.zeros((), dtype),
            rank=jnp.zeros((), jnp.int32),
            used=jnp.zeros((), jnp.int32),
            acc=jnp.zeros((), dtype),
            t=jnp.zeros((), jnp.int32),
            hparams=jax.tree_util.tree_map(jnp.array, hp),
            info=base.empty_info(dtype),
        )

    def beta_of(state: EOFDFastState) -> jax.Array:
        # Lemma 6 with the rank of G_t (<= c); m ln(1 + a/m) grows with m, and 1 bounds rank 0.
        return radius_at(state, jnp.maximum(state.rank, 1))

    def a_matrices(state: EOFDFastState, actions: jax.Array) -> jax.Array:
        return lemma1_matrices(state.basis, state.mu, z_scalar(state), actions, K, state.R)

    def update(state: EOFDFastState, x: jax.Array, y: jax.Array) -> EOFDFastState:
        base.check_update_args(x, y, K, d)
        hp = state.hparams
        dtype = state.W.dtype
        x = x.astype(dtype)
        lam = z_scalar(state)
        B, R, mu = state.basis, state.R, state.mu
        w = state.W.reshape(-1)
        beta_used = beta_of(state)

        # Pass 1 over the basis: basis^T [X, w]. The extension is taken in basis coordinates
        # (its Q is the same in V = basis R coordinates, as span V = span of the used columns).
        X = jnp.kron(jnp.eye(K, dtype=dtype), x[:, None])
        P = B.T @ jnp.concatenate([X, w[:, None]], axis=1)
        ext_b = sketch.extend(B, X, P[:, :K])
        ext = ext_b._replace(C=R.T @ ext_b.C)
        Vw = R.T @ P[:, K]
        Wx = state.W @ x
        bw = jnp.concatenate([Vw, sketch.q_coords(ext, Wx, Vw)])
        st = _newton_step(hp, lam, mu, ext.coords, bw, Wx, jnp.sum(w * w), y, max_newton_steps, d)
        M_new = model.jacobian(model.sigma(st.z_new))
        rot = fast_fd.spectral_round(R, mu, state.rank, state.used, ext, M_new, m)
        acc = state.acc + st.acc_increment

        small = (x, st.coef, st.alpha, st.z_new, rot.R, rot.mu, rot.delta, rot.coeffs, acc)
        ok = jnp.all(jnp.stack([jnp.all(jnp.isfinite(a)) for a in small + (st.sol.nu,)]))
        coef = jnp.where(ok, st.coef, 0.0)
        ext_b = ext_b._replace(
            X=jnp.where(ok, ext_b.X, 0.0),
            C=jnp.where(ok, ext_b.C, 0.0),
            T_pinv=jnp.where(ok, ext_b.T_pinv, 0.0),
        )
        # Pass 2: Q and [V, Q] coef = basis (R coef_V) + Q coef_Q in one product.
        out = sketch.apply_basis(B, ext_b, _pass2_coeffs(R @ coef[:c], coef[c:]))
        rot = rot._replace(shrink=rot.shrink & ok)
        basis = fast_fd.commit_basis(B, out[:, :K], rot, state.used)
        w_new = jnp.where(ok, st.alpha, 1.0) * w + out[:, K]

        status = jnp.where(ok, worst(st.sol.status, rot.status), NONFINITE).astype(jnp.int32)
        info = base.UpdateInfo(st.sol.active, st.sol.nu, st.sol.steps, status, beta_used)
        old = (state.R, state.mu, state.rho, state.rank, state.used, state.acc, state.t, state.info)
        new = (rot.R, rot.mu, state.rho + rot.delta, rot.rank, rot.used, acc, state.t + 1, info)
        R_n, mu_n, rho_n, rank_n, used_n, acc_n, t_n, info_n = checks.guard(ok, new, old)
        info_n = info_n._replace(status=status)
        W_n = w_new.reshape(K, d)
        return EOFDFastState(W_n, basis, R_n, mu_n, rho_n, rank_n, used_n, acc_n, t_n, hp, info_n)

    return base.assemble(
        num_outcomes=K,
        dim=d,
        rank=c,
        init=init,
        a_matrices=a_matrices,
        update=update,
        radius=beta_of,
    )


SKETCH_RULES = ("per_round", "fast")


# K d from which the per-round rule defers its basis rotation by default (see
# :func:`default_spare_columns`).
DEFER_MIN_DIM = 1000


def default_spare_columns(m: int, K: int, D: int) -> int:
    """Default number ``c`` of spare basis columns of the per-round rule (``D = K d``): 0 (no
    deferral, V formed every round) below ``DEFER_MIN_DIM``, else about ``m / 4``, a multiple
    of K (``c / K`` rounds between materialisations), at least K.

    Every pass over the basis reads ``m + c`` columns and ``V = basis @ R`` costs
    ``K d (m + c) m`` once every ``c / K`` rounds, so the per-round cost is about
    ``a (m + c) + b (m + c) m K / c`` (``a`` a pass, ``b`` a product, per basis entry), least
    at ``c = m sqrt(b K / a)``; the deferral also adds small fixed work per round (a second
    extension in basis coordinates, the rotation of R, scores through R). Measured on one CPU
    core, float64, full rounds of ``benchmarks.mlogb_speed`` (30 actions scored, then the
    update; ``spare_columns=0`` against the default): the optimum c was broad, between
    ``m / 8`` and ``m / 4``; the deferral was slower than forming V every round at K d = 400
    (``(100, 4, 40)``, ``(400, 1, 40)``), equal at ``(785, 1, 78)`` and faster from K d = 1600
    on: hence the threshold."""
    if D < DEFER_MIN_DIM:
        return 0
    if m >= D:
        return K  # errata 1: X always lies in span V, no column is ever added
    return max(K, (m // 4) // K * K)


def _check_spare(spare_columns: object, fast: bool, m: int, K: int, D: int) -> int:
    """Eager validation of ``spare_columns``; the spare width ``c`` (0 for the fast rule)."""
    if fast:
        if spare_columns is not None:
            raise ValueError(
                f'spare_columns is for sketch_rule="per_round" (the fast rule has buffer_size), '
                f"got {spare_columns!r}"
            )
        return 0
    if spare_columns is None:
        return default_spare_columns(m, K, D)
    if (
        not isinstance(spare_columns, int | np.integer)
        or isinstance(spare_columns, bool)
        or not (spare_columns == 0 or spare_columns >= K)
    ):
        raise ValueError(
            f"spare_columns must be 0 (no deferral) or an int >= num_outcomes = {K}, "
            f"got {spare_columns!r}"
        )
    return int(spare_columns)


def _check_rule(
    sketch_rule: object, buffer_size: object, adaptive: bool, m: int, K: int, D: int
) -> int | None:
    """Eager validation of the sketch rule; the fast rule's capacity (None for per-round)."""
    if not isinstance(sketch_rule, str) or sketch_rule not in SKETCH_RULES:
        raise ValueError(f"sketch_rule must be one of {SKETCH_RULES}, got {sketch_rule!r}")
    if sketch_rule == "per_round":
        if buffer_size is not None:
            raise ValueError(f'buffer_size needs sketch_rule="fast", got {buffer_size!r}')
        return None
    if adaptive:
        raise ValueError(
            'sketch_rule="fast" cannot be combined with max_sketch_size/delta_target: the fast '
            "rule already holds up to buffer_size directions between shrinks, and a rank grown "
            "at a shrink would leave less room, so shrinks (O(K d c m) each) would come more "
            "often until every round shrinks; use the per-round rule for an adaptive size"
        )
    if buffer_size is None:
        return min(m + max(m, K), D)
    if (
        not isinstance(buffer_size, int | np.integer)
        or isinstance(buffer_size, bool)
        or buffer_size < m + K
    ):
        raise ValueError(
            f"buffer_size must be an int >= sketch_size + num_outcomes = {m + K}, "
            f"got {buffer_size!r}"
        )
    return min(int(buffer_size), D)


def _check_adaptive(sketch_size: int, max_sketch_size: object, delta_target: object) -> bool:
    """Eager validation of the adaptive sketch size; True when it is on."""
    if max_sketch_size is None and delta_target is None:
        return False
    if max_sketch_size is None:
        raise ValueError("delta_target needs max_sketch_size (the capacity of the sketch)")
    if delta_target is None:
        raise ValueError("max_sketch_size needs delta_target (the target for Delta_t)")
    if (
        not isinstance(max_sketch_size, int | np.integer)
        or isinstance(max_sketch_size, bool)
        or max_sketch_size < sketch_size
    ):
        raise ValueError(
            f"max_sketch_size must be an int >= sketch_size = {sketch_size}, "
            f"got {max_sketch_size!r}"
        )
    if (
        not isinstance(delta_target, int | float | np.integer | np.floating)
        or isinstance(delta_target, bool)
        or not delta_target >= 1.0  # also rejects NaN
    ):
        raise ValueError(f"delta_target must be a number >= 1 (inf allowed), got {delta_target!r}")
    return True
