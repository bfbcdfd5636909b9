"""EOFD-MLogB: OFUL-MLogB with a Frequent-Directions sketch of the Hessian.

He et al., Algorithm 2 (with Algorithm 1 for the sketch), eq. (16)-(25). With ``X = I_K kron x_t``
and the sketch ``Z_t = lam I + V diag(mu) V^T``, selection is Lemma 1's optimistic index
(eq. 16 / 19). An update (:func:`_update`) is pass 1 (``basis^T [X, w]`` and the extension
``X = V C + Q T``, eq. 12-14), the Newton step (eq. 8, 20-22: the surrogate is a diagonal plus
rank K in ``span[V, Q]``) and Lemma 2's projection (eq. 23-25) as solves on (m+K)-vectors, the
FD update with ``grad^2 l_t(W_{t+1})`` (Algorithm 1, eq. 12-15), the rejection of non-finite
results (``NONFINITE``, the state kept) and pass 2 (the new basis and the step); the status is the
worst of Lemma 2's root and the eigensolve's. The sketch rule
(:class:`~bandits_jax.linalg.sketch.SketchRule`) supplies the sketch's part of each step.

The state holds ``V = basis @ R``. Rules: Algorithm 1 with V formed every round or with a
deferred rotation (``spare_columns``), or Fast Frequent Directions (``sketch_rule="fast"``,
Ghashami et al. 2016). Options: ``regularization="robust"`` (Robust FD, Luo et al. 2019:
``Z_t = (lam + rho_{1:t-1}/2) I + V diag(mu) V^T``) and an adaptive sketch size
(``max_sketch_size``, ``delta_target``: the rank grows to keep ``Delta_t <= tau``, the paper's
closing remark). ``docs/eofd.md`` has each step, rule and option in full.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bandits_jax.checks import check_int
from bandits_jax.learner_base import Learner, accept, finite_floats, no_failures
from bandits_jax.linalg import fast_fd, lapack, lowrank, projection, sketch
from bandits_jax.linalg.sketch import Sketch, SketchRule
from bandits_jax.mlogb import confidence, learner, model
from bandits_jax.mlogb.hparams import MLogBHyperparams
from bandits_jax.status import worst


class EOFDState(NamedTuple):
    """EOFD-MLogB state: the sketch is ``V diag(mu) V^T`` with ``V = basis @ R``.

    Attributes:
      W: (K, d) estimate ``W_t``.
      basis: (K d, n), columns ``0 .. used`` orthonormal (or zero), the rest zero: per round
        ``n = m_eff + c`` (``c`` spare columns), fast ``n = c + K`` (``c``: ``buffer_size``).
      R: the rotation, zero rows from ``used`` on: (n, m_eff) per round (None with ``c = 0``),
        (n, n) fast. mu: the weights, (m_eff,) or (n,) fast (descending, zero from ``rank`` on);
        ``m_eff = min(max_sketch_size, K d)``.
      rho: ``rho_{1:t-1}``, the mass discarded so far. rank: int32, the active rank.
      used: int32, basis columns in use. acc: eq. (36)'s running sum. t: completed updates.
      hparams: :class:`MLogBHyperparams`. info: :class:`UpdateInfo` of the last update.
      robust: bool, the robust regularisation (data, so both variants share one program).
    """

    W: jax.Array
    basis: jax.Array
    R: jax.Array | None
    mu: jax.Array
    rho: jax.Array
    rank: jax.Array
    used: jax.Array
    acc: jax.Array
    t: jax.Array
    hparams: MLogBHyperparams
    info: learner.UpdateInfo
    robust: jax.Array
    status: jax.Array
    num_failures: jax.Array

    @property
    def V(self) -> jax.Array:
        """(K d, r) sketch directions ``basis @ R`` (read-only; formed on each access, a
        O(K d n r) product, batched over leading axes), ``basis`` when not deferred."""
        return self.basis if self.R is None else self.basis @ self.R

    @property
    def sketch(self) -> Sketch:
        """The sketch fields as the rule's :class:`~bandits_jax.linalg.sketch.Sketch`."""
        return sketch.Sketch(self.basis, self.R, self.mu, self.rank, self.used)


def lemma1_matrices(
    V: jax.Array,
    mu: jax.Array,
    lam: jax.Array,
    actions: jax.Array,
    K: int,
    R: jax.Array | None = None,
):
    """``A(x)`` of Lemma 1, eq. (18), for every row of ``actions`` (N, d): (N, K, K), in
    O(N K d m); ``lam`` is Z's scalar part, and with ``R`` the directions are ``V @ R``."""
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


