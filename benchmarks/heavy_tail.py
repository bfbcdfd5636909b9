"""Every MLogB learner on heavy-tailed action streams (Wen et al.'s Frequent-Directions pitfall).

Streams (K = 1, d = 200 by default, ``||W*||_F = S``, 10-30 unit actions a round): the
heavy-tailed stream :func:`bandits_jax.envs.heavy_tail_mlogb` at ``decay`` 1 and 0.5 (action
covariance eigenvalues about ``i^-decay``, exactly :func:`~bandits_jax.envs.heavy_tail_mlogb.
action_spectrum`), and Section 4's isotropic stream :func:`bandits_jax.envs.synthetic_mlogb` as
the control (the same ``W*`` per trial: both envs draw it alike from the trial's key; its flat
spectrum puts 90% of the trace beyond m = 20, more than either heavy tail). ``--streams`` also
takes ``lowrank-<r>`` (:func:`bandits_jax.envs.lowrank_mlogb`, noise 0.1), FD's favourable case.

Learners: every kind of :data:`bandits_jax.mlogb.recipes.KINDS` at its known-bound recipe
(``mlogb.tuned(kind, num_outcomes=1, dim=d, S=S, horizon=T)``). The EOFD kinds use Section 4's
``m = floor(K d / 10)`` (20 at d = 200; the header's share beyond m is for it), buffered EOFD its
own (``recipes.sketch_size``; each row records its ``sketch_size``).

``--kinds`` also takes ``eofd-robust-grow`` (:data:`EXTRA`): robust EOFD whose rank grows to K d
to keep ``Delta_t <= 2``, the existing adaptive option without its ``2 m`` cap.

Per (stream, learner), over the trials (seeds 0..n-1; trial key ``jax.random.key(seed)``,
split into the env's and the run's; the same keys for every learner and stream): the final
cumulative regret (mean +- standard error), the regret at T/2 and the growth ratio
``R(T) / R(T/2)`` (2 for a learner whose regret is linear in T, ``sqrt 2 = 1.41`` for
``sqrt T``), the mean regret curve every ``T/20`` rounds, for the sketched kinds the sketch
error ``rho``, ``Delta = confidence.delta_factor(rho, lam, robust)`` and the active rank at the
same rounds, the statuses, and milliseconds per round of the compiled batch (all trials in one
vmapped call; compile excluded, timed separately), on one thread (``configure_threads()``, as
the commands do; at d = 200 a multi-threaded LAPACK on a busy 2-core machine was 100x slower).
float64::

    python -m benchmarks.heavy_tail --out docs/bench/heavy_tail.json
    python -m benchmarks.heavy_tail --rounds 200 --trials 2 --kinds eofd-robust,oful  # quick
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time

import jax
import numpy as np

from benchmarks._report import finish

STREAMS = ("heavy-a1", "heavy-a0.5", "synth")  # decay 1, decay 0.5, isotropic control
POINTS = 20  # curve checkpoints


def make_env(stream: str, dim: int, S: float):
    """The stream's environment (module docstring)."""
    from bandits_jax import envs

    if stream == "synth":
        return envs.synthetic_mlogb(num_outcomes=1, dim=dim, S=S)
    if stream.startswith("lowrank-"):  # FD's favourable case: actions near a rank-r subspace
        return envs.lowrank_mlogb(num_outcomes=1, dim=dim, rank=int(stream[8:]), S=S)
    if not stream.startswith("heavy-a"):
        raise ValueError(
            f"stream must be one of {STREAMS}, heavy-a<decay> or lowrank-<r>, got {stream!r}"
        )
    return envs.heavy_tail_mlogb(num_outcomes=1, dim=dim, decay=float(stream[7:]), S=S)


# Rows beyond the registry: kind -> (label, the registry kind whose recipe point it uses).
EXTRA = {
    # Robust EOFD whose active rank grows (from m, up to K d) to keep Delta_t <= 2: the
    # existing adaptive option (eofd(max_sketch_size=, delta_target=)) without its 2 m cap.
    "eofd-robust-grow": ("EOFD robust, rank grows to K d (Delta <= 2)", "eofd-robust"),
}


