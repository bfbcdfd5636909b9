"""ada-OFU-ECOLog (bandits_jax.mlogb.ecolog): against the plain-numpy reference on recorded
streams, the inner ECOLog solve against a brute-force minimisation, float32 against float64, and
the protocol checks of tests/test_conformance.py at K = 1."""

from __future__ import annotations

import functools
import importlib

import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from bandits_jax.linalg import roots
from references.ecolog_numpy import NumpyECOLog, prox_numpy
from tests import xla_defaults

# The module (``bandits_jax.mlogb.ecolog`` is also the name of the learner factory there).
eco = importlib.import_module("bandits_jax.mlogb.ecolog")

D = 3
LEARNER = eco.ecolog(dim=D)


def _hp(dtype=jnp.float64, grid=False, **kw):
    lam = np.asarray([0.5, 2.0]) if grid else kw.pop("lam", 1.0)
    kw.setdefault("S", 0.8)
    return eco.ecolog_hyperparams(lam=lam, rewards=[0.7], dtype=dtype, **kw)


# --- the reference trajectory ------------------------------------------------------------------


def _stream(d, T, seed, theta_star):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(T, d))
    X *= rng.uniform(0.5, 2.0, size=(T, 1)) / np.linalg.norm(X, axis=1, keepdims=True)
    Y = (rng.uniform(size=T) < 1.0 / (1.0 + np.exp(-X @ theta_star))).astype(np.int32)
    probe = rng.normal(size=(6, d))
    return X, Y, probe


@functools.cache
def _trajectory_fn(discrepancy: str, d: int, solver: str = "auto"):
    """One compiled scan per learner: per round the score parts on a probe (before the update),
    then the update; returns the per-round W, radius, parts, projected flags and statuses."""
    learner = eco.ecolog(dim=d, discrepancy=discrepancy, solver=solver)

    def run(state, X, Y, probe):
        def body(s, xy):
            est, bon = learner.score_parts(s, probe)
            s = learner.update(s, xy[0], xy[1])
            out = (s.W[0], s.info.beta, est, bon, s.info.projected, s.status, s.cum_loss)
            return s, out

        return lax.scan(body, state, (X, Y))

    return learner, xla_defaults.jit(run)


TRAJ_CASES = {
    # ball active in most rounds, theory radius with a scale
    "active-theory": dict(d=4, S=0.6, lam=0.5, beta="theory", beta_scale=0.5, disc="squared"),
    # ball never active, fixed radius
    "inactive-fixed": dict(d=4, S=5.0, lam=2.0, beta=0.3, beta_scale=1.0, disc="squared"),
    # the public code's unsquared discrepancy
    "code-discrepancy": dict(d=3, S=1.0, lam=1.0, beta="theory", beta_scale=1.0, disc="code"),
}