class _Pass1(NamedTuple):
    """Pass 1's results: the extensions of the basis and of V, ``[V, Q]^T w`` and ``W_t x``."""

    ext_b: sketch.Extension
    ext: sketch.Extension
    bw: jax.Array
    Wx: jax.Array


def _pass1(rule: SketchRule, sk: Sketch, W: jax.Array, x: jax.Array) -> _Pass1:
    """Pass 1 over the basis, ``basis^T [X, w]``; the rule's extension ``X = V C + Q T``
    (eq. 12-14) from it, and ``[V, Q]^T w`` without another pass (``V^T = R^T basis^T``)."""
    K = W.shape[0]
    w = W.reshape(-1)
    X = jnp.kron(jnp.eye(K, dtype=W.dtype), x[:, None])  # (D, K)
    P = sk.basis.T @ jnp.concatenate([X, w[:, None]], axis=1)
    ext_b, ext = rule.extend(sk, X, P[:, :K])
    Vw = sk.v_coords(P[:, K])
    Wx = W @ x  # = X^T w
    return _Pass1(ext_b, ext, jnp.concatenate([Vw, sketch.q_coords(ext, Wx, Vw)]), Wx)


class _Step(NamedTuple):
    """The small part of one EOFD round (everything but the sketch and the D-sized maps)."""

    coef: jax.Array  # w_new = alpha w + [V, Q] coef
    alpha: jax.Array
    z_new: jax.Array  # W_{t+1} x_t
    sol: projection.DualSolution
    acc_increment: jax.Array


def _newton_step(opt: _Options, state: EOFDState, p1: _Pass1, y: jax.Array) -> _Step:
    """Newton step (eq. 8, 20-22), projection (Lemma 2, eq. 23-25) and the eq. (36) increment
    in the orthonormal basis ``[V, Q]`` of the round: ``A = [V, Q]^T X``, ``bw = [V, Q]^T w``,
    ``Wx = W_t x``, ``lam`` Z's scalar part, ``mu`` the weights of V."""
    hp, mu, lam = state.hparams, state.mu, _z_scalar(state)
    A, bw, Wx = p1.ext.coords, p1.bw, p1.Wx
    K, dtype, eta = A.shape[1], A.dtype, hp.eta
    w = state.W.reshape(-1)
    w_sq0 = jnp.sum(w * w)
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
    sol = projection.solve_dual(f_and_df, w_sq, hp.S, curvature, max_steps=opt.max_newton_steps)
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
        hp, num_outcomes=K, dim=opt.d, step_x_sq=jnp.sum(step_x**2), step_z_sq=step_z_sq
    )
    return _Step(coef=coef, alpha=alpha, z_new=z_new, sol=sol, acc_increment=inc)


class _Options(NamedTuple):
    """The validated static options a learner closes over."""

    K: int
    d: int
    rule: SketchRule
    tau: float | None  # the adaptive size's target for Delta_t (None: fixed size)
    max_newton_steps: int


def _init(opt: _Options, robust: bool, hp: MLogBHyperparams) -> EOFDState:
    learner.check_hparams(hp, opt.K)
    dtype = hp.lam.dtype
    sk = opt.rule.init(opt.K * opt.d, dtype)
    # Own hparams copies: a donated state must not delete the caller's arrays.
    hparams = jax.tree_util.tree_map(jnp.array, hp)
    return EOFDState(
        jnp.zeros((opt.K, opt.d), dtype), sk.basis, sk.R, sk.mu, jnp.zeros((), dtype), sk.rank,
        sk.used, jnp.zeros((), dtype), jnp.zeros((), jnp.int32), hparams, learner.empty_info(dtype),
        jnp.asarray(robust), **no_failures(),
    )  # fmt: skip


def _z_scalar(state: EOFDState) -> jax.Array:
    """Z's scalar part: ``lam`` (paper) or ``lam + rho_{1:t-1}/2`` (robust)."""
    lam = state.hparams.lam
    return jnp.where(state.robust, lam + 0.5 * state.rho, lam)


def _radius(opt: _Options, state: EOFDState) -> jax.Array:
    """Eq. (36)/(27) with the rule's sketch rank (Lemma 6)."""
    return confidence.radius(
        state.hparams, state.t, state.rho, state.acc, num_outcomes=opt.K, dim=opt.d,
        rank=opt.rule.radius_rank(state.sketch), robust=state.robust,
    )  # fmt: skip


