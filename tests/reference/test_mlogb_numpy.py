"""Checks of the numpy references for EOFD-MLogB / OFUL-MLogB against dense linear algebra.

Paper: eofd-mlogb-frequent-directions, Section 3 (Lemma 1 eq. 17-18, Lemma 2 eq. 23-25,
Algorithm 1 eq. 14-15 with Lemma 3/4's sketch bounds and eq. 29, Algorithm 2) and eq. 36 / 27.
Everything here is plain numpy in float64 on tiny shapes; each check recomputes the quantity
densely (explicit Kronecker products, ``np.linalg.solve``, ``eigvalsh``) without the module's
helpers.
"""

import math

import numpy as np
import pytest

from references.mlogb_numpy import NumpyEOFD, NumpyOFUL, simulate


# ------------------------------------------------------------------------------------------------
# Independent dense helpers (no code shared with the module under test).
# ------------------------------------------------------------------------------------------------
def _probs(z):
    e = np.exp(z)
    return e / (1.0 + e.sum())


def _dense_hessian(W, x):
    s = _probs(W @ x)
    return np.kron(np.diag(s) - np.outer(s, s), np.outer(x, x))


def _i_kron_x(K, x):
    return np.kron(np.eye(K), x[:, None])  # (K d, K)


def _unit_rows(rng, shape):
    a = rng.normal(size=shape)
    return a / np.linalg.norm(a, axis=-1, keepdims=True)


def _dense_projection(w_prime, zt, radius):
    """Argmin of ||w - w'||_{Zt}^2 s.t. ||w|| <= S via KKT: (Zt + nu I) w = Zt w', bisection."""
    if np.linalg.norm(w_prime) <= radius:
        return w_prime, 0.0
    eye = np.eye(zt.shape[0])
    rhs = zt @ w_prime

    def norm_at(nu):
        return np.linalg.norm(np.linalg.solve(zt + nu * eye, rhs))

    lo, hi = 0.0, 1.0
    while norm_at(hi) > radius:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if norm_at(mid) > radius:
            lo = mid
        else:
            hi = mid
    nu = 0.5 * (lo + hi)
    return np.linalg.solve(zt + nu * eye, rhs), nu


def _make(kind, K, d, m, **kw):
    if kind == "eofd":
        return NumpyEOFD(K, d, m, **kw)
    return NumpyOFUL(K, d, **kw)


def _warm_up(learner, rng, rounds):
    """Random actions and outcomes; returns the absorbed-Hessian sum M (dense, at W_{t+1})."""
    K, d = learner.K, learner.d
    M = np.zeros((K * d, K * d))
    for _ in range(rounds):
        x = _unit_rows(rng, (d,)) * rng.uniform(0.5, 1.0)
        y = int(rng.integers(0, K + 1))
        learner.update(x, y)
        M += _dense_hessian(learner.W, x)
    return M


# ------------------------------------------------------------------------------------------------
# Lemma 2: projection.
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kind,K,m", [("eofd", 1, 2), ("eofd", 3, 4), ("oful", 1, 0), ("oful", 3, 0)]
)
@pytest.mark.parametrize("where", ["far", "barely_out", "barely_in"])
def test_update_matches_dense_prox_step(kind, K, m, where):
    d = 4
    rng = np.random.default_rng(10 * K + m)
    learner = _make(kind, K, d, m, lam=0.7, eta=1.3, S=0.6, rewards=np.arange(1.0, K + 1))
    _warm_up(learner, rng, 12)
    x = _unit_rows(rng, (d,))
    y = K  # a definite outcome
    # Dense eq. 8: w' = w - eta Ztilde^{-1} grad, Ztilde = Z + eta Hessian at W_t.
    w = learner.W.reshape(-1).copy()
    s = _probs(learner.W @ x)
    e_y = np.zeros(K)
    e_y[y - 1] = 1.0
    grad = np.kron(s - e_y, x)
    zt = learner.z_dense() + learner.eta * _dense_hessian(learner.W, x)
    w_prime = w - learner.eta * np.linalg.solve(zt, grad)
    nrm = np.linalg.norm(w_prime)
    learner.S = {"far": 0.5 * nrm, "barely_out": nrm * (1 - 1e-9), "barely_in": nrm * (1 + 1e-9)}[
        where
    ]
    expected, nu = _dense_projection(w_prime, zt, learner.S)
    info = learner.update(x, y)
    got = learner.W.reshape(-1)
    assert info["projected"] == (where != "barely_in")
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-10 * nrm)
    if info["projected"]:
        assert abs(np.linalg.norm(got) - learner.S) <= 1e-12 * learner.S
        assert info["nu"] > 0
        np.testing.assert_allclose(info["nu"], nu, rtol=1e-6, atol=1e-12)
        assert info["newton_steps"] <= 50


