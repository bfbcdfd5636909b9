"""EOFD-MLogB's variants beyond Algorithm 2 (robust regularisation, adaptive sketch size, Fast FD)
against the numpy reference written from their docstrings' equations
(references.eofd_variants_numpy), round by round in float64: choices, outcomes,
regret, the selection index of every action, the radius, W, rho, the rank and the sketch
``V diag(mu) V^T``; plus the paper-scale learner ``mlogb.practical`` returns at K d = 400, and
the derivations behind the robust radius checked on the reference's own trajectory.

The JAX side is compiled at XLA's defaults (what users run), one program per configuration;
the paper and robust regularisations share it (``robust`` is data in the state).
"""

from __future__ import annotations

import contextlib
import functools
import zlib

import jax
import numpy as np
import pytest

from bandits_jax import mlogb
from bandits_jax.envs.replay import replay_mlogb, replay_state
from bandits_jax.mlogb import recipes
from bandits_jax.mlogb.interact import interact
from bandits_jax.sim.runner import init_run, play
from references import mlogb_numpy
from references.eofd_variants_numpy import NumpyEOFDVariant, simulate_trace
from tests import xla_defaults
from tests.mlogb.test_numpy_equivalence import trajectory_tol

try:  # numpy's BLAS threads fight for the cores of a busy machine: one thread is 10x faster
    from threadpoolctl import threadpool_limits
except ImportError:  # pragma: no cover - only slower without it (scikit-learn brings it)
    threadpool_limits = None

EPS = np.finfo(np.float64).eps


def _one_blas_thread():
    return threadpool_limits(1) if threadpool_limits else contextlib.nullcontext()


