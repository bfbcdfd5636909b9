"""The exact-fit learner (bandits_jax.mlogb.exact) against its numpy reference
(references.exact_numpy) and an independent solve of its fit (scipy), float64; its
vmaps, its statuses and its validation. The JAX side is compiled at XLA's defaults."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize
from jax import lax

from bandits_jax.mlogb import bonus
from bandits_jax.mlogb.exact import exact, exact_hyperparams
from bandits_jax.status import Status
from references.exact_numpy import NumpyExact
from tests import xla_defaults
from tests.rejected import assert_rejected

EPS = np.finfo(np.float64).eps
T, N = 60, 8
HORIZON = 50  # the buffer's rows: the last ten rounds overwrite the oldest rows
LAM, BETA = 0.5, 0.3
BLOCK = 16  # 50 rows: three whole blocks and a clamped last one


def _rewards(K):
    return np.linspace(1 / K, 1, K)


def _stream(K, d, rounds, seed, S=2.0):
    """Teacher-forced rounds of Section 4's synthetic law (in numpy, no compile): action sets of
    4 to N unit-norm actions (T, N, d) with their masks, the played action (a random valid one,
    not the learner's) and its outcome drawn from the multinomial logistic model with
    ``||W*||_F = S``."""
    rng = np.random.default_rng(seed)
    W_star = rng.normal(size=(K, d))
    W_star *= S / np.linalg.norm(W_star)
    acts = rng.normal(size=(rounds, N, d))
    acts /= np.linalg.norm(acts, axis=2, keepdims=True)
    mask = np.arange(N)[None, :] < rng.integers(4, N + 1, size=(rounds, 1))
    played = np.array([rng.choice(np.flatnonzero(m)) for m in mask])
    xs = acts[np.arange(rounds), played]
    logits = np.hstack([np.zeros((rounds, 1)), xs @ W_star.T])
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    ys = np.array([rng.choice(K + 1, p=pt) for pt in p], dtype=np.int32)
    return acts, mask, xs, ys


@functools.cache
def _learner(K, d, horizon=HORIZON, newton_steps=5, block_rows=BLOCK):
    return exact(num_outcomes=K, dim=d, horizon=horizon, newton_steps=newton_steps,
                 block_rows=block_rows)  # fmt: skip


def _rounds(K, d, horizon=HORIZON, newton_steps=5, block_rows=BLOCK):
    """A teacher-forced run: per round the score parts and choice before the update, then the
    fit after it."""
    learner = _learner(K, d, horizon, newton_steps, block_rows)

    def body(s, rec):
        acts, mask, x, y = rec
        est, bon = learner.score_parts(s, acts)
        idx = bonus.argmax_tie(est + bon, mask)
        s = learner.update(s, x, y)
        out = {"est": est, "bon": bon, "choice": idx, "W": s.W, "H": s.H, "status": s.status,
               "steps": s.info.newton_steps, "grad_norm": s.grad_norm, "t": s.t}  # fmt: skip
        return s, out

    def run(state, acts, mask, xs, ys):
        return lax.scan(body, state, (acts, mask, xs, ys))

    return run


@functools.cache
def _run(K, d, **kw):
    """:func:`_rounds` compiled at XLA's defaults (the numbers users get)."""
    return xla_defaults.jit(_rounds(K, d, **kw))


def _hp(K, lam=LAM, beta=BETA):
    return exact_hyperparams(lam=lam, beta=beta, rewards=_rewards(K))


@functools.cache
def _played(K, d):
    """The stream of a shape and the compiled run's outputs on it (shared by the tests)."""
    data = _stream(K, d, T, seed=10 * K + d)
    acts, mask, xs, ys = (jnp.asarray(a) for a in data)
    _, out = _run(K, d)(_learner(K, d).init(_hp(K)), acts, mask, xs, ys)
    return data, jax.tree.map(np.asarray, out)


# --- the numpy reference ---------------------------------------------------------------------


@pytest.mark.parametrize("K,d", [(1, 5), (3, 4)])
def test_equals_numpy_reference_round_by_round(K, d):
    data, out = _played(K, d)
    ref = NumpyExact(num_outcomes=K, dim=d, horizon=HORIZON, lam=LAM, beta=BETA,
                     rewards=_rewards(K))  # fmt: skip
    acts, mask, xs, ys = data
    for t in range(T):
        est, bon = ref.score_parts(acts[t])
        # The reference's scores at the masked-out actions too (they are real actions).
        np.testing.assert_allclose(out["est"][t], est, rtol=1e-10, atol=1e-12, err_msg=f"t={t}")
        np.testing.assert_allclose(out["bon"][t], bon, rtol=1e-10, atol=1e-12, err_msg=f"t={t}")
        assert int(out["choice"][t]) == ref.select(acts[t], mask[t]), t
        ref.update(xs[t], int(ys[t]))
        np.testing.assert_allclose(out["W"][t], ref.W, rtol=1e-10, atol=1e-12, err_msg=f"t={t}")
        np.testing.assert_allclose(out["H"][t], ref.H, rtol=1e-10, atol=1e-12, err_msg=f"t={t}")
        assert int(out["steps"][t]) == ref.steps, t
        assert int(out["status"][t]) == (Status.CONVERGED if ref.converged else Status.MAX_STEPS)
    c = 1 + np.linalg.norm(xs, axis=1).sum()
    assert np.all(np.asarray(out["grad_norm"]) <= np.sqrt(EPS) * c)
    assert np.all(np.asarray(out["status"]) == Status.CONVERGED)
    assert len(set(np.asarray(out["choice"]).tolist())) > 1  # the choices move
    assert float(np.abs(out["W"][-1]).max()) > 0.1  # and so does the fit
    assert int(out["t"][-1]) == T > HORIZON  # the last rounds overwrote the oldest rows


# --- the fit against an independent solve -----------------------------------------------------


def _objective(w, X, Y, K, lam):
    """The regularised negative log-likelihood and its gradient, vectorised (not the reference's
    loops): logits ``Z = X W^T`` with a zero column for outcome 0."""
    W = w.reshape(K, -1)
    Z = np.hstack([np.zeros((X.shape[0], 1)), X @ W.T])
    lse = np.logaddexp.reduce(Z, axis=1)
    P = np.exp(Z - lse[:, None])[:, 1:]
    onehot = (Y[:, None] == np.arange(1, K + 1)[None, :]).astype(float)
    f = np.sum(lse - Z[np.arange(len(Y)), Y]) + 0.5 * lam * w @ w
    return f, ((P - onehot).T @ X).reshape(-1) + lam * w


@pytest.mark.parametrize("K,d", [(1, 5), (3, 4)])
def test_fit_is_the_minimiser_of_the_full_history_loss(K, d):
    data, out = _played(K, d)
    xs, ys = data[2], data[3]
    for t in (4, 29, T - 1):  # the last fit covers the last HORIZON rounds only
        X, Y = xs[max(0, t + 1 - HORIZON) : t + 1], ys[max(0, t + 1 - HORIZON) : t + 1]
        W = np.asarray(out["W"][t])
        _, g = _objective(W.reshape(-1), X, Y, K, LAM)
        assert np.linalg.norm(g) <= 1e-12 * (1 + np.linalg.norm(X, axis=1).sum()), t
        sol = scipy.optimize.minimize(_objective, np.zeros(K * d), args=(X, Y, K, LAM),
                                      jac=True, method="BFGS", options={"gtol": 1e-11})  # fmt: skip
        np.testing.assert_allclose(W.reshape(-1), sol.x, rtol=1e-6, atol=1e-7, err_msg=f"t={t}")


def test_not_converged_with_one_newton_step_on_a_hard_case():
    """Separable outcomes and a tiny ridge: the MLE runs away and one step a round cannot follow
    it (MAX_STEPS, the iterate kept and the update accepted); thirty steps can."""
    K, d, rounds = 1, 3, 40
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(rounds, d))
    xs /= np.linalg.norm(xs, axis=1, keepdims=True)
    ys = (xs[:, 0] > 0).astype(np.int32)
    hp = exact_hyperparams(lam=1e-6, beta=0.0)
    statuses = {}
    for steps in (1, 30):
        learner = exact(num_outcomes=K, dim=d, horizon=rounds, newton_steps=steps)

        def feed(s, xy, learner=learner):
            s = learner.update(s, *xy)
            return s, (s.status, s.grad_norm)

        run = jax.jit(lambda s, xs, ys, feed=feed: lax.scan(feed, s, (xs, ys)))
        final, (status, _) = run(learner.init(hp), jnp.asarray(xs), jnp.asarray(ys))
        statuses[steps] = np.asarray(status)
        assert int(final.t) == rounds and np.all(np.isfinite(np.asarray(final.W)))
    assert np.sum(statuses[1] == Status.MAX_STEPS) >= rounds // 2, statuses[1]
    assert set(statuses[1].tolist()) <= {int(Status.CONVERGED), int(Status.MAX_STEPS)}
    assert np.all(statuses[30] == Status.CONVERGED), statuses[30]