def test_projection_matches_slsqp():
    """The same projection against a generic constrained solver (scipy SLSQP)."""
    optimize = pytest.importorskip("scipy.optimize")
    K, d = 2, 3
    rng = np.random.default_rng(3)
    learner = NumpyEOFD(K, d, 3, lam=0.5, eta=1.0, S=0.4)
    _warm_up(learner, rng, 8)
    x = _unit_rows(rng, (d,))
    s = _probs(learner.W @ x)
    zt = learner.z_dense() + learner.eta * _dense_hessian(learner.W, x)
    w_prime = learner.W.reshape(-1) - learner.eta * np.linalg.solve(zt, np.kron(s, x))
    learner.S = 0.5 * np.linalg.norm(w_prime)
    res = optimize.minimize(
        lambda w: (w - w_prime) @ zt @ (w - w_prime),
        np.zeros(K * d),
        jac=lambda w: 2 * zt @ (w - w_prime),
        constraints=[
            {"type": "ineq", "fun": lambda w: learner.S**2 - w @ w, "jac": lambda w: -2 * w}
        ],
        method="SLSQP",
        options={"ftol": 1e-15, "maxiter": 500},
    )
    assert res.success
    learner.update(x, 0)
    np.testing.assert_allclose(learner.W.reshape(-1), res.x, atol=1e-7)


# ------------------------------------------------------------------------------------------------
# Algorithm 1: sketch invariants (Lemma 3/4, eq. 29), and m >= Kd reproduces OFUL (ERRATA 1).
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("K,d,m", [(1, 5, 2), (2, 4, 3), (3, 3, 5), (3, 3, 7)])
def test_sketch_invariants(K, d, m):
    rng = np.random.default_rng(K + d + m)
    learner = NumpyEOFD(K, d, m, lam=1.0, eta=1.0, S=2.0)
    M = _warm_up(learner, rng, 40)
    V, mu, rho = learner.V, learner.mu, learner.rho
    assert V.shape == (K * d, m) and mu.shape == (m,)
    np.testing.assert_allclose(V.T @ V, np.eye(m), atol=1e-12)
    assert np.all(mu >= 0)
    assert rho > 0  # truncation happened, so the bounds below are not trivial
    sketch = (V * mu) @ V.T
    tol = 1e-10 * max(1.0, np.trace(M))
    assert np.linalg.eigvalsh(M - sketch).min() >= -tol  # V mu V^T <= M
    assert np.linalg.eigvalsh(sketch + rho * np.eye(K * d) - M).min() >= -tol  # M <= ... + rho I
    # Eq. 29: rho <= min_{0 <= k < m} (sum of the eigenvalues of M beyond the k-th) / (m - k).
    ev = np.sort(np.linalg.eigvalsh(M))[::-1]
    bound = min(ev[k:].sum() / (m - k) for k in range(m))
    assert rho <= bound * (1 + 1e-10)