def _stream(K, d, T, N, seed, norm=2.5):
    """Actions of distinct norms in [0.6, 1] (no ties), a random mask, uniforms, ``W*``."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(T, N, d))
    X /= np.linalg.norm(X, axis=2, keepdims=True)
    X *= rng.uniform(0.6, 1.0, size=(T, N, 1))
    mask = np.arange(N)[None, :] < rng.integers(N // 2, N + 1, size=(T, 1))
    W_star = rng.normal(size=(K, d))
    W_star *= norm / np.linalg.norm(W_star)
    return X, mask, rng.uniform(size=T), W_star


@functools.cache
def _trace_runner(learner, N, T):
    """One compiled (XLA defaults) T-round replay of ``learner``: per round the metrics, the
    selection index of every action (estimate + bonus), and after the update W, V, mu, acc."""
    env = replay_mlogb(num_outcomes=learner.num_outcomes, dim=learner.dim, max_actions=N)
    round_ = interact(learner, env)

    def step(ls, es, key):
        _, actions, _ = env.observe(es, jax.random.split(key)[0])  # the round's action set
        est, bon = learner.score_parts(ls, actions)
        ls, es, met = round_(ls, es, key)
        return ls, es, (met, est + bon, ls.W, ls.V, ls.mu, ls.acc)

    return xla_defaults.jit(lambda s: play(step, s, T)[1])


def _jax_trace(learner, state, X, mask, U, W_star, rewards):
    T, N, _ = X.shape
    run = init_run(state, replay_state(X, mask, U, W_star, rewards), jax.random.PRNGKey(0))
    met, index, W, V, mu, acc = jax.device_get(_trace_runner(learner, N, T)(run))
    return dict(met=met, index=index, W=W, V=V, mu=mu, acc=acc)


def _assert_trace_matches(got, want, *, lam, S, rewards):
    """Every per-round quantity equal (integers) or within :func:`trajectory_tol`."""
    met = got["met"]
    T = len(want["chosen"])
    tol = trajectory_tol(T, float(np.max(want["kappa"])))
    np.testing.assert_array_equal(met.choice, want["chosen"])
    np.testing.assert_array_equal(met.y, want["y"])
    np.testing.assert_array_equal(met.rank, want["rank"])
    np.testing.assert_array_equal(met.projected, want["projected"])
    # The regret is r.sigma(W* x) of the same actions on both sides: a few ulps of sum |r|.
    np.testing.assert_allclose(met.regret, want["regret"], rtol=0, atol=8 * EPS * np.sum(rewards))
    scale = lambda a: tol * float(np.max(np.abs(a)))  # noqa: E731  (absolute error on a's scale)
    np.testing.assert_allclose(got["W"], want["W"], rtol=tol, atol=tol * S)
    np.testing.assert_allclose(got["index"], want["index"], rtol=tol, atol=scale(want["index"]))
    np.testing.assert_allclose(met.beta, want["beta"], rtol=tol, atol=scale(want["beta"]))
    np.testing.assert_allclose(got["acc"], want["acc"], rtol=tol, atol=scale(want["acc"]))
    np.testing.assert_allclose(met.rho, want["rho"], rtol=tol, atol=tol * lam)
    with _one_blas_thread():
        for t in range(T):
            V, F = got["V"][t], want["factor"][t]
            G_want = F @ F.T
            np.testing.assert_allclose(
                (V * got["mu"][t]) @ V.T, G_want, rtol=0, atol=scale(G_want) + tol * lam
            )


def _reference_trace(K, d, m, opts, kw, X, mask, U, W_star, rewards):
    with _one_blas_thread():
        ref = NumpyEOFDVariant(K, d, m, **opts, **kw)
        return simulate_trace(ref, W_star, X, mask, U, rewards)


def _run_both(K, d, m, opts, kw, T, N, seed, reg, solver="auto"):
    """The numpy reference and the JAX learner (built with ``opts``, ``solver`` and the
    robust regularisation; a paper state runs through the same program) on one stream."""
    X, mask, U, W_star = _stream(K, d, T, N, seed)
    rewards = np.linspace(1 / K, 1, K)
    kw = dict(kw, rewards=rewards)
    want = _reference_trace(
        K, d, m, dict(opts, regularization=reg), kw, X, mask, U, W_star, rewards
    )
    learner = _learner(K, d, m, tuple(sorted(dict(opts, solver=solver).items())))
    state = mlogb.eofd(num_outcomes=K, dim=d, sketch_size=m, regularization=reg, **opts).init(
        mlogb.hyperparams(**kw)
    )
    assert bool(state.robust) == (reg == "robust")
    got = _jax_trace(learner, state, X, mask, U, W_star, rewards)
    _assert_trace_matches(got, want, lam=kw["lam"], S=kw["S"], rewards=rewards)
    return want, got


@functools.cache
def _learner(K, d, m, opts):
    return mlogb.eofd(num_outcomes=K, dim=d, sketch_size=m, regularization="robust", **dict(opts))


# --- robust EOFD (per-round rule, fixed size) --------------------------------------------------

ROBUST = dict(K=1, d=6, m=2, opts={}, T=40, N=8, seed=zlib.crc32(b"robust-k1"))
ROBUST_HP = dict(lam=0.4, eta=1.3, S=1.0, beta="theory", beta_scale=0.02)


@pytest.mark.parametrize("reg", ["robust", "paper"])
def test_robust_k1_matches_reference(reg):
    """Robust EOFD (K = 1, theory radius) against the numpy reference's lam + rho/2 everywhere
    (eq. 8, 16-25, 36) and its derived radius; the paper state through the same program
    against the reference without the option (Algorithm 2)."""
    c = ROBUST
    want, got = _run_both(
        c["K"], c["d"], c["m"], c["opts"], ROBUST_HP, c["T"], c["N"], c["seed"], reg
    )
    # The paths that matter ran: truncations discarding mass, rho well beyond lam (so that
    # lam + rho/2 differs from lam), the projection, decisions changed by the bonus.
    assert np.sum(want["discard"] > 0) >= c["T"] // 2
    assert want["rho"][-1] > 2 * ROBUST_HP["lam"]
    assert 0 < np.sum(want["projected"]) < c["T"]
    assert np.sum(got["met"].explored) > 0


def test_robust_and_paper_differ():
    """The regularisation changes the trajectory (so the robust comparison is not the paper's
    in disguise): numpy references of both on one stream."""
    c = ROBUST
    stream = _stream(c["K"], c["d"], c["T"], c["N"], c["seed"])
    kw = dict(ROBUST_HP, rewards=[1.0])
    paper, robust = (
        _reference_trace(c["K"], c["d"], c["m"], {"regularization": reg}, kw, *stream, [1.0])
        for reg in ("paper", "robust")
    )
    assert np.max(np.abs(paper["W"] - robust["W"])) > 1e-2
    assert np.max(np.abs(paper["index"] - robust["index"])) > 1e-2


# --- adaptive sketch size -----------------------------------------------------------------------

ADAPTIVE = dict(
    K=2,
    d=4,
    m=1,
    opts={"max_sketch_size": 5, "delta_target": 1.6},
    T=40,
    N=8,
    seed=zlib.crc32(b"adaptive-k2"),
)
ADAPTIVE_HP = dict(lam=0.7, eta=1.3, S=1.0, beta="order", beta_scale=0.1)


@pytest.mark.parametrize(
    "reg,solver", [("paper", "auto"), ("robust", "auto"), ("robust", "batched")]
)
def test_adaptive_matches_reference(reg, solver):
    """Adaptive size (K = 2, order radius with the active rank): each truncation's rank is the
    smallest r' in [rank, m_max] keeping Delta_{t+1} <= tau in the numpy reference (paper
    Delta = 1 + rho/lam, robust 1 + rho/(2 lam)); the FD core by LAPACK on the CPU (``auto``)
    and by secular updates (what a GPU runs)."""
    c = ADAPTIVE
    want, got = _run_both(
        c["K"], c["d"], c["m"], c["opts"], ADAPTIVE_HP, c["T"], c["N"], c["seed"], reg,
        solver,
    )  # fmt: skip
    rank, m_max = want["rank"], c["opts"]["max_sketch_size"]
    assert np.all(np.diff(rank) >= 0) and len(set(rank.tolist())) >= 3 and rank[-1] == m_max
    assert np.sum(want["projected"]) > 0
    # Truncations discarded mass within the target while the rank was below m_max.
    below = rank < m_max
    assert np.any((want["discard"] > 0) & below)
    fac = 2.0 if reg == "robust" else 1.0
    assert np.all(1 + want["rho"][below] / (fac * ADAPTIVE_HP["lam"]) <= c["opts"]["delta_target"])


# --- Fast Frequent Directions -------------------------------------------------------------------

FAST = dict(K=2, d=4, m=2, opts={"sketch_rule": "fast"}, T=40, N=8, seed=zlib.crc32(b"fast-k2"))
FAST_HP = dict(lam=0.7, eta=1.3, S=1.0, beta="theory", beta_scale=0.05)


@pytest.mark.parametrize("reg", ["paper", "robust"])
def test_fast_matches_reference(reg):
    """Fast FD (K = 2, c = 2m = 4, theory radius with rank max(rank, 1)): the block is added
    without truncation and the sum shrunk by lambda_{m+1} only when the block does not fit, in
    the numpy reference (dense SVD of the sketch plus the block)."""
    c = FAST
    want, got = _run_both(
        c["K"], c["d"], c["m"], c["opts"], FAST_HP, c["T"], c["N"], c["seed"], reg
    )
    shrinks = want["discard"] > 0
    assert np.sum(shrinks) >= 5 and want["rho"][-1] > 0
    assert set(want["rank"].tolist()) == {c["m"], 2 * c["m"]}  # m after a shrink, c before
    assert np.all(want["rank"][shrinks] == c["m"])
    assert np.sum(want["projected"]) > 0


# --- the paper-scale learner --------------------------------------------------------------------


@pytest.mark.slow
def test_robust_eofd_at_paper_scale_matches_robust_reference():
    """Robust EOFD at K = 4, d = 100 (m = 40, default spare columns) at its known-bound point
    (``recipes.RULES``), the one ``mlogb.practical`` uses for it where 32 < K d <= 128 (at this
    size its recipe is the large point, whose larger lam leaves rho below 2 lam), over 200 rounds
    against the robust numpy reference."""
    K, d, T, N, S = 4, 100, 200, 10, 2.0
    tuned = mlogb.tuned("eofd-robust", num_outcomes=K, dim=d, S=S, horizon=T)
    assert tuned.sketch_size == 40
    ex, _ = recipes.tuned_point("eofd-robust", S, num_outcomes=1, dim=d)  # K d <= 128
    hp = recipes.hparams_for("eofd-robust", num_outcomes=K, dim=d, S=S, horizon=T, l=ex.l,
                             e=ex.e, beta=ex.beta)  # fmt: skip
    state = tuned.learner.init(hp)
    assert bool(state.robust) and state.R is None  # K d < DEFER_MIN_DIM: V formed every round
    assert state.basis.shape == (K * d, 40)
    X, mask, U, W_star = _stream(K, d, T, N, zlib.crc32(b"practical-4-100"), norm=S)
    rewards = np.asarray(hp.rewards)
    fields = ("lam", "eta", "S", "delta", "action_bound", "lipschitz")
    kw = {f: float(getattr(hp, f)) for f in fields}
    assert int(hp.beta_mode) == 0  # a fixed radius
    kw.update(rewards=rewards, beta=float(hp.beta))
    want = _reference_trace(
        K, d, tuned.sketch_size, {"regularization": "robust"}, kw, X, mask, U, W_star, rewards
    )
    got = _jax_trace(tuned.learner, state, X, mask, U, W_star, rewards)
    _assert_trace_matches(got, want, lam=kw["lam"], S=S, rewards=rewards)
    assert want["rho"][-1] > 2 * kw["lam"]  # the robust ridge dominates lam
    assert np.sum(want["projected"]) > 0 and np.sum(got["met"].explored) > 0


# --- the derivations behind the reference, on its own trajectory --------------------------------


@pytest.mark.parametrize("rule", ["per_round", "fast"])
def test_robust_radius_derivation_holds_on_reference_trajectory(rule):
    """Dense checks of the reference's derivation (module docstring of eofd_variants_numpy):
    FD's G <= M <= G + rho I (Fast FD also rho <= (tr M - tr G)/(m + 1)), the robust
    Z - rho/2 I <= H <= Z + rho/2 I, H <= Delta_Z Z with the derived Delta_Z, Z <= Delta H and
    H <= Delta Z with the adaptive size's Delta, and the telescoping
    defect Z_{t+1} - Z_t - grad^2 l_t <= sigma2_t/2 I behind the radius's + 2 S^2 rho."""
    K, d, m, T, N = 2, 4, 2, 30, 6
    X, mask, U, W_star = _stream(K, d, T, N, zlib.crc32(b"derivation"))
    kw = dict(lam=0.3, eta=1.3, S=1.0, beta=0.3, rewards=[0.5, 1.0])
    ref = NumpyEOFDVariant(K, d, m, regularization="robust", sketch_rule=rule, **kw)
    lam, D = kw["lam"], K * d
    M = np.zeros((D, D))
    Z_prev = ref.z_dense()
    for t in range(T):
        i = ref.select(X[t], mask[t])
        x = X[t, i]
        s, s0 = mlogb_numpy.sigma(W_star @ x)
        ref.update(x, mlogb_numpy.sample_outcome(s, float(s0), float(U[t])))
        s_new, _ = mlogb_numpy.sigma(ref.W @ x)  # grad^2 l_t(W_{t+1}), what FD absorbs
        hess = np.kron(mlogb_numpy.grad_sigma(s_new), np.outer(x, x))
        M += hess
        G, rho, Z = ref.gram(), ref.rho, ref.z_dense()
        tol = 64 * EPS * (lam + np.trace(M))  # eigenvalues of sums of T PSD terms
        eig = lambda A: np.linalg.eigvalsh(0.5 * (A + A.T))  # noqa: E731
        assert eig(M - G)[0] >= -tol and eig(M - G)[-1] <= rho + tol  # FD
        if rule == "fast":
            assert rho <= (np.trace(M) - np.trace(G)) / (m + 1) + tol
        H = lam * np.eye(D) + M
        assert eig(H - Z + rho / 2 * np.eye(D))[0] >= -tol  # Z - rho/2 I <= H
        assert eig(Z + rho / 2 * np.eye(D) - H)[0] >= -tol  # H <= Z + rho/2 I
        L = np.linalg.cholesky(Z)  # the largest generalized eigenvalue of (H, Z)
        Li = np.linalg.inv(L)
        front = eig(Li @ H @ Li.T)[-1]
        assert front <= ref.front_factor(rho) * (1 + 64 * EPS * np.linalg.cond(Z))
        assert eig(ref.delta_factor(rho) * H - Z)[0] >= -tol  # Z <= Delta H
        assert eig(ref.delta_factor(rho) * Z - H)[0] >= -tol  # H <= Delta Z
        # Z_{t+1} - Z_t - grad^2 l_t = sigma2_t/2 I - E_t with 0 <= E_t <= sigma2_t I.
        defect = eig(Z - Z_prev - hess)
        half = ref.last_discard / 2
        assert defect[-1] <= half + tol and defect[0] >= -half - tol
        Z_prev = Z
    assert ref.rho > lam  # the checks ran where the robust shift is large


def test_reference_without_options_is_algorithm2():
    """The variant reference with no option is mlogb_numpy.NumpyEOFD (Algorithm 2) on a stream,
    and with an unreachable adaptive target it is the fixed sketch."""
    K, d, m, T, N = 2, 4, 2, 30, 6
    X, mask, U, W_star = _stream(K, d, T, N, zlib.crc32(b"plain"))
    kw = dict(lam=0.5, eta=1.3, S=1.0, beta="theory", beta_scale=0.05, rewards=[0.5, 1.0])
    plain = mlogb_numpy.simulate(mlogb_numpy.NumpyEOFD(K, d, m, **kw), W_star, X, mask, U)
    for opts in ({}, {"max_sketch_size": 5, "delta_target": float("inf")}):
        ref = NumpyEOFDVariant(K, d, m, **opts, **kw)
        got = simulate_trace(ref, W_star, X, mask, U)
        np.testing.assert_array_equal(got["chosen"], plain["chosen"])
        np.testing.assert_array_equal(got["rank"], m)
        # The same numpy operations up to the padding of V: equal to a few ulps per round.
        tol = trajectory_tol(T, float(np.max(got["kappa"])))
        np.testing.assert_allclose(got["W"], plain["W"][1:], rtol=tol, atol=tol)
