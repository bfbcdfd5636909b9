"""Why a recipe wins or loses on digits: the estimate along a run, for every target class.

For each rewarded class of scikit-learn's digits (the K = 1 protocol of Section 4) and each
recipe, one run of T rounds records at a few rounds: ``||W||``, the share of ``||W||^2`` on the
constant (bias) feature, the cosine between ``W`` and a reference logistic regression fitted to
the whole data set (numpy Newton, ridge 1e-3: the direction that ranks the classes best), the
AUC of ``W``'s scores on the whole data set (target vs other classes: 0.5 is a random ranking),
the fraction of rounds whose Lemma 2 projection was active, the sketch error ``rho``, and the
cumulative regret; plus each recipe's ``(lam, eta, S)``::

    python -m benchmarks.mlogb_digits --json docs/bench/mlogb_digits.json

The recipes: the robust EOFD recipe at ``S = 1`` (what ``mlogb.practical(S=1)`` runs) and with
no known bound (``S=None``, the recipe's own S), the plain EOFD recipe at ``S = 1``, and LinUCB
at its no-known-bound recipe. ``--quick``: T = 300, three classes; ``--rounds`` and ``--targets``
override T and the classes (``--rounds 20 --targets 1``: a smoke run). float64.
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks._report import finish

RECIPES = (  # (label, kind, S)
    ("robust EOFD, S = 1", "eofd-robust", 1.0),
    ("robust EOFD, S = None", "eofd-robust", None),
    ("EOFD, S = 1", "eofd", 1.0),
    ("LinUCB", "linucb", None),
)
EVAL_SEED = 10_000


def reference_direction(features: np.ndarray, is_target: np.ndarray) -> np.ndarray:
    """Ridge (1e-3) logistic regression on all examples by Newton's method (numpy)."""
    w = np.zeros(features.shape[1])
    for _ in range(60):
        p = 1.0 / (1.0 + np.exp(-features @ w))
        g = features.T @ (p - is_target) + 1e-3 * w
        H = (features * (p * (1 - p))[:, None]).T @ features + 1e-3 * np.eye(w.size)
        w -= np.linalg.solve(H, g)
    return w


def auc(scores: np.ndarray, is_target: np.ndarray) -> float:
    """P(score of a target example > score of another class's example) (ties count 1/2)."""
    pos, neg = scores[is_target == 1], scores[is_target == 0]
    return float(np.mean((pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])))


def trace(kind: str, S: float | None, target: int, T: int) -> dict:
    """One run: the estimate and diagnostics at every round (scan), summarised by the caller."""
    from bandits_jax import envs, mlogb

    env = envs.digits(target=target)
    rec = mlogb.tuned(kind, num_outcomes=1, dim=env.dim, S=S, horizon=T)
    step = mlogb.interact(rec.learner, env)

    def body(carry, key):
        ls, es = carry
        ls, es, met = step(ls, es, key)
        return (ls, es), (ls.W[0], met.projected, met.rho, met.regret)

    @jax.jit
    def run(key):
        k_env, k_run = jax.random.split(key)
        init = (rec.learner.init(rec.hparams), env.init(k_env))
        return jax.lax.scan(body, init, jax.random.split(k_run, T))[1]

    W, projected, rho, regret = jax.device_get(run(jax.random.key(EVAL_SEED + target)))
    hp = rec.hparams
    lam = float(hp.lam)
    eta = float(getattr(hp, "eta", jnp.nan))
    return {
        "W": np.asarray(W),
        "projected": np.asarray(projected, bool),
        "rho": np.asarray(rho),
        "regret": np.cumsum(np.asarray(regret, np.float64)),
        "lam": lam,
        "eta": eta,
        "S": float(getattr(hp, "S", jnp.nan)),
    }


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", default=None, help="write the results here")
    p.add_argument("--quick", action="store_true", help="T = 300, classes 0, 1, 8")
    p.add_argument("--rounds", type=int, default=None, help="T (default 2000; quick 300)")
    p.add_argument("--targets", default=None, help="comma list of rewarded classes")
    a = p.parse_args(argv)
    jax.config.update("jax_enable_x64", True)
    from bandits_jax.envs import classification

    T = a.rounds or (300 if a.quick else 2000)
    targets = (0, 1, 8) if a.quick else tuple(range(10))
    if a.targets is not None:
        targets = tuple(int(c) for c in a.targets.split(","))
    at = sorted(t for t in {10, 100, T // 4, T} if 1 <= t <= T)
    raw, labels = classification.load_digits()
    A = classification.normalise_features(raw)
    rows = []
    for target in targets:
        is_target = (labels == target).astype(float)
        w_ref = reference_direction(A, is_target)
        for label, kind, S in RECIPES:
            tr = trace(kind, S, target, T)
            points = []
            for t in at:
                W = tr["W"][t - 1]
                norm = float(np.linalg.norm(W))
                points.append(
                    {
                        "round": t,
                        "norm_W": norm,
                        "bias_share": float(W[-1] ** 2 / max(norm**2, 1e-300)),
                        "cos_reference": float(
                            W @ w_ref / max(norm * np.linalg.norm(w_ref), 1e-300)
                        ),
                        "auc": auc(A @ W, is_target),
                        "projected_fraction": float(tr["projected"][:t].mean()),
                        "rho": float(tr["rho"][t - 1]),
                        "regret": float(tr["regret"][t - 1]),
                    }
                )
            rows.append(
                {
                    "target": target,
                    "recipe": label,
                    "lam": tr["lam"],
                    "eta": tr["eta"],
                    "S": tr["S"],
                    "trace": points,
                }  # fmt: skip
            )
            end = points[-1]
            print(
                f"class {target} {label:20s} lam {tr['lam']:.3g} eta {tr['eta']:.3g} "
                f"S {tr['S']:g}: regret {end['regret']:7.1f}, ||W|| {end['norm_W']:.2f}, bias "
                f"share {end['bias_share']:.2f}, cos(W, ref) {end['cos_reference']:+.2f}, AUC "
                f"{end['auc']:.2f}, projected {end['projected_fraction']:.2f}, "
                f"rho {end['rho']:.3g}",
                flush=True,
            )
    print("\nmean over classes at T (regret, AUC, bias share):")
    summary = {}
    for label, _, _ in RECIPES:
        ends = [r["trace"][-1] for r in rows if r["recipe"] == label]
        summary[label] = {k: float(np.mean([e[k] for e in ends])) for k in ends[0] if k != "round"}
        s = summary[label]
        print(f"  {label:20s} {s['regret']:7.1f}  {s['auc']:.2f}  {s['bias_share']:.2f}")
    return finish(
        {
            "benchmark": "mlogb_digits",
            "rounds": T,
            "targets": list(targets),
            "dtype": "float64",
            "summary": summary,
            "rows": rows,
        },  # fmt: skip
        a.json,
    )


if __name__ == "__main__":
    main()