def _update(opt: _Options, state: EOFDState, x: jax.Array, y: jax.Array) -> EOFDState:
    """One round of Algorithm 2 in the steps of the module docstring."""
    learner.check_update_args(x, y, opt.K, opt.d)
    x = x.astype(state.W.dtype)
    hp, sk, rule = state.hparams, state.sketch, opt.rule
    w = state.W.reshape(-1)
    p1 = _pass1(rule, sk, state.W, x)  # 1. pass 1
    st = _newton_step(opt, state, p1, y)  # 2. Newton step and projection
    M_new = model.jacobian(model.sigma(st.z_new))  # grad^2 l_t(W_{t+1}) = X M_new X^T
    budget = None
    if opt.tau is not None:  # adaptive size: the most one truncation may discard
        budget = confidence.discard_budget(state.rho, hp.lam, opt.tau, state.robust)
    rnd = rule.absorb(sk, p1.ext, M_new, st.coef, budget)  # 3. absorb (small work)
    acc = state.acc + st.acc_increment
    # 4. reject non-finite
    ok = finite_floats((x, st.coef, st.alpha, st.z_new, st.sol.nu, acc, rnd))
    ext_b = sketch.mask_extension(p1.ext_b, ok)
    basis, dw, rnd = rule.commit(sk, ext_b, rnd, jnp.where(ok, st.coef, 0.0), ok)  # 5. pass 2
    w_new = jnp.where(ok, st.alpha, 1.0) * w + dw
    # The small fields are guarded by ok; W and the basis were kept by the update where rejected.
    sol, beta = st.sol, _radius(opt, state)
    new = state._replace(
        W=w_new.reshape(state.W.shape), basis=basis, R=rnd.R, mu=rnd.mu,
        rho=state.rho + rnd.delta, rank=rnd.rank, used=rnd.used, acc=acc, t=state.t + 1,
        info=learner.UpdateInfo(sol.active, sol.nu, sol.steps, beta),
    )  # fmt: skip
    return accept(state, new, ok, worst(sol.status, rnd.status), written=("W", "basis"))


def eofd(
    *,
    num_outcomes: int,
    dim: int,
    # What it computes: Algorithm 2 and its statistical variants.
    sketch_size: int,
    regularization: str = "paper",
    max_sketch_size: int | None = None,
    delta_target: float | None = None,
    max_newton_steps: int = 50,
    # Which sketch: Algorithm 1 or Fast FD (a different sketch, chosen for speed).
    sketch_rule: str = "per_round",
    buffer_size: int | None = None,
    # How fast: the same result to rounding.
    spare_columns: int | None = None,
    solver: str = "auto",
) -> Learner:
    """EOFD-MLogB (Algorithm 2) and its variants (module docstring).

    Args:
      sketch_size: m >= 1; ``m_eff = min(m, K d)`` (errata 1: m >= K d reproduces OFUL-MLogB);
        the initial active rank of an adaptive sketch.
      regularization: ``"paper"`` (Algorithm 2) or ``"robust"`` (Robust FD).
      max_sketch_size, delta_target: an adaptive sketch of capacity ``m_max >= sketch_size``
        whose rank grows so that ``Delta_t <= tau`` (``tau >= 1``, ``inf``: never grows).
      max_newton_steps: cap of the Lemma 2 root loop.
      sketch_rule: ``"per_round"`` (Algorithm 1) or ``"fast"`` (Fast FD; fixed size only).
      buffer_size: the fast rule's capacity ``c >= m + K`` (default ``m + max(m, K)``, at most
        K d).
      spare_columns: the per-round rule's spare basis columns, ``0`` or ``>= K`` (speed only;
        default :func:`default_spare_columns`).
      solver: the per-round rule's FD core, ``"auto"``, ``"lapack"`` or ``"batched"`` (speed
        only; :func:`~bandits_jax.linalg.sketch.core_eigh`; the fast rule's is always batched).

    Returns:
      A :class:`~bandits_jax.learner_base.Learner`.
    """
    K, d = learner.check_static(num_outcomes, dim, sketch_size, max_newton_steps=max_newton_steps)
    D = K * d
    m = min(int(sketch_size), D)
    robust = confidence.check_regularization(regularization)
    m_max, tau = _check_adaptive(sketch_size, max_sketch_size, delta_target)
    rule = _sketch_rule(
        sketch_rule, buffer_size, spare_columns, solver, min(m_max, D), m, K, D, tau
    )
    opt = _Options(K, d, rule, tau, int(max_newton_steps))
    parts = learner.optimistic(
        K,
        d,
        a_matrices=lambda s, a: lemma1_matrices(s.basis, s.mu, _z_scalar(s), a, K, s.R),
        radius=functools.partial(_radius, opt),
    )
    return learner.from_score_parts(
        K,
        d,
        functools.partial(_init, opt, robust),
        update=functools.partial(_update, opt),
        in_ball=True,
        **parts,
    )


