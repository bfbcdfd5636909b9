"""Why the logistic recipes trail LinUCB on digits: each candidate cause, on paired streams.

On scikit-learn's digits with one class rewarded (Section 4's K = 1 protocol: ten candidates a
round, one per class; the target class pays 1), the logistic learners end well above LinUCB
(``python -m benchmarks.mlogb_evidence``). This benchmark changes one thing at a time in the
robust EOFD-MLogB recipe with no known bound (``mlogb.tuned("eofd-robust", S=None)``, the best
logistic recipe there before buffered EOFD) and runs every variant on the
same streams (every target class, ``--seeds`` keys per class, one half of the examples):

- **the sketch**: sketch size m = floor(K d / 10) = 6 (the recipe), 16 and 64 (d = 65: nearly
  the full Hessian, i.e. OFUL-MLogB's update);
- **the bonus**: the recipe's radius against none (greedy);
- **the projection**: the recipe's bound ``S`` against one that never binds (``S = 1e4``, same
  ``lam`` and ``eta``);
- **the step size**: the recipe's ``eta`` against eight times it (the paper's ``eta`` grows like
  ``S/2``: the step ``W' = W - eta H~^{-1} g`` is ``eta`` Newton steps);
- **the reward model**: LinUCB (ridge regression of the reward, with an intercept) at its recipe
  and greedy; the library's exact fit (``mlogb.exact``) greedy at the numpy rows' ``lam =``
  :data:`MLE_LAM` and at its recipe; buffered EOFD at its recipe (what ``mlogb.practical(S=None)``
  returns); and, in plain numpy (``references.logistic_numpy``) on streams of their
  own (paired with each other, not with the rows above), greedy ridge regression (``lam = 0.1``)
  against the greedy *exact* ridge-regularised logistic maximum-likelihood estimate, refitted
  every round by Newton's method
  (no online step, no sketch, no projection, no bonus), at ``lam = 0.1`` and at
  :data:`MLE_LAM` ``= 1e-4``, the best of ``{1e-4, 1e-3, 1e-2, 0.1}`` for it on the tuning
  half (``--half 0 --mle-lams 1e-4,1e-3,1e-2,0.1``: mean regret 61.9, 64.2, 66.5 and 84.0, each
  ± about 17, against 39.7 for ridge; the three smallest are within noise of each other); and
  the same fit by one damped Newton step a round on the whole history (``"newton1"``: the
  curvature at the current estimate and the whole gradient, where an online Newton step uses the
  past estimates' curvature and the last round's gradient).

Per variant: final regret mean +- standard error, median and 90th percentile over the runs
(per-run regret is heavy-tailed on this data: a few runs lock onto a wrong class for hundreds of
rounds). float64::

    python -m benchmarks.mlogb_digits_causes --json docs/bench/mlogb_digits_causes.json
    python -m benchmarks.mlogb_digits_causes --half 0 --json docs/bench/mlogb_digits_causes_h0.json

``--quick``: T = 300, one key per class (``--rounds`` overrides T: ``--quick --rounds 20`` is a
smoke run); ``--no-numpy``: skip the (slow) numpy rows;
``--mle-lams``: the exact logistic fit at these ridges instead of :data:`NUMPY_ROWS`' logistic
rows (ridge regression stays).
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks._report import finish
from references.logistic_numpy import numpy_greedy

SEED = 10_000
# Greedy numpy fits on streams of their own: (label, model, ridge lam). MLE_LAM: the logistic
# fit's ridge, the best of {1e-4, 1e-3, 1e-2, 0.1} on the tuning half (module docstring).
MLE_LAM = 1e-4
NUMPY_ROWS = (
    ("ridge, greedy (numpy)", "ridge", 0.1),
    ("logistic MLE lam 0.1, greedy (numpy)", "mle", 0.1),
    (f"logistic MLE lam {MLE_LAM:g}, greedy (numpy)", "mle", MLE_LAM),
    (f"logistic, one Newton step a round, lam {MLE_LAM:g} (numpy)", "newton1", MLE_LAM),
)


def _examples(half: int) -> tuple[np.ndarray, np.ndarray]:
    """The normalised digits of one half (the environment's features, in numpy)."""
    from bandits_jax.envs.classification import load_digits, normalise_features

    raw, labels = load_digits(half)
    return normalise_features(raw), np.asarray(labels)


def variants(dim: int, T: int) -> list[tuple[str, object, object]]:
    """``(label, learner, hparams)`` of every variant (module docstring)."""
    from bandits_jax import mlogb
    from bandits_jax.mlogb.exact import exact, exact_hyperparams

    rec = mlogb.tuned("eofd-robust", num_outcomes=1, dim=dim, S=None, horizon=T)
    hp = rec.hparams
    robust = dict(num_outcomes=1, dim=dim, regularization="robust")
    lin = mlogb.tuned("linucb", num_outcomes=1, dim=dim, horizon=T)
    fit = mlogb.tuned("exact", num_outcomes=1, dim=dim, horizon=T)
    buffered = mlogb.tuned("eofd-buffered", num_outcomes=1, dim=dim, horizon=T)
    return [
        (f"robust EOFD recipe (m = {rec.sketch_size})", rec.learner, hp),
        ("sketch m = 16", mlogb.eofd(sketch_size=16, **robust), hp),
        ("sketch m = 64", mlogb.eofd(sketch_size=64, **robust), hp),
        ("no bonus (greedy)", rec.learner, hp._replace(beta=jnp.zeros_like(hp.beta))),
        ("S = 1e4 (never binds)", rec.learner, hp._replace(S=jnp.full_like(hp.S, 1e4))),
        ("eta x 8", rec.learner, hp._replace(eta=8.0 * hp.eta)),
        ("LinUCB (recipe)", lin.learner, lin.hparams),
        ("LinUCB greedy", lin.learner, lin.hparams._replace(alpha=0.0 * lin.hparams.alpha)),
        (f"exact fit, lam {MLE_LAM:g}, greedy", exact(num_outcomes=1, dim=dim, horizon=T),
         exact_hyperparams(lam=MLE_LAM, beta=0.0)),
        ("exact fit (recipe)", fit.learner, fit.hparams),
        (f"buffered EOFD (recipe, m = {buffered.sketch_size})", buffered.learner,
         buffered.hparams),
    ]  # fmt: skip


def play(learner, hp, env, targets: np.ndarray, keys: jax.Array, T: int):
    """Final regret of every run (one per key and target), all runs in one compiled call."""
    from bandits_jax import mlogb
    from bandits_jax.sim import make_rollout

    step = mlogb.interact(learner, env)

    def one(key, target):
        env_state = env.init_target(key, target)
        metrics = make_rollout(step, T)(learner.init(hp), env_state, key)
        return metrics.regret.sum()

    return np.asarray(jax.jit(jax.vmap(one))(keys, jnp.asarray(targets, jnp.int32)))


def _row(label: str, regret: np.ndarray, targets: np.ndarray, seconds: float) -> dict:
    row = {
        "variant": label, "mean": float(regret.mean()),
        "se": float(regret.std(ddof=1) / np.sqrt(regret.size)) if regret.size > 1 else 0.0,
        "median": float(np.median(regret)), "p90": float(np.percentile(regret, 90)),
        "per_class_mean": [float(regret[targets == c].mean()) for c in np.unique(targets)],
        "seconds": seconds,
    }  # fmt: skip
    print(f"{label:34s} mean {row['mean']:7.1f} ± {row['se']:5.1f}  median {row['median']:6.1f}  "
          f"p90 {row['p90']:6.1f}", flush=True)  # fmt: skip
    return row


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", default=None, help="write the results here")
    p.add_argument("--quick", action="store_true", help="T = 300, one key per class")
    p.add_argument("--seeds", type=int, default=5, help="keys per target class (default 5)")
    p.add_argument("--rounds", type=int, default=None, help="T (default 2000; quick 300)")
    p.add_argument("--no-numpy", action="store_true", help="skip the numpy ridge/MLE rows")
    p.add_argument("--mle-lams", default=None,
                   help="comma list: the exact logistic MLE at these ridges instead of the default "
                        "logistic rows (ridge regression at 0.1 stays)")  # fmt: skip
    p.add_argument("--half", type=int, default=1, choices=(0, 1),
                   help="0: even-indexed examples (tuning), 1: odd-indexed (reported)")  # fmt: skip
    a = p.parse_args(argv)
    jax.config.update("jax_enable_x64", True)
    from bandits_jax import envs

    T, seeds = (300, 1) if a.quick else (2000, a.seeds)
    T = a.rounds or T
    env = envs.digits(target=0, half=a.half)
    targets = np.repeat(np.arange(env.num_classes), seeds)
    keys = jax.random.split(jax.random.key(SEED), targets.size)
    rows = []
    for label, learner, hp in variants(env.dim, T):
        start = time.perf_counter()
        regret = play(learner, hp, env, targets, keys, T)
        rows.append(_row(label, regret, targets, time.perf_counter() - start))
    actions, labels = _examples(a.half)
    numpy_rows = (
        NUMPY_ROWS
        if a.mle_lams is None
        else NUMPY_ROWS[:1]
        + tuple(
            (f"logistic MLE lam {lam:g}, greedy (numpy)", "mle", lam)
            for lam in map(float, a.mle_lams.split(","))
        )
    )
    for label, model, lam in () if a.no_numpy else numpy_rows:
        start = time.perf_counter()
        regret = np.array([numpy_greedy(model, actions, labels, int(c), T, SEED + i, lam=lam)
                           for i, c in enumerate(targets)])  # fmt: skip
        rows.append(_row(label, regret, targets, time.perf_counter() - start))
    return finish(
        {
            "benchmark": "mlogb_digits_causes",
            "rounds": T,
            "seeds_per_class": seeds,
            "half": a.half,
            "runs": int(targets.size),
            "dtype": "float64",
            "rows": rows,
        },  # fmt: skip
        a.json,
    )


if __name__ == "__main__":
    main()
