"""The Thompson sampling learners (bandits_jax.mlogb.lin_ts, bandits_jax.mlogb.logistic_ts)
against their numpy references (references.ts_numpy), float64, round by round, fed
the SAME standard normals: the test regenerates each round's draw from the key chain the
learners' docstrings give (``k_1 = key(seed)``, ``k_{t+1} = split(k_t)[0]``, the bits of
``split(k_t)[1]`` mapped to normals by ``sqrt(2) erfinv`` on an even grid, here in scipy) and
hands it to the reference, so the check also pins the chain and the map. One run a case is
compiled at XLA's defaults; a (hyperparameter grid) x (trials) batch in one program (the suite's
options) is compared cell by cell with numpy runs (the vmap check). A statistical check compares
many seeds' draws with the posterior's closed-form mean and covariance; the validation of the
builders and factories closes the file.
"""

from __future__ import annotations

import functools
import zlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special
from jax import lax

from bandits_jax.mlogb.lin_ts import lin_ts, lin_ts_hyperparams
from bandits_jax.mlogb.logistic_ts import logistic_ts, logistic_ts_hyperparams
from bandits_jax.status import Status
from references.ts_numpy import NumpyLinTS, NumpyLogisticTS
from tests import xla_defaults

EPS = np.finfo(np.float64).eps
T, N, D_X = 24, 5, 4  # rounds, actions a round, action dimension
# A grid of two points (every field differs), two trials (streams) each.
GRID = {"lam": [0.5, 2.0], "v": [0.3, 1.0], "seed": [5, 6]}


def _rewards(K):
    return np.linspace(1.0 / K, 1.0, K)


def _stream(K, seed, rounds=T, S=2.0):
    """Teacher-forced rounds in numpy: action sets (rounds, N, d) of unit-norm actions, the
    played action (a random one, not the learner's) and its outcome from the multinomial
    logistic model with ``||W*||_F = S``."""
    rng = np.random.default_rng(seed)
    W_star = rng.normal(size=(K, D_X))
    W_star *= S / np.linalg.norm(W_star)
    acts = rng.normal(size=(rounds, N, D_X))
    acts /= np.linalg.norm(acts, axis=2, keepdims=True)
    xs = acts[np.arange(rounds), rng.integers(0, N, size=rounds)]
    logits = np.hstack([np.zeros((rounds, 1)), xs @ W_star.T])
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    ys = np.array([rng.choice(K + 1, p=pt) for pt in p], dtype=np.int32)
    return acts, xs, ys


@functools.cache
def _bits_program(shape, rounds):
    def chain(seed):
        def body(k, _):
            nxt, sub = jax.random.split(k)
            return nxt, jax.random.bits(sub, shape, jnp.uint32)

        return lax.scan(body, jax.random.key(seed), None, length=rounds)[1]

    return jax.jit(chain)  # integers only: no compiler option moves them


def _draws(seed, shape, rounds=T):
    """The standard normals of rounds 1..rounds (module docstring's chain), float64: the key
    chain's bits from JAX, the rest in numpy and scipy (``sqrt(2) erfinv(w)`` on the even grid
    ``w = (2 m + 1 - 2^23) 2^-23``, ``m`` the bits' top 23)."""
    m = (np.asarray(_bits_program(shape, rounds)(seed)) >> 9).astype(np.int64)
    return np.sqrt(2.0) * scipy.special.erfinv((2 * m + 1 - 2**23) * 2.0**-23)


LEARNERS = {
    "lin_ts": (lambda K: lin_ts(num_outcomes=K, dim=D_X), lin_ts_hyperparams),
    "logistic_ts-diagonal": (
        lambda K: logistic_ts(num_outcomes=K, dim=D_X), logistic_ts_hyperparams
    ),
    "logistic_ts-full": (
        lambda K: logistic_ts(num_outcomes=K, dim=D_X, covariance="full"),
        logistic_ts_hyperparams,
    ),
}  # fmt: skip


def _hp(name, K, **point):
    return LEARNERS[name][1](**{k: np.asarray(v) for k, v in point.items()}, rewards=_rewards(K))


