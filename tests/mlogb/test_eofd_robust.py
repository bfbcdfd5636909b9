"""EOFD-MLogB with ``regularization="robust"`` (Z = (lam + rho/2) I + V diag(mu) V^T) against a
dense computation of the same Z; its radius against the numpy reference's derivation
(references.eofd_variants_numpy); validation; donation of every MLogB learner's
state."""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax import mlogb
from bandits_jax.linalg import roots
from references.eofd_variants_numpy import NumpyEOFDVariant
from tests.mlogb.test_learners import (
    _feed,
    _hp,
    dense_fd_spectrum,
    dense_ons_step,
    dense_scores,
)

EPS = np.finfo(np.float64).eps


@pytest.mark.parametrize("K,d,m", [(1, 6, 2), (3, 3, 4)])
def test_one_robust_update_equals_dense_step(K, d, m):
    """With the dense robust Z of the state: the ONS step and the Z-norm projection (dense
    bisection on the dual), Algorithm 1 at W_{t+1}, scores via the dense Z^{-1}, and the eq. (36)
    increment in the robust Z_t."""
    lam, eta, S = 0.8, 2.0, 0.6
    le = mlogb.eofd(num_outcomes=K, dim=d, sketch_size=m, regularization="robust")
    hp = _hp(K, S=S, eta=eta, lam=lam, beta="theory")
    s = _feed(le, le.init(hp), K, d, 9, seed=11)
    rho = float(s.rho)
    assert rho > 0.1 * lam  # the robust shift matters
    V, mu, W = np.asarray(s.V), np.asarray(s.mu), np.asarray(s.W)
    Z = (lam + rho / 2) * np.eye(K * d) + (V * mu) @ V.T
    X = np.random.default_rng(5).normal(size=(5, d))
    x, y = np.random.default_rng(12).normal(size=d), K
    w_new, wp_norm = dense_ons_step(Z, W, x, y, eta, S)
    assert wp_norm > S  # the projection is active
    s1 = jax.jit(le.update)(s, jnp.asarray(x), y)
    np.testing.assert_allclose(np.asarray(s1.W).reshape(-1), w_new, rtol=1e-8, atol=1e-10)
    s2, Vh = dense_fd_spectrum(V, mu, w_new, x)
    mu_ref = s2[:m] - s2[m]
    np.testing.assert_allclose(np.asarray(s1.mu), mu_ref, rtol=1e-8, atol=1e-10)
    G1 = (np.asarray(s1.V) * np.asarray(s1.mu)) @ np.asarray(s1.V).T
    np.testing.assert_allclose(G1, (Vh[:m].T * mu_ref) @ Vh[:m], atol=1e-9)
    np.testing.assert_allclose(float(s1.rho), rho + s2[m], rtol=1e-9)
    # Eq. (36) increment: ||W_{t+1} - W_t||^2 in the robust Z_t of the step.
    dw = w_new - W.reshape(-1)
    inc = 2 * math.sqrt(6) * eta * 1.0 * S * np.sum((dw.reshape(K, d) @ x) ** 2) + (
        24 * eta * K * d / lam - 1
    ) * (dw @ Z @ dw)
    np.testing.assert_allclose(float(s1.acc - s.acc), inc, rtol=1e-7)
    # Scores of the new state with the dense robust Z_{t+1}^{-1} and a fixed radius.
    s1f = s1._replace(hparams=_hp(K, S=S, eta=eta, lam=lam))  # beta fixed at 0.3
    Z1 = (lam + float(s1.rho) / 2) * np.eye(K * d) + G1
    want = dense_scores(w_new.reshape(K, d), np.linalg.inv(Z1), X, np.asarray(hp.rewards), 0.3)
    np.testing.assert_allclose(np.asarray(le.scores(s1f, jnp.asarray(X))), want, rtol=1e-9)


@functools.cache
def _eofd(K, d, m, reg):
    return mlogb.eofd(num_outcomes=K, dim=d, sketch_size=m, regularization=reg)


@pytest.mark.parametrize("mode", ["theory", "order"])
@pytest.mark.parametrize("reg", ["paper", "robust"])
def test_radius_matches_reference_derivation(reg, mode):
    """The radius a state selects with (``info.beta`` of the next update) against the numpy
    reference's eq. (36)/(27) with the robust terms it derives (Delta_Z in front, + 2 S^2 rho or
    + 2 rho/lam), evaluated at the state's n, rho and running sum."""
    K, d, m = 2, 3, 2
    le = _eofd(K, d, m, reg)  # one compiled update per learner: the mode is data
    kw = dict(lam=0.5, eta=1.5, S=1.5, beta=mode, beta_scale=0.7)
    hp = _hp(K, **kw)
    s = _feed(le, le.init(hp), K, d, 12, seed=3)
    assert float(s.rho) > 0.2  # the rho terms matter
    s1 = jax.jit(le.update)(s, jnp.ones(d) / 2, 1)
    ref = NumpyEOFDVariant(K, d, m, regularization=reg, rewards=np.asarray(hp.rewards), **kw)
    ref.n, ref.rho, ref.acc = int(s.t), float(s.rho), float(s.acc)
    want = ref.beta()
    # A closed form of ~10 float64 terms (logs, products): a few ulps of the largest, which
    # is at most |beta| + the scaled running sum's magnitude.
    scale = abs(want) + kw["beta_scale"] * abs(ref.acc)
    np.testing.assert_allclose(float(s1.info.beta), want, rtol=0, atol=32 * EPS * scale)
    if reg == "robust":  # the robust terms are not negligible at this rho
        paper = NumpyEOFDVariant(K, d, m, rewards=np.asarray(hp.rewards), **kw)
        paper.n, paper.rho, paper.acc = ref.n, ref.rho, ref.acc
        assert abs(paper.beta() - want) > 1e-3 * abs(want)


