"""Buffered EOFD-MLogB (bandits_jax.mlogb.eofd_buffer) against its numpy reference
(references.eofd_buffer_numpy: dense matrices, a dense eigendecomposition for the
sketch), float64, round by round; the closed-form Jacobian root against a Cholesky
factorisation; its vmaps, statuses and validation. The JAX side is compiled at XLA's defaults."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from bandits_jax import mlogb
from bandits_jax.mlogb import bonus, model
from bandits_jax.mlogb.eofd_buffer import eofd_buffered, jacobian_root
from bandits_jax.mlogb.exact import exact_hyperparams
from bandits_jax.status import Status
from references.eofd_buffer_numpy import NumpyEOFDBuffered
from references.logistic_numpy import logistic_mle
from tests import xla_defaults
from tests.rejected import assert_rejected

EPS = np.finfo(np.float64).eps
T, N = 14, 6
B, M = 4, 2  # ten rounds leave the ring: ten evictions into a rank-2 sketch
LAM, BETA = 0.5, 0.3
# Tolerance: the JAX side solves with H through a Woodbury core of size m + B K (or H formed,
# hessian="dense") and its sketch
# through secular/eigh updates of an (m + K) core; the reference with dense D x D solves and a
# dense eigh. Both round at ~eps per operation; the Newton solves amplify by cond(H) <= ~1e2
# here (lam = 0.5, unit actions, at most B + rank-m terms), and the rounds compound it: 1e-9.
RTOL, ATOL = 1e-9, 1e-10


def _rewards(K):
    return np.linspace(1 / K, 1, K)


def _stream(K, d, rounds, seed, S=2.0):
    """Teacher-forced rounds (numpy): action sets of 3 to N unit actions with masks, the played
    action (a random valid one) and its outcome under the multinomial logistic model."""
    rng = np.random.default_rng(seed)
    W_star = rng.normal(size=(K, d))
    W_star *= S / np.linalg.norm(W_star)
    acts = rng.normal(size=(rounds, N, d))
    acts /= np.linalg.norm(acts, axis=2, keepdims=True)
    mask = np.arange(N)[None, :] < rng.integers(3, N + 1, size=(rounds, 1))
    played = np.array([rng.choice(np.flatnonzero(m)) for m in mask])
    xs = acts[np.arange(rounds), played]
    logits = np.hstack([np.zeros((rounds, 1)), xs @ W_star.T])
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    ys = np.array([rng.choice(K + 1, p=pt) for pt in p], dtype=np.int32)
    return acts, mask, xs, ys


@functools.cache
def _learner(K, d, buffer_size=B, sketch_size=M, regularization="paper", summary="gradient",
             hessian="auto", solver="auto"):  # fmt: skip
    return eofd_buffered(num_outcomes=K, dim=d, sketch_size=sketch_size, buffer_size=buffer_size,
                         regularization=regularization, summary=summary, hessian=hessian,
                         solver=solver)  # fmt: skip


def _rounds(learner):
    def body(s, rec):
        acts, mask, x, y = rec
        est, bon = learner.score_parts(s, acts)
        idx = bonus.argmax_tie(est + bon, mask)
        s = learner.update(s, x, y)
        out = {"est": est, "bon": bon, "choice": idx, "W": s.W, "Z": (s.V * s.mu) @ s.V.T,
               "rho": s.rho, "b": s.b, "status": s.status, "steps": s.info.newton_steps,
               "grad_norm": s.grad_norm}  # fmt: skip
        return s, out

    return lambda state, *stream: lax.scan(body, state, stream)


def _hp(K, lam=LAM, beta=BETA):
    return exact_hyperparams(lam=lam, beta=beta, rewards=_rewards(K))


@pytest.mark.parametrize("K,d,reg,summary,hessian,solver", [
    (1, 5, "robust", "gradient", "woodbury", "auto"),
    (3, 3, "paper", "gradient", "woodbury", "auto"),
    (1, 5, "paper", "anchor", "woodbury", "auto"), (3, 3, "robust", "anchor", "woodbury", "auto"),
    (1, 5, "robust", "gradient", "dense", "auto"), (3, 3, "robust", "anchor", "dense", "auto"),
    (3, 3, "robust", "gradient", "woodbury", "batched"),  # the FD core as a GPU runs it
])  # fmt: skip
def test_equals_numpy_reference_round_by_round(K, d, reg, summary, hessian, solver):
    learner = _learner(K, d, regularization=reg, summary=summary, hessian=hessian,
                       solver=solver)  # fmt: skip
    data = _stream(K, d, T, seed=100 + 10 * K + d)
    _, out = xla_defaults.jit(_rounds(learner))(learner.init(_hp(K)), *map(jnp.asarray, data))
    out = jax.tree.map(np.asarray, out)
    ref = NumpyEOFDBuffered(num_outcomes=K, dim=d, sketch_size=M, buffer_size=B, lam=LAM,
                            beta=BETA, rewards=_rewards(K), regularization=reg,
                            summary=summary)  # fmt: skip
    acts, mask, xs, ys = data
    evictions = 0
    for t in range(T):
        est, bon = ref.score_parts(acts[t])
        np.testing.assert_allclose(out["est"][t], est, rtol=RTOL, atol=ATOL, err_msg=f"t={t}")
        np.testing.assert_allclose(out["bon"][t], bon, rtol=RTOL, atol=ATOL, err_msg=f"t={t}")
        assert int(out["choice"][t]) == ref.select(acts[t], mask[t]), t
        ref.update(xs[t], int(ys[t]))
        evictions += ref.evicted
        for key, val in (("W", ref.W), ("Z", ref.Z), ("b", ref.b), ("rho", ref.rho)):
            np.testing.assert_allclose(out[key][t], val, rtol=RTOL, atol=ATOL, err_msg=f"{key} {t}")
        assert int(out["steps"][t]) == ref.steps, t
        assert int(out["status"][t]) == (Status.CONVERGED if ref.converged else Status.MAX_STEPS)
    assert evictions == T - B
    assert float(out["rho"][-1]) > 0.01  # the rank-2 sketch discarded mass (D > m)
    assert len(set(out["choice"].tolist())) > 1 and np.abs(out["W"][-1]).max() > 0.1


def test_auto_hessian_factors_the_smaller_matrix():
    """``hessian="auto"`` factors H itself (D x D) where ``D = K d <= r = m + B K``, else the
    Woodbury core (r x r); the numpy comparison above checks both forms' numbers."""
    for K, d, m, Bs in ((1, 5, 2, 4), (1, 12, 2, 4), (3, 3, 2, 4), (2, 20, 3, 8), (2, 20, 3, 20)):
        D, r = K * d, m + Bs * K
        state = _learner(K, d, buffer_size=Bs, sketch_size=m).init(_hp(K))
        assert state.chol.shape == (min(D, r),) * 2, (K, d, m, Bs)


