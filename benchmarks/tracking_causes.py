"""Why robust EOFD-MLogB locks onto a wrong class on digits: tracking, curvature, projection.

Robust EOFD-MLogB at its no-known-bound recipe (``mlogb.tuned("eofd-robust", S=None)``) runs on
scikit-learn's digits (Section 4's K = 1 protocol, ten candidates a round, the tuning half of the
examples), every target class, ``--seeds`` keys per class, T rounds. Each run records, per
round, the state before the update (``W_t``, the sketch ``V, mu, rho``), the step taken, the
projection's activity (``info.projected``, ``info.nu``) and the round's candidates. Then, every
``--every`` rounds, on EOFD's own history (the same actions and outcomes):

- **tracking**: the regularised MLE ``W^_t`` of the rounds so far (damped Newton to
  convergence, ridge :data:`EXACT_LAM`), and ``cos(W_t, W^_t)``; whether the MLE's greedy choice
  on that round's candidates is the target class, against EOFD's own choice;
- **curvature**: the matrix the online step solves with, ``C_t = Z~_t / eta`` with
  ``Z~_t = (lam + rho/2) I + V diag(mu) V^T + eta grad^2 l_t(W_t)`` (the step is
  ``-eta Z~_t^{-1} g_t``: a Newton step on curvature ``C_t``), against the Hessian of the
  history loss at the current estimate,
  ``H_t = lam I + sum_{s <= t} grad sigma(W_t x_s) x_s x_s^T``,
  as the ratio of quadratic forms ``u^T C_t u / u^T H_t u`` along the step taken
  (``u = W_{t+1} - W_t``) and along the way to the MLE (``u = W^_t - W_t``); and the fraction
  of the way to the MLE that a step covers, ``<u_step, u_mle> / ||u_mle||^2``;
- **projection**: the fraction of rounds with the projection active and ``||W_t|| / S``.

Lock-in: a streak of at least :data:`LOCK_MIN` consecutive wrong choices. The measures are
summarised over all checkpoints and over those inside lock-in streaks.

Measured (``docs/bench/tracking_causes.json``: 10 classes x 2 keys, T = 1000, every 20 rounds,
980 checkpoints; percentiles p10/p50/p90):

- tracking: ``cos(W_t, W^_t)`` 0.63/0.84/0.91; the history loss at ``W_t`` is above its
  minimum by (Newton decrement) 10/32/72 nats, and a round's step covers ~1e-5 of the way to
  the MLE (``|step fraction|`` <= 1e-4 at p10 and p90): the online step (the last round's
  gradient only) never closes the gap;
- curvature: ``u^T C_t u / u^T H_t u`` 0.88/1.33/1.94 along the step, 0.90/2.67/7.8 along the
  way to the MLE: the sketched, stale curvature overstates the current Hessian a few times,
  a second-order effect beside the gap;
- projection: active in 57% of the rounds, ``||W_t||`` reaches S = 16 in every run, while the
  MLE's norm is 72/127/334: the ball keeps the estimate far from the fit (removing it makes
  EOFD worse, ``benchmarks.mlogb_digits_causes``' ``S = 1e4`` row: nothing else corrects it);
- lock-in: one run of 20 (class 8, 435 regret, a 204-round streak): there
  ``cos(W_t, W^_t)`` is 0.006 (median), and the MLE of that (self-made) history picks the
  target at 1 checkpoint of 15, against 95% of checkpoints overall (EOFD 93%).

So the cause is the online step's tracking, compounded by the ball: the remedy is to refit on
the history (``mlogb.eofd_buffered``: Newton steps on a ring buffer plus the sketch's summary,
no ball). float64::

    python -m benchmarks.tracking_causes --out docs/bench/tracking_causes.json
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks._report import finish

SEED = 20_000
EXACT_LAM = 1e-4  # the exact learner's ridge (benchmarks.exact_fit_check)
LOCK_MIN = 30  # consecutive wrong choices that count as a lock-in


def record(learner, hp, env, targets, keys, T: int) -> dict:
    """One compiled call: every run's per-round records (module docstring), numpy."""
    from bandits_jax import mlogb

    step = mlogb.interact(learner, env)

    def one(key, target):
        def body(carry, k):
            ls, es = carry
            ls_new, es_new, met = step(ls, es, k)
            out = {
                "W": ls.W[0], "V": ls.V, "mu": ls.mu, "rho": ls.rho, "W_new": ls_new.W[0],
                "actions": es_new.actions, "classes": es_new.labels,
                "choice": met.choice, "y": met.y,
                "regret": met.regret, "projected": met.projected, "nu": ls_new.info.nu,
                "status": met.status,
            }  # fmt: skip
            return (ls_new, es_new), out

        carry = (learner.init(hp), env.init_target(key, target))
        _, out = jax.lax.scan(body, carry, jax.random.split(key, T))
        return out

    out = jax.jit(jax.vmap(one))(keys, jnp.asarray(targets, jnp.int32))
    return jax.tree.map(np.asarray, out)


