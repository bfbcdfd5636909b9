"""float32 against float64: every learner of both papers on the same inputs in both precisions.

The float32 side runs as a user's program does: ``python -m tests.precision_cases OUT.npz`` in a
process with x64 off and no ``XLA_FLAGS`` (XLA's own options; ``tests/test_float32.py`` starts
it). The float64 side is computed by the test: the learner's numpy reference
(``tests/precision_references.py``) on these inputs and the float32 run's draws, or, for a case
without one, this module's case in float64 (x64 on). Each case is a jitted ``lax.scan`` over
rounds:

- MLogB: teacher-forced, so that a near-tie in selection cannot make the precisions play
  different actions: round t updates on a given action ``x_t`` and outcome ``y_t`` (drawn in
  numpy from a multinomial logistic model), then records ``W_t`` and both score parts (estimate,
  bonus) of a fixed probe set of actions. Thompson sampling also records the bits of the draw
  behind its bonus (``draw_bits``), for a float64 reference on the same normals.
- BCO: the learner's own closed loop on a quadratic loss sequence (``envs.quadratic``). The
  coordinate estimators draw integers (a coordinate and a sign) from the key, the same draws in
  both precisions, so both play the same queries up to rounding; ``delta`` is explicit and above
  float32's floor, so both use the same exploration radius. Records the played points and the
  values of the losses; a case of :data:`DRAWS` also records its draws and the loss sequence's
  parameters, for a float64 reference on the run's own draws.

Inputs are made in numpy (float64, ``zlib.crc32`` seeds) and cast: both precisions see the same
numbers up to one rounding of the inputs.
"""

from __future__ import annotations

import functools
import sys
import zlib
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bandits_jax import mlogb
from bandits_jax.bco import ensembles as ens
from bandits_jax.bco import one_point as op
from bandits_jax.bco import two_point as tp
from bandits_jax.envs import bco_losses
from bandits_jax.mlogb.ecolog import ecolog_hyperparams
from bandits_jax.mlogb.exact import exact_hyperparams
from bandits_jax.mlogb.lin_ts import lin_ts_hyperparams
from bandits_jax.mlogb.linucb import linucb_hyperparams
from bandits_jax.mlogb.logistic_ts import logistic_ts_hyperparams
from bandits_jax.sim import rollout

T = 120  # rounds per case
N_PROBE = 6  # probe actions scored every round (MLogB)
BCO_DIM = 4
BCO_DELTA = 0.05  # explicit exploration radius, far above float32's floor


# A case: ``run(dtype, jit) -> {field: array}``, its trajectory in ``dtype``.
Run = Callable[[Any, Callable], dict[str, np.ndarray]]


def _seed(name: str) -> int:
    return zlib.crc32(name.encode())


# --- MLogB -------------------------------------------------------------------------------------


def mlogb_inputs(name: str, K: int, d: int) -> dict[str, np.ndarray]:
    """Actions (T, d) with norms in [0.5, 1], outcomes (T,) from sigma(W* x) with
    ``||W*||_F = 2``, and a probe set (N_PROBE, d), all float64."""
    rng = np.random.default_rng(_seed(name))
    xs = rng.normal(size=(T, d))
    xs *= rng.uniform(0.5, 1.0, size=(T, 1)) / np.linalg.norm(xs, axis=1, keepdims=True)
    W = rng.normal(size=(K, d))
    W *= 2.0 / np.linalg.norm(W)
    z = xs @ W.T
    p = np.concatenate([np.ones((T, 1)), np.exp(z)], axis=1)
    p /= p.sum(axis=1, keepdims=True)
    ys = np.array([rng.choice(K + 1, p=pt) for pt in p], dtype=np.int32)
    probe = rng.normal(size=(N_PROBE, d))
    probe /= np.linalg.norm(probe, axis=1, keepdims=True)
    return {"xs": xs, "ys": ys, "probe": probe}


