"""Sweeps: a grid in one call equals each grid point alone; tidy table; honest tuning."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax import envs, mlogb
from bandits_jax.cli.output import format_table
from bandits_jax.mlogb.exploration import exploration_columns
from bandits_jax.sim import sweep
from bandits_jax.sim.runner import make_rollout

K, D, T = 2, 3, 8
L_GRID = sweep.grid_product(l=[0.0, 0.75], e=[0.0, 0.75])
ENV = envs.synthetic_mlogb(num_outcomes=K, dim=D, S=2.0, min_actions=3, max_actions=5)


def experiments():
    rec = mlogb.section4(
        num_outcomes=K, dim=D, S=2.0, horizon=T, l=L_GRID["l"], e=L_GRID["e"], beta=0.5
    )
    out = []
    for name, learner in [
        ("EOFD", mlogb.eofd(num_outcomes=K, dim=D, sketch_size=2)),
        ("OFUL", mlogb.oful(num_outcomes=K, dim=D)),
    ]:
        step = mlogb.interact(learner, ENV)
        out.append(
            sweep.Experiment(name, "synthetic", step, learner.init, rec.hparams, L_GRID, ENV.init)
        )
    return out


EXPS = experiments()
SEEDS = [3, 4]
SINGLE = [make_rollout(exp.step, T) for exp in EXPS]  # one run, compiled once per learner


def single_final_regrets(i, g, seeds):
    exp = EXPS[i]
    env_keys, run_keys = sweep.seed_keys(seeds)
    hp = jax.tree_util.tree_map(lambda x: x[g], exp.hparams)
    return [
        SINGLE[i](exp.init_learner(hp), exp.init_env(env_keys[n]), run_keys[n])
        for n in range(len(seeds))
    ]


@pytest.fixture(scope="module")
def result():
    return sweep.run_sweep(EXPS, num_rounds=T, seeds=SEEDS)


def test_grid_in_one_call_equals_each_point_alone(result):
    for i, res in enumerate(result.experiments):
        assert res.metrics["regret"].shape == (4, 2, T)
        for g in range(4):
            for n, m in enumerate(single_final_regrets(i, g, SEEDS)):
                for field in ("regret", "bonus_spread", "estimate_spread"):
                    np.testing.assert_allclose(
                        res.metrics[field][g, n],
                        np.asarray(getattr(m, field)),
                        rtol=1e-9,
                        atol=1e-12,
                    )


def test_split_sweep_of_real_learners_equals_the_one_call_sweep(result):
    # EOFD and OFUL (eigendecompositions, vmapped): a budget under the one-call figure plays the
    # 8 runs of each in batches. A run depends only on its seed and grid point; what a narrower
    # vmap changes is how XLA's CPU kernels block their sums (module docstring of sim.sweep):
    # the same terms summed in another order, a few eps relative a round, which these short,
    # well-conditioned runs do not amplify past 1e-12 (integer metrics: equal; microbatch makes
    # it bit for bit, tests/sim/test_sweep_memory.py).
    budget = int(0.75 * result.memory["peak_bytes"])
    split = sweep.run_sweep(EXPS, num_rounds=T, seeds=SEEDS, max_bytes=budget)
    assert split.memory["batches"] > 1 and split.memory["peak_bytes"] <= budget
    for a, b in zip(result.experiments, split.experiments, strict=True):
        for k in a.metrics:
            if np.issubdtype(np.asarray(a.metrics[k]).dtype, np.floating):
                np.testing.assert_allclose(a.metrics[k], b.metrics[k], rtol=1e-12, atol=1e-15,
                                           err_msg=k)  # fmt: skip
            else:
                np.testing.assert_array_equal(a.metrics[k], b.metrics[k], err_msg=k)


def test_table_statistics(result):
    rows = sweep.table(result, columns=exploration_columns)
    assert len(rows) == 8 and {r["learner"] for r in rows} == {"EOFD", "OFUL"}
    for i, row in enumerate(rows):
        res = result.experiments[i // 4]
        g = i % 4
        assert (row["l"], row["e"]) == (L_GRID["l"][g], L_GRID["e"][g])
        final = [float(np.sum(res.metrics["regret"][g, n])) for n in range(2)]
        mean = (final[0] + final[1]) / 2
        std = abs(final[0] - final[1]) / np.sqrt(2)  # sample std of two numbers
        assert row["final_regret_mean"] == pytest.approx(mean, rel=1e-12)
        assert row["final_regret_std"] == pytest.approx(std, rel=1e-9, abs=1e-12)
        b, e = res.metrics["bonus_spread"][g], res.metrics["estimate_spread"][g]
        ratios = [b[n, t] / e[n, t] for n in range(2) for t in range(T) if e[n, t] > 0]
        assert row["bonus_ratio"] == pytest.approx(float(np.median(ratios)), rel=1e-12)
    text = format_table(rows)
    assert "final_regret_mean" in text and "EOFD" in text


def test_tuning_is_honest(result):
    with pytest.raises(ValueError, match="disjoint"):
        sweep.tune_and_evaluate(EXPS, num_rounds=T, tuning_seeds=[1, 2], eval_seeds=[2, 5])
    # 8 evaluation seeds x 1 chosen point = 8 runs, the shape of the tuning sweep (4 x 2): the
    # compiled executable is reused.
    eval_seeds = list(range(10, 18))
    tuned = sweep.tune_and_evaluate(EXPS, num_rounds=T, tuning_seeds=SEEDS, eval_seeds=eval_seeds)
    for i, res in enumerate(result.experiments):
        means = res.metrics["regret"].sum(-1).mean(-1)
        assert tuned.chosen[i] == int(np.argmin(means))
    # The reported number is the chosen point's regret on the evaluation seeds.
    for i in range(len(EXPS)):
        g = tuned.chosen[i]
        finals = [float(jnp.sum(m.regret)) for m in single_final_regrets(i, g, eval_seeds)]
        row = tuned.evaluation[i]
        assert row["split"] == "evaluation" and row["l"] == L_GRID["l"][g]
        assert row["final_regret_mean"] == pytest.approx(float(np.mean(finals)), rel=1e-9)
    assert len(tuned.tuning) == 8 and len(tuned.evaluation) == 2


def test_grid_helpers():
    g = sweep.grid_product(a=[1, 2], b=[3, 4, 5])
    np.testing.assert_array_equal(g["a"], [1, 1, 1, 2, 2, 2])
    np.testing.assert_array_equal(g["b"], [3, 4, 5, 3, 4, 5])
    t = sweep.stack_trees([{"x": 1.0}, {"x": 2.0}])
    np.testing.assert_array_equal(np.asarray(t["x"]), [1.0, 2.0])


def test_sweep_serves_bco_learners():
    # The same machinery for the BCO family: init(hparams) like MLogB, no "regret" metric of its own
    # (per-round dynamic regret from its metrics), a grid of step-size scales.
    from bandits_jax.bco import rounds as bint
    from bandits_jax.bco import two_point as tp
    from bandits_jax.envs import bco_losses as bl

    env = bl.quadratic(3, lam=1.0, base_norm=2.0, amplitude=0.2, omega=0.01)
    learner = tp.two_point_learner(dim=env.d, schedule="variance")
    scales = [0.5, 2.0]
    hps = [
        learner.hyperparams(
            env.domain, horizon=6, smoothness=env.smoothness, lipschitz=env.lipschitz, scale=s
        )
        for s in scales
    ]
    step = bint.interact(learner, env)
    exp = sweep.Experiment(
        "alg1", "quadratic", step, learner.init, sweep.stack_trees(hps), {"scale": scales},
        env.init, regret=lambda m: m.loss - m.comparator_loss,
    )  # fmt: skip
    res = sweep.run_sweep([exp], num_rounds=6, seeds=[0, 1], fields=("loss",))
    got = res.experiments[0].metrics
    assert got["regret"].shape == (2, 2, 6)
    env_keys, run_keys = sweep.seed_keys([0, 1])
    one = make_rollout(step, 6)
    for g, hp in enumerate(hps):
        for n in range(2):
            m = one(learner.init(hp), env.init(env_keys[n]), run_keys[n])
            want = np.asarray(m.loss - m.comparator_loss)
            np.testing.assert_allclose(got["regret"][g, n], want, rtol=1e-10, atol=1e-12)
    rows = sweep.table(res)
    assert [r["scale"] for r in rows] == scales and "bonus_ratio" not in rows[0]
