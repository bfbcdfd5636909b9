"""The float64 sides of ``tests/test_float32.py``: the cases of ``tests/precision_cases.py`` run
by the numpy references of ``references`` (float64 numpy, one Python step a round),
not by a float64 JAX program.

Each reference sees what the float32 run saw, in float64:

- MLogB: the case's teacher-forced stream (``precision_cases.mlogb_inputs``, float64, which the
  float32 run rounded once) and its hyperparameters (``precision_cases.*_HP``); the learner's
  options are read from the case's factory (a ``functools.partial``: its keywords, else the
  factory's defaults), so both sides run the same configuration. Thompson sampling gets the
  normals of the float32 run's own draws, mapped from their bits in float64 (``mlogb.lin_ts``'s
  map, the one a float64 learner applies). Records per round, after the update, ``W``, the two
  score parts of the probe actions and the status the learner reports for that update.
- BCO: the float32 run's own draws (coordinates, signs, Gaussian directions) and loss sequence
  (the centres' parameters as the float32 run drew them). The loss the reference evaluates
  records each query and its value: the points and values of the round.

How a reference's numbers are read as the learner's outputs (where the reference differs):

- EOFD-, OFUL-MLogB and greedy: the references give the selection index ``estimate + bonus``
  (eq. 16/19) and ``W``; the estimate is ``w^T x`` (K = 1) or ``r^T sigma(W x)`` (K >= 2), the
  bonus the index minus it (a float64 cancellation of ``eps64 |index|``, eight orders below the
  float32 tolerances); greedy's bonus is 0 and its ``W`` EOFD's (the same update). A deferred
  basis (``spare_columns``) computes Algorithm 2 to rounding: :class:`NumpyEOFD`. Status:
  ``CONVERGED`` where Lemma 2's projection was active, ``INACTIVE`` where ``W'`` lay in the ball.
- Exact fit and buffered EOFD: ``CONVERGED`` where the reference's fit converged, else
  ``MAX_STEPS`` (the learners' rule, the same test).
- LinUCB, linear TS: ``W``'s row 0 is ``theta``'s feature part, the other rows 0 (the learners'
  convention).
- ECOLog, TS, LinUCB, every BCO learner: the references have no failure path; the learners
  report ``CONVERGED`` on every accepted update, the status expected here.
- Algorithm 3 and Algorithm 6 divide their finite difference by ``2 delta``, the learners by the
  realised spacing: a relative ``eps64 |w| / delta``, far below float32's rounding.

:data:`REFERENCES` maps a case to its reference. A case without one (``alg5-dynamic``: no numpy
reference of Algorithm 5 exists) keeps a float64 JAX program as its float64 side.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
from collections.abc import Callable

import numpy as np
import scipy.special

from bandits_jax import mlogb
from bandits_jax.status import Status
from references import bco_box_numpy as ref4
from references import bco_ensemble_numpy as ref6
from references import bco_numpy as ref1
from references import bco_sphere_numpy as ref3
from references import mlogb_numpy
from references.ecolog_numpy import NumpyECOLog
from references.eofd_buffer_numpy import NumpyEOFDBuffered
from references.eofd_variants_numpy import NumpyEOFDVariant
from references.exact_numpy import NumpyExact
from references.linucb_numpy import NumpyLinUCB
from references.ts_numpy import NumpyLinTS, NumpyLogisticTS
from tests import precision_cases as pc

try:  # numpy's BLAS threads fight for the cores of a busy machine; the matrices here are tiny
    from threadpoolctl import threadpool_limits
except ImportError:  # pragma: no cover - only slower without it (scikit-learn brings it)
    threadpool_limits = None

Reference = Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]


def _one_blas_thread():
    return threadpool_limits(1) if threadpool_limits else contextlib.nullcontext()


def _option(factory: functools.partial, name: str):
    """The case's value of a factory option: its keyword, else the factory's default."""
    if name in factory.keywords:
        return factory.keywords[name]
    return inspect.signature(factory.func).parameters[name].default


# --- MLogB -------------------------------------------------------------------------------------


def _standard_normals(bits: np.ndarray) -> np.ndarray:
    """``sqrt(2) erfinv(w)``, ``w = (2 m + 1 - 2^23) 2^-23``, ``m`` the bits' top 23
    (``mlogb.lin_ts``), in float64."""
    m = (np.asarray(bits, np.uint32) >> 9).astype(np.int64)
    return np.sqrt(2.0) * scipy.special.erfinv((2 * m + 1 - 2**23) * 2.0**-23)


def _feature_rows(theta: np.ndarray, K: int, d: int) -> np.ndarray:
    """The protocol's ``W`` of LinUCB and linear TS: row 0 ``theta[:d]``, the others 0."""
    W = np.zeros((K, d))
    W[0] = theta[:d]
    return W


