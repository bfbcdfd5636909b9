"""Regret of Algorithm 1 vs the dimension d and vs the gradient variation V_T (BCO paper, Table 1,
Theorems 1-4 and 8), next to the Chiang et al. 2013 strongly convex rate and the sphere-estimator
baseline (Algorithm 3). The paper has no experiments; this script measures its claims.

Run as ``python -m benchmarks.bco_dimension`` (``--quick`` for a short run, ``--json PATH`` for the
figures, ``--out DIR`` for the PNG; ``--rounds``, ``--trials``, ``--dims`` and ``--learners``
narrow it as in the command: ``--quick --rounds 50 --trials 2 --dims 5 --learners
alg1_thm3,alg1_thm2`` is a smoke run). float64. The studies live in ``bandits_jax.cli.bco`` (the
``bandits-jax bco`` command runs the same ones, with checkpoints, resume and optional honest
tuning of the step-size scale); this script plays them without checkpoints through the shared
chunked runner (rounds in ``lax.scan``, seeds and V_T-grid points by ``vmap``); regret is the
static regret against the best fixed point in hindsight
(``bandits_jax.bco.summarize``), loss charged = mean of the two queried values.

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

import jax

jax.config.update("jax_enable_x64", True)

from bandits_jax.cli import bco as study  # noqa: E402
from bandits_jax.cli import output, tables  # noqa: E402
from benchmarks._device import add_device_option, select_device  # noqa: E402
from benchmarks._report import finish  # noqa: E402

AMPLITUDE, SLOW_ANGLE, FAST_OMEGA = study.AMPLITUDE, study.SLOW_ANGLE, study.FAST_OMEGA
CONVEX_LEARNERS = [n for n, s in study.BCO_LEARNERS.items() if s.family == "convex"]
SC_LEARNERS = [n for n, s in study.BCO_LEARNERS.items() if s.family == "strongly_convex"]
make_env = study.make_env
loglog_slope = tables.loglog_slope


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small d grid, T = 2000, 4 seeds")
    ap.add_argument("--json", default=None, help="write the figures to this JSON file")
    ap.add_argument("--out", default=None, help="directory for bco_dimension.png")
    ap.add_argument("--rounds", type=int, default=None, help="T (default 10000; quick 2000)")
    ap.add_argument("--trials", type=int, default=None, help="evaluation seeds (8; quick 4)")
    ap.add_argument("--dims", default=None, help="d values of the d study (5,10,20,40,80)")
    ap.add_argument("--learners", default=None, help="comma list (default: all)")
    add_device_option(ap)
    args = ap.parse_args(argv)
    select_device(args)
    cfg = dict(study.QUICK if args.quick else study.FULL)
    if args.rounds is not None:
        cfg["T"] = args.rounds
    if args.trials is not None:
        cfg["seeds"] = args.trials
    if args.dims is not None:
        cfg["dims"] = [int(d) for d in args.dims.split(",")]
    learners = args.learners.split(",") if args.learners else None
    if learners and set(learners) - set(study.BCO_LEARNERS):
        ap.error(f"--learners: expected some of {list(study.BCO_LEARNERS)}, got {args.learners}")
    plan = study.StudyPlan(eval_seeds=list(range(cfg["seeds"])), learners=learners)
    result = study.run_studies(cfg, plan)
    print(tables.bco_summary(result))
    result = finish(result, None)
    if args.json:
        import os

        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        output.write_json(args.json, result)
        print(f"wrote {args.json}")
    if args.out:
        import os

        from bandits_jax.cli import plotting

        os.makedirs(args.out, exist_ok=True)
        path = os.path.join(args.out, "bco_dimension.png")
        plotting.bco_figure(result, path)
        print(f"wrote {path}")
    return result


if __name__ == "__main__":
    main()
