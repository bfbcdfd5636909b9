"""Regret of Algorithm 1 vs the dimension d and vs the gradient variation V_T (BCO paper, Table 1,
Theorems 1-4 and 8), next to the Chiang et al. 2013 strongly convex rate and the sphere-estimator
baseline (Algorithm 3). The paper has no experiments; this script measures its claims.

Run as ``python -m benchmarks.bco_dimension`` (``--quick`` for a short run, ``--json PATH`` for the
figures, ``--out DIR`` for the PNG). float64. Every run goes through the shared runner
(``bandits_jax.sim.runner.make_rollout``: rounds in ``lax.scan``, seeds and V_T-grid points by
``vmap``); regret is the static regret against the best fixed point in hindsight
(``bandits_jax.bco.interact.summarize``), loss charged = mean of the two queried values.

Families (benign: the optimum lies on the boundary of the unit ball with a non-zero gradient):

* convex: linear losses ``<l_t, x>``, ``||l|| ~ 1``, ``l_t = b + 0.5 (cos(w t) u + sin(w t) v)``;
* strongly convex: quadratics ``1/2 ||x - c_t||^2`` (lambda = 1), ``||b|| = 2`` (centre outside
  the ball), ``c_t = b + 0.5 (cos(w t) u + sin(w t) v)``.

The d sweep uses a slow drift (``w = 0.2 / T``: a 0.2 rad rotation over the run, ``V_T ~ 1e-5``;
a faster rotation lets the learners track the sequence and beat the fixed comparator, i.e.
negative static regret); the V_T sweep fixes ``d`` and
varies the amplitude ``a`` of a fast oscillation (``w = 2``, period ~3 rounds: ``V_T ~ 2.8 a^2 T``;
the learners cannot track it, so static regret stays meaningful) and adds an i.i.d.-noise point
(``noise = 0.3``, no drift). Learners (schedules in ``bco.schedules``):

* convex: Algorithm 1 with Theorem 3/4's ``R / sqrt(d^2 + Vbar)`` (``alg1_thm3``, the practical
  convex preset), Algorithm 1 with Theorem 1's constants (``alg1_thm1``), Algorithm 3 with the
  classical ``R / (G sqrt(d t))`` (``sphere``);
* strongly convex: Algorithm 1 with ``1 / (lambda t)`` (``alg1_thm2``), Algorithm 1 with the
  reconstructed Chiang et al. 2013 rate ``1 / (lambda (1 + Vbar / (4 d^2 G^2)))``
  (``chiang2013``), Algorithm 3 with ``1 / (lambda t)`` (``sphere_thm8``).

Printed: mean +- std over seeds of the final regret per d / per V_T point, and the least-squares
slope of log(mean regret) on log d (resp. log V_T). Theory: regret ~ d^1.5 sqrt(V_T) (Thm 1),
d sqrt(W_T + d) (Thm 3), d log V_T / lambda (Thm 2) vs Chiang's d^2 / lambda.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from bandits_jax.bco import interact as bint  # noqa: E402
from bandits_jax.bco import two_point as tp  # noqa: E402
from bandits_jax.envs import bco_losses as bl  # noqa: E402
from bandits_jax.sim.runner import make_rollout  # noqa: E402

AMPLITUDE = 0.5
SLOW_ANGLE = 0.2  # total rotation of the slow drift over the horizon (omega = SLOW_ANGLE / T)
FAST_OMEGA = 2.0

# name -> (learner factory, schedule, hyperparameter extras)
CONVEX_LEARNERS = {
    "alg1_thm3": (tp.two_point_learner, "variance", {}),
    "alg1_thm1": (tp.two_point_learner, "convex", {}),
    "sphere": (tp.sphere_learner, "sqrt_t", {}),
}
SC_LEARNERS = {
    "alg1_thm2": (tp.two_point_learner, "strongly_convex", {"lam": 1.0}),
    "chiang2013": (tp.two_point_learner, "chiang", {"lam": 1.0}),
    "sphere_thm8": (tp.sphere_learner, "strongly_convex", {"lam": 1.0}),
}


def make_env(family: str, d: int, T: int, noise: float = 0.0) -> bl.BCOEnv:
    omega = SLOW_ANGLE / T
    if family == "convex":
        return bl.linear(d, base_norm=1.0, amplitude=AMPLITUDE, omega=omega, noise=noise)
    return bl.quadratic(d, lam=1.0, base_norm=2.0, amplitude=AMPLITUDE, omega=omega, noise=noise)


def run_family(env, learners, T, es0, keys, lipschitz=None):
    """Final regret and V_T per learner for a batch of env states (one compiled call each).

    ``lipschitz`` overrides ``env.lipschitz`` in the hyperparameters (the V_T sweep uses the
    noise-free family's G for every grid point, so the learners are the same as in the d sweep).
    """
    G = env.lipschitz if lipschitz is None else lipschitz
    summ = jax.jit(jax.vmap(lambda e, m: bint.summarize(env, e, m, T)))
    out = {}
    for name, (factory, kind, extra) in learners.items():
        learner = factory(env.d, schedule=kind)
        hp = learner.hyperparams(
            env.domain,
            horizon=T,
            smoothness=env.smoothness,
            lipschitz=G,
            **extra,
        )
        run = make_rollout(bint.interact(learner, env), T, trials=True)
        metrics = run(learner.init(hp, None), es0, keys)
        s = summ(es0, metrics)
        out[name] = {
            "regret": np.asarray(s["regret"]),
            "V_T": np.asarray(s["V_T"]),
            "F_T": np.asarray(s["F_T"]),
            "num_nonfinite": int(np.sum(s["num_failures"])),
            "all_in_domain": bool(np.all(s["all_in_domain"])),
            "best_point_ok": bool(np.all(np.asarray(s["best_point_status"]) == 0)),
        }
    return out


def loglog_slope(x, y):
    """Least-squares slope of log y on log x over the points with x, y > 0 (NaN if < 2)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = (x > 0) & (y > 0) & np.isfinite(y)
    if ok.sum() < 2:
        return float("nan")
    return float(np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)[0])


