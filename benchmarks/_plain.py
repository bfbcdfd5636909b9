"""The floors of ``benchmarks.mlogb_speed``: a kind's algorithm written plainly in JAX, and its
numpy reference (``references``) played on the same recorded stream with one BLAS thread.

Plain JAX (the kind's arithmetic, the minimal state, no guards, statuses or checks), built by
:func:`plain` from the kind's tuned hyperparameters; ``z = [x, 1]``, ``D = d + 1``, reward
``r_y`` (``r_0 = 0``), ``A = lam I + sum z z^T``, ``b = sum r_y z`` (``mlogb.ridge``'s model):

* ``linucb`` (Li et al. 2010): ``A^{-1}`` by Sherman-Morrison, ``u = A^{-1} z``,
  ``A^{-1} <- A^{-1} - u u^T / (1 + z^T u)``; ``theta = A^{-1} b``; the choice maximises
  ``theta^T z + alpha ||z||_{A^{-1}}``. O(D^2) a round.
* ``lin-ts`` (Agrawal and Goyal 2013): a square-root factor ``R R^T = A^{-1}`` (``R = I /
  sqrt(lam)`` at the start) updated in O(D^2): ``a = R^T z``, ``u = R a``, ``R <- R - k u a^T``
  with ``k = (1 - 1/sqrt(1 + |a|^2)) / |a|^2``, so that ``R R^T`` becomes Sherman-Morrison's
  ``A^{-1} - u u^T / (1 + |a|^2)``; ``theta = R (R^T b)``; the draw ``theta + v R xi``,
  ``xi ~ N(0, I_D)``; the choice maximises ``theta~^T z``. No factorisation a round.
* ``uniform``: a uniformly random action.

:func:`numpy_seconds` plays a kind's numpy reference (select, the outcome, update, and a TS
draw) on the stream of :func:`stream` in the calling process, under ``threadpool_limits(1)``;
``benchmarks.mlogb_speed`` calls it in a process of its own.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from threadpoolctl import threadpool_limits

from bandits_jax import mlogb
from bandits_jax.mlogb import recipes
from bandits_jax.mlogb.confidence import BETA_MODES
from references import mlogb_numpy
from references.ecolog_numpy import NumpyECOLog
from references.eofd_buffer_numpy import NumpyEOFDBuffered
from references.eofd_variants_numpy import NumpyEOFDVariant
from references.exact_numpy import NumpyExact
from references.linucb_numpy import NumpyLinUCB
from references.soful_numpy import NumpySOFUL
from references.ts_numpy import NumpyLinTS, NumpyLogisticTS

HORIZON = 1000  # the horizon the kinds are tuned for (``exact``'s buffer rows)
S = 4.0  # the known bound the kinds are tuned for; ||W*||_F of the stream


def stream(K: int, d: int, T: int, N: int, seed: int = 0):
    """A recorded stream: ``T`` action sets of ``N`` unit vectors ``(T, N, d)``, the outcome
    uniforms ``(T,)`` and ``W*`` ``(K, d)`` with ``||W*||_F = S`` (float64 numpy)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(T, N, d))
    X /= np.linalg.norm(X, axis=2, keepdims=True)
    W = rng.normal(size=(K, d))
    return X, rng.uniform(size=T), W * (S / np.linalg.norm(W))


class Plain(NamedTuple):
    """A plain learner: ``init() -> state``, ``act(state, X (N, d)) -> index``,
    ``update(state, x, y) -> state``."""

    init: Callable[[], Any]
    act: Callable[[Any, jax.Array], jax.Array]
    update: Callable[[Any, jax.Array, jax.Array], Any]


class RidgeState(NamedTuple):
    A_inv: jax.Array
    b: jax.Array
    theta: jax.Array


class RootState(NamedTuple):
    R: jax.Array
    b: jax.Array
    sample: jax.Array
    key: jax.Array


def _z(x: jax.Array) -> jax.Array:
    return jnp.concatenate([x, jnp.ones(x.shape[:-1] + (1,), x.dtype)], axis=-1)


def _reward(rewards: jax.Array, y: jax.Array) -> jax.Array:
    return jnp.concatenate([jnp.zeros((1,), rewards.dtype), rewards])[y]


def plain_linucb(d: int, lam, alpha, rewards, dtype) -> Plain:
    """LinUCB written plainly (module docstring)."""
    rewards = jnp.asarray(rewards, dtype)

    def init():
        D = d + 1
        return RidgeState(jnp.eye(D, dtype=dtype) / lam, jnp.zeros(D, dtype), jnp.zeros(D, dtype))

    def act(s, X):
        Z = _z(X)
        return jnp.argmax(Z @ s.theta + alpha * jnp.sqrt(jnp.sum((Z @ s.A_inv) * Z, axis=1)))

    def update(s, x, y):
        z = _z(x)
        u = s.A_inv @ z
        A_inv = s.A_inv - jnp.outer(u, u) / (1.0 + z @ u)
        b = s.b + _reward(rewards, y) * z
        return RidgeState(A_inv, b, A_inv @ b)

    return Plain(init, act, update)