def _index_parts(ref, probe: np.ndarray, greedy: bool = False):
    """``(estimate, bonus)`` of an EOFD/OFUL reference (module docstring)."""
    z = probe @ ref.W.T
    est = z[:, 0] if ref.K == 1 else mlogb_numpy.sigma(z)[0] @ ref.rewards
    return est, (np.zeros_like(est) if greedy else ref.index(probe) - est)


def _projection_status(info: dict) -> Status:
    return Status.CONVERGED if info["projected"] else Status.INACTIVE


def _fit_status(ref) -> Status:
    return Status.CONVERGED if ref.converged else Status.MAX_STEPS


def _sketched(K, d, factory, hp):
    """The reference of ``mlogb.eofd`` (Algorithm 2, or with its variants' options),
    ``mlogb.oful`` and the base learner of ``mlogb.greedy``."""
    if factory.func is mlogb.oful or (
        factory.func is mlogb.greedy and _option(factory, "sketch_size") is None
    ):
        return mlogb_numpy.NumpyOFUL(K, d, **hp)
    m = _option(factory, "sketch_size")
    variant = ("regularization", "max_sketch_size", "delta_target", "sketch_rule", "buffer_size")
    opts = {k: factory.keywords[k] for k in variant if k in factory.keywords}
    if opts:
        return NumpyEOFDVariant(K, d, m, **opts, **hp)
    return mlogb_numpy.NumpyEOFD(K, d, m, **hp)


def _ok(info) -> Status:
    return Status.CONVERGED


# A learner factory's reference: ``(K, d, factory, rewards) -> (ref, parts, W_of, status_of,
# draw)``: the reference object, ``probe -> (estimate, bonus)``, ``() -> W``,
# ``update's return -> Status``, and ``normals -> None`` (the round's draw) or None.
def _eofd_oful_greedy(K, d, factory, r):
    ref = _sketched(K, d, factory, dict(pc.MLOGB_HP, rewards=r))
    parts = functools.partial(_index_parts, ref, greedy=factory.func is mlogb.greedy)
    return ref, parts, (lambda: ref.W), _projection_status, None


def _linucb(K, d, factory, r):
    ref = NumpyLinUCB(dim=d, **pc.LINUCB_HP, rewards=r, intercept=_option(factory, "intercept"))
    return ref, ref.scores, (lambda: _feature_rows(ref.theta, K, d)), _ok, None


def _ecolog(K, d, factory, r):
    ref = NumpyECOLog(d, **pc.ECOLOG_HP, discrepancy=_option(factory, "discrepancy"))
    return ref, ref.score_parts, (lambda: ref.theta[None, :]), _ok, None


def _exact(K, d, factory, r):
    opts = ("horizon", "newton_steps", "max_halvings")
    ref = NumpyExact(num_outcomes=K, dim=d, **pc.EXACT_HP, rewards=r,
                     **{k: _option(factory, k) for k in opts})  # fmt: skip
    return ref, ref.score_parts, (lambda: ref.W), (lambda info: _fit_status(ref)), None