@pytest.mark.parametrize("K", [1, 3])
@pytest.mark.parametrize("beta", [0.5, "theory", "order"])
def test_full_sketch_reproduces_oful(K, beta):
    d, T, N = 3, 40, 6
    rng = np.random.default_rng(K)
    w_star = rng.normal(size=(K, d))
    actions = _unit_rows(rng, (T, N, d))
    mask = rng.uniform(size=(T, N)) < 0.8
    mask[:, 0] = True
    uniforms = rng.uniform(size=T)
    kw = dict(lam=0.8, eta=0.9, S=1.0, rewards=np.arange(1.0, K + 1), beta=beta, beta_scale=0.05)
    eofd = NumpyEOFD(K, d, K * d + 2, **kw)  # m > Kd: m_eff = Kd
    oful = NumpyOFUL(K, d, **kw)
    out_e = simulate(eofd, w_star, actions, mask, uniforms)
    out_o = simulate(oful, w_star, actions, mask, uniforms)
    assert eofd.V.shape == (K * d, K * d)
    assert eofd.rho == 0.0
    np.testing.assert_array_equal(out_e["chosen"], out_o["chosen"])
    np.testing.assert_array_equal(out_e["y"], out_o["y"])
    np.testing.assert_allclose(out_e["W"], out_o["W"], rtol=0, atol=1e-10)
    np.testing.assert_allclose(eofd.z_dense(), oful.H, rtol=0, atol=1e-10)
    np.testing.assert_allclose(eofd.acc, oful.acc, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(eofd.beta(), oful.beta(), rtol=1e-10)
    assert np.linalg.norm(out_o["W"][-1]) <= 1.0 + 1e-12
    # The chosen action is valid and the regret is measured against valid actions only.
    assert mask[np.arange(T), out_e["chosen"]].all()
    assert np.all(out_e["regret"] >= 0)


# ------------------------------------------------------------------------------------------------
# Lemma 1 (eq. 17-18) and the optimistic rewards (eq. 16, 19).
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kind,K,m", [("eofd", 1, 2), ("eofd", 3, 4), ("oful", 1, 0), ("oful", 3, 0)]
)
def test_a_matrix_and_scores_match_dense(kind, K, m):
    d, N = 4, 7
    rng = np.random.default_rng(100 + K)
    r = rng.uniform(0.5, 2.0, size=K)
    learner = _make(kind, K, d, m, lam=0.9, eta=1.0, S=1.5, rewards=r, beta=0.7)
    _warm_up(learner, rng, 15)
    if kind == "eofd":
        assert learner.rho > 0
    X = _unit_rows(rng, (N, d)) * rng.uniform(0.3, 1.0, size=(N, 1))
    Z = learner.z_dense()
    zinv = np.linalg.inv(Z)
    evals, evecs = np.linalg.eigh(Z)
    z_inv_sqrt = (evecs / np.sqrt(evals)) @ evecs.T
    a_got = learner.a_matrix(X)
    beta = learner.beta()
    scores, index = learner.scores(X), learner.index(X)
    for n, x in enumerate(X):
        ix = _i_kron_x(K, x)
        a = ix.T @ zinv @ ix
        np.testing.assert_allclose(a_got[n], a, rtol=1e-11, atol=1e-14)
        lam_max = np.linalg.norm(z_inv_sqrt @ ix, 2) ** 2  # eq. 17
        np.testing.assert_allclose(np.linalg.eigvalsh(a_got[n])[-1], lam_max, rtol=1e-10)
        z = learner.W @ x
        if K == 1:
            idx = z[0] + math.sqrt(beta) * math.sqrt(x @ zinv @ x)
            np.testing.assert_allclose(index[n], idx, rtol=1e-11)
            np.testing.assert_allclose(scores[n], 1 / (1 + math.exp(-idx)), rtol=1e-11)
        else:
            s = _probs(z)
            v = np.kron((np.diag(s) - np.outer(s, s)) @ r, x)  # (grad sigma kron x) r
            R = s @ r + math.sqrt(beta * (v @ zinv @ v)) + 0.5 * r.sum() * beta * lam_max
            np.testing.assert_allclose(scores[n], R, rtol=1e-11)
            np.testing.assert_allclose(index[n], R, rtol=1e-11)