def test_jacobian_root_is_the_cholesky_factor():
    """Against numpy's Cholesky of ``diag(s) - s s^T``, including large logits."""
    rng = np.random.default_rng(3)
    for K, scale in ((1, 1.0), (3, 1.0), (4, 8.0)):
        z = rng.normal(size=(5, K)) * scale
        L = np.asarray(jacobian_root(jnp.asarray(z)))
        for zi, Li in zip(z, L, strict=True):
            p = np.exp(
                np.concatenate([[0.0], zi]) - np.logaddexp.reduce(np.concatenate([[0.0], zi]))
            )
            J = np.diag(p[1:]) - np.outer(p[1:], p[1:])
            # Lower triangular with a positive diagonal and L L^T = J (entries <= 1, so 8 eps
            # absolute is rounding): the Cholesky factor, which is unique. (numpy's own factor
            # agrees with it only to about eps cond(J) relative, up to 2e-9 at these logits.)
            assert np.all(np.triu(Li, 1) == 0) and np.all(np.diag(Li) > 0)
            np.testing.assert_allclose(Li @ Li.T, J, rtol=0, atol=8 * EPS)


def test_vmap_over_trials_and_a_grid_equals_the_loop():
    """A batch of three runs, each its own stream and (lam, beta) point, against the loop."""
    K, d, rounds = 2, 3, 8
    learner = _learner(K, d, 3, 2)
    run = _rounds(learner)
    streams = [tuple(jnp.asarray(a) for a in _stream(K, d, rounds, seed=s)) for s in (1, 2, 3)]
    lam, beta = np.array([0.2, 1.0, 3.0]), np.array([0.0, 0.5, 2.0])
    assert learner.hyperparams is exact_hyperparams
    hp = learner.hyperparams(lam=lam, beta=beta, rewards=_rewards(K))
    with pytest.raises(ValueError, match="vmap"):
        learner.init(hp)
    batched = jax.tree.map(lambda *a: jnp.stack(a), *streams)
    _, out_b = jax.jit(jax.vmap(run))(jax.vmap(learner.init)(hp), *batched)
    loop = jax.jit(run)
    for i, st in enumerate(streams):
        _, out = loop(learner.init(_hp(K, lam[i], beta[i])), *st)
        for key in ("W", "Z", "b", "est", "bon"):
            np.testing.assert_allclose(out_b[key][i], out[key], rtol=1e-12, atol=1e-13)
        for key in ("choice", "status", "steps"):
            np.testing.assert_array_equal(out_b[key][i], out[key])