def _run(name, K):
    """One run: per round the score parts before the update and the state after it."""
    learner = LEARNERS[name][0](K)

    def one(hp, acts, xs, ys):
        def body(s, rec):
            a, x, y = rec
            est, bon = learner.score_parts(s, a)
            s = learner.update(s, x, y)
            return s, {"est": est, "bon": bon, "W": s.W, "status": s.status}

        return lax.scan(body, learner.init(hp), (acts, xs, ys))[1]

    return one


@functools.cache
def _single(name, K):
    """One run compiled at XLA's defaults (the reference comparison)."""
    return xla_defaults.jit(_run(name, K))


@functools.cache
def _batched(name, K):
    """A (grid point, trial) batch of runs in one program (the suite's options)."""
    trials = jax.vmap(_run(name, K), in_axes=(None, 0, 0, 0))
    return jax.jit(jax.vmap(trials, in_axes=(0, None, None, None)))


def _reference(name, K, lam, v, seed, acts, xs, ys):
    """The numpy run on the learner's draws: its records and the largest condition number of
    the posterior's matrix (``A`` or ``P``) over the rounds."""
    if name == "lin_ts":
        ref = NumpyLinTS(dim=D_X, lam=lam, v=v, rewards=_rewards(K))
        shape = (D_X + 1,)
    else:
        cov = name.split("-")[1]
        ref = NumpyLogisticTS(num_outcomes=K, dim=D_X, lam=lam, v=v, rewards=_rewards(K),
                              covariance=cov)  # fmt: skip
        shape = (K, D_X)
    xi = _draws(seed, shape)
    out = {"est": [], "bon": [], "W": []}
    conds = []
    for t in range(T):
        ref.draw(xi[t])
        est, bon = ref.score_parts(acts[t])
        ref.update(xs[t], ys[t])
        if name == "lin_ts":  # the protocol's W: row 0 the feature weights, the rest 0
            W = np.zeros((K, D_X))
            W[0] = ref.theta[:D_X]
            conds.append(np.linalg.cond(ref.matrix()))
        else:
            W = ref.W
            conds.append(np.linalg.cond(ref.P))
        for k, val in (("est", est), ("bon", bon), ("W", W)):
            out[k].append(val)
    return {k: np.stack(v) for k, v in out.items()}, max(conds)


def _assert_matches(got, name, K, point, stream):
    acts, xs, ys = stream
    np.testing.assert_array_equal(np.asarray(got["status"]), Status.CONVERGED)
    want, cond = _reference(name, K, *point.values(), acts, xs, ys)
    # Tolerance: each round's solves (Sherman-Morrison or the MAP step, and the Cholesky factor
    # of the draw) are backward stable, so their forward errors are a few eps times the
    # posterior matrix's condition number, and the rounds' errors add: 16 T eps cond, relative
    # to the quantity's largest magnitude (at least 1).
    tol = 16 * T * EPS * cond
    for field in ("est", "bon", "W"):
        a, b = np.asarray(got[field]), want[field]
        err = np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1.0)
        assert err <= tol, (name, K, point, field, err, tol)


POINT = {"lam": 0.5, "v": 0.3, "seed": 5}


# Full covariance at K = 1 is the K = 3 code with D = d (conformance and float32 cases run it).
@pytest.mark.parametrize(
    "name, K",
    [("lin_ts", 1), ("lin_ts", 3), ("logistic_ts-diagonal", 1), ("logistic_ts-diagonal", 3),
     ("logistic_ts-full", 3)],
)  # fmt: skip
def test_matches_numpy_reference_round_by_round(name, K):
    stream = _stream(K, zlib.crc32(f"{name}-{K}".encode()))
    got = _single(name, K)(_hp(name, K, **POINT), *stream)
    _assert_matches(got, name, K, POINT, stream)