def test_select_tie_rule_and_mask():
    learner = NumpyEOFD(2, 3, 2, lam=1.0, eta=1.0, S=1.0)
    X = np.array([[0.0, 0.6, 0.8], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.1, 0.1, 0.1]])
    # Round 1: W = 0, Z = lam I, so the three unit-norm actions tie (ERRATA 9): lowest index.
    assert learner.select(X) == 0
    assert learner.select(X, np.array([False, True, True, True])) == 1
    assert learner.select(X, np.array([False, False, False, True])) == 3
    with pytest.raises(ValueError, match="valid"):
        learner.select(X, np.zeros(4, bool))


# ------------------------------------------------------------------------------------------------
# Confidence radius at n = 0 (eq. 36, eq. 27 with the spec's substitutions).
# ------------------------------------------------------------------------------------------------
def test_beta_at_start():
    K, d, lam, eta, S, delta = 3, 2, 2.0, 0.5, 1.5, 0.05
    th = NumpyOFUL(K, d, lam=lam, eta=eta, S=S, beta="theory", beta_scale=2.0, delta=delta)
    expected = lam * S**2 + 2 * eta * (S + math.log(4) + 2 * math.log(2)) * (
        1.25 + 4 * math.log(1 / delta)
    )
    expected += 2 * eta * (2 + math.log(4))
    assert math.isclose(th.beta(), 2.0 * expected, rel_tol=1e-13)
    od = NumpyEOFD(K, d, 2, lam=lam, eta=eta, S=S, beta="order", delta=delta)
    assert math.isclose(od.beta(), math.log(4) ** 2 * math.log(1 / delta), rel_tol=1e-13)
    assert NumpyEOFD(K, d, 2, lam=lam, eta=eta, S=S, beta=0.3).beta() == 0.3


@pytest.mark.parametrize("kind,K,m", [("eofd", 2, 3), ("oful", 2, 0)])
def test_acc_and_theory_beta_match_dense(kind, K, m):
    """The last line of eq. 36, summed densely with Z_s recorded before each sketch update."""
    d, lam, eta, S, L, dx, delta = 3, 0.6, 0.8, 0.7, 0.9, 1.2, 0.02
    rng = np.random.default_rng(5)
    learner = _make(
        kind,
        K,
        d,
        m,
        lam=lam,
        eta=eta,
        S=S,
        beta="theory",
        beta_scale=1.0,
        delta=delta,
        action_bound=dx,
        lipschitz=L,
    )
    acc = 0.0
    for _ in range(10):
        x = _unit_rows(rng, (d,))
        z_before, w_before = learner.z_dense(), learner.W.copy()
        learner.update(x, int(rng.integers(0, K + 1)))
        dw = (learner.W - w_before).reshape(-1)
        acc += 2 * math.sqrt(6) * eta * L * S * np.sum(((learner.W - w_before) @ x) ** 2)
        acc += (24 * eta * K * d / lam - 1) * dw @ z_before @ dw
    np.testing.assert_allclose(learner.acc, acc, rtol=1e-10)
    n, D = 10, K * d
    m_eff, rho = (min(m, D), learner.rho) if kind == "eofd" else (D, 0.0)
    if kind == "eofd":
        assert rho > 0
    big = 1 + rho / lam
    lk = math.log(K + 1)
    beta = lam * S**2
    beta += (
        2
        * eta
        * (dx * S + lk + 2 * math.log((K + 1) * n + 2))
        * (1.25 + 4 * math.log(math.sqrt(1 + 2 * n) / delta))
    )
    beta += 2 * eta * (2 + lk)
    beta += (
        (math.sqrt(6) * eta / (12 * K * d))
        * lam
        * big
        * (
            K * d * math.log(1 + 2 * rho / lam)
            + m_eff * math.log(1 + 2 * dx**2 * n / (m_eff * lam))
        )
    )
    np.testing.assert_allclose(learner.beta(), max(beta + acc, 0.0), rtol=1e-10)