def label(kind: str) -> str:
    """The row's label (the registry's, or :data:`EXTRA`'s)."""
    from bandits_jax.mlogb import recipes

    return EXTRA[kind][0] if kind in EXTRA else recipes.REGISTRY[kind].label


def sketched(kind: str) -> bool:
    from bandits_jax.mlogb import recipes

    return kind in EXTRA or recipes.REGISTRY[kind].sketched


def make_recipe(kind: str, dim: int, S: float, T: int):
    """``(learner, hparams)`` of a kind's known-bound recipe (:data:`EXTRA`: its base kind's
    hyperparameters with its own learner)."""
    from bandits_jax import mlogb
    from bandits_jax.mlogb.eofd import eofd

    if kind == "eofd-robust-grow":
        rec = mlogb.tuned("eofd-robust", num_outcomes=1, dim=dim, S=S, horizon=T)
        learner = eofd(num_outcomes=1, dim=dim, sketch_size=rec.sketch_size,
                       regularization="robust", max_sketch_size=dim, delta_target=2.0)  # fmt: skip
        return learner, rec.hparams

    rec = mlogb.tuned(kind, num_outcomes=1, dim=dim, S=S, horizon=T)
    return rec.learner, rec.hparams


def play(learner, hp, env, seeds: list[int], T: int):
    """Metrics ``(trials, T)`` of regret, rho, status and the sketch's active rank; seconds
    compiling and running."""
    from bandits_jax import mlogb
    from bandits_jax.sim import make_rollout

    keys = jax.vmap(jax.random.split)(jax.vmap(jax.random.key)(np.asarray(seeds)))
    k_env, k_run = keys[:, 0], keys[:, 1]
    env_states = jax.vmap(env.init)(k_env)
    run = make_rollout(mlogb.interact(learner, env), T, trials=True)

    def pick(ls, es, k):
        met = run(ls, es, k)
        return met.regret, met.rho, met.status, met.rank

    t0 = time.perf_counter()
    fn = jax.jit(pick).lower(learner.init(hp), env_states, k_run).compile()
    t1 = time.perf_counter()
    out = jax.block_until_ready(fn(learner.init(hp), env_states, k_run))
    t2 = time.perf_counter()
    return [np.asarray(a) for a in out], t1 - t0, t2 - t1