# The ball-constrained prox by one eigendecomposition (the CPU's "auto") and by a Cholesky
# factorisation a root step (what a GPU runs).
@pytest.mark.parametrize(
    "name,solver", [(n, "auto") for n in TRAJ_CASES] + [("active-theory", "batched")]
)
def test_trajectory_matches_numpy_reference(name, solver):
    c = TRAJ_CASES[name]
    d, T = c["d"], 40
    X, Y, probe = _stream(d, T, seed=3, theta_star=np.linspace(2.0, -1.0, d))
    learner, run = _trajectory_fn(c["disc"], d, solver)
    hp = eco.ecolog_hyperparams(
        lam=c["lam"],
        S=c["S"],
        rewards=[0.7],
        beta=c["beta"],
        beta_scale=c["beta_scale"],
        delta=0.05,
        dtype=jnp.float64,
    )
    final, (W, beta, est, bon, proj, status, cum) = run(
        learner.init(hp), jnp.asarray(X), jnp.asarray(Y), jnp.asarray(probe)
    )
    ref = NumpyECOLog(
        d,
        lam=c["lam"],
        S=c["S"],
        reward=0.7,
        beta=c["beta"],
        beta_scale=c["beta_scale"],
        delta=0.05,
        discrepancy=c["disc"],
    )
    rW, rbeta, rest, rbon, rproj, rcum = [], [], [], [], [], []
    for t in range(T):
        e, b = ref.score_parts(probe)
        rest.append(e)
        rbon.append(b)
        rbeta.append(ref.radius())
        ref.update(X[t], int(Y[t]))
        rW.append(ref.theta.copy())
        rproj.append(ref.last_nu > 0)
        rcum.append(ref.cum_loss)
    np.testing.assert_array_equal(np.asarray(status), roots.CONVERGED)
    tol = dict(rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(np.asarray(W), np.array(rW), **tol)
    np.testing.assert_allclose(np.asarray(beta), np.array(rbeta), **tol)
    np.testing.assert_allclose(np.asarray(est), np.array(rest), **tol)
    np.testing.assert_allclose(np.asarray(bon), np.array(rbon), **tol)
    np.testing.assert_allclose(np.asarray(cum), np.array(rcum), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(np.asarray(final.V), ref.V, **tol)
    np.testing.assert_allclose(np.asarray(final.V_inv), np.linalg.inv(ref.V), **tol)
    assert int(final.violations) == ref.violations
    assert int(final.t) == T
    # The case exercises what it says (the projection is active / never active).
    active = name == "active-theory"
    assert np.asarray(proj).sum() >= (10 if active else 0)
    assert (np.asarray(proj).sum() > 0) == any(rproj) == (active or name == "code-discrepancy")
    if name == "inactive-fixed":
        np.testing.assert_array_equal(np.asarray(beta), 0.3)
    else:
        assert np.ptp(np.asarray(beta)) > 0  # the data-dependent radius moves


# --- the inner solve against brute force -------------------------------------------------------


@functools.cache
def _prox_jit(max_steps=64, solver="auto"):
    return xla_defaults.jit(functools.partial(eco.prox_solve, max_steps=max_steps, solver=solver))


def _objective(thetas, V, center, x, w, target):
    """``w l~(x^T theta) + 1/2 ||theta - center||^2_V`` for rows of ``thetas``; ``l~`` is the
    antiderivative of ``mu(z) - target``: ``softplus(z) - target z``."""
    z = thetas @ x
    diff = thetas - center
    quad = 0.5 * np.einsum("ni,ij,nj->n", diff, V, diff)
    return w * (np.logaddexp(0.0, z) - target * z) + quad


def _grid_min(V, center, x, w, target, S):
    """Brute force over the disk ``||theta|| <= S``: a dense 2-D grid of the interior and a dense
    grid of angles on the circle, each refined around its best; the better of the two."""
    f = lambda pts: _objective(pts, V, center, x, w, target)  # noqa: E731
    mid, half = np.zeros(2), S
    for _ in range(4):
        g = np.linspace(-half, half, 401)
        pts = np.stack(np.meshgrid(g + mid[0], g + mid[1]), -1).reshape(-1, 2)
        pts = pts[np.sum(pts * pts, axis=1) <= S * S]
        vals = f(pts)
        mid, best = pts[np.argmin(vals)], vals.min()
        half = 4 * (g[1] - g[0])
    phi, half_phi = 0.0, np.pi
    for _ in range(5):
        a = np.linspace(phi - half_phi, phi + half_phi, 4001)
        circle = S * np.stack([np.cos(a), np.sin(a)], -1)
        vals = f(circle)
        phi, half_phi = a[np.argmin(vals)], 4 * (a[1] - a[0])
    if vals.min() < best:
        return S * np.array([np.cos(phi), np.sin(phi)]), vals.min()
    return mid, best


PROX_CASES = [
    # (center, x, w, target, S): ECOLog steps (w = 1) and theta_bar (w = 2, target 1/2)
    ([0.2, -0.1], [3.0, 1.0], 1.0, 1.0, 0.4),  # ball active
    ([0.2, -0.1], [1.0, 0.5], 1.0, 0.0, 2.0),  # ball inactive
    ([0.1, 0.1], [-3.0, 1.0], 2.0, 0.5, 0.15),  # theta_bar, active
    ([-0.4, 0.1], [0.5, -1.5], 2.0, 0.5, 3.0),  # theta_bar, inactive
]


def _prox(V, center, x, w, target, S, solver="auto"):
    """The compiled inner solve on numpy inputs (V^{-1} by a dense inverse)."""
    args = (V, np.linalg.inv(V), center, x)
    return _prox_jit(solver=solver)(*(jnp.asarray(a) for a in args), w, target, S)


SOLVERS = ("lapack", "batched")


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("case", range(len(PROX_CASES)))
def test_prox_solve_matches_brute_force(case, solver):
    center, x, w, target, S = (np.asarray(v, float) for v in PROX_CASES[case])
    V = np.array([[2.0, 0.6], [0.6, 0.7]])
    res = _prox(V, center, x, w, target, S, solver)
    theta = np.asarray(res.theta)
    assert int(res.status) == roots.CONVERGED
    grid_theta, grid_val = _grid_min(V, center, x, float(w), float(target), float(S))
    val = _objective(theta[None], V, center, x, float(w), float(target))[0]
    assert np.linalg.norm(theta) <= S * (1 + 1e-12)
    assert val <= grid_val + 1e-12  # nothing on the grid is better
    np.testing.assert_allclose(theta, grid_theta, atol=1e-5)
    active = case in (0, 2)
    assert bool(res.projected) == active
    assert (float(res.nu) > 0) == active
    if active:
        np.testing.assert_allclose(np.linalg.norm(theta), S, rtol=1e-12)


@pytest.mark.parametrize("solver", SOLVERS)
def test_prox_solve_kkt_and_reference_in_higher_dimension(solver):
    """d = 5: the KKT conditions hold and the numpy bisection agrees (ball active in 2 of 3)."""
    rng = np.random.default_rng(5)
    A = rng.normal(size=(5, 5))
    V = A @ A.T + 0.3 * np.eye(5)
    center = rng.normal(size=5)
    S = 0.5
    center *= 0.9 * S / np.linalg.norm(center)
    x = 3.0 * rng.normal(size=5)
    active = 0
    for w, target in ((1.0, 0.0), (1.0, 1.0), (2.0, 0.5)):
        res = _prox(V, center, x, w, target, S, solver)
        theta, nu = np.asarray(res.theta), float(res.nu)
        ref_theta, ref_nu = prox_numpy(V, center, x, w, target, S)
        np.testing.assert_allclose(theta, ref_theta, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(nu, ref_nu, rtol=1e-8, atol=1e-12)
        mu = 1.0 / (1.0 + np.exp(-x @ theta))
        grad = w * (mu - target) * x + V @ (theta - center) + nu * theta
        assert np.linalg.norm(grad) <= 1e-10 * (1 + np.linalg.norm(V @ center))
        assert nu >= 0 and np.linalg.norm(theta) <= S * (1 + 1e-12)
        if nu > 0:  # complementary slackness
            np.testing.assert_allclose(np.linalg.norm(theta), S, rtol=1e-12)
            active += 1
    assert active == 2


def test_prox_solve_reports_max_steps():
    V = np.array([[2.0, 0.6], [0.6, 0.7]])
    args = (jnp.asarray(V), jnp.asarray(np.linalg.inv(V)), jnp.asarray([0.2, -0.1]))
    res = _prox_jit(1)(*args, jnp.asarray([3.0, 1.0]), 1.0, 1.0, 0.5)
    assert int(res.status) == roots.MAX_STEPS


# float32 against float64: tests/test_float32.py (case "ecolog", a user's process).


# The protocol checks (jit == eager, one compiled program per eager call, distinct buffers,
# vmap over trials and grids, checkpoints, bad input eagerly and under jit) are the shared
# suites': tests/test_conformance.py and tests/mlogb/test_bad_input.py (case "ecolog").


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"lam": np.nan}, "lam"),
        ({"lam": 0.0}, "lam"),
        ({"S": -1.0}, "S"),
        ({"S": np.array([1.0, np.nan])}, "S"),
        ({"beta": -0.1}, "beta"),
        ({"beta": np.nan}, "beta"),
        ({"beta": "order"}, "beta"),
        ({"beta_scale": 0.0}, "beta_scale"),
        ({"delta": 1.0}, "delta"),
        ({"delta": np.nan}, "delta"),
        ({"rewards": [0.5, 1.0]}, "rewards"),
        ({"rewards": [-1.0]}, "rewards"),
        ({"dtype": jnp.int32}, "dtype"),
        ({"lam": 1e300, "dtype": jnp.float32}, "lam"),
    ],
)
def test_hyperparameter_validation_names_the_argument(kwargs, name):
    args = {"lam": 1.0, "S": 1.0, **kwargs}
    with pytest.raises(ValueError, match=name):
        eco.ecolog_hyperparams(**args)


def test_factory_validation():
    with pytest.raises(ValueError, match="num_outcomes"):
        eco.ecolog(num_outcomes=2, dim=D)
    with pytest.raises(ValueError, match="dim"):
        eco.ecolog(dim=0)
    with pytest.raises(ValueError, match="max_steps"):
        eco.ecolog(dim=D, max_steps=0)
    with pytest.raises(ValueError, match="ecolog: solver"):
        eco.ecolog(dim=D, solver="qr")
    with pytest.raises(ValueError, match="discrepancy"):
        eco.ecolog(dim=D, discrepancy="sqrt")
    with pytest.raises(ValueError, match="rewards"):
        LEARNER.init(_hp()._replace(rewards=jnp.ones((2,))))


def test_grid_hyperparameters_broadcast():
    hp = eco.ecolog_hyperparams(lam=np.array([0.5, 1.0, 2.0]), S=1.0, beta=np.array([[0.1], [1.0]]))
    assert hp.lam.shape == hp.S.shape == hp.beta.shape == hp.delta.shape == (2, 3)
    assert hp.rewards.shape == (2, 3, 1) and hp.beta_mode.dtype == jnp.int32
    assert np.all(np.asarray(hp.beta_mode) == eco.BETA_FIXED)
