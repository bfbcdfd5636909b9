"""ada-OFU-ECOLog: the efficient optimistic logistic bandit baseline (K = 1).

Faury, Abeille, Jun and Calauzenes (AISTATS 2022), "Jointly Efficient and Optimal Algorithms for
Logistic Bandits": Algorithm 1 (ECOLog, the online estimator) inside the optimistic bandit
algorithm with the data-dependent confidence radius of ada-OFU-ECOLog, as in the authors' public
code (``louisfaury/logistic_bandit``, ``logbexp/algorithms/ecolog.py``, class ``EcoLog``, name
``adaECOLog``). With ``mu`` the sigmoid, ``l(z, y) = softplus(z) - y z`` the logistic loss and
``V_t = lam I + sum_{s<t} mu'(x_s^T theta_{s+1}) x_s x_s^T``, the update of round t is

    theta_{t+1} = argmin_{||theta|| <= S} l(x_t^T theta, y_t) + 1/2 ||theta - theta_t||^2_{V_t},
    theta_bar_t = argmin_{||theta|| <= S} l(x^T theta, 0) + l(x^T theta, 1)
                                           + 1/2 ||theta - theta_{t+1}||^2_{V_t},
    L_{t+1} = L_t + 2 (1 + S) (l(x_t^T theta_bar_t, y_t) - l(x_t^T theta_{t+1}, y_t))
                  - 1/2 ||theta_{t+1} - theta_bar_t||^2_{V_t},

and selection after ``n`` updates uses ``index(x) = r_1 mu(x^T theta) + r_1 sqrt(beta_n)
||x||_{V_n^{-1}}`` with ``beta_n = beta_scale * max(0, 2 lam S^2 + (1 + S)^2 gamma_n + L_n)``,
``gamma_n = sqrt(lam)/2 + 2/sqrt(lam) ln(2 sqrt(1 + (n+1)/(4 lam)) / delta)`` (their
``update_ucb_bonus``), or a fixed ``beta`` (a float). The inner problems are solved exactly, to
rounding (bracketed Newton in the scalar ``x^T theta``, one ``eigh`` only when the ball binds),
not by the code's fixed number of gradient steps; every loop is capped at ``max_steps`` and the
update's status is the worst of its loops'. ``V^{-1}`` is kept by Sherman-Morrison.

Deviations from the public code (each tested against :mod:`references.ecolog_numpy`):
the discrepancy term is squared (``discrepancy="code"`` reproduces the code's unsquared norm);
``beta_n`` is clipped at 0; the code's ``mu'`` ratio check cannot raise under ``jit``, so the
state counts such rounds (``violations``); ``lam`` is a hyperparameter (the code fixes 1); no
warm-up. The solve and each deviation in full: ``docs/evidence.md``, "mlogb.ecolog".
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from bandits_jax.checks import check_float, check_int
from bandits_jax.learner_base import Learner, accept, finite_floats, fresh_state, no_failures
from bandits_jax.linalg import lapack, roots
from bandits_jax.mlogb.hparams import check_rewards, state_dtype
from bandits_jax.mlogb.learner import (
    UpdateInfo,
    check_actions,
    check_hparams,
    check_static,
    check_update_args,
    empty_info,
    from_score_parts,
)
from bandits_jax.status import CONVERGED, MAX_STEPS, NONFINITE, worst

BETA_FIXED, BETA_THEORY = 0, 1
DISCREPANCIES = ("squared", "code")


class ECOLogHyperparams(NamedTuple):
    """Hyperparameters of :func:`ecolog` (leading axes, if any, are grid axes).

    Attributes:
      lam: l2 regulariser ``lam > 0`` (``V_1 = lam I``; the code's ``l2reg``).
      S: parameter norm bound ``||theta|| <= S``.
      rewards: (..., 1) reward ``r_1`` of outcome 1 (``r_0 = 0``).
      beta: the fixed radius ``beta`` (mode fixed) or the scale of the theory radius.
      beta_mode: int32, 0 fixed, 1 theory.
      delta: confidence level in (0, 1).
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
      W: (1, d), the ECOLog estimate ``theta_t`` (``state.theta``).
      V: (d, d) ``V_t``. V_inv: (d, d) ``V_t^{-1}`` (Sherman-Morrison).
      cum_loss: ``L_t``, the running sum of the data-dependent radius.
      violations: rounds where ``mu'(x^T theta_bar) > 2 mu'(x^T theta_{t+1})`` (int32).
      t: completed updates (int32).
      hparams: :class:`ECOLogHyperparams`. info: :class:`UpdateInfo` of the last update
        (``projected``/``nu``: the ball constraint of ``theta_{t+1}``; ``newton_steps``: all
        root iterations of both solves; ``beta``: the radius ``beta_n`` of the
        selection before the update).
      status, num_failures: the last update's status and the rejected updates so far.
    """

    W: jax.Array
    V: jax.Array
    V_inv: jax.Array
    cum_loss: jax.Array
    violations: jax.Array
    t: jax.Array
    hparams: ECOLogHyperparams
    info: UpdateInfo
    status: jax.Array
    num_failures: jax.Array

    @property
    def theta(self) -> jax.Array:
        """The estimate ``theta_t`` (d,)."""
        return self.W[..., 0, :]


def _cast(name: str, arr: np.ndarray, dtype: np.dtype, *, positive: bool) -> np.ndarray:
    """Casts to the state dtype; the cast value must stay finite (and positive when asked)."""
    with np.errstate(over="ignore", under="ignore"):
        c = arr.astype(dtype)
    bad = ~np.isfinite(c) | ((c <= 0) if positive else (c < 0))
    if np.any(bad):
        raise ValueError(
            f"{name} must stay finite and {'> 0' if positive else '>= 0'} in "
            f"{dtype.name}, got {arr!r}"
        )
    return c


def ecolog_hyperparams(
    *,
    lam,
    S,
    rewards=None,
    beta: Any = "theory",
    beta_scale=1.0,
    delta=0.01,
    dtype=None,
) -> ECOLogHyperparams:
    """Builds :class:`ECOLogHyperparams`, validated eagerly.

    Args:
      lam, S: finite ``> 0``, scalars or arrays (arrays broadcast to grid axes).
      rewards: (1,) or (..., 1) reward ``r_1 >= 0``; ``None`` means ``[1.]``. K = 1 only.
      beta: ``"theory"`` (the ada-OFU-ECOLog radius ``beta_n``, times ``beta_scale``) or a
        float ``>= 0``: a fixed radius used as ``sqrt(beta)`` (index
        ``r_1 (mu(x^T theta) + sqrt(beta) ||x||_{V^{-1}})``).
      beta_scale: finite ``> 0``, multiplies the theory ``beta_n`` (so the bonus by
        ``sqrt(beta_scale)``).
      delta: confidence level in (0, 1).
      dtype: float32 or float64 (default: JAX's default float).

    Raises:
      ValueError: naming the offending argument.
    """
    dtype = state_dtype(dtype)
    lam_a = check_float("lam", lam)
    S_a = check_float("S", S)
    r = check_rewards(rewards)
    if r.shape[-1] != 1:
        raise ValueError(f"rewards must have shape (1,) (ECOLog has K = 1), got {r.shape}")
    if isinstance(beta, str):
        if beta != "theory":
            raise ValueError(f"beta must be a float >= 0 or 'theory', got {beta!r}")
        mode, beta_a = BETA_THEORY, check_float("beta_scale", beta_scale)
    else:
        mode, beta_a = BETA_FIXED, check_float("beta", beta, low_open=False)
    d_a = check_float("delta", delta, high=1.0, high_open=True)
    lam_a = _cast("lam", lam_a, dtype, positive=True)
    S_a = _cast("S", S_a, dtype, positive=True)
    r = _cast("rewards", r, dtype, positive=False)
    beta_a = _cast("beta_scale" if mode else "beta", beta_a, dtype, positive=bool(mode))
    d_a = _cast("delta", d_a, dtype, positive=True)
    if np.any(d_a >= 1):
        raise ValueError(f"delta must lie in (0, 1) in {dtype.name}, got {delta!r}")
    batch = np.broadcast_shapes(lam_a.shape, S_a.shape, beta_a.shape, d_a.shape, r.shape[:-1])
    f = lambda a: jnp.asarray(np.broadcast_to(a, batch), dtype)  # noqa: E731
    return ECOLogHyperparams(
        lam=f(lam_a),
        S=f(S_a),
        rewards=jnp.asarray(np.broadcast_to(r, batch + (1,)), dtype),
        beta=f(beta_a),
        beta_mode=jnp.full(batch, mode, jnp.int32),
        delta=f(d_a),
    )


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

    return roots.bracketed_newton(
        fn,
        a - b * w * (1.0 - target),
        a + b * w * target,
        x0,
        max_steps=max_steps,
        ftol=16.0 * eps * scale,
        xtol=16.0 * eps,
    )


def _nu_point(e, r, p, w, target, nu, z0, *, max_steps: int):
    """``theta(nu)`` in the eigenbasis of ``V = Q diag(e) Q^T`` (``r = Q^T x``,
    ``p = Q^T V center``), its derivative in ``nu`` and the inner scalar root (from ``z0``)."""
    den = e + nu
    a_nu = jnp.sum(r * p / den)
    b_nu = jnp.sum(r * r / den)
    inner = _scalar_root(a_nu, b_nu, w, target, z0, max_steps=max_steps)
    z = inner.x
    cc = w * (jax.nn.sigmoid(z) - target)
    th = (p - cc * r) / den
    # d z / d nu by implicit differentiation of z = a(nu) - c(z) b(nu).
    da = -jnp.sum(r * p / den**2)
    db = -jnp.sum(r * r / den**2)
    dmu = w * _dmu(z)
    dz = (da - cc * db) / (1.0 + dmu * b_nu)
    dth = -th / den - dmu * dz * r / den
    return th, dth, inner


def _prox_constrained(V, center, x, w, target, S, *, max_steps: int) -> ProxResult:
    """The ball-constrained branch of :func:`prox_solve`: the multiplier ``nu > 0`` by a
    bracketed Newton on ``1/||theta(nu)|| - 1/S`` (module docstring)."""
    dtype = V.dtype
    zero = jnp.zeros((), dtype)
    e, Q = lapack.eigh(V)
    e = jnp.maximum(e, jnp.finfo(dtype).tiny)
    r = Q.T @ x
    p = e * (Q.T @ center)  # Q^T V center

    # Bracketed Newton on F(nu) = 1/||theta(nu)|| - 1/S (increasing), written out (rather
    # than roots.bracketed_newton) so that each iteration runs the inner scalar root once
    # and the last evaluated theta is kept: one inner loop in the program instead of three.
    hi0 = (jnp.sqrt(jnp.sum(p * p)) + w * jnp.sqrt(jnp.sum(r * r))) / S
    eps = jnp.finfo(dtype).eps
    ftol, xtol = 64.0 * eps / S, 16.0 * eps

    # The loop's scalars (nu, lo, hi, the inner root, the nu of th) travel as one stacked array:
    # XLA writes each separate loop output with its own kernel, which costs compile time.
    def body(carry):
        (nu, lo, hi, z_prev, _), step, inner_steps, _, _, _, _ = carry
        th, dth, inner = _nu_point(e, r, p, w, target, nu, z_prev, max_steps=max_steps)
        n2 = jnp.sum(th * th)
        n = jnp.sqrt(n2)
        f, df = 1.0 / n - 1.0 / S, -jnp.sum(th * dth) / (n2 * n)
        lo = jnp.where(f < 0, nu, lo)
        hi = jnp.where(f > 0, nu, hi)
        finite = jnp.isfinite(f)
        done = (jnp.abs(f) <= ftol) | ((hi - lo) <= xtol * (1.0 + nu)) | ~finite
        newton = nu - f / df
        ok = jnp.isfinite(newton) & (newton > lo) & (newton < hi)
        nxt = jnp.where(ok, newton, 0.5 * (lo + hi))
        status = jnp.where(finite, inner.status, NONFINITE)
        scalars = jnp.stack([nxt, lo, hi, inner.x, nu])
        return scalars, step + 1, inner_steps + inner.steps, done, th, status, finite

    def cond(carry):
        return ~carry[3] & (carry[1] < max_steps)

    i0 = jnp.zeros((), jnp.int32)
    ok0 = jnp.full((), int(CONVERGED), jnp.int32)
    scalars0 = jnp.stack([zero, zero, hi0, zero, zero])
    init = (scalars0, i0, i0, jnp.asarray(False), p, ok0, jnp.asarray(True))
    scalars, steps, inner_steps, done, th, inner_status, _ = lax.while_loop(cond, body, init)
    nu = scalars[4]
    status = jnp.where(done, inner_status, worst(inner_status, MAX_STEPS))
    n = jnp.sqrt(jnp.sum(th * th))
    th = th * jnp.minimum(1.0, S / jnp.where(n > 0, n, 1.0))
    return ProxResult(Q @ th, nu, jnp.asarray(True), steps + inner_steps, status)


def prox_solve(V, V_inv, center, x, w, target, S, *, max_steps: int = 64) -> ProxResult:
    """``argmin_{||theta|| <= S} w l~(x^T theta) + 1/2 ||theta - center||^2_V`` with
    ``d l~/dz = mu(z) - target`` (ECOLog's step: ``w = 1, target = y``; theta_bar:
    ``w = 2, target = 1/2``). See the module docstring for the method.

    Args:
      V, V_inv: (d, d) ``V`` and its inverse. center: (d,). x: (d,). w, target, S: scalars.
      max_steps: cap of each root loop (static).
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
        return _prox_constrained(V, center, x, w, target, S, max_steps=max_steps)

    res = lax.cond(outside, constrained, lambda _: unc, None)
    status = worst(res.status, jnp.where(outside, root.status, CONVERGED))
    return res._replace(steps=res.steps + root.steps, status=status.astype(jnp.int32))


def _ecolog_init(hp: ECOLogHyperparams, *, d: int) -> ECOLogState:
    """``init`` of :func:`ecolog`: ``theta_1 = 0``, ``V_1 = lam I`` (validated eagerly)."""
    if not isinstance(hp, ECOLogHyperparams):
        raise ValueError(f"hparams must be ECOLogHyperparams, got {type(hp).__name__}")
    check_hparams(hp, 1, ("lam", "S", "beta", "beta_mode", "delta"))
    dtype = hp.lam.dtype
    state = ECOLogState(
        W=jnp.zeros((1, d), dtype),
        V=jnp.eye(d, dtype=dtype) * hp.lam,
        V_inv=jnp.eye(d, dtype=dtype) / hp.lam,
        cum_loss=jnp.zeros((), dtype),
        violations=jnp.zeros((), jnp.int32),
        t=jnp.zeros((), jnp.int32),
        hparams=hp,
        info=empty_info(dtype),
        **no_failures(),
    )
    return fresh_state(state)


def _ecolog_score_parts(
    state: ECOLogState, actions: jax.Array, *, d: int
) -> tuple[jax.Array, jax.Array]:
    """``score_parts`` of :func:`ecolog`: the estimate ``r_1 mu(x^T theta)`` and the bonus
    ``r_1 sqrt(beta_n) ||x||_{V^{-1}}`` per action."""
    check_actions(actions, d)
    X = actions.astype(state.W.dtype)
    hp = state.hparams
    sq = jnp.maximum(jnp.sum((X @ state.V_inv) * X, axis=1), 0.0)
    beta = radius(hp, state.t, state.cum_loss)
    r1 = hp.rewards[0]
    return r1 * jax.nn.sigmoid(X @ state.W[0]), r1 * jnp.sqrt(beta) * jnp.sqrt(sq)


def _ecolog_update(
    state: ECOLogState, x: jax.Array, y: jax.Array, *, d: int, max_steps: int, squared: bool
) -> ECOLogState:
    """``update`` of :func:`ecolog`: the ECOLog step, theta_bar, ``L``, ``V`` and ``V^{-1}``
    (module docstring); ``squared`` selects the discrepancy term."""
    check_update_args(x, y, 1, d)
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
        res = prox_solve(V, V_inv, center, x, wt[0], wt[1], hp.S, max_steps=max_steps)
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
    V_new = V + sens * jnp.outer(x, x)
    u = V_inv @ x
    V_inv = V_inv - sens * jnp.outer(u, u) / (1.0 + sens * (x @ u))
    V_inv = 0.5 * (V_inv + V_inv.T)
    info = UpdateInfo(
        projected=step.projected,
        nu=step.nu,
        newton_steps=(step.steps + bar.steps).astype(jnp.int32),
        beta=radius(hp, state.t, state.cum_loss),
    )
    new = state._replace(
        W=new_theta[None, :],
        V=V_new,
        V_inv=V_inv,
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
) -> Learner:
    """ada-OFU-ECOLog (Faury et al. 2022) in the MLogB protocol.

    Args:
      num_outcomes: must be 1 (a logistic bandit). dim: d.
      max_steps: cap of each bracketed-Newton loop of the inner problems.
      discrepancy: ``"squared"`` (``1/2 ||theta_{t+1} - theta_bar||^2_V``) or ``"code"`` (the
        public code's unsquared ``1/2 ||.||_V``), see the module docstring.

    Returns:
      An :class:`~bandits_jax.learner_base.Learner` whose ``init`` takes
      :func:`ecolog_hyperparams`. ``score_parts`` returns
      ``(r_1 mu(x^T theta), r_1 sqrt(beta_n) ||x||_{V^{-1}})``; ``scores`` their sum.
    """
    K, d = check_static(num_outcomes, dim)
    check_int("max_steps", max_steps, 1)
    if K != 1:
        raise ValueError(f"num_outcomes must be 1 for ECOLog (a logistic bandit), got {K}")
    if not isinstance(discrepancy, str) or discrepancy not in DISCREPANCIES:
        raise ValueError(f"discrepancy must be one of {DISCREPANCIES}, got {discrepancy!r}")
    squared = discrepancy == "squared"

    def init(hp: ECOLogHyperparams) -> ECOLogState:
        # A closure, not a partial: the protocol's init takes the hyperparameters only.
        return _ecolog_init(hp, d=d)

    return from_score_parts(
        K,
        d,
        init,
        functools.partial(_ecolog_score_parts, d=d),
        functools.partial(_ecolog_update, d=d, max_steps=max_steps, squared=squared),
        hyperparams=ecolog_hyperparams,
    )


__all__ = [
    "ECOLogHyperparams",
    "ECOLogState",
    "ecolog",
    "ecolog_hyperparams",
    "logloss",
    "prox_solve",
    "radius",
]