def _sigmoid(z):
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def mle(X: np.ndarray, y: np.ndarray, lam: float, w: np.ndarray, steps: int = 100):
    """argmin of the summed log-loss + ``lam/2 ||w||^2`` (K = 1) by damped Newton from ``w``."""

    def F(v):
        z = X @ v
        return float(np.sum(np.logaddexp(0.0, z) - y * z) + 0.5 * lam * v @ v)

    f = F(w)
    for _ in range(steps):
        p = _sigmoid(X @ w)
        g = X.T @ (p - y) + lam * w
        H = (X * (p * (1 - p))[:, None]).T @ X + lam * np.eye(w.size)
        step = np.linalg.solve(H, g)
        dec = g @ step
        if dec <= 1e-20 * max(1.0, abs(f)):
            break
        a = 1.0
        while (fn := F(w - a * step)) > f - 1e-4 * a * dec and a > 1e-10:
            a *= 0.5
        w, f = w - a * step, fn
    return w


def _streaks(wrong: np.ndarray) -> np.ndarray:
    """Boolean mask of the rounds inside runs of >= LOCK_MIN consecutive wrong choices."""
    mask = np.zeros_like(wrong)
    start = None
    for t, w in enumerate(np.append(wrong, False)):
        if w and start is None:
            start = t
        elif not w and start is not None:
            if t - start >= LOCK_MIN:
                mask[start:t] = True
            start = None
    return mask


def analyse(rec: dict, run: int, target: int, lam: float, eta: float, S: float, every: int):
    """Checkpoint measures of one run (module docstring)."""
    T = rec["y"].shape[1]
    acts = rec["actions"][run]
    xs = acts[np.arange(T), rec["choice"][run]]
    ys = (rec["y"][run] == 1).astype(float)
    wrong = rec["regret"][run] > 0.5
    lock = _streaks(wrong)
    w_mle = np.zeros(xs.shape[1])
    rows = []
    for t in range(every, T, every):
        W = rec["W"][run, t]
        w_mle = mle(xs[:t], ys[:t], EXACT_LAM, w_mle)
        V, mu, rho = rec["V"][run, t], rec["mu"][run, t], float(rec["rho"][run, t])
        x = xs[t]
        s = _sigmoid(x @ W)
        Zt = (lam + 0.5 * rho) * np.eye(x.size) + (V * mu) @ V.T
        Zt = Zt + eta * s * (1 - s) * np.outer(x, x)
        C = Zt / eta
        p = _sigmoid(xs[: t + 1] @ W)
        H = (xs[: t + 1] * (p * (1 - p))[:, None]).T @ xs[: t + 1] + lam * np.eye(x.size)
        u_step = rec["W_new"][run, t] - W
        # The history's gradient at W_t (rounds 0..t) and its Newton decrement g^T H^-1 g / 2,
        # about F(W_t) - min F: how far the online estimate is from the history's optimum.
        g = xs[: t + 1].T @ (p - ys[: t + 1]) + EXACT_LAM * W
        newton = np.linalg.solve(H - lam * np.eye(x.size) + EXACT_LAM * np.eye(x.size), g)
        w_n1 = W - newton  # one full-history Newton step from W_t
        u_mle = w_mle - W
        q = lambda M, u: float(u @ M @ u)  # noqa: E731
        nW, nM = np.linalg.norm(W), np.linalg.norm(w_mle)
        cls = acts[t]
        rows.append({
            "t": t,
            "cos": float(W @ w_mle / (nW * nM)) if nW > 0 and nM > 0 else 0.0,
            "norm_W": float(nW), "norm_mle": float(nM),
            "curv_ratio_step": q(C, u_step) / q(H, u_step) if q(H, u_step) > 0 else np.nan,
            "curv_ratio_mle": q(C, u_mle) / q(H, u_mle) if q(H, u_mle) > 0 else np.nan,
            "step_fraction": float(u_step @ u_mle / (u_mle @ u_mle)) if u_mle @ u_mle > 0 else 0.0,
            "newton_decrement": 0.5 * float(g @ newton),
            "eofd_correct": not bool(wrong[t]),
            "newton1_greedy_correct": bool(np.argmax(cls @ w_n1) == _target_index(rec, run, t)),
            "eofd_greedy_correct": bool(np.argmax(cls @ W) == _target_index(rec, run, t)),
            "mle_greedy_correct": bool(np.argmax(cls @ w_mle) == _target_index(rec, run, t)),
            "in_lock": bool(lock[t]),
        })  # fmt: skip
    proj = rec["projected"][run]
    norms = np.linalg.norm(rec["W"][run], axis=1)
    return {
        "target": int(target),
        "regret": float(rec["regret"][run].sum()),
        "lock_rounds": int(lock.sum()),
        "longest_wrong_streak": int(_longest(wrong)),
        "projected_fraction": float(proj.mean()),
        "projected_fraction_in_lock": float(proj[lock].mean()) if lock.any() else None,
        "max_norm_over_S": float(norms.max() / S),
        "checkpoints": rows,
    }