def _mlogb_case(name, K, d, make_learner, make_hp) -> Run:
    def run(dtype, jit):
        learner = make_learner()
        hp = make_hp(K, dtype)
        data = mlogb_inputs(name, K, d)
        xs, probe = (jnp.asarray(data[k], dtype) for k in ("xs", "probe"))
        ys = jnp.asarray(data["ys"])

        def trajectory(state, xs, ys, probe):
            def body(s, xy):
                s = learner.update(s, *xy)
                est, bonus = learner.score_parts(s, probe)
                out = {"W": s.W, "estimate": est, "bonus": bonus, "status": s.status}
                if hasattr(s, "key") and hasattr(s, "sample"):  # Thompson sampling
                    out["draw_bits"] = draw_bits(s.key, s.sample.shape)
                return s, out

            return jax.lax.scan(body, state, (xs, ys))[1]

        return jit(trajectory)(learner.init(hp), xs, ys, probe)

    return run


def draw_bits(key_data: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """The bits behind the draw of the round whose key is ``key_data`` (``mlogb.lin_ts``'s
    chain: ``bits(split(k_t)[1], shape, uint32)``; ``xi_t = sqrt(2) erfinv`` of their top 23 on
    an even grid): integers, the same in both precisions."""
    _, sub = jax.random.split(jax.random.wrap_key_data(key_data))
    return jax.random.bits(sub, shape, jnp.uint32)


# The hyperparameters of the cases (each learner family's builder; rewards ``r_k = k / K``).
MLOGB_HP = {"lam": 0.5, "eta": 1.0, "S": 2.5, "beta": "theory", "beta_scale": 0.05}
LINUCB_HP = {"lam": 0.5, "alpha": 0.3}
ECOLOG_HP = {"lam": 0.5, "S": 2.5, "beta_scale": 0.05}  # K = 1, reward 1
EXACT_HP = {"lam": 0.5, "beta": 0.3}  # exact and buffered EOFD
TS_HP = {"lam": 0.5, "v": 0.3, "seed": 3}


def rewards(K: int) -> np.ndarray:
    return np.linspace(1.0 / K, 1.0, K)


def _hp(K, dtype):
    return mlogb.hyperparams(**MLOGB_HP, rewards=rewards(K), dtype=dtype)


def _linucb_hp(K, dtype):
    return linucb_hyperparams(**LINUCB_HP, rewards=rewards(K), dtype=dtype)


def _ecolog_hp(K, dtype):
    return ecolog_hyperparams(**ECOLOG_HP, dtype=dtype)


def _exact_hp(K, dtype):
    return exact_hyperparams(**EXACT_HP, rewards=rewards(K), dtype=dtype)


def _ts_hp(build):
    """Thompson sampling: its draws are the same in both precisions up to rounding (the key's
    bits, mapped to normals in the state's dtype), so its bonus is compared too."""
    return lambda K, dtype: build(**TS_HP, rewards=rewards(K), dtype=dtype)


def _mlogb(factory, K, d, **kw):
    """The case's learner factory: a partial, whose options the numpy references read."""
    return functools.partial(factory, num_outcomes=K, dim=d, **kw)


MLOGB: dict[str, tuple[int, int, Callable, Callable]] = {
    # name: (K, d, learner factory, hyperparameters (K, dtype))
    "eofd-k1": (1, 8, _mlogb(mlogb.eofd, 1, 8, sketch_size=3), _hp),
    "eofd-k3": (3, 4, _mlogb(mlogb.eofd, 3, 4, sketch_size=4), _hp),
    # The FD core by secular updates at K >= 2 (what a GPU runs; the CPU's default is LAPACK).
    "eofd-k3-batched": (3, 4, _mlogb(mlogb.eofd, 3, 4, sketch_size=4, solver="batched"), _hp),
    "eofd-robust-k1": (1, 8, _mlogb(mlogb.eofd, 1, 8, sketch_size=3, regularization="robust"), _hp),
    "eofd-robust-k3": (3, 4, _mlogb(mlogb.eofd, 3, 4, sketch_size=4, regularization="robust"), _hp),
    "eofd-adaptive": (2, 5, _mlogb(mlogb.eofd, 2, 5, sketch_size=2, max_sketch_size=6,
                                   delta_target=1.5, regularization="robust"), _hp),
    "eofd-fast": (2, 5, _mlogb(mlogb.eofd, 2, 5, sketch_size=3, sketch_rule="fast"), _hp),
    "eofd-deferred": (2, 5, _mlogb(mlogb.eofd, 2, 5, sketch_size=3, spare_columns=4), _hp),
    "oful-k1": (1, 8, _mlogb(mlogb.oful, 1, 8), _hp),
    "oful-k3": (3, 4, _mlogb(mlogb.oful, 3, 4), _hp),
    "oful-k3-batched": (3, 4, _mlogb(mlogb.oful, 3, 4, solver="batched"), _hp),
    "greedy": (2, 5, _mlogb(mlogb.greedy, 2, 5, sketch_size=3), _hp),
    "linucb": (2, 5, _mlogb(mlogb.linucb, 2, 5), _linucb_hp),
    "soful": (2, 5, _mlogb(mlogb.soful, 2, 5, sketch_size=3), _linucb_hp),
    "ecolog": (1, 8, _mlogb(mlogb.ecolog, 1, 8), _ecolog_hp),
    "ecolog-batched": (1, 8, _mlogb(mlogb.ecolog, 1, 8, solver="batched"), _ecolog_hp),
    "exact-k3": (3, 4, _mlogb(mlogb.exact, 3, 4, horizon=T), _exact_hp),
    "lin-ts": (2, 5, _mlogb(mlogb.lin_ts, 2, 5), _ts_hp(lin_ts_hyperparams)),
    "logistic-ts-k1": (1, 8, _mlogb(mlogb.logistic_ts, 1, 8),
                       _ts_hp(logistic_ts_hyperparams)),
    "logistic-ts-full-k3": (3, 4, _mlogb(mlogb.logistic_ts, 3, 4, covariance="full"),
                            _ts_hp(logistic_ts_hyperparams)),
    "eofd-buffered-k3": (3, 4, _mlogb(mlogb.eofd_buffered, 3, 4, sketch_size=4, buffer_size=5),
                         _exact_hp),  # dense H
    "eofd-buffered-k3-batched": (3, 4, _mlogb(mlogb.eofd_buffered, 3, 4, sketch_size=4,
                                              buffer_size=5, solver="batched"), _exact_hp),
    "eofd-buffered-k1": (1, 8, _mlogb(mlogb.eofd_buffered, 1, 8, sketch_size=3, buffer_size=3),
                         _exact_hp),  # Woodbury
}  # fmt: skip


# --- BCO ---------------------------------------------------------------------------------------


def bco_env(dtype):
    """The loss sequence of every BCO case: quadratics with rotating centres outside the ball."""
    return bco_losses.quadratic(BCO_DIM, base_norm=1.5, amplitude=0.3, omega=0.05, dtype=dtype)


def _bco_case(name, make_learner, make_hp, draws=None) -> Run:
    """``draws``: ``(key, aux, dtype) -> {field: draw}``, the round's draws to record, with the
    loss sequence's parameters, for a float64 reference on the same draws (:data:`DRAWS`)."""

    def run(dtype, jit):
        learner = make_learner()
        env = bco_env(dtype)
        hp = make_hp(learner, env.domain)
        key = jax.random.key(_seed(name))
        env_state = env.init(jax.random.key(_seed(name) + 1))

        def points(state, env_state, key):
            def step(learner_state, env_state, key):  # one round of bco.interact, no analysis
                pts, aux = query = learner.act(learner_state, None, key)
                values = env.loss(env_state, env_state.t, pts)
                new_state = learner.update(learner_state, query, values)
                out = {"points": pts, "loss": values, "status": new_state.status}
                if draws:
                    out.update(draws(key, aux, dtype))
                return new_state, env.step(env_state), out

            return rollout(step, state, env_state, key, T)

        out = jit(points)(learner.init(hp), env_state, key)
        if draws:
            out.update({f"env_{k}": getattr(env_state, k) for k in ENV_FIELDS})
        return out

    return run


ENV_FIELDS = ("base", "u", "v", "amplitude", "omega")  # the drift c_t of bco_losses.quadratic


def _two_point(schedule, factory=tp.two_point_learner, **kw):
    return (
        lambda: factory(dim=BCO_DIM, schedule=schedule),
        lambda learner, domain: learner.hyperparams(domain, horizon=T, delta=BCO_DELTA, **kw),
    )


def _box():
    lo, hi = -np.ones(BCO_DIM), np.ones(BCO_DIM)
    return (
        lambda: op.box_ftrl(dim=BCO_DIM),
        lambda learner, domain: learner.hyperparams(
            0.1, lo.astype(domain.radius.dtype), hi.astype(domain.radius.dtype)
        ),
    )  # fmt: skip


BCO: dict[str, tuple[Callable, Callable]] = {
    "alg1-variance": _two_point("variance"),
    "alg1-strongly-convex": _two_point("strongly_convex", lam=1.0),
    "alg4-box-ftrl": _box(),
    "alg5-dynamic": (
        lambda: ens.dynamic_ensemble(dim=BCO_DIM),
        lambda learner, domain: learner.hyperparams(
            domain, horizon=T, delta=BCO_DELTA, preset="practical"
        ),
    ),
    "alg6-universal": (
        lambda: ens.universal_ensemble(dim=BCO_DIM),
        lambda learner, domain: learner.hyperparams(
            domain, horizon=T, delta=BCO_DELTA, lipschitz=2.0, preset="practical"
        ),
    ),
}

# Algorithm 3 draws its direction in the state's dtype, so a float64 learner would draw others:
# only a reference on the float32 run's own draws can be its float64 side.
SPHERE = ("alg3-sphere", "variance")
BCO[SPHERE[0]] = _two_point(SPHERE[1], tp.sphere_learner)


def _coordinate(key, aux, dtype):  # Algorithms 1 and 6: i_t
    return {"coord": aux.i}


def _coordinate_and_sign(key, aux, dtype):  # Algorithm 4: (i_t, eps_t)
    return {"coord": aux.coord, "sign": aux.sign}


def _normal(key, aux, dtype):  # Algorithm 3: z_t (u_t = z_t / ||z_t||), in the run's dtype
    return {"normal": jax.random.normal(key, (BCO_DIM,), dtype)}


# The draws a case records for its numpy reference (tests/precision_references.py).
DRAWS: dict[str, Callable] = {
    "alg1-variance": _coordinate,
    "alg1-strongly-convex": _coordinate,
    "alg4-box-ftrl": _coordinate_and_sign,
    "alg6-universal": _coordinate,
    SPHERE[0]: _normal,
}

CASES: dict[str, Run] = {
    **{name: _mlogb_case(name, K, d, f, h) for name, (K, d, f, h) in MLOGB.items()},
    **{name: _bco_case(name, f, h, DRAWS.get(name)) for name, (f, h) in BCO.items()},
}


def run_all(dtype, jit=jax.jit) -> dict[str, np.ndarray]:
    """Every case's trajectory in ``dtype``, flattened to ``"case/field"`` keys."""
    out = {}
    for name, case in CASES.items():
        for field, value in case(dtype, jit).items():
            out[f"{name}/{field}"] = np.asarray(value)
    return out


def main(argv: list[str]) -> None:
    """``OUT.npz``: every case in float32, x64 off, as a user's program runs them.
    ``OUT.npz --x64 NAME...``: the named cases in float64 (x64 on, no ``XLA_FLAGS``: what
    ``tests/xla_defaults.py`` claims to reproduce)."""
    out, *rest = argv
    if rest and rest[0] == "--x64":
        jax.config.update("jax_enable_x64", True)
        runs = {f"{n}/{k}": np.asarray(v) for n in rest[1:] for k, v in
                CASES[n](jnp.float64, jax.jit).items()}  # fmt: skip
    else:
        assert not jax.config.jax_enable_x64, "run without JAX_ENABLE_X64"
        runs = run_all(jnp.float32)
    np.savez(out, **runs)


if __name__ == "__main__":
    main(sys.argv[1:])