def test_lin_ts_square_root_is_the_dense_inverse():
    """``R_t R_t^T = A_t^{-1}`` (``A`` by a dense sum, inverted by numpy) after T rounds of the
    O(D^2) square-root update; tolerance as in ``_assert_matches`` (T rounds of backward-stable
    rank-one steps, relative to the largest entry)."""
    K = 1
    acts, xs, ys = _stream(K, zlib.crc32(b"root"))
    learner = lin_ts(num_outcomes=K, dim=D_X)
    step = xla_defaults.jit(lambda s, x, y: learner.update(s, x, y))
    state = learner.init(_hp("lin_ts", K, **POINT))
    for t in range(T):
        state = step(state, jnp.asarray(xs[t]), ys[t])
    Z = np.hstack([xs, np.ones((T, 1))])
    A = POINT["lam"] * np.eye(D_X + 1) + Z.T @ Z
    R = np.asarray(state.root)
    want = np.linalg.inv(A)
    err = np.max(np.abs(R @ R.T - want)) / np.max(np.abs(want))
    assert err <= 16 * T * EPS * np.linalg.cond(A), err


@pytest.mark.parametrize("name, K", [("lin_ts", 3), ("logistic_ts-diagonal", 3)])
def test_vmap_over_grid_and_trials_matches_the_reference_cell_by_cell(name, K):
    """A (grid of 2 points: lam, v and seed all differ) x (2 streams) batch in one program: each
    cell equals its own numpy run."""
    streams = [_stream(K, zlib.crc32(f"grid-{name}-{K}-{i}".encode())) for i in range(2)]
    data = [np.stack(a) for a in zip(*streams, strict=True)]
    got = _batched(name, K)(_hp(name, K, **GRID), *data)
    for g in range(2):
        point = {k: v[g] for k, v in GRID.items()}
        for i in range(2):
            cell = jax.tree.map(lambda a, g=g, i=i: a[g, i], got)
            _assert_matches(cell, name, K, point, streams[i])
    assert not np.allclose(got["bon"][0], got["bon"][1])  # the grid points really differ


# --- the draws have the posterior's mean and covariance ---------------------------------------

SEEDS = 4000  # independent runs (one seed each) on one teacher-forced stream
ROUNDS_STAT = 6
PROBE = np.random.default_rng(11).normal(size=(3, D_X)) / np.sqrt(D_X)


def _whitened_ok(samples, mean, cov):
    """``samples`` (n, p) against ``N(mean, cov)``: whitened by ``cov``'s Cholesky factor, their
    mean is within 5 / sqrt(n) of 0 and their covariance within 5 sqrt(2 / n) (diagonal) and
    5 / sqrt(n) (off it) of the identity: 5 standard errors (the normal's mean has standard error
    1 / sqrt(n), a sample variance sqrt(2 / n), a covariance 1 / sqrt(n)); seeds are fixed."""
    n = samples.shape[0]
    L = np.linalg.cholesky(cov)
    w = np.linalg.solve(L, (samples - mean).T).T
    m = w.mean(axis=0)
    c = np.cov(w, rowvar=False)
    eye = np.eye(w.shape[1])
    assert np.max(np.abs(m)) <= 5 / np.sqrt(n), m
    bound = np.where(eye > 0, 5 * np.sqrt(2 / n), 5 / np.sqrt(n))
    assert np.all(np.abs(c - eye) <= bound), c - eye


def _seed_batch(learner, hp_fn, K, **kw):
    """Every seed's state after the teacher-forced rounds (one stream), and the stream."""
    acts, xs, ys = _stream(K, zlib.crc32(f"stat-{K}".encode()), rounds=ROUNDS_STAT)
    hp = hp_fn(seed=np.arange(SEEDS), rewards=_rewards(K), **kw)

    xs_j, ys_j = jnp.asarray(xs), jnp.asarray(ys)

    @jax.jit
    def run(hp):
        def one(h):
            s = learner.init(h)
            step = lambda t, s: learner.update(s, xs_j[t], ys_j[t])  # noqa: E731
            return lax.fori_loop(0, ROUNDS_STAT, step, s)

        return jax.vmap(one)(hp)

    return run(hp), xs, ys


def test_lin_ts_scores_have_the_posterior_law():
    """``theta~^T z`` of probe actions ~ N(theta^T z, v^2 Z A^{-1} Z^T), A by a dense sum."""
    v, lam = 0.7, 0.5
    learner = lin_ts(num_outcomes=1, dim=D_X)
    states, xs, _ = _seed_batch(learner, lin_ts_hyperparams, 1, lam=lam, v=v)
    est, bon = jax.vmap(learner.score_parts, in_axes=(0, None))(states, jnp.asarray(PROBE))
    Z = np.hstack([PROBE, np.ones((len(PROBE), 1))])
    Zx = np.hstack([xs, np.ones((len(xs), 1))])
    A = lam * np.eye(D_X + 1) + Zx.T @ Zx
    _whitened_ok(np.asarray(est + bon), np.asarray(est[0]), v**2 * Z @ np.linalg.solve(A, Z.T))