def summarise(kind: str, hp, robust, regret, rho, status, rank, T: int) -> dict:
    """The row of one (stream, learner) (module docstring); ``robust``: the sketched state's
    robust flag, None for a learner without a sketch."""
    from bandits_jax.mlogb import confidence
    from bandits_jax.status import count_status

    cum = np.cumsum(regret, axis=1)
    final, half = cum[:, -1], cum[:, T // 2 - 1]
    n = final.size
    at = np.unique(np.linspace(T / POINTS, T, POINTS).round().astype(int)) - 1
    row = {
        "kind": kind,
        "label": label(kind),
        "mean": float(final.mean()),
        "se": float(final.std(ddof=1) / np.sqrt(n)) if n > 1 else 0.0,
        "regret": final.tolist(),
        "half_mean": float(half.mean()),
        "growth": float(final.mean() / half.mean()) if half.mean() > 0 else float("nan"),
        "curve_rounds": (at + 1).tolist(),
        "curve_mean": cum[:, at].mean(axis=0).tolist(),
        "status": {k: v for k, v in count_status(status).items() if v},
    }
    if robust is not None:  # a sketched learner (its state's robust flag)
        row["robust_regularisation"] = robust
        row["lam"] = float(np.asarray(hp.lam))
        row["rho_mean"] = rho[:, at].mean(axis=0).tolist()
        delta = np.asarray(confidence.delta_factor(rho[:, at], hp.lam, robust))
        row["delta_mean"] = delta.mean(axis=0).tolist()
        row["rank_mean"] = rank[:, at].mean(axis=0).tolist()
    return row


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dim", type=int, default=200)
    p.add_argument("--S", type=float, default=8.0, help="||W*||_F (the recipes' known bound)")
    p.add_argument("--rounds", type=int, default=2000)
    p.add_argument("--trials", type=int, default=10, help="seeds 0 .. trials - 1")
    p.add_argument("--streams", default=",".join(STREAMS))
    p.add_argument("--kinds", default=None, help="comma-separated (default: every kind)")
    p.add_argument("--out", default=None, help="write the results here (JSON)")
    args = sys.argv[1:] if argv is None else list(argv)
    a = p.parse_args(args)
    from bandits_jax.cli import process

    process.configure_threads()  # one XLA thread on the least busy core (the commands' default)
    jax.config.update("jax_enable_x64", True)
    from bandits_jax.envs.heavy_tail_mlogb import action_spectrum
    from bandits_jax.mlogb import recipes

    kinds = recipes.KINDS if a.kinds is None else tuple(a.kinds.split(","))
    for kind in kinds:
        if kind not in recipes.REGISTRY and kind not in EXTRA:
            p.error(f"--kinds: unknown {kind!r}, expected some of {[*recipes.KINDS, *EXTRA]}")
    seeds = list(range(a.trials))
    m = recipes.sketch_size(1, a.dim)
    streams = []
    wall0 = time.perf_counter()
    for stream in a.streams.split(","):
        env = make_env(stream, a.dim, a.S)
        info = {"stream": stream, "rows": []}
        if stream.startswith("heavy-a"):
            mu = action_spectrum(a.dim, float(stream[7:]))
            info["decay"] = float(stream[7:])
            info["tail_share_beyond_m"] = float(mu[m:].sum())
        elif stream.startswith("lowrank-"):
            info["rank"] = int(stream[8:])  # noise 0.1: off-subspace share about 0.01
        else:
            info["decay"] = 0.0
            info["tail_share_beyond_m"] = float(1.0 - m / a.dim)
        share = info.get("tail_share_beyond_m", float("nan"))
        print(f"== {stream}: share of the action covariance's trace beyond m = {m}: "
              f"{share:.3f}", flush=True)  # fmt: skip
        for kind in kinds:
            learner, hp = make_recipe(kind, a.dim, a.S, a.rounds)
            (regret, rho, status, rank), comp, secs = play(learner, hp, env, seeds, a.rounds)
            state = learner.init(hp)
            robust = None  # EOFD's sketch statistics; buffered EOFD has no confidence set's Delta
            if sketched(kind) and hasattr(state, "robust"):
                robust = bool(np.asarray(state.robust))
            row = summarise(kind, hp, robust, regret, rho, status, rank, a.rounds)
            if sketched(kind):
                base = EXTRA[kind][1] if kind in EXTRA else kind
                row["sketch_size"] = recipes.sketch_size(1, a.dim, base)
            row["compile_s"] = comp
            row["ms_per_round"] = 1e3 * secs / a.rounds
            extra = ""
            if "delta_mean" in row:
                extra = (f"  rho {row['rho_mean'][-1]:8.1f}  Delta {row['delta_mean'][-1]:7.2f}"
                         f"  rank {row['rank_mean'][-1]:5.1f}")  # fmt: skip
            print(f"{kind:14s} regret {row['mean']:7.1f} ± {row['se']:5.1f}  "
                  f"R(T/2) {row['half_mean']:7.1f}  growth {row['growth']:4.2f}  "
                  f"{row['ms_per_round']:7.2f} ms/round (compile {comp:5.1f} s){extra}  "
                  f"{row['status']}", flush=True)  # fmt: skip
            info["rows"].append(row)
        streams.append(info)
    return finish(
        {
            "benchmark": "heavy_tail",
            "command": shlex.join(["python", "-m", "benchmarks.heavy_tail", *args]),
            "dim": a.dim,
            "num_outcomes": 1,
            "S": a.S,
            "rounds": a.rounds,
            "trials": a.trials,
            "seeds": seeds,
            "sketch_size": m,
            "dtype": "float64",
            "ms_per_round_means": "one round of the whole vmapped batch of trials",
            "wall_s": time.perf_counter() - wall0,
            "streams": streams,
        },
        a.out,
    )


if __name__ == "__main__":
    main()
