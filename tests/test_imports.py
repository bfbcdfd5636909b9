"""Import smoke test: every public name of every subpackage imports and is what __all__ says."""

import importlib

import pytest

PACKAGES = ["bandits_jax.mlogb", "bandits_jax.sim", "bandits_jax.envs", "bandits_jax.bco"]


@pytest.mark.parametrize("name", PACKAGES)
def test_public_names_import(name):
    mod = importlib.import_module(name)
    assert mod.__all__, name
    for attr in mod.__all__:
        assert getattr(mod, attr) is not None, f"{name}.{attr}"


def test_contract_names():
    from bandits_jax import mlogb

    for attr in ("eofd", "oful", "hyperparams", "section4", "interact"):
        assert callable(getattr(mlogb, attr))


def test_one_learner_shape_in_both_families():
    """``interact`` is a function in both families' packages, and every learner carries its one
    hyperparameter builder, ``learner.hyperparams``."""
    import inspect

    from bandits_jax import bco, mlogb

    assert inspect.isfunction(mlogb.interact) and inspect.isfunction(bco.interact)
    from bandits_jax.bco import interact

    assert interact is bco.interact
    learners = [
        mlogb.eofd(num_outcomes=2, dim=3, sketch_size=2),
        mlogb.oful(num_outcomes=2, dim=3),
        mlogb.linucb(num_outcomes=1, dim=3),
        bco.two_point_learner(dim=3),
        bco.box_ftrl(dim=3),
        bco.dynamic_ensemble(dim=3),
    ]
    for learner in learners:
        assert callable(learner.hyperparams)
    assert learners[0].hyperparams is mlogb.hyperparams
    assert learners[2].hyperparams is mlogb.linucb_hyperparams
