"""Every registry kind at its recipe, played as a user plays it: ``sim.make_rollout`` with vmapped
trials, in this process at XLA's default options (run by ``tests/test_no_hang.py`` in a
subprocess with no ``XLA_FLAGS``).

``python tests/rollout_cases.py [--x64] [--rounds T] [--trials N] [--only KIND:K:d,...]`` prints
``start <case>`` before each case and ``done <case> <json>`` after it (the json: seconds, mean
final regret and the status counts of every update and selection), flushed, so that a watcher
can name the case that never finished.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import jax

# (K, d): K = 1, K = 4 (d = 20: the size whose batched LAPACK calls deadlocked XLA's CPU pool),
# and K d > 128.
SIZES = ((1, 10), (4, 20), (2, 65))


def cases(only: str | None = None) -> list[tuple[str, int, int]]:
    """``(kind, K, d)`` for every registry kind at every size it is defined for."""
    from bandits_jax.mlogb import recipes

    if only:
        return [(k, int(K), int(d)) for k, K, d in (c.split(":") for c in only.split(","))]
    return [(kind, K, d) for K, d in SIZES for kind in recipes.KINDS
            if K == 1 or kind not in recipes.K1_ONLY]  # fmt: skip


def play(kind: str, K: int, d: int, rounds: int, trials: int) -> dict:
    """One case: ``trials`` vmapped trials of ``rounds`` rounds on Section 4's synthetic stream
    (unit-norm actions, ``||W*||_F = 4``)."""
    from bandits_jax import envs, mlogb, sim
    from bandits_jax.status import count_status

    env = envs.synthetic_mlogb(num_outcomes=K, dim=d, S=4.0)
    rec = mlogb.tuned(kind, num_outcomes=K, dim=d, S=4.0, horizon=rounds)
    run = sim.make_rollout(mlogb.interact(rec.learner, env), rounds, trials=True)
    keys = jax.random.split(jax.random.key(K * 1000 + d), trials)
    t0 = time.perf_counter()
    m = jax.block_until_ready(run(rec.learner.init(rec.hparams), jax.vmap(env.init)(keys), keys))
    return {
        "seconds": round(time.perf_counter() - t0, 2),
        "regret": float(m.regret.sum(-1).mean()),
        "status": count_status(m.status),
        "select_status": count_status(m.select_status),
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--x64", action="store_true")
    p.add_argument("--rounds", type=int, default=1000)
    p.add_argument("--trials", type=int, default=8)
    p.add_argument("--only", default=None, help="KIND:K:d,... instead of every case")
    a = p.parse_args(argv)
    jax.config.update("jax_enable_x64", a.x64)
    for kind, K, d in cases(a.only):
        name = f"{kind}:{K}:{d}"
        print("start", name, flush=True)
        print("done", name, json.dumps(play(kind, K, d, a.rounds, a.trials)), flush=True)


if __name__ == "__main__":
    sys.exit(main())