@pytest.mark.parametrize("cov", ["diagonal", "full"])
def test_logistic_ts_logits_have_the_posterior_law(cov):
    """The sampled logits ``W~ x`` of probe actions ~ N(W x, v^2 (I kron x)^T P^{-1} (I kron x'))
    with ``P`` the state's precision (full, or diag(q)). K = 1 reads them back from the scores
    (``z~ = log(s / (r - s))``, r = 1); K = 3 (full) from the state's sample."""
    v, lam = 0.8, 1.0
    K = 1 if cov == "diagonal" else 3
    learner = logistic_ts(num_outcomes=K, dim=D_X, covariance=cov)
    states, _, _ = _seed_batch(learner, logistic_ts_hyperparams, K, lam=lam, v=v)
    W = np.asarray(states.W[0])
    P = np.asarray(states.prec[0])
    P = np.diag(P.reshape(-1)) if cov == "diagonal" else P
    B = np.concatenate([np.kron(np.eye(K), x[:, None]) for x in PROBE], axis=1)  # (K d, 3 K)
    mean = np.concatenate([W @ x for x in PROBE])
    if K == 1:
        est, bon = jax.vmap(learner.score_parts, in_axes=(0, None))(states, jnp.asarray(PROBE))
        s = np.asarray(est + bon)
        samples = np.log(s / (1.0 - s))
    else:
        samples = np.einsum("nkd,pd->npk", np.asarray(states.sample), PROBE).reshape(SEEDS, -1)
    _whitened_ok(samples, mean, v**2 * B.T @ np.linalg.solve(P, B))


# --- validation ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, pattern",
    [
        (lambda: lin_ts_hyperparams(lam=0.0), r"lin_ts_hyperparams: lam"),
        (lambda: lin_ts_hyperparams(lam=1.0, v=-1.0), r"lin_ts_hyperparams: v"),
        (lambda: lin_ts_hyperparams(lam=1.0, v=float("nan")), r"lin_ts_hyperparams: v"),
        (lambda: lin_ts_hyperparams(lam=1.0, seed=-1), r"lin_ts_hyperparams: seed"),
        (lambda: lin_ts_hyperparams(lam=1.0, seed=1.5), r"lin_ts_hyperparams: seed"),
        (lambda: lin_ts_hyperparams(lam=1.0, seed=True), r"lin_ts_hyperparams: seed"),
        (lambda: lin_ts_hyperparams(lam=1.0, seed=2**32), r"lin_ts_hyperparams: seed"),
        (lambda: lin_ts_hyperparams(lam=[1.0, 2.0], v=[1.0, 2.0, 3.0]), r"must broadcast"),
        (lambda: lin_ts_hyperparams(lam=1.0, dtype=np.int32), r"dtype"),
        (lambda: lin_ts(num_outcomes=1, dim=0), r"lin_ts: dim"),
        (lambda: lin_ts(num_outcomes=1, dim=2, intercept=1), r"lin_ts: intercept"),
        (lambda: logistic_ts_hyperparams(lam=-1.0), r"logistic_ts_hyperparams: lam"),
        (lambda: logistic_ts_hyperparams(lam=1.0, rewards=[-1.0]), r"rewards"),
        (lambda: logistic_ts_hyperparams(lam=1e300, dtype=np.float32), r"lam.*float32"),
        (lambda: logistic_ts(num_outcomes=2, dim=3, covariance="banded"), r"covariance"),
        (lambda: logistic_ts(num_outcomes=2, dim=3, newton_steps=0), r"newton_steps"),
        (lambda: logistic_ts(num_outcomes=2, dim=3, max_halvings=2.0), r"max_halvings"),
        (lambda: logistic_ts(num_outcomes=True, dim=3), r"logistic_ts: num_outcomes"),
    ],
)
def test_bad_arguments_are_value_errors_naming_them(call, pattern):
    with pytest.raises(ValueError, match=pattern):
        call()