# --- vmap ------------------------------------------------------------------------------------


def test_vmap_over_trials_and_a_grid_equals_the_loop():
    """One batch of three runs, each with its own stream (trials) and its own (lam, beta) point
    (a grid), against the three runs one by one."""
    K, d, rounds = 2, 3, 12
    learner = _learner(K, d, rounds, 5, 5)
    run = _rounds(K, d, horizon=rounds, newton_steps=5, block_rows=5)
    streams = [tuple(jnp.asarray(a) for a in _stream(K, d, rounds, seed=s)) for s in (1, 2, 3)]
    lam, beta = np.array([0.1, 1.0, 3.0]), np.array([0.0, 0.5, 2.0])
    assert learner.hyperparams is exact_hyperparams
    hp = learner.hyperparams(lam=lam, beta=beta, rewards=_rewards(K))
    assert hp.lam.shape == (3,) and hp.rewards.shape == (3, K)
    with pytest.raises(ValueError, match="vmap"):
        learner.init(hp)
    batched = jax.tree.map(lambda *a: jnp.stack(a), *streams)
    final_b, out_b = jax.jit(jax.vmap(run))(jax.vmap(learner.init)(hp), *batched)
    loop = jax.jit(run)
    for i, st in enumerate(streams):
        final, out = loop(learner.init(_hp(K, lam[i], beta[i])), *st)
        for key in ("W", "H", "est", "bon"):
            np.testing.assert_allclose(out_b[key][i], out[key], rtol=1e-12, atol=1e-14)
        for key in ("choice", "status", "steps"):
            np.testing.assert_array_equal(out_b[key][i], out[key])
        np.testing.assert_array_equal(final_b.X[i], final.X)
        np.testing.assert_array_equal(final_b.filled[i], final.filled)
    assert len(set(np.asarray(out_b["choice"][:, -1]).tolist())) > 1  # the runs differ


