"""ada-OFU-ECOLog: the efficient optimistic logistic bandit baseline (K = 1).

Faury, Abeille, Jun and Calauzenes (AISTATS 2022), Algorithm 1 (ECOLog) inside the optimistic
algorithm with ada-OFU-ECOLog's data-dependent radius, as the authors' code has it
(``louisfaury/logistic_bandit``, ``logbexp/algorithms/ecolog.py``). With ``mu`` the sigmoid,
``l(z, y) = softplus(z) - y z`` and ``V_t = lam I + sum_{s<t} mu'(x_s^T theta_{s+1}) x_s x_s^T``:

    theta_{t+1} = argmin_{||theta|| <= S} l(x_t^T theta, y_t) + 1/2 ||theta - theta_t||^2_{V_t},
    theta_bar_t = argmin_{||theta|| <= S} l(x^T theta, 0) + l(x^T theta, 1)
                                           + 1/2 ||theta - theta_{t+1}||^2_{V_t},
    L_{t+1} = L_t + 2 (1 + S) (l(x_t^T theta_bar_t, y_t) - l(x_t^T theta_{t+1}, y_t))
                  - 1/2 ||theta_{t+1} - theta_bar_t||^2_{V_t},

and after ``n`` updates ``index(x) = r_1 mu(x^T theta) + r_1 sqrt(beta_n) ||x||_{V_n^{-1}}``,
``beta_n = beta_scale max(0, 2 lam S^2 + (1 + S)^2 gamma_n + L_n)``,
``gamma_n = sqrt(lam)/2 + 2/sqrt(lam) ln(2 sqrt(1 + (n+1)/(4 lam)) / delta)``, or a fixed
``beta``. The inner problems are solved to rounding (bracketed Newton in ``x^T theta``, and in
the ball's multiplier where the ball binds: one ``eigh`` of V on the CPU, a Cholesky
factorisation a root step elsewhere, ``prox_solve``'s ``solver``). Deviations from
the code, each tested against :mod:`references.ecolog_numpy` (``docs/evidence.md``,
"mlogb.ecolog"): a squared discrepancy (``discrepancy="code"``: unsquared), ``beta_n`` clipped
at 0, ``violations`` counted, ``lam`` a hyperparameter, no warm-up.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from bandits_jax.checks import cast_checked, check_float, check_int, named
from bandits_jax.learner_base import Learner, accept, finite_floats, fresh_state, no_failures
from bandits_jax.linalg import lapack, roots
from bandits_jax.mlogb import learner, ridge
from bandits_jax.mlogb.hparams import checked, grid_arrays, state_dtype
from bandits_jax.status import CONVERGED, worst

BETA_FIXED, BETA_THEORY = 0, 1
DISCREPANCIES = ("squared", "code")


class ECOLogHyperparams(NamedTuple):
    """Hyperparameters of :func:`ecolog` (leading axes, if any, are grid axes).

    Attributes:
      lam: l2 regulariser ``lam > 0`` (``V_1 = lam I``). S: the bound ``||theta|| <= S``.
      rewards: (..., 1) reward ``r_1`` of outcome 1. delta: confidence level in (0, 1).
      beta: the fixed radius or the theory radius's scale (``beta_mode`` int32, 0 fixed, 1 theory).
    """

    lam: jax.Array
    S: jax.Array
    rewards: jax.Array
    beta: jax.Array
    beta_mode: jax.Array
    delta: jax.Array


class ECOLogState(NamedTuple):
    """State of :func:`ecolog`.

    Attributes:
      W: (1, d), the estimate ``theta_t`` (``state.theta``). V, V_inv: ``V_t`` and its inverse.
      cum_loss: ``L_t``. t: completed updates (int32).
      violations: rounds where ``mu'(x^T theta_bar) > 2 mu'(x^T theta_{t+1})`` (int32).
      hparams: :class:`ECOLogHyperparams`. info: :class:`UpdateInfo` (``projected``/``nu``:
        the ball of ``theta_{t+1}``; ``newton_steps``: both solves'; ``beta``: ``beta_n``).
    """

    W: jax.Array
    V: jax.Array
    V_inv: jax.Array
    cum_loss: jax.Array
    violations: jax.Array
    t: jax.Array
    hparams: ECOLogHyperparams
    info: learner.UpdateInfo
    status: jax.Array
    num_failures: jax.Array

    @property
    def theta(self) -> jax.Array:
        """The estimate ``theta_t`` (d,)."""
        return self.W[..., 0, :]


def ecolog_hyperparams(
    *, lam, S, rewards=None, beta: Any = "theory", beta_scale=1.0, delta=0.01, dtype=None
) -> ECOLogHyperparams:
    """Builds :class:`ECOLogHyperparams`, validated eagerly.

    Args:
      lam, S: finite ``> 0``, scalars or arrays (broadcast to grid axes).
      rewards: (1,) or (..., 1) reward ``r_1 >= 0``; ``None`` means ``[1.]``.
      beta: ``"theory"`` (``beta_n`` times ``beta_scale > 0``) or a fixed radius ``>= 0``.
      delta: confidence level in (0, 1). dtype: float32 or float64 (default: JAX's).
    """
    fn = "ecolog_hyperparams"
    dtype = named(fn, state_dtype, dtype)
    if isinstance(beta, str):
        if beta != "theory":
            raise ValueError(f"beta must be a float >= 0 or 'theory', got {beta!r}")
        mode, name, value = BETA_THEORY, "beta_scale", beta_scale
    else:
        mode, name, value = BETA_FIXED, "beta", beta
    d = named(fn, check_float, "delta", delta, high=1.0, high_open=True)
    d = cast_checked(fn, "delta", d, dtype, True)
    if np.any(d >= 1):
        raise ValueError(f"delta must lie in (0, 1) in {dtype.name}, got {delta!r}")
    lam, S = checked(fn, "lam", lam, dtype), checked(fn, "S", S, dtype)
    beta = checked(fn, name, value, dtype, positive=mode == BETA_THEORY)
    mode = np.asarray(mode, np.int32)
    out = grid_arrays(fn, dtype, rewards, lam=lam, S=S, beta=beta, beta_mode=mode, delta=d)
    if out["rewards"].shape[-1] != 1:
        raise ValueError(f"rewards must have shape (1,) (ECOLog has K = 1), got {rewards!r}")
    return ECOLogHyperparams(**out)


def radius(hp: ECOLogHyperparams, t: jax.Array, cum_loss: jax.Array) -> jax.Array:
    """``beta_n`` after ``n = t`` completed updates (module docstring; the code's ``ctr``
    is ``n + 1``)."""
    dtype = hp.lam.dtype
    ctr = t.astype(dtype) + 1.0
    sl = jnp.sqrt(hp.lam)
    gamma = sl / 2.0 + 2.0 / sl * jnp.log(2.0 * jnp.sqrt(1.0 + ctr / (4.0 * hp.lam)) / hp.delta)
    theory = 2.0 * hp.lam * hp.S**2 + (1.0 + hp.S) ** 2 * gamma + cum_loss
    theory = hp.beta * jnp.maximum(theory, 0.0)
    return jnp.where(hp.beta_mode == BETA_THEORY, theory, hp.beta)


def logloss(z: jax.Array, y: jax.Array) -> jax.Array:
    """``l(z, y) = -y ln mu(z) - (1 - y) ln(1 - mu(z)) = softplus(z) - y z``."""
    return jax.nn.softplus(z) - y * z


def _dmu(z: jax.Array) -> jax.Array:
    m = jax.nn.sigmoid(z)
    return m * (1.0 - m)


class ProxResult(NamedTuple):
    """Result of :func:`prox_solve`: the minimiser, its multiplier, iterations, status."""

    theta: jax.Array
    nu: jax.Array
    projected: jax.Array
    steps: jax.Array
    status: jax.Array


def _scalar_root(a, b, w, target, x0, *, max_steps: int) -> roots.RootResult:
    """The root z of ``z - a + b w (mu(z) - target)`` (increasing), bracketed by
    ``[a - b w (1 - target), a + b w target]``, from ``x0`` (clipped into the bracket)."""
    eps = jnp.finfo(a.dtype).eps
    scale = 1.0 + jnp.abs(a) + b * w

    def fn(z):
        return z - a + b * w * (jax.nn.sigmoid(z) - target), 1.0 + b * w * _dmu(z)

    lo, hi = a - b * w * (1.0 - target), a + b * w * target
    tol = dict(ftol=16.0 * eps * scale, xtol=16.0 * eps)
    return roots.bracketed_newton(fn, lo, hi, x0, max_steps=max_steps, **tol)


def _shifted_solver(V: jax.Array, center: jax.Array, x: jax.Array, by_eigh: bool):
    """``(p, x, shifted, back)``: ``V center`` and ``x`` in the working basis, ``shifted(nu) ->
    (solve, quad)`` with ``solve(B) = (V + nu I)^{-1} B`` and ``quad(t) = t^T (V + nu I)^{-1} t``,
    and ``back`` to the original basis. ``by_eigh``: one eigendecomposition ``V = Q diag(e) Q^T``,
    then O(d) a ``nu`` (the basis: Q); else one Cholesky factorisation of ``V + nu I`` a ``nu``,
    which a batch keeps as one batch on a GPU (where an ``eigh`` above 32 x 32 loops)."""
    if by_eigh:
        e, Q = lapack.eigh(V)
        e = jnp.maximum(e, jnp.finfo(V.dtype).tiny)

        def in_eigenbasis(nu):
            den = e + nu
            return (lambda B: B / den[:, None]), (lambda t: jnp.sum(t * t / den))

        return e * (Q.T @ center), Q.T @ x, in_eigenbasis, lambda t: Q @ t
    eye = jnp.eye(V.shape[0], dtype=V.dtype)

    def by_cholesky(nu):
        L = lapack.cholesky(V + nu * eye)
        quad = lambda t: jnp.sum(lapack.lower_solve(L, t) ** 2)  # noqa: E731
        return functools.partial(lapack.cho_solve, L), quad

    return V @ center, x, by_cholesky, lambda t: t


def _prox_constrained(V, center, x, w, target, S, *, max_steps: int, by_eigh: bool) -> ProxResult:
    """The ball-constrained branch of :func:`prox_solve`: the multiplier ``nu > 0`` of
    ``theta(nu) = (V + nu I)^{-1} (V center - c(z) x)`` (``z``: the inner scalar root,
    ``c(z) = w (mu(z) - target)``) by :func:`~bandits_jax.linalg.roots.bracketed_newton` on
    ``1/||theta(nu)|| - 1/S`` (increasing) in ``[0, (||V center|| + w ||x||) / S]``, with
    ``d theta / d nu = -(V + nu I)^{-1} theta - c'(z) z'(nu) (V + nu I)^{-1} x``, ``z'`` by
    implicit differentiation of ``z = a(nu) - c(z) b(nu)`` (``by_eigh``: see
    :func:`_shifted_solver`)."""
    dtype = V.dtype
    p, xb, shifted, back = _shifted_solver(V, center, x, by_eigh)
    eps = jnp.finfo(dtype).eps

    def point(nu):
        solve, quad = shifted(nu)
        u = solve(jnp.stack([p, xb], axis=1))
        u1, u2 = u[:, 0], u[:, 1]  # (V + nu I)^{-1} V center, (V + nu I)^{-1} x
        a_nu, b_nu = xb @ u1, xb @ u2
        inner = _scalar_root(a_nu, b_nu, w, target, a_nu, max_steps=max_steps)
        cc = w * (jax.nn.sigmoid(inner.x) - target)
        return quad, u1, u2, u1 - cc * u2, cc, inner

    def fn(nu):
        quad, u1, u2, th, cc, inner = point(nu)
        dmu = w * _dmu(inner.x)
        dz = (cc * (u2 @ u2) - u2 @ u1) / (1.0 + dmu * (xb @ u2))
        th_dth = -quad(th) - dmu * dz * (th @ u2)
        n2 = th @ th
        n = jnp.sqrt(n2)
        return 1.0 / n - 1.0 / S, -th_dth / (n2 * n)

    hi = (jnp.sqrt(p @ p) + w * jnp.sqrt(xb @ xb)) / S
    zero = jnp.zeros((), dtype)
    res = roots.bracketed_newton(
        fn, zero, hi, zero, max_steps=max_steps, ftol=64.0 * eps / S, xtol=16.0 * eps
    )
    *_, th, _, inner = point(res.x)
    n = jnp.sqrt(th @ th)
    th = back(th * jnp.minimum(1.0, S / jnp.where(n > 0, n, 1.0)))
    status = worst(res.status, inner.status)
    return ProxResult(th, res.x, jnp.asarray(True), res.steps + inner.steps, status)


def prox_solve(
    V, V_inv, center, x, w, target, S, *, max_steps: int = 64, solver: str = "auto"
) -> ProxResult:
    """``argmin_{||theta|| <= S} w l~(x^T theta) + 1/2 ||theta - center||^2_V`` with
    ``d l~/dz = mu(z) - target`` (ECOLog's step: ``w = 1, target = y``; theta_bar:
    ``w = 2, target = 1/2``). See the module docstring for the method.

    Args:
      V, V_inv: (d, d) ``V`` and its inverse. center: (d,). x: (d,). w, target, S: scalars.
      max_steps: cap of each root loop (static).
      solver: where the ball binds, ``"lapack"`` (one eigendecomposition, fastest on the CPU),
        ``"batched"`` (a Cholesky factorisation a root step, one batch on a GPU) or ``"auto"``
        (:data:`~bandits_jax.linalg.lapack.SOLVERS`); the same result to rounding.
    """
    dtype = V.dtype
    w = jnp.asarray(w, dtype)
    target = jnp.asarray(target, dtype)
    u = V_inv @ x
    q = jnp.maximum(x @ u, 0.0)
    a = x @ center
    root = _scalar_root(a, q, w, target, a, max_steps=max_steps)
    c = w * (jax.nn.sigmoid(root.x) - target)
    theta_unc = center - c * u
    outside = jnp.sum(theta_unc * theta_unc) > S * S
    zero = jnp.zeros((), dtype)
    unc = ProxResult(theta_unc, zero, jnp.asarray(False), root.steps, root.status)

    def constrained(_):
        run = functools.partial(_prox_constrained, V, center, x, w, target, S, max_steps=max_steps)
        return lapack.by_platform(solver, lambda: run(by_eigh=True), lambda: run(by_eigh=False))

    res = lax.cond(outside, constrained, lambda _: unc, None)
    status = worst(res.status, jnp.where(outside, root.status, CONVERGED))
    return res._replace(steps=res.steps + root.steps, status=status.astype(jnp.int32))


def _ecolog_init(d: int, hp: ECOLogHyperparams) -> ECOLogState:
    """``theta_1 = 0``, ``V_1 = lam I`` (validated eagerly)."""
    if not isinstance(hp, ECOLogHyperparams):
        raise ValueError(f"hparams must be ECOLogHyperparams, got {type(hp).__name__}")
    learner.check_hparams(hp, 1, ("lam", "S", "beta", "beta_mode", "delta"))
    dtype = hp.lam.dtype
    state = ECOLogState(
        W=jnp.zeros((1, d), dtype),
        V=jnp.eye(d, dtype=dtype) * hp.lam,
        V_inv=jnp.eye(d, dtype=dtype) / hp.lam,
        cum_loss=jnp.zeros((), dtype),
        violations=jnp.zeros((), jnp.int32),
        t=jnp.zeros((), jnp.int32),
        hparams=hp,
        info=learner.empty_info(dtype),
        **no_failures(),
    )
    return fresh_state(state)


def _ecolog_score_parts(
    state: ECOLogState, actions: jax.Array, *, d: int
) -> tuple[jax.Array, jax.Array]:
    """``(r_1 mu(x^T theta), r_1 sqrt(beta_n) ||x||_{V^{-1}})`` per action."""
    learner.check_actions(actions, d)
    X = actions.astype(state.W.dtype)
    hp = state.hparams
    sq = jnp.maximum(jnp.sum((X @ state.V_inv) * X, axis=1), 0.0)
    beta = radius(hp, state.t, state.cum_loss)
    r1 = hp.rewards[0]
    return r1 * jax.nn.sigmoid(X @ state.W[0]), r1 * jnp.sqrt(beta) * jnp.sqrt(sq)


def _ecolog_update(
    state: ECOLogState,
    x: jax.Array,
    y: jax.Array,
    *,
    d: int,
    max_steps: int,
    squared: bool,
    solver: str,
) -> ECOLogState:
    """The ECOLog step, theta_bar, ``L``, ``V`` and ``V^{-1}`` (module docstring)."""
    learner.check_update_args(x, y, 1, d)
    dtype = state.W.dtype
    hp = state.hparams
    # An outcome outside {0, 1} under jit arrives as a NaN x (from_score_parts flags it).
    x = x.astype(dtype)
    yf = y.astype(dtype)
    theta = state.W[0]
    V, V_inv = state.V, state.V_inv

    # Both solves share one traced body (one copy of the solver in the program): the
    # ECOLog step from theta_t, then theta_bar from its result.
    def solve(center, wt):
        res = prox_solve(V, V_inv, center, x, wt[0], wt[1], hp.S, max_steps=max_steps,
                         solver=solver)  # fmt: skip
        return res.theta, res

    wts = jnp.stack([jnp.stack([jnp.ones((), dtype), yf]), jnp.asarray([2.0, 0.5], dtype)])
    _, both = lax.scan(solve, theta, wts)
    step, bar = (jax.tree.map(lambda a, i=i: a[i], both) for i in (0, 1))
    new_theta = step.theta
    diff = new_theta - bar.theta
    disc2 = jnp.maximum(diff @ V @ diff, 0.0)
    disc = disc2 if squared else jnp.sqrt(disc2)
    z_new, z_bar = x @ new_theta, x @ bar.theta
    cum_loss = (
        state.cum_loss + 2.0 * (1.0 + hp.S) * (logloss(z_bar, yf) - logloss(z_new, yf)) - 0.5 * disc
    )
    sens = _dmu(z_new)
    violated = _dmu(z_bar) > 2.0 * sens
    steps = (step.steps + bar.steps).astype(jnp.int32)
    info = learner.UpdateInfo(step.projected, step.nu, steps, radius(hp, state.t, state.cum_loss))
    new = state._replace(
        W=new_theta[None, :],
        V=V + sens * jnp.outer(x, x),
        V_inv=ridge.sherman_morrison(V_inv, x, sens),
        cum_loss=cum_loss,
        violations=state.violations + violated.astype(jnp.int32),
        t=state.t + 1,
        info=info,
    )
    return accept(state, new, finite_floats(new), worst(step.status, bar.status))


def ecolog(
    *,
    num_outcomes: int = 1,
    dim: int,
    max_steps: int = 64,
    discrepancy: str = "squared",
    solver: str = "auto",
) -> Learner:
    """ada-OFU-ECOLog (Faury et al. 2022) in the MLogB protocol.

    Args:
      num_outcomes: must be 1 (a logistic bandit).
      max_steps: cap of each bracketed-Newton loop of the inner problems.
      discrepancy: ``"squared"`` or ``"code"`` (the public code's unsquared norm).
      solver: :func:`prox_solve`'s (speed only).

    Returns:
      A :class:`~bandits_jax.learner_base.Learner` whose ``init`` takes
      :func:`ecolog_hyperparams`.
    """
    K, d = learner.check_static(num_outcomes, dim)
    check_int("max_steps", max_steps, 1)
    if K != 1:
        raise ValueError(f"num_outcomes must be 1 for ECOLog (a logistic bandit), got {K}")
    if not isinstance(discrepancy, str) or discrepancy not in DISCREPANCIES:
        raise ValueError(f"discrepancy must be one of {DISCREPANCIES}, got {discrepancy!r}")
    lapack.check_solver("ecolog", solver)
    squared = discrepancy == "squared"
    init = functools.partial(_ecolog_init, d)  # positional: init takes hparams only
    parts = functools.partial(_ecolog_score_parts, d=d)
    update = functools.partial(
        _ecolog_update, d=d, max_steps=max_steps, squared=squared, solver=solver
    )
    return learner.from_score_parts(K, d, init, parts, update, hyperparams=ecolog_hyperparams)


__all__ = [
    "ECOLogHyperparams",
    "ECOLogState",
    "ecolog",
    "ecolog_hyperparams",
    "logloss",
    "prox_solve",
    "radius",
]