@pytest.mark.parametrize(
    "kwargs,word",
    [
        ({"regularization": "ridge"}, "regularization"),
        ({"regularization": None}, "regularization"),
        ({"max_sketch_size": 4}, "delta_target"),
        ({"delta_target": 2.0}, "max_sketch_size"),
        ({"max_sketch_size": 1, "delta_target": 2.0}, "max_sketch_size"),
        ({"max_sketch_size": 4.0, "delta_target": 2.0}, "max_sketch_size"),
        ({"max_sketch_size": 4, "delta_target": 0.5}, "delta_target"),
        ({"max_sketch_size": 4, "delta_target": float("nan")}, "delta_target"),
        ({"max_sketch_size": 4, "delta_target": "2"}, "delta_target"),
    ],
)
def test_bad_options(kwargs, word):
    with pytest.raises(ValueError, match=word):
        mlogb.eofd(num_outcomes=2, dim=3, sketch_size=2, **kwargs)


@pytest.mark.parametrize(
    "make",
    [
        lambda: mlogb.eofd(num_outcomes=2, dim=3, sketch_size=2),
        lambda: mlogb.eofd(num_outcomes=2, dim=3, sketch_size=2, regularization="robust"),
        lambda: mlogb.eofd(
            num_outcomes=2, dim=3, sketch_size=1, max_sketch_size=4, delta_target=1.5
        ),
        lambda: mlogb.oful(num_outcomes=2, dim=3),
    ],
    ids=["paper", "robust", "adaptive", "oful"],
)
def test_state_donation(make):
    """``jax.jit(update, donate_argnums=0)`` deletes every buffer of the given state that the
    update reads (all but the last status) and returns the same state, bit for bit, as the
    update without donation; the caller's hyperparameters survive (init copies them)."""
    learner = make()
    hp = _hp(2)
    x = jnp.asarray([0.3, -1.0, 0.5])
    plain = jax.jit(learner.update)
    want = plain(learner.init(hp), x, 2)
    # The last update's status is overwritten unread, so jit prunes that input and has nothing
    # to donate there (an int32 scalar): the update does not depend on it.
    fresh = learner.init(hp)
    other = plain(fresh._replace(status=jnp.int32(7)), x, 2)
    unread = {".status"}
    state = learner.init(hp)
    got = jax.jit(learner.update, donate_argnums=0)(state, x, 2)
    paths = jax.tree_util.tree_leaves_with_path(state)
    read = [leaf for path, leaf in paths if jax.tree_util.keystr(path) not in unread]
    assert len(read) == len(paths) - 1 and all(leaf.is_deleted() for leaf in read)
    assert int(got.t) == 1 and int(got.status) != roots.NONFINITE
    for a, b, c in zip(*map(jax.tree.leaves, (got, want, other)), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        np.testing.assert_array_equal(np.asarray(c), np.asarray(b))
    assert not any(leaf.is_deleted() for leaf in jax.tree.leaves(hp))


def test_paper_and_robust_share_one_program():
    """The regularisation is data (``state.robust``): both learners lower to the same program,
    so the compile cache serves the second; their results still differ where rho > 0."""
    K, d, m = 1, 6, 2
    hp = mlogb.hyperparams(lam=0.5, eta=1.0, S=2.0, rewards=[1.0], beta=0.1)
    paper = mlogb.eofd(num_outcomes=K, dim=d, sketch_size=m)
    robust = mlogb.eofd(num_outcomes=K, dim=d, sketch_size=m, regularization="robust")
    x = jnp.ones((d,)) / math.sqrt(d)
    y = jnp.asarray(1, jnp.int32)

    def lowered(learner):
        state = learner.init(hp)
        return jax.jit(learner.update).lower(state, x, y).as_text(debug_info=False), state

    text_p, state_p = lowered(paper)
    text_r, state_r = lowered(robust)
    assert text_p == text_r
    assert not bool(state_p.robust) and bool(state_r.robust)
    keys = jax.random.split(jax.random.key(0), 12)
    for k in keys:  # enough rounds that the sketch discards mass
        a = jax.random.normal(k, (d,))
        a = a / jnp.linalg.norm(a)
        state_p, state_r = paper.update(state_p, a, y), robust.update(state_r, a, y)
    assert float(state_r.rho) > 0.0
    assert not np.allclose(np.asarray(state_p.W), np.asarray(state_r.W))