# ------------------------------------------------------------------------------------------------
# Outcome sampling and a learning run.
# ------------------------------------------------------------------------------------------------
def test_simulate_outcome_frequencies():
    """With a constant action the sampled outcomes follow sigma(W* x) (chi-square style check)."""
    K, d, T = 3, 2, 4000
    rng = np.random.default_rng(7)
    w_star = np.array([[1.0, 0.0], [0.0, -1.0], [0.5, 0.5]])
    x = np.array([0.6, 0.8])
    actions = np.broadcast_to(x, (T, 1, d))
    out = simulate(
        NumpyOFUL(K, d, lam=1.0, eta=1.0, S=1.0), w_star, actions, None, rng.uniform(size=T)
    )
    p1 = _probs(w_star @ x)
    p = np.concatenate([[1 - p1.sum()], p1])
    freq = np.bincount(out["y"], minlength=K + 1) / T
    assert np.all(np.abs(freq - p) <= 4 * np.sqrt(p * (1 - p) / T))
    assert np.all(out["regret"] == 0)
    assert out["W"].shape == (T + 1, K, d) and np.all(out["W"][0] == 0)


@pytest.mark.parametrize("K,m", [(1, 3), (3, 5)])
@pytest.mark.parametrize("kind", ["eofd", "oful"])
def test_regret_per_round_decreases(kind, K, m):
    d, T, N = 5, 300, 10
    rng = np.random.default_rng(1)
    w_star = rng.normal(size=(K, d))
    w_star *= 3.0 / np.linalg.norm(w_star)
    actions = _unit_rows(rng, (T, N, d))
    r = np.arange(1.0, K + 1)
    learner = _make(kind, K, d, m, lam=1.0, eta=0.5, S=3.0, rewards=r, beta=0.5)
    out = simulate(learner, w_star, actions, None, rng.uniform(size=T))
    cum = np.cumsum(out["regret"])
    early, late = cum[T // 3 - 1] / (T // 3), cum[-1] / T
    assert late < early
    # and it beats picking uniformly at random on the same action sets
    expected = np.einsum("tnk,k->tn", np.exp(actions @ w_star.T), r) / (
        1 + np.exp(actions @ w_star.T).sum(-1)
    )
    random_regret = (expected.max(1) - expected.mean(1)).mean()
    assert late < 0.6 * random_regret


# ------------------------------------------------------------------------------------------------
# Input validation.
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args,kw,match",
    [
        ((0, 3, 2), {}, "num_outcomes"),
        ((2, 3, 0), {}, "sketch_size"),
        ((2, 3, 2), {"lam": 0.0}, "lam"),
        ((2, 3, 2), {"S": -1.0}, "S"),
        ((2, 3, 2), {"eta": 0.0}, "eta"),
        ((2, 3, 2), {"rewards": [1.0, 2.0, 3.0]}, "rewards"),
        ((2, 3, 2), {"beta": "bogus"}, "beta"),
        ((2, 3, 2), {"delta": 1.5}, "delta"),
    ],
)
def test_validation(args, kw, match):
    base = dict(lam=1.0, eta=1.0, S=1.0)
    base.update(kw)
    with pytest.raises(ValueError, match=match):
        NumpyEOFD(*args, **base)
    if args[2] >= 1:
        with pytest.raises(ValueError, match=match):
            NumpyOFUL(*args[:2], **base)


def test_update_validation():
    learner = NumpyOFUL(2, 3, lam=1.0, eta=1.0, S=1.0)
    with pytest.raises(ValueError, match="y"):
        learner.update(np.ones(3), 3)
    with pytest.raises(ValueError, match="x"):
        learner.update(np.ones(4), 1)
