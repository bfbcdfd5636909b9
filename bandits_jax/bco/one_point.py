"""One-point bandit linear optimisation on a box: Algorithm 2 in its practical form (Algorithm 4).

Paper: BCO with gradient variation, Section 4 (eq. 4.2, Algorithm 2, Theorem 5) and Appendix D.1
(eq. D.1-D.4, Lemma 11, Algorithm 4).

Log-barrier FTRL on ``X = prod_i [a_i, b_i]`` with the buffer estimator of eq. (4.2):

    g~_t = 1/2 sum_i lam_{t,i}^{1/2} (r_i^{(+1)} - r_i^{(-1)}) e_i,
    g_t  = d (<l_t, x_t> - z_t) eps_t lam_{t,i_t}^{1/2} e_{i_t} + g~_t,   z_t = r_{i_t}^{(eps_t)},
    x_t  = w_t + eps_t lam_{t,i_t}^{-1/2} e_{i_t},

and ``w_{t+1}`` from the ``d`` scalar equations ``F_{t,i}(w_{t+1,i}) = 0`` of eq. (D.4), solved
in ``x = m_i + h_i tanh(theta)`` (box centre and half-width), where ``h_i F_{t,i}`` is

    phi(theta) = kappa + gamma sqrt(2 cosh 2 theta) cosh theta + sinh 2 theta,
    kappa = eta S_{t,i} h_i,  gamma = eta c_i,  c_i = (r_i^{(+1)} - r_i^{(-1)}) / 2,

increasing for ``|gamma| < 1`` (Lemma 11). ``w_1`` is the box centre (errata 15). Where ``|eta
c_i| >= 1`` the optimism is capped (``optimism_cap``) and the same shrunk buffers give ``z_t``, so
``E[g_t] = l_t`` still holds (Appendix D.2). A non-finite observation skips the update
(``status = NONFINITE``). Bracket, face distances and the cap: ``docs/evidence.md``,
"bco.one_point".
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bandits_jax import checks
from bandits_jax.bco.learner import from_query
from bandits_jax.learner_base import Learner, accept, fresh_state, grid
from bandits_jax.linalg import roots
from bandits_jax.status import NONFINITE, worst_of


class BoxFTRLHyperparams(NamedTuple):
    """Numeric hyperparameters of Algorithm 4 (arrays, so a grid is a ``vmap``).

    Attributes:
      eta: FTRL step size (scalar > 0). Theorem 5: ``1 / (16 R G d^2 sqrt(V_T ln(2dT)))``.
      lower, upper: box faces ``a, b`` with shape ``(d,)`` and ``a < b``.
      optimism_cap: ``cap`` in ``(0, 1)``: ``|eta c_i|`` is clipped to it (Lemma 11).
    """

    eta: jax.Array
    lower: jax.Array
    upper: jax.Array
    optimism_cap: jax.Array


class BoxFTRLState(NamedTuple):
    """State of Algorithm 4.

    Attributes:
      w: current iterate ``w_t`` (d,), strictly inside the box.
      theta: natural coordinates of ``w_t`` (``w = m + h tanh(theta)``), (d,).
      grad_sum: ``G_{t-1} = sum_{s<t} g_s`` (d,).
      r_plus, r_minus: the buffers ``r^{(+1)}, r^{(-1)}`` (d,).
      hparams: :class:`BoxFTRLHyperparams`.
      t: number of updates made (int32).
      status, num_failures: worst root status of the last update and count of failed updates.
      num_capped: updates where Lemma 11's condition was enforced by the cap (int32).
    """

    w: jax.Array
    theta: jax.Array
    grad_sum: jax.Array
    r_plus: jax.Array
    r_minus: jax.Array
    hparams: BoxFTRLHyperparams
    t: jax.Array
    status: jax.Array
    num_failures: jax.Array
    num_capped: jax.Array


class OnePointAux(NamedTuple):
    """What the query hands to the update: the coordinate ``i_t`` (int32), the sign ``eps_t`` in
    ``{-1, +1}`` (the state's dtype) and the queried point ``x_t`` (d,)."""

    coord: jax.Array
    sign: jax.Array
    point: jax.Array


def _scalar_hparams(eta, lower, upper, optimism_cap) -> BoxFTRLHyperparams:
    dtype = jnp.result_type(float, eta, lower, upper)
    checks.check_float("eta", eta, shape=())
    checks.check_float("optimism_cap", optimism_cap, high=1.0, high_open=True, shape=())
    lower, upper = jnp.asarray(lower, dtype), jnp.asarray(upper, dtype)
    if lower.ndim != 1 or lower.shape != upper.shape or lower.shape[0] == 0:
        raise ValueError(
            f"lower, upper: expected equal shapes (d,) with d >= 1, got {lower.shape} and "
            f"{upper.shape}"
        )
    if checks.is_concrete(lower, upper):
        lo, hi = np.asarray(lower), np.asarray(upper)
        if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
            raise ValueError("lower, upper: expected finite faces, got non-finite values")
        if not np.all(lo < hi):
            i = int(np.argmin(lo < hi))  # the first face pair with a_i >= b_i
            raise ValueError(
                f"lower, upper: expected a non-empty box a_i < b_i, got a_{i} = {lo[i]} >= "
                f"b_{i} = {hi[i]}"
            )
    return BoxFTRLHyperparams(
        jnp.asarray(eta, dtype), lower, upper, jnp.asarray(optimism_cap, dtype)
    )


# --- scalar pieces ---------------------------------------------------------------------------


def face_distances(theta: jax.Array, lower: jax.Array, upper: jax.Array):
    """``(x - a, b - x)`` for ``x = m + h tanh(theta)``, exact in relative precision."""
    width = upper - lower
    return width * jax.nn.sigmoid(2 * theta), width * jax.nn.sigmoid(-2 * theta)


def point_from_theta(theta: jax.Array, lower: jax.Array, upper: jax.Array) -> jax.Array:
    """``x = m + h tanh(theta)`` clipped to the open box (one ulp inside each face)."""
    dist_lo, dist_hi = face_distances(theta, lower, upper)
    x = jnp.where(theta < 0, lower + dist_lo, upper - dist_hi)
    return jnp.clip(x, jnp.nextafter(lower, upper), jnp.nextafter(upper, lower))


def barrier_sqrt_hessian(theta: jax.Array, lower: jax.Array, upper: jax.Array) -> jax.Array:
    """``lam^{1/2} = sqrt(f''(x)) = sqrt(1/(x-a)^2 + 1/(b-x)^2)`` (eq. D.3)."""
    dist_lo, dist_hi = face_distances(theta, lower, upper)
    return jnp.hypot(1 / dist_lo, 1 / dist_hi)


def scaled_optimality(theta, kappa, gamma):
    """``phi(theta) = h F_{t,i}(m + h tanh theta)`` and its derivative (module docstring)."""
    # One exp for all hyperbolic functions (the solve's cost is dominated by transcendentals).
    ep = jnp.exp(theta)
    em = 1 / ep
    ch, sh = 0.5 * (ep + em), 0.5 * (ep - em)
    c2, s2 = ch * ch + sh * sh, 2 * sh * ch
    root = jnp.sqrt(2 * c2)
    value = kappa + gamma * root * ch + s2
    deriv = gamma * (2 * s2 * ch / root + root * sh) + 2 * c2
    return value, deriv


def theta_bracket(kappa, gamma):
    """Half-width of a bracket ``[-B, B]`` with ``phi(-B) < 0 < phi(B)`` for ``|gamma| < 1``."""
    return 0.5 * jnp.log(4 * (2 + jnp.abs(kappa)) / (1 - jnp.abs(gamma)))


def solve_theta(kappa, gamma, theta0, *, max_steps: int):
    """Solves ``phi(theta) = 0`` per coordinate by vmapped bracketed Newton from ``theta0``
    (``kappa``, ``gamma``, ``theta0``: (d,), ``|gamma| < 1``); a ``RootResult`` of (d,) leaves."""
    eps = jnp.finfo(jnp.result_type(kappa)).eps

    def one(k, g, t0):
        half = theta_bracket(k, g)
        ftol = 16 * eps * (2 + jnp.abs(k)) / (1 - jnp.abs(g))
        # stacked=False: the loop carries its floats one by one, which fixes how XLA groups and
        # rounds this vmapped loop.
        return roots.bracketed_newton(
            lambda th: scaled_optimality(th, k, g),
            -half,
            half,
            t0,
            max_steps=max_steps,
            ftol=ftol,
            xtol=4 * eps,
            stacked=False,
        )

    return jax.vmap(one)(kappa, gamma, theta0)


def capped_buffer_difference(r_plus, r_minus, eta, cap):
    """``c_eff = clip((r^+ - r^-)/2, -cap/eta, cap/eta)`` and whether the clip bound."""
    c = 0.5 * (r_plus - r_minus)
    bound = cap / eta
    return jnp.clip(c, -bound, bound), jnp.abs(c) > bound


# --- the learner -----------------------------------------------------------------------------


def box_ftrl(*, dim: int, max_steps: int = 64) -> Learner:
    """Algorithm 4: one-point gradient-variation linear bandits on a box, in dimension ``dim``,
    with ``max_steps`` iterations at most in each coordinate's root solve (both static)."""
    dim = checks.check_int("dim", dim)
    max_steps = checks.check_int("max_steps", max_steps)

    def hyperparams(eta, lower, upper, *, optimism_cap=0.9) -> BoxFTRLHyperparams:
        """Builds :class:`BoxFTRLHyperparams`, validated eagerly (``ValueError`` naming the
        argument); ``eta`` and ``optimism_cap`` may be arrays, broadcast into leading grid axes
        (the faces ``(dim,)`` repeated along them)."""
        gridded = {"eta": eta, "optimism_cap": optimism_cap}
        hp = grid(_scalar_hparams, gridded, lower=lower, upper=upper)
        if hp.lower.shape[-1] != dim:
            raise ValueError(f"lower, upper: expected shape ({dim},), got {hp.lower.shape}")
        return hp

    def init(hparams: BoxFTRLHyperparams) -> BoxFTRLState:
        if not isinstance(hparams, BoxFTRLHyperparams):
            raise ValueError(f"hparams: expected BoxFTRLHyperparams, got {type(hparams).__name__}")
        checks.check_one_point(jnp.shape(hparams.eta))
        if hparams.lower.shape != (dim,) or hparams.upper.shape != (dim,):
            raise ValueError(
                f"hparams.lower/upper: expected shape ({dim},), got {hparams.lower.shape} and "
                f"{hparams.upper.shape}"
            )
        zeros, zero_i = jnp.zeros_like(hparams.lower), jnp.zeros((), jnp.int32)
        return fresh_state(
            BoxFTRLState(
                w=point_from_theta(zeros, hparams.lower, hparams.upper),  # centre (errata 15)
                **dict.fromkeys(("theta", "grad_sum", "r_plus", "r_minus"), zeros),
                hparams=hparams,
                **dict.fromkeys(("t", "status", "num_failures", "num_capped"), zero_i),
            )
        )

    def query(state: BoxFTRLState, key: jax.Array) -> tuple[jax.Array, OnePointAux]:
        """``x_t = w_t + eps_t lam_{t,i_t}^{-1/2} e_{i_t}`` (clipped to the box)."""
        hp = state.hparams
        # One draw of the pair (i_t, eps_t), uniform on [d] x {-1, +1}.
        pair = jax.random.randint(key, (), 0, 2 * dim, dtype=jnp.int32)
        coord = pair // 2
        sign = (1 - 2 * (pair % 2)).astype(state.w.dtype)
        sqrt_lam = barrier_sqrt_hessian(state.theta[coord], hp.lower[coord], hp.upper[coord])
        x = jnp.clip(state.w.at[coord].add(sign / sqrt_lam), hp.lower, hp.upper)
        return x[None, :], OnePointAux(coord, sign, x)

    def update(state: BoxFTRLState, aux: OnePointAux, values: jax.Array) -> BoxFTRLState:
        """Estimator (4.2), the new buffers and ``w_{t+1}`` from (D.4)."""
        values = jnp.asarray(values)
        if values.shape not in ((1,), ()):
            raise ValueError(
                f"values: expected shape (1,) (one-point feedback), got {values.shape}"
            )
        if aux.point.shape != (dim,):
            raise ValueError(f"aux.point: expected shape ({dim},), got {aux.point.shape}")
        hp = state.hparams
        v = values.reshape(()).astype(state.w.dtype)
        i, eps_t = aux.coord, aux.sign

        # Estimator (4.2) with the (possibly capped) buffers of the previous round.
        sqrt_lam = barrier_sqrt_hessian(state.theta, hp.lower, hp.upper)
        c_eff, _ = capped_buffer_difference(state.r_plus, state.r_minus, hp.eta, hp.optimism_cap)
        g_tilde = sqrt_lam * c_eff
        z = 0.5 * (state.r_plus[i] + state.r_minus[i]) + eps_t * c_eff[i]
        g = g_tilde.at[i].add(dim * (v - z) * eps_t * sqrt_lam[i])
        grad_sum = state.grad_sum + g
        r_plus = jnp.where(eps_t > 0, state.r_plus.at[i].set(v), state.r_plus)
        r_minus = jnp.where(eps_t > 0, state.r_minus, state.r_minus.at[i].set(v))

        # w_{t+1} from F_{t,i} = 0 (D.4) with the new buffers.
        c_new, capped = capped_buffer_difference(r_plus, r_minus, hp.eta, hp.optimism_cap)
        kappa = hp.eta * grad_sum * (0.5 * (hp.upper - hp.lower))
        res = solve_theta(kappa, hp.eta * c_new, state.theta, max_steps=max_steps)
        ok = jnp.isfinite(res.x) & jnp.isfinite(res.fx)
        theta = jnp.where(ok, res.x, state.theta)
        root_status = worst_of(jnp.where(ok, res.status, NONFINITE))
        new = state._replace(
            w=point_from_theta(theta, hp.lower, hp.upper),
            theta=theta,
            grad_sum=grad_sum,
            r_plus=r_plus,
            r_minus=r_minus,
            t=state.t + 1,
            num_capped=state.num_capped + jnp.any(capped).astype(jnp.int32),
        )
        # Non-finite feedback: keep the whole state, surface NONFINITE.
        finite_in = jnp.isfinite(v) & jnp.all(jnp.isfinite(grad_sum))
        return accept(state, new, finite_in, root_status)

    return from_query(init, query, update, hyperparams, dim)