def _eofd_buffered(K, d, factory, r):
    opts = ("sketch_size", "buffer_size", "regularization", "summary", "newton_steps",
            "max_halvings")  # fmt: skip
    ref = NumpyEOFDBuffered(num_outcomes=K, dim=d, **pc.EXACT_HP, rewards=r,
                            **{k: _option(factory, k) for k in opts})  # fmt: skip
    return ref, ref.score_parts, (lambda: ref.W), (lambda info: _fit_status(ref)), None


def _lin_ts(K, d, factory, r):
    ts = {k: pc.TS_HP[k] for k in ("lam", "v")}
    ref = NumpyLinTS(dim=d, **ts, rewards=r, intercept=_option(factory, "intercept"))
    return ref, ref.score_parts, (lambda: _feature_rows(ref.theta, K, d)), _ok, ref.draw


def _logistic_ts(K, d, factory, r):
    ts = {k: pc.TS_HP[k] for k in ("lam", "v")}
    ref = NumpyLogisticTS(num_outcomes=K, dim=d, **ts, rewards=r,
                          covariance=_option(factory, "covariance"))  # fmt: skip
    return ref, ref.score_parts, (lambda: ref.W), _ok, ref.draw


MLOGB_REFERENCES: dict[Callable, Callable] = {
    mlogb.eofd: _eofd_oful_greedy,
    mlogb.oful: _eofd_oful_greedy,
    mlogb.greedy: _eofd_oful_greedy,
    mlogb.linucb: _linucb,
    mlogb.ecolog: _ecolog,
    mlogb.exact: _exact,
    mlogb.eofd_buffered: _eofd_buffered,
    mlogb.lin_ts: _lin_ts,
    mlogb.logistic_ts: _logistic_ts,
}