SKETCH_RULES = ("per_round", "fast")

DEFER_MIN_DIM = 1000  # K d from which the per-round rule defers its basis rotation by default


def default_spare_columns(m: int, K: int, D: int) -> int:
    """Default number ``c`` of spare basis columns of the per-round rule (``D = K d``): 0 (V formed
    every round) below ``DEFER_MIN_DIM``, else about ``m / 4``, a multiple of K, at least K (a
    round costs about ``a (m + c) + b (m + c) m K / c``; ``docs/evidence.md``, "mlogb.eofd")."""
    if D < DEFER_MIN_DIM:
        return 0
    if m >= D:
        return K  # errata 1: X always lies in span V, no column is ever added
    return max(K, (m // 4) // K * K)


def _check_adaptive(
    sketch_size: int, max_sketch_size: object, delta_target: object
) -> tuple[int, float | None]:
    """``(m_max, tau)`` of an adaptive sketch size; ``(sketch_size, None)`` when it is off."""
    if max_sketch_size is None and delta_target is None:
        return int(sketch_size), None
    if max_sketch_size is None or delta_target is None:
        pair = ["max_sketch_size", "delta_target"]
        given, other = pair[::-1] if max_sketch_size is None else pair
        raise ValueError(f"{given} needs {other} (an adaptive sketch size takes both)")
    m_max = check_int("max_sketch_size", max_sketch_size, int(sketch_size))
    if (
        isinstance(delta_target, bool)
        or not isinstance(delta_target, int | float | np.integer | np.floating)
        or not delta_target >= 1.0  # also rejects NaN
    ):
        raise ValueError(f"delta_target must be a number >= 1 (inf allowed), got {delta_target!r}")
    return m_max, float(delta_target)


def _sketch_rule(
    sketch_rule: object,
    buffer_size: object,
    spare_columns: object,
    solver: object,
    m_eff: int,
    m: int,
    K: int,
    D: int,
    tau: float | None,
) -> SketchRule:
    """The validated sketch rule with its own option (``m_eff``: the per-round capacity,
    ``tau``: the adaptive size's target, None when fixed)."""
    adaptive = tau is not None
    if not isinstance(sketch_rule, str) or sketch_rule not in SKETCH_RULES:
        raise ValueError(f"sketch_rule must be one of {SKETCH_RULES}, got {sketch_rule!r}")
    # Each rule's own option; the other rule rejects it.
    lapack.check_solver("eofd", solver)
    for name, value, rule in (
        ("buffer_size", buffer_size, "fast"),
        ("spare_columns", spare_columns, "per_round"),
        ("solver", None if solver == "auto" else solver, "per_round"),
    ):
        if value is not None and rule != sketch_rule:
            raise ValueError(f'{name} needs sketch_rule="{rule}", got {value!r}')
    rank = m if adaptive else None  # the initial active rank of an adaptive size
    if sketch_rule == "fast":
        if adaptive:
            raise ValueError(
                'sketch_rule="fast" cannot be combined with max_sketch_size/delta_target (a grown '
                "rank leaves less room between shrinks); use the per-round rule"
            )
        c = m + max(m, K) if buffer_size is None else check_int("buffer_size", buffer_size, m + K)
        return fast_fd.spectral_rule(m, min(c, D), K)
    if spare_columns is None:
        spare = default_spare_columns(m_eff, K, D)
    else:
        spare = check_int("spare_columns", spare_columns, 0)
        if 0 < spare < K:
            raise ValueError(
                f"spare_columns: expected 0 (no deferral) or an int >= num_outcomes = {K}, "
                f"got {spare_columns!r}"
            )
    if spare:
        return sketch.deferred_rule(m_eff, spare, rank=rank, solver=solver)
    return sketch.per_round_rule(m_eff, rank=rank, solver=solver)