def dimension_sweep(dims, T, seeds):
    res = {}
    for family, learners in (("convex", CONVEX_LEARNERS), ("strongly_convex", SC_LEARNERS)):
        per = {name: {"d": [], "mean": [], "std": [], "regret": [], "V_T": []} for name in learners}
        for d in dims:
            env = make_env(family, d, T)
            es0 = jax.vmap(env.init)(jax.random.split(jax.random.key(d), seeds))
            keys = jax.random.split(jax.random.key(1000 + d), seeds)
            out = run_family(env, learners, T, es0, keys)
            for name, o in out.items():
                assert o["all_in_domain"] and o["num_nonfinite"] == 0 and o["best_point_ok"], name
                p = per[name]
                p["d"].append(d)
                p["mean"].append(float(o["regret"].mean()))
                p["std"].append(float(o["regret"].std(ddof=1)) if seeds > 1 else 0.0)
                p["regret"].append(o["regret"].tolist())
                p["V_T"].append(float(o["V_T"].mean()))
        for p in per.values():
            p["slope_vs_d"] = loglog_slope(p["d"], p["mean"])
        res[family] = per
    return res


def variation_sweep(d, T, seeds, amplitudes, noise):
    """Regret vs V_T at fixed d: the grid points (drift amplitudes at the fast frequency
    ``FAST_OMEGA``, plus an i.i.d.-noise point) and the seeds are one flattened trial axis of a
    single compiled call per learner.

    A fast oscillation (period ~3 rounds) raises V_T (``~ 2.8 a^2 T``) without letting a learner
    track the sequence, so the static comparator stays the right yardstick; a slow rotation
    would instead reward tracking and make static regret negative."""
    res = {}
    for family, learners in (("convex", CONVEX_LEARNERS), ("strongly_convex", SC_LEARNERS)):
        env = make_env(family, d, T, noise=noise)  # noise knob is live in this env
        n_pts = len(amplitudes) + 1

        def tile(a, n_pts=n_pts):
            return jnp.concatenate([a] * n_pts, axis=0)

        es0 = jax.vmap(env.init)(jax.random.split(jax.random.key(7), seeds))
        es0 = jax.tree_util.tree_map(tile, es0)
        om = np.full(n_pts * seeds, FAST_OMEGA)
        nz = np.repeat(np.r_[np.zeros(len(amplitudes)), noise], seeds)
        amp = np.repeat(np.r_[amplitudes, 0.0], seeds)
        dt = es0.base.dtype
        es0 = es0._replace(
            omega=jnp.asarray(om, dt), noise=jnp.asarray(nz, dt), amplitude=jnp.asarray(amp, dt)
        )
        keys = tile(jax.random.split(jax.random.key(11), seeds))
        G = make_env(family, d, T).lipschitz
        out = run_family(env, learners, T, es0, keys, lipschitz=G)
        per = {}
        for name, o in out.items():
            assert o["all_in_domain"] and o["num_nonfinite"] == 0 and o["best_point_ok"], name
            r = o["regret"].reshape(n_pts, seeds)
            v = o["V_T"].reshape(n_pts, seeds)
            per[name] = {
                "amplitude": [float(x) for x in amplitudes] + [0.0],
                "omega": FAST_OMEGA,
                "noise": [0.0] * len(amplitudes) + [float(noise)],
                "V_T": v.mean(axis=1).tolist(),
                "mean": r.mean(axis=1).tolist(),
                "std": (r.std(axis=1, ddof=1) if seeds > 1 else 0 * r[:, 0]).tolist(),
                "regret": r.tolist(),
            }
            v_all = np.asarray(per[name]["V_T"])
            m_all = np.asarray(per[name]["mean"])
            per[name]["slope_vs_V_T"] = loglog_slope(v_all, m_all)
            # where V_T dominates the additive d-terms: the points within 2 decades of the max
            top = v_all >= v_all.max() / 100
            per[name]["slope_vs_V_T_top"] = loglog_slope(v_all[top], m_all[top])
        res[family] = per
    return res


