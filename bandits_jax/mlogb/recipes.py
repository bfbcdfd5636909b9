"""Tuned recipes: every MLogB learner with hyperparameters chosen by an honest sweep.

Section 4 of He et al., "Efficient Multinomial Logistic Bandit via Frequent Directions"
(:func:`~bandits_jax.mlogb.hparams.section4`), scales ``lam = (sqrt(K) d)^l lam0`` and
``eta = (sqrt(K) d)^e eta0`` with ``(l, e) = (0.75, 0.75)``; at T <= 2000 that lam keeps the
learners close to ``W = 0``. A recipe keeps the scaling (one exponent pair serves every (K, d))
and a fixed radius ``beta``, and picks one point per learner kind (:data:`KINDS`) on tuning
problems that are never reported, on tuning seeds only: the point with the least mean regret
over the problems, each problem's regret divided by the best of the kind's grid on it
(``bandits-jax sweep --select across``). Two recipes per kind, for some a third:

- :data:`TUNED`, for a known bound ``S`` on ``||W*||_F`` (the caller's ``S``), tuned on a
  low-kappa, a high-kappa, a K = 3 and a low-rank stream::

    bandits-jax sweep --settings synth-30-1-S1,synth-30-1-S8,synth-15-3-S4,lowrank-60-1-4-S8 \\
      --learners eofd-tuned,eofd-robust,oful-tuned,linucb,ecolog \\
      --l-grid=-1.5,-1,-0.5,0 --e-grid=-0.5,0,0.5,1 --beta-grid 0.01,0.1,1 \\
      --rounds 2000 --trials 3 --eval-trials 0 --select across --out results/tune

- :data:`TUNED_FREE`, for no known bound (``S=None``, classification data), which fixes ``S``
  too, tuned on ``wine-all``, ``iris-all``, ``cancer-all`` and ``digits-all-h0`` (then, around
  the best points, with ``digits-k4-h0``)::

    bandits-jax sweep --settings wine-all,iris-all,cancer-all,digits-all-h0 \\
      --learners eofd-robust,eofd-tuned --S-grid 8,16,32,64 \\
      --l-grid=-4,-3.5,-3,-2.5,-2,-1.5,-1 --e-grid=-1.5,-1,-0.5,0,0.5 --beta-grid 0.01,0.1,1 \\
      --rounds 2000 --trials 10 --eval-trials 0 --select across --out results/tune-free

- :data:`TUNED_LARGE`, for a known bound where ``K d > 128``, for the kinds whose point differs
  there, tuned on heavy-tailed, isotropic, low-rank and K = 2 streams of K d = 160 to 200
  (``docs/recipes.md``).

:func:`practical` returns robust EOFD-MLogB with a known bound (OFUL-MLogB where ``K d <= 32``,
buffered EOFD-MLogB where ``K d > 128``) and with none buffered EOFD-MLogB. The EOFD kinds use
Section 4's ``m = floor(K d / 10)``, buffered EOFD a sketch as wide as its buffer where
``K d <= 128`` (:func:`sketch_size`). ``docs/recipes.md`` has the second stage, the earlier
sweep whose points OFUL, LinUCB and ECOLog keep, the re-checks, what each kind is and the
measurements behind :func:`practical`'s rules.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from bandits_jax.checks import check_int, named
from bandits_jax.mlogb.ecolog import ecolog, ecolog_hyperparams
from bandits_jax.mlogb.eofd import eofd
from bandits_jax.mlogb.eofd_buffer import DEFAULT_BUFFER, eofd_buffered
from bandits_jax.mlogb.exact import exact, exact_hyperparams
from bandits_jax.mlogb.greedy import greedy
from bandits_jax.mlogb.hparams import section4
from bandits_jax.mlogb.lin_ts import lin_ts, lin_ts_hyperparams
from bandits_jax.mlogb.linucb import linucb, linucb_hyperparams
from bandits_jax.mlogb.logistic_ts import logistic_ts, logistic_ts_hyperparams
from bandits_jax.mlogb.oful import oful
from bandits_jax.mlogb.uniform import uniform, uniform_hyperparams
from bandits_jax.protocols import MLogBLearner

ADAPTIVE_CAPACITY = 2  # eofd-adaptive: m_max = 2 m
ADAPTIVE_TARGET = 2.0  # eofd-adaptive: Delta_t <= 2
# eofd-buffered's summary of the evicted rounds (eofd_buffer, eq. 2 or 3), K = 1 and K >= 2:
# measured on the tuning problems of both families (docs/recipes.md).
BUFFERED_SUMMARY = {1: "gradient", 2: "anchor"}
# eofd-buffered's buffer B (rounds refitted exactly) at K = 1 where K d <= BUFFERED_FULL_MAX,
# DEFAULT_BUFFER elsewhere: measured on the tuning problems of both families (docs/recipes.md,
# "Buffer size"): at K = 1 (d <= 65) the longest buffer of the grid (64 to 512) ended level with
# a known bound and best on the digits with none; at K >= 2 the shortest. A Newton step costs
# O(B K^2 d^2), so where no tuning problem measured a benefit (K d > 128) the buffer stays short.
BUFFERED_LONG = 512
# eofd-buffered's sketch keeps min(K d, 64) directions (64: DEFAULT_BUFFER, the buffer it was
# measured with) where K d <= this (docs/recipes.md: it helped on every tuning problem of that
# size; at K d = 260 it did not), Section 4's floor(K d / 10) above.
BUFFERED_FULL_MAX = 128


def _buffered_sketch(K: int, d: int) -> int:
    D = K * d
    return min(D, DEFAULT_BUFFER) if D <= BUFFERED_FULL_MAX else max(1, D // 10)


def buffer_size(num_outcomes: int, dim: int) -> int:
    """The buffer ``B`` of the registry's ``eofd-buffered``: :data:`BUFFERED_LONG` rounds at
    ``K = 1`` where ``K d <=`` :data:`BUFFERED_FULL_MAX`, else
    :data:`~bandits_jax.mlogb.eofd_buffer.DEFAULT_BUFFER` (docs/recipes.md, "Buffer size")."""
    K = named("recipes.buffer_size", check_int, "num_outcomes", num_outcomes, 1)
    d = named("recipes.buffer_size", check_int, "dim", dim, 1)
    return BUFFERED_LONG if K == 1 and d <= BUFFERED_FULL_MAX else DEFAULT_BUFFER


def _buffered(K: int, d: int, m: int, T: int | None) -> MLogBLearner:
    return eofd_buffered(num_outcomes=K, dim=d, sketch_size=m, buffer_size=buffer_size(K, d),
                         summary=BUFFERED_SUMMARY[min(K, 2)])  # fmt: skip


class Exponents(NamedTuple):
    """A tuned point: ``lam = (sqrt(K) d)^l lam0``, ``eta = (sqrt(K) d)^e eta0``, fixed ``beta``;
    ``S``: the parameter bound the point uses when the caller knows none (:data:`TUNED_FREE`),
    ``None`` in :data:`TUNED` (the caller's ``S``)."""

    l: float  # noqa: E741
    e: float
    beta: float
    S: float | None = None


# Chosen by the known-bound sweep of docs/recipes.md (tuning seeds 0-2, T = 2000).
TUNED: dict[str, Exponents] = {
    "eofd": Exponents(-1.0, -0.5, 0.01),
    "eofd-robust": Exponents(-1.0, 0.0, 1.0),
    "eofd-adaptive": Exponents(0.0, -0.5, 0.1),  # from the earlier S = 1 sweep (not re-swept)
    "oful": Exponents(-1.0, 0.0, 1.0),
    "linucb": Exponents(-1.0, 0.0, 0.1),  # e does not enter LinUCB
    "ecolog": Exponents(-1.5, 0.0, 0.01),  # e does not enter ECOLog
    "exact": Exponents(-1.5, 0.0, 0.0),  # docs/recipes.md (the grid's edge; greedy)
    "eofd-buffered": Exponents(-1.5, 0.0, 0.0),  # docs/recipes.md (its own sketch size)
    "lin-ts": Exponents(-0.5, 0.0, 0.01),  # docs/recipes.md (beta: the grid's edge)
    "logistic-ts": Exponents(-1.5, 0.0, 0.01),  # docs/recipes.md (the grid's corner)
    "uniform": Exponents(0.0, 0.0, 0.0),
}
# With a known bound and K d > LARGE_MIN: the kinds whose point on the large tuning problems
# (K d = 160 to 200: heavy-tailed, isotropic, low-rank and K = 2 streams) differs from TUNED's,
# chosen by the same rule (docs/recipes.md, "K d > 128"). The problems of TUNED have K d <= 60;
# LARGE_MIN is where buffered EOFD switches to the 64-round buffer and Section 4's sketch, the
# form it was tuned with here.
TUNED_LARGE: dict[str, Exponents] = {
    "eofd-robust": Exponents(-0.5, 0.0, 1.0),
    "eofd-buffered": Exponents(-1.0, -0.5, 0.1),  # e does not enter it
}
LARGE_MIN = BUFFERED_FULL_MAX
# Chosen by the no-known-bound sweep of docs/recipes.md (S is part of the point).
TUNED_FREE: dict[str, Exponents] = {
    "eofd": Exponents(-1.5, 0.0, 0.1, 16.0),  # the earlier sweep's (docs/recipes.md)
    "eofd-robust": Exponents(-4.0, -0.5, 0.01, 16.0),
    "eofd-adaptive": Exponents(-1.5, 0.0, 0.1, 16.0),  # not swept: eofd's point
    "oful": Exponents(-1.0, 0.5, 0.1, 16.0),
    "linucb": Exponents(-1.5, 0.0, 0.01, 2.0),  # only lam (through S and l) and alpha enter
    "ecolog": Exponents(-1.5, 0.0, 0.01, 8.0),
    "exact": Exponents(-5.0, 0.0, 0.0, 16.0),  # docs/recipes.md (the grid's edge; greedy)
    "eofd-buffered": Exponents(-6.0, 0.0, 0.0, 16.0),  # docs/recipes.md (the grid's edge)
    "lin-ts": Exponents(-4.0, 0.0, 0.01, 2.0),  # docs/recipes.md (the grid's corner)
    "logistic-ts": Exponents(-4.0, 0.0, 0.01, 16.0),  # docs/recipes.md (the grid's corner)
    "uniform": Exponents(0.0, 0.0, 0.0, 1.0),
}
# With no known bound and K >= 2, for the kinds whose K = 1 point fails at K >= 2: chosen on the
# K = 4 tuning digits (digits-k4-h0), the one classification tuning problem with K >= 2
# (docs/recipes.md). Every other kind keeps its TUNED_FREE point for every K.
TUNED_FREE_MULTI: dict[str, Exponents] = {
    "eofd-buffered": Exponents(-2.62, 0.0, 0.01, 16.0),
}
for _table in (TUNED, TUNED_LARGE, TUNED_FREE):  # greedy: robust EOFD's point minus its bonus
    _table["greedy"] = _table["eofd-robust"]._replace(beta=0.0)
# The kinds :func:`practical` returns (docs/recipes.md has the measurements). With a known
# bound and DENSE_MAX < K d <= LARGE_MIN: the cheapest EOFD kind whose tuning score (mean
# relative regret over the tuning problems) is within 1% of the best EOFD kind's (robust: m
# columns; adaptive: up to 2 m).
PRACTICAL = "eofd-robust"
# With a known bound and K d > LARGE_MIN: buffered EOFD at its TUNED_LARGE point, the best
# score over the large tuning problems at that point (1.17, against LinTS 1.20 and robust EOFD
# 1.25 at theirs and 1.37 at TUNED's; on ten seeds at the recipes 1.07, robust EOFD 1.13), at
# 0.5 to 1.3 ms a round there against robust EOFD's 0.1 to 0.25.
PRACTICAL_LARGE = "eofd-buffered"
# With a known bound and K d <= DENSE_MAX: OFUL-MLogB, the full Hessian. There Section 4's sketch
# keeps m <= 3 directions and the dense round costs 1.2 to 2.8 times the sketched one.
PRACTICAL_DENSE = "oful"
DENSE_MAX = 32
# With no known bound (classification data): buffered EOFD at its TUNED_FREE point (K = 1) or
# TUNED_FREE_MULTI point (K >= 2), by the across-problems rule over the five classification
# tuning problems against LinUCB's recipe (docs/recipes.md): 0.1 to 1.3 times LinUCB's regret
# there, at 0.1 to 6 ms a round against LinUCB's 0.002 to 0.02.
PRACTICAL_FREE = "eofd-buffered"


class Tuned(NamedTuple):
    """A learner with its hyperparameters: ``state = recipe.learner.init(recipe.hparams)``."""

    kind: str
    learner: MLogBLearner
    hparams: Any
    sketch_size: int


def _check_kind(kind: str) -> str:
    if kind not in REGISTRY:
        raise ValueError(f"kind must be one of {list(KINDS)}, got {kind!r}")
    return kind


def tuned_point(
    kind: str, S: float | None, *, num_outcomes: int, dim: int
) -> tuple[Exponents, float]:
    """A kind's tuned point and the ``S`` it runs with: :data:`TUNED` at the caller's ``S``
    (:data:`TUNED_LARGE` where it has the kind and ``K d >`` :data:`LARGE_MIN`), or, when ``S``
    is ``None`` (no known bound), :data:`TUNED_FREE` with its own ``S``
    (:data:`TUNED_FREE_MULTI` where it has the kind and ``num_outcomes >= 2``)."""
    _check_kind(kind)
    K, d = check_int("num_outcomes", num_outcomes), check_int("dim", dim)
    if S is None:
        ex = _free_point(kind, K)
        return ex, float(ex.S)
    return (TUNED_LARGE.get(kind, TUNED[kind]) if K * d > LARGE_MIN else TUNED[kind]), S


def _free_point(kind: str, K: int) -> Exponents:
    return TUNED_FREE_MULTI.get(kind, TUNED_FREE[kind]) if K >= 2 else TUNED_FREE[kind]


def bound(kind: str, S: float | None, *, num_outcomes: int) -> float:
    """The ``S`` a kind's hyperparameters use: the caller's, else its no-bound point's."""
    _check_kind(kind)
    K = check_int("num_outcomes", num_outcomes)
    return S if S is not None else float(_free_point(kind, K).S)


def sketch_size(num_outcomes: int, dim: int, kind: str | None = None) -> int:
    """A kind's default sketch size: its :class:`Kind` ``sketch`` rule where it has one, else
    Section 4's ``m = max(1, floor(K d / 10))``."""
    K, d = int(num_outcomes), int(dim)
    rule = None if kind is None else REGISTRY[_check_kind(kind)].sketch
    return rule(K, d) if rule is not None else max(1, (K * d) // 10)


class Kind(NamedTuple):
    """One row of the learner registry (:data:`REGISTRY`): what every command and recipe reads.

    Attributes:
      label: short name in tables and JSON (e.g. ``"LinUCB"``).
      legend: name in figure legends (e.g. ``"LinUCB (tuned)"``).
      factory: ``(K, d, m, horizon) -> MLogBLearner`` (``m``: sketch size, ignored by learners
        without a sketch; ``horizon``: T, for learners that preallocate a buffer).
      hparams: ``(num_outcomes=, dim=, S=, horizon=, l=, e=, beta=, rewards=, dtype=) ->
        hyperparameters`` at a point (``l``, ``e``, a numeric ``beta``: arrays of one shape, the
        grid axes; ``S`` and ``rewards`` resolved by :func:`hparams_for`).
      sketched: whether ``m`` applies. k1_only: defined for K = 1 only.
      sketch: ``(K, d) -> m``, the kind's default sketch size (:func:`sketch_size`); ``None``:
        Section 4's.
    """

    label: str
    legend: str
    factory: Callable[[int, int, int, int | None], MLogBLearner]
    hparams: Callable[..., Any]
    sketched: bool = False
    k1_only: bool = False
    sketch: Callable[[int, int], int] | None = None


def _section4_hp(*, beta: Any, dtype: Any, l: Any, e: Any, **kw: Any) -> Any:  # noqa: E741
    """Section 4's hyperparameters at ``(l, e)`` with the radius ``beta`` (grid or rule)."""
    numeric = not isinstance(beta, str)
    hp = section4(l=l, e=e, beta=0.0 if numeric else beta, dtype=dtype, **kw).hparams
    return hp._replace(beta=_as_grid(beta, l, e, dtype)) if numeric else hp


def _greedy_hp(*, beta: Any, **kw: Any) -> Any:
    """The practical recipe with no radius."""
    return _section4_hp(beta=beta if isinstance(beta, str) else np.zeros_like(beta), **kw)


def _section4_lam(*, num_outcomes: int, dim: int, S: float, horizon: int, l: Any, e: Any,
                  rewards: Any) -> Any:  # fmt: skip  # noqa: E741
    """``lam`` of Section 4's scaling (``e`` does not enter it)."""
    return np.asarray(section4(num_outcomes=num_outcomes, dim=dim, S=S, horizon=horizon, l=l, e=e,
                               rewards=rewards, beta=0.0).hparams.lam)  # fmt: skip


def _linucb_hp(*, beta: Any, dtype: Any, **kw: Any) -> Any:
    """LinUCB's ridge at Section 4's ``lam``, ``alpha = sqrt(beta)``."""
    if isinstance(beta, str):
        raise ValueError(f"beta must be a number for linucb, got {beta!r}")
    lam = _section4_lam(**kw)
    alpha = np.sqrt(np.broadcast_to(np.asarray(beta, float), lam.shape))
    return linucb_hyperparams(lam=lam, alpha=alpha, rewards=kw["rewards"], dtype=dtype)


def _ecolog_hp(*, beta: Any, dtype: Any, **kw: Any) -> Any:
    """ECOLog at Section 4's ``lam`` with the radius ``beta`` (grid or rule)."""
    lam = _section4_lam(**kw)
    b = beta if isinstance(beta, str) else np.broadcast_to(np.asarray(beta, float), lam.shape)
    return ecolog_hyperparams(lam=lam, S=kw["S"], rewards=kw["rewards"], beta=b,
                              delta=1.0 / kw["horizon"], dtype=dtype)  # fmt: skip


def _exact_hp(*, beta: Any, dtype: Any, **kw: Any) -> Any:
    """The exact fit (and the buffered EOFD, whose hyperparameters are the exact fit's) at
    Section 4's ``lam`` with the radius ``beta``."""
    if isinstance(beta, str):
        raise ValueError(f"beta must be a number for exact, got {beta!r}")
    lam = _section4_lam(**kw)
    b = np.broadcast_to(np.asarray(beta, float), lam.shape)
    return exact_hyperparams(lam=lam, beta=b, rewards=kw["rewards"], dtype=dtype)


def _ts_hp(build: Callable[..., Any]) -> Callable[..., Any]:
    """Thompson sampling at Section 4's ``lam`` (the prior precision), ``v = sqrt(beta)``."""

    def hparams(*, beta: Any, dtype: Any, **kw: Any) -> Any:
        if isinstance(beta, str):
            raise ValueError(f"beta must be a number for Thompson sampling, got {beta!r}")
        lam = _section4_lam(**kw)
        v = np.sqrt(np.broadcast_to(np.asarray(beta, float), lam.shape))
        return build(lam=lam, v=v, seed=np.zeros(lam.shape, np.uint32), rewards=kw["rewards"],
                     dtype=dtype)  # fmt: skip

    return hparams


def _exact(K: int, d: int, m: int, horizon: int | None) -> MLogBLearner:
    if horizon is None:
        raise ValueError("make_learner: kind 'exact' needs horizon= (its buffer holds T rounds)")
    return exact(num_outcomes=K, dim=d, horizon=horizon)


def _uniform_hp(*, l: Any, e: Any, rewards: Any, dtype: Any, **_: Any) -> Any:  # noqa: E741
    """No numeric hyperparameters: one seed per grid point."""
    shape = np.broadcast(np.asarray(l), np.asarray(e)).shape
    return uniform_hyperparams(seed=np.zeros(shape, np.uint32), rewards=rewards, dtype=dtype)


# kind -> Kind. A new learner joins every command (``--learners``, tables, figures, sweeps) with
# one row here and its points in TUNED and TUNED_FREE (TUNED_FREE_MULTI where K >= 2 differs).
REGISTRY: dict[str, Kind] = {
    "eofd": Kind(
        "EOFD tuned", "EOFD-MLogB (tuned)",
        lambda K, d, m, T: eofd(num_outcomes=K, dim=d, sketch_size=m), _section4_hp, True,
    ),
    "eofd-robust": Kind(
        "EOFD robust", "EOFD-MLogB robust (tuned)",
        lambda K, d, m, T: eofd(num_outcomes=K, dim=d, sketch_size=m, regularization="robust"),
        _section4_hp, True,
    ),
    "eofd-adaptive": Kind(
        "EOFD adaptive", "EOFD-MLogB adaptive (tuned)",
        lambda K, d, m, T: eofd(num_outcomes=K, dim=d, sketch_size=m,
                                max_sketch_size=ADAPTIVE_CAPACITY * m,
                                delta_target=ADAPTIVE_TARGET),
        _section4_hp, True,
    ),
    "oful": Kind(
        "OFUL tuned", "OFUL-MLogB (tuned)", lambda K, d, m, T: oful(num_outcomes=K, dim=d),
        _section4_hp,
    ),
    "greedy": Kind(
        "greedy", "greedy (robust EOFD estimate)",
        lambda K, d, m, T: greedy(num_outcomes=K, dim=d, sketch_size=m, regularization="robust"),
        _greedy_hp, True,
    ),
    "linucb": Kind(
        "LinUCB", "LinUCB (tuned)", lambda K, d, m, T: linucb(num_outcomes=K, dim=d), _linucb_hp
    ),
    "ecolog": Kind(
        "ECOLog", "ada-OFU-ECOLog (tuned)", lambda K, d, m, T: ecolog(num_outcomes=K, dim=d),
        _ecolog_hp, k1_only=True,
    ),
    "lin-ts": Kind(
        "LinTS", "linear Thompson sampling (tuned)",
        lambda K, d, m, T: lin_ts(num_outcomes=K, dim=d), _ts_hp(lin_ts_hyperparams),
    ),
    "logistic-ts": Kind(
        "logistic TS", "Laplace logistic Thompson sampling (tuned)",
        lambda K, d, m, T: logistic_ts(num_outcomes=K, dim=d), _ts_hp(logistic_ts_hyperparams),
    ),
    "eofd-buffered": Kind(
        "EOFD buffered", "EOFD-MLogB buffered (tuned)",
        _buffered, _exact_hp, True, sketch=_buffered_sketch,
    ),
    "exact": Kind("exact", "exact MLE refit, O(t) a round", _exact, _exact_hp),
    "uniform": Kind(
        "random", "uniform random", lambda K, d, m, T: uniform(num_outcomes=K, dim=d), _uniform_hp
    ),
}  # fmt: skip
KINDS = tuple(REGISTRY)
K1_ONLY = frozenset(k for k, v in REGISTRY.items() if v.k1_only)  # kinds defined for K = 1 only


def make_learner(
    kind: str, *, num_outcomes: int, dim: int, sketch_size: int, horizon: int | None = None
) -> MLogBLearner:
    """The learner of a kind (:data:`REGISTRY`) with sketch size ``m`` where it has one."""
    return REGISTRY[_check_kind(kind)].factory(num_outcomes, dim, sketch_size, horizon)


def hparams_for(
    kind: str,
    *,
    num_outcomes: int,
    dim: int,
    S: float | None,
    horizon: int,
    l: Any,  # noqa: E741
    e: Any,
    beta: Any,
    rewards: Any = None,
    dtype: Any = None,
) -> Any:
    """Hyperparameters of a kind at exponents ``(l, e)`` and radius ``beta`` (arrays give a grid;
    ``beta`` may also be ``"theory"``/``"order"`` for the online-Newton kinds). ``S=None``: no
    known bound, the kind's :data:`TUNED_FREE` ``S``. The grid axes of ``l``, ``e`` and a
    numeric ``beta`` broadcast together, so every field has them (a grid is a batch of states:
    ``jax.vmap(learner.init)``)."""
    S = bound(kind, S, num_outcomes=num_outcomes)
    K = int(num_outcomes)
    if not isinstance(beta, str):
        shape = np.broadcast(np.asarray(l), np.asarray(e), np.asarray(beta)).shape
        l, e, beta = (np.broadcast_to(np.asarray(v, float), shape) for v in (l, e, beta))  # noqa: E741
    if rewards is None:
        rewards = [1.0] if K == 1 else list(np.linspace(1.0 / K, 1.0, K))
    return REGISTRY[kind].hparams(
        num_outcomes=K, dim=dim, S=S, horizon=horizon, l=l, e=e, beta=beta, rewards=rewards,
        dtype=dtype,
    )  # fmt: skip


def _as_grid(beta: Any, l: Any, e: Any, dtype: Any) -> Any:
    import jax.numpy as jnp

    shape = np.broadcast(np.asarray(l), np.asarray(e), np.asarray(beta)).shape
    b = np.broadcast_to(np.asarray(beta, float), shape)
    if not np.all(np.isfinite(b)) or np.any(b < 0):
        raise ValueError(f"beta must be finite and >= 0, got {beta!r}")
    return jnp.asarray(b, dtype if dtype is not None else jnp.zeros(()).dtype)


def tuned(
    kind: str,
    *,
    num_outcomes: int,
    dim: int,
    S: float | None = None,
    horizon: int,
    rewards: Any = None,
    dtype: Any = None,
) -> Tuned:
    """A kind's learner with its tuned hyperparameters.

    Args:
      kind: one of :data:`KINDS`.
      num_outcomes, dim: K and d.
      S: the known bound on ``||W*||_F`` (:data:`TUNED` at that ``S``), or ``None`` when there
        is none, e.g. on classification data (:data:`TUNED_FREE`, which chooses ``S`` too).
      horizon: T (``delta = 1/T``). rewards, dtype: as in :func:`~.hyperparams.hyperparams`.
    """
    ex, S = tuned_point(kind, S, num_outcomes=num_outcomes, dim=dim)
    m = sketch_size(num_outcomes, dim, kind)
    learner = make_learner(kind, num_outcomes=num_outcomes, dim=dim, sketch_size=m, horizon=horizon)
    hp = hparams_for(
        kind,
        num_outcomes=num_outcomes,
        dim=dim,
        S=S,
        horizon=horizon,
        l=ex.l,
        e=ex.e,
        beta=ex.beta,
        rewards=rewards,
        dtype=dtype,
    )
    return Tuned(kind, learner, hp, m)


def practical_kind(*, num_outcomes: int, dim: int, S: float | None) -> str:
    """The kind :func:`practical` returns: with no known bound :data:`PRACTICAL_FREE` (buffered
    EOFD); with one, :data:`PRACTICAL_DENSE` (OFUL-MLogB) when ``K d <= DENSE_MAX``,
    :data:`PRACTICAL_LARGE` (buffered EOFD) when ``K d > LARGE_MIN``, else :data:`PRACTICAL`
    (robust EOFD-MLogB)."""
    K, d = check_int("num_outcomes", num_outcomes), check_int("dim", dim)
    if S is None:
        return PRACTICAL_FREE
    if K * d <= DENSE_MAX:
        return PRACTICAL_DENSE
    return PRACTICAL_LARGE if K * d > LARGE_MIN else PRACTICAL


def practical(
    *,
    num_outcomes: int,
    dim: int,
    S: float | None = None,
    horizon: int,
    rewards: Any = None,
    dtype: Any = None,
) -> Tuned:
    """The recommended learner for the problem described, with its tuned hyperparameters.

    With a known bound ``S`` on ``||W*||_F``: robust EOFD-MLogB (:data:`PRACTICAL`) at
    :data:`TUNED`, or OFUL-MLogB (:data:`PRACTICAL_DENSE`) when ``K d <= DENSE_MAX``, where the
    full Hessian is cheap and beat the coarse sketch on the tuning problems, or buffered EOFD
    (:data:`PRACTICAL_LARGE`) at :data:`TUNED_LARGE` when ``K d > LARGE_MIN``, where it led on the
    large tuning problems. With none (``S=None``,
    the default; classification data): buffered EOFD (:data:`PRACTICAL_FREE`) at
    :data:`TUNED_FREE` (K = 1) or :data:`TUNED_FREE_MULTI` (K >= 2), which led LinUCB's recipe on
    the classification tuning problems. docs/recipes.md has the measurements; ``horizon``,
    ``rewards`` and ``dtype`` are :func:`tuned`'s (spelt out, so that a misspelt keyword is named
    as ``practical``'s); ``.kind`` says which came back.
    """
    kind = practical_kind(num_outcomes=num_outcomes, dim=dim, S=S)
    return tuned(
        kind, num_outcomes=num_outcomes, dim=dim, S=S, horizon=horizon, rewards=rewards,
        dtype=dtype,
    )  # fmt: skip


def lam_eta(num_outcomes: int, dim: int, S: float, ex: Exponents, action_bound: float = 1.0):
    """``(lam, eta)`` of Section 4's scaling at a tuned point (for reports)."""
    K = int(num_outcomes)
    alpha = 2.0 * (1.0 + S * action_bound) + math.log(K + 1)
    base = math.sqrt(K) * dim
    return base**ex.l * math.sqrt(K) * alpha * S, base**ex.e * (S / 2.0 + math.log(K + 1) / 4.0)