def mlogb_reference(name: str, run32: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The MLogB case ``name`` by its numpy reference on the case's stream (module docstring):
    ``W`` (T, K, d), ``estimate`` and ``bonus`` (T, N_PROBE), ``status`` (T,)."""
    K, d, factory, _ = pc.MLOGB[name]
    data = pc.mlogb_inputs(name, K, d)
    ref, parts, W_of, status_of, draw = MLOGB_REFERENCES[factory.func](K, d, factory, pc.rewards(K))
    out = {k: [] for k in ("W", "estimate", "bonus", "status")}
    with _one_blas_thread():
        for t in range(pc.T):
            info = ref.update(data["xs"][t], int(data["ys"][t]))
            if draw is not None:  # the draw behind the score after this update
                draw(_standard_normals(run32["draw_bits"][t]))
            est, bon = parts(data["probe"])
            for key, value in (("W", W_of()), ("estimate", est), ("bonus", bon),
                               ("status", status_of(info))):  # fmt: skip
                out[key].append(np.array(value, copy=True))
    return {k: np.asarray(v) for k, v in out.items()}


# --- BCO ---------------------------------------------------------------------------------------


def _recorded_loss(run32: dict[str, np.ndarray]):
    """``f_t(x) = 1/2 ||x - c_t||^2`` (``bco_losses.quadratic``, lam = 1) with the float32 run's
    centre parameters in float64, and the list of ``(x, f_t(x))`` in the order evaluated."""
    env = {f: np.asarray(run32[f"env_{f}"], np.float64) for f in pc.ENV_FIELDS}
    phase = env["omega"] * np.arange(pc.T, dtype=np.float64)[:, None]
    centres = env["base"] + env["amplitude"] * (np.cos(phase) * env["u"] + np.sin(phase) * env["v"])
    calls: list[tuple[np.ndarray, float]] = []

    def loss(t: int, x: np.ndarray) -> float:
        value = 0.5 * float(np.sum((x - centres[t]) ** 2))
        calls.append((np.array(x, np.float64), value))
        return value

    return loss, calls


def _points_and_values(calls, queries: int) -> dict[str, np.ndarray]:
    points = np.array([x for x, _ in calls]).reshape(pc.T, queries, pc.BCO_DIM)
    values = np.array([v for _, v in calls]).reshape(pc.T, queries)
    return {"points": points, "loss": values, "status": np.full(pc.T, int(Status.CONVERGED))}


# The unit ball of bco_env, delta = xi = BCO_DELTA (r = 1); the schedules' parameters are those
# of the cases' hyperparameters (``learner.hyperparams(...)`` of precision_cases.BCO).
_BALL = ("ball", 1.0)
_SCHEDULE = dict(radius=1.0, lam=1.0, lipschitz=1.0, scale=1.0, offset=float(pc.BCO_DIM**2))


def _algorithm1(kind: str, run32):
    loss, calls = _recorded_loss(run32)
    ref1.algorithm1(loss, pc.BCO_DIM, run32["coord"], domain=_BALL, delta=pc.BCO_DELTA,
                    xi=pc.BCO_DELTA, kind=kind, params=_SCHEDULE)  # fmt: skip
    return _points_and_values(calls, 2)


def _algorithm3(kind: str, run32):
    loss, calls = _recorded_loss(run32)
    ref3.algorithm3(loss, pc.BCO_DIM, run32["normal"], domain=_BALL, delta=pc.BCO_DELTA,
                    xi=pc.BCO_DELTA, kind=kind, params=_SCHEDULE)  # fmt: skip
    return _points_and_values(calls, 2)


def _algorithm4(run32):
    """``box_ftrl`` with eta = 0.1 on ``[-1, 1]^d`` (precision_cases._box), optimism cap 0.9 (its
    default), driven round by round on the recorded ``(i_t, eps_t)``."""
    loss, calls = _recorded_loss(run32)
    ones = np.ones(pc.BCO_DIM)
    ref = ref4.BoxFTRLNumpy(0.1, -ones, ones, optimism_cap=0.9)
    for t in range(pc.T):
        coord, sign = int(run32["coord"][t]), float(run32["sign"][t])
        ref.update(coord, sign, loss(t, ref.query(coord, sign)))
    return _points_and_values(calls, 1)


def _algorithm6(run32):
    """``universal_ensemble`` (fixed-point optimism) at the "practical" preset with lipschitz
    G = 2: meta scale 30, so ``s = 30 / (2 sqrt(10) d G R)``; the strongly convex pool
    ``2^k / T`` (E.6); the convex and linear learners' offsets ``d^2`` (Table 2); E.9's cap 1/8."""
    loss, calls = _recorded_loss(run32)
    d, T = pc.BCO_DIM, pc.T
    ref6.algorithm6(
        loss, d, run32["coord"], domain=_BALL, radius=1.0, delta=pc.BCO_DELTA, xi=pc.BCO_DELTA,
        lams=2.0 ** np.arange(math.ceil(math.log2(T)) + 1) / T, cvx_offsets=(d * d, d * d),
        loss_scale=30.0 / (2 * math.sqrt(10) * d * 2.0 * 1.0), lr_cap=0.125,
        optimism="fixed_point",
    )  # fmt: skip
    return _points_and_values(calls, 2)


# --- the table ---------------------------------------------------------------------------------

REFERENCES: dict[str, Reference] = {
    **{
        name: functools.partial(mlogb_reference, name)
        for name, (_, _, factory, _) in pc.MLOGB.items()
        if getattr(factory, "func", None) in MLOGB_REFERENCES
    },
    "alg1-variance": functools.partial(_algorithm1, "variance"),
    "alg1-strongly-convex": functools.partial(_algorithm1, "strongly_convex"),
    "alg4-box-ftrl": _algorithm4,
    # alg5-dynamic: no numpy reference of Algorithm 5 (references has none).
    "alg6-universal": _algorithm6,
    pc.SPHERE[0]: functools.partial(_algorithm3, pc.SPHERE[1]),
}
