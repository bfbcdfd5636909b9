"""Sanity check of the exact-fit learner (``mlogb.exact``) against LinUCB and OFUL-MLogB on digits.

scikit-learn's digits, Section 4's K = 1 protocol (ten candidates a round, one per class; the
rewarded class pays 1), one rewarded class, a few keys, T rounds (default: class 1, the tuning
half of the examples, 3 keys, T = 300). Rows, all on the same streams (the same keys):

- the exact fit, greedy (``beta = 0``) and with fixed radii, at a weak and a unit ridge (fixed
  points, not tuned: ``lam = 1e-4`` is :data:`benchmarks.mlogb_digits_causes.MLE_LAM`);
- LinUCB and OFUL-MLogB at their recipes with no known bound (``mlogb.tuned(kind, S=None)``).

Per row: final regret mean +- standard error over the keys, the per-key regrets, the fits'
statuses, and milliseconds per round of the batch (the compiled call, compile excluded). float64::

    python -m benchmarks.exact_fit_check
    python -m benchmarks.exact_fit_check --rounds 2000 --seeds 5 --json out.json
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

from benchmarks._report import finish

SEED = 10_000
EXACT_POINTS = ((1e-4, 0.0), (1e-4, 0.01), (1.0, 0.0), (1.0, 0.1))  # (lam, beta)


def rows(dim: int, T: int) -> list[tuple[str, object, object]]:
    """``(label, learner, hparams)`` of every row (module docstring)."""
    from bandits_jax import mlogb
    from bandits_jax.mlogb.exact import exact, exact_hyperparams

    ex = exact(num_outcomes=1, dim=dim, horizon=T)
    out = [(f"exact lam {lam:g} beta {beta:g}", ex, exact_hyperparams(lam=lam, beta=beta))
           for lam, beta in EXACT_POINTS]  # fmt: skip
    for kind in ("linucb", "oful"):
        rec = mlogb.tuned(kind, num_outcomes=1, dim=dim, S=None, horizon=T)
        out.append((f"{kind} (recipe, S = None)", rec.learner, rec.hparams))
    return out


def play(learner, hp, env, target: int, keys: jax.Array, T: int):
    """``(final regret per key, statuses (keys, T), seconds of a compiled call)``."""
    from bandits_jax import mlogb
    from bandits_jax.sim import make_rollout

    step = mlogb.interact(learner, env)

    def one(key):
        metrics = make_rollout(step, T)(learner.init(hp), env.init_target(key, target), key)
        return metrics.regret.sum(), metrics.status

    run = jax.jit(jax.vmap(one)).lower(keys).compile()  # compiled ahead: timed alone below
    start = time.perf_counter()
    regret, status = jax.block_until_ready(run(keys))
    return np.asarray(regret), np.asarray(status), time.perf_counter() - start


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=300)
    p.add_argument("--seeds", type=int, default=3, help="keys (runs) per row")
    p.add_argument("--target", type=int, default=1, help="the rewarded class")
    p.add_argument("--half", type=int, default=0, choices=(0, 1),
                   help="0: even-indexed examples (tuning), 1: odd-indexed (reported)")  # fmt: skip
    p.add_argument("--json", default=None, help="write the results here")
    a = p.parse_args(argv)
    jax.config.update("jax_enable_x64", True)
    from bandits_jax import envs
    from bandits_jax.status import count_status

    env = envs.digits(target=a.target, half=a.half)
    keys = jax.random.split(jax.random.key(SEED), a.seeds)
    out = []
    for label, learner, hp in rows(env.dim, a.rounds):
        regret, status, seconds = play(learner, hp, env, a.target, keys, a.rounds)
        se = float(regret.std(ddof=1) / np.sqrt(regret.size)) if regret.size > 1 else 0.0
        counts = {k: v for k, v in count_status(status).items() if v}
        row = {"row": label, "mean": float(regret.mean()), "se": se,
               "regret": regret.tolist(), "status": counts,
               "ms_per_round": 1e3 * seconds / a.rounds}  # fmt: skip
        print(f"{label:28s} regret {row['mean']:7.1f} ± {se:5.1f}  "
              f"runs {np.round(regret, 1).tolist()}  {row['ms_per_round']:6.2f} ms/round  "
              f"{counts}", flush=True)  # fmt: skip
        out.append(row)
    return finish(
        {
            "benchmark": "exact_fit_check",
            "rounds": a.rounds,
            "seeds": a.seeds,
            "target": a.target,
            "half": a.half,
            "dtype": "float64",
            "rows": out,
        },  # fmt: skip
        a.json,
    )


if __name__ == "__main__":
    main()
