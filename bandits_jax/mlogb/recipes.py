"""Tuned recipes: the registry of MLogB learner kinds and the rules that tune them.

:data:`REGISTRY` is the one table of learners (kind -> label, legend, colour, factory,
hyperparameter builder) that every command, table, figure and benchmark reads. :data:`RULES` is
the one table of recipes: a row maps a regime (a known bound ``S`` on ``||W*||_F`` or none; ranges
of ``K`` and ``K d``) and a kind to a tuned point (``l``, ``e``, ``beta``, and ``S`` where none is
known) in Section 4's scaling ``lam = (sqrt(K) d)^l lam0``, ``eta = (sqrt(K) d)^e eta0``
(:func:`~bandits_jax.mlogb.hparams.section4`), a sketch size, buffered EOFD's buffer and summary,
whether :func:`practical` returns the kind there, and the ``docs/recipes.md`` section whose
command chose it (:func:`rules_markdown` renders that table). The paper's learners
(``eofd-paper``, ``oful-paper``) run at Section 4's point ``(0.75, 0.75, theory)``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np

from bandits_jax.checks import check_int, named
from bandits_jax.learner_base import Learner
from bandits_jax.mlogb import cost
from bandits_jax.mlogb.ecolog import ecolog, ecolog_hyperparams
from bandits_jax.mlogb.eofd import eofd
from bandits_jax.mlogb.eofd_buffer import eofd_buffered
from bandits_jax.mlogb.exact import exact, exact_hyperparams
from bandits_jax.mlogb.greedy import greedy
from bandits_jax.mlogb.hparams import section4
from bandits_jax.mlogb.lin_ts import lin_ts, lin_ts_hyperparams
from bandits_jax.mlogb.linucb import linucb, linucb_hyperparams
from bandits_jax.mlogb.logistic_ts import logistic_ts, logistic_ts_hyperparams
from bandits_jax.mlogb.oful import oful
from bandits_jax.mlogb.soful import soful
from bandits_jax.mlogb.uniform import uniform, uniform_hyperparams


class Exponents(NamedTuple):
    """A tuned point: ``lam = (sqrt(K) d)^l lam0``, ``eta = (sqrt(K) d)^e eta0``, the radius
    ``beta`` (a number, or ``"theory"``: Theorem 1's); ``S``: the bound the point uses where the
    caller knows none, ``None`` where the caller's ``S`` is used."""

    l: float  # noqa: E741
    e: float
    beta: float | str
    S: float | None = None


class Rule(NamedTuple):
    """One row of :data:`RULES`: in the regime (``known``: whether ``S`` is known; ``K``, ``Kd``:
    inclusive ranges, ``None`` unbounded) the kind runs at ``point`` with the sketch
    ``min(K d, sketch)`` (``None``: Section 4's), buffered EOFD's ``buffer`` and ``summary``;
    ``practical``: :func:`practical` returns it; ``section``: the ``docs/recipes.md`` heading.
    ``point=None``: only :func:`practical`'s pick; the kind runs at its own row (:func:`rule`)."""

    kind: str
    known: bool
    K: tuple[int, int | None]
    Kd: tuple[int, int | None]
    point: Exponents | None
    section: str
    sketch: int | None = None
    buffer: int | None = None
    summary: str | None = None
    practical: bool = False


_E = Exponents
_ANY, _K1, _K2 = (1, None), (1, 1), (2, None)
_SMALL, _LARGE = (1, 128), (129, None)
_SCALING = "The scaling and the selection rule"
_KNOWN = "A known bound on `||W*||_F`"
_BIG = "K d > 128: buffered EOFD with a bonus"
_FREE = "No known bound (classification data)"
_FREE_BUF = "With no known bound: buffered EOFD, earlier LinUCB"
_FREE_PICK = "What practical returns with no known bound: LinUCB"
_KNOWN_PICK = "What practical returns with a known bound"
_HIGH = "High dimension: a sketch of 64, and the budget"
_HUGE = (1025, None)  # K d > 1024: the sketched kinds keep m = 64 directions
_EXACT, _TS, _BUF = "The exact-fit reference", "Thompson sampling", "Buffered EOFD"


def _rows(known: bool, K: tuple, Kd: tuple, section: str, points: dict, **kw: Any) -> list[Rule]:
    return [Rule(k, known, K, Kd, p, section, **kw) for k, p in points.items()]


def _buffered_rows(known: bool, section: str, *points: Exponents) -> list[Rule]:
    """Buffered EOFD's rows at one bound: ``points`` for K = 1 and K >= 2 where ``K d <= 128``,
    then where ``K d > 128``."""
    big = _BIG if known else section
    return [
        Rule("eofd-buffered", known, _K1, _SMALL, points[0], section, 64, 512, "gradient"),
        Rule("eofd-buffered", known, _K2, _SMALL, points[1], section, 64, 64, "anchor"),
        Rule("eofd-buffered", known, _K1, _LARGE, points[2], big, None, 64, "gradient"),
        Rule("eofd-buffered", known, _K2, _LARGE, points[3], big, None, 64, "anchor"),
    ]


_PAPER = _E(0.75, 0.75, "theory")
RULES: tuple[Rule, ...] = (
    *_rows(True, _ANY, _ANY, _SCALING, {"eofd-paper": _PAPER, "oful-paper": _PAPER}),
    Rule("eofd-robust", True, _K1, (33, None), None, _KNOWN_PICK, practical=True),
    Rule("eofd-buffered", True, _K2, (33, 128), None, _KNOWN_PICK, practical=True),
    Rule("linucb", True, _ANY, _ANY, _E(-1.0, 0.0, 0.1), _KNOWN_PICK, practical=True),
    Rule("eofd-robust", True, _ANY, _ANY, None, _HIGH, practical=True),
    Rule("eofd-robust", True, _ANY, _HUGE, _E(-0.5, 0.0, 1.0), _HIGH, 64),
    Rule("eofd", True, _ANY, _HUGE, _E(-1.0, -0.5, 0.01), _HIGH, 64),
    *_rows(True, _ANY, _LARGE, _BIG, {"eofd-robust": _E(-0.5, 0.0, 1.0),
                                      "greedy": _E(-0.5, 0.0, 0.0)}),
    *_rows(True, _ANY, _ANY, _KNOWN, {
        "eofd": _E(-1.0, -0.5, 0.01), "eofd-robust": _E(-1.0, 0.0, 1.0),
        "eofd-adaptive": _E(0.0, -0.5, 0.1), "oful": _E(-1.0, 0.0, 1.0),
        "greedy": _E(-1.0, 0.0, 0.0), "ecolog": _E(-1.5, 0.0, 0.01),
        "uniform": _E(0.0, 0.0, 0.0),
    }),
    Rule("soful", True, _ANY, _ANY, _E(-1.0, 0.0, 0.1), _KNOWN, 64),
    Rule("exact", True, _ANY, _ANY, _E(-1.5, 0.0, 0.0), _EXACT),
    *_rows(True, _ANY, _ANY, _TS, {"lin-ts": _E(-0.5, 0.0, 0.01),
                                   "logistic-ts": _E(-1.5, 0.0, 0.01)}),
    *_buffered_rows(True, _BUF, *(_E(-1.5, 0.0, 0.0),) * 2, *(_E(-1.0, -0.5, 0.1),) * 2),
    *_rows(False, _ANY, _ANY, _SCALING, {"eofd-paper": _PAPER._replace(S=16.0),
                                         "oful-paper": _PAPER._replace(S=16.0)}),
    Rule("eofd-robust", False, _K1, _HUGE, None, _HIGH, practical=True),
    Rule("soful", False, _K2, _HUGE, None, _HIGH, practical=True),
    Rule("linucb", False, _ANY, _ANY, _E(-1.5, 0.0, 0.01, 2.0), _FREE_PICK, practical=True),
    Rule("eofd-robust", False, _ANY, _ANY, None, _HIGH, practical=True),
    Rule("eofd-robust", False, _ANY, _HUGE, _E(-4.0, -0.5, 0.01, 16.0), _HIGH, 64),
    Rule("eofd", False, _ANY, _HUGE, _E(-1.5, 0.0, 0.1, 16.0), _HIGH, 64),
    *_buffered_rows(False, _FREE_BUF, *(_E(-6.0, 0.0, 0.0, 16.0), _E(-2.62, 0.0, 0.01, 16.0)) * 2),
    *_rows(False, _ANY, _ANY, _FREE, {
        "eofd": _E(-1.5, 0.0, 0.1, 16.0), "eofd-robust": _E(-4.0, -0.5, 0.01, 16.0),
        "eofd-adaptive": _E(-1.5, 0.0, 0.1, 16.0), "oful": _E(-1.0, 0.5, 0.1, 16.0),
        "greedy": _E(-4.0, -0.5, 0.0, 16.0), "ecolog": _E(-1.5, 0.0, 0.01, 8.0),
        "uniform": _E(0.0, 0.0, 0.0, 1.0),
    }),
    Rule("soful", False, _ANY, _ANY, _E(-1.5, 0.0, 0.01, 2.0), _FREE, 64),
    Rule("exact", False, _ANY, _ANY, _E(-5.0, 0.0, 0.0, 16.0), _EXACT),
    *_rows(False, _ANY, _ANY, _TS, {"lin-ts": _E(-4.0, 0.0, 0.01, 2.0),
                                    "logistic-ts": _E(-4.0, 0.0, 0.01, 16.0)}),
)  # fmt: skip


def _within(x: int, span: tuple[int, int | None]) -> bool:
    return span[0] <= x and (span[1] is None or x <= span[1])


def _matches(r: Rule, known: bool, K: int, d: int) -> bool:
    return r.known == known and _within(K, r.K) and _within(K * d, r.Kd)


def rule(kind: str, *, num_outcomes: int, dim: int, S: float | None) -> Rule:
    """The first row of :data:`RULES` for ``kind`` in the regime ``(K, d, S)`` (``S=None``: no
    known bound)."""
    _check_kind(kind)
    K, d = check_int("num_outcomes", num_outcomes), check_int("dim", dim)
    found = next((r for r in RULES if r.kind == kind and r.point is not None
                  and _matches(r, S is not None, K, d)), None)  # fmt: skip
    if found is None:
        raise ValueError(f"no rule for kind {kind!r} at K = {K}, d = {d}, S = {S!r}")
    return found


class Tuned(NamedTuple):
    """A learner with its hyperparameters: ``state = recipe.learner.init(recipe.hparams)``."""

    kind: str
    learner: Learner
    hparams: Any
    sketch_size: int


def _check_kind(kind: str) -> str:
    if kind not in REGISTRY:
        raise ValueError(f"kind must be one of {list(KINDS)}, got {kind!r}")
    return kind


def tuned_point(
    kind: str, S: float | None, *, num_outcomes: int, dim: int
) -> tuple[Exponents, float]:
    """A kind's tuned point (:func:`rule`) and the ``S`` it runs with: the caller's, or where
    ``S`` is ``None`` (no known bound) the point's own."""
    ex = rule(kind, num_outcomes=num_outcomes, dim=dim, S=S).point
    return ex, (S if S is not None else float(ex.S))


def sketch_size(num_outcomes: int, dim: int, kind: str | None = None) -> int:
    """A kind's default sketch size: ``min(K d, cap)`` where its rule has a cap, else Section 4's
    ``m = max(1, floor(K d / 10))`` (also for ``kind=None``)."""
    K, d = int(num_outcomes), int(dim)
    cap = None if kind is None else rule(kind, num_outcomes=K, dim=d, S=1.0).sketch
    return min(K * d, cap) if cap is not None else max(1, (K * d) // 10)


def buffer_size(num_outcomes: int, dim: int) -> int:
    """The buffer ``B`` of ``eofd-buffered`` (its :data:`RULES` row)."""
    K = named("recipes.buffer_size", check_int, "num_outcomes", num_outcomes, 1)
    d = named("recipes.buffer_size", check_int, "dim", dim, 1)
    return int(rule("eofd-buffered", num_outcomes=K, dim=d, S=1.0).buffer)


def _buffered(K: int, d: int, m: int, T: int | None, **options: Any) -> Learner:
    r = rule("eofd-buffered", num_outcomes=K, dim=d, S=1.0)
    return eofd_buffered(num_outcomes=K, dim=d, sketch_size=m, buffer_size=r.buffer,
                         summary=r.summary, **options)  # fmt: skip


class Kind(NamedTuple):
    """One row of the learner registry (:data:`REGISTRY`).

    Attributes:
      label: short name in tables and JSON. legend: name in figure legends. color: matplotlib's.
      factory: ``(K, d, m, horizon, **options) -> Learner`` (``m``: sketch size; ``horizon``:
        T; ``options``: ``solver`` where the kind has one).
      hparams: ``(num_outcomes=, dim=, S=, horizon=, l=, e=, beta=, rewards=, dtype=) ->
        hyperparameters`` (``l``, ``e``, a numeric ``beta``: arrays of the grid's shape).
      sketched: whether ``m`` applies. k1_only: defined for K = 1 only.
      paper: the paper's learner as written (the command runs it at ``--l/--e/--beta``).
      solver: whether the factory takes ``solver`` (a LAPACK form faster on the CPU and a form
        a GPU keeps as one batch, :data:`~bandits_jax.linalg.lapack.SOLVERS`).
    """

    label: str
    legend: str
    color: str
    factory: Callable[..., Learner]
    hparams: Callable[..., Any]
    sketched: bool = False
    k1_only: bool = False
    paper: bool = False
    solver: bool = False


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


def _lam_beta(what: str, beta: Any, kw: dict) -> tuple[np.ndarray, np.ndarray]:
    """Section 4's ``lam`` and a numeric ``beta`` broadcast to its grid axes."""
    if isinstance(beta, str):
        raise ValueError(f"beta must be a number for {what}, got {beta!r}")
    lam = _section4_lam(**kw)
    return lam, np.broadcast_to(np.asarray(beta, float), lam.shape)


def _linucb_hp(*, beta: Any, dtype: Any, **kw: Any) -> Any:
    """LinUCB's ridge at Section 4's ``lam``, ``alpha = sqrt(beta)``."""
    lam, b = _lam_beta("linucb", beta, kw)
    return linucb_hyperparams(lam=lam, alpha=np.sqrt(b), rewards=kw["rewards"], dtype=dtype)


def _ecolog_hp(*, beta: Any, dtype: Any, **kw: Any) -> Any:
    """ECOLog at Section 4's ``lam`` with the radius ``beta`` (grid or rule)."""
    lam = _section4_lam(**kw)
    b = beta if isinstance(beta, str) else np.broadcast_to(np.asarray(beta, float), lam.shape)
    return ecolog_hyperparams(lam=lam, S=kw["S"], rewards=kw["rewards"], beta=b,
                              delta=1.0 / kw["horizon"], dtype=dtype)  # fmt: skip


def _exact_hp(*, beta: Any, dtype: Any, **kw: Any) -> Any:
    """The exact fit (and the buffered EOFD, whose hyperparameters are the exact fit's) at
    Section 4's ``lam`` with the radius ``beta``."""
    lam, b = _lam_beta("exact", beta, kw)
    return exact_hyperparams(lam=lam, beta=b, rewards=kw["rewards"], dtype=dtype)


def _ts_hp(build: Callable[..., Any]) -> Callable[..., Any]:
    """Thompson sampling at Section 4's ``lam`` (the prior precision), ``v = sqrt(beta)``."""

    def hparams(*, beta: Any, dtype: Any, **kw: Any) -> Any:
        lam, b = _lam_beta("Thompson sampling", beta, kw)
        seed = np.zeros(lam.shape, np.uint32)
        return build(lam=lam, v=np.sqrt(b), seed=seed, rewards=kw["rewards"], dtype=dtype)

    return hparams


def _exact(K: int, d: int, m: int, horizon: int | None) -> Learner:
    if horizon is None:
        raise ValueError("make_learner: kind 'exact' needs horizon= (its buffer holds T rounds)")
    return exact(num_outcomes=K, dim=d, horizon=horizon)


def _uniform_hp(*, l: Any, e: Any, rewards: Any, dtype: Any, **_: Any) -> Any:  # noqa: E741
    """No numeric hyperparameters: one seed per grid point."""
    shape = np.broadcast(np.asarray(l), np.asarray(e)).shape
    return uniform_hyperparams(seed=np.zeros(shape, np.uint32), rewards=rewards, dtype=dtype)


def _oful(K: int, d: int, m: int, T: int | None, **options: Any) -> Learner:
    return oful(num_outcomes=K, dim=d, **options)


def _eofd(**kw: Any) -> Callable[..., Learner]:
    return lambda K, d, m, T, **o: eofd(num_outcomes=K, dim=d, sketch_size=m, **kw, **o)


# kind -> Kind. A new learner joins every command (``--learners``, tables, figures, sweeps) with
# one row here and its rows in RULES.
REGISTRY: dict[str, Kind] = {
    "eofd-paper": Kind("EOFD", "EOFD-MLogB", "tab:blue", _eofd(), _section4_hp, True, paper=True,
                       solver=True),
    "oful-paper": Kind("OFUL", "OFUL-MLogB", "tab:orange", _oful, _section4_hp, paper=True,
                       solver=True),
    "eofd": Kind("EOFD tuned", "EOFD-MLogB (tuned)", "tab:cyan", _eofd(), _section4_hp, True,
                 solver=True),
    "eofd-robust": Kind("EOFD robust", "EOFD-MLogB robust (tuned)", "tab:green",
                        _eofd(regularization="robust"), _section4_hp, True, solver=True),
    "eofd-adaptive": Kind("EOFD adaptive", "EOFD-MLogB adaptive (tuned)", "tab:olive",
                          lambda K, d, m, T, **o: eofd(num_outcomes=K, dim=d, sketch_size=m,
                                                       max_sketch_size=2 * m, delta_target=2.0,
                                                       **o),
                          _section4_hp, True, solver=True),
    "oful": Kind("OFUL tuned", "OFUL-MLogB (tuned)", "tab:red", _oful, _section4_hp, solver=True),
    "greedy": Kind("greedy", "greedy (robust EOFD estimate)", "tab:purple",
                   lambda K, d, m, T, **o: greedy(num_outcomes=K, dim=d, sketch_size=m,
                                                  regularization="robust", **o), _greedy_hp, True,
                   solver=True),
    "linucb": Kind("LinUCB", "LinUCB (tuned)", "tab:brown",
                   lambda K, d, m, T: linucb(num_outcomes=K, dim=d), _linucb_hp),
    "soful": Kind("SOFUL", "SOFUL: LinUCB on a Frequent Directions sketch (tuned)", "#469990",
                  lambda K, d, m, T: soful(num_outcomes=K, dim=d, sketch_size=m), _linucb_hp,
                  sketched=True),
    "ecolog": Kind("ECOLog", "ada-OFU-ECOLog (tuned)", "tab:pink",
                   lambda K, d, m, T, **o: ecolog(num_outcomes=K, dim=d, **o), _ecolog_hp,
                   k1_only=True, solver=True),
    "lin-ts": Kind("LinTS", "linear Thompson sampling (tuned)", "#911eb4",
                   lambda K, d, m, T: lin_ts(num_outcomes=K, dim=d), _ts_hp(lin_ts_hyperparams)),
    "logistic-ts": Kind("logistic TS", "Laplace logistic Thompson sampling (tuned)", "#000075",
                        lambda K, d, m, T: logistic_ts(num_outcomes=K, dim=d),
                        _ts_hp(logistic_ts_hyperparams)),
    "eofd-buffered": Kind("EOFD buffered", "EOFD-MLogB buffered (tuned)", "#e6194b", _buffered,
                          _exact_hp, True, solver=True),
    "exact": Kind("exact", "exact MLE refit, O(t) a round", "black", _exact, _exact_hp),
    "uniform": Kind("random", "uniform random", "tab:gray",
                    lambda K, d, m, T: uniform(num_outcomes=K, dim=d), _uniform_hp),
}  # fmt: skip
KINDS = tuple(REGISTRY)
K1_ONLY = frozenset(k for k, v in REGISTRY.items() if v.k1_only)  # kinds defined for K = 1 only


def make_learner(
    kind: str,
    *,
    num_outcomes: int,
    dim: int,
    sketch_size: int,
    horizon: int | None = None,
    solver: str = "auto",
) -> Learner:
    """The learner of a kind (:data:`REGISTRY`) with sketch size ``m`` where it has one.

    ``solver``: its linear algebra's form where it has one (``Kind.solver``; speed only); another
    kind takes only ``"auto"``."""
    row = REGISTRY[_check_kind(kind)]
    if row.solver:
        return row.factory(num_outcomes, dim, sketch_size, horizon, solver=solver)
    if solver != "auto":
        with_solver = [k for k, v in REGISTRY.items() if v.solver]
        raise ValueError(f"make_learner: solver: expected 'auto' for kind {kind!r} (it applies to "
                         f"{with_solver}), got {solver!r}")  # fmt: skip
    return row.factory(num_outcomes, dim, sketch_size, horizon)


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
    """Hyperparameters of a kind at exponents ``(l, e)`` and radius ``beta`` (``"theory"`` or
    ``"order"`` for the online-Newton kinds); arrays broadcast to a grid (``jax.vmap`` the
    ``init``). ``S=None``: no known bound, the ``S`` of the kind's no-bound rule."""
    _, S = tuned_point(kind, S, num_outcomes=num_outcomes, dim=dim)
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
    solver: str = "auto",
) -> Tuned:
    """A kind (one of :data:`KINDS`) with its tuned hyperparameters (its :func:`rule`).

    Args:
      S: the known bound on ``||W*||_F``, or ``None`` (e.g. classification data: the rule's
        point chooses ``S`` too).
      horizon: T (``delta = 1/T``). rewards, dtype: as in :func:`~.hyperparams.hyperparams`.
      solver: the kind's linear algebra's form where it has one (:func:`make_learner`).
    """
    ex, S = tuned_point(kind, S, num_outcomes=num_outcomes, dim=dim)
    m = sketch_size(num_outcomes, dim, kind)
    learner = make_learner(kind, num_outcomes=num_outcomes, dim=dim, sketch_size=m,
                           horizon=horizon, solver=solver)  # fmt: skip
    hp = hparams_for(kind, num_outcomes=num_outcomes, dim=dim, S=S, horizon=horizon, l=ex.l,
                     e=ex.e, beta=ex.beta, rewards=rewards, dtype=dtype)  # fmt: skip
    return Tuned(kind, learner, hp, m)


def cost_of(
    kind: str, learner: Learner, hparams: Any, *, num_outcomes: int, dim: int, sketch_size: int
) -> tuple[float, int]:
    """A kind's learner's estimated ms a round (:func:`.cost.round_ms`; a paper kind as its tuned
    kind; 0 where the kind has no estimate) and its state's bytes (:func:`.cost.state_bytes`)."""
    base, K, d = kind.removesuffix("-paper"), num_outcomes, dim
    ms = 0.0 if base not in cost.KINDS else cost.round_ms(
        base, num_outcomes=K, dim=d, sketch_size=sketch_size,
        buffer=rule(base, num_outcomes=K, dim=d, S=1.0).buffer or 0)  # fmt: skip
    return ms, cost.state_bytes(learner, hparams)


def practical_kind(
    *, num_outcomes: int, dim: int, S: float | None, horizon: int = 1000,
    budget: cost.Budget | None = cost.DEFAULT_BUDGET,
) -> str:  # fmt: skip
    """The kind :func:`practical` returns: that of the first :data:`RULES` row marked
    ``practical`` for the regime whose learner fits ``budget`` (:mod:`.cost`; ``None``: the
    first row)."""
    fn = "practical"
    K = named(fn, check_int, "num_outcomes", num_outcomes, 1)
    d = named(fn, check_int, "dim", dim, 1)
    kinds = [r.kind for r in RULES if r.practical and _matches(r, S is not None, K, d)]
    if budget is None:
        return kinds[0]
    if not isinstance(budget, cost.Budget):
        raise ValueError(f"{fn}: budget: expected a cost.Budget or None, got {budget!r}")
    costs = {}
    for kind in kinds:
        rec = tuned(kind, num_outcomes=K, dim=d, S=S, horizon=horizon)
        costs[kind] = cost_of(kind, rec.learner, rec.hparams, num_outcomes=K, dim=d,
                              sketch_size=rec.sketch_size)  # fmt: skip
        if cost.fits(budget, *costs[kind]):
            return kind
    listed = ", ".join(f"{k}: {ms:.3g} ms a round, {b / 2**20:.3g} MiB" for k, (ms, b) in
                       costs.items())  # fmt: skip
    raise ValueError(f"{fn}: budget: no recommended kind fits {budget} at K = {K}, d = {d} "
                     f"({listed}); raise the budget or pass budget=None")  # fmt: skip


def practical(
    *,
    num_outcomes: int,
    dim: int,
    S: float | None = None,
    horizon: int,
    rewards: Any = None,
    dtype: Any = None,
    budget: cost.Budget | None = cost.DEFAULT_BUDGET,
) -> Tuned:
    """The recommended learner (:func:`practical_kind`) with its tuned hyperparameters; the
    arguments are :func:`tuned`'s (spelt out, so a misspelt keyword is named as ``practical``'s);
    ``.kind`` says which came back. ``budget``: what a trial may cost (:class:`.cost.Budget`;
    the default keeps 64 trials within 8 GiB at interactive speed): where the first choice for
    the regime costs more, the next row marked ``practical`` that fits; ``None``: no limit."""
    kind = practical_kind(num_outcomes=num_outcomes, dim=dim, S=S, horizon=horizon, budget=budget)
    return tuned(
        kind, num_outcomes=num_outcomes, dim=dim, S=S, horizon=horizon, rewards=rewards,
        dtype=dtype,
    )  # fmt: skip


def _span(name: str, span: tuple[int, int | None]) -> str:
    lo, hi = span
    if hi is None:
        return "any" if lo == 1 else f"> {lo - 1}"
    return f"{lo}" if lo == hi else (f"<= {hi}" if lo == 1 else f"{lo - 1} < {name} <= {hi}")


def _anchor(heading: str) -> str:
    return re.sub(r"[^a-z0-9 _-]", "", heading.lower()).replace(" ", "-")


def _escape(heading: str) -> str:
    return heading.replace("|", "\\|")


def rules_markdown() -> str:
    """:data:`RULES` as the markdown table ``docs/recipes.md`` shows (a test keeps them equal)."""
    lines = [
        "| kind | S known | K | K d | l | e | beta | S | sketch | buffer | summary | practical "
        "| chosen in |",
        "|" + " --- |" * 13,
    ]
    for r in RULES:
        p = r.point
        sketch = "-" if not REGISTRY[r.kind].sketched else (
            "K d / 10" if r.sketch is None else f"min(K d, {r.sketch})")  # fmt: skip
        own = ["its row below"] + ["-"] * 6 if p is None else [
            f"{p.l:g}", f"{p.e:g}", f"{p.beta:g}" if not isinstance(p.beta, str) else p.beta,
            "caller's" if p.S is None else f"{p.S:g}", sketch,
            "-" if r.buffer is None else str(r.buffer), r.summary or "-"]  # fmt: skip
        cells = [
            f"`{r.kind}`", "yes" if r.known else "no", _span("K", r.K), _span("K d", r.Kd), *own,
            "yes" if r.practical else "", f"[{_escape(r.section)}](#{_anchor(r.section)})",
        ]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