# --- statuses and validation -----------------------------------------------------------------


def test_rejected_updates_keep_the_state_under_jit():
    K, d = 2, 3
    learner = _learner(K, d, 5, 5, 5)
    s1 = learner.update(learner.init(_hp(K)), jnp.array([0.3, -0.5, 0.4]), 1)
    upd = jax.jit(learner.update)
    for x, y, code in (
        ([0.1, jnp.nan, 0.2], 1, Status.NONFINITE),
        ([0.1, 0.2, 0.3], 7, Status.BAD_OUTCOME),
    ):
        new = upd(s1, jnp.asarray(x), jnp.int32(y))
        assert int(new.status) == code
        assert_rejected(new, s1)


BAD_FACTORY = [
    ({"num_outcomes": 0}, "exact.*num_outcomes"),
    ({"dim": 2.5}, "exact.*dim"),
    ({"horizon": 0}, "exact.*horizon"),
    ({"horizon": True}, "exact.*horizon"),
    ({"newton_steps": 0}, "exact.*newton_steps"),
    ({"block_rows": 1.5}, "exact.*block_rows"),
    ({"max_halvings": -1}, "exact.*max_halvings"),
]
BAD_HPARAMS = [
    ({"lam": 0.0}, "exact_hyperparams.*lam"),
    ({"lam": float("nan")}, "exact_hyperparams.*lam"),
    ({"beta": -1.0}, "exact_hyperparams.*beta"),
    ({"rewards": [-1.0]}, "exact_hyperparams.*rewards"),
    ({"dtype": jnp.int32}, "exact_hyperparams.*dtype"),
    ({"lam": np.ones(2), "beta": np.ones(3)}, "exact_hyperparams.*broadcast"),
]


def test_bad_input_is_a_value_error_naming_the_function_and_argument():
    good = {"num_outcomes": 2, "dim": 3, "horizon": 10}
    for kw, pattern in BAD_FACTORY:
        with pytest.raises(ValueError, match=pattern):
            exact(**{**good, **kw})
    for kw, pattern in BAD_HPARAMS:
        with pytest.raises(ValueError, match=pattern):
            exact_hyperparams(**{"lam": 1.0, **kw})
    learner = _learner(2, 3, 5, 5, 5)
    with pytest.raises(ValueError, match="init: rewards"):
        learner.init(exact_hyperparams(lam=1.0))  # K = 1 rewards for K = 2
    s = learner.init(_hp(2))
    with pytest.raises(ValueError, match=r"\bx\b"):
        learner.update(s, jnp.array([0.1, jnp.nan, 0.2]), 1)
    with pytest.raises(ValueError, match=r"\by\b"):
        learner.update(s, jnp.array([0.1, 0.2, 0.3]), 3)
    with pytest.raises(ValueError, match="actions"):
        learner.select(s, jnp.ones((4, 2)))
