"""Algorithms 3 and 6 compiled at XLA's defaults against the float64 numpy references written
from the paper (``references.bco_sphere_numpy``, ``bco_ensemble_numpy``), round by
round: queried points, played points, Algorithm 6's meta-weights, hints and learning rates,
charged losses and regret.

Both sides see the same draws: the test's round replays the learner's draw from the round's key
(``jax.random.randint`` for ``i_t``, ``jax.random.normal`` for the sphere direction, as
``bandits_jax.bco.estimators`` documents) and hands it to the reference, which computes everything
else itself (estimator, steps, projections, Optimistic-Adapt-ML-Prod, the fixed point of the
hints, the regret against the closed-form best point ``Pi_X(mean_t c_t)``).

Tolerances. One finite difference ``v = (f(x_+) - f(x_-)) / (2 delta)`` carries the rounding of
two loss values of size ``<= F`` (a few operations each) and the divisor (the learner divides by
the realised spacing, the references by ``2 delta``: a relative ``eps |w| / delta``), so
``|dv| <= e_v = 4 eps (F + R G) / delta``. A round moves an iterate by ``eta_t`` times a gradient
with error ``<= d e_v``; projections are non-expansive, so over ``T`` rounds the iterates differ by
at most ``tol_w = T max_t(eta_t d) e_v`` (Algorithm 6: ``eta d <= 2R`` for the convex learners;
the strongly convex ones, whose first steps are large, are projected back into the ball of radius
``R``: ``2R`` bounds them too). The meta quantities are ``s`` times inner products of ``g``
(error ``d e_v``) with iterates (error ``tol_w``): ``(1 + s d G R) tol_w``. Losses: ``G tol_w``
plus the rounding of ``F``; the regret at horizon ``H``: ``H`` times that.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax.bco import domains as dom
from bandits_jax.bco import ensembles as ens
from bandits_jax.bco import interact, summarize
from bandits_jax.bco import two_point as tp
from bandits_jax.bco.rounds import regret_curve
from bandits_jax.envs import bco_losses
from bandits_jax.sim.runner import init_run, play
from bandits_jax.status import CONVERGED
from references import bco_ensemble_numpy as ref6
from references import bco_sphere_numpy as ref3
from references.bco_numpy import project
from tests import xla_defaults

D = 3
T = 150
HORIZONS = (50, 100, 150)
EPS = np.finfo(np.float64).eps
# Centres of norm ~1.5 outside the unit ball (the projections bind) rotating slowly.
ENV_KW = dict(lam=1.0, radius=1.0, base_norm=1.5, amplitude=0.3, omega=0.05)
LOWER, UPPER = np.array([-1.0, -0.6, -0.8]), np.array([0.7, 1.0, 0.5])
ENVS = {
    "ball": bco_losses.quadratic(D, **ENV_KW),
    "box": bco_losses.quadratic(D, **ENV_KW, domain=dom.box(LOWER, UPPER)),
}
NP_DOMAINS = {"ball": ("ball", 1.0), "box": ("box", LOWER, UPPER)}
ENV_KEY, RUN_KEY = jax.random.key(11), jax.random.key(12)


def _radii(dkind):
    """``(R, r)`` of the numpy domain (Assumption 1)."""
    if dkind == "ball":
        return 1.0, 1.0
    return float(np.linalg.norm(np.maximum(-LOWER, UPPER))), float(min(-LOWER.min(), UPPER.min()))


@functools.cache
def _runner(learner_name, dkind, **factory_kw):
    """The library's round (``interact``) played by the library's runner (``play``), one compiled
    program at XLA's defaults per learner and domain kind; each round also records the learner's
    state before it (``w_t`` and, for Algorithm 6, ``p_t, m_t, eps_{t-1}``), its queries and the
    replayed draws."""
    env = ENVS[dkind]
    if learner_name == "sphere":
        learner = tp.sphere_learner(dim=D, **factory_kw)
    else:
        learner = ens.universal_ensemble(dim=D, **factory_kw)
    step = interact(learner, env)

    def recording_step(ls, es, key):
        points = learner.act(ls, None, key).points
        new_ls, new_es, metrics = step(ls, es, key)
        rec = dict(
            points=points,
            w=ls.w,
            coord=jax.random.randint(key, (), 0, D, dtype=jnp.int32),
            normal=jax.random.normal(key, (D,), ls.w.dtype),
            status=new_ls.status,
        )
        if learner_name == "universal":
            rec.update(p=ls.meta.weights, m=ls.meta.optimism, lr=ls.meta.lr)
        return new_ls, new_es, (metrics, rec)

    def run(hp):
        es0 = env.init(ENV_KEY)
        final, (metrics, rec) = play(recording_step, init_run(learner.init(hp), es0, RUN_KEY), T)
        summary = summarize(env, es0, metrics, T)
        return metrics, rec, final.learner, summary, regret_curve(env, es0, metrics, HORIZONS), es0

    return learner, xla_defaults.jit(run)


def _np_centres(es0):
    """``c_t = b + amplitude (cos(omega t) u + sin(omega t) v)`` (the family's drift), numpy."""
    base, u, v = (np.asarray(x, np.float64) for x in (es0.base, es0.u, es0.v))
    amp, om = float(es0.amplitude), float(es0.omega)
    ts = np.arange(T, dtype=np.float64)[:, None]
    return base + amp * (np.cos(om * ts) * u + np.sin(om * ts) * v)


def _np_loss(centres):
    def loss(t, x):
        return 0.5 * ENV_KW["lam"] * float(np.sum((x - centres[t]) ** 2))

    return loss


def _np_regret(centres, charged, dkind):
    """Regret at each horizon against the closed-form best fixed point ``Pi_X(mean c_t)``."""
    out = []
    for h in HORIZONS:
        x_star = project(np.mean(centres[:h], axis=0), NP_DOMAINS[dkind], 0.0)
        best = 0.5 * ENV_KW["lam"] * np.sum((x_star - centres[:h]) ** 2)
        out.append(np.sum(charged[:h]) - best)
    return np.array(out)


def _close(actual, expected, tol, what):
    actual = np.asarray(actual, np.float64)
    err = float(np.max(np.abs(actual - expected)))
    assert err <= tol, f"{what}: max deviation {err:.3e} > tolerance {tol:.3e}"


def _close_losses_and_regret(metrics, summary, curve, out, centres, dkind, tol_loss):
    """Charged losses within ``tol_loss``; the regret curve and the final regret, sums of ``T``
    of them, within ``T tol_loss`` of the reference's against the closed-form best point."""
    _close(metrics.loss, out["loss"], tol_loss, "charged losses")
    expected_regret = _np_regret(centres, out["loss"], dkind)
    _close(curve, expected_regret, T * tol_loss, "regret curve")
    _close(summary.regret, expected_regret[-1], T * tol_loss, "regret")


# ---------------------------------------------------------------------------------------------
# Algorithm 3
# ---------------------------------------------------------------------------------------------

SPHERE_CASES = [
    ("strongly_convex", "ball", {"lam": 1.0}),  # Theorem 8's eta_t = 1 / (lambda t)
    ("sqrt_t", "box", {}),  # R / (G sqrt(d t))
    ("variance", "ball", {}),  # AdaGrad-norm R / sqrt(d^2 + sum ||g_s||^2)
]


@pytest.mark.parametrize("kind,dkind,kw", SPHERE_CASES)
def test_sphere_learner_matches_numpy_reference(kind, dkind, kw):
    """Algorithm 3 against ``bco_sphere_numpy.algorithm3`` (paper's Algorithm 3 in numpy)."""
    env = ENVS[dkind]
    learner, run = _runner("sphere", dkind, schedule=kind)
    hp = learner.hyperparams(
        env.domain, horizon=T, smoothness=env.smoothness, lipschitz=env.lipschitz, **kw
    )
    metrics, rec, _, summary, curve, es0 = run(hp)
    R, r = _radii(dkind)
    delta = float(hp.delta)
    centres = _np_centres(es0)
    params = dict(radius=R, lam=kw.get("lam", 1.0), lipschitz=env.lipschitz, scale=1.0, offset=0.0)
    out = ref3.algorithm3(
        _np_loss(centres),
        D,
        np.asarray(rec["normal"]),
        domain=NP_DOMAINS[dkind],
        delta=delta,
        xi=delta / r,
        kind=kind,
        params=params,
    )
    F, G = float(np.max(np.abs(out["loss"]))) + 1.0, env.lipschitz
    e_v = 4 * EPS * (F + R * G) / delta
    tol_w = T * float(np.max(out["eta"])) * D * e_v
    _close(rec["points"], out["queries"], tol_w, "queried points")
    _close(rec["w"], out["w"][:-1], tol_w, "played points w_t")
    _close_losses_and_regret(metrics, summary, curve, out, centres, dkind, G * tol_w + 4 * EPS * F)
    assert np.all(np.asarray(rec["status"]) == CONVERGED)
    # Not trivial: the iterate travels and the projection binds somewhere.
    assert np.ptp(out["w"], axis=0).max() > 0.3
    assert np.any(~np.asarray(dom.contains(env.domain, jnp.asarray(out["w"]), hp.xi + 1e-6)))


# ---------------------------------------------------------------------------------------------
# Algorithm 6
# ---------------------------------------------------------------------------------------------

UNIVERSAL_CASES = [
    # (optimism, domain, hyperparameters): the paper's normalisation, the practical preset, and
    # a scale at which E.9's min binds (eps < 1/8) and the weights move far from uniform.
    ("fixed_point", "ball", {"preset": "theorem"}),
    ("fixed_point", "ball", {"preset": "practical"}),
    ("fixed_point", "ball", {"preset": "practical", "meta_scale": 3000.0}),
    ("lagged", "box", {"preset": "practical", "meta_scale": 3000.0}),
]


@pytest.mark.parametrize("optimism,dkind,kw", UNIVERSAL_CASES)
def test_universal_ensemble_matches_numpy_reference(optimism, dkind, kw):
    """Algorithm 6 against ``bco_ensemble_numpy.algorithm6`` (its own Optimistic-Adapt-ML-Prod,
    E.7-E.9, and its own bisection for the E.8 fixed point), weights compared every round."""
    env = ENVS[dkind]
    learner, run = _runner("universal", dkind, optimism=optimism)
    hp = learner.hyperparams(
        env.domain, horizon=T, lipschitz=env.lipschitz, smoothness=env.smoothness, **kw
    )
    metrics, rec, final, summary, curve, es0 = run(hp)
    R, r = _radii(dkind)
    G = env.lipschitz
    meta_scale = kw.get("meta_scale", 1.0 if kw["preset"] == "theorem" else 30.0)
    s = meta_scale / (2 * math.sqrt(10) * D * G * R)  # E.7's normaliser 1 / (2 sqrt(10) d G R)
    lams = 2.0 ** np.arange(math.ceil(math.log2(T)) + 1) / T  # (E.6)
    delta = float(hp.delta)
    centres = _np_centres(es0)
    out = ref6.algorithm6(
        _np_loss(centres),
        D,
        np.asarray(rec["coord"]),
        domain=NP_DOMAINS[dkind],
        radius=R,
        delta=delta,
        xi=delta / r,
        lams=lams,
        cvx_offsets=(D * D, D * D),  # Table 2
        loss_scale=s,
        optimism=optimism,
    )
    assert out["slope_bound"] < 1  # the fixed point is unique: both sides solve the same one
    F = float(np.max(np.abs(out["loss"]))) + 1.0
    e_v = 4 * EPS * (F + R * G) / delta
    tol_w = T * 2 * R * e_v
    tol_meta = (1 + s * D * G * R) * tol_w
    _close(rec["points"], out["queries"], tol_w, "queried points")
    _close(rec["w"], out["w"][:-1], tol_w, "played points w_t")
    _close(rec["p"], out["weights"][:-1], tol_meta, "meta weights p_t")
    _close(final.meta.weights, out["weights"][-1], tol_meta, "meta weights p_{T+1}")
    _close(rec["m"], out["hints"][:-1], tol_meta, "hints m_t")
    _close(rec["lr"], out["lr"][:-1], tol_meta, "learning rates eps_{t-1}")
    base_w = np.concatenate([np.asarray(final.sc_w), np.asarray(final.cvx_w)])
    _close(base_w, out["base_w"][-1], tol_w, "base decisions w_{T+1,i}")
    _close_losses_and_regret(metrics, summary, curve, out, centres, dkind, G * tol_w + 4 * EPS * F)
    assert np.all(np.asarray(rec["status"]) == CONVERGED)
    # Not trivial: the weights leave uniform and the convex learners' hints are not zero.
    assert np.ptp(out["weights"][-1]) > (1e-3 if kw["preset"] == "theorem" else 0.05)
    assert np.max(np.abs(out["hints"])) > 1e-4
    if "meta_scale" in kw:
        assert out["lr"].min() < 0.12  # E.9's sqrt(log N / sum (r - m)^2) binds