def _target_index(rec, run, t):
    """Index of the rewarded candidate in round t (the one of zero regret)."""
    return int(rec["target_index"][run, t])


def _longest(wrong):
    best = cur = 0
    for w in wrong:
        cur = cur + 1 if w else 0
        best = max(best, cur)
    return best


def _summary(points: list[dict]) -> dict:
    def med(key):
        v = np.array([p[key] for p in points], float)
        v = v[np.isfinite(v)]
        return [float(np.percentile(v, q)) for q in (10, 50, 90)] if v.size else None

    def frac(key):
        return float(np.mean([p[key] for p in points])) if points else None

    return {
        "checkpoints": len(points),
        "cos_p10_p50_p90": med("cos"),
        "curv_ratio_step_p10_p50_p90": med("curv_ratio_step"),
        "curv_ratio_mle_p10_p50_p90": med("curv_ratio_mle"),
        "step_fraction_p10_p50_p90": med("step_fraction"),
        "eofd_correct": frac("eofd_correct"),
        "eofd_greedy_correct": frac("eofd_greedy_correct"),
        "mle_greedy_correct": frac("mle_greedy_correct"),
        "newton1_greedy_correct": frac("newton1_greedy_correct"),
        "newton_decrement_p10_p50_p90": med("newton_decrement"),
    }


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=1000)
    p.add_argument("--seeds", type=int, default=2, help="keys per target class")
    p.add_argument("--every", type=int, default=20, help="rounds between exact refits")
    p.add_argument("--half", type=int, default=0, choices=(0, 1))
    p.add_argument("--out", default=None, help="write the results here (JSON)")
    a = p.parse_args(argv)
    jax.config.update("jax_enable_x64", True)
    from bandits_jax import envs, mlogb

    env = envs.digits(target=0, half=a.half)
    rec_ = mlogb.tuned("eofd-robust", num_outcomes=1, dim=env.dim, S=None, horizon=a.rounds)
    hp = rec_.hparams
    targets = np.repeat(np.arange(env.num_classes), a.seeds)
    keys = jax.random.split(jax.random.key(SEED), targets.size)
    start = time.perf_counter()
    rec = record(rec_.learner, hp, env, targets, keys, a.rounds)
    # The rewarded candidate: the one of the target class.
    rec["target_index"] = np.argmax(rec["classes"] == targets[:, None, None], axis=2)
    seconds = time.perf_counter() - start
    lam, eta, S = float(hp.lam), float(hp.eta), float(hp.S)
    runs = [analyse(rec, i, targets[i], lam, eta, S, a.every) for i in range(targets.size)]
    allp = [c for r in runs for c in r["checkpoints"]]
    lockp = [c for c in allp if c["in_lock"]]
    free = [c for c in allp if not c["in_lock"]]
    result = {
        "benchmark": "tracking_causes",
        "rounds": a.rounds, "seeds": a.seeds, "half": a.half, "every": a.every,
        "exact_lam": EXACT_LAM, "lock_min": LOCK_MIN,
        "recipe": {"lam": lam, "eta": eta, "S": S, "beta": float(hp.beta),
                   "sketch_size": rec_.sketch_size},
        "rollout_seconds": seconds,
        "summary_all": _summary(allp), "summary_in_lock": _summary(lockp),
        "summary_outside_lock": _summary(free),
        "projected_fraction": float(np.mean([r["projected_fraction"] for r in runs])),
        "runs": runs,
    }  # fmt: skip
    for name in ("summary_all", "summary_in_lock", "summary_outside_lock"):
        print(name, result[name], flush=True)
    print("projected fraction", result["projected_fraction"])
    print("per run (target, regret, lock rounds, longest streak, projected, max ||W||/S):")
    for r in runs:
        print(" ", r["target"], round(r["regret"], 1), r["lock_rounds"], r["longest_wrong_streak"],
              round(r["projected_fraction"], 3), round(r["max_norm_over_S"], 3))  # fmt: skip
    return finish(result, a.out)


if __name__ == "__main__":
    main()
