"""Behaviour the theory predicts on the Section 4 synthetic stream (fixed seeds, float64)."""

import jax
import numpy as np

from bandits_jax import envs, mlogb
from bandits_jax.sim import make_rollout


def test_regret_sublinear_and_sketch_close_to_oful():
    K, d, T, trials = 1, 20, 1500, 4
    m = (K * d) // 10  # the paper's m = floor(Kd/10)
    env = envs.synthetic_mlogb(num_outcomes=K, dim=d, S=4.0)
    # lam / eta large enough for the sketched ONS step (Theorem 1 asks lam >= 24 eta K d alpha);
    # with lam = eta = 1 and m = 2 the step stays ~eta/lam in untracked directions and stalls.
    hp = mlogb.hyperparams(lam=5.0, eta=1.0, S=4.0, beta=0.5)
    keys = jax.random.split(jax.random.PRNGKey(0), trials)
    env_states = jax.vmap(env.init)(keys)
    out = {}
    for name, learner in (
        ("eofd", mlogb.eofd(num_outcomes=K, dim=d, sketch_size=m)),
        ("oful", mlogb.oful(num_outcomes=K, dim=d)),
    ):
        run = make_rollout(mlogb.interact(learner, env), T, trials=True)
        out[name] = np.asarray(run(learner.init(hp), env_states, keys).regret).mean(0)
    for name, reg in out.items():
        cum = np.cumsum(reg)
        # Average regret falls with T: last third well below the first third.
        first, last = reg[: T // 3].mean(), reg[-T // 3 :].mean()
        assert last < 0.6 * first, (name, first, last)
        assert cum[-1] / T < cum[T // 3] / (T // 3), name
    # EOFD with m = floor(Kd/10) stays within a modest factor of OFUL.
    ratio = out["eofd"].sum() / out["oful"].sum()
    assert ratio < 2.0, ratio