def test_rejected_updates_keep_the_state_under_jit():
    K, d = 2, 3
    learner = _learner(K, d, 3, 2)
    s = learner.init(_hp(K))
    for x, y in (([0.3, -0.5, 0.4], 1), ([0.1, 0.2, -0.3], 2), ([0.5, 0.1, 0.2], 0),
                 ([-0.2, 0.3, 0.1], 1)):  # fmt: skip
        s = learner.update(s, jnp.asarray(x), y)  # the fourth evicts
    upd = jax.jit(learner.update)
    for x, y, code in (
        ([0.1, jnp.nan, 0.2], 1, Status.NONFINITE),
        ([0.1, 0.2, 0.3], 7, Status.BAD_OUTCOME),
    ):
        new = upd(s, jnp.asarray(x), jnp.int32(y))
        assert int(new.status) == code
        assert_rejected(new, s)


def test_bad_input_is_a_value_error_naming_the_function_and_argument():
    good = {"num_outcomes": 2, "dim": 3, "sketch_size": 2}
    for kw, pattern in (
        ({"num_outcomes": 0}, "eofd_buffered.*num_outcomes"),
        ({"dim": 2.5}, "eofd_buffered.*dim"),
        ({"sketch_size": 0}, "eofd_buffered.*sketch_size"),
        ({"buffer_size": 0}, "eofd_buffered.*buffer_size"),
        ({"buffer_size": True}, "eofd_buffered.*buffer_size"),
        ({"newton_steps": 0}, "eofd_buffered.*newton_steps"),
        ({"max_halvings": 1.5}, "eofd_buffered.*max_halvings"),
        ({"regularization": "ridge"}, "eofd_buffered.*regularization"),
        ({"summary": "exact"}, "eofd_buffered.*summary"),
        ({"hessian": "qr"}, "eofd_buffered.*hessian"),
    ):
        with pytest.raises(ValueError, match=pattern):
            eofd_buffered(**{**good, **kw})
    assert mlogb.eofd_buffered is eofd_buffered
    assert np.allclose(model.sigma(jnp.zeros(2)), 1 / 3)


@pytest.mark.parametrize("K,d,m,S,lam,reg,bound", [
    (1, 10, 1, 20.0, 1e-4, "robust", 0.3), (3, 6, 2, 8.0, 1e-3, "paper", None),
])  # fmt: skip
def test_long_stream_stays_near_the_whole_histories_fit(K, d, m, S, lam, reg, bound):
    """400 rounds through a B = 4 ring into a rank-m sketch, |W*| = S, a tiny ridge. Eviction
    must not leave in b the pull of curvature the sketch discarded: 0.2.0's first form fails
    both cases (its robust fit stalls far from the MLE at K = 1; its paper fit runs off into
    non-finite updates at K = 3). At K = 3 (m = 2 of D = 18) the fixed fit is finite but
    overshoots the MLE: the evicted gradients along discarded directions keep a linear pull that
    only the ridge holds, so only finiteness is checked there."""
    rng = np.random.default_rng(7)
    W_star = rng.normal(size=(K, d))
    W_star *= S / np.linalg.norm(W_star)
    xs = rng.normal(size=(400, d)) / np.sqrt(d)
    logits = np.hstack([np.zeros((400, 1)), xs @ W_star.T])
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    ys = np.array([rng.choice(K + 1, p=q / q.sum()) for q in p], dtype=np.int32)
    learner = _learner(K, d, buffer_size=4, sketch_size=m, regularization=reg)

    def body(s, r):
        s = learner.update(s, *r)
        return s, s.status

    run = xla_defaults.jit(lambda s, x, y: lax.scan(body, s, (x, y)))
    state, status = run(learner.init(_hp(K, lam, 0.0)), jnp.asarray(xs), jnp.asarray(ys))
    status, W = np.asarray(status), np.asarray(state.W)
    assert not (status == Status.NONFINITE).any() and np.isfinite(W).all()
    if bound is not None:  # K = 1: the numpy ridge-logistic MLE (checked against scikit-learn)
        w_mle = logistic_mle(xs, ys.astype(float), lam, np.zeros(d))
        rel = np.linalg.norm(W[0] - w_mle) / np.linalg.norm(w_mle)
        assert rel < bound, rel
