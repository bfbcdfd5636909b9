"""``make_rollout`` checks its arguments' leading axes against its flags before compiling."""

import jax
import numpy as np
import pytest

from bandits_jax import envs, mlogb
from bandits_jax.sim import make_rollout

K, D, T = 1, 3, 4
ENV = envs.synthetic_mlogb(num_outcomes=K, dim=D, S=1.0)
LEARNER = mlogb.oful(num_outcomes=K, dim=D)
STEP = mlogb.interact(LEARNER, ENV)
KEYS = jax.random.split(jax.random.key(0), 3)
ONE = LEARNER.init(mlogb.hyperparams(lam=1.0, eta=1.0, S=1.0))
GRID = jax.vmap(LEARNER.init)(mlogb.hyperparams(lam=np.array([0.5, 1.0]), eta=1.0, S=1.0))
ENVS = jax.vmap(ENV.init)(KEYS)


@pytest.mark.parametrize(
    "flags, args, message",
    [
        ({"trials": True}, (GRID, ENVS, KEYS), r"learner_state has leading axes \(2,\).*grid=True"),
        ({}, (ONE, ENVS, KEYS), r"key has leading axes \(3,\).*trials=True"),
        ({"grid": True}, (ONE, ENVS, KEYS), r"learner_state must have one leading axis.*vmap"),
        ({"trials": True}, (ONE, ENVS, KEYS[0]), r"key must have one leading axis.*split"),
        ({"trials": True}, (ONE, ENV.init(KEYS[0]), KEYS), r"env_state must have a leading axis"),
        ({"trials": True}, (ONE, ENVS, KEYS[:2]), r"env_state must have a leading axis of 2"),
    ],
)
def test_a_missing_or_extra_flag_is_named(flags, args, message):
    run = make_rollout(STEP, T, **flags)
    with pytest.raises(ValueError, match=r"make_rollout\(trials=.*" + message):
        run(*args)


def test_raw_and_typed_keys_are_both_read():
    run = make_rollout(STEP, T, trials=True, grid=True)
    typed = run(GRID, ENVS, KEYS)
    raw = run(GRID, ENVS, jax.random.key_data(KEYS))
    np.testing.assert_array_equal(typed.regret, raw.regret)
    assert typed.regret.shape == (2, 3, T)


def test_lower_is_the_jitted_program():
    """``run.lower`` (benchmarks count kernels with it) lowers what ``run`` computes."""
    run = make_rollout(STEP, T, trials=True)
    compiled = run.lower(ONE, ENVS, KEYS).compile()
    np.testing.assert_array_equal(compiled(ONE, ENVS, KEYS).regret, run(ONE, ENVS, KEYS).regret)
