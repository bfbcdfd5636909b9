"""``reproduce`` seeds a learner's own randomness by the trial: independent draws per trial."""

import jax
import numpy as np

from bandits_jax import mlogb
from bandits_jax.cli import reproduce
from bandits_jax.mlogb.lin_ts import lin_ts_hyperparams
from bandits_jax.mlogb.linucb import linucb_hyperparams
from bandits_jax.sim import checkpoint


def test_a_learner_with_a_seed_gets_the_trials_index_and_one_without_keeps_its_state():
    ts = mlogb.lin_ts(num_outcomes=1, dim=3)
    hp = lin_ts_hyperparams(lam=1.0, v=0.5)
    idx = np.array([4, 5, 6])
    states = checkpoint.to_device(reproduce._trial_states(ts, hp, ts.init(hp), idx))
    for j, i in enumerate(idx):  # each trial's state is init at seed = its index
        alone = ts.init(hp._replace(seed=np.uint32(i)))
        for a, b in zip(jax.tree.leaves(states), jax.tree.leaves(alone), strict=True):
            np.testing.assert_array_equal(np.asarray(a)[j], np.asarray(b))
    assert len({tuple(np.asarray(k).ravel()) for k in states.key}) == 3  # three distinct keys
    lin = mlogb.linucb(num_outcomes=1, dim=3)
    lhp = linucb_hyperparams(lam=1.0, alpha=0.5)
    plain = checkpoint.to_device(reproduce._trial_states(lin, lhp, lin.init(lhp), idx))
    for a, b in zip(jax.tree.leaves(plain), jax.tree.leaves(lin.init(lhp)), strict=True):
        assert np.asarray(a).shape[0] == 3 and all(np.array_equal(x, b) for x in np.asarray(a))