def root_update(R: jax.Array, z: jax.Array) -> jax.Array:
    """``R - k u a^T`` (module docstring): ``R R^T = A^{-1}`` becomes ``(A + z z^T)^{-1}``."""
    a = R.T @ z
    aa = a @ a
    k = (1.0 - 1.0 / jnp.sqrt(1.0 + aa)) / aa
    return R - k * jnp.outer(R @ a, a)


def plain_lin_ts(d: int, lam, v, rewards, dtype, seed: int = 0) -> Plain:
    """Linear TS written plainly from a square-root factor (module docstring)."""
    rewards = jnp.asarray(rewards, dtype)

    def draw(R, b, key):
        key, sub = jax.random.split(key)
        theta = R @ (R.T @ b)
        return theta + v * (R @ jax.random.normal(sub, b.shape, dtype)), key

    def init():
        D = d + 1
        R, b = jnp.eye(D, dtype=dtype) / np.sqrt(lam), jnp.zeros(D, dtype)
        sample, key = draw(R, b, jax.random.key(seed))
        return RootState(R, b, sample, key)

    def act(s, X):
        return jnp.argmax(_z(X) @ s.sample)

    def update(s, x, y):
        z = _z(x)
        R = root_update(s.R, z)
        b = s.b + _reward(rewards, y) * z
        sample, key = draw(R, b, s.key)
        return RootState(R, b, sample, key)

    return Plain(init, act, update)


def plain_uniform(seed: int = 0) -> Plain:
    """A uniformly random action (the key in the state)."""

    def act(key, X):
        return jax.random.randint(jax.random.split(key)[1], (), 0, X.shape[0])

    return Plain(lambda: jax.random.key(seed), act, lambda key, x, y: jax.random.split(key)[0])


def plain(kind: str, K: int, d: int, hp: Any) -> Plain | None:
    """The plain JAX version of ``kind`` with its tuned hyperparameters ``hp`` (``None`` where
    there is none: the floor is then the numpy reference alone)."""
    dtype = hp.rewards.dtype
    if kind == "linucb":
        return plain_linucb(d, float(hp.lam), float(hp.alpha), hp.rewards, dtype)
    if kind == "lin-ts":
        return plain_lin_ts(d, float(hp.lam), float(hp.v), hp.rewards, dtype)
    if kind == "uniform":
        return plain_uniform()
    return None


# --- the numpy references ------------------------------------------------------------------------


def hparams_dict(hp: Any) -> dict[str, Any]:
    """Tuned hyperparameters as plain numbers and lists (to send to another process)."""
    return {k: np.asarray(v).tolist() for k, v in hp._asdict().items()}


def _default(fn: Callable, name: str) -> Any:
    """The library's default of ``fn``'s option ``name`` (the reference mirrors it)."""
    return inspect.signature(fn).parameters[name].default


def _mlogb_kw(hp: dict) -> dict:
    """The keywords of ``mlogb_numpy``'s EOFD/OFUL references (beta: fixed, or its rule with
    ``beta_scale``)."""
    kw = {k: hp[k] for k in ("lam", "eta", "S", "rewards", "delta", "action_bound", "lipschitz")}
    mode = {v: k for k, v in BETA_MODES.items()}[int(hp["beta_mode"])]
    if mode == "fixed":
        return {**kw, "beta": hp["beta"]}
    return {**kw, "beta": mode, "beta_scale": hp["beta"]}


