"""The library's LinUCB against a standard LinUCB with an appended constant feature.

Section 4's synthetic stream with K = 1, d = 20, S = 1 (``envs.synthetic_mlogb``), T = 2000:
the library LinUCB without an intercept (``intercept=False``), with one (the default), and the
plain-numpy standard LinUCB of :mod:`references.linucb_numpy` on ``[x, 1]``. Each is
tuned over the same (lam, alpha) grid by mean final regret on tuning seeds 0-2 and reported at its
tuned point on evaluation seeds 10000-10009 (final regret mean +- standard error)::

    python -m benchmarks.linucb_standard --json docs/bench/linucb_standard.json

``--quick`` (T = 300, a 3 x 3 grid, 2 evaluation seeds) checks the script end to end. float64.

The library learners run in the runner (``make_rollout(interact(...), trials=True, grid=True)``,
the whole grid in one compiled call). The numpy learner plays a recorded copy of the same streams:
the runner plays a recording step that splits each round's key as ``interact`` does and keeps the
action set and mask (``env.observe``), the outcome each action would draw if chosen
(``env.outcome`` with the round's key, vmapped over the actions) and the expected rewards
(``env.expected_rewards``). The recording is checked against the library runs: at every round of
every evaluation run, the library's observed outcome and expected reward are the recorded ones
of its choice; and the numpy learner's choices are compared with the library's (with intercept)
at the same grid point.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks._device import add_device_option, select_device
from benchmarks._report import finish

K, DIM, S = 1, 20, 1.0
TUNE_SEEDS = (0, 1, 2)
EVAL_SEEDS = tuple(range(10_000, 10_010))
LAMS = (0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0)
ALPHAS = (0.0, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0)
LABELS = {
    "nointercept": "library LinUCB, no intercept",
    "intercept": "library LinUCB, intercept",
    "standard": "numpy standard LinUCB, [x, 1]",
}


def _stats(final: np.ndarray) -> dict:
    n = final.size
    se = float(final.std(ddof=1) / np.sqrt(n)) if n > 1 else 0.0
    return {"final_regret_mean": float(final.mean()), "final_regret_se": se}


def run(T: int, lams, alphas, tune_seeds, eval_seeds) -> dict:
    import jax
    import jax.numpy as jnp

    from bandits_jax import envs, mlogb
    from bandits_jax.mlogb.linucb import linucb_hyperparams
    from bandits_jax.sim import make_rollout, sweep
    from bandits_jax.status import REJECTED_CODES
    from references import linucb_numpy

    env = envs.synthetic_mlogb(num_outcomes=K, dim=DIM, S=S)
    lam_g, alpha_g = (a.ravel() for a in np.meshgrid(lams, alphas, indexing="ij"))
    grid_hp = linucb_hyperparams(lam=lam_g, alpha=alpha_g, rewards=[1.0])
    G = lam_g.size

    def record_step(ls, es, key):
        k_obs, k_out = jax.random.split(key)  # as interact splits it
        es, actions, mask = env.observe(es, k_obs)
        outcomes = jax.vmap(lambda a: env.outcome(es, a, k_out))(actions)
        return ls, es, (actions, mask, outcomes, env.expected_rewards(es, actions))

    record = make_rollout(record_step, T, trials=True)

    def streams(seeds):
        env_keys, run_keys = sweep.seed_keys(list(seeds))
        env_states = jax.vmap(env.init)(env_keys)
        rec = record(jnp.zeros(()), env_states, run_keys)
        return env_states, run_keys, tuple(np.asarray(a) for a in rec)

    out: dict = {"timings_s": {}}
    finals: dict = {}  # name -> {"tune": (G, n_tune), "eval": (G, n_eval)} final regrets
    metrics_eval: dict = {}
    data = {"tune": streams(tune_seeds), "eval": streams(eval_seeds)}
    for name, intercept in (("nointercept", False), ("intercept", True)):
        learner = mlogb.linucb(num_outcomes=K, dim=DIM, intercept=intercept)
        roll = make_rollout(mlogb.interact(learner, env), T, trials=True, grid=True)
        states = jax.vmap(learner.init)(grid_hp)
        finals[name] = {}
        t0 = time.perf_counter()
        for split, (env_states, run_keys, _) in data.items():
            m = roll(states, env_states, run_keys)
            finals[name][split] = np.asarray(m.regret).sum(axis=-1)
            if split == "eval":
                metrics_eval[name] = {
                    "choice": np.asarray(m.choice),
                    "y": np.asarray(m.y),
                    "reward": np.asarray(m.reward),
                    "status": np.asarray(m.status),
                }
        out["timings_s"][name] = time.perf_counter() - t0

    # The numpy standard LinUCB on the recorded streams: the grid on the tuning seeds, then its
    # tuned point on the evaluation seeds.
    def play_numpy(g, rec, i):
        learner = linucb_numpy.NumpyLinUCB(
            dim=DIM, lam=float(lam_g[g]), alpha=float(alpha_g[g]), rewards=[1.0], intercept=True
        )
        return linucb_numpy.play(learner, *(a[i] for a in rec))

    t0 = time.perf_counter()
    rec_tune = data["tune"][2]
    std_tune = np.array(
        [[play_numpy(g, rec_tune, i)["regret"].sum() for i in range(len(tune_seeds))]
         for g in range(G)]
    )  # fmt: skip
    g_std = int(np.argmin(std_tune.mean(axis=1)))
    rec_eval = data["eval"][2]
    std_eval_runs = [play_numpy(g_std, rec_eval, i) for i in range(len(eval_seeds))]
    out["timings_s"]["standard"] = time.perf_counter() - t0
    finals["standard"] = {"tune": std_tune}
    std_eval = np.array([r["regret"].sum() for r in std_eval_runs])

    # Checks: the recording is the stream the library played; numpy and library choices agree.
    actions, mask, outcomes, expected = rec_eval
    rows = np.arange(T)
    consistent = True
    for m in metrics_eval.values():
        for g in range(G):
            for i in range(len(eval_seeds)):
                c = m["choice"][g, i]
                consistent &= bool(np.array_equal(outcomes[i, rows, c], m["y"][g, i]))
                consistent &= bool(np.allclose(expected[i, rows, c], m["reward"][g, i], 0, 1e-12))
    same = np.mean(
        [np.mean(r["choice"] == metrics_eval["intercept"]["choice"][g_std, i])
         for i, r in enumerate(std_eval_runs)]
    )  # fmt: skip

    learners = {}
    for name in ("nointercept", "intercept", "standard"):
        tune_mean = finals[name]["tune"].mean(axis=1)
        g = int(np.argmin(tune_mean))
        final = std_eval if name == "standard" else finals[name]["eval"][g]
        learners[name] = {
            "label": LABELS[name],
            "lam": float(lam_g[g]),
            "alpha": float(alpha_g[g]),
            "tuning_final_regret_mean": float(tune_mean[g]),
            "tuning_grid_final_regret_mean": tune_mean.reshape(len(lams), len(alphas)).tolist(),
            "eval_final_regret": final.tolist(),
            **_stats(final),
        }
        if name != "standard":  # the whole grid on the evaluation seeds (not a tuned figure)
            ev = finals[name]["eval"].mean(axis=1)
            learners[name]["eval_grid_final_regret_mean"] = ev.reshape(
                len(lams), len(alphas)
            ).tolist()
            learners[name]["eval_grid_mean_of_means"] = float(ev.mean())
            learners[name]["eval_grid_best_mean"] = float(ev.min())
            learners[name]["rejected_updates"] = int(
                np.isin(metrics_eval[name]["status"][g], list(REJECTED_CODES)).sum()
            )
    std_mean = learners["standard"]["final_regret_mean"]
    out.update(
        {
            "learners": learners,
            "ratio_to_standard": {
                n: learners[n]["final_regret_mean"] / std_mean for n in ("nointercept", "intercept")
            },
            "checks": {
                "recording_matches_library_runs": consistent,
                "standard_same_choice_as_library_intercept": float(same),
            },
        }
    )
    return out


def table(r: dict) -> str:
    lines = [
        "| learner | tuned lam | tuned alpha | final regret (mean +- se) | / standard |",
        "|---|---|---|---|---|",
    ]
    for name, s in r["learners"].items():
        ratio = r["ratio_to_standard"].get(name, 1.0)
        lines.append(
            f"| {s['label']} | {s['lam']:g} | {s['alpha']:g} | "
            f"{s['final_regret_mean']:.1f} +- {s['final_regret_se']:.1f} | {ratio:.3f} |"
        )
    lines.append("")
    for name in ("nointercept", "intercept"):
        s = r["learners"][name]
        lines.append(
            f"{s['label']}, evaluation seeds over the whole grid (not tuned): mean "
            f"{s['eval_grid_mean_of_means']:.1f}, best point {s['eval_grid_best_mean']:.1f}"
        )
    c = r["checks"]
    lines.append(
        f"recording matches the library runs: {c['recording_matches_library_runs']}; "
        f"standard's choices equal the library (intercept) at its tuned point in "
        f"{100 * c['standard_same_choice_as_library_intercept']:.2f}% of rounds"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", default=None, help="write the results here")
    p.add_argument("--quick", action="store_true", help="T = 300, 3 x 3 grid, 2 evaluation seeds")
    add_device_option(p)
    a = p.parse_args(argv)
    select_device(a)
    import jax

    jax.config.update("jax_enable_x64", True)
    if a.quick:
        T, lams, alphas, ev = 300, (0.03, 0.3, 3.0), (0.0, 0.1, 1.0), EVAL_SEEDS[:2]
    else:
        T, lams, alphas, ev = 2000, LAMS, ALPHAS, EVAL_SEEDS
    t0 = time.perf_counter()
    r = run(T, lams, alphas, TUNE_SEEDS, ev)
    config = {
        "num_outcomes": K,
        "dim": DIM,
        "S": S,
        "rounds": T,
        "lam_grid": list(lams),
        "alpha_grid": list(alphas),
        "tuning_seeds": list(TUNE_SEEDS),
        "eval_seeds": list(ev),
        "dtype": "float64",
        "quick": a.quick,
    }
    r = {"benchmark": "linucb_standard", "config": config, **r}
    r["wall_s"] = time.perf_counter() - t0
    print(table(r))
    return finish(r, a.json)


if __name__ == "__main__":
    main()