def plot(result, path):
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(11, 8.5))
    for col, family in enumerate(("convex", "strongly_convex")):
        ax = axes[0, col]
        for name, p in result["dimension"][family].items():
            ax.errorbar(
                p["d"],
                p["mean"],
                yerr=p["std"],
                marker="o",
                capsize=3,
                label=f"{name} (slope {p['slope_vs_d']:.2f})",
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("d")
        ax.set_ylabel(f"regret at T = {result['config']['T']}")
        ax.set_title(f"{family}: regret vs d (V_T ~ 0)")
        ax.legend(fontsize=8)
        ax = axes[1, col]
        for name, p in result["variation"][family].items():
            v = np.asarray(p["V_T"])
            ax.errorbar(
                v,
                p["mean"],
                yerr=p["std"],
                marker="o",
                capsize=3,
                label=f"{name} (slope {p['slope_vs_V_T']:.2f}, top {p['slope_vs_V_T_top']:.2f})",
            )
        ax.set_xscale("symlog", linthresh=0.1)
        ax.set_yscale("log")
        ax.set_xlabel("V_T (eq. 1.1)")
        ax.set_ylabel("regret")
        ax.set_title(f"{family}: regret vs V_T (d = {result['config']['d_variation']})")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small d grid, T = 2000, 4 seeds")
    ap.add_argument("--json", default=None, help="write the figures to this JSON file")
    ap.add_argument("--out", default=None, help="directory for bco_dimension.png")
    args = ap.parse_args(argv)
    if args.quick:
        cfg = dict(
            dims=[5, 10, 20, 40],
            T=2000,
            seeds=4,
            d_variation=10,
            amplitudes=[0.0, 0.01, 0.03, 0.1, 0.3, 1.0],
            noise=0.3,
        )
    else:
        cfg = dict(
            dims=[5, 10, 20, 40, 80],
            T=10000,
            seeds=8,
            d_variation=20,
            amplitudes=[0.0, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0],
            noise=0.3,
        )
    t0 = time.time()
    result = {
        "config": {
            **cfg,
            "amplitude": AMPLITUDE,
            "fast_omega": FAST_OMEGA,
            "slow_angle": SLOW_ANGLE,
            "backend": jax.default_backend(),
            "dtype": "float64",
        },
        "dimension": dimension_sweep(cfg["dims"], cfg["T"], cfg["seeds"]),
        "variation": variation_sweep(
            cfg["d_variation"], cfg["T"], cfg["seeds"], cfg["amplitudes"], cfg["noise"]
        ),
    }
    result["config"]["wall_s"] = time.time() - t0

    print(f"T = {cfg['T']}, seeds = {cfg['seeds']}, wall {result['config']['wall_s']:.0f} s")
    for family, per in result["dimension"].items():
        print(
            f"\n[{family}] final regret vs d (mean +- std over seeds); V_T ~ "
            f"{np.mean(next(iter(per.values()))['V_T']):.2g}"
        )
        print("learner".ljust(13) + "".join(f"d={d}".rjust(17) for d in cfg["dims"]) + "  slope")
        for name, p in per.items():
            cells = "".join(
                f"{m:9.1f} +-{s:6.1f}" for m, s in zip(p["mean"], p["std"], strict=True)
            )
            print(name.ljust(13) + cells + f"  {p['slope_vs_d']:.2f}")
    for family, per in result["variation"].items():
        first = next(iter(per.values()))
        print(f"\n[{family}] final regret vs V_T at d = {cfg['d_variation']}")
        print(
            "V_T".ljust(13)
            + "".join(f"{v:12.3g}" for v in first["V_T"])
            + "   slope  slope(top 2 decades)"
        )
        for name, p in per.items():
            print(
                name.ljust(13)
                + "".join(f"{m:12.1f}" for m in p["mean"])
                + f"   {p['slope_vs_V_T']:.2f}  {p['slope_vs_V_T_top']:.2f}"
            )
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
        print(f"\nwrote {args.json}")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        path = os.path.join(args.out, "bco_dimension.png")
        plot(result, path)
        print(f"wrote {path}")
    return result


if __name__ == "__main__":
    main()