def reference(kind: str, K: int, d: int, hp: dict) -> tuple[Any, Callable | None] | None:
    """``kind``'s numpy reference with the tuned hyperparameters ``hp`` (:func:`hparams_dict`)
    and the library's options: ``(ref, draw)`` (``draw(rng)``: a TS reference's draw of the
    round, else ``None``), or ``None`` for ``uniform`` (no reference)."""
    if kind == "uniform":
        return None
    m = recipes.sketch_size(K, d, kind)
    if kind in ("eofd-paper", "eofd"):
        return mlogb_numpy.NumpyEOFD(K, d, m, **_mlogb_kw(hp)), None
    if kind in ("eofd-robust", "greedy"):  # greedy: the robust EOFD estimate, beta = 0
        return NumpyEOFDVariant(K, d, m, regularization="robust", **_mlogb_kw(hp)), None
    if kind == "eofd-adaptive":
        return NumpyEOFDVariant(K, d, m, max_sketch_size=2 * m, delta_target=2.0,
                                **_mlogb_kw(hp)), None  # fmt: skip
    if kind in ("oful-paper", "oful"):
        return mlogb_numpy.NumpyOFUL(K, d, **_mlogb_kw(hp)), None
    if kind == "linucb":
        return NumpyLinUCB(dim=d, lam=hp["lam"], alpha=hp["alpha"], rewards=hp["rewards"]), None
    if kind == "soful":  # its dense inverse a round: a loose floor (no plain form of it yet)
        return NumpySOFUL(dim=d, sketch_size=m, lam=hp["lam"], alpha=hp["alpha"],
                          rewards=hp["rewards"]), None  # fmt: skip
    if kind == "lin-ts":
        ref = NumpyLinTS(dim=d, lam=hp["lam"], v=hp["v"], rewards=hp["rewards"])
        return ref, lambda rng: ref.draw(rng.standard_normal(d + 1))
    if kind == "logistic-ts":
        ref = NumpyLogisticTS(num_outcomes=K, dim=d, lam=hp["lam"], v=hp["v"],
                              rewards=hp["rewards"],
                              covariance=_default(mlogb.logistic_ts, "covariance"),
                              max_steps=_default(mlogb.logistic_ts, "newton_steps"))  # fmt: skip
        return ref, lambda rng: ref.draw(rng.standard_normal(K * d))
    if kind == "ecolog":
        fixed = int(hp["beta_mode"]) == 0
        return NumpyECOLog(d, lam=hp["lam"], S=hp["S"], reward=hp["rewards"][0],
                           beta=hp["beta"] if fixed else "theory",
                           beta_scale=1.0 if fixed else hp["beta"], delta=hp["delta"],
                           discrepancy=_default(mlogb.ecolog, "discrepancy")), None  # fmt: skip
    fit = {k: hp[k] for k in ("lam", "beta", "rewards")}
    if kind == "exact":
        fn = mlogb.exact
        return NumpyExact(num_outcomes=K, dim=d, horizon=HORIZON, **fit,
                          newton_steps=_default(fn, "newton_steps"),
                          max_halvings=_default(fn, "max_halvings")), None  # fmt: skip
    if kind == "eofd-buffered":
        fn, rule = mlogb.eofd_buffered, recipes.rule(kind, num_outcomes=K, dim=d, S=S)
        return NumpyEOFDBuffered(num_outcomes=K, dim=d, sketch_size=m, buffer_size=rule.buffer,
                                 summary=rule.summary, **fit,
                                 regularization=_default(fn, "regularization"),
                                 newton_steps=_default(fn, "newton_steps"),
                                 max_halvings=_default(fn, "max_halvings")), None  # fmt: skip
    raise ValueError(f"kind: no numpy reference for {kind!r}")


def _choose(ref: Any, X: np.ndarray, mask: np.ndarray) -> int:
    if hasattr(ref, "select"):
        return ref.select(X, mask)
    est, bonus = ref.score_parts(X)
    return int(np.argmax(est + bonus))


def numpy_seconds(kind: str, K: int, d: int, hp: dict, T: int, N: int, seed: int, passes: int,
                  budget_s: float) -> list[float] | None:  # fmt: skip
    """Seconds a round (the mean over the stream's first ``T`` rounds) of ``kind``'s numpy
    reference, one per pass over the stream (a fresh reference each; at most ``passes``, more
    only while the passes so far took under ``budget_s``), with one BLAS thread; ``None`` where
    the kind has no reference."""
    if reference(kind, K, d, hp) is None:
        return None
    X, U, W = stream(K, d, T, N, seed)
    mask = np.ones(N, bool)
    out: list[float] = []
    rng = np.random.default_rng(seed)
    with threadpool_limits(1):
        while len(out) < passes and (not out or sum(out) * T < budget_s):
            ref, draw = reference(kind, K, d, hp)
            if draw is not None:
                draw(rng)
            t0 = time.perf_counter()
            for t in range(T):
                x = X[t, _choose(ref, X[t], mask)]
                s, s0 = mlogb_numpy.sigma(W @ x)
                ref.update(x, mlogb_numpy.sample_outcome(s, s0, U[t]))
                if draw is not None:
                    draw(rng)
            out.append((time.perf_counter() - t0) / T)
    return out


def paper_stream(K: int, d: int, T: int, seed: int = 0, S: float = 1.0):
    """The stream of the EOFD-against-numpy cases: ``T`` sets of 10-30 unit vectors padded to
    30 ``(T, 30, d)``, their mask, the outcome uniforms and ``W*`` with ``||W*||_F = S``."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(T, 30, d))
    X /= np.linalg.norm(X, axis=2, keepdims=True)
    mask = np.arange(30)[None, :] < rng.integers(10, 31, size=(T, 1))
    W = rng.normal(size=(K, d))
    return X, mask, rng.uniform(size=T), W * (S / np.linalg.norm(W))


def numpy_eofd_seconds(K: int, d: int, m: int, kw: dict, rounds: int, seed: int = 0) -> float:
    """The median seconds a round of ``mlogb_numpy.NumpyEOFD`` (Algorithm 2, a full SVD per
    sketch update) on :func:`paper_stream`, with one BLAS thread."""
    X, mask, U, W = paper_stream(K, d, rounds, seed=seed)
    learner = mlogb_numpy.NumpyEOFD(K, d, m, **kw)
    times = []
    with threadpool_limits(1):
        for t in range(rounds):
            t0 = time.perf_counter()
            i = learner.select(X[t], mask[t])
            s, s0 = mlogb_numpy.sigma(W @ X[t, i])
            learner.update(X[t, i], mlogb_numpy.sample_outcome(s, s0, U[t]))
            times.append(time.perf_counter() - t0)
    return float(np.median(times))
