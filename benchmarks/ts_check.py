"""A quick measured comparison (not tuning) of the Thompson sampling baselines with LinUCB.

``mlogb.lin_ts`` and ``mlogb.logistic_ts`` (diagonal and full covariance) at a few fixed
``(lam, v)`` points against LinUCB at its recipe (``mlogb.tuned("linucb", ...)``) on two K = 1
problems, T rounds (default 1000), the same 5 environment keys for every row:

- ``synthetic``: Section 4's synthetic stream, K = 1, d = 20, S = 1 (``envs.synthetic_mlogb``;
  LinUCB at ``tuned(..., S=1)``);
- ``digits``: scikit-learn's digits, rewarded class 1 (``envs.digits(target=1)``, d = 65; LinUCB
  at ``tuned(..., S=None)``, no known bound).

Run i uses environment key i and Thompson seed i (one sampling seed per run). A learner's points
and runs play in one compiled call. Per row: final regret mean +- standard deviation over the
runs, the runs, the statuses of the updates, and milliseconds per round of the learner's whole
batch (compile excluded). float64::

    python -m benchmarks.ts_check --out docs/bench/ts_check.json
"""

from __future__ import annotations

import argparse
import itertools
import time

import jax
import numpy as np

from benchmarks._report import finish

SEED = 10_000
# Fixed points, not tuned: the ridge of LinUCB's recipe and a unit one; v from a tenth to one.
LIN_TS_V = (0.1, 0.3, 1.0)
LOGISTIC_TS_POINTS = tuple(itertools.product((0.1, 1.0), (0.1, 0.3, 1.0)))  # (lam, v)


def groups(problem: str, dim: int, T: int):
    """``[(name, learner, [(label, point)], build)]``: a problem's rows by learner (a learner's
    points play in one compiled call); ``build(point, seeds)`` gives the point's hyperparameters
    with a leading run axis, Thompson seed i for run i."""
    from bandits_jax import mlogb
    from bandits_jax.mlogb.lin_ts import lin_ts_hyperparams
    from bandits_jax.mlogb.logistic_ts import logistic_ts_hyperparams

    rec = mlogb.tuned("linucb", num_outcomes=1, dim=dim, S=1.0 if problem == "synthetic" else None,
                      horizon=T)  # fmt: skip
    lam_ucb = float(rec.hparams.lam)
    label = f"linucb (recipe: lam {lam_ucb:.3g}, alpha {float(rec.hparams.alpha):.3g})"

    def ucb_hp(point, seeds):  # the recipe's one point for every run
        return jax.tree.map(lambda x: np.broadcast_to(np.asarray(x), (seeds.size, *x.shape)),
                            rec.hparams)  # fmt: skip

    out = [("linucb", rec.learner, [(label, None)], ucb_hp)]
    lin_points = [(f"lin_ts lam {lam:.3g} v {v:g}", (lam, v))
                  for lam, v in itertools.product((lam_ucb, 1.0), LIN_TS_V)]  # fmt: skip
    out.append(("lin_ts", mlogb.lin_ts(num_outcomes=1, dim=dim), lin_points,
                lambda point, seeds: lin_ts_hyperparams(lam=point[0], v=point[1],
                                                        seed=seeds)))  # fmt: skip
    for cov in ("diagonal", "full"):
        points = [(f"logistic_ts {cov} lam {lam:g} v {v:g}", (lam, v))
                  for lam, v in LOGISTIC_TS_POINTS]  # fmt: skip
        learner = mlogb.logistic_ts(num_outcomes=1, dim=dim, covariance=cov)
        out.append((f"logistic_ts-{cov}", learner, points,
                    lambda point, seeds: logistic_ts_hyperparams(
                        lam=point[0], v=point[1], seed=seeds)))  # fmt: skip
    return out


def play(learner, hp, env, problem: str, keys: jax.Array, T: int):
    """``(final regret per run, statuses (runs, T), seconds of the compiled call)``; ``hp`` and
    ``keys`` have a leading run axis."""
    from bandits_jax import mlogb
    from bandits_jax.sim import make_rollout

    step = mlogb.interact(learner, env)
    start = (lambda key: env.init_target(key, 1)) if problem == "digits" else env.init

    def one(h, key):
        metrics = make_rollout(step, T)(learner.init(h), start(key), key)
        return metrics.regret.sum(), metrics.status

    run = jax.jit(jax.vmap(one)).lower(hp, keys).compile()  # compiled ahead: timed alone
    t0 = time.perf_counter()
    regret, status = jax.block_until_ready(run(hp, keys))
    return np.asarray(regret), np.asarray(status), time.perf_counter() - t0


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=1000)
    p.add_argument("--seeds", type=int, default=5, help="runs per row")
    p.add_argument("--problems", default="synthetic,digits")
    p.add_argument("--out", default=None, help="write the results here (JSON)")
    a = p.parse_args(argv)
    jax.config.update("jax_enable_x64", True)
    from bandits_jax import envs
    from bandits_jax.status import count_status

    keys = jax.random.split(jax.random.key(SEED), a.seeds)
    seeds = np.arange(a.seeds)
    t_start = time.perf_counter()
    out = []
    for problem in a.problems.split(","):
        if problem == "synthetic":
            env = envs.synthetic_mlogb(num_outcomes=1, dim=20, S=1.0)
        elif problem == "digits":
            env = envs.digits(target=1)
        else:
            raise ValueError(f"--problems: synthetic or digits, got {problem!r}")
        for name, learner, points, build in groups(problem, env.dim, a.rounds):
            # Every (point, run) of the learner in one call: point-major, run i with key i.
            hp = jax.tree.map(lambda *xs: np.concatenate(xs),
                              *[build(pt, seeds) for _, pt in points])  # fmt: skip
            all_keys = jax.numpy.concatenate([keys] * len(points))
            regret, status, seconds = play(learner, hp, env, problem, all_keys, a.rounds)
            for j, (label, _) in enumerate(points):
                runs = slice(j * a.seeds, (j + 1) * a.seeds)
                r = regret[runs]
                counts = {k: v for k, v in count_status(status[runs]).items() if v}
                row = {"problem": problem, "learner": name, "row": label, "mean": float(r.mean()),
                       "std": float(r.std(ddof=1)) if r.size > 1 else 0.0, "regret": r.tolist(),
                       "status": counts,
                       "ms_per_round_batch": 1e3 * seconds / a.rounds,
                       "runs_in_batch": int(regret.size)}  # fmt: skip
                print(f"{problem:9s} {label:44s} regret {row['mean']:7.1f} ± {row['std']:5.1f}  "
                      f"{counts}", flush=True)  # fmt: skip
                out.append(row)
            print(f"  ({name}: {regret.size} runs in {seconds:.1f} s, compile excluded)")
    return finish(
        {
            "benchmark": "ts_check",
            "rounds": a.rounds,
            "seeds": a.seeds,
            "dtype": "float64",
            "wall_seconds": time.perf_counter() - t_start,
            "rows": out,
        },
        a.out,
    )


if __name__ == "__main__":
    main()
